/* xdp2tc corpus: or_flags_udp
 * What: The shape of issue 17 (seed §6.8.3 over UDP): four nested ifs, each an OR of HITS (2..48) equalities written as an unrolled loop that sets a hit flag, on the UDP source port (1000 + 3i), the UDP destination port (2000 + 3i), the low byte of the IPv4 source address (1 + 3i) and the TTL (2 + 3i), after ihl == 5 and protocol == UDP; innermost drops.
 * Seed: 000 §6.8.3
 * Verdicts: DROP PASS
 * Offload: nothing: the third level tests the low byte of the source address, a mask (0.0.0.255) that is not a prefix, which tc's src_ip cannot take (ADDR/LEN only); a filter without that level would drop packets the program passes (10.0.0.2), so the DROP path stays in software with that reason; everything else pass.
 */
// nobtf: yes
// variants: k HITS 2 4 16 48
#include "xdp2tc_corpus.h"

#ifndef HITS
#define HITS 4
#endif

SEC("xdp")
int xdp_or_flags_udp(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);
	int hit, i;

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	if (iph->ihl != 5 || iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;

	hit = 0;
	XDP2TC_UNROLL
	for (i = 0; i < HITS; i++) // expect: constant
		if (bpf_ntohs(udph->source) == 1000 + 3 * i) // expect: stateless
			hit = 1;
	if (hit) { // expect: stateless
		hit = 0;
		XDP2TC_UNROLL
		for (i = 0; i < HITS; i++) // expect: constant
			if (bpf_ntohs(udph->dest) == 2000 + 3 * i) // expect: stateless
				hit = 1;
		if (hit) { // expect: stateless
			hit = 0;
			XDP2TC_UNROLL
			for (i = 0; i < HITS; i++) // expect: constant
				if ((bpf_ntohl(iph->saddr) & 0xff) == 1 + 3 * i) // expect: stateless
					hit = 1;
			if (hit) { // expect: stateless
				hit = 0;
				XDP2TC_UNROLL
				for (i = 0; i < HITS; i++) // expect: constant
					if (iph->ttl == 2 + 3 * i) // expect: stateless
						hit = 1;
				if (hit) // expect: stateless
					return XDP_DROP;
			}
		}
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
