"""libbpf through ctypes (no compiled extension), the kernel oracle's errors, and whether
the running kernel can load and test-run XDP programs here (`check_kernel`)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno as errno_mod
import os
import platform
from collections.abc import Iterator

from ..xdp import ETH_HLEN, XDP_PASS

#: What a CLI should exit with when the kernel oracle cannot run (no privileges, ...).
EXIT_UNAVAILABLE = 2

BPF_PROG_TYPE_UNSPEC = 0
BPF_PROG_TYPE_SCHED_CLS = 3
BPF_PROG_TYPE_XDP = 6

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


# --------------------------------------------------------------------------- ctypes glue


class TestRunOpts(ctypes.Structure):
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
        "bpf_prog_test_run_opts": (i32, [i32, ctypes.POINTER(TestRunOpts)]),
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


@contextlib.contextmanager
def captured_messages() -> Iterator[list[str]]:
    """libbpf's warnings and info messages printed inside the block, in a list filled as
    they come (a load's error names what libbpf said)."""
    global _captured
    lib = library()
    captured: list[str] = []
    _captured = captured
    old_print = lib.libbpf_set_print(ctypes.cast(_print_cb, ctypes.c_void_p))
    try:
        yield captured
    finally:
        lib.libbpf_set_print(old_print)
        _captured = None


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
        opts = TestRunOpts(sz=ctypes.sizeof(TestRunOpts))
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
