/* Origin: xdp-tools, xdp-filter/xdpfilt_alw_tcp.c (xdp-project/xdp-tools at commit
 * 59c4733278c14e034d8da099e4154b6465a0c048), unchanged below this comment; licence GPL-2.0
 * as its header says. Built by tests/public/build.py against Debian's libxdp-dev headers
 * (<xdp/...>, version 1.3.1, installed by `make setup`). */
/* SPDX-License-Identifier: GPL-2.0 */

#define FILT_MODE_DEF_ALLOW
#undef FILT_MODE_ETHERNET
#undef FILT_MODE_IPV4
#undef FILT_MODE_IPV6
#undef FILT_MODE_UDP
#define FILT_MODE_TCP
#define FUNCNAME xdpfilt_alw_tcp
#include "xdpfilt_prog.h"
