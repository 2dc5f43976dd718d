/* xdp2tc corpus: icmp_filter
 * What: ICMP type/code filter: drops echo requests, redirects of any code, and "fragmentation needed" (type 3 code 4) from outside 10.0.0.0/8.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: ip_proto icmp type 8 -> drop; type 5 -> drop; type 3 code 4 with src_ip not in 10.0.0.0/8 -> drop (needs a pass rule for 10/8 above it); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_icmp_filter(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct icmphdr *icmph = (void *)(iph + 1);

	if ((void *)(icmph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_ICMP) // expect: stateless
		return XDP_PASS;

	if (icmph->type == ICMP_ECHO) // expect: stateless
		return XDP_DROP;
	if (icmph->type == ICMP_REDIRECT) // expect: stateless
		return XDP_DROP;
	if (icmph->type == ICMP_DEST_UNREACH && icmph->code == 4) { // expect: stateless
		if ((iph->saddr & bpf_htonl(0xff000000)) != bpf_htonl(0x0a000000)) // expect: stateless
			return XDP_DROP;
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
