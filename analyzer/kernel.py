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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as errno_mod
import os
import platform
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lifter.maptypes import map_type

from .xdp import ETH_HLEN, MAX_LINEAR_PACKET, XDP_PASS

#: What a CLI should exit with when the kernel oracle cannot run (no privileges, ...).
EXIT_UNAVAILABLE = 2

#: Output buffer size: covers growth by bpf_xdp_adjust_head/adjust_tail and frags.
OUT_BUFFER_SIZE = 64 * 1024

BPF_PROG_TYPE_UNSPEC = 0
BPF_PROG_TYPE_SCHED_CLS = 3
BPF_PROG_TYPE_XDP = 6
#: Section prefixes of tc (cls_bpf) programs: loaded as SCHED_CLS when libbpf does not know
#: the section (`tc_vlan_push`); every other unknown section loads as XDP.
TC_SECTION_PREFIXES = ("tc", "classifier")

CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21
CAP_BPF = 39


class KernelUnavailable(Exception):
    """The kernel oracle cannot run here; the message names what is missing (one line)."""

    exit_code = EXIT_UNAVAILABLE


class KernelLoadError(Exception):
    """libbpf or the verifier refused the object. The first line says what failed; the
    following lines are the tail of libbpf's messages and the verifier log."""


class KernelRunError(Exception):
    """BPF_PROG_TEST_RUN (or a map operation) failed; `errno` holds the kernel's code."""

    def __init__(self, message: str, err: int = 0):
        super().__init__(message)
        self.errno = err


class PacketError(KernelRunError, ValueError):
    """The packet cannot be run as given (too short, too long for a linear buffer)."""


@dataclass(frozen=True)
class XdpCtx:
    """The `struct xdp_md` fields a test may choose. See the module docstring for what the
    kernel accepts: the device must exist in this network namespace and the queue must be
    below its RX queue count; (0, 0) means "kernel default" = loopback queue 0."""

    ingress_ifindex: int = 0
    rx_queue_index: int = 0


@dataclass(frozen=True)
class RunResult:
    """One test run: the program's return value (XDP_* action), the packet as the program
    left it (after adjust_head/tail and writes), and the kernel-measured mean ns per run."""

    retval: int
    packet_out: bytes
    duration_ns: int


# --------------------------------------------------------------------------- ctypes glue


class _TestRunOpts(ctypes.Structure):
    """struct bpf_test_run_opts from <bpf/bpf.h> (libbpf 1.1)."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("data_in", ctypes.c_void_p),
        ("data_out", ctypes.c_void_p),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_void_p),
        ("ctx_out", ctypes.c_void_p),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("repeat", ctypes.c_int),
        ("duration", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("cpu", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
    ]


class _XdpMd(ctypes.Structure):
    """struct xdp_md (UAPI): the ctx_in of an XDP test run."""

    _fields_ = [
        (name, ctypes.c_uint32)
        for name in ("data", "data_end", "data_meta", "ingress_ifindex", "rx_queue_index", "egress_ifindex")
    ]


_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)

_lib: ctypes.CDLL | None = None
_libc = ctypes.CDLL(None, use_errno=True)
_libc.vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]
_libc.vsnprintf.restype = ctypes.c_int

#: libbpf messages captured while a `load` is in progress (None: not capturing).
_captured: list[str] | None = None


#: sizeof(va_list) where it is a struct passed by reference (va_copy is a plain copy).
_VA_LIST_SIZE = {"x86_64": 24, "aarch64": 32}.get(platform.machine())


def _on_libbpf_print(level: int, fmt: bytes, args: int) -> int:
    """libbpf's print callback: format with vsnprintf (the va_list arrives as the pointer
    it decays to) and keep the text when a load is capturing. A verifier log comes as one
    huge message, so the size is measured first on a copy of the va_list (va_copy is a
    byte copy on x86_64 and aarch64) and nothing is truncated."""
    if _captured is None or level > 1:  # keep WARN and INFO, drop DEBUG
        return 0
    size = 8192
    if _VA_LIST_SIZE:
        copy = ctypes.create_string_buffer(_VA_LIST_SIZE)
        ctypes.memmove(copy, args, _VA_LIST_SIZE)
        size = max(_libc.vsnprintf(None, 0, fmt, ctypes.addressof(copy)) + 1, 1)
    buf = ctypes.create_string_buffer(size)
    _libc.vsnprintf(buf, size, fmt, args)
    _captured.append(buf.value.decode(errors="replace"))
    return 0


_print_cb = _PRINT_FN(_on_libbpf_print)  # module-level: must outlive every libbpf call


def library() -> ctypes.CDLL | None:
    """libbpf with the signatures this module uses, or None if it is not installed."""
    global _lib
    if _lib is not None:
        return _lib
    name = ctypes.util.find_library("bpf") or "libbpf.so.1"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    vp, cp, sz, i32, u32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint32
    sigs = {
        "bpf_object__open_file": (vp, [cp, vp]),
        "bpf_object__load": (i32, [vp]),
        "bpf_object__close": (None, [vp]),
        "bpf_object__next_program": (vp, [vp, vp]),
        "bpf_object__next_map": (vp, [vp, vp]),
        "bpf_program__name": (cp, [vp]),
        "bpf_program__section_name": (cp, [vp]),
        "bpf_program__type": (i32, [vp]),
        "bpf_program__set_type": (i32, [vp, i32]),
        "bpf_program__set_autoload": (i32, [vp, ctypes.c_bool]),
        "bpf_program__autoload": (ctypes.c_bool, [vp]),
        "bpf_program__fd": (i32, [vp]),
        "bpf_map__name": (cp, [vp]),
        "bpf_map__type": (i32, [vp]),
        "bpf_map__fd": (i32, [vp]),
        "bpf_map__key_size": (u32, [vp]),
        "bpf_map__value_size": (u32, [vp]),
        "bpf_map__max_entries": (u32, [vp]),
        "bpf_map__is_internal": (ctypes.c_bool, [vp]),
        "bpf_map__initial_value": (vp, [vp, ctypes.POINTER(sz)]),
        "bpf_map__set_initial_value": (i32, [vp, vp, sz]),
        "bpf_map__set_pin_path": (i32, [vp, cp]),
        "bpf_map_update_elem": (i32, [i32, vp, vp, ctypes.c_uint64]),
        "bpf_map_lookup_elem": (i32, [i32, vp, vp]),
        "bpf_map_delete_elem": (i32, [i32, vp]),
        "bpf_map_get_next_key": (i32, [i32, vp, vp]),
        "bpf_prog_load": (i32, [i32, cp, cp, vp, sz, vp]),
        "bpf_map_create": (i32, [i32, cp, u32, u32, u32, vp]),
        "bpf_prog_test_run_opts": (i32, [i32, ctypes.POINTER(_TestRunOpts)]),
        "libbpf_num_possible_cpus": (i32, []),
        "libbpf_set_print": (vp, [vp]),
        # live maps of other processes (issue 12: `sync`, `--maps-from pinned:|prog:`)
        "bpf_obj_get": (i32, [cp]),
        "bpf_map_get_fd_by_id": (i32, [u32]),
        "bpf_prog_get_fd_by_id": (i32, [u32]),
        "bpf_obj_get_info_by_fd": (i32, [i32, vp, ctypes.POINTER(u32)]),
        "bpf_map_lookup_batch": (i32, [i32, vp, vp, vp, vp, ctypes.POINTER(u32), vp]),
        "btf__load_from_kernel_by_id": (vp, [u32]),
        "btf__raw_data": (vp, [vp, ctypes.POINTER(u32)]),
        "btf__free": (None, [vp]),
        "bpf_object__find_program_by_name": (vp, [vp, cp]),
        "bpf_program__attach": (vp, [vp]),
        "bpf_link__destroy": (i32, [vp]),
        "ring_buffer__new": (vp, [i32, vp, vp, vp]),
        "ring_buffer__poll": (i32, [vp, i32]),
        "ring_buffer__free": (None, [vp]),
    }
    try:
        for fn, (res, argtypes) in sigs.items():
            getattr(lib, fn).restype = res
            getattr(lib, fn).argtypes = argtypes
    except AttributeError:  # a libbpf older than 1.0
        return None
    _lib = lib
    return lib


# --------------------------------------------------------------------------- availability


def _capabilities() -> set[int]:
    """Effective capabilities of this process (CapEff in /proc/self/status)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    mask = int(line.split()[1], 16)
                    return {bit for bit in range(64) if mask >> bit & 1}
    except OSError:
        pass
    return {CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_BPF} if os.geteuid() == 0 else set()


