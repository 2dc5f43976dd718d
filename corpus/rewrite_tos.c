/* xdp2tc corpus: rewrite_tos
 * What: Re-marks IPv4 packets from 10.0.0.0/8 to TOS 0x20 (DSCP CS1) and fixes the header checksum incrementally (RFC 1624); never drops.
 * Seed: none
 * Verdicts: PASS
 * Offload: protocol ip src_ip 10.0.0.0/8 -> pedit ip tos set 0x20 + csum ip4h, then pass; everything else pass unchanged.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define NEW_TOS 0x20

SEC("xdp")
int xdp_rewrite_tos(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	__u16 *word0 = (__u16 *)iph; /* version/ihl + tos: the 16-bit word holding tos */
	__u16 old_word, new_word;
	__u32 csum;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	if ((iph->saddr & bpf_htonl(0xff000000)) != bpf_htonl(0x0a000000)) // expect: stateless
		return XDP_PASS;
	if (iph->tos == NEW_TOS) // expect: stateless
		return XDP_PASS;

	old_word = *word0;
	iph->tos = NEW_TOS;
	new_word = *word0;

	/* HC' = ~(~HC + ~m + m'), one's complement sum, byte-order agnostic */
	csum = (__u16)~iph->check;
	csum += (__u16)~old_word;
	csum += new_word;
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (csum & 0xffff) + (csum >> 16);
	iph->check = (__u16)~csum;
	return XDP_PASS;
}

XDP2TC_LICENSE;
