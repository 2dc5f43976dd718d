/* xdp2tc corpus: rate_limiter
 * What: Per-source fixed-window rate limiter: counts IPv4 packets per source in a hash map over 1-second windows (bpf_ktime_get_ns) and drops above 1000 packets per window.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: none: the verdict depends on time and on state the program writes; the only sound rule is "pass everything to XDP" (non-IPv4 always passes).
 */
#include "xdp2tc_corpus.h"

#define WINDOW_NS  1000000000ULL
#define MAX_PKTS   1000

struct rl_state {
	__u64 window_start;
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32); /* IPv4 source */
	__type(value, struct rl_state);
} rl_table SEC(".maps"); // expect-map: rl_table data-plane

SEC("xdp")
int xdp_rate_limiter(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct rl_state *st;
	__u32 saddr;
	__u64 now;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	saddr = iph->saddr;
	now = bpf_ktime_get_ns();
	st = bpf_map_lookup_elem(&rl_table, &saddr);
	if (!st) { // expect: data-plane-state
		struct rl_state init = { .window_start = now, .count = 1 };

		bpf_map_update_elem(&rl_table, &saddr, &init, BPF_ANY);
		return XDP_PASS;
	}
	if (now - st->window_start > WINDOW_NS) { // expect: helper (also reads data-plane state)
		st->window_start = now;
		st->count = 0;
	}
	st->count++;
	if (st->count > MAX_PKTS) // expect: data-plane-state
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