_probed = False


def check_kernel() -> None:
    """Raise KernelUnavailable (one line: what is missing) unless XDP programs can be
    loaded and test-run here. Cheap after the first success (the probe is cached)."""
    global _probed
    lib = library()
    if lib is None:
        raise KernelUnavailable("libbpf (libbpf.so.1, >= 1.0) is not installed: apt-get install libbpf1")
    caps = _capabilities()
    if not caps & {CAP_BPF, CAP_SYS_ADMIN} or CAP_NET_ADMIN not in caps:
        if os.geteuid() != 0:
            raise KernelUnavailable(
                "not root: loading and test-running XDP programs needs CAP_BPF "
                "(or CAP_SYS_ADMIN) and CAP_NET_ADMIN; run as root"
            )
        raise KernelUnavailable(
            "root without CAP_BPF (or CAP_SYS_ADMIN) and CAP_NET_ADMIN (a "
            "container or a cleared capability bounding set?): cannot load "
            "XDP programs"
        )
    if _probed:
        return
    # mov r0, XDP_PASS; exit -- then one test run on a minimal frame.
    insns = bytes.fromhex("b7000000020000009500000000000000")
    buf = ctypes.create_string_buffer(insns, len(insns))
    fd = lib.bpf_prog_load(BPF_PROG_TYPE_XDP, b"xdp2tc_probe", b"GPL", buf, 2, None)
    if fd < 0:
        err = ctypes.get_errno() or -fd
        hint = (
            " (kernel.unprivileged_bpf_disabled, a seccomp filter or a container may block bpf())"
            if err == errno_mod.EPERM
            else ""
        )
        raise KernelUnavailable(
            f"bpf(BPF_PROG_LOAD) returned {errno_mod.errorcode.get(err, err)}: {os.strerror(err)}{hint}"
        )
    try:
        opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts))
        frame = ctypes.create_string_buffer(ETH_HLEN)
        opts.data_in, opts.data_size_in, opts.repeat = ctypes.addressof(frame), ETH_HLEN, 1
        if lib.bpf_prog_test_run_opts(fd, ctypes.byref(opts)) != 0 or opts.retval != XDP_PASS:
            err = ctypes.get_errno()
            raise KernelUnavailable(
                f"BPF_PROG_TEST_RUN on an XDP program failed: {os.strerror(err) if err else f'retval {opts.retval}'}"
            )
    finally:
        os.close(fd)
    _probed = True


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class MapInfo:
    """A loaded map: its fd and the sizes map operations must honour."""

    name: str
    fd: int
    type: int
    key_size: int
    value_size: int
    max_entries: int

    @property
    def percpu(self) -> bool:
        return map_type(self.type).percpu

    @property
    def value_bytes(self) -> int:
        """Bytes of a value as the syscall reads/writes it: for per-CPU maps one slot of
        round_up(value_size, 8) per possible CPU, CPU i at offset i * slot."""
        if self.percpu:
            return (self.value_size + 7) // 8 * 8 * possible_cpus()
        return self.value_size


def possible_cpus() -> int:
    """libbpf_num_possible_cpus(): how many per-CPU slots a per-CPU map value has."""
    lib = library()
    n = lib.libbpf_num_possible_cpus() if lib else -1
    if n <= 0:
        raise KernelRunError("cannot read the number of possible CPUs", -n if n < 0 else 0)
    return n


