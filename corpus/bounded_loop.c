/* xdp2tc corpus: bounded_loop
 * What: A bounded for loop kept as a real loop (unrolling disabled, so the bytecode has a back edge) scans the first 8 UDP payload bytes of traffic to port 9000 and drops if any byte is 0xff.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: flower cannot match payload bytes: the drop stays in XDP; a sound rule set is "pass" (optionally noting ip_proto udp dst_port 9000 as the only traffic that can be dropped).
 */
// load-gcc: no GCC 12 rewrites the counted loop into a pointer-inequality loop (p != payload+8); the verifier cannot bound it ("sequence of 8193 jumps is too complex")
// nobtf: yes
#include "xdp2tc_corpus.h"

#define SCAN_BYTES 8

SEC("xdp")
int xdp_bounded_loop(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);
	__u8 *payload = (void *)(udph + 1);

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;
	if (udph->dest != bpf_htons(9000)) // expect: stateless
		return XDP_PASS;

	XDP2TC_NOUNROLL
	for (int i = 0; i < SCAN_BYTES; i++) { // expect: constant (trip count 8)
		if ((void *)(payload + i + 1) > data_end) // expect: stateless
			break;
		if (payload[i] == 0xff) // expect: stateless
			return XDP_DROP;
	}
	return XDP_PASS;
}

XDP2TC_LICENSE;
