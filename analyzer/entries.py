"""The map entries one model gives the lookups of one path, and the other inputs beside
the packet that path reads (xdp_md fields, helper results).

A frame z3 chooses for a path that reads maps is a claim about the packet *and* the maps:
`blacklist` holding 10.0.0.1 or not decides the verdict as much as the packet does. The
model interprets each map as two functions (analyzer/symbolic.py `map_found`, `map_val`);
this module reads them at the keys the path looks up, in the bytes the kernel stores, so
that the claim can be set up in a real map (analyzer/verify.py fills loaded maps with them)
and printed next to the frame (rules/counterexample.py).

Only the looked-up keys matter: the program reads no other entry on this path, so every
other entry may be anything, e.g. as loaded. Left out: prog arrays (their slots are the
object's) and an index past an array's last slot (the lookup returns NULL without reading
an entry, and no entry can be written there: explore.py's `map_found`). Global data
(`.bss`, `.data`, `.rodata`) is one entry at key 0 holding the section's bytes; read-only
data only where the model's bytes are not the object's (the program's configuration, as a
loader such as libxdp's dispatcher sets it before load: a frozen map takes it at load, not
by an update). A device map's entry holds ifindex 1, the loopback device every network
namespace has: the model's value stands for "some device" (what the program reads of a
device map is whether there is one), and a kernel map refuses or empties an entry for a
device that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import z3

from lifter.maps import is_global_data_section

from .exploration import Exploration, Path
from .symbolic import ctx_field, map_found, map_val, source_of, symbols

#: What a device map's entry holds in `looked_up`: ifindex 1 (the loopback device).
LOOPBACK_IFINDEX = 1


@dataclass(frozen=True)
class MapEntry:
    """One entry a path looks up: `key` and `value` in the map's memory order (host
    byte order for integers, as `bpftool map update ... key hex` takes them); `value` None
    when the model has no entry there (a hash or LPM lookup that misses)."""

    map: str
    key: bytes
    value: bytes | None

    def json(self) -> dict:
        return {"map": self.map, "key": self.key.hex(), "value": None if self.value is None else self.value.hex()}


def looked_up(
    e: Exploration,
    path: Path,
    ev: Callable[[z3.ExprRef], z3.ExprRef],
    leave_out: frozenset[str] = frozenset(),
    cache: dict | None = None,
) -> list[MapEntry]:
    """The entries `path` reads in the model `ev` evaluates in (completing it), in the
    order the path first looks them up, each (map, key) once; none of the maps `leave_out`
    names. Keys are expanded over inputs first (a merged path's key may read branch
    literals), so `ev` may be a model of the path condition with or without the literals'
    definitions; `cache` is a `symbols` cache for that (Exploration.expand), shared by a
    caller that asks for many paths."""
    maps = {m.name: m for m in e.obj.maps}
    out: dict[tuple[str, bytes], MapEntry] = {}
    for access in path.accesses:
        mdef = maps[access.map]
        kind = mdef.type
        if is_global_data_section(mdef.section) or kind is None or kind.holds == "program":
            continue
        if mdef.name in leave_out:
            continue
        bits = 8 * mdef.key_size
        key_term = e.expand(access.key, cache)
        index = ev(key_term).as_long()
        key = _bytes(index, mdef.key_size)
        if (mdef.name, key) in out:
            continue
        if kind.keyed == "index" and mdef.key_size >= 4 and index >= (mdef.max_entries or 1):
            continue  # past the last slot: no entry can be there (the lookup returns NULL)
        found = kind.always_present or z3.is_true(ev(map_found(mdef.name, bits)(key_term)))
        value = None
        if found and kind.holds == "device":
            value = LOOPBACK_IFINDEX.to_bytes(4, "little") + bytes(max(mdef.value_size - 4, 0))
        elif found:
            value = _value(ev, map_val(mdef.name, bits), key_term, mdef.value_size)
        out[(mdef.name, key)] = MapEntry(mdef.name, key, value)
    for mdef in e.obj.maps:
        if is_global_data_section(mdef.section) and mdef.name in e.read_maps and mdef.name not in leave_out:
            size = mdef.key_size or 4
            value = _value(ev, map_val(mdef.name, 8 * size), z3.BitVecVal(0, 8 * size), mdef.value_size)
            if mdef.read_only and value == (mdef.initial or bytes(mdef.value_size)):
                continue  # as the object has it: what a load gives
            out[(mdef.name, bytes(size))] = MapEntry(mdef.name, bytes(size), value)
    return list(out.values())


@dataclass(frozen=True)
class OtherInputs:
    """What a path reads beside the packet and maps: the xdp_md fields with their values
    in the model, and the helpers whose results it depends on (chosen by the model, by the
    kernel in a run: a claim resting on them holds for some results only)."""

    ctx: tuple[tuple[str, int], ...] = ()
    helpers: tuple[str, ...] = ()


def other_inputs(
    e: Exploration, path: Path, ev: Callable[[z3.ExprRef], z3.ExprRef], cache: dict | None = None
) -> OtherInputs:
    """The OtherInputs of `path`'s condition and return value, in the model `ev` evaluates
    in (`cache`: a `symbols` cache, as looked_up's)."""
    names = symbols(e.condition(path), cache)
    if path.retval is not None:
        names |= symbols(e.expand(path.retval, cache), cache)
    ctx, helpers = [], set()
    for name in sorted(names):
        source = source_of(name)
        if source is None:
            continue
        if source.kind == "ctx":
            ctx.append((source.name, ev(ctx_field(source.name)).as_long()))
        elif source.kind in ("helper", "unknown", "summary"):
            helpers.add(source.name)
    return OtherInputs(tuple(ctx), tuple(sorted(helpers)))


def _value(ev, val: z3.FuncDeclRef, key: z3.BitVecRef, size: int) -> bytes:
    """The `size` value bytes of entry `key` (`val`: the map's value function), in one
    evaluation (the bytes concatenated, the first lowest)."""
    if size == 0:
        return b""
    parts = [val(key, z3.BitVecVal(i, 32)) for i in reversed(range(size))]
    whole = z3.Concat(*parts) if size > 1 else parts[0]
    return ev(whole).as_long().to_bytes(size, "little")


def _bytes(value: int, size: int) -> bytes:
    return (value % (1 << (8 * size))).to_bytes(size, "little")
