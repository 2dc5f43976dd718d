/* Test program for rules/templates.py (written for this project): an LPM trie whose VALUE
 * decides (the longest match's action code: 1 drops, anything else passes), so an
 * exception (a longer prefix holding 0) inside a blocked prefix must be kept by flower. */
#include "xdp2tc_corpus.h"

struct lpm_v4_key {
	__u32 prefixlen;
	__u32 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_v4_key);
	__type(value, __u32);
} src_action SEC(".maps");

SEC("xdp")
int xdp_lpm_action(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct lpm_v4_key key;
	__u32 *action;

	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	key.prefixlen = 32;
	key.addr = iph->saddr;
	action = bpf_map_lookup_elem(&src_action, &key);
	if (action && *action == 1)
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
