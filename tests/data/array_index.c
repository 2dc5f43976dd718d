/* xdp2tc test input (written for the project): an ARRAY lookup whose index is a packet
 * byte (the IPv4 TOS), so that packets with a TOS past the last slot take the NULL branch.
 * tests/test_frame_replay.py: no entry is named for an index past the array's end. */
#include "xdp2tc_corpus.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} verdicts SEC(".maps");

SEC("xdp")
int xdp_array_index(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	__u32 index, *v;

	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	index = iph->tos;
	v = bpf_map_lookup_elem(&verdicts, &index);
	if (!v)
		return XDP_ABORTED;
	if (*v == 1)
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
