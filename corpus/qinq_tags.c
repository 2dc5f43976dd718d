/* xdp2tc corpus: qinq_tags
 * What: 802.1ad QinQ and 802.1Q priorities: drops service VLAN 100 carrying customer VLAN 200 at priority 5, and IPv6 in an 802.1Q tag of priority 1.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol 802.1ad vlan_id 100 vlan_ethtype 802.1Q cvlan_id 200 cvlan_prio 5 -> drop; protocol 802.1Q vlan_prio 1 vlan_ethtype ipv6 -> drop; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_qinq_tags(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct vlan_hdr *outer = (void *)(eth + 1);
	struct vlan_hdr *inner = outer + 1;
	__u16 otci, itci;

	if ((void *)(inner + 1) > data_end) // expect: stateless
		return XDP_PASS;
	otci = bpf_ntohs(outer->h_vlan_TCI);
	if (eth->h_proto == bpf_htons(ETH_P_8021AD)) { // expect: stateless
		if (outer->h_vlan_encapsulated_proto != bpf_htons(ETH_P_8021Q)) // expect: stateless
			return XDP_PASS;
		itci = bpf_ntohs(inner->h_vlan_TCI);
		if ((otci & 0x0fff) == 100 && (itci & 0x0fff) == 200 && (itci >> 13) == 5) // expect: stateless
			return XDP_DROP;
		return XDP_PASS;
	}
	if (eth->h_proto == bpf_htons(ETH_P_8021Q) && (otci >> 13) == 1 && outer->h_vlan_encapsulated_proto == bpf_htons(ETH_P_IPV6)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
