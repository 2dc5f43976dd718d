/* bench/cost.py variant of corpus/tailcall_dispatch.c with the three handlers merged into
 * the dispatcher (inlined functions instead of tail calls): the same verdicts per packet. */
#include "xdp2tc_corpus.h"

#define HANDLER(name, hdr, cond)                                        \
static __always_inline int name(struct xdp_md *ctx)                    \
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

HANDLER(handle_tcp, tcphdr, h->dest == bpf_htons(23))
HANDLER(handle_udp, udphdr, h->dest == bpf_htons(19))
HANDLER(handle_icmp, icmphdr, h->type == ICMP_ECHO)

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
		return handle_tcp(ctx);
	if (iph->protocol == IPPROTO_UDP)
		return handle_udp(ctx);
	if (iph->protocol == IPPROTO_ICMP)
		return handle_icmp(ctx);
	return XDP_PASS;
}

XDP2TC_LICENSE;
