/* xdp2tc corpus: subprog_call
 * What: The L4 decision lives in a static __noinline function (a real bpf-to-bpf call); it drops TCP and UDP to port 111 (rpcbind) and TCP to port 2049 (NFS).
 * Seed: none
 * Verdicts: DROP PASS
 * Offload: protocol ip ip_proto tcp dst_port 111 -> drop; ip_proto tcp dst_port 2049 -> drop; ip_proto udp dst_port 111 -> drop; everything else pass.
 */
// nobtf: yes
#include "xdp2tc_corpus.h"

/* Returns the verdict for the L4 header that follows iph.  Not inlined, so the
 * object contains a call instruction to a second function in .text. */
static __noinline int l4_verdict(struct iphdr *iph, void *data_end)
{
	if (iph->protocol == IPPROTO_TCP) { // expect: stateless
		struct tcphdr *tcph = (void *)(iph + 1);

		if ((void *)(tcph + 1) > data_end) // expect: stateless
			return XDP_PASS;
		if (tcph->dest == bpf_htons(111) || tcph->dest == bpf_htons(2049)) // expect: stateless
			return XDP_DROP;
	} else if (iph->protocol == IPPROTO_UDP) { // expect: stateless
		struct udphdr *udph = (void *)(iph + 1);

		if ((void *)(udph + 1) > data_end) // expect: stateless
			return XDP_PASS;
		if (udph->dest == bpf_htons(111)) // expect: stateless
			return XDP_DROP;
	}
	return XDP_PASS;
}

SEC("xdp")
int xdp_subprog_call(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end) // expect: stateless
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP)) // expect: stateless
		return XDP_PASS;
	return l4_verdict(iph, data_end);
}

XDP2TC_LICENSE;
