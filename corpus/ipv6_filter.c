/* xdp2tc corpus: ipv6_filter
 * What: IPv6 filter on next header and destination address: drop UDP to 2001:db8::1 and any TCP to port 23.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol ipv6 ip_proto udp dst_ip 2001:db8::1 -> drop; protocol ipv6 ip_proto tcp dst_port 23 -> drop; everything else pass (extension headers are not walked: only the fixed header's next header counts).
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_ipv6_filter(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);

	if ((void *)(ip6 + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IPV6)) // expect: stateless
		return XDP_PASS;

	if (ip6->nexthdr == IPPROTO_UDP) { // expect: stateless
		/* 2001:db8::1 compared as four 32-bit words */
		if (ip6->daddr.in6_u.u6_addr32[0] == bpf_htonl(0x20010db8) && ip6->daddr.in6_u.u6_addr32[1] == 0 && ip6->daddr.in6_u.u6_addr32[2] == 0 && ip6->daddr.in6_u.u6_addr32[3] == bpf_htonl(1)) // expect: stateless
			return XDP_DROP;
	} else if (ip6->nexthdr == IPPROTO_TCP) { // expect: stateless
		struct tcphdr *tcph = (void *)(ip6 + 1);

		if ((void *)(tcph + 1) > data_end) // expect: stateless
			return XDP_PASS;
		if (tcph->dest == bpf_htons(23)) // expect: stateless
			return XDP_DROP;
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
