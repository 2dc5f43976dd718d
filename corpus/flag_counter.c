/* xdp2tc corpus: flag_counter
 * What: xdp-filter's counting trick: a hash keyed by UDP dst port whose u64 value holds flags in its low byte and a hit counter from bit 8 up, incremented on every hit; a second map counts into the same bits it decides on (its own writes change its decisions).
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: per entry of port_flags with flag 1: udp dst_port P -> drop (the counter never touches the flags); nothing from hit_budget (its counter is its decision).
 */
#include "xdp2tc_corpus.h"

#define FLAG_DROP 0x1
#define COUNTER_SHIFT 8

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);   /* UDP dst port, network byte order */
	__type(value, __u64); /* flags (bits 0-7) | hits << COUNTER_SHIFT */
} port_flags SEC(".maps"); // expect-map: port_flags control-plane

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);   /* UDP src port, network byte order */
	__type(value, __u64); /* packets left: drop while odd */
} hit_budget SEC(".maps"); // expect-map: hit_budget data-plane

SEC("xdp")
int xdp_flag_counter(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);
	__u16 dport, sport;
	__u64 *value;

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;
	dport = udph->dest;
	sport = udph->source;

	value = bpf_map_lookup_elem(&port_flags, &dport);
	if (value && (*value & FLAG_DROP)) { // expect: control-plane-map (the writes only add 1 << 8)
		*value += 1ULL << COUNTER_SHIFT;
		return XDP_DROP;
	}
	value = bpf_map_lookup_elem(&hit_budget, &sport);
	if (value && (*value & 1)) { // expect: data-plane-state (the write flips bit 0)
		*value += 1;
		return XDP_DROP;
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
