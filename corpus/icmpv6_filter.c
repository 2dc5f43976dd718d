/* xdp2tc corpus: icmpv6_filter
 * What: IPv6 source prefix and ICMPv6 type/code filter: drops everything from 2001:db8:bad::/48, ICMPv6 echo requests (type 128) and "port unreachable" (type 1 code 4).
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol ipv6 src_ip 2001:db8:bad::/48 -> drop; protocol ipv6 ip_proto icmpv6 type 128 -> drop; type 1 code 4 -> drop (with --assume no-ipv6-ext: the program reads ICMPv6 right after the fixed header, flower after the extension headers); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_icmpv6_filter(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct icmphdr *icmp = (void *)(ip6 + 1);

	if ((void *)(ip6 + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IPV6)) // expect: stateless
		return XDP_PASS;
	/* 2001:db8:bad::/48: the first two words, the third's top half */
	if (ip6->saddr.in6_u.u6_addr32[0] == bpf_htonl(0x20010db8) && (ip6->saddr.in6_u.u6_addr32[1] & bpf_htonl(0xffff0000)) == bpf_htonl(0x0bad0000)) // expect: stateless
		return XDP_DROP;
	if (ip6->nexthdr != IPPROTO_ICMPV6) // expect: stateless
		return XDP_PASS;
	if ((void *)(icmp + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (icmp->type == 128) // expect: stateless
		return XDP_DROP;
	if (icmp->type == 1 && icmp->code == 4) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
