"""Parse a raw `.BTF` ELF section into plain, frozen, per-kind dataclasses.

The lifter needs BTF to name maps, global variables and functions, and to size the
values it reasons about; it gets the raw section bytes from the ELF loader and never
asks libbpf, so the same object always lifts the same way on any host.

Faithful, not fixed up: LLVM writes each DATASEC with ``size=0`` and each
``var_secinfo.offset`` as LLVM knew it when emitting (0 for a global variable, the
real offset only for static ones), and leaves ``R_BPF_64_NODYLD32`` relocations in
``.rel.BTF`` that nobody applies. libbpf patches sizes and offsets from the ELF
section headers and symbol table when it loads the object. This module does none of
that: it reports exactly what the section says (so ``dump_raw()`` equals
``bpftool btf dump file X.o``); the ELF layer must fix DATASECs up if it needs them.

Strings are decoded as UTF-8 with ``surrogateescape`` so any byte string round-trips.

Layout (all integers in the byte order announced by the magic)::

    header (hdr_len >= 24 bytes)
      u16 magic 0xeB9F   u8 version (1)   u8 flags   u32 hdr_len
      u32 type_off  u32 type_len  u32 str_off  u32 str_len   (offsets after hdr_len)
    type section: back-to-back records, type id 1, 2, ... (id 0 is void, implicit)
      u32 name_off   u32 info   u32 size_or_type   + kind-specific tail
    string section: NUL-separated, starts and ends with NUL; offset 0 is ""

The ``info`` word::

     31  30      29  28           24  23             16  15                     0
    +---+----------+----------------+------------------+------------------------+
    |kf | (unused) |    kind (5)    |     (unused)     |   vlen (16): number of |
    |   |          |                |                  |   members/params/...   |
    +---+----------+----------------+------------------+------------------------+
    kf = kind_flag: STRUCT/UNION: member offsets hold (bitfield_size << 24 | bit_offset)
                    ENUM/ENUM64: values are signed;  FWD: forward-declared union
    FUNC reuses vlen as its linkage (0 static, 1 global, 2 extern).

The INT tail word::

     31    28 27      24 23            16 15            8 7             0
    +--------+----------+----------------+---------------+---------------+
    |(unused)| encoding |  bits_offset   |   (unused)    |    nr_bits    |
    +--------+----------+----------------+---------------+---------------+
    encoding bits: 1 = SIGNED, 2 = CHAR, 4 = BOOL
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar

from lifter.errors import LiftError

BTF_MAGIC = 0xEB9F
BTF_VERSION = 1
HEADER_MIN_LEN = 24

# Kind numbers (include/uapi/linux/btf.h).
KIND_INT = 1
KIND_PTR = 2
KIND_ARRAY = 3
KIND_STRUCT = 4
KIND_UNION = 5
KIND_ENUM = 6
KIND_FWD = 7
KIND_TYPEDEF = 8
KIND_VOLATILE = 9
KIND_CONST = 10
KIND_RESTRICT = 11
KIND_FUNC = 12
KIND_FUNC_PROTO = 13
KIND_VAR = 14
KIND_DATASEC = 15
KIND_FLOAT = 16
KIND_DECL_TAG = 17
KIND_TYPE_TAG = 18
KIND_ENUM64 = 19

KIND_NAMES = (
    "UNKNOWN",
    "INT",
    "PTR",
    "ARRAY",
    "STRUCT",
    "UNION",
    "ENUM",
    "FWD",
    "TYPEDEF",
    "VOLATILE",
    "CONST",
    "RESTRICT",
    "FUNC",
    "FUNC_PROTO",
    "VAR",
    "DATASEC",
    "FLOAT",
    "DECL_TAG",
    "TYPE_TAG",
    "ENUM64",
)

INT_SIGNED = 1
INT_CHAR = 2
INT_BOOL = 4

# FUNC linkage (stored in vlen) and VAR linkage (stored in the VAR tail).
LINKAGE_STATIC = 0
LINKAGE_GLOBAL = 1
LINKAGE_EXTERN = 2

POINTER_SIZE = 8  # BPF is a 64-bit target; BTF PTR records carry no size.


# --- one frozen dataclass per kind ----------------------------------------------------
# Every type keeps `name_off` besides `name`: bpftool prints "(anon)" only for
# name_off == 0, and a non-zero offset of an empty string is printed as ''.


@dataclass(frozen=True)
class Void:
    """Type id 0: `void` (never stored in the section)."""

    KIND: ClassVar[int] = 0
    name_off: int = 0
    name: str = ""


@dataclass(frozen=True)
class Int:
    KIND: ClassVar[int] = KIND_INT
    name_off: int
    name: str
    size: int
    encoding: int  # INT_SIGNED | INT_CHAR | INT_BOOL bits
    bits_offset: int
    nr_bits: int

    @property
    def is_signed(self) -> bool:
        return bool(self.encoding & INT_SIGNED)


@dataclass(frozen=True)
class Ptr:
    KIND: ClassVar[int] = KIND_PTR
    name_off: int
    name: str
    type_id: int


@dataclass(frozen=True)
class Array:
    KIND: ClassVar[int] = KIND_ARRAY
    name_off: int
    name: str
    type_id: int  # element type
    index_type_id: int
    nr_elems: int


@dataclass(frozen=True)
class Member:
    """A STRUCT/UNION member; bitfield_size 0 means "not a bitfield (per kind_flag)"."""

    name_off: int
    name: str
    type_id: int
    bits_offset: int
    bitfield_size: int


@dataclass(frozen=True)
class Struct:
    KIND: ClassVar[int] = KIND_STRUCT
    name_off: int
    name: str
    size: int
    kind_flag: bool  # True: members carry bitfield_size; False: old-style offsets
    members: tuple[Member, ...]


@dataclass(frozen=True)
class Union:
    KIND: ClassVar[int] = KIND_UNION
    name_off: int
    name: str
    size: int
    kind_flag: bool
    members: tuple[Member, ...]


@dataclass(frozen=True)
class EnumValue:
    """An enumerator; `value` is already interpreted with the enum's signedness."""

    name_off: int
    name: str
    value: int


