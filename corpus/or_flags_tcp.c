/* xdp2tc corpus: or_flags_tcp
 * What: Issue 17's flag-accumulation shape over TCP with four levels flower can express: unrolled loops of HITS (4..48) equalities that set a hit flag, on the TCP destination port (3000 + 5i), the TCP source port (4000 + 7i), the /24 network of the IPv4 source (10.0.3i.0/24, saddr masked with 255.255.255.0) and the TTL (10 + 2i), after ihl == 5 and protocol == TCP; innermost drops.
 * Seed: 000 §6.8.3
 * Verdicts: DROP PASS
 * Offload: drop through four chains of HITS filters each, chain 0 -> 1 -> 2 -> 3 -> drop, one level per key: dst_port 3000+5i, src_port 4000+7i, src_ip 10.0.3i.0/24, ip_ttl 10+2i (i < HITS): 4*HITS filters; everything else pass.
 */
// nobtf: yes
// variants: k HITS 4 16 48
#include "xdp2tc_corpus.h"

#ifndef HITS
#define HITS 4
#endif

SEC("xdp")
int xdp_or_flags_tcp(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);
	int hit, i;

	if ((void *)(tcph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	if (iph->ihl != 5 || iph->protocol != IPPROTO_TCP) // expect: stateless
		return XDP_PASS;

	hit = 0;
	XDP2TC_UNROLL
	for (i = 0; i < HITS; i++) // expect: constant
		if (bpf_ntohs(tcph->dest) == 3000 + 5 * i) // expect: stateless
			hit = 1;
	if (!hit) // expect: stateless
		return XDP_PASS;
	hit = 0;
	XDP2TC_UNROLL
	for (i = 0; i < HITS; i++) // expect: constant
		if (bpf_ntohs(tcph->source) == 4000 + 7 * i) // expect: stateless
			hit = 1;
	if (!hit) // expect: stateless
		return XDP_PASS;
	hit = 0;
	XDP2TC_UNROLL
	for (i = 0; i < HITS; i++) // expect: constant
		/* 10.0.3i.0 in network order, as the little-endian load of saddr sees it
		 * (no byte swap of a variable: GCC 12 would call __bswapsi2 when it does not
		 * unroll the loop) */
		if ((iph->saddr & bpf_htonl(0xFFFFFF00)) == 0x0A + ((3 * i) << 16)) // expect: stateless
			hit = 1;
	if (!hit) // expect: stateless
		return XDP_PASS;
	hit = 0;
	XDP2TC_UNROLL
	for (i = 0; i < HITS; i++) // expect: constant
		if (iph->ttl == 10 + 2 * i) // expect: stateless
			hit = 1;
	if (hit) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
