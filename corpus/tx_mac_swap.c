/* xdp2tc corpus: tx_mac_swap
 * What: UDP echo reflector: IPv4 UDP to port 7 gets its MAC addresses swapped and is sent back out the same interface with XDP_TX.
 * Seed: none
 * Verdicts: TX PASS
 * Offload: the match (protocol ip ip_proto udp dst_port 7) is stateless, but the action (swap MACs, transmit on the ingress port) has no plain flower equivalent; a sound translation keeps those packets in XDP; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_tx_mac_swap(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);
	unsigned char tmp[ETH_ALEN];

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;
	if (udph->dest != bpf_htons(7)) // expect: stateless
		return XDP_PASS;

	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
	return XDP_TX;
}

XDP2TC_LICENSE;