class LoadedObject:
    """An object loaded into the kernel: programs by name (`programs`), maps by name
    (`maps`; global data also under its section name, e.g. ".data"). A context manager:
    leaving it closes the libbpf object and every fd, so nothing outlives the test."""

    def __init__(
        self,
        path: str,
        handle: int | None,
        programs: dict[str, int],
        maps: dict[str, MapInfo],
        own_fds: list[int],
        sections: dict[str, str] | None = None,
        types: dict[str, int] | None = None,
    ):
        self.path = path
        self.types = types or {}  # program -> BPF_PROG_TYPE_* (XDP when not given)
        self._handle = handle  # libbpf bpf_object *, or None for the raw loader
        self.programs = programs
        self.sections = sections or {}  # program -> ELF section (its attach type)
        self.maps = maps
        self._own_fds = own_fds
        self._links: list[int] = []  # bpf_link * from attach()
        self._rings: list[RingBuffer] = []
        self._opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts))
        self._in = ctypes.create_string_buffer(OUT_BUFFER_SIZE)
        self._out = ctypes.create_string_buffer(OUT_BUFFER_SIZE)
        self._ctx = _XdpMd()
        self._in_addr = ctypes.addressof(self._in)
        self._out_addr = ctypes.addressof(self._out)

    # -- lifetime
    def close(self) -> None:
        """Close every fd and the libbpf object (idempotent)."""
        for fd in self._own_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._own_fds = []
        for ring in self._rings:
            ring.close()
        for link in self._links:
            library().bpf_link__destroy(link)
        self._rings, self._links = [], []
        if self._handle is not None:
            library().bpf_object__close(self._handle)
            self._handle = None
        self.programs, self.maps = {}, {}

    def __enter__(self) -> LoadedObject:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def own(self, fd: int) -> None:
        """Close `fd` with this object (the `Loader` hands over what it creates)."""
        self._own_fds.append(fd)

    # -- running
    def _prog_fd(self, program: str) -> int:
        fd = self.programs.get(program)
        if fd is None:
            raise KeyError(
                f"{self.path}: no loaded program {program!r}; loaded: " + (", ".join(sorted(self.programs)) or "none")
            )
        return fd

    def _xdp_fd(self, program: str) -> int:
        fd = self._prog_fd(program)
        if self.types.get(program, BPF_PROG_TYPE_XDP) != BPF_PROG_TYPE_XDP:
            raise KernelRunError(
                f"{self.path}: program {program} (section "
                f"{self.sections.get(program, '?')}) is loaded as a tc program, "
                "not XDP: runs take XDP programs only",
                errno_mod.EINVAL,
            )
        return fd

    def _frags(self, program: str, allow_frags: bool | None) -> bool:
        if allow_frags is None:  # multi-buffer programs read beyond the linear part by design
            return self.sections.get(program, "").startswith("xdp.frags")
        return allow_frags

    def run(
        self,
        program: str,
        packet: bytes,
        *,
        repeat: int = 1,
        ctx: XdpCtx | None = None,
        allow_frags: bool | None = None,
    ) -> RunResult:
        """Run `program` on `packet` once (or `repeat` times on the same buffer, for
        timing). Raises PacketError for packets the kernel would refuse or truncate, and
        KernelRunError (with errno) when the test run fails. `allow_frags` (default: only
        for `xdp.frags` programs) lets packets longer than MAX_LINEAR_PACKET through."""
        return self._run(self._xdp_fd(program), packet, repeat, ctx, self._frags(program, allow_frags), program)

    def run_many(
        self, program: str, packets: Iterable[bytes], *, ctx: XdpCtx | None = None, allow_frags: bool | None = None
    ) -> list[RunResult]:
        """`run` for each packet in order, reusing the opts struct and both buffers: one
        syscall per packet, no allocation besides the output bytes."""
        fd = self._xdp_fd(program)
        frags = self._frags(program, allow_frags)
        run = self._run
        return [run(fd, pkt, 1, ctx, frags, program) for pkt in packets]

    def _run(
        self, fd: int, packet: bytes, repeat: int, ctx: XdpCtx | None, allow_frags: bool, program: str
    ) -> RunResult:
        size = len(packet)
        if size < ETH_HLEN:
            raise PacketError(
                f"packet of {size} bytes is shorter than ETH_HLEN ({ETH_HLEN}): "
                "BPF_PROG_TEST_RUN rejects it with EINVAL; compare only packets "
                f">= {ETH_HLEN} bytes",
                errno_mod.EINVAL,
            )
        if size > OUT_BUFFER_SIZE or (size > MAX_LINEAR_PACKET and not allow_frags):
            raise PacketError(
                f"packet of {size} bytes exceeds the {MAX_LINEAR_PACKET} bytes the "
                "kernel keeps linear; the rest would become fragments the program "
                "does not see as packet data (pass allow_frags=True to run it "
                f"anyway, at most {OUT_BUFFER_SIZE})",
                errno_mod.E2BIG,
            )
        opts = self._opts
        ctypes.memmove(self._in_addr, packet, size)
        opts.data_in = self._in_addr
        opts.data_size_in = size
        opts.data_out = self._out_addr
        opts.data_size_out = OUT_BUFFER_SIZE
        opts.repeat = repeat
        opts.retval = opts.duration = 0
        if ctx is not None and (ctx.ingress_ifindex or ctx.rx_queue_index):
            md = self._ctx
            md.data = md.data_meta = md.egress_ifindex = 0
            md.data_end = size
            md.ingress_ifindex = ctx.ingress_ifindex
            md.rx_queue_index = ctx.rx_queue_index
            opts.ctx_in = ctypes.addressof(md)
            opts.ctx_size_in = ctypes.sizeof(md)
        else:
            opts.ctx_in = None
            opts.ctx_size_in = 0
        if _lib.bpf_prog_test_run_opts(fd, ctypes.byref(opts)) != 0:
            err = ctypes.get_errno()
            raise KernelRunError(self._run_error(err, size, ctx, self.sections.get(program, "")), err)
        return RunResult(opts.retval, ctypes.string_at(self._out_addr, opts.data_size_out), opts.duration)

    @staticmethod
    def _run_error(err: int, size: int, ctx: XdpCtx | None, section: str) -> str:
        name = errno_mod.errorcode.get(err, str(err))
        msg = f"BPF_PROG_TEST_RUN failed with {name} ({os.strerror(err)}) on a {size}-byte packet"
        if err == errno_mod.EINVAL and ("/devmap" in section or "/cpumap" in section):
            msg += (
                f"; section {section}: devmap/cpumap egress programs cannot be test-run "
                "(the kernel refuses their attach types)"
            )
        elif ctx is not None and err in (errno_mod.ENODEV, errno_mod.EINVAL):
            msg += (
                f"; ctx ingress_ifindex={ctx.ingress_ifindex} rx_queue_index="
                f"{ctx.rx_queue_index}: the device must exist in this network namespace "
                "and the queue must be below its RX queue count"
            )
        elif err == errno_mod.ENOSPC:
            msg += f"; the output grew beyond {OUT_BUFFER_SIZE} bytes"
        return msg

    # -- maps
    def map(self, name: str) -> MapInfo:
        info = self.maps.get(name)
        if info is None:
            raise KeyError(f"{self.path}: no map {name!r}; maps: " + (", ".join(sorted(self.maps)) or "none"))
        return info

    def map_update(self, name: str, key: bytes, value: bytes, flags: int = 0) -> None:
        """bpf_map_update_elem. Per-CPU maps take `MapInfo.value_bytes` (all CPUs' slots)."""
        map_update(self.map(name), key, value, flags)

    def map_lookup(self, name: str, key: bytes) -> bytes | None:
        """The value stored under `key` (all CPUs' slots for per-CPU maps), or None."""
        return map_lookup(self.map(name), key)

    # -- attaching (the project's own tracing programs: offload/mapwatch.bpf.c)
    def attach(self, program: str) -> None:
        """bpf_program__attach: attach `program` where its section says (a tracepoint,
        ...); the link lives until `close()`."""
        lib = library()
        if self._handle is None:
            raise KernelLoadError(f"{self.path}: attach needs an object loaded by libbpf")
        prog = lib.bpf_object__find_program_by_name(self._handle, program.encode())
        if not prog:
            raise KeyError(f"{self.path}: no program {program!r}")
        link = lib.bpf_program__attach(prog)  # libbpf >= 1.0: NULL and errno on failure
        if not link:
            err = ctypes.get_errno() or errno_mod.EINVAL
            raise KernelLoadError(f"{self.path}: attaching {program} failed: {os.strerror(err)}")
        self._links.append(link)

    def ring_buffer(self, name: str, on_record: Callable[[bytes], None]) -> RingBuffer:
        """A reader of the BPF_MAP_TYPE_RINGBUF map `name`: `poll(ms)` calls `on_record`
        with each record's bytes. Closed with the object."""
        ring = RingBuffer(self.map(name).fd, on_record)
        self._rings.append(ring)
        return ring

    def map_delete(self, name: str, key: bytes) -> bool:
        """Delete `key`; False if it was not there. (Arrays cannot delete: EINVAL.)"""
        return map_delete(self.map(name), key)

    def map_keys(self, name: str) -> Iterator[bytes]:
        """Every key, via bpf_map_get_next_key (a snapshot is taken first, so callers may
        delete while iterating)."""
        return iter(map_keys(self.map(name)))

    def map_items(self, name: str) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs; keys that vanish between the two syscalls are skipped."""
        for key in self.map_keys(name):
            value = self.map_lookup(name, key)
            if value is not None:
                yield key, value

    def map_clear(self, name: str) -> None:
        """Empty a map. ARRAY/PERCPU_ARRAY slots cannot be deleted, so they are zeroed;
        other index-keyed maps (prog/dev/cpu arrays, ...) have each slot deleted."""
        info = self.map(name)
        kind = map_type(info.type)
        if kind.always_present:
            zero = bytes(info.value_bytes)
            for i in range(info.max_entries):
                self.map_update(name, i.to_bytes(info.key_size, "little"), zero)
            return
        if kind.keyed == "index":
            for i in range(info.max_entries):
                self.map_delete(name, i.to_bytes(info.key_size, "little"))
            return
        for key in self.map_keys(name):
            self.map_delete(name, key)


# --------------------------------------------------------------------------- map syscalls


def _map_buf(data: bytes, size: int, what: str, info: MapInfo):
    # The kernel reads exactly `size` bytes from the pointer: a wrong length must never
    # reach it (it would read past the Python object).
    if len(data) != size:
        extra = (
            f" ({possible_cpus()} possible CPUs x {(info.value_size + 7) // 8 * 8} bytes)"
            if info.percpu and what == "value"
            else ""
        )
        raise ValueError(f"map {info.name}: {what} must be {size} bytes{extra}, got {len(data)}")
    return ctypes.create_string_buffer(bytes(data), max(size, 1))


def _map_check(ret: int, op: str, info: MapInfo) -> None:
    if ret != 0:
        err = ctypes.get_errno() or -ret
        raise KernelRunError(
            f"{op} on map {info.name} failed: {errno_mod.errorcode.get(err, err)} ({os.strerror(err)})", err
        )


def map_update(info: MapInfo, key: bytes, value: bytes, flags: int = 0) -> None:
    """bpf_map_update_elem on any map fd. Per-CPU maps take `value_bytes` (every CPU's slot)."""
    k = _map_buf(key, info.key_size, "key", info)
    v = _map_buf(value, info.value_bytes, "value", info)
    _map_check(library().bpf_map_update_elem(info.fd, k, v, flags), "update", info)


def map_lookup(info: MapInfo, key: bytes) -> bytes | None:
    """bpf_map_lookup_elem on any map fd: the value (every CPU's slot), or None."""
    k = _map_buf(key, info.key_size, "key", info)
    v = ctypes.create_string_buffer(max(info.value_bytes, 1))
    if library().bpf_map_lookup_elem(info.fd, k, v) != 0:
        err = ctypes.get_errno()
        if err == errno_mod.ENOENT:
            return None
        _map_check(-err or -1, "lookup", info)
    return v.raw[: info.value_bytes]


def map_delete(info: MapInfo, key: bytes) -> bool:
    """bpf_map_delete_elem on any map fd; False if the key was not there."""
    k = _map_buf(key, info.key_size, "key", info)
    if library().bpf_map_delete_elem(info.fd, k) != 0:
        err = ctypes.get_errno()
        if err == errno_mod.ENOENT:
            return False
        _map_check(-err or -1, "delete", info)
    return True


def map_dump(info: MapInfo, batch: int = 4096) -> dict[bytes, bytes]:
    """Every entry of a map: BPF_MAP_LOOKUP_BATCH where the map type has it (hash and array
    maps: one syscall per `batch` entries), else get_next_key + lookup per key (LPM tries).
    Values are raw (per-CPU maps: every CPU's slot)."""
    lib = library()
    out: dict[bytes, bytes] = {}
    vbytes = info.value_bytes
    count = max(1, min(batch, info.max_entries or batch))
    keys = ctypes.create_string_buffer(max(info.key_size, 1) * count)
    values = ctypes.create_string_buffer(max(vbytes, 1) * count)
    token_in = ctypes.create_string_buffer(max(info.key_size, 8))
    token_out = ctypes.create_string_buffer(max(info.key_size, 8))
    first = True
    while True:
        n = ctypes.c_uint32(count)
        ret = lib.bpf_map_lookup_batch(
            info.fd, None if first else token_in, token_out, keys, values, ctypes.byref(n), None
        )
        err = ctypes.get_errno() if ret != 0 else 0
        if ret != 0 and err not in (errno_mod.ENOENT,):
            if err == errno_mod.ENOSPC and count < info.max_entries:  # a hash bucket larger than count
                return map_dump(info, count * 4)
            if first and err in (errno_mod.EINVAL, errno_mod.ENOTSUP, 524):  # 524: ENOTSUPP
                return _map_dump_by_key(info)
            _map_check(-err or -1, "lookup_batch", info)
        kraw, vraw = keys.raw, values.raw
        for i in range(n.value):
            out[kraw[i * info.key_size : (i + 1) * info.key_size]] = vraw[i * vbytes : (i + 1) * vbytes]
        if ret != 0:  # ENOENT: no more entries
            return out
        ctypes.memmove(token_in, token_out, len(token_in))
        first = False


def _map_dump_by_key(info: MapInfo) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for key in map_keys(info):
        value = map_lookup(info, key)
        if value is not None:  # deleted between the two syscalls
            out[key] = value
    return out


def map_keys(info: MapInfo) -> list[bytes]:
    """Every key of a map now, via bpf_map_get_next_key (stops after max_entries keys: a hash
    map changing under the walk can restart it)."""
    lib = library()
    cur = ctypes.create_string_buffer(max(info.key_size, 1))
    nxt = ctypes.create_string_buffer(max(info.key_size, 1))
    keys = []
    prev = None
    while lib.bpf_map_get_next_key(info.fd, prev, nxt) == 0:
        keys.append(nxt.raw[: info.key_size])
        ctypes.memmove(cur, nxt, info.key_size)
        prev = cur
        if len(keys) > info.max_entries:
            break
    return keys


@dataclass(frozen=True)
class KernelMap(MapInfo):
    """A map that lives in the kernel independently of this process (pinned in bpffs or held
    by a loaded program), opened by this process: its kernel id and BTF ids too. `close()`
    releases the fd."""

    id: int = 0
    flags: int = 0
    btf_id: int = 0
    btf_key_type_id: int = 0
    btf_value_type_id: int = 0

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class _BpfMapInfo(ctypes.Structure):
    """struct bpf_map_info (include/uapi/linux/bpf.h), the fields up to btf_value_type_id."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("key_size", ctypes.c_uint32),
        ("value_size", ctypes.c_uint32),
        ("max_entries", ctypes.c_uint32),
        ("map_flags", ctypes.c_uint32),
        ("name", ctypes.c_char * 16),
        ("ifindex", ctypes.c_uint32),
        ("btf_vmlinux_value_type_id", ctypes.c_uint32),
        ("netns_dev", ctypes.c_uint64),
        ("netns_ino", ctypes.c_uint64),
        ("btf_id", ctypes.c_uint32),
        ("btf_key_type_id", ctypes.c_uint32),
        ("btf_value_type_id", ctypes.c_uint32),
    ]


class _BpfProgInfo(ctypes.Structure):
    """struct bpf_prog_info (include/uapi/linux/bpf.h), the fields up to name."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("tag", ctypes.c_uint8 * 8),
        ("jited_prog_len", ctypes.c_uint32),
        ("xlated_prog_len", ctypes.c_uint32),
        ("jited_prog_insns", ctypes.c_uint64),
        ("xlated_prog_insns", ctypes.c_uint64),
        ("load_time", ctypes.c_uint64),
        ("created_by_uid", ctypes.c_uint32),
        ("nr_map_ids", ctypes.c_uint32),
        ("map_ids", ctypes.c_uint64),
        ("name", ctypes.c_char * 16),
    ]


