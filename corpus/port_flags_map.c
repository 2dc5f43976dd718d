/* xdp2tc corpus: port_flags_map
 * What: xdp-filter-style port filter: a hash keyed by port whose value bitmask says whether the port is matched as source and/or destination, for TCP and/or UDP.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: per entry (port P, mask M): for each L4 in {tcp if M&TCP, udp if M&UDP}: dst_port P -> drop if M&DST, src_port P -> drop if M&SRC; everything else pass.
 */
#include "xdp2tc_corpus.h"

#define PF_SRC 0x1
#define PF_DST 0x2
#define PF_TCP 0x4
#define PF_UDP 0x8

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);   /* port, host byte order */
	__type(value, __u32); /* PF_* bitmask */
} filter_ports SEC(".maps"); // expect-map: filter_ports control-plane

SEC("xdp")
int xdp_port_flags(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	__u16 sport, dport;
	__u32 l4flag;
	__u32 *mask;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	if (iph->protocol == IPPROTO_TCP) { // expect: stateless
		struct tcphdr *tcph = (void *)(iph + 1);

		if ((void *)(tcph + 1) > data_end) // expect: stateless
			return XDP_PASS;
		sport = bpf_ntohs(tcph->source);
		dport = bpf_ntohs(tcph->dest);
		l4flag = PF_TCP;
	} else if (iph->protocol == IPPROTO_UDP) { // expect: stateless
		struct udphdr *udph = (void *)(iph + 1);

		if ((void *)(udph + 1) > data_end) // expect: stateless
			return XDP_PASS;
		sport = bpf_ntohs(udph->source);
		dport = bpf_ntohs(udph->dest);
		l4flag = PF_UDP;
	} else {
		return XDP_PASS;
	}

	mask = bpf_map_lookup_elem(&filter_ports, &dport);
	if (mask && (*mask & PF_DST) && (*mask & l4flag)) // expect: control-plane-map
		return XDP_DROP;
	mask = bpf_map_lookup_elem(&filter_ports, &sport);
	if (mask && (*mask & PF_SRC) && (*mask & l4flag)) // expect: control-plane-map
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
