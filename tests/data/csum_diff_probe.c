/* bpf_csum_diff probe for tests/test_helpers.py: the helper's 64-bit result on
 * packet bytes, written over the first 8 bytes of the packet (XDP_TX).
 * -DFROM_SIZE/-DFROM_OFF/-DTO_SIZE/-DTO_OFF choose the buffers (offsets into the
 * packet: odd ones give odd addresses); the seed is the u32 at packet offset 8. */
#include "xdp2tc_corpus.h"

SEC("xdp")
int csum_probe(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	__s64 r;

	if (data + 160 > data_end)
		return XDP_PASS;
	r = bpf_csum_diff(FROM_SIZE ? data + 16 + FROM_OFF : 0, FROM_SIZE,
			  TO_SIZE ? data + 80 + TO_OFF : 0, TO_SIZE, *(__u32 *)(data + 8));
	*(__s64 *)data = r;
	return XDP_TX;
}

XDP2TC_LICENSE;
