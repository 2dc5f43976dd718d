/* xdp2tc shim (not from upstream): the kernel tree's <uapi/linux/bpf.h> is the installed
 * UAPI header outside the tree. */
#include <linux/bpf.h>