@dataclass(frozen=True)
class Enum:
    KIND: ClassVar[int] = KIND_ENUM
    name_off: int
    name: str
    size: int
    signed: bool  # kind_flag
    values: tuple[EnumValue, ...]


@dataclass(frozen=True)
class Fwd:
    KIND: ClassVar[int] = KIND_FWD
    name_off: int
    name: str
    is_union: bool  # kind_flag


@dataclass(frozen=True)
class Typedef:
    KIND: ClassVar[int] = KIND_TYPEDEF
    name_off: int
    name: str
    type_id: int


@dataclass(frozen=True)
class Volatile:
    KIND: ClassVar[int] = KIND_VOLATILE
    name_off: int
    name: str
    type_id: int


@dataclass(frozen=True)
class Const:
    KIND: ClassVar[int] = KIND_CONST
    name_off: int
    name: str
    type_id: int


@dataclass(frozen=True)
class Restrict:
    KIND: ClassVar[int] = KIND_RESTRICT
    name_off: int
    name: str
    type_id: int


@dataclass(frozen=True)
class Func:
    KIND: ClassVar[int] = KIND_FUNC
    name_off: int
    name: str
    type_id: int  # a FuncProto
    linkage: int  # LINKAGE_* (raw vlen; unknown values kept)


@dataclass(frozen=True)
class Param:
    """A FUNC_PROTO parameter; a final param with name_off 0 and type 0 means `...`."""

    name_off: int
    name: str
    type_id: int


@dataclass(frozen=True)
class FuncProto:
    KIND: ClassVar[int] = KIND_FUNC_PROTO
    name_off: int
    name: str
    return_type_id: int
    params: tuple[Param, ...]


@dataclass(frozen=True)
class Var:
    KIND: ClassVar[int] = KIND_VAR
    name_off: int
    name: str
    type_id: int
    linkage: int  # LINKAGE_STATIC, LINKAGE_GLOBAL (allocated), LINKAGE_EXTERN


@dataclass(frozen=True)
class VarSecinfo:
    """Where a VAR lives in a DATASEC (offset/size as the compiler wrote them)."""

    type_id: int
    offset: int
    size: int


