/* xdp2tc corpus: tailcall_dispatch
 * What: Dispatcher that tail-calls one of three per-protocol programs (TCP, UDP, ICMP) through a PROG_ARRAY initialised statically in the object; each target drops one service.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: following the constant-index tail calls: ip_proto tcp dst_port 23 -> drop; ip_proto udp dst_port 19 -> drop; ip_proto icmp type 8 -> drop; everything else pass.
 */
#include "xdp2tc_corpus.h"

enum { SLOT_TCP = 0, SLOT_UDP = 1, SLOT_ICMP = 2 };

int xdp_handle_tcp(struct xdp_md *ctx);
int xdp_handle_udp(struct xdp_md *ctx);
int xdp_handle_icmp(struct xdp_md *ctx);

/* libbpf fills the slots from .values at load time (relocations in .rel.maps) */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 3);
	__uint(key_size, sizeof(__u32));
	__array(values, int(struct xdp_md *));
} jmp_table SEC(".maps") = { // expect-map: jmp_table control-plane
	.values = {
		[SLOT_TCP] = (void *)&xdp_handle_tcp,
		[SLOT_UDP] = (void *)&xdp_handle_udp,
		[SLOT_ICMP] = (void *)&xdp_handle_icmp,
	},
};

SEC("xdp")
int xdp_dispatch(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	if (iph->protocol == IPPROTO_TCP) // expect: stateless
		bpf_tail_call(ctx, &jmp_table, SLOT_TCP);
	else if (iph->protocol == IPPROTO_UDP) // expect: stateless
		bpf_tail_call(ctx, &jmp_table, SLOT_UDP);
	else if (iph->protocol == IPPROTO_ICMP) // expect: stateless
		bpf_tail_call(ctx, &jmp_table, SLOT_ICMP);
	/* reached for other protocols, or if a slot is empty */
	return XDP_PASS;
}

SEC("xdp")
int xdp_handle_tcp(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct iphdr *iph = data + sizeof(struct ethhdr);
	struct tcphdr *tcph = (void *)(iph + 1);

	if ((void *)(tcph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (tcph->dest == bpf_htons(23)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp")
int xdp_handle_udp(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct iphdr *iph = data + sizeof(struct ethhdr);
	struct udphdr *udph = (void *)(iph + 1);

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (udph->dest == bpf_htons(19)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp")
int xdp_handle_icmp(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct iphdr *iph = data + sizeof(struct ethhdr);
	struct icmphdr *icmph = (void *)(iph + 1);

	if ((void *)(icmph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (icmph->type == ICMP_ECHO) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
