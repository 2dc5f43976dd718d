/* Test program for rules/templates.py (written for this project): xdp-filter's deny mode in
 * small. A source address (IPv4 or IPv6) listed with the source flag (1) passes
 * (VERDICT_HIT); every other IPv4 and IPv6 packet drops (VERDICT_MISS); other ethertypes
 * pass. The IPv6 key is the whole 16-byte address copied from the header, as xdp-filter
 * copies it. With ALLOW_MODE (allow_addrs.c) hits drop and misses pass. */
#include "xdp2tc_corpus.h"

#ifdef ALLOW_MODE
#define VERDICT_HIT XDP_DROP
#define VERDICT_MISS XDP_PASS
#define FUNCNAME xdp_allow_addrs
#else
#define VERDICT_HIT XDP_PASS
#define VERDICT_MISS XDP_DROP
#define FUNCNAME xdp_deny_addrs
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} filter_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct in6_addr);
	__type(value, __u64);
} filter_v6 SEC(".maps");

SEC("xdp")
int FUNCNAME(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	__u64 *v;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)(eth + 1);
		__u32 a;

		if ((void *)(iph + 1) > data_end || iph->ihl < 5)
			return XDP_ABORTED;
		a = iph->saddr;
		v = bpf_map_lookup_elem(&filter_v4, &a);
		if (v && (*v & 1))
			return VERDICT_HIT;
		return VERDICT_MISS;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		struct in6_addr a;

		if ((void *)(ip6 + 1) > data_end)
			return XDP_ABORTED;
		a = ip6->saddr;
		v = bpf_map_lookup_elem(&filter_v6, &a);
		if (v && (*v & 1))
			return VERDICT_HIT;
		return VERDICT_MISS;
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
