/* xdp2tc corpus: tcp_flags
 * What: Drops TCP packets with impossible flag combinations: SYN+FIN, no flags at all (NULL scan) and FIN+PSH+URG (XMAS scan).
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: ip_proto tcp tcp_flags 0x3/0x3 -> drop; tcp_flags 0x29/0x29 -> drop; the NULL scan (tcp_flags 0x0/0xff) stays in software: flower reads tcp_flags 0 from a TCP header with doff < 5 (__skb_flow_dissect_tcp), which the program passes when its flag byte is not 0; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

#define F_FIN 0x01
#define F_SYN 0x02
#define F_PSH 0x08
#define F_URG 0x20

SEC("xdp")
int xdp_tcp_flags(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);
	__u8 flags;

	if ((void *)(tcph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_TCP) // expect: stateless
		return XDP_PASS;

	/* byte 13 of the TCP header: CWR ECE URG ACK PSH RST SYN FIN */
	flags = ((__u8 *)tcph)[13];
	if ((flags & (F_SYN | F_FIN)) == (F_SYN | F_FIN)) // expect: stateless
		return XDP_DROP;
	if (flags == 0) // expect: stateless
		return XDP_DROP;
	if ((flags & (F_FIN | F_PSH | F_URG)) == (F_FIN | F_PSH | F_URG)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
