/* xdp2tc corpus: hash_counter
 * What: per-source packet counter in a HASH: the first packet of a source creates its entry, later ones increment it; the verdict (drop UDP) never looks at the counter.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: ip_proto udp -> drop (the counter branch only decides how to count); everything else pass.
 */
#include "xdp2tc_corpus.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);   /* IPv4 source address */
	__type(value, __u64); /* packets */
} src_packets SEC(".maps"); // expect-map: src_packets stats-only

SEC("xdp")
int xdp_hash_counter(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	__u32 saddr;
	__u64 one = 1;
	__u64 *count;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	saddr = iph->saddr;
	count = bpf_map_lookup_elem(&src_packets, &saddr);
	if (!count) // expect: stats-only (found or not, the packet's fate is the same)
		bpf_map_update_elem(&src_packets, &saddr, &one, BPF_NOEXIST);
	else
		__sync_fetch_and_add(count, 1);
	if (iph->protocol == IPPROTO_UDP) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
