/* xdp2tc corpus: nested_if
 * What: Chain of NESTED (1..8) nested stateless ifs, innermost drops: src MAC, dst MAC, IPv4, src IP, dst IP, TCP, dst port 22, src port 50.
 * Seed: 000 §6.8.2
 * Verdicts: DROP PASS
 * Offload: exactly one drop rule combining the first NESTED matches (src_mac 02:00:00:00:00:01, dst_mac 02:00:00:00:00:02, protocol ip, src_ip 10.0.0.1, dst_ip 10.0.0.2, ip_proto tcp, dst_port 22, src_port 50); everything else pass.
 */
// nobtf: yes
// variants: n NESTED 1 2 3 4 5 6 7 8
/* The thesis tested dst_port 22 and dst_port 50 in the same chain, which can
 * never both hold; the 8th test here is the source port instead. */
#include "xdp2tc_corpus.h"

#ifndef NESTED
#define NESTED 8
#endif

/* Headers that must be present for the tests enabled by NESTED. */
#if NESTED <= 2
#define NEED_BYTES sizeof(struct ethhdr)
#elif NESTED <= 6
#define NEED_BYTES (sizeof(struct ethhdr) + sizeof(struct iphdr))
#else
#define NEED_BYTES (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct tcphdr))
#endif

SEC("xdp")
int xdp_nested_if(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);

	if (data + NEED_BYTES > data_end) // expect: stateless
		return XDP_PASS;
	(void)iph;
	(void)tcph;

#if NESTED >= 1
	if (eth->h_source[0] == 0x02 && eth->h_source[1] == 0 && eth->h_source[2] == 0 && eth->h_source[3] == 0 && eth->h_source[4] == 0 && eth->h_source[5] == 0x01) // expect: stateless
#endif
#if NESTED >= 2
	if (eth->h_dest[0] == 0x02 && eth->h_dest[1] == 0 && eth->h_dest[2] == 0 && eth->h_dest[3] == 0 && eth->h_dest[4] == 0 && eth->h_dest[5] == 0x02) // expect: stateless
#endif
#if NESTED >= 3
	if (eth->h_proto == bpf_htons(ETH_P_IP)) // expect: stateless
#endif
#if NESTED >= 4
	if (iph->saddr == bpf_htonl(0x0A000001)) // expect: stateless
#endif
#if NESTED >= 5
	if (iph->daddr == bpf_htonl(0x0A000002)) // expect: stateless
#endif
#if NESTED >= 6
	if (iph->protocol == IPPROTO_TCP) // expect: stateless
#endif
#if NESTED >= 7
	if (tcph->dest == bpf_htons(22)) // expect: stateless
#endif
#if NESTED >= 8
	if (tcph->source == bpf_htons(50)) // expect: stateless
#endif
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