def _obj_info(fd: int, info: ctypes.Structure, what: str) -> None:
    size = ctypes.c_uint32(ctypes.sizeof(info))
    if library().bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)) != 0:
        err = ctypes.get_errno()
        raise KernelRunError(f"BPF_OBJ_GET_INFO_BY_FD on {what} failed: {os.strerror(err)}", err)


def _kernel_map(fd: int, what: str) -> KernelMap:
    info = _BpfMapInfo()
    try:
        _obj_info(fd, info, what)
    except KernelRunError:
        os.close(fd)
        raise
    return KernelMap(
        info.name.decode(errors="replace"),
        fd,
        info.type,
        info.key_size,
        info.value_size,
        info.max_entries,
        id=info.id,
        flags=info.map_flags,
        btf_id=info.btf_id,
        btf_key_type_id=info.btf_key_type_id,
        btf_value_type_id=info.btf_value_type_id,
    )


def _fd_or_raise(fd: int, what: str) -> int:
    if fd < 0:
        err = ctypes.get_errno() or -fd
        raise KernelRunError(f"{what}: {errno_mod.errorcode.get(err, err)} ({os.strerror(err)})", err)
    return fd


def open_pinned_map(path: str) -> KernelMap:
    """The map pinned at `path` in bpffs (BPF_OBJ_GET), with its kernel info."""
    check_kernel()
    fd = _fd_or_raise(library().bpf_obj_get(str(path).encode()), f"{path}: BPF_OBJ_GET")
    return _kernel_map(fd, str(path))


