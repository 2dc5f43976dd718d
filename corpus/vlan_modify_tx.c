/* xdp2tc corpus: vlan_modify_tx
 * What: Re-tags 802.1Q frames in place (the TCI rewritten, no adjust_head): VLAN ID 10 becomes 20 (priority and DEI kept) and goes back out with XDP_TX; VLAN ID 11 becomes 21 with priority 6 (DEI kept) and is redirected to ifindex 5; VLAN ID 12 becomes a fixed TCI 22 (priority and DEI cleared) and passes; everything else passes unchanged.
 * Seed: none
 * Verdicts: TX REDIRECT PASS
 * Offload: protocol 802.1Q vlan_id 10 -> vlan modify id 20, mirred egress redirect to the same device; vlan_id 11 -> vlan modify id 21 priority 6, mirred egress redirect to ifindex 5; VLAN ID 12 stays in software (vlan modify keeps the DEI bit the program clears); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_vlan_modify_tx(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct vlan_hdr *vh = (void *)(eth + 1);
	__u16 tci;

	if ((void *)(vh + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_8021Q)) // expect: stateless
		return XDP_PASS;
	tci = bpf_ntohs(vh->h_vlan_TCI);
	if ((tci & 0x0fff) == 10) { // expect: stateless
		vh->h_vlan_TCI = bpf_htons((tci & 0xf000) | 20);
		return XDP_TX;
	}
	if ((tci & 0x0fff) == 11) { // expect: stateless
		vh->h_vlan_TCI = bpf_htons((6 << 13) | (tci & 0x1000) | 21);
		return bpf_redirect(5, 0);
	}
	if ((tci & 0x0fff) == 12) { // expect: stateless
		vh->h_vlan_TCI = bpf_htons(22);
		return XDP_PASS;
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
