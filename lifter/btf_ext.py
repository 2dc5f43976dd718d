"""Parse a raw `.BTF.ext` ELF section: per-ELF-section func_info, line_info, CO-RE relocs.

The lifter uses func_info to name subprograms, line_info to point diagnostics and
emitted rules back at source lines, and core_relos to refuse (or later apply) CO-RE
field accesses it cannot lift exactly.

Layout (byte order announced by the magic, like `.BTF`)::

    header (hdr_len >= 24 bytes)
      u16 magic 0xeB9F   u8 version (1)   u8 flags   u32 hdr_len
      u32 func_info_off  u32 func_info_len  u32 line_info_off  u32 line_info_len
      u32 core_relo_off  u32 core_relo_len            (only when hdr_len >= 32)
    each info block (offsets counted from the end of the header):
      u32 rec_size, then repeated until the block ends:
        u32 sec_name_off (into the .BTF strings)   u32 num_info
        num_info records of rec_size bytes (known prefix below, tail skipped)
    func_info record: u32 insn_off   u32 type_id (a FUNC)
    line_info record: u32 insn_off   u32 file_name_off   u32 line_off   u32 line_col
    core_relo record: u32 insn_off   u32 type_id   u32 access_str_off   u32 kind

In an ELF object ``insn_off`` is a byte offset into the ELF section (libbpf divides by
8 before handing it to the kernel); records here carry the instruction index.
``line_col`` packs ``line << 10 | column`` (column: low 10 bits).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from lifter.btf import Btf, Func, btf_error, read_header

BTF_EXT_VERSION = 1
HEADER_MIN_LEN = 24  # up to line_info_len
HEADER_CORE_LEN = 32  # adds core_relo_off/len
INSN_SIZE = 8

FUNC_INFO_MIN_REC = 8
LINE_INFO_MIN_REC = 16
CORE_RELO_MIN_REC = 16

#: enum bpf_core_relo_kind (include/uapi/linux/bpf.h).
CORE_RELO_KIND_NAMES = {
    0: "FIELD_BYTE_OFFSET",
    1: "FIELD_BYTE_SIZE",
    2: "FIELD_EXISTS",
    3: "FIELD_SIGNED",
    4: "FIELD_LSHIFT_U64",
    5: "FIELD_RSHIFT_U64",
    6: "TYPE_ID_LOCAL",
    7: "TYPE_ID_TARGET",
    8: "TYPE_EXISTS",
    9: "TYPE_SIZE",
    10: "ENUMVAL_EXISTS",
    11: "ENUMVAL_VALUE",
    12: "TYPE_MATCHES",
}


@dataclass(frozen=True)
class FuncInfo:
    """A function starts at instruction `insn` of its ELF section."""

    insn: int
    type_id: int  # a FUNC type
    name: str  # that FUNC's name


@dataclass(frozen=True)
class LineInfo:
    """Instruction `insn` (and those after it, until the next record) came from here."""

    insn: int
    file_name: str
    line_text: str  # the source line as the compiler read it; '' if it could not
    line: int  # 0: compiler-generated code with no source line
    col: int


@dataclass(frozen=True)
class CoreRelo:
    """A CO-RE relocation on instruction `insn` (see CORE_RELO_KIND_NAMES)."""

    insn: int
    type_id: int
    access_str: str  # e.g. "0:1:2": accessor indices into type_id
    kind: int

    @property
    def kind_name(self) -> str:
        return CORE_RELO_KIND_NAMES.get(self.kind, f"UNKNOWN({self.kind})")


@dataclass
class BtfExt:
    """Per-ELF-section records, keyed by section name (e.g. 'xdp', '.text')."""

    func_info: dict[str, list[FuncInfo]] = field(default_factory=dict)
    line_info: dict[str, list[LineInfo]] = field(default_factory=dict)
    core_relos: dict[str, list[CoreRelo]] = field(default_factory=dict)
    byte_order: str = "little"
    version: int = BTF_EXT_VERSION
    flags: int = 0


_CORE = {o: struct.Struct(o + "II") for o in "<>"}
_U32 = {o: struct.Struct(o + "I") for o in "<>"}
_PAIR = {o: struct.Struct(o + "II") for o in "<>"}
_QUAD = {o: struct.Struct(o + "IIII") for o in "<>"}


def parse_btf_ext(data: bytes, btf: Btf) -> BtfExt:
    """Parse a raw `.BTF.ext` section; names resolve through `btf`'s string table."""
    data = bytes(data)
    order, header = read_header(data, ".BTF.ext ", BTF_EXT_VERSION)
    _magic, version, flags, hdr_len, fi_off, fi_len, li_off, li_len = header
    ext = BtfExt(byte_order="little" if order == "<" else "big", version=version, flags=flags)

    blocks = [("func_info", fi_off, fi_len), ("line_info", li_off, li_len)]
    if hdr_len >= HEADER_CORE_LEN:
        cr_off, cr_len = _CORE[order].unpack_from(data, HEADER_MIN_LEN)
        blocks.append(("core_relo", cr_off, cr_len))

    for what, off, length in blocks:
        if length == 0:
            continue
        if off % 4:
            raise btf_error(f".BTF.ext {what} offset {off} not 4-byte aligned")
        start = hdr_len + off
        end = start + length
        if end > len(data):
            raise btf_error(f".BTF.ext {what} [{start}, {end}) out of range (data is {len(data)} bytes)")
        for sec_name, rec_size, rec_start, count in _sections(data, start, end, order, what, btf):
            if what == "func_info":
                ext.func_info.setdefault(sec_name, []).extend(
                    _func_infos(data, rec_start, rec_size, count, order, btf, sec_name)
                )
            elif what == "line_info":
                ext.line_info.setdefault(sec_name, []).extend(
                    _line_infos(data, rec_start, rec_size, count, order, btf, sec_name)
                )
            else:
                ext.core_relos.setdefault(sec_name, []).extend(
                    _core_relos(data, rec_start, rec_size, count, order, btf, sec_name)
                )
    return ext


