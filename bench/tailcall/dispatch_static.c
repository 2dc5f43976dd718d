/* bench/cost.py variant of corpus/tailcall_dispatch.c: one tail-call site per protocol with
 * the index an immediate (libbpf's bpf_tail_call_static), so the verifier patches each
 * into a direct jump. Handlers and packets as in the corpus program. */
#include "xdp2tc_corpus.h"

enum { SLOT_TCP = 0, SLOT_UDP = 1, SLOT_ICMP = 2 };

int xdp_handle_tcp(struct xdp_md *ctx);
int xdp_handle_udp(struct xdp_md *ctx);
int xdp_handle_icmp(struct xdp_md *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 3);
	__uint(key_size, sizeof(__u32));
	__array(values, int(struct xdp_md *));
} jmp_table SEC(".maps") = {
	.values = {
		[SLOT_TCP] = (void *)&xdp_handle_tcp,
		[SLOT_UDP] = (void *)&xdp_handle_udp,
		[SLOT_ICMP] = (void *)&xdp_handle_icmp,
	},
};

/* As in <bpf/bpf_helpers.h>: the asm keeps r2/r3 set at this very call instruction. */
static __always_inline void tail_call_static(void *ctx, const void *map, const __u32 slot)
{
	asm volatile("r1 = %[ctx]\n\t"
		     "r2 = %[map]\n\t"
		     "r3 = %[slot]\n\t"
		     "call 12"
		     :: [ctx]"r"(ctx), [map]"r"(map), [slot]"i"(slot)
		     : "r0", "r1", "r2", "r3", "r4", "r5");
}

SEC("xdp")
int xdp_dispatch(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;

	if (iph->protocol == IPPROTO_TCP)
		tail_call_static(ctx, &jmp_table, SLOT_TCP);
	else if (iph->protocol == IPPROTO_UDP)
		tail_call_static(ctx, &jmp_table, SLOT_UDP);
	else if (iph->protocol == IPPROTO_ICMP)
		tail_call_static(ctx, &jmp_table, SLOT_ICMP);
	return XDP_PASS;
}

#define HANDLER(name, hdr, cond)                                        \
SEC("xdp")                                                              \
int name(struct xdp_md *ctx)                                            \
{                                                                       \
	void *data = XDP_DATA(ctx);                                     \
	void *data_end = XDP_DATA_END(ctx);                             \
	struct iphdr *iph = data + sizeof(struct ethhdr);               \
	struct hdr *h = (void *)(iph + 1);                              \
	if ((void *)(h + 1) > data_end)                                 \
		return XDP_PASS;                                        \
	if (cond)                                                       \
		return XDP_DROP;                                        \
	return XDP_PASS;                                                \
}

HANDLER(xdp_handle_tcp, tcphdr, h->dest == bpf_htons(23))
HANDLER(xdp_handle_udp, udphdr, h->dest == bpf_htons(19))
HANDLER(xdp_handle_icmp, icmphdr, h->type == ICMP_ECHO)

XDP2TC_LICENSE;
