/* xdp2tc corpus: ttl_tos
 * What: Drops IPv4 packets with TTL 0 or 1 and packets marked DSCP CS1 (scavenger class); passes everything else.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol ip ip_ttl 0 and ip_ttl 1 (or ttl 0/0xfe) -> drop; ip_tos 0x20/0xfc -> drop; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define DSCP_CS1 8

SEC("xdp")
int xdp_ttl_tos(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	if (iph->ttl <= 1) // expect: stateless
		return XDP_DROP;
	/* DSCP is the upper six bits of TOS; the low two are ECN */
	if ((iph->tos >> 2) == DSCP_CS1) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
