/* xdp2tc corpus: vlan_tags
 * What: Skips zero, one or two VLAN tags (802.1Q or 802.1AD) in an unrolled loop, drops the outer VLAN ID 666 and IPv4 traffic to 10.0.0.1 behind any number of tags.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: vlan_id 666 (outer tag, 802.1Q or 802.1AD) -> drop; dst_ip 10.0.0.1 with 0 tags (protocol ip), 1 tag (vlan_ethtype ip) or 2 tags (cvlan_ethtype ip) -> drop; packets with 3+ tags, and everything else, pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define BLOCKED_VID 666
#define MAX_TAGS    2

SEC("xdp")
int xdp_vlan_tags(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	void *cur = eth + 1;
	__u16 proto;
	__u16 outer_vid = 0xffff; /* no tag: never equals a 12-bit VID */
	struct iphdr *iph;

	if (cur > data_end) // expect: stateless
		return XDP_PASS;
	proto = eth->h_proto;

	XDP2TC_UNROLL
	for (int i = 0; i < MAX_TAGS; i++) { // expect: constant
		struct vlan_hdr *vh = cur;

		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD)) // expect: stateless
			break;
		if ((void *)(vh + 1) > data_end) // expect: stateless
			return XDP_PASS;
		if (i == 0) // expect: constant (loop is unrolled)
			outer_vid = bpf_ntohs(vh->h_vlan_TCI) & 0x0fff;
		proto = vh->h_vlan_encapsulated_proto;
		cur = vh + 1;
	}

	if (outer_vid == BLOCKED_VID) // expect: stateless
		return XDP_DROP;
	if (proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	iph = cur;
	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (iph->daddr == bpf_htonl(0x0A000001)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
