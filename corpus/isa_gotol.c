/* xdp2tc corpus: isa_gotol
 * What: A branch over a block of ~40000 instructions (a long hash of the UDP ports), so that with -mcpu=v4 clang must use the 32-bit-offset `gotol` jump; drops UDP to port 666 whose port hash has its top bit set.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: no flower rule for the hash condition: UDP dst_port 666 packets may be dropped depending on a long arithmetic function of the ports (stateless but not a simple match; keep in XDP); everything else pass.
 */
// gcc: no GCC 12 has no -mcpu=v4 (so no gotol to show) and needs ~30 s for the 40000-step block
// nobtf: yes
// build: -mcpu=v4
#include "xdp2tc_corpus.h"

/* 4 * 10 * 10 * 10 * 10 = 40000 mixing steps, each a few instructions */
#define STEP   acc = (acc ^ (acc >> 7)) * 0x9E3779B1u + 0x7F4A7C15u;
#define R4(x)  x x x x
#define R10(x) x x x x x x x x x x

SEC("xdp")
int xdp_isa_gotol(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);
	__u32 acc;

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;
	if (udph->dest != bpf_htons(666)) // expect: stateless
		return XDP_PASS;

	acc = ((__u32)udph->source << 16) | udph->dest;
	R4(R10(R10(R10(STEP))))
	if (acc & 0x80000000u) // expect: stateless (long hash of the ports)
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
