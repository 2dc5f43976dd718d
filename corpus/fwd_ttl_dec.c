/* xdp2tc corpus: fwd_ttl_dec
 * What: A one-route router: IPv4 to 10.9.0.0/16 with TTL above 1 gets fixed MAC addresses (src 02:00:00:00:00:01, dst 02:00:00:00:00:02), its TTL decremented with an incremental checksum update (RFC 1624), and is redirected to ifindex 4; everything else passes unchanged.
 * Seed: none
 * Verdicts: REDIRECT PASS
 * Offload: protocol ip dst_ip 10.9.0.0/16 (TTL 0/1 shielded) -> pedit eth dst/src set, ip ttl decrement, csum ip4h, mirred egress redirect to ifindex 4 (with --assume valid-ip-checksum); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define OUT_IFINDEX 4

SEC("xdp")
int xdp_fwd_ttl_dec(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	__u16 *word = (__u16 *)&iph->ttl; /* ttl and protocol: one 16-bit word */
	__u16 old_word, new_word;
	__u32 csum;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	if ((iph->daddr & bpf_htonl(0xffff0000)) != bpf_htonl(0x0a090000)) // expect: stateless
		return XDP_PASS;
	if (iph->ttl <= 1) // expect: stateless
		return XDP_PASS;

	old_word = *word;
	iph->ttl--;
	new_word = *word;
	csum = (__u16)~iph->check;
	csum += (__u16)~old_word;
	csum += new_word;
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (csum & 0xffff) + (csum >> 16);
	iph->check = (__u16)~csum;

	eth->h_dest[0] = 0x02;
	eth->h_dest[1] = 0;
	eth->h_dest[2] = 0;
	eth->h_dest[3] = 0;
	eth->h_dest[4] = 0;
	eth->h_dest[5] = 0x02;
	eth->h_source[0] = 0x02;
	eth->h_source[1] = 0;
	eth->h_source[2] = 0;
	eth->h_source[3] = 0;
	eth->h_source[4] = 0;
	eth->h_source[5] = 0x01;
	return bpf_redirect(OUT_IFINDEX, 0);
}

XDP2TC_LICENSE;
