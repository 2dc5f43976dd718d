/* xdp2tc shim (not from upstream): what the public sources of tests/public expect from the
 * "bpf_helpers.h" of their own trees (samples/bpf, Suricata's ebpf/), on top of libbpf's
 * <bpf/bpf_helpers.h>: legacy `struct bpf_map_def` maps in SEC("maps"), the kernel's short
 * integer types, htons/ntohs, memcpy/memset, struct tcphdr/udphdr and AF_INET/AF_INET6. */
#ifndef XDP2TC_PUBLIC_BPF_HELPERS_H
#define XDP2TC_PUBLIC_BPF_HELPERS_H
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __u16 uint16_t;
typedef __u32 uint32_t;
typedef __u64 uint64_t;
#ifndef NULL
#define NULL ((void *)0)
#endif
#define htons(x) bpf_htons(x)
#define __constant_htons(x) bpf_htons(x)
#define ntohs(x) bpf_ntohs(x)
#define memcpy(d, s, n) __builtin_memcpy((d), (s), (n))
#define memset(d, c, n) __builtin_memset((d), (c), (n))
/* the kernel tree's headers give samples/bpf these (xdp_tx_iptunnel_kern.c) */
#include <linux/tcp.h>
#include <linux/udp.h>
#ifndef AF_INET
#define AF_INET 2
#define AF_INET6 10
#endif
#endif
