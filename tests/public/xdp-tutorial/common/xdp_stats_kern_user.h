/* Origin: xdp-tutorial, common/xdp_stats_kern_user.h (github.com/Payne-X6/xdp-tutorial, a fork
 * of xdp-project/xdp-tutorial, at commit 42b7aebf5ad1de3c48a32a5b17828b41cd1b72c7), unchanged
 * below this comment; licence GPL-2.0 as its header says. */
/* SPDX-License-Identifier: GPL-2.0 */

/* Used by BPF-prog kernel side BPF-progs and userspace programs,
 * for sharing xdp_stats common struct and DEFINEs.
 */
#ifndef __XDP_STATS_KERN_USER_H
#define __XDP_STATS_KERN_USER_H

/* This is the data record stored in the map */
struct datarec {
	__u64 rx_packets;
	__u64 rx_bytes;
};

#ifndef MAX_RX_QUEUES
#define MAX_RX_QUEUES 128
#endif

#endif /* __XDP_STATS_KERN_USER_H */
