/* xdp2tc corpus: random_drop
 * What: Randomly drops about 1 in 128 packets of UDP to port 9 (discard) using bpf_get_prandom_u32, e.g. to emulate loss.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: none for UDP dst_port 9 (a random verdict is not a match; flower has no equivalent without a sampling action); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_random_drop(struct xdp_md *ctx)
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
	if (udph->dest != bpf_htons(9)) // expect: stateless
		return XDP_PASS;
	if ((bpf_get_prandom_u32() & 127) == 0) // expect: helper
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