def open_map_by_id(map_id: int) -> KernelMap:
    """The map with kernel id `map_id` (BPF_MAP_GET_FD_BY_ID), with its kernel info."""
    check_kernel()
    fd = _fd_or_raise(library().bpf_map_get_fd_by_id(map_id), f"map id {map_id}: BPF_MAP_GET_FD_BY_ID")
    return _kernel_map(fd, f"map id {map_id}")


def program_map_ids(prog_id: int) -> tuple[str, list[int]]:
    """A loaded program's name and the ids of the maps it uses (BPF_PROG_GET_FD_BY_ID,
    then BPF_OBJ_GET_INFO_BY_FD twice: once for nr_map_ids, once for the ids)."""
    check_kernel()
    lib = library()
    fd = _fd_or_raise(lib.bpf_prog_get_fd_by_id(prog_id), f"program id {prog_id}: BPF_PROG_GET_FD_BY_ID")
    try:
        info = _BpfProgInfo()
        _obj_info(fd, info, f"program id {prog_id}")
        count = info.nr_map_ids
        ids = (ctypes.c_uint32 * max(count, 1))()
        info = _BpfProgInfo(nr_map_ids=count, map_ids=ctypes.addressof(ids))
        _obj_info(fd, info, f"program id {prog_id}")
        return info.name.decode(errors="replace"), list(ids)[: min(count, info.nr_map_ids)]
    finally:
        os.close(fd)


def map_id(fd: int) -> int:
    """The kernel id of the map behind `fd` (BPF_OBJ_GET_INFO_BY_FD)."""
    info = _BpfMapInfo()
    _obj_info(fd, info, f"map fd {fd}")
    return info.id


def prog_id(fd: int) -> int:
    """The kernel id of the program behind `fd` (BPF_OBJ_GET_INFO_BY_FD)."""
    info = _BpfProgInfo()
    _obj_info(fd, info, f"program fd {fd}")
    return info.id


def kernel_btf(btf_id: int) -> bytes:
    """The raw BTF blob the kernel holds under `btf_id` (a map's or program's BTF)."""
    lib = library()
    btf = lib.btf__load_from_kernel_by_id(btf_id)  # libbpf >= 1.0: NULL and errno on failure
    if not btf:
        err = ctypes.get_errno()
        raise KernelRunError(f"BTF id {btf_id}: cannot load: {os.strerror(err)}", err)
    try:
        size = ctypes.c_uint32(0)
        data = lib.btf__raw_data(btf, ctypes.byref(size))
        return ctypes.string_at(data, size.value)
    finally:
        lib.btf__free(btf)


