/* xdp2tc corpus: allow_block
 * What: An allow list before a block list: IPv4 sources in allowlist always pass; sources in blocklist (a /32 or a wider LPM prefix) are dropped.
 * Seed: none (issue 12: an allow list before a block list)
 * Verdicts: DROP PASS
 * Offload: per allowlist entry A: protocol ip src_ip A pass, before per blocklist entry P/L: protocol ip src_ip P/L drop (an allowed address inside a blocked prefix must still pass); everything else pass.
 */
#include "xdp2tc_corpus.h"

struct lpm_v4_key {
	__u32 prefixlen;
	__u32 addr; /* network byte order */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* IPv4 source address, network byte order */
	__type(value, __u8);
} allowlist SEC(".maps"); // expect-map: allowlist control-plane

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_v4_key);
	__type(value, __u8);
} blocklist SEC(".maps"); // expect-map: blocklist control-plane

SEC("xdp")
int xdp_allow_block(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct lpm_v4_key key;
	__u32 saddr;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	saddr = iph->saddr;
	if (bpf_map_lookup_elem(&allowlist, &saddr)) // expect: control-plane-map
		return XDP_PASS;
	key.prefixlen = 32;
	key.addr = saddr;
	if (bpf_map_lookup_elem(&blocklist, &key)) // expect: control-plane-map
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
