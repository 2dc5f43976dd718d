/* xdp2tc corpus: or_direct_udp
 * What: Seed §6.8.3 over UDP with the ORs written directly (clang compiles them into comparison trees): four nested ifs, each an OR of ORS (4..48) equalities on the UDP source port (1000 + 3i), the UDP destination port (2000 + 3i), the IPv4 destination address (192.168.0.1 + 7i) and the TTL (2 + 3i); innermost drops. No ihl check: ports are read after a 20-byte header.
 * Seed: 000 §6.8.3
 * Verdicts: DROP PASS
 * Offload: drop through four chains of ORS filters each, chain 0 -> 1 -> 2 -> 3 -> drop, one level per key: src_port 1000+3i, dst_port 2000+3i, dst_ip 192.168.0.1+7i, ip_ttl 2+3i (i < ORS): 4*ORS filters, under --assume no-ip-options; everything else pass.
 */
// nobtf: yes
// variants: k ORS 4 16 48
#include "xdp2tc_corpus.h"

#ifndef ORS
#define ORS 4
#endif

#define FOR48(T) \
	T(0) T(1) T(2) T(3) T(4) T(5) T(6) T(7) T(8) T(9) T(10) T(11) \
	T(12) T(13) T(14) T(15) T(16) T(17) T(18) T(19) T(20) T(21) T(22) T(23) \
	T(24) T(25) T(26) T(27) T(28) T(29) T(30) T(31) T(32) T(33) T(34) T(35) \
	T(36) T(37) T(38) T(39) T(40) T(41) T(42) T(43) T(44) T(45) T(46) T(47)

#define SPORT(i) || ((i) < ORS && bpf_ntohs(udph->source) == 1000 + 3 * (i))
#define DPORT(i) || ((i) < ORS && bpf_ntohs(udph->dest) == 2000 + 3 * (i))
#define DADDR(i) || ((i) < ORS && bpf_ntohl(iph->daddr) == 0xC0A80001 + 7 * (i))
#define TTL(i) || ((i) < ORS && iph->ttl == 2 + 3 * (i))

SEC("xdp")
int xdp_or_direct_udp(struct xdp_md *ctx)
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

	if (0 FOR48(SPORT)) // expect: stateless
		if (0 FOR48(DPORT)) // expect: stateless
			if (0 FOR48(DADDR)) // expect: stateless
				if (0 FOR48(TTL)) // expect: stateless
					return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