_RING_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class RingBuffer:
    """libbpf's ring_buffer over one BPF_MAP_TYPE_RINGBUF fd: `poll(timeout_ms)` hands each
    record's bytes to the callback and returns how many it consumed."""

    def __init__(self, fd: int, on_record: Callable[[bytes], None]):
        def deliver(_ctx, data, size) -> int:
            on_record(ctypes.string_at(data, size))
            return 0

        self._cb = _RING_CB(deliver)  # must outlive the ring buffer
        self._ring = library().ring_buffer__new(fd, ctypes.cast(self._cb, ctypes.c_void_p), None, None)
        if not self._ring:
            err = ctypes.get_errno()
            raise KernelRunError(f"ring_buffer__new failed: {os.strerror(err)}", err)

    def poll(self, timeout_ms: int) -> int:
        n = library().ring_buffer__poll(self._ring, timeout_ms)
        if n < 0 and -n != errno_mod.EINTR:
            raise KernelRunError(f"ring_buffer__poll failed: {os.strerror(-n)}", -n)
        return max(n, 0)

    def close(self) -> None:
        if self._ring:
            library().ring_buffer__free(self._ring)
            self._ring = None


def _lifted(path: str):
    """The lifter's view of the object (programs, PROG_ARRAY `.values`), or None when it
    cannot read it (libbpf then has the last word)."""
    from lifter.program import load_object

    try:
        return load_object(path)
    except Exception:
        return None


def _log_lines(captured: list[str]) -> list[str]:
    """libbpf's messages as lines, without a BTF load log libbpf itself chose to ignore
    (kernels reject some GCC BTF; libbpf then loads without it)."""
    lines = "".join(captured).splitlines()
    out, skipping = [], False
    for line in lines:
        if "-- BEGIN BTF LOAD LOG" in line:
            skipping = True
        elif skipping:
            skipping = "-- END BTF LOAD LOG" not in line
        else:
            out.append(line)
    return out


_IGNORED = re.compile(r"BTF loading error|BTF is optional|skipping|failed to load object")
_FAILURE = re.compile(r"fail|error|invalid|not supported|unsupported|unrecognized|unknown", re.I)


def _summary(lines: list[str]) -> str:
    """The one line that says why: the verifier's last word for a rejected program
    (the line before "processed N insns"), else libbpf's first complaint."""
    for i, line in enumerate(lines):
        if "-- BEGIN PROG LOAD LOG --" in line:
            prog = line.split("-- BEGIN")[0].replace("libbpf: ", "").strip()
            body = []
            for nxt in lines[i + 1 :]:
                if "-- END PROG LOAD LOG --" in nxt:
                    break
                body.append(nxt)
            body = [b for b in body if b.strip() and not b.startswith(("processed ", "verification time"))]
            if body:
                return f"{prog} {body[-1].strip()}"
    for line in lines:
        if _FAILURE.search(line) and not _IGNORED.search(line):
            return line.replace("libbpf: ", "").strip()
    return ""


def _load_error(path: str, what: str, err: int, captured: list[str], limit: int = 40) -> KernelLoadError:
    lines = _log_lines(captured)
    why = _summary(lines)
    code = errno_mod.errorcode.get(err, str(err)) if err else "error"
    head = f"{path}: {what} ({code}){': ' + why if why else ''}"
    return KernelLoadError("\n".join([head] + lines[-limit:]))


def load(
    path: str | Path, *, programs: list[str] | None = None, rodata: dict[str, bytes] | None = None
) -> LoadedObject:
    """Load the object at `path` into the kernel and return it (use as a context manager).

    * programs: names to load (default: all); others are not loaded, except tail-call
      targets a PROG_ARRAY's static `.values` names (libbpf fills the array at load).
    * rodata: initial values of global data maps before load, keyed by section (".rodata",
      ".data", ".bss", ".rodata.cst16", ...) or by libbpf's map name; each value must be
      the whole section (its size) -- `volatile const` configuration is set this way.
    * Pinning declared by the object (LIBBPF_PIN_BY_NAME) is cleared: nothing is written
      to /sys/fs/bpf, no map is reused from there, nothing outlives `close()`.
    * Programs in sections libbpf does not know (legacy "prog", "xdp_prog", "xdp_vlan_change")
      are loaded as XDP, those in `tc*`/`classifier*` sections as SCHED_CLS (`program_type`);
      with `programs`, only those are loaded, one object per call.

    Objects with legacy `SEC("maps")` records (which libbpf 1.x refuses) are loaded by a
    small raw-bpf() fallback when they need nothing else (see `_load_raw`); so are objects whose
    program sections have no FUNC symbol (libbpf >= 1.0 sees no program in them).
    Raises KernelUnavailable, KernelLoadError."""
    global _captured
    check_kernel()
    lib = library()
    path = str(path)
    if not os.path.isfile(path):
        raise KernelLoadError(f"{path}: no such file")
    captured: list[str] = []
    old_print = None
    _captured = captured
    old_print = lib.libbpf_set_print(ctypes.cast(_print_cb, ctypes.c_void_p))
    handle = None
    try:
        handle = lib.bpf_object__open_file(path.encode(), None)
        if not handle:
            err = ctypes.get_errno()
            if _has_legacy_maps(path):
                return _load_raw(
                    path, programs, rodata, 'legacy SEC("maps") map definitions are not supported by libbpf >= 1.0'
                )
            raise _load_error(path, "libbpf cannot open the object", err, captured)
        try:
            loaded_progs = _configure(lib, handle, path, programs, rodata)
        except _MissedByLibbpf as missed:
            lib.bpf_object__close(handle)
            handle = None
            return _load_raw(path, programs, rodata, str(missed))
        if lib.bpf_object__load(handle) != 0:
            err = ctypes.get_errno()
            raise _load_error(path, "load failed", err, captured)
        progs: dict[str, int] = {}
        sections: dict[str, str] = {}
        types: dict[str, int] = {}
        prog = lib.bpf_object__next_program(handle, None)
        while prog:
            name = lib.bpf_program__name(prog).decode()
            if name in loaded_progs:
                progs[name] = lib.bpf_program__fd(prog)
                sections[name] = lib.bpf_program__section_name(prog).decode()
                types[name] = lib.bpf_program__type(prog)
            prog = lib.bpf_object__next_program(handle, prog)
        maps: dict[str, MapInfo] = {}
        m = lib.bpf_object__next_map(handle, None)
        while m:
            name = lib.bpf_map__name(m).decode()
            info = MapInfo(
                name,
                lib.bpf_map__fd(m),
                lib.bpf_map__type(m),
                lib.bpf_map__key_size(m),
                lib.bpf_map__value_size(m),
                lib.bpf_map__max_entries(m),
            )
            maps[name] = info
            if lib.bpf_map__is_internal(m) and "." in name:
                maps.setdefault(name[name.index(".") :], info)  # ".rodata" alias
            m = lib.bpf_object__next_map(handle, m)
        obj = LoadedObject(path, handle, progs, maps, [], sections, types)
        handle = None  # owned by obj now
        return obj
    finally:
        if handle is not None:
            lib.bpf_object__close(handle)
        lib.libbpf_set_print(old_print)
        _captured = None


