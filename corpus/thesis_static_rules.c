/* xdp2tc corpus: thesis_static_rules
 * What: Static IPv4 rules with constants in the code and no maps: pass SSH from 192.168.1.21, drop everything else from it, drop traffic to 192.168.6.21.
 * Seed: 000 §6.5.1
 * Verdicts: DROP PASS
 * Offload: src 192.168.1.21 + tcp dst_port 22 -> pass; src 192.168.1.21 -> drop; dst 192.168.6.21 -> drop; everything else pass (ports read at the fixed offset after a 20-byte IPv4 header).
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

/* Same constants as the thesis: the address bytes as they sit in the packet
 * (network byte order), read as a little-endian u32. */
#define SRC_IP 0x1501A8C0 /* 192.168.1.21 */
#define DST_IP 0x1506A8C0 /* 192.168.6.21 */

SEC("xdp")
int xdp_static_rules(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) { // expect: stateless
		if (iph->saddr == SRC_IP) { // expect: stateless
			if (iph->protocol == IPPROTO_TCP) { // expect: stateless
				/* a truncated TCP header simply "does not match port 22" */
				if ((void *)(tcph + 1) <= data_end && tcph->dest == bpf_htons(22)) // expect: stateless
					return XDP_PASS;
			}
			return XDP_DROP;
		} else if (iph->daddr == DST_IP) { // expect: stateless
			return XDP_DROP;
		}
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
