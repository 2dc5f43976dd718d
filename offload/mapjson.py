"""`--maps-from json:...`: map contents from `bpftool map dump -j` output (rules.mapcontents).

bpftool prints one map's entries as a JSON array of objects: `{"key": ["0x0a", ...],
"value": [...]}`, per-CPU maps `{"key": [...], "values": [{"cpu": 0, "value": [...]}, ...]}`
(with BTF it adds a "formatted" member, ignored here: the raw bytes are what the program
reads). The dump does not name its map, so the spec says which map it is:

    json:NAME=FILE   FILE is one map's dump (`bpftool map dump name NAME -j > FILE`)
    json:FILE        FILE is an object {"NAME": <dump>, ...} holding several maps' dumps

NAME is the map's name in the object (its ELF symbol). Keys and values must have the
map's sizes; anything else is a LiftError naming the file, map and entry (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

from lifter.errors import LiftError
from rules.mapcontents import MapContents, MapEntries


def read_json_spec(spec: str, maps: dict) -> MapContents:
    """The contents a `json:` spec (without the prefix) names; `maps`: the object's MapDefs
    by name."""
    name, sep, file = spec.partition("=")
    if not sep:
        name, file = None, spec
    try:
        doc = json.loads(Path(file).read_text())
    except OSError as err:
        raise LiftError(f"--maps-from json: cannot read: {err.strerror}", file=file) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise LiftError(f"--maps-from json: not JSON: {err}", file=file) from None
    if name is not None:
        dumps = {name: doc}
    elif isinstance(doc, dict):
        dumps = doc
    else:
        raise LiftError(
            '--maps-from json: a bare dump does not name its map: use json:NAME=FILE, or a file {"NAME": <dump>, ...}',
            file=file,
        )
    out = {}
    for map_name, dump in dumps.items():
        mdef = maps.get(map_name)
        if mdef is None or mdef.type is None or mdef.key_size is None or mdef.value_size is None:
            known = ", ".join(sorted(n for n, m in maps.items() if m.type is not None)) or "none"
            raise LiftError(f"--maps-from json: no map {map_name!r} in the object (maps: {known})", file=file)
        out[map_name] = _entries(file, mdef, dump)
    return MapContents(out)


def _entries(file: str, mdef, dump) -> MapEntries:
    if not isinstance(dump, list):
        raise LiftError(f"--maps-from json: map {mdef.name}: a dump is a JSON array of entries", file=file)
    entries: dict[bytes, tuple[bytes, ...]] = {}
    for i, item in enumerate(dump):
        where = f"map {mdef.name}: entry {i}"
        if not isinstance(item, dict) or "key" not in item or ("value" not in item and "values" not in item):
            raise LiftError(f'--maps-from json: {where}: needs "key" and "value" (or "values")', file=file)
        key = _hex(file, where, "key", item["key"], mdef.key_size)
        if "values" in item:
            per_cpu = item["values"]
            if not isinstance(per_cpu, list) or not per_cpu:
                raise LiftError(f'--maps-from json: {where}: "values" is a list of {{cpu, value}}', file=file)
            values = tuple(
                _hex(file, where, "value", v.get("value") if isinstance(v, dict) else None, mdef.value_size)
                for v in per_cpu
            )
        else:
            values = (_hex(file, where, "value", item["value"], mdef.value_size),)
        if key in entries:
            raise LiftError(f"--maps-from json: {where}: key {key.hex()} given twice", file=file)
        entries[key] = values
    return MapEntries(mdef.name, mdef.type.id, mdef.key_size, mdef.value_size, entries)


def _hex(file: str, where: str, what: str, words, size: int) -> bytes:
    if not isinstance(words, list):
        raise LiftError(f'--maps-from json: {where}: {what} is a list of hex bytes like "0x0a"', file=file)
    try:
        data = bytes(int(w, 16) for w in words)
    except (TypeError, ValueError):
        raise LiftError(f'--maps-from json: {where}: {what} is a list of hex bytes like "0x0a"', file=file) from None
    if len(data) != size:
        raise LiftError(f"--maps-from json: {where}: {what} of {len(data)} bytes, the map's are {size}", file=file)
    return data
