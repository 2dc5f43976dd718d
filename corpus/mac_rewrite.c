/* xdp2tc corpus: mac_rewrite
 * What: Re-addresses IPv4 TCP to port 80 to the fixed MAC 02:00:00:00:00:50 before passing it up (a local service behind a virtual MAC); the program passes everything, rewriting only those packets (again, idempotently, when they come back re-addressed).
 * Seed: none
 * Verdicts: PASS
 * Offload: protocol ip ip_proto tcp dst_port 80 -> pedit eth dst set 02:00:00:00:00:50, then pass (no checksum: the MAC is outside the IPv4 header); everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_mac_rewrite(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct tcphdr *tcph = (void *)(iph + 1);

	if ((void *)(tcph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_TCP) // expect: stateless
		return XDP_PASS;
	if (tcph->dest != bpf_htons(80)) // expect: stateless
		return XDP_PASS;

	eth->h_dest[0] = 0x02;
	eth->h_dest[1] = 0;
	eth->h_dest[2] = 0;
	eth->h_dest[3] = 0;
	eth->h_dest[4] = 0;
	eth->h_dest[5] = 0x50;
	return XDP_PASS;
}

XDP2TC_LICENSE;
