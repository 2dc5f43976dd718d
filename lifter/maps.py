"""Map definitions: BTF-defined (`.maps`), legacy (`maps`, struct bpf_map_def of any record
size), and global data sections (`.rodata*`, `.data*`, `.bss*`) as one-entry array maps.

What a loader would create is what we report: libbpf's rules are followed (a BTF map field
`__uint(name, N)` is a pointer to an array of N elements; `__type(key, T)` a pointer to T;
a legacy record size is the section size divided by the number of map symbols; the offsets
of `.maps` variables come from the ELF symbol table, since LLVM leaves them 0 in BTF).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .btf import LINKAGE_STATIC, Array, Btf, Datasec, Func, FuncProto, Ptr, Struct, Var
from .elf import ElfImage, Relocation, Section
from .errors import LiftError
from .maptypes import MapType, map_type
from .opcodes import DATA64_RELOCS

#: Map flags from include/uapi/linux/bpf.h that the loader sets on global data maps.
BPF_F_RDONLY_PROG = 1 << 7
BPF_F_MMAPABLE = 1 << 10

#: Integer fields of a BTF map definition (each `int (*name)[N]`).
BTF_INT_FIELDS = ("type", "max_entries", "map_flags", "key_size", "value_size", "numa_node", "pinning", "map_extra")

#: Fields of a legacy `struct bpf_map_def`, in record order (u32 each).
LEGACY_FIELDS = ("type", "key_size", "value_size", "max_entries", "map_flags")


@dataclass(frozen=True)
class GlobalVar:
    """A variable inside a global data section."""

    name: str
    offset: int
    size: int
    type: str | None  # C spelling from BTF, None without BTF


@dataclass
class MapDef:
    """A map as the loader would create it. Fields are None where the object does not say
    (e.g. a `.maps` map in an object without BTF)."""

    name: str
    section: str
    offset: int  # of the definition in `section`
    origin: str  # "btf", "legacy", "global"
    type: MapType | None
    key_size: int | None
    value_size: int | None
    max_entries: int | None
    flags: int = 0
    key_type: str | None = None
    value_type: str | None = None
    pinning: int = 0
    initial: bytes | None = None  # global data: the section's initial bytes
    variables: list[GlobalVar] = field(default_factory=list)
    static_values: dict[int, str] = field(default_factory=dict)  # slot -> program or map name
    inner: MapDef | None = None  # map-in-map: the inner map template
    def_size: int = 0  # bytes of the definition record (BTF struct size / legacy record)

    @property
    def read_only(self) -> bool:
        """True when BPF programs cannot write the map (`.rodata`, BPF_F_RDONLY_PROG)."""
        return bool(self.flags & BPF_F_RDONLY_PROG)


def read_maps(image: ElfImage, btf: Btf | None) -> list[MapDef]:
    """All maps of the object, in section then offset order."""
    maps: list[MapDef] = []
    section = image.section(".maps")
    if section is not None:
        maps += _btf_maps(image, section, btf)
    section = image.section("maps")
    if section is not None:
        maps += _legacy_maps(image, section)
    for sec in image.sections:
        # libbpf creates no map for an empty data section (GCC emits empty .data/.bss).
        if is_global_data_section(sec.name) and sec.size > 0:
            maps.append(_global_map(image, sec, btf))
    return maps


def is_global_data_section(name: str) -> bool:
    """Sections libbpf turns into global-data array maps."""
    return any(name == base or name.startswith(base + ".") for base in (".rodata", ".data", ".bss"))


def type_str(btf: Btf, type_id: int) -> str:
    """A C-like spelling of a BTF type, for reports (`struct iphdr`, `__u8[6]`, `void *`)."""
    t = btf.types[type_id]
    if type_id == 0:
        return "void"
    if isinstance(t, Ptr):
        return type_str(btf, t.type_id) + " *"
    if isinstance(t, Array):
        return f"{type_str(btf, t.type_id)}[{t.nr_elems}]"
    kind = {"Struct": "struct ", "Union": "union ", "Enum": "enum ", "Enum64": "enum "}.get(type(t).__name__, "")
    if t.name:
        return kind + t.name
    if hasattr(t, "type_id"):
        return type_str(btf, t.type_id)
    return kind + "(anon)"


def _btf_maps(image: ElfImage, section: Section, btf: Btf | None) -> list[MapDef]:
    symbols = [s for s in image.symbols_in(section.name) if s.type in ("OBJECT", "NOTYPE")]
    datasec = btf.datasec(".maps") if btf else None
    if datasec is None:
        # Without BTF the definitions cannot be decoded; report them as unknown, not guessed.
        return [MapDef(s.name, section.name, s.value, "btf", None, None, None, None) for s in symbols]
    by_name = {s.name: s for s in symbols}
    maps = []
    for info in datasec.var_secinfos:
        var = btf.types[info.type_id]
        if not isinstance(var, Var):
            raise LiftError(f"BTF: .maps entry type {info.type_id} is not a VAR", section=".maps")
        sym = by_name.get(var.name)
        if sym is None:
            raise LiftError(f"BTF map {var.name} has no symbol in .maps", section=".maps")
        mdef = _btf_map_def(btf, var.name, var.type_id, section.name, sym.value)
        # A `values` initialiser extends the variable past its struct (flexible array).
        mdef.def_size = max(mdef.def_size, sym.size)
        maps.append(mdef)
    _apply_static_values(image, maps, btf)
    return sorted(maps, key=lambda m: m.offset)


def _btf_map_def(btf: Btf, name: str, type_id: int, section: str, offset: int) -> MapDef:
    struct_t = btf.types[btf.resolve(type_id)]
    if not isinstance(struct_t, Struct):
        raise LiftError(f"BTF map {name}: definition is not a struct", section=section)
    ints: dict[str, int] = {}
    key_t = value_t = None
    inner = None
    for member in struct_t.members:
        target = btf.types[btf.resolve(member.type_id)]
        if member.name in BTF_INT_FIELDS:
            arr = btf.types[btf.resolve(target.type_id)] if isinstance(target, Ptr) else None
            if not isinstance(arr, Array):
                raise LiftError(f"BTF map {name}: field {member.name} is not __uint()", section=section)
            ints[member.name] = arr.nr_elems
        elif member.name in ("key", "value"):
            if not isinstance(target, Ptr):
                raise LiftError(f"BTF map {name}: field {member.name} is not __type()", section=section)
            if member.name == "key":
                key_t = target.type_id
            else:
                value_t = target.type_id
        elif member.name == "values":
            inner = _inner_template(btf, name, target, section)
    mtype = map_type(ints.get("type", 0))
    key_size = ints.get("key_size", btf.size_of(key_t) if key_t else None)
    value_size = ints.get("value_size", btf.size_of(value_t) if value_t else None)
    if inner is not None or mtype.holds == "program":
        value_size = value_size or 4  # fds: the loader fixes value size to 4
    return MapDef(
        name,
        section,
        offset,
        "btf",
        mtype,
        key_size,
        value_size,
        ints.get("max_entries"),
        ints.get("map_flags", 0),
        key_type=type_str(btf, key_t) if key_t else None,
        value_type=type_str(btf, value_t) if value_t else None,
        pinning=ints.get("pinning", 0),
        inner=inner,
        def_size=struct_t.size,
    )


def _inner_template(btf: Btf, name: str, values_t, section: str) -> MapDef | None:
    """`__array(values, T)`: a flexible array of pointers; T is an inner map struct, or a
    function prototype for PROG_ARRAY."""
    if not isinstance(values_t, Array):
        raise LiftError(f"BTF map {name}: field values is not __array()", section=section)
    elem = btf.types[btf.resolve(values_t.type_id)]
    if not isinstance(elem, Ptr):
        raise LiftError(f"BTF map {name}: values elements are not pointers", section=section)
    pointee = btf.types[btf.resolve(elem.type_id)]
    if isinstance(pointee, Struct):
        return _btf_map_def(btf, f"{name}.inner", btf.resolve(elem.type_id), section, -1)
    if isinstance(pointee, (FuncProto, Func)):
        return None
    raise LiftError(f"BTF map {name}: values point to neither maps nor programs", section=section)


def _apply_static_values(image: ElfImage, maps: list[MapDef], btf: Btf) -> None:
    """`.values = { [i] = &x }` in a `.maps` definition leaves one R_BPF_64_ABS64 in `.rel.maps`
    per initialised slot; its offset gives the slot, its symbol the program or inner map."""
    for rel in image.relocations.get(".maps", []):
        owner = next((m for m in maps if m.offset <= rel.offset < m.offset + m.def_size), None)
        if owner is None:
            raise LiftError(f"relocation at 0x{rel.offset:x} is outside every map definition", section=".rel.maps")
        if rel.type not in DATA64_RELOCS:
            raise LiftError(
                f"relocation type {rel.type} at 0x{rel.offset:x} in a map definition is not a 64-bit data relocation",
                section=".rel.maps",
            )
        values_off = _values_offset(btf, owner)
        rel_off = rel.offset - owner.offset - values_off
        if values_off < 0 or rel_off < 0 or rel_off % 8:
            raise LiftError(f"relocation at 0x{rel.offset:x} is not a slot of {owner.name}.values", section=".rel.maps")
        owner.static_values[rel_off // 8] = rel.symbol.name


def _values_offset(btf: Btf, mdef: MapDef) -> int:
    var_id = next(i for i in btf.find_all(mdef.name, Var))
    struct_t = btf.types[btf.resolve(btf.types[var_id].type_id)]
    for member in struct_t.members:
        if member.name == "values":
            return member.bits_offset // 8
    return -1


def _legacy_maps(image: ElfImage, section: Section) -> list[MapDef]:
    symbols = [
        s for s in image.symbols_in(section.name) if s.type in ("OBJECT", "NOTYPE") and s.bind in ("GLOBAL", "WEAK")
    ]
    if not symbols:
        return []
    record = section.size // len(symbols)
    if record < 4 * len(LEGACY_FIELDS) - 4 or section.size % len(symbols):
        raise LiftError(
            f"legacy map records: {section.size} bytes for {len(symbols)} maps is not a whole record each",
            section=section.name,
        )
    maps = []
    for sym in symbols:
        if sym.value % record or sym.value + record > section.size:
            raise LiftError(
                f"legacy map {sym.name} at offset {sym.value} is not on a record boundary (record size {record})",
                section=section.name,
            )
        words = len(range(0, min(record, 4 * len(LEGACY_FIELDS)), 4))
        values = struct.unpack_from(f"<{words}I", section.data, sym.value)
        fields = dict(zip(LEGACY_FIELDS, values))
        maps.append(
            MapDef(
                sym.name,
                section.name,
                sym.value,
                "legacy",
                map_type(fields["type"]),
                fields["key_size"],
                fields["value_size"],
                fields["max_entries"],
                fields.get("map_flags", 0),
                def_size=record,
            )
        )
    return maps


def _global_map(image: ElfImage, section: Section, btf: Btf | None) -> MapDef:
    flags = BPF_F_RDONLY_PROG if section.name.startswith(".rodata") else 0
    if _has_global_var(btf, section.name):
        # libbpf memory-maps a data section only when BTF shows a non-static variable in it.
        flags |= BPF_F_MMAPABLE
    variables = _global_vars(image, section, btf)
    return MapDef(
        section.name,
        section.name,
        0,
        "global",
        map_type(2),
        4,
        section.size,
        1,
        flags,
        initial=section.data,
        variables=variables,
    )


def _has_global_var(btf: Btf | None, section: str) -> bool:
    datasec = btf.datasec(section) if btf else None
    if datasec is None:
        return False
    return any(btf.types[info.type_id].linkage != LINKAGE_STATIC for info in datasec.var_secinfos)


def _global_vars(image: ElfImage, section: Section, btf: Btf | None) -> list[GlobalVar]:
    symbols = {s.name: s for s in image.symbols_in(section.name, ("OBJECT",))}
    datasec: Datasec | None = btf.datasec(section.name) if btf else None
    out = []
    if datasec is not None:
        for info in datasec.var_secinfos:
            var = btf.types[info.type_id]
            sym = symbols.get(var.name)
            offset = sym.value if sym is not None else info.offset
            out.append(GlobalVar(var.name, offset, info.size, type_str(btf, var.type_id)))
    else:
        out = [GlobalVar(s.name, s.value, s.size, None) for s in symbols.values()]
    return sorted(out, key=lambda v: v.offset)


def relocation_map(maps: list[MapDef], rel: Relocation) -> tuple[MapDef, int | None] | None:
    """The map an ld_imm64 relocation refers to and the byte offset into its value
    (None for a map reference), or None when the symbol is in no map section."""
    sym = rel.symbol
    for mdef in maps:
        if mdef.origin == "global" and sym.section == mdef.section:
            return mdef, sym.value if sym.type != "SECTION" else 0
        if (
            mdef.origin != "global"
            and sym.section == mdef.section
            and sym.value == mdef.offset
            and sym.type != "SECTION"
        ):
            return mdef, None
    return None
