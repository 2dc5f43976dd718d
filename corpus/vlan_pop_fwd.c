/* xdp2tc corpus: vlan_pop_fwd
 * What: An access port's uplink: frames tagged 802.1Q with VLAN ID 100 lose their tag (the MACs moved 4 bytes down, bpf_xdp_adjust_head by +4) and are redirected to ifindex 5; everything else passes unchanged.
 * Seed: none
 * Verdicts: REDIRECT PASS
 * Offload: protocol 802.1Q vlan_id 100 -> vlan pop, mirred egress redirect to ifindex 5; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define VID         100
#define OUT_IFINDEX 5

SEC("xdp")
int xdp_vlan_pop_fwd(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct vlan_hdr *vh = (void *)(eth + 1);
	unsigned char *b;

	if ((void *)(vh + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_8021Q)) // expect: stateless
		return XDP_PASS;
	if ((bpf_ntohs(vh->h_vlan_TCI) & 0x0fff) != VID) // expect: stateless
		return XDP_PASS;

	b = data;
	/* the MACs 4 bytes down, last byte first (written out: gcc turns a loop into a call to
	 * memmove, which BPF does not have) */
	b[15] = b[11]; b[14] = b[10]; b[13] = b[9]; b[12] = b[8];
	b[11] = b[7]; b[10] = b[6]; b[9] = b[5]; b[8] = b[4];
	b[7] = b[3]; b[6] = b[2]; b[5] = b[1]; b[4] = b[0];
	if (bpf_xdp_adjust_head(ctx, 4)) // expect: constant (the frame holds 18 bytes)
		return XDP_PASS;
	return bpf_redirect(OUT_IFINDEX, 0);
}

XDP2TC_LICENSE;
