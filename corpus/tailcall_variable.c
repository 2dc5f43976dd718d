/* xdp2tc corpus: tailcall_variable
 * What: Tail call whose index is read from the packet (the IPv4 DSCP value, 0..63) into a PROG_ARRAY that only the control plane fills.
 * Seed: none
 * Verdicts: PASS
 * Offload: none beyond pass: the verdict of a DSCP class is whatever program the control plane installs in that slot (unknown to a static analysis); empty slots and non-IPv4 fall through to pass.
 */
#include "xdp2tc_corpus.h"

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 64);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} dscp_progs SEC(".maps"); // expect-map: dscp_progs control-plane

SEC("xdp")
int xdp_tailcall_variable(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	bpf_tail_call(ctx, &dscp_progs, iph->tos >> 2);
	return XDP_PASS;
}

XDP2TC_LICENSE;