@dataclass(frozen=True)
class Datasec:
    KIND: ClassVar[int] = KIND_DATASEC
    name_off: int
    name: str
    size: int  # 0 from LLVM; libbpf fills it in at load time
    var_secinfos: tuple[VarSecinfo, ...]


@dataclass(frozen=True)
class Float:
    KIND: ClassVar[int] = KIND_FLOAT
    name_off: int
    name: str
    size: int


@dataclass(frozen=True)
class DeclTag:
    KIND: ClassVar[int] = KIND_DECL_TAG
    name_off: int
    name: str  # the tag text
    type_id: int
    component_idx: int  # -1: the type itself; else member/param index
    kind_flag: bool  # newer kernels: tag is a raw attribute


@dataclass(frozen=True)
class TypeTag:
    KIND: ClassVar[int] = KIND_TYPE_TAG
    name_off: int
    name: str
    type_id: int
    kind_flag: bool


@dataclass(frozen=True)
class Enum64:
    KIND: ClassVar[int] = KIND_ENUM64
    name_off: int
    name: str
    size: int
    signed: bool  # kind_flag
    values: tuple[EnumValue, ...]


BtfType = (
    Void
    | Int
    | Ptr
    | Array
    | Struct
    | Union
    | Enum
    | Fwd
    | Typedef
    | Volatile
    | Const
    | Restrict
    | Func
    | FuncProto
    | Var
    | Datasec
    | Float
    | DeclTag
    | TypeTag
    | Enum64
)

#: Kinds `resolve()` looks through.
MODIFIERS = (Typedef, Const, Volatile, Restrict, TypeTag)
_SIZED = (Int, Struct, Union, Enum, Enum64, Float, Datasec)


def btf_error(message: str) -> LiftError:
    """The one-line error for malformed BTF (also raised by btf_ext.py for .BTF.ext)."""
    return LiftError(f"BTF: {message}")


