/* xdp2tc corpus: redirect_ifindex
 * What: Redirects VXLAN (IPv4 UDP to port 4789) to a fixed interface index with bpf_redirect(OUT_IFINDEX, 0).
 * Seed: none
 * Verdicts: REDIRECT PASS
 * Offload: protocol ip ip_proto udp dst_port 4789 -> mirred egress redirect to the device with ifindex 4; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define OUT_IFINDEX 4

SEC("xdp")
int xdp_redirect_ifindex(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;
	if (udph->dest == bpf_htons(4789)) // expect: stateless
		return bpf_redirect(OUT_IFINDEX, 0); /* flags 0: returns XDP_REDIRECT */
	return XDP_PASS;
}

XDP2TC_LICENSE;
