"""Loading an object into the kernel: libbpf first (`load`), and the one raw bpf() load
path (`Loader`) for what libbpf cannot load and for programs built without a compiler."""

from __future__ import annotations

import ctypes
import errno as errno_mod
import os
import re
import struct
from pathlib import Path

from .libbpf import (
    BPF_PROG_TYPE_SCHED_CLS,
    BPF_PROG_TYPE_UNSPEC,
    BPF_PROG_TYPE_XDP,
    KernelLoadError,
    captured_messages,
    check_kernel,
    library,
)
from .maps import MapInfo, create_map
from .run import LoadedObject

#: Section prefixes of tc (cls_bpf) programs: loaded as SCHED_CLS when libbpf does not know
#: the section (`tc_vlan_push`); every other unknown section loads as XDP.
TC_SECTION_PREFIXES = ("tc", "classifier")


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
    check_kernel()
    lib = library()
    path = str(path)
    if not os.path.isfile(path):
        raise KernelLoadError(f"{path}: no such file")
    with captured_messages() as captured:
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