@dataclass
class Btf:
    """A parsed `.BTF` section; ``types[i]`` is type id ``i`` (``types[0]`` is void)."""

    types: list[BtfType]
    strings: bytes  # the raw string section
    byte_order: str  # "little" or "big"
    version: int = BTF_VERSION
    flags: int = 0
    _string_cache: dict = field(default_factory=dict, repr=False, compare=False)
    _ids_by_name: dict | None = field(default=None, repr=False, compare=False)

    # -- strings & names ---------------------------------------------------------------

    def string(self, offset: int) -> str:
        """The NUL-terminated string at `offset` in the string section."""
        cached = self._string_cache.get(offset)
        if cached is not None:
            return cached
        if not 0 <= offset < len(self.strings):
            raise btf_error(f"string offset {offset} out of range (string section is {len(self.strings)} bytes)")
        end = self.strings.find(b"\0", offset)
        if end < 0:  # parse_btf guarantees a final NUL; only hand-made Btf hits this
            raise btf_error(f"string at offset {offset} is not NUL-terminated")
        text = self.strings[offset:end].decode("utf-8", "surrogateescape")
        self._string_cache[offset] = text
        return text

    def _type(self, type_id: int):
        if not isinstance(type_id, int) or not 0 <= type_id < len(self.types):
            raise btf_error(f"type id {type_id} out of range (max {len(self.types) - 1})")
        return self.types[type_id]

    def name(self, type_id: int) -> str:
        """The type's own name; '' for void and anonymous types."""
        return self._type(type_id).name

    def kind_name(self, type_id: int) -> str:
        """bpftool's kind label, e.g. 'STRUCT'; 'UNKNOWN' for void."""
        return KIND_NAMES[self._type(type_id).KIND]

    # -- type queries -------------------------------------------------------------------

    def resolve(self, type_id: int) -> int:
        """Follow typedef/const/volatile/restrict/type_tag to the underlying type id."""
        start = type_id
        hops = 0
        t = self._type(type_id)
        while isinstance(t, MODIFIERS):
            hops += 1
            if hops > len(self.types):
                raise btf_error(f"type {start}: modifier chain loops")
            type_id = t.type_id
            t = self._type(type_id)
        return type_id

    def size_of(self, type_id: int) -> int:
        """Size in bytes: pointers are 8, arrays multiply, modifiers and VARs follow."""
        start = type_id
        factor = 1
        for _ in range(len(self.types) + 1):
            t = self._type(type_id)
            if isinstance(t, _SIZED):
                return factor * t.size
            if isinstance(t, Ptr):
                return factor * POINTER_SIZE
            if isinstance(t, Array):
                factor *= t.nr_elems
                type_id = t.type_id
            elif isinstance(t, MODIFIERS + (Var,)):
                type_id = t.type_id
            else:
                raise btf_error(f"type {start}: {KIND_NAMES[t.KIND]} type {type_id} has no size")
        raise btf_error(f"type {start}: type chain loops")

    def find_all(self, name: str, kind: type | None = None) -> list[int]:
        """All type ids named `name` (optionally only of dataclass `kind`), in id order."""
        if self._ids_by_name is None:
            index: dict[str, list[int]] = {}
            for type_id, t in enumerate(self.types):
                if t.name:
                    index.setdefault(t.name, []).append(type_id)
            self._ids_by_name = index
        ids = self._ids_by_name.get(name, [])
        if kind is None:
            return list(ids)
        return [i for i in ids if type(self.types[i]) is kind]

    def find(self, name: str, kind: type | None = None) -> int | None:
        """The lowest type id named `name` (of dataclass `kind` if given), or None."""
        ids = self.find_all(name, kind)
        return ids[0] if ids else None

    def datasec(self, name: str) -> Datasec | None:
        """The DATASEC for ELF section `name` (e.g. '.rodata', '.maps'), or None."""
        type_id = self.find(name, Datasec)
        return None if type_id is None else self.types[type_id]

    # -- bpftool-compatible text ----------------------------------------------------------

    def dump_raw(self) -> str:
        """The text `bpftool btf dump file X.o` prints (raw format), byte for byte."""
        out: list[str] = []
        emit = out.append
        types = self.types
        for type_id in range(1, len(types)):
            t = types[type_id]
            emit(f"[{type_id}] {KIND_NAMES[t.KIND]} '{_label(t)}'")
            if isinstance(t, Int):
                emit(
                    f" size={t.size} bits_offset={t.bits_offset} nr_bits={t.nr_bits}"
                    f" encoding={_INT_ENCODING_NAMES.get(t.encoding, 'UNKN')}"
                )
            elif isinstance(t, (Ptr, Typedef, Volatile, Const, Restrict, TypeTag)):
                emit(f" type_id={t.type_id}")
            elif isinstance(t, Array):
                emit(f" type_id={t.type_id} index_type_id={t.index_type_id} nr_elems={t.nr_elems}")
            elif isinstance(t, (Struct, Union)):
                emit(f" size={t.size} vlen={len(t.members)}")
                for m in t.members:
                    emit(f"\n\t'{_label(m)}' type_id={m.type_id} bits_offset={m.bits_offset}")
                    if m.bitfield_size:
                        emit(f" bitfield_size={m.bitfield_size}")
            elif isinstance(t, (Enum, Enum64)):
                encoding = "SIGNED" if t.signed else "UNSIGNED"
                emit(f" encoding={encoding} size={t.size} vlen={len(t.values)}")
                suffix = "" if isinstance(t, Enum) else ("LL" if t.signed else "ULL")
                for v in t.values:
                    emit(f"\n\t'{_label(v)}' val={v.value}{suffix}")
            elif isinstance(t, Fwd):
                emit(f" fwd_kind={'union' if t.is_union else 'struct'}")
            elif isinstance(t, Func):
                linkage = _LINKAGE_NAMES.get(t.linkage, "(unknown)")
                emit(f" type_id={t.type_id} linkage={linkage}")
            elif isinstance(t, FuncProto):
                emit(f" ret_type_id={t.return_type_id} vlen={len(t.params)}")
                for p in t.params:
                    emit(f"\n\t'{_label(p)}' type_id={p.type_id}")
            elif isinstance(t, Var):
                linkage = _LINKAGE_NAMES.get(t.linkage, "(unknown)")
                emit(f" type_id={t.type_id}, linkage={linkage}")
            elif isinstance(t, Datasec):
                emit(f" size={t.size} vlen={len(t.var_secinfos)}")
                for v in t.var_secinfos:
                    target = types[v.type_id]
                    emit(
                        f"\n\ttype_id={v.type_id} offset={v.offset} size={v.size}"
                        f" ({KIND_NAMES[target.KIND]} '{_label(target)}')"
                    )
            elif isinstance(t, Float):
                emit(f" size={t.size}")
            elif isinstance(t, DeclTag):
                emit(f" type_id={t.type_id} component_idx={t.component_idx}")
            emit("\n")
        return "".join(out)


