/* xdp2tc corpus: ingress_ifindex
 * What: Decisions that depend on the xdp_md metadata rather than packet bytes: drops 10.0.0.0/8 sources arriving on ifindex 3, and UDP arriving on RX queue 7.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: only per device: on ifindex 3, protocol ip src_ip 10.0.0.0/8 -> drop; the RX-queue condition has no flower match (keep in XDP); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define GUARDED_IFINDEX 3
#define ISOLATED_QUEUE  7

SEC("xdp")
int xdp_ingress_ifindex(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	if (ctx->ingress_ifindex == GUARDED_IFINDEX) { // expect: ctx
		if ((iph->saddr & bpf_htonl(0xff000000)) == bpf_htonl(0x0a000000)) // expect: stateless
			return XDP_DROP;
	}
	if (ctx->rx_queue_index == ISOLATED_QUEUE && iph->protocol == IPPROTO_UDP) // expect: ctx
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
