"""libbpf (Debian's libbpf1, through ctypes) as an independent reader of BPF objects.

`bpf_object__open_file` parses an object the way the real loader does, without loading it:
programs (name, section, instruction count before subprograms are appended) and maps (type,
key/value sizes, max entries, flags, initial value of global data). Tests compare the
lifter with it. libbpf 1.x no longer reads legacy `maps` sections; those objects are
compared by other means.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LibbpfProgram:
    name: str
    section: str
    insn_cnt: int
    insns: bytes


@dataclass(frozen=True)
class LibbpfMap:
    name: str
    type: int
    key_size: int
    value_size: int
    max_entries: int
    flags: int
    internal: bool
    initial: bytes | None


@dataclass(frozen=True)
class LibbpfObject:
    programs: list[LibbpfProgram]
    maps: list[LibbpfMap]


class LibbpfError(Exception):
    """libbpf refused to open the object (errno in args)."""


_lib = None


def library() -> ctypes.CDLL | None:
    """The loaded libbpf, or None when it is not installed."""
    global _lib
    if _lib is not None:
        return _lib
    name = ctypes.util.find_library("bpf") or "libbpf.so.1"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
    sigs = {
        "bpf_object__open_file": (vp, [cp, vp]),
        "bpf_object__close": (None, [vp]),
        "bpf_object__next_program": (vp, [vp, vp]),
        "bpf_object__next_map": (vp, [vp, vp]),
        "bpf_program__name": (cp, [vp]),
        "bpf_program__section_name": (cp, [vp]),
        "bpf_program__insn_cnt": (sz, [vp]),
        "bpf_program__insns": (vp, [vp]),
        "bpf_map__name": (cp, [vp]),
        "bpf_map__type": (ctypes.c_int, [vp]),
        "bpf_map__key_size": (ctypes.c_uint32, [vp]),
        "bpf_map__value_size": (ctypes.c_uint32, [vp]),
        "bpf_map__max_entries": (ctypes.c_uint32, [vp]),
        "bpf_map__map_flags": (ctypes.c_uint32, [vp]),
        "bpf_map__is_internal": (ctypes.c_bool, [vp]),
        "bpf_map__initial_value": (vp, [vp, ctypes.POINTER(sz)]),
        "libbpf_set_print": (vp, [vp]),
    }
    for fn, (res, argtypes) in sigs.items():
        getattr(lib, fn).restype = res
        getattr(lib, fn).argtypes = argtypes
    lib.libbpf_set_print(None)  # keep libbpf's warnings out of test output
    _lib = lib
    return lib


def open_object(path: Path) -> LibbpfObject:
    """Parse `path` with libbpf (no kernel involved)."""
    lib = library()
    if lib is None:
        raise LibbpfError("libbpf is not installed")
    obj = lib.bpf_object__open_file(str(path).encode(), None)
    if not obj:
        raise LibbpfError(ctypes.get_errno())
    try:
        programs, maps = [], []
        prog = lib.bpf_object__next_program(obj, None)
        while prog:
            count = lib.bpf_program__insn_cnt(prog)
            raw = ctypes.string_at(lib.bpf_program__insns(prog), count * 8) if count else b""
            programs.append(
                LibbpfProgram(
                    lib.bpf_program__name(prog).decode(), lib.bpf_program__section_name(prog).decode(), count, raw
                )
            )
            prog = lib.bpf_object__next_program(obj, prog)
        m = lib.bpf_object__next_map(obj, None)
        while m:
            size = ctypes.c_size_t(0)
            init = lib.bpf_map__initial_value(m, ctypes.byref(size))
            maps.append(
                LibbpfMap(
                    lib.bpf_map__name(m).decode(),
                    lib.bpf_map__type(m),
                    lib.bpf_map__key_size(m),
                    lib.bpf_map__value_size(m),
                    lib.bpf_map__max_entries(m),
                    lib.bpf_map__map_flags(m),
                    bool(lib.bpf_map__is_internal(m)),
                    ctypes.string_at(init, size.value) if init else None,
                )
            )
            m = lib.bpf_object__next_map(obj, m)
        return LibbpfObject(programs, maps)
    finally:
        lib.bpf_object__close(obj)
