/* For tests/test_helpers.py: output bytes that depend on truly arbitrary helper results
 * (a random number, the time) next to bytes the packet determines. UDP frames get a
 * random u32 at offset 0, the time's low byte at offset 4 and a copy of byte 12 at offset 5. */
#include "xdp2tc_corpus.h"

SEC("xdp")
int helper_bytes(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	__u8 *p = data;

	if (data + 34 > data_end)
		return XDP_PASS;
	if (p[23] != IPPROTO_UDP)
		return XDP_DROP;
	*(__u32 *)data = bpf_get_prandom_u32();
	p[4] = (__u8)bpf_ktime_get_ns();
	p[5] = p[12];
	return XDP_TX;
}

XDP2TC_LICENSE;
