/* xdp2tc corpus: devmap_section
 * What: A devmap egress program in SEC("xdp/devmap") (runs after a redirect, before transmit): it drops IPv4 multicast leaving through ifindex 5, read from ctx->egress_ifindex.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: not an ingress program: at best an egress filter on the device with ifindex 5 (dst_ip 224.0.0.0/4 -> drop); on any other device everything passes.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define NO_MCAST_IFINDEX 5

SEC("xdp/devmap")
int xdp_devmap_egress(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if (ctx->egress_ifindex != NO_MCAST_IFINDEX) // expect: ctx
		return XDP_PASS;
	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP) && (iph->daddr & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
