/* xdp2tc corpus: thesis_const_cond
 * What: A branch decided by a local constant (i == 20) between two packet tests; the thesis translator gave up on it, a path explorer should see it is always true.
 * Seed: 000 §6.5.3
 * Verdicts: DROP PASS
 * Offload: protocol ip src_ip 192.168.1.21 -> drop; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define SRC_IP 0x1501A8C0 /* 192.168.1.21, network byte order as in the thesis */

SEC("xdp")
int xdp_const_cond(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	int i = 20;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) { // expect: stateless
		if (i == 20) { // expect: constant
			if (iph->saddr == SRC_IP) // expect: stateless
				return XDP_DROP;
		}
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
