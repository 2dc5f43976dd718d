/* xdp2tc corpus: bpf_loop_cb
 * What: Uses the bpf_loop helper (181) with a callback that counts how many of the 4 source-address octets are 255; packets from 255.255.255.255 are dropped.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol ip src_ip 255.255.255.255 -> drop (what the callback computes); everything else pass.
 */
// load-gcc: no GCC 12 emits no .BTF.ext func_info, which the verifier requires for a bpf_loop callback
// nobtf: no (the verifier needs BTF func_info for the callback)
#include "xdp2tc_corpus.h"

struct octet_ctx {
	__u8 octets[4];
	__u32 n_ff;
};

/* bpf_loop callback: return 0 to continue, 1 to stop early */
static long count_ff(__u32 index, void *data)
{
	struct octet_ctx *c = data;

	if (index >= 4) // expect: constant (bpf_loop runs exactly 4 times)
		return 1;
	if (c->octets[index] == 0xff) // expect: stateless (packet bytes copied to the stack)
		c->n_ff++;
	return 0;
}

SEC("xdp")
int xdp_bpf_loop_cb(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct octet_ctx c = {};

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	__builtin_memcpy(c.octets, &iph->saddr, 4);
	bpf_loop(4, count_ff, &c, 0);
	if (c.n_ff == 4) // expect: stateless (result of the callback over packet bytes)
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
