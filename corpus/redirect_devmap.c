/* xdp2tc corpus: redirect_devmap
 * What: Redirects IPv4 TCP to port 80 through slot 0 of a DEVMAP; if the slot is empty bpf_redirect_map falls back to XDP_PASS (flags argument).
 * Seed: none
 * Verdicts: REDIRECT PASS
 * Offload: protocol ip ip_proto tcp dst_port 80 -> mirred egress redirect to the device in tx_ports[0] (pass while the slot is empty); everything else pass.
 */
#include "xdp2tc_corpus.h"

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32); /* ifindex */
} tx_ports SEC(".maps"); // expect-map: tx_ports control-plane

SEC("xdp")
int xdp_redirect_devmap(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);

	if ((void *)(tcph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_TCP) // expect: stateless
		return XDP_PASS;
	if (tcph->dest == bpf_htons(80)) // expect: stateless
		return bpf_redirect_map(&tx_ports, 0, XDP_PASS);
	return XDP_PASS;
}

XDP2TC_LICENSE;
