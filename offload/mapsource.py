"""Map sources that read live kernel maps (issue 12, item 2): `pinned:DIR` and `prog:ID`.

`pinned:DIR` opens the maps pinned in bpffs under DIR, one file per map named as the object
names it (libbpf's LIBBPF_PIN_BY_NAME and `bpftool map pin` convention). `prog:ID` asks the
kernel which maps the loaded program ID uses (BPF_OBJ_GET_INFO_BY_FD: `map_ids`) and opens
them by id. Either way each object map is matched to a live map by name (the kernel keeps 15
bytes of a name; libbpf names global data `<object prefix>.rodata`), then checked against the
object's definition (type, key and value sizes and, where both have BTF, the key and value
types), so rules are never filled from a map that only shares a name.

Contents are read with BPF_MAP_LOOKUP_BATCH where the map type has it (analyzer/kernel.py,
the project's one libbpf binding) and returned as rules.mapcontents.MapContents: raw bytes,
per-CPU values split into one tuple element per possible CPU. Where the live map has BTF,
`describe` prints keys and values decoded through it (dry-run output, errors).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from analyzer import kernel
from lifter.btf import Array, Btf, Enum, Enum64, Int, Struct, Union, parse_btf
from lifter.errors import LiftError
from lifter.maps import MapDef, type_str
from lifter.program import BpfObject
from rules.mapcontents import MapContents, MapEntries

#: BPF_OBJ_NAME_LEN - 1: how much of a map's name the kernel keeps.
KERNEL_NAME_LEN = 15


@dataclass(frozen=True)
class MapSourceSpec:
    """A parsed `--maps-from` value: `pinned` with a directory, `prog` with an id, or `json`
    with NAME=FILE or FILE (a snapshot, read by offload/mapjson.py)."""

    kind: str
    where: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.where}"


@dataclass
class LiveMap:
    """One object map bound to its live kernel map (and the kernel map's BTF, if any)."""

    definition: MapDef
    kernel: kernel.KernelMap
    btf: Btf | None = None

    @property
    def name(self) -> str:
        return self.definition.name

    def entries(self) -> MapEntries:
        """Every entry now (one batched read)."""
        raw = kernel.map_dump(self.kernel)
        return MapEntries(
            self.name,
            self.kernel.type,
            self.kernel.key_size,
            self.kernel.value_size,
            {k: self.split(v) for k, v in raw.items()} if self.kernel.percpu else {k: (v,) for k, v in raw.items()},
        )

    def read(self, key: bytes) -> tuple[bytes, ...] | None:
        """The entry under `key` now, or None when it does not exist."""
        value = kernel.map_lookup(self.kernel, key)
        return None if value is None else self.split(value)

    def split(self, value: bytes) -> tuple[bytes, ...]:
        """A raw syscall value as MapEntries holds it: one element per CPU for per-CPU maps."""
        if not self.kernel.percpu:
            return (value,)
        slot = (self.kernel.value_size + 7) // 8 * 8
        return tuple(value[i : i + self.kernel.value_size] for i in range(0, len(value), slot))

    def describe(self, key: bytes, values: tuple[bytes, ...] | None = None) -> str:
        """`name[key]` or `name[key] = value`, decoded with the live map's BTF when it has it."""
        k = self._show(self.kernel.btf_key_type_id, key)
        if values is None:
            return f"{self.name}[{k}]"
        shown = [self._show(self.kernel.btf_value_type_id, v) for v in values]
        return f"{self.name}[{k}] = {shown[0] if len(shown) == 1 else '{' + ', '.join(shown) + '}'}"

    def _show(self, type_id: int, data: bytes) -> str:
        if self.btf is not None and type_id:
            try:
                return btf_format(self.btf, type_id, data)
            except (LiftError, IndexError, ValueError):
                pass
        return "0x" + data.hex()


@dataclass
class LiveMaps:
    """The object's maps found in the kernel, by object map name; `close()` releases them."""

    source: MapSourceSpec
    maps: dict[str, LiveMap] = field(default_factory=dict)

    def contents(self, names=None) -> MapContents:
        """MapContents of the maps in `names` (default: every map found)."""
        wanted = self.maps if names is None else {n: self.maps[n] for n in names}
        return MapContents({n: m.entries() for n, m in wanted.items()})

    def close(self) -> None:
        for m in self.maps.values():
            m.kernel.close()
        self.maps = {}


#: The --maps-from sources, as the messages spell them.
SOURCES = "pinned:DIR, prog:ID, json:NAME=FILE or json:FILE"


def parse_spec(text: str, live: bool = False) -> MapSourceSpec:
    """`pinned:DIR` (an existing directory), `prog:ID` (a positive integer) or `json:NAME=FILE`
    / `json:FILE` (`live`: refused, the caller follows live maps); ValueError with a one-line
    reason otherwise. The one parser of `rules --maps-from` and `sync --maps-from`."""
    kind, sep, where = text.partition(":")
    if not sep or kind not in ("pinned", "prog", "json"):
        raise ValueError(f"{text!r}: expected {'pinned:DIR or prog:ID' if live else SOURCES}")
    if kind == "json":
        if live:
            raise ValueError(
                f"{text!r}: sync follows live maps (pinned:DIR or prog:ID); a json: dump is a snapshot: "
                "`xdp2tc rules --maps-from json:...` prints the filters it gives"
            )
        if not where or where.endswith("=") or where.startswith("="):
            raise ValueError(f"{text!r}: expected json:NAME=FILE or json:FILE")
    elif kind == "pinned":
        if not where or not os.path.isdir(where):
            raise ValueError(f"{text!r}: {where or '(empty)'} is not a directory")
    elif not (where.isascii() and where.isdigit() and 0 < int(where) < 2**32):
        raise ValueError(f"{text!r}: a program id is an integer 1 .. {2**32 - 1}")
    return MapSourceSpec(kind, where)


def open_maps(obj: BpfObject, spec: MapSourceSpec) -> LiveMaps:
    """Bind the object's maps to live kernel maps (module docstring). Maps the source does not
    have are left out (unknown, not empty); a map that is there but differs from the object's
    definition is an error (LiftError, exit 2)."""
    live = LiveMaps(spec)
    found: dict[str, kernel.KernelMap] = {}
    try:
        if spec.kind == "pinned":
            found = _pinned(obj, Path(spec.where))
        else:
            found = _program_maps(obj, int(spec.where))
        defs = {m.name: m for m in obj.maps}
        for name, km in found.items():
            live.maps[name] = LiveMap(defs[name], km)
            _check_definition(obj, spec, defs[name], km)
            live.maps[name].btf = _btf(km)
            _check_btf(obj, spec, live.maps[name])
    except (kernel.KernelUnavailable, kernel.KernelRunError) as err:
        _close(found)
        raise LiftError(f"--maps-from {spec}: {err}") from None
    except LiftError:
        _close(found)
        raise
    return live


def _close(found: dict[str, kernel.KernelMap]) -> None:
    for km in found.values():
        km.close()


def _pinned(obj: BpfObject, folder: Path) -> dict[str, kernel.KernelMap]:
    found = {}
    for m in obj.maps:
        path = folder / m.name
        if path.exists():
            found[m.name] = kernel.open_pinned_map(str(path))
    return found


def _program_maps(obj: BpfObject, prog_id: int) -> dict[str, kernel.KernelMap]:
    _, ids = kernel.program_map_ids(prog_id)
    opened = [kernel.open_map_by_id(i) for i in ids]
    found: dict[str, kernel.KernelMap] = {}
    try:
        for m in obj.maps:
            hits = [km for km in opened if kernel_name_matches(m, km.name)]
            if len(hits) > 1:
                raise LiftError(
                    f"--maps-from prog:{prog_id}: map {m.name} matches {len(hits)} of the program's maps "
                    f"({', '.join(km.name for km in hits)}): the kernel keeps {KERNEL_NAME_LEN} bytes of a name"
                )
            if hits:
                found[m.name] = hits[0]
    finally:
        for km in opened:
            if km not in found.values():
                km.close()
    return found


def kernel_name_matches(m: MapDef, kernel_name: str) -> bool:
    """Whether the kernel map name `kernel_name` is object map `m`: its first 15 bytes, or for
    global data libbpf's `<object prefix><section>` (`thesis_g.rodata`)."""
    if m.origin == "global":
        return kernel_name.endswith(m.name[:KERNEL_NAME_LEN]) or kernel_name == m.name[:KERNEL_NAME_LEN]
    return kernel_name == m.name[:KERNEL_NAME_LEN]


def _check_definition(obj: BpfObject, spec: MapSourceSpec, m: MapDef, km: kernel.KernelMap) -> None:
    wanted = (m.type.id if m.type else None, m.key_size, m.value_size)
    got = (km.type, km.key_size, km.value_size)
    for what, want, have in zip(("type", "key size", "value size"), wanted, got):
        if want is not None and want != have:
            raise LiftError(
                f"--maps-from {spec}: map {m.name}: the live map's {what} is {have}, the object's is {want}",
                file=obj.path,
            )


def _btf(km: kernel.KernelMap) -> Btf | None:
    if not km.btf_id:
        return None
    try:
        return parse_btf(kernel.kernel_btf(km.btf_id))
    except (kernel.KernelRunError, LiftError):
        return None


def _check_btf(obj: BpfObject, spec: MapSourceSpec, live: LiveMap) -> None:
    """Where both the object and the live map have BTF, the key and value types must be spelled
    the same (`__u32` vs `struct key4`): a map that only shares a name is refused."""
    m, km, btf = live.definition, live.kernel, live.btf
    if btf is None:
        return
    for what, want, tid in (("key", m.key_type, km.btf_key_type_id), ("value", m.value_type, km.btf_value_type_id)):
        if want and tid and type_str(btf, tid) != want:
            raise LiftError(
                f"--maps-from {spec}: map {m.name}: the live map's {what} type is {type_str(btf, tid)}, "
                f"the object's is {want}",
                file=obj.path,
            )


def btf_format(btf: Btf, type_id: int, data: bytes) -> str:
    """`data` as C-like text through BTF: integers in decimal, enums by name, structs as
    `{field=..}`, arrays as `[..]` (char arrays as hex). Raises on a type it cannot size."""
    tid = btf.resolve(type_id)
    t = btf.types[tid]
    order = btf.byte_order
    if isinstance(t, Int):
        raw = data[: t.size]
        return str(int.from_bytes(raw, order, signed=t.is_signed))
    if isinstance(t, Enum | Enum64):
        value = int.from_bytes(data[: t.size], order, signed=False)
        for v in t.values:
            if v.value == value:
                return v.name
        return str(value)
    if isinstance(t, Array):
        size = btf.size_of(t.type_id)
        elem = btf.types[btf.resolve(t.type_id)]
        if isinstance(elem, Int) and size == 1:
            return "0x" + data[: t.nr_elems].hex()
        return "[" + ", ".join(btf_format(btf, t.type_id, data[i * size :]) for i in range(t.nr_elems)) + "]"
    if isinstance(t, Struct | Union):
        parts = []
        for mem in t.members:
            if mem.bitfield_size or mem.bits_offset % 8:
                parts.append(f"{mem.name}=?")
                continue
            at = mem.bits_offset // 8
            parts.append(f"{mem.name}={btf_format(btf, mem.type_id, data[at : at + btf.size_of(mem.type_id)])}")
        return "{" + ", ".join(parts) + "}"
    return "0x" + data[: btf.size_of(tid)].hex()
