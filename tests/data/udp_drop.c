/* xdp2tc test input (written for the project): aborts (drops) IPv4 UDP packets without options, and
 * other packets but those with options, a TTL of 1 or one source MAC address. Under --assume
 * no-ip-options the UDP path proves on its own block (protocol ip, ip_proto udp: a
 * suggestion) while the other DROP paths' keyless block does not (a TTL-1 packet passes
 * whatever its MACs). tests/test_suggest_twins.py: `keyless` must not take the UDP path's
 * block (IPv4, its condition reads no MAC) for a keyless one (rules/counterexample.py). */
#include "xdp2tc_corpus.h"

SEC("xdp")
int xdp_udp_drop(struct xdp_md *ctx)
{
	void *data = XDP_DATA(ctx);
	void *data_end = XDP_DATA_END(ctx);
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);

	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		if (iph->ihl != 5)
			return XDP_PASS;
		if (iph->protocol == IPPROTO_UDP)
			return XDP_ABORTED; /* a path of its own (DROP would be merged with the last) */
		if (iph->ttl == 1)
			return XDP_PASS;
	}
	if (eth->h_source[0] == 0x02 && eth->h_source[1] == 0x00 && eth->h_source[2] == 0x00 &&
	    eth->h_source[3] == 0x00 && eth->h_source[4] == 0x00 && eth->h_source[5] == 0x01)
		return XDP_PASS;
	return XDP_DROP;
}

XDP2TC_LICENSE;
