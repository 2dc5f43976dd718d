/* xdp2tc corpus: ipv4_options
 * What: Finds the UDP header at ihl*4 (a variable offset, so IPv4 options are skipped correctly) and drops UDP to port 5353; malformed headers (ihl < 5) are dropped.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol ip ip_proto udp dst_port 5353 -> drop (flower's dissector also honours ihl); ihl < 5 has no flower match, so those drops stay in XDP; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_ipv4_options(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	if (iph->ihl < 5) // expect: stateless
		return XDP_DROP;
	if (iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;

	/* variable offset: 20..60 bytes after the Ethernet header */
	udph = (void *)iph + iph->ihl * 4;
	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (udph->dest == bpf_htons(5353)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
