/* xdp2tc corpus: or_stress
 * What: Four nested ifs whose conditions are each an OR of ORS (1..48) equality tests on TCP dst port, TCP src port, IPv4 src and IPv4 dst; innermost drops.
 * Seed: 000 §6.8.3
 * Verdicts: DROP PASS
 * Offload: drop for the cross product of the four OR lists (ORS^4 conjunctions, or 4 lists if the rule language can take sets); everything else pass.
 */
// nobtf: yes
// variants: k ORS 1 2 8 16 48
#include "xdp2tc_corpus.h"

#ifndef ORS
#define ORS 4
#endif
#if ORS < 1 || ORS > 48
#error "ORS must be in 1..48"
#endif

/* Expand T(i) for i = 0..47.  Terms with i >= ORS are "|| (0 && ...)" and are
 * folded away by the compiler, so the object contains exactly ORS tests per
 * level.  Constants are spread out (not consecutive) so the compiler cannot
 * turn an OR chain into a single range check. */
#define FOR48(T) \
	T(0) T(1) T(2) T(3) T(4) T(5) T(6) T(7) T(8) T(9) T(10) T(11) \
	T(12) T(13) T(14) T(15) T(16) T(17) T(18) T(19) T(20) T(21) T(22) T(23) \
	T(24) T(25) T(26) T(27) T(28) T(29) T(30) T(31) T(32) T(33) T(34) T(35) \
	T(36) T(37) T(38) T(39) T(40) T(41) T(42) T(43) T(44) T(45) T(46) T(47)

#define DPORT(i) || ((i) < ORS && tcph->dest == bpf_htons(1024 + 97 * (i)))
#define SPORT(i) || ((i) < ORS && tcph->source == bpf_htons(20000 + 131 * (i)))
#define SADDR(i) || ((i) < ORS && iph->saddr == bpf_htonl(0x0A010007 + ((i) << 8) + 3 * (i)))
#define DADDR(i) || ((i) < ORS && iph->daddr == bpf_htonl(0xC0A80009 + ((i) << 8) + 5 * (i)))

SEC("xdp")
int xdp_or_stress(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);

	if ((void *)(tcph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_TCP) // expect: stateless
		return XDP_PASS;

	if (0 FOR48(DPORT)) // expect: stateless
		if (0 FOR48(SPORT)) // expect: stateless
			if (0 FOR48(SADDR)) // expect: stateless
				if (0 FOR48(DADDR)) // expect: stateless
					return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
