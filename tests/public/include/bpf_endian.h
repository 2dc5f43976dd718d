/* xdp2tc shim (not from upstream): the xdp-tutorial sources include libbpf's "bpf_endian.h"
 * by its bare name (their Makefile puts libbpf's headers on the include path). */
#include <bpf/bpf_endian.h>
