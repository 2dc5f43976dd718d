/* xdp2tc corpus: legacy_maps
 * What: Pre-BTF style object: the map is a struct record in SEC("maps") (type, key_size, value_size, max_entries, map_flags) and the program sits in the legacy section "prog"; drops IPv4 sources listed in the map.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: one rule per map entry: protocol ip src_ip <key> -> drop; everything else pass.
 */
// nobtf: yes
/* libbpf >= 1.0 (so bpftool) refuses SEC("maps") records; check_load.sh loads
 * this object with corpus/legacy_load.py instead. */
#include "xdp2tc_corpus.h"

/* The classic bpf_map_def layout, declared here rather than taken from any
 * library header. */
struct legacy_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct legacy_map_def legacy_blocklist SEC("maps") = { // expect-map: legacy_blocklist control-plane
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u32),  /* IPv4 source, network byte order */
	.value_size = sizeof(__u32),
	.max_entries = 1024,
	.map_flags = 0,
};

SEC("prog")
int xdp_legacy(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	__u32 saddr;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	saddr = iph->saddr;
	if (bpf_map_lookup_elem(&legacy_blocklist, &saddr)) // expect: control-plane-map
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