def _configure(lib, handle: int, path: str, programs: list[str] | None, rodata: dict[str, bytes] | None) -> set[str]:
    """Before load: program types, autoload, pin paths and global data overrides. Returns
    the names of the programs that will load."""
    obj = _lifted(path)
    wanted = None
    if programs is not None:
        # Programs named in a PROG_ARRAY's static `.values`: libbpf writes their fds into
        # the array at load, so they must load even when not requested.
        wanted = set(programs) | {p for m in (obj.maps if obj else ()) for p in m.static_values.values()}
    names = []
    prog = lib.bpf_object__next_program(handle, None)
    while prog:
        name = lib.bpf_program__name(prog).decode()
        names.append(name)
        if lib.bpf_program__type(prog) == BPF_PROG_TYPE_UNSPEC:  # a section libbpf does not know
            lib.bpf_program__set_type(prog, program_type(lib.bpf_program__section_name(prog).decode()))
        if wanted is not None:
            lib.bpf_program__set_autoload(prog, name in wanted)
        prog = lib.bpf_object__next_program(handle, prog)
    lifted = {p.name: p.section for p in obj.programs} if obj else {}
    unseen = [p for p in lifted if p not in names]  # sections without a FUNC symbol
    missing = sorted(set(programs or ()) - set(names))
    if set(missing) & set(unseen) or (programs is None and unseen):
        raise _MissedByLibbpf(
            f"libbpf >= 1.0 finds programs only at FUNC symbols and sees none in "
            f"{', '.join(sorted(lifted[p] for p in unseen))}"
        )
    if missing:
        raise KernelLoadError(
            f"{path}: no program {', '.join(missing)}; programs: {', '.join(names) or ', '.join(lifted) or 'none'}"
        )
    overrides = dict(rodata or {})
    m = lib.bpf_object__next_map(handle, None)
    while m:
        lib.bpf_map__set_pin_path(m, None)
        name = lib.bpf_map__name(m).decode()
        section = name[name.index(".") :] if lib.bpf_map__is_internal(m) and "." in name else None
        key = name if name in overrides else section if section in overrides else None
        if key is not None:
            data = overrides.pop(key)
            size = ctypes.c_size_t(0)
            lib.bpf_map__initial_value(m, ctypes.byref(size))
            if len(data) != size.value:
                raise KernelLoadError(
                    f"{path}: initial value for {key} must be {size.value} bytes (the whole section), got {len(data)}"
                )
            buf = ctypes.create_string_buffer(bytes(data), max(len(data), 1))
            if lib.bpf_map__set_initial_value(m, buf, len(data)) != 0:
                raise KernelLoadError(f"{path}: cannot set the initial value of {key}")
        m = lib.bpf_object__next_map(handle, m)
    if overrides:
        raise KernelLoadError(f"{path}: no global data map {', '.join(sorted(overrides))}")
    return set(names) if wanted is None else set(names) & wanted


class _MissedByLibbpf(Exception):
    """libbpf does not see programs the lifter finds (the message says which and why)."""


def program_type(section: str) -> int:
    """BPF_PROG_TYPE_* for a program in a section libbpf does not know: SCHED_CLS for
    `tc*`/`classifier*` sections, XDP for the rest (legacy names such as `prog`, `xdp_*`)."""
    return BPF_PROG_TYPE_SCHED_CLS if section.startswith(TC_SECTION_PREFIXES) else BPF_PROG_TYPE_XDP


def _has_legacy_maps(path: str) -> bool:
    from lifter.elf import read_elf

    try:
        return read_elf(path).section("maps") is not None
    except Exception:
        return False


class _MapCreateOpts(ctypes.Structure):
    """struct bpf_map_create_opts (<bpf/bpf.h>, libbpf 1.1)."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("btf_fd", ctypes.c_uint32),
        ("btf_key_type_id", ctypes.c_uint32),
        ("btf_value_type_id", ctypes.c_uint32),
        ("btf_vmlinux_value_type_id", ctypes.c_uint32),
        ("inner_map_fd", ctypes.c_uint32),
        ("map_flags", ctypes.c_uint32),
        ("map_extra", ctypes.c_uint64),
        ("numa_node", ctypes.c_uint32),
        ("map_ifindex", ctypes.c_uint32),
    ]


class _ProgLoadOpts(ctypes.Structure):
    """struct bpf_prog_load_opts (<bpf/bpf.h>, libbpf 1.1)."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("attempts", ctypes.c_int),
        ("expected_attach_type", ctypes.c_int),
        ("prog_btf_fd", ctypes.c_uint32),
        ("prog_flags", ctypes.c_uint32),
        ("prog_ifindex", ctypes.c_uint32),
        ("kern_version", ctypes.c_uint32),
        ("attach_btf_id", ctypes.c_uint32),
        ("attach_prog_fd", ctypes.c_uint32),
        ("attach_btf_obj_fd", ctypes.c_uint32),
        ("fd_array", ctypes.c_void_p),
        ("func_info", ctypes.c_void_p),
        ("func_info_cnt", ctypes.c_uint32),
        ("func_info_rec_size", ctypes.c_uint32),
        ("line_info", ctypes.c_void_p),
        ("line_info_cnt", ctypes.c_uint32),
        ("line_info_rec_size", ctypes.c_uint32),
        ("log_level", ctypes.c_uint32),
        ("log_size", ctypes.c_uint32),
        ("log_buf", ctypes.c_void_p),
    ]


def create_map(type_id: int, name: str, key_size: int, value_size: int, max_entries: int, flags: int = 0) -> int:
    """bpf(BPF_MAP_CREATE): the new map's fd (the caller closes it). KernelLoadError with
    the errno's name and text when the kernel refuses."""
    opts = _MapCreateOpts(sz=ctypes.sizeof(_MapCreateOpts), map_flags=flags)
    fd = library().bpf_map_create(type_id, name.encode()[:15], key_size, value_size, max_entries, ctypes.byref(opts))
    if fd < 0:
        err = ctypes.get_errno() or -fd
        raise KernelLoadError(f"creating map {name} failed: {errno_mod.errorcode.get(err, err)} ({os.strerror(err)})")
    return fd


def load_btf(data: bytes) -> int:
    """bpf(BPF_BTF_LOAD) of a raw BTF blob: its fd (the caller closes it)."""
    fn = library().bpf_btf_load
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    buf = ctypes.create_string_buffer(data, len(data))
    fd = fn(buf, len(data), None)
    if fd < 0:
        err = ctypes.get_errno() or -fd
        raise KernelLoadError(f"BTF refused: {os.strerror(err)}")
    return fd