_MIN_REC = {"func_info": FUNC_INFO_MIN_REC, "line_info": LINE_INFO_MIN_REC, "core_relo": CORE_RELO_MIN_REC}


def _sections(data: bytes, start: int, end: int, order: str, what: str, btf: Btf):
    """Yield (section name, rec_size, first record offset, record count) per section."""
    if end - start < 4:
        raise btf_error(f".BTF.ext {what}: block of {end - start} bytes has no rec_size")
    rec_size = _U32[order].unpack_from(data, start)[0]
    if rec_size < _MIN_REC[what] or rec_size % 4:
        raise btf_error(f".BTF.ext {what}: bad rec_size {rec_size} (need a multiple of 4, >= {_MIN_REC[what]})")
    pos = start + 4
    while pos < end:
        if end - pos < 8:
            raise btf_error(f".BTF.ext {what}: truncated section header at offset {pos}")
        name_off, count = _PAIR[order].unpack_from(data, pos)
        sec_name = _string(btf, name_off, f".BTF.ext {what}: section name")
        pos += 8
        if count * rec_size > end - pos:
            raise btf_error(
                f".BTF.ext {what} section {sec_name}: {count} records of {rec_size} bytes "
                f"overrun the block ({end - pos} bytes left)"
            )
        yield sec_name, rec_size, pos, count
        pos += count * rec_size


def _string(btf: Btf, offset: int, what: str) -> str:
    if not 0 <= offset < len(btf.strings):
        raise btf_error(f"{what}: string offset {offset} out of range (string section is {len(btf.strings)} bytes)")
    return btf.string(offset)


def _insn(insn_off: int, what: str) -> int:
    if insn_off % INSN_SIZE:
        raise btf_error(f"{what}: insn_off {insn_off} is not a multiple of {INSN_SIZE}")
    return insn_off // INSN_SIZE


def _func_infos(data, pos, rec_size, count, order, btf, sec_name):
    unpack = _PAIR[order].unpack_from
    out = []
    for i in range(count):
        insn_off, type_id = unpack(data, pos + i * rec_size)
        what = f".BTF.ext func_info section {sec_name} record {i}"
        if type_id >= len(btf.types):
            raise btf_error(f"{what}: type id {type_id} out of range (max {len(btf.types) - 1})")
        if not isinstance(btf.types[type_id], Func):
            actual = type(btf.types[type_id]).__name__
            raise btf_error(f"{what}: type id {type_id} is {actual}, not FUNC")
        out.append(FuncInfo(_insn(insn_off, what), type_id, btf.types[type_id].name))
    return out


def _line_infos(data, pos, rec_size, count, order, btf, sec_name):
    unpack = _QUAD[order].unpack_from
    out = []
    for i in range(count):
        insn_off, file_off, line_off, line_col = unpack(data, pos + i * rec_size)
        what = f".BTF.ext line_info section {sec_name} record {i}"
        out.append(
            LineInfo(
                _insn(insn_off, what),
                _string(btf, file_off, f"{what}: file name"),
                _string(btf, line_off, f"{what}: line text"),
                line_col >> 10,
                line_col & 0x3FF,
            )
        )
    return out


def _core_relos(data, pos, rec_size, count, order, btf, sec_name):
    unpack = _QUAD[order].unpack_from
    out = []
    for i in range(count):
        insn_off, type_id, access_off, kind = unpack(data, pos + i * rec_size)
        what = f".BTF.ext core_relo section {sec_name} record {i}"
        if type_id >= len(btf.types):
            raise btf_error(f"{what}: type id {type_id} out of range (max {len(btf.types) - 1})")
        out.append(CoreRelo(_insn(insn_off, what), type_id, _string(btf, access_off, f"{what}: access string"), kind))
    return out
