/* xdp2tc corpus: thesis_nested_maps
 * What: Two nested map lookups: drop when the source address is in blacklist_src AND the destination address is in blacklist_dst.
 * Seed: 000 §6.7
 * Verdicts: DROP PASS
 * Offload: chained, not the cross product: per src S in blacklist_src, protocol ip src_ip S goto chain C; in chain C per dst D in blacklist_dst, dst_ip D drop (3 + 3 entries -> 6 filters for the seed's 9 rules); everything else pass.
 */
#include "xdp2tc_corpus.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* IPv4 address, network byte order */
	__type(value, __u8);
} blacklist_src SEC(".maps"); // expect-map: blacklist_src control-plane

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* IPv4 address, network byte order */
	__type(value, __u8);
} blacklist_dst SEC(".maps"); // expect-map: blacklist_dst control-plane

SEC("xdp")
int xdp_nested_maps(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	__u32 saddr, daddr;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	saddr = iph->saddr;
	daddr = iph->daddr;
	if (bpf_map_lookup_elem(&blacklist_src, &saddr)) { // expect: control-plane-map
		if (bpf_map_lookup_elem(&blacklist_dst, &daddr)) // expect: control-plane-map
			return XDP_DROP;
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
