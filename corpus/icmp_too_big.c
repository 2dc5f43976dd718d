/* xdp2tc corpus: icmp_too_big
 * What: Answers IPv4 frames longer than 600 bytes with an ICMP "fragmentation needed" (type 3 code 4, next-hop MTU 586): bpf_xdp_adjust_tail trims the frame to the original IP header plus 8 bytes, bpf_xdp_adjust_head makes room for a new IP and ICMP header in front, bpf_csum_diff computes both checksums (the IP one in two chained calls, 12 + 8 bytes), and the reply leaves with XDP_TX.
 * Seed: none
 * Verdicts: PASS TX
 * Offload: nothing: the reply is built from the packet's own bytes (addresses, checksums), which no flower action reproduces; IPv4 frames of at most 600 bytes, IPv4 with options and everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define MAX_FRAME   600 /* longer IPv4 frames get the ICMP error */
#define ORIG_KEEP   (sizeof(struct iphdr) + 8) /* of the offending datagram, RFC 792 */
#define NEW_HDRS    (sizeof(struct iphdr) + sizeof(struct icmphdr))
#define REPLY_LEN   (sizeof(struct ethhdr) + NEW_HDRS + ORIG_KEEP) /* 70 */
#define ICMP_LEN    (sizeof(struct icmphdr) + ORIG_KEEP) /* 36, a multiple of 4 */

/* The 16-bit one's complement of a bpf_csum_diff result (any width it may have). */
static __always_inline __u16 fold(__u64 csum)
{
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (csum & 0xffff) + (csum >> 16);
	csum = (csum & 0xffff) + (csum >> 16);
	return (__u16)~csum;
}

SEC("xdp")
int xdp_icmp_too_big(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data, *reply_eth;
	struct iphdr *iph = (void *)(eth + 1), *orig;
	struct icmphdr *icmph;
	unsigned char mac[ETH_ALEN];
	__s64 csum;

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || *(__u8 *)iph != 0x45) // expect: stateless
		return XDP_PASS;
	if (data_end - data <= MAX_FRAME) // expect: stateless
		return XDP_PASS;
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);

	/* Keep Ethernet + IP header + 8 bytes, then prepend the new IP and ICMP headers. */
	if (bpf_xdp_adjust_tail(ctx, (int)(sizeof(struct ethhdr) + ORIG_KEEP) - (int)(data_end - data))) // expect: constant (a 601+ byte frame always shrinks to 42)
		return XDP_PASS;
	if (bpf_xdp_adjust_head(ctx, -(int)NEW_HDRS)) // expect: constant (216 bytes of headroom)
		return XDP_PASS;
	data = XDP_DATA(ctx);
	data_end = XDP_DATA_END(ctx);
	if (data + REPLY_LEN > data_end) // expect: constant (the frame is 70 bytes now)
		return XDP_PASS;

	/* The old Ethernet header sits NEW_HDRS bytes in: reuse it, addresses swapped. */
	reply_eth = data;
	eth = data + NEW_HDRS;
	__builtin_memcpy(reply_eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(reply_eth->h_dest, mac, ETH_ALEN);
	reply_eth->h_proto = bpf_htons(ETH_P_IP);
	iph = data + sizeof(struct ethhdr);
	icmph = (void *)(iph + 1);
	orig = (void *)(icmph + 1);

	icmph->type = ICMP_DEST_UNREACH;
	icmph->code = ICMP_FRAG_NEEDED;
	icmph->checksum = 0;
	icmph->rest = bpf_htonl(MAX_FRAME - sizeof(struct ethhdr)); /* unused(16) + next-hop MTU(16) */
	csum = bpf_csum_diff(0, 0, (__be32 *)icmph, ICMP_LEN, 0);
	icmph->checksum = fold(csum);

	*(__u8 *)iph = 0x45;
	iph->tos = 0;
	iph->tot_len = bpf_htons(NEW_HDRS + ORIG_KEEP);
	iph->id = 0;
	iph->frag_off = 0;
	iph->ttl = 64;
	iph->protocol = 1; /* ICMP */
	iph->check = 0;
	iph->saddr = orig->daddr;
	iph->daddr = orig->saddr;
	csum = bpf_csum_diff(0, 0, (__be32 *)iph, 12, 0);
	csum = bpf_csum_diff(0, 0, (__be32 *)&iph->saddr, 8, csum);
	iph->check = fold(csum);
	return XDP_TX;
}

XDP2TC_LICENSE;
