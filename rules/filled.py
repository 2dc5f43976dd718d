"""The filled part of a rules script: templates' filters for real map contents, within the
rule budget, printed after the static filters and proved as printed.

The proof reads the whole printed script back (script.parse_script) and proves it with tc's
semantics (proof.prove_script) against the program whose map functions mean the given
contents (templates.ContentSynth): every filter that does not pass, static or filled, must
only match packets the program gives its verdict with those contents. Up to CHECK_ENTRIES
entries (a whole array counts those that differ from its most common value); beyond that
each filled filter rests on its template's proof for every key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .flower import FLOWER_KEYS
from .mapcontents import MapContents
from .proof import prove_script
from .reasons import Reason
from .script import parse_script
from .tc import filter_line
from .templates import ContentSynth, Fill, FilledFilter, array_default

#: Entries up to which the printed filled script is re-proved with the contents themselves.
CHECK_ENTRIES = 2000


@dataclass
class FilledScript:
    """The filled filters kept (print order), their lines (comments and filters), entries
    left in software with why, and the proof's verdict on the printed script (None: not
    re-proved, over CHECK_ENTRIES)."""

    filters: list[FilledFilter]
    lines: list[str]
    software: list[tuple[tuple[str, bytes], Reason]] = field(default_factory=list)
    proved: bool | None = None
    errors: list[str] = field(default_factory=list)


def _listed(synth, me) -> int:
    """How many entries the content proof lists one by one (a whole array: those holding
    another value than its most common one)."""
    mdef = next((m for m in synth.e.obj.maps if m.name == me.name), None)
    default = array_default(me, mdef.max_entries) if mdef is not None and mdef.type.keyed == "index" else None
    return len(me.entries) if default is None else sum(1 for vs in me.entries.values() if vs != default)


def covered(f: FilledFilter) -> int:
    """How many addresses (or key values) a filter takes: 2^(free bits) of its address keys."""
    n = 1
    for name, v in f.match.keys:
        if name in ("src_ip", "dst_ip", "src_ip6", "dst_ip6"):
            n *= 1 << (FLOWER_KEYS[name].width - v.mask.bit_count())
    return n


def within_budget(filters: list[FilledFilter], room: int, max_rules: int, needs: dict[int, list[int]] | None = None):
    """The filters that fit in `room`: allow-list pass filters first, then the largest
    prefixes, then template order; a template whose proof relied on an allow list
    (`needs`: template -> pass templates) loses all its filters when one of those pass
    filters does not fit. The entries of the rest go to software with reason "rule budget"."""
    if len(filters) <= room:
        return filters, []
    order = sorted(range(len(filters)), key=lambda i: (filters[i].role != "shield", -covered(filters[i]), i))
    keep = set(order[: max(room, 0)])
    cut = {filters[i].template for i in range(len(filters)) if i not in keep and filters[i].role == "shield"}
    for i, f in enumerate(filters):
        if set((needs or {}).get(f.template, ())) & cut:
            keep.discard(i)
    kept = [f for i, f in enumerate(filters) if i in keep]
    why = Reason("rule-budget", f"over --max-rules {max_rules}")
    dropped = dict.fromkeys(src for i, f in enumerate(filters) if i not in keep for src in f.sources)
    return kept, [(src, why) for src in dropped]


def render(filters: list[FilledFilter], dev: str, skip: str | None, proven: list[bool | None] | None = None):
    """Per filled filter a `# paths` comment naming the entries it came from, then its line."""
    out = []
    for i, f in enumerate(filters):
        label = {"rule": "proven" if proven and proven[i] else "", "goto": "chain jump", "shield": "allow (pass)"}[
            f.role
        ]
        srcs = ", ".join(f"{m}[{k.hex()}]" for m, k in f.sources[:4])
        more = f" (+{len(f.sources) - 4})" if len(f.sources) > 4 else ""
        out.append(f"# paths {','.join(map(str, f.paths))} template {f.template} {srcs}{more} - {label}".rstrip())
        out.append(filter_line(dev, f.match, f.action, f.prio, f.chain or None, skip=skip))
    return out


def finish_filled(
    static: list[str],
    synth,
    fill: Fill,
    contents: MapContents,
    dev: str,
    skip: str | None,
    max_rules: int,
    needs: dict[int, list[int]] | None = None,
) -> FilledScript:
    """Budget, render and prove the filled filters after the proven static block `static`.
    A filter the proof of the printed script refuses is taken out (its entries go to
    software) and the rest proved again."""
    room = max_rules - sum(1 for line in static if line.startswith("filter "))
    kept, dropped = within_budget(fill.filters, room, max_rules, needs)
    out = FilledScript(kept, [], list(fill.software) + dropped)
    entries = sum(_listed(synth, m) for m in contents.maps.values())
    if entries > CHECK_ENTRIES:
        out.lines = render(kept, dev, skip)
        return out
    cs = ContentSynth(synth, contents)
    while True:
        lines = render(out.filters, dev, skip)
        proof = prove_script(parse_script("\n".join(static + lines)), cs)
        sound = proof.sound[len(proof.sound) - len(out.filters) :]
        if proof.errors:
            out.errors = proof.errors
            out.software += [(s, Reason("not-expressible", proof.errors[0])) for f in out.filters for s in f.sources]
            out.filters, out.lines, out.proved = [], [], False
            return out
        bad = [i for i, s in enumerate(sound) if s is False]
        if not bad:
            break
        why = Reason("not-expressible", "the printed filled filter did not prove with these map contents")
        out.software += [(s, why) for i in bad for s in out.filters[i].sources]
        out.filters = [f for i, f in enumerate(out.filters) if i not in set(bad)]
    out.proved = all(s is not False for s in proof.sound)
    out.lines = render(out.filters, dev, skip, sound)
    return out
