/* xdp2tc corpus: thesis_goto
 * What: §6.5.1 rewritten with a goto that jumps over the port test; the goto makes the inner TCP/port-22 block dead code, so every IPv4 packet ends at the same DROP.
 * Seed: 000 §6.5.2
 * Verdicts: DROP PASS
 * Offload: protocol ip -> drop; everything else pass (the thesis translator stopped at the goto; a bytecode analyzer sees the goto compiled away).
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define SRC_IP 0x1501A8C0 /* 192.168.1.21, network byte order as in the thesis */

SEC("xdp")
int xdp_goto(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) { // expect: stateless
		if (iph->saddr == SRC_IP) { // expect: stateless (both outcomes reach the same DROP)
			goto test;
			/* Unreachable, kept to mirror the thesis listing. */
			if (iph->protocol == IPPROTO_TCP) { // expect: stateless (dead code after goto)
				if ((void *)(tcph + 1) <= data_end && tcph->dest == bpf_htons(22)) // expect: stateless (dead code after goto)
					return XDP_PASS;
			}
			return XDP_DROP;
		}
test:
		return XDP_DROP;
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