_INT_ENCODING_NAMES = {0: "(none)", INT_SIGNED: "SIGNED", INT_CHAR: "CHAR", INT_BOOL: "BOOL"}
# FUNC and VAR linkages share values and bpftool's labels.
_LINKAGE_NAMES = {LINKAGE_STATIC: "static", LINKAGE_GLOBAL: "global", LINKAGE_EXTERN: "extern"}


def _label(item) -> str:
    """bpftool's rendering of a name: '(anon)' only when name_off is 0."""
    return item.name if item.name_off else "(anon)"


# --- parsing ------------------------------------------------------------------------------

_HEADER = {"<": struct.Struct("<HBBIIIII"), ">": struct.Struct(">HBBIIIII")}


def _byte_order(data: bytes, prefix: str = "") -> str:
    """'<' or '>' from the magic (0xeB9F in the writer's byte order)."""
    if len(data) < 2:
        raise btf_error(f"{prefix}header truncated: {len(data)} bytes, magic needs 2")
    if data[0] == 0x9F and data[1] == 0xEB:
        return "<"
    if data[0] == 0xEB and data[1] == 0x9F:
        return ">"
    raise btf_error(f"{prefix}bad magic {data[:2].hex()} (want 9feb or eb9f: 0xeB9F, either order)")


def read_header(data: bytes, prefix: str, version_wanted: int) -> tuple[str, tuple]:
    """Byte order and the common 24-byte header of `.BTF` and `.BTF.ext` (magic, version,
    flags, hdr_len, then four u32 offset/length words), checked."""
    order = _byte_order(data, prefix)
    if len(data) < HEADER_MIN_LEN:
        raise btf_error(f"{prefix}header truncated: {len(data)} bytes, need {HEADER_MIN_LEN}")
    header = _HEADER[order].unpack_from(data)
    _magic, version, _flags, hdr_len = header[:4]
    if version != version_wanted:
        raise btf_error(f"{prefix}unsupported version {version} (want {version_wanted})")
    if hdr_len < HEADER_MIN_LEN:
        raise btf_error(f"{prefix}hdr_len {hdr_len} too small (need {HEADER_MIN_LEN})")
    if hdr_len > len(data):
        raise btf_error(f"{prefix}hdr_len {hdr_len} exceeds data ({len(data)} bytes)")
    return order, header


def _section_bounds(name: str, hdr_len: int, off: int, length: int, total: int):
    """[start, end) of a section given relative to the header's end, checked against data."""
    start = hdr_len + off
    end = start + length
    if end > total:
        raise btf_error(f"{name} section [{start}, {end}) out of range (data is {total} bytes)")
    return start, end


def parse_btf(data: bytes) -> Btf:
    """Parse a raw `.BTF` section. Malformed input raises LiftError('BTF: ...')."""
    data = bytes(data)
    order, header = read_header(data, "", BTF_VERSION)
    _magic, version, flags, hdr_len, type_off, type_len, str_off, str_len = header
    if type_off % 4:
        raise btf_error(f"type section offset {type_off} not 4-byte aligned")
    t_start, t_end = _section_bounds("type", hdr_len, type_off, type_len, len(data))
    s_start, s_end = _section_bounds("string", hdr_len, str_off, str_len, len(data))
    if type_off + type_len > str_off:
        raise btf_error(
            f"type section [{type_off}, {type_off + type_len}) overlaps or follows string section at {str_off}"
        )
    strings = data[s_start:s_end]
    if not strings or strings[0] != 0 or strings[-1] != 0:
        raise btf_error("string section must be non-empty and start and end with NUL")

    btf = Btf(
        types=[Void()], strings=strings, byte_order="little" if order == "<" else "big", version=version, flags=flags
    )
    _parse_types(btf, data, t_start, t_end, order)
    _check_type_refs(btf)
    return btf


