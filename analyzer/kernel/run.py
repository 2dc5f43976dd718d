"""A loaded object and its test runs: BPF_PROG_TEST_RUN of one packet or many, its map
operations, attaching, ring buffers (`LoadedObject`, what `load` returns)."""

from __future__ import annotations

import ctypes
import errno as errno_mod
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from lifter.maptypes import map_type

from ..xdp import ETH_HLEN, MAX_LINEAR_PACKET
from .libbpf import BPF_PROG_TYPE_XDP, KernelLoadError, KernelRunError, PacketError, TestRunOpts, library
from .maps import MapInfo, map_delete, map_keys, map_lookup, map_update

#: Output buffer size: covers growth by bpf_xdp_adjust_head/adjust_tail and frags.
OUT_BUFFER_SIZE = 64 * 1024


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


class _XdpMd(ctypes.Structure):
    """struct xdp_md (UAPI): the ctx_in of an XDP test run."""

    _fields_ = [
        (name, ctypes.c_uint32)
        for name in ("data", "data_end", "data_meta", "ingress_ifindex", "rx_queue_index", "egress_ifindex")
    ]


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
        self._opts = TestRunOpts(sz=ctypes.sizeof(TestRunOpts))
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
        if library().bpf_prog_test_run_opts(fd, ctypes.byref(opts)) != 0:
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
