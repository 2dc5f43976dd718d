#!/usr/bin/env python3
"""Load a legacy (SEC("maps")) XDP object into the kernel, without libbpf.

libbpf >= 1.0, and therefore bpftool, refuses map definitions stored as
``struct bpf_map_def``-style records in a section called ``maps``.  This tiny
loader exists only so corpus/check_load.sh can still prove that such objects
pass the verifier.  It understands exactly what the corpus needs:

* map records of five u32 (type, key_size, value_size, max_entries, map_flags)
  in section ``maps``, one symbol per record;
* programs in executable sections (one or more FUNC symbols per section, or the
  whole section when it has none -- libbpf >= 1.0 finds no program there);
* R_BPF_64_64 relocations of ``ld_imm64`` against map symbols.

It creates the maps, patches the map fds into the instructions, loads every
program as BPF_PROG_TYPE_XDP (sections `tc*`/`classifier*` as SCHED_CLS), prints the verifier log on failure, and closes
everything again (nothing is pinned or attached).

Usage: legacy_load.py OBJ.o        exit status 0 if every program loaded
"""

import ctypes
import os
import struct
import sys

SYS_BPF = 321  # x86_64
BPF_MAP_CREATE = 0
BPF_PROG_LOAD = 5
BPF_PROG_TYPE_XDP = 6
BPF_PROG_TYPE_SCHED_CLS = 3
#: Sections of tc (cls_bpf) programs; every other executable section loads as XDP.
TC_SECTION_PREFIXES = ("tc", "classifier")
BPF_PSEUDO_MAP_FD = 1
SHF_EXECINSTR = 0x4
SHT_SYMTAB = 2
SHT_REL = 9
STT_FUNC = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def bpf(cmd: int, attr: bytes) -> int:
    buf = ctypes.create_string_buffer(attr, len(attr))
    ret = _libc.syscall(SYS_BPF, cmd, buf, len(attr))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


class Elf:
    def __init__(self, raw: bytes):
        if raw[:4] != b"\x7fELF" or raw[4] != 2 or raw[5] != 1:
            raise ValueError("not a little-endian ELF64 file")
        (e_machine,) = struct.unpack_from("<H", raw, 18)
        if e_machine != 247:
            raise ValueError(f"e_machine {e_machine} is not EM_BPF (247)")
        self.raw = raw
        (e_shoff,) = struct.unpack_from("<Q", raw, 0x28)
        e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", raw, 0x3A)
        self.sections = []
        for i in range(e_shnum):
            f = struct.unpack_from("<IIQQQQIIQQ", raw, e_shoff + i * e_shentsize)
            self.sections.append(
                dict(name_off=f[0], type=f[1], flags=f[2], offset=f[4], size=f[5], link=f[6], info=f[7], entsize=f[9])
            )
        shstr = self.sections[e_shstrndx]
        for s in self.sections:
            s["name"] = self._cstr(shstr["offset"] + s["name_off"])
        self.symbols = []
        for s in self.sections:
            if s["type"] == SHT_SYMTAB:
                strtab = self.sections[s["link"]]
                for off in range(s["offset"], s["offset"] + s["size"], 24):
                    name, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", raw, off)
                    self.symbols.append(
                        dict(
                            name=self._cstr(strtab["offset"] + name),
                            type=info & 0xF,
                            shndx=shndx,
                            value=value,
                            size=size,
                        )
                    )

    def _cstr(self, off: int) -> str:
        end = self.raw.index(b"\0", off)
        return self.raw[off:end].decode()

    def data(self, sec) -> bytes:
        return self.raw[sec["offset"] : sec["offset"] + sec["size"]]


def load(path: str) -> bool:
    elf = Elf(open(path, "rb").read())
    idx = {s["name"]: i for i, s in enumerate(elf.sections)}
    fds = []
    ok = True
    try:
        # 1. maps
        map_fd = {}
        if "maps" in idx:
            mdata = elf.data(elf.sections[idx["maps"]])
            for sym in elf.symbols:
                if sym["shndx"] == idx["maps"] and sym["name"]:
                    mtype, ksz, vsz, maxe, flags = struct.unpack_from("<5I", mdata, sym["value"])
                    attr = struct.pack("<5I", mtype, ksz, vsz, maxe, flags).ljust(128, b"\0")
                    fd = bpf(BPF_MAP_CREATE, attr)
                    fds.append(fd)
                    map_fd[sym["name"]] = fd
        lic = b"GPL"
        if "license" in idx:
            lic = elf.data(elf.sections[idx["license"]]).split(b"\0")[0]
        lic_buf = ctypes.create_string_buffer(lic + b"\0")
        # 2. programs
        for si, sec in enumerate(elf.sections):
            if not (sec["flags"] & SHF_EXECINSTR) or sec["size"] == 0:
                continue
            insns = bytearray(elf.data(sec))
            rel = next((s for s in elf.sections if s["type"] == SHT_REL and s["info"] == si), None)
            if rel is not None:
                for off in range(rel["offset"], rel["offset"] + rel["size"], 16):
                    r_off, r_info = struct.unpack_from("<QQ", elf.raw, off)
                    sym = elf.symbols[r_info >> 32]
                    if sym["name"] not in map_fd:
                        raise ValueError(f"{sec['name']}: relocation against {sym['name']!r} unsupported")
                    if insns[r_off] != 0x18:
                        raise ValueError(f"{sec['name']}+{r_off}: relocated insn is not ld_imm64")
                    insns[r_off + 1] = (insns[r_off + 1] & 0x0F) | (BPF_PSEUDO_MAP_FD << 4)
                    struct.pack_into("<i", insns, r_off + 4, map_fd[sym["name"]])
            funcs = sorted(
                (s for s in elf.symbols if s["shndx"] == si and s["type"] == STT_FUNC), key=lambda s: s["value"]
            )
            for fn in funcs or [dict(name=sec["name"], value=0, size=sec["size"])]:
                code = bytes(insns[fn["value"] : fn["value"] + fn["size"]])
                code_buf = ctypes.create_string_buffer(code, len(code))
                log = ctypes.create_string_buffer(1 << 20)
                name = fn["name"].encode()[:15]
                ptype = BPF_PROG_TYPE_SCHED_CLS if sec["name"].startswith(TC_SECTION_PREFIXES) else BPF_PROG_TYPE_XDP
                attr = struct.pack(
                    "<IIQQIIQII16s",
                    ptype,
                    len(code) // 8,
                    ctypes.addressof(code_buf),
                    ctypes.addressof(lic_buf),
                    1,
                    len(log),
                    ctypes.addressof(log),
                    0,
                    0,
                    name,
                ).ljust(128, b"\0")
                try:
                    fd = bpf(BPF_PROG_LOAD, attr)
                    os.close(fd)
                    print(f"  {sec['name']}/{fn['name']}: loaded")
                except OSError as e:
                    ok = False
                    print(f"  {sec['name']}/{fn['name']}: FAILED ({e})")
                    print(log.value.decode(errors="replace")[-4000:])
    finally:
        for fd in fds:
            os.close(fd)
    return ok


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        sys.exit(0 if load(sys.argv[1]) else 1)
    except (OSError, ValueError) as e:
        print(f"{sys.argv[1]}: {e}", file=sys.stderr)
        sys.exit(1)