_U32 = {o: struct.Struct(o + "I") for o in "<>"}
_I32 = {o: struct.Struct(o + "i") for o in "<>"}
_TYPE_HEAD = {o: struct.Struct(o + "III") for o in "<>"}
_TRIPLE = {o: struct.Struct(o + "III") for o in "<>"}
_PAIR = {o: struct.Struct(o + "II") for o in "<>"}
_ENUM32 = {o: struct.Struct(o + "Ii") for o in "<>"}

# Bytes after the 12-byte common head: fixed tail, per-vlen-item size.
_TAIL = {
    KIND_INT: (4, 0),
    KIND_PTR: (0, 0),
    KIND_ARRAY: (12, 0),
    KIND_STRUCT: (0, 12),
    KIND_UNION: (0, 12),
    KIND_ENUM: (0, 8),
    KIND_FWD: (0, 0),
    KIND_TYPEDEF: (0, 0),
    KIND_VOLATILE: (0, 0),
    KIND_CONST: (0, 0),
    KIND_RESTRICT: (0, 0),
    KIND_FUNC: (0, 0),
    KIND_FUNC_PROTO: (0, 8),
    KIND_VAR: (4, 0),
    KIND_DATASEC: (0, 12),
    KIND_FLOAT: (0, 0),
    KIND_DECL_TAG: (4, 0),
    KIND_TYPE_TAG: (0, 0),
    KIND_ENUM64: (0, 12),
}
_SIMPLE_REF = {
    KIND_PTR: Ptr,
    KIND_TYPEDEF: Typedef,
    KIND_VOLATILE: Volatile,
    KIND_CONST: Const,
    KIND_RESTRICT: Restrict,
}


