/* xdp2tc corpus: thesis_drop_count
 * What: Drop-and-count: packets from 192.168.1.21 are counted in a PERCPU_ARRAY slot and dropped (the thesis listing had the NULL test inverted; this is the working version).
 * Seed: 000 §6.5.4
 * Verdicts: DROP PASS
 * Offload: protocol ip src_ip 192.168.1.21 -> drop (the counter only gathers statistics and never changes the verdict); everything else pass.
 */
#include "xdp2tc_corpus.h"

#define SRC_IP 0x1501A8C0 /* 192.168.1.21, network byte order as in the thesis */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped_stat SEC(".maps"); // expect-map: dropped_stat stats-only

SEC("xdp")
int xdp_drop_count(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) { // expect: stateless
		if (iph->saddr == SRC_IP) { // expect: stateless
			__u32 key = 0;
			__u64 *value = bpf_map_lookup_elem(&dropped_stat, &key);

			/* key 0 < max_entries: an array lookup cannot fail */
			if (value) // expect: constant (in-range constant key into an ARRAY)
				*value += 1;
			return XDP_DROP;
		}
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
