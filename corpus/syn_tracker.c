/* xdp2tc corpus: syn_tracker
 * What: Records each TCP SYN's 4-tuple in a hash map and drops pure ACKs (ACK without SYN/RST/FIN) of flows never seen with a SYN.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: no drop can be offloaded (it depends on state the program writes); non-TCP and SYN packets always pass.
 */
#include "xdp2tc_corpus.h"

struct flow_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, __u64); /* time the SYN was seen */
} syn_seen SEC(".maps"); // expect-map: syn_seen data-plane

SEC("xdp")
int xdp_syn_tracker(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);
	struct flow_key key = {};

	if ((void *)(tcph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_TCP) // expect: stateless
		return XDP_PASS;

	key.saddr = iph->saddr;
	key.daddr = iph->daddr;
	key.sport = tcph->source;
	key.dport = tcph->dest;

	if (tcph->syn && !tcph->ack) { // expect: stateless
		__u64 now = bpf_ktime_get_ns();

		bpf_map_update_elem(&syn_seen, &key, &now, BPF_ANY);
		return XDP_PASS;
	}
	if (tcph->ack && !tcph->syn && !tcph->rst && !tcph->fin) { // expect: stateless
		if (!bpf_map_lookup_elem(&syn_seen, &key)) // expect: data-plane-state
			return XDP_DROP;
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
