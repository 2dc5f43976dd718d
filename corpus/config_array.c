/* xdp2tc corpus: config_array
 * What: A read-only one-slot ARRAY holds the configuration (an enable switch and a blocked TCP destination port); matching TCP packets are dropped.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: while config[0].enabled != 0: protocol ip ip_proto tcp dst_port <config[0].blocked_port> -> drop; everything else pass (rules change when the control plane rewrites slot 0).
 */
#include "xdp2tc_corpus.h"

struct filter_config {
	__u16 blocked_port; /* host byte order */
	__u8 enabled;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct filter_config);
} config SEC(".maps"); // expect-map: config control-plane

SEC("xdp")
int xdp_config_array(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);
	struct filter_config *cfg;
	__u32 zero = 0;

	if ((void *)(tcph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_TCP) // expect: stateless
		return XDP_PASS;

	cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg) // expect: constant (in-range constant key into an ARRAY)
		return XDP_PASS;
	if (!cfg->enabled) // expect: control-plane-map
		return XDP_PASS;
	if (tcph->dest == bpf_htons(cfg->blocked_port)) // expect: control-plane-map
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
