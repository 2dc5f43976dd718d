/* xdp2tc corpus: two_progs_one_section
 * What: Two independent XDP programs placed in the same ELF section "xdp": one drops telnet (TCP 23), the other drops SNMP (UDP 161).
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: per program: xdp_no_telnet -> protocol ip ip_proto tcp dst_port 23 drop; xdp_no_snmp -> protocol ip ip_proto udp dst_port 161 drop; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_no_telnet(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);

	if ((void *)(tcph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP) && iph->protocol == IPPROTO_TCP && tcph->dest == bpf_htons(23)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp")
int xdp_no_snmp(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udph = (void *)(iph + 1);

	if ((void *)(udph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP) && iph->protocol == IPPROTO_UDP && udph->dest == bpf_htons(161)) // expect: stateless
		return XDP_DROP;
	return XDP_PASS;
}

XDP2TC_LICENSE;
