/* xdp2tc corpus shared header.
 *
 * Deliberately contains NO conditional code: every branch the analyzer
 * sees must live in a corpus .c file, where it carries an `// expect:`
 * annotation.  This header only provides
 *   - kernel UAPI includes (ethhdr, iphdr, ipv6hdr, tcphdr, udphdr) and icmphdr,
 *   - SEC()/map-definition macros equivalent to libbpf's bpf_helpers.h,
 *   - helper declarations that compile under both clang-19 and bpf-gcc 12.
 *
 * Why not <bpf/bpf_helpers.h>?  It pulls in bpf_helper_defs.h, which
 * declares helpers as function pointers (`static void *(*f)(...) = (void *)1`).
 * clang turns a call through such a constant pointer into `call 1`; GCC 12
 * emits an indirect call and fails ("indirect call in function").  GCC instead
 * provides __attribute__((kernel_helper(N))) on an ordinary prototype.
 */
#ifndef XDP2TC_CORPUS_H
#define XDP2TC_CORPUS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>

/* ---- section / map-definition macros (same shape as libbpf's) ---- */
#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define __array(name, val) typeof(val) *name[]

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define __noinline __attribute__((noinline))

#define XDP2TC_LICENSE char _license[] SEC("license") = "GPL"

/* ---- helper declarations ---- */
#if defined(__clang__)
#define XDP2TC_HELPER(ret, name, args, num) \
	static ret(*name) args = (void *)num
#else
#define XDP2TC_HELPER(ret, name, args, num) \
	ret name args __attribute__((kernel_helper(num)))
#endif

XDP2TC_HELPER(void *, bpf_map_lookup_elem, (void *map, const void *key), 1);
XDP2TC_HELPER(long, bpf_map_update_elem,
	      (void *map, const void *key, const void *value, __u64 flags), 2);
XDP2TC_HELPER(long, bpf_map_delete_elem, (void *map, const void *key), 3);
XDP2TC_HELPER(__u64, bpf_ktime_get_ns, (void), 5);
XDP2TC_HELPER(__u32, bpf_get_prandom_u32, (void), 7);
XDP2TC_HELPER(long, bpf_tail_call, (void *ctx, void *prog_array, __u32 index), 12);
XDP2TC_HELPER(long, bpf_skb_vlan_push, (struct __sk_buff *skb, __be16 proto, __u16 tci), 18);
XDP2TC_HELPER(long, bpf_redirect, (__u32 ifindex, __u64 flags), 23);
XDP2TC_HELPER(__s64, bpf_csum_diff,
	      (__be32 *from, __u32 from_size, __be32 *to, __u32 to_size, __wsum seed), 28);
XDP2TC_HELPER(long, bpf_xdp_adjust_head, (struct xdp_md *ctx, int delta), 44);
XDP2TC_HELPER(long, bpf_xdp_adjust_tail, (struct xdp_md *ctx, int delta), 65);
XDP2TC_HELPER(long, bpf_redirect_map, (void *map, __u64 key, __u64 flags), 51);
XDP2TC_HELPER(long, bpf_xdp_get_buff_len, (struct xdp_md *ctx), 188);
XDP2TC_HELPER(long, bpf_loop,
	      (__u32 nr_loops, void *callback_fn, void *callback_ctx, __u64 flags), 181);

/* ---- small protocol definitions not in the UAPI headers ---- */

/* <linux/icmp.h> drags in <linux/if.h> -> glibc <sys/socket.h>, which does
 * not build for the BPF target (gnu/stubs-32.h), so ICMP is declared here. */
struct icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be32 rest; /* id/sequence, gateway, or mtu depending on type */
};
#define ICMP_DEST_UNREACH 3
#define ICMP_REDIRECT     5
#define ICMP_ECHO         8
#define ICMP_FRAG_NEEDED  4 /* code of ICMP_DEST_UNREACH: "fragmentation needed and DF set" */

/* One 802.1Q / 802.1AD tag as it follows the two MAC addresses. */
struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};

#define IP_MF     0x2000 /* "more fragments" flag in iphdr.frag_off (host order) */
#define IP_OFFSET 0x1fff /* fragment offset mask */

/* The two ctx fields every program needs, as packet pointers. */
#define XDP_DATA(ctx)     ((void *)(long)(ctx)->data)
#define XDP_DATA_END(ctx) ((void *)(long)(ctx)->data_end)

/* Loop pragmas: clang and GCC spell them differently. */
#if defined(__clang__)
#define XDP2TC_UNROLL   _Pragma("unroll")
#define XDP2TC_NOUNROLL _Pragma("clang loop unroll(disable)")
#else
#define XDP2TC_UNROLL   _Pragma("GCC unroll 8")
#define XDP2TC_NOUNROLL _Pragma("GCC unroll 1")
#endif

#endif /* XDP2TC_CORPUS_H */
