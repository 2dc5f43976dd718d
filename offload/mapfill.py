"""`rules --maps-from SOURCE`: the map-dependent paths' templates filled from real map contents.

Sources (repeatable; one map may come from one source only), parsed by
offload/mapsource.parse_spec for `rules` and `sync` alike: `json:NAME=FILE` / `json:FILE`
(offload/mapjson.py, `bpftool map dump -j`), `pinned:DIR` and `prog:ID` (live kernel maps,
offload/mapsource.py). The filled filters follow the static ones in the script (chain 0
prios after theirs, chains after theirs), within --max-rules, and the printed whole is
proved with the contents (rules/filled.py).

`TemplateFilling` is the same templates as `sync` drives them (offload/sync.py's Filling):
one filter set per map entry, in the chains and prios `rules` prints them at.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from analyzer.explore import Options, explore
from lifter.errors import LiftError
from lifter.program import BpfObject, Program
from rules import ruleset
from rules.filled import FilledScript, finish_filled
from rules.levelfill import fill_level
from rules.mapcontents import MapContents, MapEntries
from rules.templates import Fill, FilledFilter, Template, fill, fill_entry, find_templates

from .mapjson import read_json_spec
from .mapsource import MapSourceSpec, open_maps
from .tcsync import SyncFilter


def read_source(spec: MapSourceSpec, obj: BpfObject) -> MapContents:
    """The contents one parsed --maps-from source holds now (live maps are read once)."""
    if spec.kind == "json":
        return read_json_spec(spec.where, {m.name: m for m in obj.maps})
    live = open_maps(obj, spec)
    try:
        if not live.maps:
            names = ", ".join(m.name for m in obj.maps) or "none"
            raise LiftError(f"--maps-from {spec}: none of the object's maps is there (maps: {names})", file=obj.path)
        return live.contents()
    finally:
        live.close()


def contents_from(specs: list[MapSourceSpec], obj: BpfObject) -> MapContents:
    """The contents the --maps-from sources name, merged (a map given twice is refused),
    then the object's initialised global data (`.rodata`, `.data`, `.bss`) for each
    section no source holds (what the program starts with unless its loader rewrites it:
    a live source, prog:ID or pinned:DIR, gives the values it runs with)."""
    merged = {}
    for spec in specs:
        got = read_source(spec, obj)
        for name, entries in got.maps.items():
            if name in merged:
                raise LiftError(f"--maps-from: map {name} given twice")
            merged[name] = entries
    return MapContents({**initial_globals(obj), **merged})


def initial_globals(obj: BpfObject) -> dict[str, MapEntries]:
    """The object's global data sections as one-entry arrays holding their initial bytes."""
    return {
        m.name: MapEntries(m.name, m.type.id, 4, len(m.initial), {bytes(4): (bytes(m.initial),)})
        for m in obj.maps
        if m.origin == "global" and m.type is not None and m.initial is not None
    }


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
    templates, unfit = templates_after(rs)
    filled = fill(templates, contents)
    needs = {t.index: t.needs for t in templates}
    script = finish_filled(static, rs.synth, filled, contents, dev, skip, max_rules, needs)
    return Filled(templates, unfit, filled, script)


def templates_after(rs: ruleset.RuleSet) -> tuple[list[Template], list]:
    """find_templates laid out after the static filters of `rs`: chain 0 prios after
    theirs, chains after theirs (what `rules` prints and `sync` keeps)."""
    first_chain = max((r.chain for r in rs.rules), default=0) + 1
    first_prio = max((r.prio for r in rs.rules if r.chain == 0), default=0) + 1
    return find_templates(rs.synth, first_chain, first_prio)


