/* xdp2tc corpus: frags_section
 * What: A multi-buffer aware program in SEC("xdp.frags"): it drops frames longer than 9000 bytes in total (bpf_xdp_get_buff_len counts all fragments) and RoCEv2 (IPv4 UDP port 4791).
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol ip ip_proto udp dst_port 4791 -> drop; the frame-length drop has no flower match (keep in XDP); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define MAX_FRAME 9000

SEC("xdp.frags")
int xdp_frags(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);

	/* data..data_end is only the first buffer; the helper sees them all */
	if (bpf_xdp_get_buff_len(ctx) > MAX_FRAME) // expect: stateless (total frame length)
		return XDP_DROP;
	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP) && iph->protocol == IPPROTO_UDP && udph->dest == bpf_htons(4791)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
