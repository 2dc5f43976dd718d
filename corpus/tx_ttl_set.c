/* xdp2tc corpus: tx_ttl_set
 * What: Bounces IPv4 UDP to port 9 back out of the receiving interface with XDP_TX, to the fixed next hop 02:00:00:00:00:09 and with TTL 64 (incremental checksum update, RFC 1624); everything else passes unchanged.
 * Seed: none
 * Verdicts: TX PASS
 * Offload: protocol ip ip_proto udp dst_port 9 -> pedit eth dst set 02:00:00:00:00:09, ip ttl set 64, csum ip4h, mirred egress redirect to the same device (with --assume valid-ip-checksum no-ip-options); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define NEW_TTL 64

SEC("xdp")
int xdp_tx_ttl_set(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);
	__u16 *word = (__u16 *)&iph->ttl; /* ttl and protocol: one 16-bit word */
	__u16 old_word, new_word;
	__u32 csum;

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP) // expect: stateless
		return XDP_PASS;
	if (udph->dest != bpf_htons(9)) // expect: stateless
		return XDP_PASS;

	old_word = *word;
	iph->ttl = NEW_TTL;
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
	eth->h_dest[5] = 0x09;
	return XDP_TX;
}

XDP2TC_LICENSE;
