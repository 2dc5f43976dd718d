/* xdp2tc corpus: thesis_ddos_blacklist
 * What: DDoS blacklist: drop IPv4 packets whose source address is in one hash map, or whose TCP or UDP destination port is in another.
 * Seed: 000 §6.6
 * Verdicts: DROP PASS
 * Offload: one rule per map entry: each blacklisted IP -> protocol ip src_ip X drop; each blacklisted port P -> ip_proto tcp dst_port P drop and ip_proto udp dst_port P drop; everything else pass.
 */
#include "xdp2tc_corpus.h"

/* key: IPv4 source address (network byte order); value unused */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} blacklist SEC(".maps"); // expect-map: blacklist control-plane

/* key: destination port in HOST byte order; value unused */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u16);
	__type(value, __u32);
} port_blacklist SEC(".maps"); // expect-map: port_blacklist control-plane

SEC("xdp")
int xdp_ddos_blacklist(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	__u32 saddr;
	__u16 dport;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	saddr = iph->saddr;
	if (bpf_map_lookup_elem(&blacklist, &saddr)) // expect: control-plane-map
		return XDP_DROP;

	if (iph->protocol == IPPROTO_TCP) { // expect: stateless
		struct tcphdr *tcph = (void *)(iph + 1);

		if ((void *)(tcph + 1) > data_end) // expect: stateless
			return XDP_PASS;
		dport = bpf_ntohs(tcph->dest);
	} else if (iph->protocol == IPPROTO_UDP) { // expect: stateless
		struct udphdr *udph = (void *)(iph + 1);

		if ((void *)(udph + 1) > data_end) // expect: stateless
			return XDP_PASS;
		dport = bpf_ntohs(udph->dest);
	} else {
		return XDP_PASS;
	}

	if (bpf_map_lookup_elem(&port_blacklist, &dport)) // expect: control-plane-map
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