class TemplateFilling:
    """The rule templates of one program as sync's Filling (offload/sync.py): templates
    found once, each map entry's filters from `fill_entry` (exact, never aggregated, so a
    change touches only its own entry's filters). Only map-filled filters: the static
    filters of `rules`' script hold for every map content and are installed from it (sync
    leaves filters without its cookie alone). counter_maps is empty here: sync uses
    offload/counting.py's CountingFilling, which adds the filters' CounterRefs. A template
    with gates (an enable switch in `.data`) fills nothing here: its filters depend on another
    entry than their own, which a per-entry change cannot follow (rules fills it).

    Allow lists: a pass template is filled only where a drop template's proof relies on it
    (Template.needs, as rules.templates.fill). An LPM drop template proves each prefix length
    at its first entry, and that proof may add an allow list to `needs`: the allow list's
    pass filters for every entry must then go on the device before that drop. So `fill`
    fills the drop templates first and the allow lists they then need; `entry` asks for a
    whole fill (returns None) whenever an allow list is needed that the last `fill` did not
    give filters for."""

    counter_maps: frozenset[str] = frozenset()

    def __init__(self, templates: list[Template]):
        self.templates = templates
        self.maps = frozenset(lv.map for t in templates for lv in t.levels)
        self.filled_allow: frozenset[int] = frozenset()  # the pass templates the last fill() filled
        self.broken_allow: frozenset[int] = frozenset()  # of those, the ones with an entry without a filter

    def notes(self) -> list[str]:
        """One `# template` line per template (a NOT proven one fills nothing: say so)."""
        return [
            template_line(t)
            + (" (gated: rules only, not synced)" if t.gates else "")
            + (" (rules only, not synced)" if t.complement is not None else "")
            for t in self.templates
        ]

    def needed(self) -> frozenset[int]:
        """The pass templates a drop template's proof relies on (asked each time: an LPM
        shape's proof may add to `needs`)."""
        return frozenset(
            i
            for t in self.templates
            if not t.outcome.is_pass and t.complement is None  # complements: rules only
            for i in t.needs
        )

    def active(self) -> list[Template]:
        """The drop templates, and the allow lists a drop template's proof relies on."""
        needed = self.needed()
        return [t for t in self.templates if not t.outcome.is_pass or t.index in needed]

    def fill(self, contents: MapContents) -> list[SyncFilter]:
        """The union of every entry's filters (what `entry` keeps up to date): the drop
        templates' first (their proofs say which allow lists they need), then those allow
        lists'. A drop template relying on an allow list with an entry that gets no pass
        filter (an LPM /0, a key z3 refutes) fills nothing: its proof assumed every entry's
        pass filter before it (as rules.templates.fill)."""
        drops = {t.index: self._fill(t, contents)[0] for t in self.templates if not t.outcome.is_pass}
        needed = self.needed()
        allow = {t.index: self._fill(t, contents) for t in self.templates if t.outcome.is_pass and t.index in needed}
        self.broken_allow = frozenset(i for i, (_, incomplete) in allow.items() if incomplete)
        out: list[SyncFilter] = []
        for t in self.templates:
            if t.index in drops and not self.broken_allow & set(t.needs):
                out += drops[t.index]
        for filters, _ in allow.values():
            out += filters
        self.filled_allow = needed
        return out

    def _fill(self, t: Template, contents: MapContents) -> tuple[list[SyncFilter], bool]:
        """Template `t`'s filters for every entry given (fill_entry's batch form), and whether
        an entry got none for a reason other than pass-to-host."""
        out: list[SyncFilter] = []
        incomplete = False
        for level, lv in enumerate(t.levels):
            me = contents.get(lv.map)
            if me is None:
                continue
            make = self.converter(t, level)
            done = fill_level(t, level, me.entries)
            out += [make(f) for f in done.filters]
            incomplete |= any(why.code != "pass-to-host" for _, why in done.refused)
        return out, incomplete

    def entry(self, contents: MapContents, map_name: str, key: bytes) -> list[SyncFilter] | None:
        me = contents.get(map_name)
        values = me.value(key) if me is not None else None
        if self.needed() - self.filled_allow:
            return None
        allow_maps = {lv.map for t in self.templates if t.index in self.filled_allow for lv in t.levels}
        if map_name in allow_maps and self.broken_allow:  # a change may mend the allow list: refill
            return None
        if values is None:
            return []
        out = []
        for t in self.active():
            for level, lv in enumerate(t.levels):
                if lv.map == map_name:
                    make = self.converter(t, level)
                    filters, why = fill_entry(t, level, key, values)
                    if t.outcome.is_pass and why is not None and why.code != "pass-to-host":
                        return None  # an allow entry without its pass filter: refill without the drops relying on it
                    out += [make(f) for f in filters]
        if self.needed() - self.filled_allow:  # this entry's proof relies on an allow list not filled
            return None
        return out

    def converter(self, t: Template, level: int):
        """A function making the SyncFilter of one filled filter of template `t` at `level`
        (its one source entry is its origin; offload/counting.py adds counters)."""

        def make(f: FilledFilter) -> SyncFilter:
            (origin,) = f.sources
            return SyncFilter(f.match, f.action, f.prio, f.chain, origin)

        return make


def template_filling(obj: BpfObject, prog: Program, assume: tuple[str, ...] = ()) -> TemplateFilling | None:
    """A FILLINGS factory (offload/sync.py): the program's templates, None when it has none."""
    e = explore(obj, prog, Options())
    templates, _ = templates_after(ruleset.build(e, assume))
    return TemplateFilling(templates) if templates else None


def template_line(t: Template) -> str:
    """`# template N: paths ..: map[keys] -> action (proven | NOT proven | ...)`."""
    where = " -> ".join(
        f"{lv.map}[{'+'.join(lv.keys)}]" + "".join(f" value={n}" for n, _ in lv.vkeys) for lv in t.levels
    )
    where += "".join(f" if {g.map}" for g in t.gates)
    if t.complement is not None:  # deny mode (rules.templates.complements)
        where = "no entry: catch-all after the pass filters of templates " + ",".join(
            str(i) for i in t.needs if i != t.index
        )
    shapes = ", ".join("proven" if ok else "NOT proven" for ok in t.proved.values()) or "no entry"
    if t.outcome.is_pass:
        shapes = "pass filters, used only where a drop template's proof relies on them"
    paths = ",".join(map(str, t.paths))
    return f"# template {t.index}: paths {paths}: {where} -> {' '.join(t.outcome.action)} ({shapes})"


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
    out += [template_line(t) for t in f.templates]
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
