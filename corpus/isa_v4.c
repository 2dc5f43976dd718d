/* xdp2tc corpus: isa_v4
 * What: Signed arithmetic on header fields built with -mcpu=v4 so clang emits the v4 instructions: sign-extending loads (ldsx), movsx, bswap, sdiv and smod; drops TTL >= 128 and a few arithmetic combinations of IP id and TTL.
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol ip ip_ttl 128..255 -> drop (ttl 0x80/0x80); the (id, ttl) pairs with id/ttl == -100 and id%ttl == -1 (signed) are finitely many but not a simple match: keep them in XDP or enumerate; dst_ip with low 16 bits, sign-extended, < -30000 has no simple match; everything else pass.
 */
// load-gcc: no GCC 12 has no sdiv/smod: signed division becomes a call to the undefined libgcc routine __divdi3
// nobtf: yes
// build: -mcpu=v4
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_isa_v4(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	long sttl, id, q, r, low;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;

	sttl = *(__s8 *)&iph->ttl;              /* ldsx: 8-bit load, sign-extended */
	id = (__s16)__builtin_bswap16(iph->id); /* bswap16, then movsx 16 -> 64 */

	if (sttl < 0) // expect: stateless (TTL >= 128 seen as a negative s8)
		return XDP_DROP;
	if (sttl == 0) // expect: stateless
		return XDP_PASS;

	q = id / sttl; /* sdiv */
	r = id % sttl; /* smod */
	if (q == -100 && r == -1) // expect: stateless
		return XDP_DROP;

	/* bswap32 of a non-constant, then movsx of a 16-bit register value */
	low = (__s16)(__builtin_bswap32(iph->daddr) & 0xffff);
	if (low < -30000) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