def load_program(
    prog_type: int,
    name: str,
    code: bytes,
    license: bytes = b"GPL",
    btf_fd: int | None = None,
    func_info: list[tuple[int, int]] | None = None,
) -> int:
    """bpf(BPF_PROG_LOAD) of raw instructions: the program's fd (the caller closes it).
    `func_info` = (instruction offset, BTF FUNC type id) records, with `btf_fd`. A refusal
    is a KernelLoadError whose first line ends with the verifier log's last line and whose
    following lines are the log's tail."""
    buf = ctypes.create_string_buffer(code, len(code))
    log = ctypes.create_string_buffer(1 << 20)
    opts = _ProgLoadOpts(sz=ctypes.sizeof(_ProgLoadOpts), log_level=1, log_size=len(log), log_buf=ctypes.addressof(log))
    if btf_fd is not None:
        opts.prog_btf_fd = btf_fd
    if func_info:
        info = b"".join(struct.pack("<II", off, type_id) for off, type_id in func_info)
        info_buf = ctypes.create_string_buffer(info, len(info))
        opts.func_info, opts.func_info_cnt, opts.func_info_rec_size = ctypes.addressof(info_buf), len(func_info), 8
    fd = library().bpf_prog_load(prog_type, name.encode()[:15], license, buf, len(code) // 8, ctypes.byref(opts))
    if fd < 0:
        err = ctypes.get_errno() or -fd
        text = [
            ln
            for ln in log.value.decode(errors="replace").rstrip().splitlines()
            if ln.strip() and not ln.startswith(("processed ", "verification time"))
        ]
        raise KernelLoadError(
            f"program {name} failed to load ({errno_mod.errorcode.get(err, err)}, {os.strerror(err)}): "
            f"{text[-1] if text else ''}\n" + "\n".join(text[-40:])
        )
    return fd


class Loader:
    """Maps, BTF and programs created with plain bpf() calls, gathered into one
    LoadedObject (`object`; closing it closes them all). The one raw load path: `load`
    falls back to it for what libbpf cannot load, and calibration builds its
    micro-programs on it. A refusal is a KernelLoadError (one line, then the verifier
    log's tail for programs)."""

    def __init__(self, path: str):
        self.object = LoadedObject(path, None, {}, {}, [], {}, {})

    def map(self, name: str, type_id: int, key_size: int, value_size: int, max_entries: int, flags: int = 0) -> MapInfo:
        fd = create_map(type_id, name, key_size, value_size, max_entries, flags)
        self.object.own(fd)
        info = self.object.maps[name] = MapInfo(name, fd, type_id, key_size, value_size, max_entries)
        return info

    def btf(self, data: bytes) -> int:
        fd = load_btf(data)
        self.object.own(fd)
        return fd

    def program(
        self,
        name: str,
        prog_type: int,
        code: bytes,
        license: bytes = b"GPL",
        section: str | None = None,
        btf_fd: int | None = None,
        func_info: list[tuple[int, int]] | None = None,
    ) -> int:
        """Load `code` as program `name` (see `load_program`); `section` names its ELF section."""
        fd = load_program(prog_type, name, code, license, btf_fd, func_info)
        self.object.own(fd)
        self.object.programs[name] = fd
        self.object.types[name] = prog_type
        if section is not None:
            self.object.sections[name] = section
        return fd


BPF_PSEUDO_MAP_FD = 1
LD_IMM64 = 0x18


def _load_raw(path: str, programs: list[str] | None, rodata: dict[str, bytes] | None, why: str) -> LoadedObject:
    """Load a pre-libbpf-1.0 object that libbpf cannot (`why`: legacy `SEC("maps")`
    records, or sections without FUNC symbols) with plain bpf() calls: create each map,
    patch its fd into the ld_imm64 instructions relocated against it, load each program
    (or only `programs`) one at a time, as XDP or, in `tc*` sections, as SCHED_CLS.
    Deliberately narrow (what such objects contain): only legacy maps, no global data, no
    bpf-to-bpf calls, no relocations other than map references; anything else is
    a one-line KernelLoadError naming what and why. The lifter's ELF, map and relocation
    parsing is reused, so the kernel sees the maps the analyzer reasons about."""
    from lifter.maps import relocation_map
    from lifter.program import load_object

    def unsupported(what: str) -> KernelLoadError:
        return KernelLoadError(f"{path}: {why}, and the fallback loader cannot load this object: {what}")

    try:
        obj = load_object(path)
    except Exception as err:  # LiftError: the object is malformed
        raise unsupported(str(err)) from None
    if rodata:
        raise unsupported("global data overrides need libbpf")
    others = [m.name for m in obj.maps if m.origin != "legacy"]
    if others:
        raise unsupported(f"maps other than legacy records ({', '.join(others)}) need libbpf")
    names = [p.name for p in obj.programs]
    missing = sorted(set(programs or ()) - set(names))
    if missing:
        raise KernelLoadError(f"{path}: no program {', '.join(missing)}; programs: {', '.join(names)}")
    loader = Loader(path)
    try:
        for m in obj.maps:
            if m.type is None or m.max_entries is None:
                raise unsupported(f"map {m.name} has no usable definition")
            try:
                loader.map(m.name, m.type.id, m.key_size, m.value_size, m.max_entries, m.flags)
            except KernelLoadError as err:
                raise KernelLoadError(f"{path}: {err}") from None
        license = (obj.license or "GPL").encode()
        for prog in obj.programs:
            if programs is not None and prog.name not in programs:
                continue
            if len(prog.functions) > 1:
                raise unsupported(f"program {prog.name} calls subprograms")
            entry = prog.entry
            section = obj.image.section(entry.section)
            lo, hi = entry.start * 8, entry.end * 8
            insns = bytearray(section.data[lo:hi])
            for rel in obj.image.relocations.get(entry.section, []):
                if not lo <= rel.offset < hi:
                    continue
                target = relocation_map(obj.maps, rel)
                if target is None or target[1] is not None:
                    raise unsupported(f"relocation against {rel.symbol.name!r} in {prog.name}")
                at = rel.offset - lo
                if insns[at] != LD_IMM64:
                    raise unsupported(f"relocated instruction at {entry.section}+{rel.offset} is not ld_imm64")
                insns[at + 1] = (insns[at + 1] & 0x0F) | (BPF_PSEUDO_MAP_FD << 4)
                insns[at + 4 : at + 8] = loader.object.maps[target[0].name].fd.to_bytes(4, "little", signed=True)
            try:
                loader.program(prog.name, program_type(prog.section), bytes(insns), license, prog.section)
            except KernelLoadError as err:
                raise KernelLoadError(f"{path}: {err}") from None
    except BaseException:
        loader.object.close()
        raise
    return loader.object
