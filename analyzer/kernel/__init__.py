"""The kernel oracle: run an object's XDP programs in the running kernel with
BPF_PROG_TEST_RUN, many packets per second, from one process.

Why: the analyzer predicts a verdict (and an output packet) for every input symbolically;
the only authority on what the program really does is the kernel's verifier-accepted,
JIT-compiled code. This module loads the object once (libbpf through ctypes, no compiled
extension, no helper process) and then costs one bpf() syscall per packet, so
differential tests can compare predictions with the kernel packet by packet, and the cost
model can be calibrated from `duration_ns` with large repeat counts.

Use::

    check_kernel()                       # KernelUnavailable (one line) if it cannot work
    with load("corpus/build/clang/thesis_static_rules.o") as obj:
        res = obj.run("xdp_static_rules", packet)       # RunResult(retval, packet_out, ns)
        results = obj.run_many("xdp_static_rules", packets)
        obj.map_update("blacklist", key, value)

Kernel behaviour that shapes the API (net/bpf/test_run.c, bpf_prog_test_run_xdp):

* A packet shorter than ETH_HLEN (14 bytes) is rejected with EINVAL; `run` refuses it up
  front with PacketError, so analyzers must constrain len >= 14 for kernel comparisons.
* The packet is copied into one page: XDP_PACKET_HEADROOM (256) before it and
  `skb_shared_info` (320 bytes on x86_64) after, so at most MAX_LINEAR_PACKET (3520) bytes
  are linear. Longer inputs are not refused: the rest goes into page fragments, and a
  program without `xdp.frags` then sees `data_end` at the end of the linear part only. `run`
  refuses packets longer than MAX_LINEAR_PACKET unless `allow_frags=True` (the default for
  `xdp.frags` programs), so a comparison never silently sees a truncated packet.
* Programs for devmap/cpumap egress (`xdp/devmap`, `xdp/cpumap`) cannot be test-run at
  all (EINVAL; the error says so).
* Without a ctx the run uses the loopback device's RX queue 0 (ingress_ifindex 1,
  rx_queue_index 0). With an XdpCtx, `ingress_ifindex` must name an existing device in
  the caller's network namespace (else ENODEV) and `rx_queue_index` must be below its
  real number of RX queues (else EINVAL); `rx_queue_index != 0` with `ingress_ifindex 0`
  is EINVAL, and `egress_ifindex` must be 0. Loopback (1) with queue 0 is the only pair
  guaranteed to exist.
* Return codes are returned, never acted on: XDP_TX and XDP_REDIRECT come back as retval
  3 and 4 (a bpf_redirect() target is not checked or used).
* `repeat > 1` runs the program repeatedly on the *same* buffer without resetting it: the
  output packet is the result of `repeat` applications (a MAC swap done twice is the
  identity) and `duration_ns` is the mean per run. Use repeat=1 for verdict and packet
  comparisons, large repeats for timing.
* Tail calls work as in production: libbpf fills a PROG_ARRAY from its static `.values`
  at load, and `load(programs=[...])` keeps those targets loaded.
* Maps keep their state between runs (counters, conntrack-like tables): that is the
  kernel's behaviour, so tests that need a clean state call `map_clear`.

The room, one module per concern: libbpf.py (ctypes glue, errors, `check_kernel`), maps.py
(map syscalls, maps of other processes), run.py (`LoadedObject`: test runs, its maps),
load.py (`load`, and `Loader`, the one raw bpf() load path). The names below are the
oracle's interface: use them as `kernel.load`, `kernel.KernelLoadError`, ...
"""

from .libbpf import (
    BPF_PROG_TYPE_SCHED_CLS,
    BPF_PROG_TYPE_UNSPEC,
    BPF_PROG_TYPE_XDP,
    EXIT_UNAVAILABLE,
    KernelLoadError,
    KernelRunError,
    KernelUnavailable,
    PacketError,
    check_kernel,
    library,
)
from .load import TC_SECTION_PREFIXES, Loader, load, load_btf, load_program, program_type
from .maps import (
    KernelMap,
    MapInfo,
    create_map,
    kernel_btf,
    map_delete,
    map_dump,
    map_id,
    map_keys,
    map_lookup,
    map_update,
    open_map_by_id,
    open_pinned_map,
    possible_cpus,
    prog_id,
    program_map_ids,
)
from .run import OUT_BUFFER_SIZE, LoadedObject, RingBuffer, RunResult, XdpCtx

__all__ = [
    "BPF_PROG_TYPE_SCHED_CLS",
    "BPF_PROG_TYPE_UNSPEC",
    "BPF_PROG_TYPE_XDP",
    "EXIT_UNAVAILABLE",
    "OUT_BUFFER_SIZE",
    "TC_SECTION_PREFIXES",
    "KernelLoadError",
    "KernelMap",
    "KernelRunError",
    "KernelUnavailable",
    "LoadedObject",
    "Loader",
    "MapInfo",
    "PacketError",
    "RingBuffer",
    "RunResult",
    "XdpCtx",
    "check_kernel",
    "create_map",
    "kernel_btf",
    "library",
    "load",
    "load_btf",
    "load_program",
    "map_delete",
    "map_dump",
    "map_id",
    "map_keys",
    "map_lookup",
    "map_update",
    "open_map_by_id",
    "open_pinned_map",
    "possible_cpus",
    "prog_id",
    "program_map_ids",
    "program_type",
]
