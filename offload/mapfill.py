"""`rules --maps-from SOURCE`: the map-dependent paths' templates filled from real map contents.

Sources (repeatable; one map may come from one source only): `json:NAME=FILE` / `json:FILE`
(offload/mapjson.py, `bpftool map dump -j`). `pinned:DIR` and `prog:ID` readers come with
`sync`. The filled filters follow the static ones in the script (chain 0 prios after
theirs, chains after theirs), within --max-rules, and the printed whole is proved with the
contents (rules/filled.py).
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass

from lifter.errors import LiftError
from rules.filled import FilledScript, finish_filled
from rules.mapcontents import MapContents
from rules.templates import Fill, Template, fill, find_templates

from .mapjson import read_json_spec


def add_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--maps-from",
        action="append",
        default=[],
        metavar="SOURCE",
        help="fill the map-dependent paths' rule templates from these map contents (repeatable): "
        "json:NAME=FILE (a `bpftool map dump -j` of map NAME) or json:FILE ({NAME: dump, ...})",
    )


def contents_from(specs: list[str], obj) -> MapContents:
    """The contents the --maps-from specs name, merged (a map given twice is refused)."""
    maps = {m.name: m for m in obj.maps}
    merged = {}
    for spec in specs:
        kind, sep, rest = spec.partition(":")
        if not sep or not rest:
            raise LiftError(f"--maps-from {spec!r}: expected json:NAME=FILE or json:FILE")
        if kind == "json":
            got = read_json_spec(rest, maps)
        elif kind in ("pinned", "prog"):
            raise LiftError(f"--maps-from {kind}: not in this build (use json:, from `bpftool map dump -j`)")
        else:
            raise LiftError(f"--maps-from {spec!r}: unknown source {kind!r} (json:NAME=FILE, json:FILE)")
        for name, entries in got.maps.items():
            if name in merged:
                raise LiftError(f"--maps-from: map {name} given twice")
            merged[name] = entries
    return MapContents(merged)


@dataclass
class Filled:
    """What --maps-from adds to one program's rules."""

    templates: list[Template]
    unfit: list  # [(paths, Reason)]: map-dependent paths no template takes
    fill: Fill
    script: FilledScript


def fill_rules(rs, contents: MapContents, dev: str, skip: str | None, max_rules: int) -> Filled:
    """Templates of the program `rs` was built for, filled from `contents`, after the static
    filters of `rs` (already finished for dev/skip)."""
    static = rs.finish(dev, skip)
    first_chain = max((r.chain for r in rs.rules), default=0) + 1
    first_prio = max((r.prio for r in rs.rules if r.chain == 0), default=0) + 1
    templates, unfit = find_templates(rs.synth, first_chain, first_prio)
    filled = fill(templates, contents)
    needs = {t.index: t.needs for t in templates}
    script = finish_filled(static, rs.synth, filled, contents, dev, skip, max_rules, needs)
    return Filled(templates, unfit, filled, script)


def offloaded_paths(f: Filled) -> list[int]:
    """Paths a filled filter that acts (not a chain jump) claims."""
    return sorted({p for x in f.script.filters if x.role == "rule" for p in x.paths})


def comments(f: Filled) -> list[str]:
    """The `#` lines saying what was filled and what stayed in software."""
    s = f.script
    proof = {
        True: "proven on this printed script with these map contents",
        None: "each an instance of its template's proof (too many entries to re-prove the script)",
        False: "NOT proven: " + "; ".join(s.errors),
    }[s.proved]
    drops = sum(1 for t in f.templates if not t.outcome.is_pass)
    out = [
        f"# maps: {len(f.templates)} templates ({drops} proven for every key where filled), "
        f"{len(s.filters)} filled filters, {proof}"
    ]
    taken = offloaded_paths(f)
    if taken:
        out.append(
            f"# with these map contents, paths {','.join(map(str, taken))} are offloaded by the filled filters "
            "(the summary above holds for every map content)"
        )
    for t in f.templates:
        where = " -> ".join(f"{lv.map}[{'+'.join(lv.keys)}]" for lv in t.levels)
        shapes = ", ".join("proven" if ok else "NOT proven" for ok in t.proved.values()) or "no entry"
        if t.outcome.is_pass:
            shapes = "pass filters, used only where a drop template's proof relies on them"
        paths = ",".join(map(str, t.paths))
        out.append(f"# template {t.index}: paths {paths}: {where} -> {' '.join(t.outcome.action)} ({shapes})")
    for ps, why in f.unfit:
        out.append(f"# no template: paths {','.join(map(str, ps))}: {why}")
    for name, (entries, prefixes, ok) in f.fill.aggregated.items():
        out.append(
            f"# aggregated {name}: {entries} entries -> {prefixes} prefixes ({'proven equal' if ok else 'kept'})"
        )
    counts = Counter((src[0], why.code, why.detail) for src, why in s.software)
    for (name, code, detail), n in sorted(counts.items()):
        out.append(f"# software: map {name}: {n} entries: {code}: {detail}")
    return [" ".join(c.split()) for c in out]


def json_part(f: Filled) -> dict:
    """The `maps` member of the rules JSON."""
    s = f.script
    return {
        "templates": [
            {
                "index": t.index,
                "paths": t.paths,
                "levels": [
                    {"map": lv.map, "kind": lv.kind, "keys": list(lv.keys), "chain": lv.chain} for lv in t.levels
                ],
                "action": list(t.outcome.action),
                "proven": all(t.proved.values()) if t.proved else None,
            }
            for t in f.templates
        ],
        "no_template": [{"paths": ps, "code": why.code, "detail": why.detail} for ps, why in f.unfit],
        "proven": s.proved,
        "offloaded_paths": offloaded_paths(f),
        "filters": [
            {
                "template": x.template,
                "level": x.level,
                "chain": x.chain,
                "prio": x.prio,
                "role": x.role,
                "sources": [{"map": m, "key": k.hex()} for m, k in x.sources],
                "tc": line,
            }
            for x, line in zip(s.filters, s.lines[1::2])
        ],
        "aggregated": {
            n: {"entries": a, "prefixes": b, "proven_equal": ok} for n, (a, b, ok) in f.fill.aggregated.items()
        },
        "software": [{"map": m, "key": k.hex(), "code": why.code, "detail": why.detail} for (m, k), why in s.software],
    }
