/* xdp2tc corpus: lpm_src_block
 * What: Drops IPv4 packets whose source address falls in any prefix stored in an LPM_TRIE.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: one rule per trie entry: protocol ip src_ip <prefix>/<len> -> drop (prefix masks map directly onto flower); everything else pass.
 */
#include "xdp2tc_corpus.h"

struct lpm_v4_key {
	__u32 prefixlen; /* bits of addr that are significant */
	__u32 addr;      /* network byte order */
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* mandatory for LPM tries */
	__type(key, struct lpm_v4_key);
	__type(value, __u8);
} blocked_prefixes SEC(".maps"); // expect-map: blocked_prefixes control-plane

SEC("xdp")
int xdp_lpm_src_block(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct lpm_v4_key key;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	key.prefixlen = 32; /* full address: the trie returns the longest match */
	key.addr = iph->saddr;
	if (bpf_map_lookup_elem(&blocked_prefixes, &key)) // expect: control-plane-map
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
