/* xdp2tc corpus: tx_vlan_push
 * What: Tags IPv4 to 10.7.0.0/16 with an 802.1Q header (VID 100, priority 3) in front of its ethertype (bpf_xdp_adjust_head by -4, the MACs moved up) and sends it back out of the receiving interface with XDP_TX; everything else passes unchanged.
 * Seed: none
 * Verdicts: TX PASS
 * Offload: protocol ip dst_ip 10.7.0.0/16 -> vlan push id 100 priority 3 protocol 802.1Q, mirred egress redirect to the same device; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define VID 100
#define PCP 3

SEC("xdp")
int xdp_tx_vlan_push(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	unsigned char *b;
	__u16 *tag;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	if ((iph->daddr & bpf_htonl(0xffff0000)) != bpf_htonl(0x0a070000)) // expect: stateless
		return XDP_PASS;

	if (bpf_xdp_adjust_head(ctx, -4)) // expect: constant (4 bytes of headroom always exist)
		return XDP_PASS;
	data = XDP_DATA(ctx);
	data_end = XDP_DATA_END(ctx);
	if (data + 18 > data_end) // expect: constant (the packet grew by 4)
		return XDP_PASS;
	b = data;
	/* the MACs 4 bytes up, first byte first (written out: gcc turns a loop into a call to
	 * memmove, which BPF does not have) */
	b[0] = b[4]; b[1] = b[5]; b[2] = b[6]; b[3] = b[7];
	b[4] = b[8]; b[5] = b[9]; b[6] = b[10]; b[7] = b[11];
	b[8] = b[12]; b[9] = b[13]; b[10] = b[14]; b[11] = b[15];
	tag = data + 12;
	tag[0] = bpf_htons(0x8100);
	tag[1] = bpf_htons((PCP << 13) | VID);
	return XDP_TX;
}

XDP2TC_LICENSE;
