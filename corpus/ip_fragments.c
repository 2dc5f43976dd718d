/* xdp2tc corpus: ip_fragments
 * What: Drops every IPv4 fragment: non-first fragments (offset != 0) and first fragments (MF set), checked separately.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol ip ip_flags frag -> drop (covers both tests); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_ip_fragments(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	/* a later fragment carries no L4 header: never inspect it */
	if (iph->frag_off & bpf_htons(IP_OFFSET)) // expect: stateless
		return XDP_DROP;
	/* first fragment of a fragmented datagram */
	if (iph->frag_off & bpf_htons(IP_MF)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