def _parse_types(btf: Btf, data: bytes, start: int, end: int, order: str) -> None:
    pos = start
    head = _TYPE_HEAD[order].unpack_from
    triple = _TRIPLE[order]
    pair = _PAIR[order]
    u32 = _U32[order].unpack_from
    i32 = _I32[order].unpack_from
    types = btf.types
    string = btf.string

    def name_of(type_id: int, offset: int, what: str = "name") -> str:
        try:
            return string(offset)
        except LiftError as err:
            raise btf_error(f"type {type_id}: {what}: {err.message[len('BTF: ') :]}") from None

    while pos < end:
        type_id = len(types)
        if end - pos < 12:
            raise btf_error(
                f"type {type_id} at type-section offset {pos - start}: truncated ({end - pos} bytes left, need 12)"
            )
        name_off, info, size_or_type = head(data, pos)
        kind = (info >> 24) & 0x1F
        vlen = info & 0xFFFF
        kind_flag = bool(info >> 31)
        shape = _TAIL.get(kind)
        if shape is None:
            raise btf_error(f"type {type_id}: unknown kind {kind}")
        body = pos + 12
        need = shape[0] + shape[1] * vlen
        if end - body < need:
            raise btf_error(
                f"type {type_id} ({KIND_NAMES[kind]}): truncated, needs {12 + need} bytes, "
                f"{end - pos} left in type section"
            )
        name = name_of(type_id, name_off)
        records = data[body : body + need]  # the kind-specific tail

        if kind in _SIMPLE_REF:
            t = _SIMPLE_REF[kind](name_off, name, size_or_type)
        elif kind == KIND_INT:
            word = u32(data, body)[0]
            encoding, bits_offset, nr_bits = (word >> 24) & 0x0F, (word >> 16) & 0xFF, word & 0xFF
            t = Int(name_off, name, size_or_type, encoding, bits_offset, nr_bits)
        elif kind == KIND_ARRAY:
            elem, index, count = triple.unpack_from(data, body)
            t = Array(name_off, name, elem, index, count)
        elif kind in (KIND_STRUCT, KIND_UNION):
            members = []
            for i, (m_name_off, m_type, m_offset) in enumerate(triple.iter_unpack(records)):
                if kind_flag:
                    bits, bitfield = m_offset & 0xFFFFFF, m_offset >> 24
                else:
                    bits, bitfield = m_offset, 0
                m_name = name_of(type_id, m_name_off, f"member {i}")
                members.append(Member(m_name_off, m_name, m_type, bits, bitfield))
            cls = Struct if kind == KIND_STRUCT else Union
            t = cls(name_off, name, size_or_type, kind_flag, tuple(members))
        elif kind == KIND_ENUM:
            values = []
            unpack = _ENUM32[order].iter_unpack if kind_flag else pair.iter_unpack
            for i, (v_name_off, v) in enumerate(unpack(records)):
                v_name = name_of(type_id, v_name_off, f"enumerator {i}")
                values.append(EnumValue(v_name_off, v_name, v))
            t = Enum(name_off, name, size_or_type, kind_flag, tuple(values))
        elif kind == KIND_ENUM64:
            values = []
            for i, (v_name_off, lo, hi) in enumerate(triple.iter_unpack(records)):
                v = (hi << 32) | lo
                if kind_flag and v >= 1 << 63:
                    v -= 1 << 64
                v_name = name_of(type_id, v_name_off, f"enumerator {i}")
                values.append(EnumValue(v_name_off, v_name, v))
            t = Enum64(name_off, name, size_or_type, kind_flag, tuple(values))
        elif kind == KIND_FWD:
            t = Fwd(name_off, name, kind_flag)
        elif kind == KIND_FUNC:
            t = Func(name_off, name, size_or_type, vlen)
        elif kind == KIND_FUNC_PROTO:
            params = []
            for i, (p_name_off, p_type) in enumerate(pair.iter_unpack(records)):
                p_name = name_of(type_id, p_name_off, f"param {i}")
                params.append(Param(p_name_off, p_name, p_type))
            t = FuncProto(name_off, name, size_or_type, tuple(params))
        elif kind == KIND_VAR:
            t = Var(name_off, name, size_or_type, u32(data, body)[0])
        elif kind == KIND_DATASEC:
            secinfos = tuple(VarSecinfo(*v) for v in triple.iter_unpack(records))
            t = Datasec(name_off, name, size_or_type, secinfos)
        elif kind == KIND_FLOAT:
            t = Float(name_off, name, size_or_type)
        elif kind == KIND_DECL_TAG:
            t = DeclTag(name_off, name, size_or_type, i32(data, body)[0], kind_flag)
        else:  # KIND_TYPE_TAG
            t = TypeTag(name_off, name, size_or_type, kind_flag)
        types.append(t)
        pos = body + need


def _check_type_refs(btf: Btf) -> None:
    """Every type id a record mentions must exist (forward references are fine)."""
    max_id = len(btf.types) - 1

    def check(type_id: int, ref: int, what: str) -> None:
        if ref > max_id:
            t = btf.types[type_id]
            raise btf_error(
                f"type {type_id} ({KIND_NAMES[t.KIND]} '{t.name}'): {what} type id {ref} out of range (max {max_id})"
            )

    for type_id in range(1, max_id + 1):
        t = btf.types[type_id]
        if isinstance(t, (Struct, Union)):
            for m in t.members:
                check(type_id, m.type_id, f"member '{m.name}'")
        elif isinstance(t, FuncProto):
            check(type_id, t.return_type_id, "return")
            for p in t.params:
                check(type_id, p.type_id, f"param '{p.name}'")
        elif isinstance(t, Array):
            check(type_id, t.type_id, "element")
            check(type_id, t.index_type_id, "index")
        elif isinstance(t, Datasec):
            for v in t.var_secinfos:
                check(type_id, v.type_id, "var_secinfo")
        elif isinstance(t, (Ptr, Typedef, Volatile, Const, Restrict, TypeTag, Func, Var, DeclTag)):
            check(type_id, t.type_id, "referenced")
