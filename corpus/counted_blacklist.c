/* xdp2tc corpus: counted_blacklist
 * What: DDoS blacklist that counts: a per-CPU hash of source addresses whose value counts the packets each entry dropped, a hash of blocked UDP destination ports, and a per-CPU array of drop counts indexed by the reason (source or port).
 * Seed: none (xdp-tutorial's packet03 blacklist counts per entry; xdp-filter counts per verdict)
 * Verdicts: DROP PASS
 * Offload: per source entry X: protocol ip src_ip X -> drop; per port P: ip_proto udp dst_port P -> drop; the counters never decide (sync folds the filters' counters back: src_blacklist[X] and drop_reasons[1] per source drop, drop_reasons[2] per port drop); everything else pass.
 */
#include "xdp2tc_corpus.h"

#define REASON_SRC 1
#define REASON_PORT 2

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);   /* IPv4 source address, network order */
	__type(value, __u64); /* packets dropped by this entry */
} src_blacklist SEC(".maps"); // expect-map: src_blacklist control-plane

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16); /* UDP destination port, host order */
	__type(value, __u8);
} port_blacklist SEC(".maps"); // expect-map: port_blacklist control-plane

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);   /* REASON_* */
	__type(value, __u64); /* packets dropped for it */
} drop_reasons SEC(".maps"); // expect-map: drop_reasons stats-only

SEC("xdp")
int xdp_counted_blacklist(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);
	__u32 saddr, reason;
	__u16 dport;
	__u64 *hits, *dropped;

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	saddr = iph->saddr;
	hits = bpf_map_lookup_elem(&src_blacklist, &saddr);
	if (hits) { // expect: control-plane-map
		*hits += 1;
		reason = REASON_SRC;
		goto drop;
	}
	if (iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;
	dport = bpf_ntohs(udph->dest);
	if (!bpf_map_lookup_elem(&port_blacklist, &dport)) // expect: control-plane-map
		return XDP_PASS;
	reason = REASON_PORT;
drop:
	dropped = bpf_map_lookup_elem(&drop_reasons, &reason);
	if (dropped) // expect: constant (in-range constant key into an ARRAY)
		*dropped += 1;
	return XDP_DROP;
}

XDP2TC_LICENSE;
