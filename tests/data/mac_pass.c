/* xdp2tc test input (written for the project): passes one source MAC address and IPv4
 * packets with options, drops the rest. Its DROP paths' block is `protocol all` without keys
 * (every ethertype, every other MAC): under --assume no-ip-options the only packets it must
 * let by are those of that MAC, and a pass shield on src_mac proves it (a suggestion), while
 * without it every MAC has a passed packet with options. tests/test_suggest_twins.py: the
 * MAC-address source packet is no MAC twin (rules/counterexample.py mac_twin). */
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_mac_pass(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	if (eth->h_source[0] == 0x02 && eth->h_source[1] == 0x00 && eth->h_source[2] == 0x00 &&
	    eth->h_source[3] == 0x00 && eth->h_source[4] == 0x00 && eth->h_source[5] == 0x01)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP) && iph->ihl != 5)
		return XDP_PASS;
	return XDP_DROP;
}

XDP2TC_LICENSE;
