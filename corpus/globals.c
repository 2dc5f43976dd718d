/* xdp2tc corpus: globals
 * What: Global variables in the three data sections: a `volatile const` blocked port in .rodata (set by the loader before load), an enable switch in .data, and a packet counter in .bss.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: while drop_enabled != 0: protocol ip ip_proto udp dst_port <blocked_port> -> drop; everything else pass (the .bss counter never changes a verdict).
 */
// load-gcc: no GCC 12 puts the volatile const in .data and relocates ld_imm64 against the variable symbol with the offset also in imm; libbpf adds both (off=8 into an 8-byte .data)
#include "xdp2tc_corpus.h"

volatile const __u16 blocked_port = 53; // expect-map: .rodata control-plane
__u32 drop_enabled = 1; // expect-map: .data control-plane
__u64 packets_seen; // expect-map: .bss stats-only

SEC("xdp")
int xdp_globals(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);

	__sync_fetch_and_add(&packets_seen, 1);

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;
	if (!drop_enabled) // expect: control-plane-map (.data, never written by the program)
		return XDP_PASS;
	if (udph->dest == bpf_htons(blocked_port)) // expect: control-plane-map (.rodata, frozen at load time)
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
