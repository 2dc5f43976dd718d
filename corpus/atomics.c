/* xdp2tc corpus: atomics
 * What: Exercises every BPF atomic on a shared ARRAY value: fetch-add with and without a used result, fetch-or/and/xor, xchg and cmpxchg; a flow of UDP to port 5001 is dropped once its byte budget is exhausted.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: none for UDP dst_port 5001 (the drop depends on counters the program updates); everything else pass.
 */
// load-gcc: no GCC 12 has no fetch/xchg/cmpxchg atomics (GCC 13 -mv3-atomics): it emits calls to undefined __sync_*_8 libcalls
// build: -mcpu=v3
#include "xdp2tc_corpus.h"

#define BUDGET_BYTES (1ULL << 30)

struct counters {
	__u64 packets;     /* fetch_add, result unused  -> lock add */
	__u64 bytes;       /* fetch_add, result used    -> atomic_fetch_add */
	__u64 seen_protos; /* fetch_or: once unused (lock or), once used (atomic_fetch_or) */
	__u64 mask;        /* fetch_and: unused and used */
	__u64 parity;      /* fetch_xor: unused and used */
	__u64 mix;         /* plain store of the fetched values */
	__u64 last_saddr;  /* xchg */
	__u64 first_saddr; /* cmpxchg: set once */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} counters SEC(".maps"); // expect-map: counters data-plane

SEC("xdp")
int xdp_atomics(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);
	struct counters *c;
	__u32 zero = 0;
	__u64 len = data_end - data;
	__u64 old_bytes, old_or, old_and, old_xor, prev;

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;
	c = bpf_map_lookup_elem(&counters, &zero);
	if (!c) // expect: constant (in-range constant key into an ARRAY)
		return XDP_PASS;

	__sync_fetch_and_add(&c->packets, 1);
	old_bytes = __sync_fetch_and_add(&c->bytes, len);
	__sync_fetch_and_or(&c->seen_protos, 1ULL << (iph->protocol & 63));
	__sync_fetch_and_and(&c->mask, ~2ULL);
	__sync_fetch_and_xor(&c->parity, 2);
	old_or = __sync_fetch_and_or(&c->seen_protos, 1ULL << (iph->tos & 63));
	old_and = __sync_fetch_and_and(&c->mask, ~1ULL);
	old_xor = __sync_fetch_and_xor(&c->parity, 1);
	prev = __sync_lock_test_and_set(&c->last_saddr, (__u64)iph->saddr);
	__sync_val_compare_and_swap(&c->first_saddr, 0, (__u64)iph->saddr);

	/* use the fetched values so the fetch forms are emitted */
	c->mix = old_or ^ old_and ^ old_xor ^ prev;

	if (udph->dest == bpf_htons(5001) && old_bytes > BUDGET_BYTES) // expect: data-plane-state
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
