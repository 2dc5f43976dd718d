/* xdp2tc large program: tailcall_stages (our own, not public; issue 14 "a 20k-instruction
 * program finishes or reports partially within 60 s")
 * What: an entry program and 8 stages chained by constant-index tail calls through one
 * PROG_ARRAY (filled from .values by the loader); each stage re-reads the UDP ports, mixes
 * them through a long straight-line hash (~2,500 instructions) and, for its own destination
 * port 7000 + k, drops when the hash's top bit is set and passes otherwise; every other port
 * goes on to the next stage; the last stage passes. ~21,000 instructions in all.
 * Verdicts: DROP PASS ABORTED (ABORTED only when a tail call finds its slot empty)
 * Built by tests/public/build.py into build/public/ (never into corpus/build/: the corpus-wide
 * tests would run it on every toolchain).
 */
#include "xdp2tc_corpus.h"

#define NSTAGES 8

/* one mixing step (the same as corpus/isa_gotol.c) */
#define STEP       acc = (acc ^ (acc >> 7)) * 0x9E3779B1u + 0x7F4A7C15u;
#define R2(x)      x x
#define R4(x)      x x x x
#define R10(x)     x x x x x x x x x x
#define STEPS      R4(R10(R10(STEP))) R2(R10(STEP)) /* 420 steps */

int xdp_stage_1(struct xdp_md *ctx);
int xdp_stage_2(struct xdp_md *ctx);
int xdp_stage_3(struct xdp_md *ctx);
int xdp_stage_4(struct xdp_md *ctx);
int xdp_stage_5(struct xdp_md *ctx);
int xdp_stage_6(struct xdp_md *ctx);
int xdp_stage_7(struct xdp_md *ctx);
int xdp_stage_8(struct xdp_md *ctx);

/* slot k holds stage k (slot 0 stays empty); libbpf fills the slots from .values */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, NSTAGES + 1);
	__uint(key_size, sizeof(__u32));
	__array(values, int(struct xdp_md *));
} stages SEC(".maps") = {
	.values = {
		[1] = (void *)&xdp_stage_1, [2] = (void *)&xdp_stage_2,
		[3] = (void *)&xdp_stage_3, [4] = (void *)&xdp_stage_4,
		[5] = (void *)&xdp_stage_5, [6] = (void *)&xdp_stage_6,
		[7] = (void *)&xdp_stage_7, [8] = (void *)&xdp_stage_8,
	},
};

/* The UDP header behind an untagged IPv4 header without options, or NULL. */
static __always_inline struct udphdr *udp_of(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);

	if ((void *)(udph + 1) > data_end)
		return 0;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP)
		return 0;
	return udph;
}

SEC("xdp")
int xdp_stages_entry(struct xdp_md *ctx)
{
	if (!udp_of(ctx))
		return XDP_PASS;
	bpf_tail_call(ctx, &stages, 1);
	return XDP_ABORTED;
}

/* Stage k: the hash of (k, ports) decides for destination port 7000 + k. */
#define STAGE(k, last)                                                         \
	SEC("xdp")                                                             \
	int xdp_stage_##k(struct xdp_md *ctx)                                  \
	{                                                                      \
		struct udphdr *udph = udp_of(ctx);                             \
		__u32 acc;                                                     \
                                                                               \
		if (!udph)                                                     \
			return XDP_PASS;                                       \
		acc = ((__u32)udph->source << 16) ^ udph->dest ^ (k);          \
		STEPS                                                    \
		if (udph->dest == bpf_htons(7000 + (k)))                       \
			return (acc & 0x80000000u) ? XDP_DROP : XDP_PASS;      \
		if (last)                                                      \
			return XDP_PASS;                                       \
		bpf_tail_call(ctx, &stages, (k) + 1);                          \
		return XDP_ABORTED;                                            \
	}

STAGE(1, 0)
STAGE(2, 0)
STAGE(3, 0)
STAGE(4, 0)
STAGE(5, 0)
STAGE(6, 0)
STAGE(7, 0)
STAGE(8, 1)

XDP2TC_LICENSE;
