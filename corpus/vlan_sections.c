/* xdp2tc corpus: vlan_sections
 * What: Four XDP programs (xdp_prognum0..3) and one tc program (tc_prognum4), each in its own section with no SEC() convention prefix (xdp_drop_vlan_4011, xdp_vlan_change, xdp_vlan_remove_outer, xdp_vlan_remove_outer2, tc_vlan_push), as pre-libbpf-1.0 samples were written: drop VLAN 4011, rewrite VLAN 4011 to 4000, pop the outer tag (two ways), and the tc program pushes tag 4011.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: xdp_drop_vlan_4011 -> vlan_id 4011 (802.1Q or 802.1AD outer tag) drop; the rewriting programs only pass (vlan modify / pop actions, not offloaded yet); tc_vlan_push is not an XDP program (analyze and verify refuse it with a reason).
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define DROP_VID 4011
#define NEW_VID  4000
#define TC_ACT_OK 0

SEC("xdp_drop_vlan_4011")
int xdp_prognum0(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct vlan_hdr *vh = (void *)(eth + 1);

	if ((void *)(vh + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_8021Q) && eth->h_proto != bpf_htons(ETH_P_8021AD)) // expect: stateless
		return XDP_PASS;
	if ((bpf_ntohs(vh->h_vlan_TCI) & 0x0fff) == DROP_VID) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

/* VID 4011 becomes 4000 in the outer tag; priority and DEI bits are kept. */
SEC("xdp_vlan_change")
int xdp_prognum1(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct vlan_hdr *vh = (void *)(eth + 1);
	__u16 tci;

	if ((void *)(vh + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_8021Q) && eth->h_proto != bpf_htons(ETH_P_8021AD)) // expect: stateless
		return XDP_PASS;
	tci = bpf_ntohs(vh->h_vlan_TCI);
	if ((tci & 0x0fff) == DROP_VID) // expect: stateless
		vh->h_vlan_TCI = bpf_htons((tci & 0xf000) | NEW_VID);
	return XDP_PASS;
}

/* Pop the outer tag: move both MAC addresses 4 bytes up, then drop the first 4 bytes. */
SEC("xdp_vlan_remove_outer")
int xdp_prognum2(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct vlan_hdr *vh = (void *)(eth + 1);
	unsigned char macs[2 * ETH_ALEN];

	if ((void *)(vh + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_8021Q) && eth->h_proto != bpf_htons(ETH_P_8021AD)) // expect: stateless
		return XDP_PASS;
	__builtin_memcpy(macs, data, sizeof(macs));
	__builtin_memcpy(data + sizeof(struct vlan_hdr), macs, sizeof(macs));
	if (bpf_xdp_adjust_head(ctx, (int)sizeof(struct vlan_hdr))) // expect: constant (an 18+ byte frame keeps 14)
		return XDP_DROP;
	return XDP_PASS;
}

/* The same with three 32-bit moves, last word first (the regions overlap). */
SEC("xdp_vlan_remove_outer2")
int xdp_prognum3(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	__u32 *word = data;

	if ((void *)(eth + 1) + sizeof(struct vlan_hdr) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_8021Q) && eth->h_proto != bpf_htons(ETH_P_8021AD)) // expect: stateless
		return XDP_PASS;
	word[3] = word[2];
	word[2] = word[1];
	word[1] = word[0];
	if (bpf_xdp_adjust_head(ctx, (int)sizeof(struct vlan_hdr))) // expect: constant (an 18+ byte frame keeps 14)
		return XDP_DROP;
	return XDP_PASS;
}

/* A tc (cls_bpf) program: not loadable as XDP (bpf_skb_vlan_push is tc-only). */
SEC("tc_vlan_push")
int tc_prognum4(struct __sk_buff *skb)
{
	bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), DROP_VID);
	return TC_ACT_OK;
}

XDP2TC_LICENSE;
