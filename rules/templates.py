"""Rule templates: filters for decisions on control-plane maps, proven once for every entry.

A path whose verdict needs entries in maps (`blacklist[ipv4.saddr] exists` -> DROP) becomes
a *template*: per lookup on the path (a *level*) the map, and how each byte of the map key
is a byte of a flower key or a constant (found with z3 under the path's typical packets:
`saddr` -> src_ip; a host-order u16 port -> dst_port's two bytes swapped; an LPM key of
prefix length 32 and an address -> src_ip/len). The path's other flower keys (ip_proto tcp
or udp) are the template's fixed part; conditions on the entry's value (a flag bit, an
action code) are kept as a formula over the value's bytes.

The proof (z3, once per template and key mask): for a symbolic entry key k of each level
and a symbolic value, in every map content that holds those entries and anything else
(the map functions are replaced by "k, or whatever the rest of the map holds"), every
packet the filled filters match gets the template's verdict from the program. No earlier
filter is assumed, so the filters stay sound wherever they are placed.

Layout: level 0's filters sit in chain 0; level i+1's in the template's own chain, which
level i's filters `goto`. Two nested maps of n and m entries take n + m filters, not
n x m: a packet reaches level 2 only through a level-1 entry it matches, and a chain where
nothing matches ends classification (the packet goes to the host: safe). Each level has a
band of prios, one per mask shape (an LPM entry's prefix length).

Arrays and global data (`.rodata`/`.data`/`.bss`) always hold the index: only the value
decides (level kind "index"). A value the packet is compared with becomes a flower key of
the filter (Level.vkeys: config_array's `dst_port VALUE`); a constant-key lookup whose
value only switches the decision is a gate (Template.gates). An LPM value decides through
the longest match (Template.longest): every entry gets a filter at its prefix length's
prio, `pass` where its value does not take the decision, and the proof takes the entry as
the longest match wherever it covers the lookup.

Deny mode (xdp-filter's dny_*: an entry with its flag passes, every other packet drops): a
path taken when the maps hold NO entry for the packet gets a *complement* per untagged family
(`complements`): the pass filters of the allow templates (one per entry whose value on any
CPU passes), static pass shields from counterexamples, then one catch-all drop. Its proof
assumes only that those pass filters come first (pass_region, for every map content), so
it needs every entry's pass filter: a missing one (budget, software) takes the catch-all
out. `sync` leaves complements to `rules` (an entry added to the map would need its pass
filter before the syscall returns).

Key layouts (`key_layout`) are guessed from models and proven in one query per guess.

Filling is per entry (`fill_entry`: the filters of one map entry of one template, so a map
change re-renders only its own filters), per level (rules/levelfill.py: fill_entry's batch
form, the same output) and whole (`fill`: every entry, optional address aggregation proven
equal with z3, and the rule budget).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import itertools
from dataclasses import dataclass, field

import z3

from analyzer.symbolic import map_found, map_val, source_of, symbols
from lifter.maps import is_global_data_section

from . import lpmagg
from .dissector import MAX_EXT, match_formula
from .flower import FLOWER_KEYS, PROTOCOLS, Exact, FlowerMatch, exact, prefix_mask
from .mapcontents import MapContents
from .reasons import Reason
from .synthesis import EXTRACTED, MAX_SHIELDS, Block, Outcome, Synthesizer, assumption_constraints, solver

#: Prios per level: one per mask shape (prefix lengths 0..128 of an address key).
PRIO_BAND = 130
#: Counterexample keys a template proof may set aside before it gives up.
MAX_EXCLUDED = 4
#: Fixed-key combinations (ip_proto tcp / udp, ...) one template may take.
MAX_COMBOS = 16
#: Per template proof query (ms): one proof per template and shape (per family for a
#: complement), over every path of the program; the synthesis' 10 s is too short for
#: xdp-filter's IPv6 source address on a loaded machine.
PROOF_TIMEOUT_MS = 120_000
#: IPv6 without extension headers: where a moved key byte is guessed again (_family_templates).
PLAIN_IPV6 = assumption_constraints(["no-ipv6-ext"])
#: Keys whose contents may be aggregated into prefixes (an address set), and an LPM key's.
ADDRESS_KEYS = ("src_ip", "dst_ip", "src_ip6", "dst_ip6")


@dataclass(frozen=True)
class KeyByte:
    """One byte of a map key (in the kernel's memory order): a constant, or byte `byte` of
    flower key `key` (0 = most significant, network order)."""

    const: int | None = None
    key: str | None = None
    byte: int = 0


@dataclass
class Level:
    """One map lookup of a template. `kind` "hash" (exact key), "lpm" (layout covers the
    address bytes after the 4-byte prefix length) or "index" (an array or a global data
    section: every index below `max_entries` holds an entry, so only the value decides);
    `keys`: the flower keys the layout fills; `vkeys`: flower keys whose value IS the entry's
    value (a port stored in a configuration array: `dst_port VALUE`), each as the value byte
    offsets of its bytes (most significant first)."""

    map: str
    kind: str
    key_size: int
    layout: tuple[KeyByte, ...]
    keys: tuple[str, ...]
    chain: int = 0
    prio: int = 1
    lookup: z3.BitVecRef | None = field(default=None, compare=False, repr=False)  # the key term on the path
    max_entries: int = 0
    vkeys: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass
class Template:
    """A rule template (module doc). `combos`: the fixed keys of each filter variant (one per
    ip_proto the path allows, ...); `value_cond`: what the path requires of the entries'
    values, over map.M.val at the levels' key variables (None: presence decides); `gates`:
    constant-key lookups (an enable switch in `.data`, slot 0 of a config array) whose
    values only condition the filters: no filter of their own, and a filter exists only
    while every gate's value takes the decision (their key variables follow the levels');
    `proved`: per mask shape (a tuple of prefix lengths, one per level), the proof's answer;
    `excluded`: per proven shape, the key tuples (one integer per level, the key bytes read
    little-endian) z3 found counterexamples at: the proof holds for every other key."""

    index: int
    protocol: str
    combos: list[tuple[tuple[str, Exact], ...]]
    levels: list[Level]
    outcome: Outcome
    paths: list[int]
    value_cond: z3.BoolRef | None = None
    proved: dict[tuple, bool] = field(default_factory=dict)
    excluded: dict[tuple, list[tuple[int, ...]]] = field(default_factory=dict)
    value_memo: dict = field(default_factory=dict, repr=False)  # (level, key or None, value) -> ok
    before: list = field(default_factory=list, repr=False)  # earlier pass templates (allow lists)
    needs: list[int] = field(default_factory=list)  # pass templates a proof relied on
    synth: Synthesizer | None = None
    gates: list[Level] = field(default_factory=list)
    longest: bool = False  # an LPM value decides: every entry gets a filter (module doc)
    #: a complement (deny mode, module doc): the pass filters it puts before its catch-all
    complement: list[FlowerMatch] | None = None
    prio: int = 0  # a complement's first prio (its shields, then the catch-all)

    @property
    def lookups(self) -> list[Level]:
        """The levels, then the gates: the order of key_vars."""
        return self.levels + self.gates

    @functools.cached_property
    def value_by_value(self) -> bool:
        """The value condition reads the keys only through map.M.val(key, .): an entry's
        answer depends on its value alone."""
        if self.value_cond is None:
            return True
        subs = []
        for lv in self.lookups:
            kbits = 8 * lv.key_size
            f = z3.Function(f"tpl.v.{lv.map}", z3.BitVecSort(32), z3.BitVecSort(8))
            subs.append((map_val(lv.map, kbits), f(z3.Var(1, z3.BitVecSort(32)))))
        rest = z3.substitute_funs(self.value_cond, *subs)
        return not any(n.startswith("tpl.key") for n in symbols(rest))

    @property
    def maps(self) -> tuple[str, ...]:
        return tuple(lv.map for lv in self.levels)


@dataclass(frozen=True)
class FilledFilter:
    """A filter filled from map entries: where it goes (chain, prio), what it matches and does,
    and the (map name, key bytes) entries it came from (several after aggregation)."""

    template: int
    level: int
    chain: int
    prio: int
    match: FlowerMatch
    action: tuple[str, ...]
    role: str  # "rule" | "goto" | "shield" (a pass filter of an allow list)
    sources: tuple[tuple[str, bytes], ...]
    paths: tuple[int, ...] = ()


@dataclass
class Fill:
    """The filled filters (print order), the entries left in software with why, and the
    aggregation's proofs (map name -> (entries, prefixes, proven equal))."""

    filters: list[FilledFilter]
    software: list[tuple[tuple[str, bytes], Reason]] = field(default_factory=list)
    aggregated: dict[str, tuple[int, int, bool]] = field(default_factory=dict)


# --- finding templates -------------------------------------------------------------------


def find_templates(synth: Synthesizer, first_chain: int = 1, first_prio: int = 1) -> tuple[list[Template], list]:
    """The templates of the program's map-dependent non-pass paths, proven for the shapes a
    hash map has (LPM shapes are proven when first filled). Returns (templates, [(paths,
    Reason)] for map-dependent paths no template takes)."""
    e = synth.e
    mdefs = {m.name: m for m in e.obj.maps}
    templates: list[Template] = []
    software = []
    chain, prio = first_chain, first_prio
    no_entry = []
    for p in e.paths:
        o = synth.outcomes[p.id]
        if not isinstance(o, Outcome):
            continue
        made = _path_templates(synth, p, o, mdefs)
        if isinstance(made, Reason) and made.detail.endswith(MOVED):
            # a parser that skips VLAN tags: a field at several offsets; per untagged family
            views = [_family_templates(synth, s, fam, p, o, mdefs) for fam, s in _per_family(synth, p)]
            found = [t for v in views if isinstance(v, list) for t in v]
            why = [v for v in views if isinstance(v, Reason) and not v.detail.endswith(MOVED)]
            if found:  # a family's own reason (IPv6 ports) for the packets the others' templates leave
                software += [([p.id], w) for w in why if not o.is_pass]
            made = found or (why[0] if why else made)
        if made is None:
            continue
        if isinstance(made, Reason):
            if made.detail.endswith(NO_ENTRY):
                no_entry.append((p, o, made))
            elif not o.is_pass:
                software.append(([p.id], made))
            continue
        for t in made:
            t.synth = synth  # proofs against the program's own paths, not a view's
            same = next((x for x in templates if _same(x, t)), None)
            if same is not None:
                same.paths.append(p.id)
                continue
            t.index = len(templates)
            t.before = [x for x in templates if x.outcome.is_pass]
            if t.longest:
                t.needs = [t.index]  # its drops rely on its own pass filters (longer entries)
            t.levels = [dataclasses.replace(lv) for lv in t.levels]
            t.gates = [dataclasses.replace(lv) for lv in t.gates]
            for i, lv in enumerate(t.levels):
                if i:
                    lv.chain, chain = chain, chain + 1
                lv.prio = prio
                prio += PRIO_BAND
            templates.append(t)
    for t in templates:
        if all(lv.kind != "lpm" for lv in t.levels) and not t.outcome.is_pass:
            prove(t, tuple(None for _ in t.levels))
    for made in complements(synth, no_entry, templates):
        if isinstance(made, Template):
            made.index, made.prio = len(templates), prio
            made.needs = sorted(set(made.needs) | {made.index})  # its own shields too (rule budget)
            prio += PRIO_BAND
            templates.append(made)
        else:
            software.append(made)
    return templates, software


#: How _level's reason ends when a key byte is no one flower key's byte on all the path's packets.
MOVED = "is not a flower key's byte"


def _path_templates(s: Synthesizer, p, o: Outcome, mdefs: dict) -> list[Template] | Reason | None:
    """The templates of one path (None: no map decides it, or a pass path no allow list
    uses; a Reason: map-dependent and no template)."""
    cond = z3.And(s.conds[p.id], *s.env, s.typical)
    positive = []
    for a in p.accesses:
        mdef = mdefs.get(a.map)
        if mdef is None or mdef.type is None or is_global_data_section(mdef.section):
            continue
        if mdef.type.keyed not in ("hash", "lpm"):
            continue
        f = map_found(a.map, a.key.size())(a.key)
        if solver(cond, z3.Not(f)).check() == z3.unsat:
            positive.append((a, mdef))
    positive += [(a, mdefs[a.map]) for a in value_reads(s.conds[p.id], mdefs)]
    if not positive:
        read = sorted({a.map for a in p.accesses if s.maps.get(a.map) == "control-plane"})
        return _no_entry(read) if read and not o.is_pass else None
    levels = []
    for a, mdef in positive:
        if s.maps.get(a.map) != "control-plane":
            return Reason("map-dependent", f"map {a.map} is written by the program ({s.maps.get(a.map)})")
        if mdef.type.keyed == "index" and _unset_takes_it(s.conds[p.id], a):
            continue  # an array's miss (xdp-filter: no flag at this port): the proof's business
        level = _level(s, cond, a, mdef)
        if isinstance(level, Reason):
            return level
        levels.append(level)
    if not levels:
        return _no_entry(sorted({a.map for a, _ in positive})) if not o.is_pass else None
    levels, gates = _split_gates(s, cond, levels)
    if len(levels) > 1 and any(lv.kind == "lpm" for lv in levels):
        return Reason("map-dependent", "an LPM lookup nested with another map lookup")
    if o.is_pass and (len(levels) > 1 or gates):
        return None  # pass filters are for allow lists: one lookup
    return _template(s, p, o, cond, levels, gates)


def _per_family(s: Synthesizer, p):
    """Views of the synthesis state with path `p` restricted to each untagged family (ip,
    ipv6, arp) its packets may be: the filters get that `protocol`, which tc compares with
    the outer ethertype (a tagged packet is left to the program). Proofs still use the
    program's own paths (find_templates puts the real state back)."""
    d = s.d
    for fam in ("ip", "ipv6", "arp"):
        only = d.skb_protocol == PROTOCOLS[fam]
        if solver(s.conds[p.id], *s.env, s.typical, only).check() == z3.sat:
            yield fam, _restricted(s, p, [only])  # the view's blocks are not the program's path's


def _family_templates(synth: Synthesizer, s: Synthesizer, fam: str, p, o: Outcome, mdefs: dict):
    """_path_templates on family view `s`; for IPv6, when a key byte moves, again on plain
    IPv6 headers (PLAIN_IPV6): behind an AH or mobility header the program may read the
    port after it while flower's dissector stops there, a fragment header hides the ports
    from flower, and the program and flower may give up after different numbers of headers.
    Only the guess (layout, fixed keys) is restricted: each drop template found so is proven
    at once against the program's own paths for every packet, and refused (with whether it
    would prove under --assume no-ipv6-ext) when it does not."""
    made = _path_templates(s, p, o, mdefs)
    if fam != "ipv6" or not isinstance(made, Reason) or not made.detail.endswith(MOVED):
        return made
    again = _path_templates(_restricted(s, p, PLAIN_IPV6), p, o, mdefs)
    if not isinstance(again, list):
        return made
    kept = []
    for t in again:
        t.synth = synth
        shape = tuple(None for _ in t.levels)
        if t.outcome.is_pass or any(lv.kind == "lpm" for lv in t.levels) or prove(t, shape):
            kept.append(t)
            continue
        plain = dataclasses.replace(t, synth=copy.copy(synth), proved={}, excluded={})
        plain.synth.env = [*synth.env, *PLAIN_IPV6]
        made = Reason(
            "not-expressible",
            f"map {t.levels[0].map}: {', '.join(lv.keys[0] for lv in t.levels if lv.keys)} behind IPv6 "
            "extension headers is not proven for every packet (flower's dissector stops at AH and mobility "
            "headers and reads no ports behind a fragment header, where the program reads on; the dissector "
            f"model leaves flower's keys free after {MAX_EXT} headers); "
            + ("proven with --assume no-ipv6-ext" if prove(plain, shape) else "not proven even without them"),
        )
    return kept or made


def _restricted(s: Synthesizer, p, extra: list) -> Synthesizer:
    """A view of `s` with path `p`'s condition narrowed by `extra` (its own extraction)."""
    view = copy.copy(s)
    view.conds = {**s.conds, p.id: z3.And(s.conds[p.id], *extra)}
    view.extracted = {}
    return view


def _same(a: Template, b: Template) -> bool:
    """Two paths of one template: same levels, fixed keys, outcome and value condition."""
    if (a.value_cond is None) != (b.value_cond is None):
        return False
    if a.value_cond is not None and not a.value_cond.eq(b.value_cond):
        return False
    return (a.protocol, a.combos, a.outcome, [(lv.map, lv.layout, lv.vkeys) for lv in a.lookups]) == (
        b.protocol,
        b.combos,
        b.outcome,
        [(lv.map, lv.layout, lv.vkeys) for lv in b.lookups],
    )


@dataclass(frozen=True)
class ValueRead:
    """A lookup seen only through the values the path reads (arrays and global data: the
    entry always exists, so no `found` condition names it)."""

    map: str
    key: z3.BitVecRef


def value_reads(cond: z3.BoolRef, mdefs: dict) -> list[ValueRead]:
    """The index-keyed lookups (array, per-CPU array, `.rodata`/`.data`/`.bss`) whose values
    the path condition reads, one per (map, key term), in first-seen order."""
    out: list[ValueRead] = []
    stack, seen = [cond], set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if (
            z3.is_app(t)
            and t.num_args() == 2
            and t.decl().name().startswith("map.")
            and t.decl().name().endswith(".val")
        ):
            name = t.decl().name()[4:-4]
            mdef = mdefs.get(name)
            if mdef is not None and mdef.type is not None and mdef.type.keyed == "index" and mdef.type.holds == "data":
                if not any(r.map == name and r.key.eq(t.arg(0)) for r in out):
                    out.append(ValueRead(name, t.arg(0)))
        stack += reversed(t.children())
    return out


def _unset_takes_it(cond: z3.BoolRef, a: ValueRead) -> bool:
    """Whether an unset (all-zero) entry at this array lookup meets what the path asks of
    its value: the lookup is a miss (like a hash lookup that finds nothing), so it makes no
    filter level; every index would need one."""
    if z3.is_bv_value(a.key):
        return False  # a constant slot (a config array, global data): its value is the decision
    parts = [c for c in _conjuncts(cond) if _reads_value_at(c, a.map, a.key)]
    if not parts:
        return False
    zero = []
    stack, seen = list(parts), set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_app(t) and t.decl().name() == f"map.{a.map}.val" and t.arg(0).eq(a.key):
            zero.append((t, z3.BitVecVal(0, 8)))
        else:
            stack += t.children()
    return solver(z3.substitute(z3.And(parts), *zero)).check() == z3.sat


#: How _no_entry's reason ends (find_templates tries a complement for those paths).
NO_ENTRY = "no entry for the packet"


def _no_entry(maps: list[str]) -> Reason:
    """Why a path taken when the maps hold NO entry for the packet (xdp-filter's deny mode:
    the hits pass, the rest drops) gets no template of its own (complements() may take it)."""
    return Reason("map-dependent", f"taken when {', '.join(maps)} holds {NO_ENTRY}")


def complements(s: Synthesizer, no_entry: list, templates: list[Template]) -> list:
    """Deny mode: per untagged family (ip, ipv6, arp) of the paths taken when the maps hold no
    entry for the packet, a complement template: the pass filters of the allow templates
    (one per entry, Template.needs), then static pass shields, then one catch-all filter
    `protocol FAMILY action drop`. Proven once for every map content: a packet of the catch-all that no pass
    filter of those templates takes (pass_region, whatever the maps hold) and no shield
    takes gets the block's verdict from the program. Shields come from counterexamples as
    the static synthesis makes them (an ICMPv6 neighbour solicitation whose target, no
    flower key, is in the map). Returns the templates and, for paths none takes, ([path
    ids], Reason)."""
    out: list = []
    allow = [t for t in templates if t.outcome.is_pass and len(t.levels) == 1 and not t.gates]
    groups: dict[tuple, tuple[Block, Reason]] = {}
    for p, o, why in no_entry:
        families = [fam for fam, _ in _per_family(s, p)] if allow else []
        if not families:
            out.append(([p.id], _complement_reason(why, "no allow template to put before a catch-all")))
        for fam in families:  # a catch-all per untagged family (a tagged frame goes to the host)
            b, _ = groups.setdefault((fam, o), (Block(fam, {}, o, []), why))
            b.paths.append(p.id)
    for b, why in groups.values():
        made = _complement(s, b, allow)
        if isinstance(made, Reason):
            out.append((b.paths, _complement_reason(why, made.detail)))
        else:
            out.append(made)
    return out


def _complement_reason(why: Reason, detail: str) -> Reason:
    return Reason(why.code, f"{why.detail}; no complement (a catch-all after a pass filter per entry): {detail}")


def _complement(s: Synthesizer, b: Block, allow: list[Template]) -> Template | Reason:
    """One complement template for block `b` (complements()), or why none proves."""
    d = s.d
    combos: list[tuple] = [()]  # the bare family: every packet no pass filter took
    region = match_formula(FlowerMatch(b.protocol, ()), d)
    shields = [t for t in allow if solver(region, z3.Or(*_template_regions(t))).check() == z3.sat]
    passed = [z3.Not(pass_region(t)) for t in shields]
    good = s.good(b.outcome)
    own = z3.Or([s.conds[p] for p in b.paths])
    for _ in range(MAX_SHIELDS):
        static = [z3.Not(match_formula(m, d)) for m in b.shields]
        q = solver(*s.env, region, *passed, *static, z3.Not(good))
        q.set("timeout", PROOF_TIMEOUT_MS)
        r = q.check()
        if r == z3.unknown:
            return Reason("unknown", "z3 gave no answer in time")
        if r == z3.unsat:
            if solver(*s.env, region, *passed, *static, own).check() == z3.unsat:
                return Reason("not-expressible", "the pass filters and shields take every packet of these paths")
            t = Template(0, b.protocol, combos, [], b.outcome, list(b.paths), synth=s, complement=list(b.shields))
            t.needs = [x.index for x in shields]
            t.proved[()] = True
            t.excluded[()] = []
            return t
        b.shields = s.widen(b, good, s.shield(b, q.model(), good))
    return Reason("not-expressible", f"not proved after {MAX_SHIELDS} shields")


def _template_regions(t: Template) -> list[z3.BoolRef]:
    """Packets of each fixed-key combination of template `t`, its map keys free."""
    return [match_formula(FlowerMatch(t.protocol, c), t.synth.d) for c in t.combos]


def _split_gates(s: Synthesizer, cond: z3.BoolRef, levels: list[Level]) -> tuple[list[Level], list[Level]]:
    """The levels that give filters, and the gates (constant-key lookups whose values only
    condition them). The filter levels are the lookups keyed by packet fields; with none,
    the constant-key lookup whose value gives a flower key (`dst_port VALUE`), else the
    first constant-key lookup (its entry's value switches a fixed filter on)."""
    keyed = [lv for lv in levels if lv.keys]
    const = [dataclasses.replace(lv, vkeys=_value_keys(s, cond, lv)) for lv in levels if not lv.keys]
    if keyed:
        return keyed, const
    if not const:
        return [], []
    first = next((lv for lv in const if lv.vkeys), const[0])
    return [first], [lv for lv in const if lv is not first]


def _value_keys(s: Synthesizer, cond: z3.BoolRef, lv: Level) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The flower keys equal, on every packet of the path, to bytes of the entry's value:
    (key, value byte offset of each of its bytes, most significant first). Candidates are
    the keys whose bytes equal value bytes in two models (the second with every value byte
    the packet is compared with changed); one z3 query per candidate decides."""
    if lv.lookup is None:
        return ()
    compared = [c for c in _conjuncts(cond) if _reads_packet(c) and _reads_value_at(c, lv.map, lv.lookup)]
    if not compared:
        return ()  # no condition compares the packet with this value
    kbits = lv.lookup.size()
    vsize = next((x.value_size for x in s.e.obj.maps if x.name == lv.map), 0) or 0
    vbytes = [map_val(lv.map, kbits)(lv.lookup, z3.BitVecVal(o, 32)) for o in range(min(vsize, 64))]
    involved = [o for o, b in enumerate(vbytes) if any(_reads_term(c, b) for c in compared)]
    q = solver(cond)
    if not involved or q.check() != z3.sat:
        return ()
    m = q.model()
    changed = [vbytes[o] != m.eval(vbytes[o], model_completion=True) for o in involved]
    distinct = [z3.Distinct([vbytes[o] for o in involved])] if len(involved) > 1 else []
    models = [m]
    for extra in (changed + distinct, changed):
        q2 = solver(cond, *extra)
        if q2.check() == z3.sat:
            models.append(q2.model())
            break
    out = []
    for n in _flower_names(s):
        width = FLOWER_KEYS[n].width
        if width % 8:
            continue
        term = s.d.keys[n]
        offs = []
        for j in range(width // 8):
            hi = width - 1 - 8 * j
            cand = z3.Extract(hi, hi - 7, term)
            hit = next(
                (
                    o
                    for o, b in enumerate(vbytes)
                    if o in involved
                    and all(x.eval(cand, model_completion=True).eq(x.eval(b, model_completion=True)) for x in models)
                ),
                None,
            )
            if hit is None:
                break
            offs.append(hit)
        if len(offs) == width // 8:
            value = z3.Concat([vbytes[o] for o in offs]) if len(offs) > 1 else vbytes[offs[0]]
            if solver(cond, term != value).check() == z3.unsat:
                out.append((n, tuple(offs)))
    return tuple(out)


def _reads_term(e: z3.ExprRef, term: z3.ExprRef) -> bool:
    """Whether `term` occurs in `e`."""
    stack, seen = [e], set()
    while stack:
        t = stack.pop()
        if t.eq(term):
            return True
        if t.get_id() not in seen:
            seen.add(t.get_id())
            stack += t.children()
    return False


def _flower_names(s: Synthesizer) -> list[str]:
    """The flower keys a map key or value may hold, in the extraction order."""
    return list(dict.fromkeys(n for f in ("ip", "ipv6", "arp") for n in EXTRACTED.get(f, ()) if n in s.d.keys))


def key_layout(s: Synthesizer, cond: z3.BoolRef, key: z3.BitVecRef) -> tuple[KeyByte, ...] | int | None:
    """Each byte of `key` (a lookup's key term, kernel memory order) as a constant or a byte
    of a flower key on every packet of `cond`; None: no packet takes `cond`; an int: the
    first byte that is neither.

    Guessed from models and proven in one query: a counterexample refutes at least one
    guess and joins the models, so the candidates shrink until the guess proves (one solver
    holds `cond` throughout: a query per byte and candidate re-reads it each time). Where a
    byte is several keys' byte, a constant wins, then the widest key all of whose bytes the
    key holds: an IPv6 address is src_ip6, not the IPv4 keys' view of its first bytes
    (flow_dissector_key_addrs is a union)."""
    q = solver(cond)
    if q.check() != z3.sat:
        return None
    kbytes = [z3.Extract(8 * i + 7, 8 * i, key) for i in range(key.size() // 8)]
    names = [n for n in _flower_names(s) if FLOWER_KEYS[n].width % 8 == 0]
    models = [q.model()]
    q.push()
    q.add(z3.And([b != models[0].eval(b, model_completion=True) for b in kbytes]))
    if q.check() == z3.sat:  # every byte that can change changed: fewer coincidences
        models.append(q.model())
    q.pop()

    def seen(m) -> tuple[list[int], dict[str, int]]:
        return [m.eval(b, model_completion=True).as_long() for b in kbytes], {
            n: m.eval(s.d.keys[n], model_completion=True).as_long() for n in names
        }

    def byte_of(vals: dict[str, int], n: str, j: int) -> int:
        return vals[n] >> (FLOWER_KEYS[n].width - 8 - 8 * j) & 0xFF

    first, _ = seen(models[0])
    cands: list[list] = [
        [("const", v)] + [(n, j) for n in names for j in range(FLOWER_KEYS[n].width // 8)] for v in first
    ]

    def refine(m) -> None:
        got, vals = seen(m)
        for i, cs in enumerate(cands):
            cs[:] = [c for c in cs if (c[1] if c[0] == "const" else byte_of(vals, *c)) == got[i]]

    for m in models:
        refine(m)
    while True:
        bad = next((i for i, cs in enumerate(cands) if not cs), None)
        if bad is not None:
            return bad
        guess = _guess(cands, names)
        terms = [_candidate_term(s, c) for c in guess]
        q.push()
        q.add(z3.Or([b != t for b, t in zip(kbytes, terms)]))
        r = q.check()
        m = q.model() if r == z3.sat else None
        q.pop()
        if r == z3.unknown:  # each byte's guess alone; one that does not prove is dropped
            dropped = False
            for i, (b, t) in enumerate(zip(kbytes, terms)):
                q.push()
                q.add(b != t)
                if q.check() != z3.unsat:
                    cands[i].remove(guess[i])
                    dropped = True
                q.pop()
            if not dropped:
                r = z3.unsat  # every byte proved alone
        if r == z3.unsat:
            return tuple(KeyByte(const=c[1]) if c[0] == "const" else KeyByte(key=c[0], byte=c[1]) for c in guess)
        if m is not None:
            refine(m)


def _guess(cands: list[list], names: list[str]) -> list:
    """One candidate per key byte (key_layout): constants first, then the keys every byte
    of which some byte may be, widest first, then whatever is left."""
    guess: list = [cs[0] if cs[0][0] == "const" else None for cs in cands]
    whole = [
        n for n in names if all(any(c == (n, j) for cs in cands for c in cs) for j in range(FLOWER_KEYS[n].width // 8))
    ]
    for n in sorted(whole, key=lambda n: -FLOWER_KEYS[n].width):
        at = {}
        for j in range(FLOWER_KEYS[n].width // 8):
            i = next(
                (i for i, cs in enumerate(cands) if guess[i] is None and i not in at.values() and (n, j) in cs), None
            )
            if i is None:
                break
            at[j] = i
        else:
            for j, i in at.items():
                guess[i] = (n, j)
    return [g if g is not None else cands[i][0] for i, g in enumerate(guess)]


def _candidate_term(s: Synthesizer, c) -> z3.BitVecRef:
    if c[0] == "const":
        return z3.BitVecVal(c[1], 8)
    hi = FLOWER_KEYS[c[0]].width - 1 - 8 * c[1]
    return z3.Extract(hi, hi - 7, s.d.keys[c[0]])


def _level(s: Synthesizer, cond: z3.BoolRef, a, mdef) -> Level | Reason:
    """How the lookup's key bytes come from flower keys (or a Reason why they do not)."""
    lpm = mdef.type.keyed == "lpm"
    size = a.key.size() // 8
    layout = key_layout(s, cond, a.key)
    if layout is None:
        return Reason("atypical-packets", "only atypical packets take this path")
    if isinstance(layout, int):
        return Reason("map-dependent", f"map {a.map}: key byte {layout} {MOVED}")
    keys = tuple(dict.fromkeys(kb.key for kb in layout if kb.key))
    for n in keys:
        got = sorted(kb.byte for kb in layout if kb.key == n)
        if got != list(range(FLOWER_KEYS[n].width // 8)):
            return Reason("map-dependent", f"map {a.map}: the key holds part of {n} only")
    index = mdef.type.keyed == "index" or is_global_data_section(mdef.section)
    if not keys and not index:
        return Reason("map-dependent", f"map {a.map}: a constant key (the value decides)")
    if index:
        return Level(a.map, "index", size, tuple(layout), keys, lookup=a.key, max_entries=mdef.max_entries or 1)
    if lpm:
        head, data = layout[:4], tuple(layout[4:])
        plen = sum((kb.const or 0) << (8 * i) for i, kb in enumerate(head))
        if any(kb.const is None for kb in head) or plen != 8 * len(data) or len(keys) != 1:
            return Reason("map-dependent", f"map {a.map}: an LPM lookup that is not a full-length address")
        if keys[0] not in ADDRESS_KEYS or any(kb.key is None for kb in data):
            return Reason("map-dependent", f"map {a.map}: an LPM key that is not one address")
        if [kb.byte for kb in data] != list(range(len(data))):
            return Reason("map-dependent", f"map {a.map}: an LPM address not in network order")
        return Level(a.map, "lpm", mdef.key_size, data, keys, lookup=a.key)
    return Level(a.map, "hash", mdef.key_size, tuple(layout), keys, lookup=a.key)


def _template(s: Synthesizer, p, o: Outcome, cond, levels: list[Level], gates: list[Level]) -> list[Template] | Reason:
    """The path's template(s): one, or one per fixed-key combination when the value
    condition also reads the packet (xdp-filter's `*mask & l4flag`: a flag per ip_proto),
    specialised to what that combination fixes."""
    block = s.extract(p, o, quiet=True)
    if block is None:
        return Reason("atypical-packets", "only atypical packets take this path")
    filled = {n for lv in levels for n in lv.keys + tuple(v for v, _ in lv.vkeys)}
    combos = _combos(block, filled)
    if isinstance(combos, Reason):
        return combos
    # what the path asks of the entries' values
    # (a conjunct about another lookup's value, an earlier "not in the map", is the
    # proof's business through the program's other paths, not a condition on the entry;
    # a conjunct comparing the packet with a value a flower key takes from (vkeys) is the
    # filter's match itself, which the proof checks)
    lookups = levels + gates
    value_parts = []
    for c in _conjuncts(s.conds[p.id]):
        at = [lv for lv in lookups if _reads_value_at(c, lv.map, lv.lookup)]
        if at and not (_reads_packet(c) and any(lv.vkeys for lv in at)):
            value_parts.append(c)
    if not value_parts:
        return [Template(0, block.protocol, combos, levels, o, [p.id], None, synth=s, gates=gates)]
    longest = any(lv.kind == "lpm" for lv in levels)
    if longest:
        (lv,) = levels
        other = [a for q in s.e.paths for a in q.accesses if a.map == lv.map and not a.key.eq(lv.lookup)]
        if other or gates:
            return Reason("map-dependent", f"an LPM value decides and {lv.map} is also looked up elsewhere")
    for c in value_parts:
        if sum(_reads_value_at(c, lv.map, lv.lookup) for lv in lookups) > 1:
            return Reason("map-dependent", "one condition relates the values of two lookups")
    value_cond = rekey(z3.And(value_parts), [(lv.map, lv.lookup, k) for lv, k in zip(lookups, key_vars(lookups))])
    if not _reads_packet(value_cond):
        return [
            Template(0, block.protocol, combos, levels, o, [p.id], value_cond, synth=s, gates=gates, longest=longest)
        ]
    if longest:
        return Reason("map-dependent", "an LPM value compared with packet fields")
    out = []
    for combo in combos:
        region = z3.And(cond, match_formula(FlowerMatch(block.protocol, combo), s.d))
        v = _specialise(value_cond, region)
        if v is None:
            return Reason("map-dependent", "a map value is compared with packet fields")
        out.append(Template(0, block.protocol, [combo], levels, o, [p.id], v, synth=s, gates=gates))
    return out


def _combos(block: Block, filled: set[str]) -> list[tuple[tuple[str, Exact], ...]] | Reason:
    """The fixed keys of each filter variant of an extracted block (one per value of each
    key with several values), beside placeholders for the keys a map entry fills."""
    fixed = {n: v for n, v in block.sets.items() if n not in filled}
    multi = [(n, v) for n, v in fixed.items() if len(v) > 1]
    single = [(n, exact(n, v[0])) for n, v in fixed.items() if len(v) == 1]
    single += [(n, v) for n, v in block.masked.items() if n not in filled]
    combos = []
    for values in itertools.product(*[v for _, v in multi]):
        if len(combos) >= MAX_COMBOS:
            return Reason("map-dependent", "too many fixed-key combinations for one template")
        combo = tuple(single) + tuple((n, exact(n, x)) for (n, _), x in zip(multi, values))
        placeholders = tuple((n, exact(n, 0)) for n in sorted(filled))
        try:
            FlowerMatch(block.protocol, combo + placeholders)
        except ValueError as err:  # a key flower refuses beside this combination (ports of ICMP)
            return Reason("not-expressible", f"no flower match for the map key here: {err}")
        combos.append(combo)
    return combos


def rekey(e: z3.ExprRef, lookups: list[tuple[str, z3.ExprRef, z3.ExprRef]]) -> z3.ExprRef:
    """`e` with each value read map.M.val(key, off) at a lookup's key term read at its key
    variable instead ((map, key term, key variable) per lookup). Only those reads: a
    constant key (slot 0 of an array) must not turn every other 0 into the variable."""
    pairs = []
    stack, seen = [e], set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_app(t) and t.num_args() == 2:
            for name, key, var in lookups:
                if t.decl().name() == f"map.{name}.val" and t.arg(0).eq(key):
                    pairs.append((t, map_val(name, var.size())(var, t.arg(1))))
        stack += t.children()
    return z3.substitute(e, *pairs) if pairs else e


def _reads_value_at(e: z3.ExprRef, name: str, key: z3.ExprRef) -> bool:
    """Whether `e` reads map `name`'s value at the lookup key `key`."""
    fname = f"map.{name}.val"
    stack, seen = [e], set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_app(t) and t.decl().name() == fname and t.arg(0).eq(key):
            return True
        stack += t.children()
    return False


def _reads_packet(e: z3.ExprRef) -> bool:
    return any(source_of(n) is not None and source_of(n).kind != "map" for n in symbols(e) if not n.startswith("tpl."))


def _specialise(v: z3.BoolRef, region: z3.BoolRef) -> z3.BoolRef | None:
    """`v` with each of its packet-only subterms replaced by the one value it has in
    `region` (None if one has several)."""
    q = solver(region)
    if q.check() != z3.sat:
        return None
    m = q.model()
    subs = []
    stack, seen = [v], set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen or z3.is_const(t) and not _reads_packet(t):
            continue
        seen.add(t.get_id())
        if not any(n.startswith(("map.", "tpl.")) for n in symbols(t)):
            if _reads_packet(t):
                val = m.eval(t, model_completion=True)
                if solver(region, t != val).check() != z3.unsat:
                    return None
                subs.append((t, val))
            continue
        stack += t.children()
    return z3.simplify(z3.substitute(v, *subs)) if subs else v


def _conjuncts(e: z3.BoolRef):
    if z3.is_and(e):
        for c in e.children():
            yield from _conjuncts(c)
    else:
        yield e


def key_vars(levels: list[Level]) -> list[z3.BitVecRef]:
    """The placeholder key of each level (the proof's and the value condition's)."""
    return [z3.BitVec(f"tpl.key{i}.{8 * lv.key_size}", 8 * lv.key_size) for i, lv in enumerate(levels)]


# --- the proof ---------------------------------------------------------------------------


def _net(k: z3.BitVecRef, layout: tuple[KeyByte, ...], name: str, offset: int = 0) -> z3.BitVecRef:
    """Flower key `name` as the bytes of key variable `k` its layout names (offset: where
    the layout starts in the key)."""
    parts = []
    for j in range(FLOWER_KEYS[name].width // 8):
        i = next(i for i, kb in enumerate(layout) if kb.key == name and kb.byte == j) + offset
        parts.append(z3.Extract(8 * i + 7, 8 * i, k))
    return parts[0] if len(parts) == 1 else z3.Concat(parts)


def _lpm_hit(key: z3.BitVecRef, plen: int, addr: z3.BitVecRef, width: int) -> z3.BoolRef:
    """Whether an LPM lookup `key` (u32 prefix length, then the address bytes) finds the
    entry addr/plen."""
    qlen = z3.Extract(31, 0, key)
    qaddr = z3.Concat([z3.Extract(8 * i + 7, 8 * i, key) for i in range(4, 4 + width // 8)])
    m = prefix_mask(plen, width)
    return z3.And(z3.ULE(plen, qlen), qaddr & m == addr & m)


def prove(t: Template, shape: tuple) -> bool:
    """Prove template `t` for mask shape `shape` (per level: the LPM prefix length, None for
    an exact key) for every key and value; cached in t.proved."""
    if shape in t.proved:
        return t.proved[shape]
    s = t.synth
    ks = key_vars(t.lookups)
    subs = []
    consts = []
    symbolic = {}
    masks = {}
    by_map: dict[str, list] = {}
    for i, (lv, k) in enumerate(zip(t.lookups, ks)):
        if lv.kind == "lpm":
            width = 8 * len(lv.layout)
            addr = _net(k, lv.layout, lv.keys[0], 4)
            symbolic[lv.keys[0]] = addr
            masks[lv.keys[0]] = prefix_mask(shape[i], width)
            by_map.setdefault(lv.map, []).append(("lpm", k, shape[i], addr, width))
            consts.append(z3.Extract(31, 0, k) == shape[i])
        else:
            for n in lv.keys:
                symbolic[n] = _net(k, lv.layout, n)
                masks[n] = exact(n, 0).mask
            for n, offs in lv.vkeys:
                symbolic[n] = value_term(lv, k, offs)
                masks[n] = exact(n, 0).mask
            consts += [z3.Extract(8 * j + 7, 8 * j, k) == kb.const for j, kb in enumerate(lv.layout) if kb.key is None]
            if lv.kind == "index" and k.size() >= 32:
                consts.append(z3.ULT(k, lv.max_entries))
            by_map.setdefault(lv.map, []).append(("hash", k))
    for name, hits in by_map.items():
        kbits = hits[0][1].size()
        ks_sort = z3.BitVecSort(kbits)
        q = z3.Var(0, ks_sort)
        rest = z3.Function(f"tpl{t.index}.{name}.rest", ks_sort, z3.BoolSort())
        conds = []
        for h in hits:
            conds.append(q == h[1] if h[0] == "hash" else _lpm_hit(q, h[2], h[3], h[4]))
        subs.append((map_found(name, kbits), z3.Or(*conds, rest(q))))
        if t.longest:
            # the longest match is the entry wherever it covers the lookup: every longer
            # entry has its own filter (drop or pass) at a lower prio of the same chain
            (h,) = hits
            off = z3.Var(1, z3.BitVecSort(32))
            restv = z3.Function(f"tpl{t.index}.{name}.restval", ks_sort, z3.BitVecSort(32), z3.BitVecSort(8))
            vfun = z3.Function(f"tpl{t.index}.{name}.val", ks_sort, z3.BitVecSort(32), z3.BitVecSort(8))
            subs.append((map_val(name, kbits), z3.If(conds[0], vfun(h[1], off), restv(q, off))))
        elif all(h[0] == "hash" for h in hits):
            # the entries' own values: one fresh function (value_cond speaks of them through
            # map.M.val(k, off), which the same substitution turns into it)
            off = z3.Var(1, z3.BitVecSort(32))
            restv = z3.Function(f"tpl{t.index}.{name}.restval", ks_sort, z3.BitVecSort(32), z3.BitVecSort(8))
            vfun = z3.Function(f"tpl{t.index}.{name}.val", ks_sort, z3.BitVecSort(32), z3.BitVecSort(8))
            body = restv(q, off)
            for h in hits:
                body = z3.If(q == h[1], vfun(h[1], off), body)
            subs.append((map_val(name, kbits), body))
    region = []
    for combo in t.combos:
        keys = combo + tuple((n, Exact(0, masks[n])) for n in symbolic)
        region.append(match_formula(FlowerMatch(t.protocol, keys), s.d, symbolic))
    good = s.good(t.outcome)
    extra = [t.value_cond] if t.value_cond is not None else []

    def sub(x):
        return z3.substitute_funs(x, *subs) if subs else x

    # value_cond (and a value-given key) names map.M.val(k, off): the substitution turns it
    # into the entry's value
    q = solver(*[sub(x) for x in s.env], sub(z3.Or(region)), *consts, *[sub(x) for x in extra], z3.Not(sub(good)))
    q.set("timeout", PROOF_TIMEOUT_MS)
    if t.before and q.check() != z3.unsat:
        # an allow list before: the packets its pass filters take never reach these
        q.add(*[z3.Not(sub(pass_region(x))) for x in t.before])
        t.needs = sorted(set(t.needs) | {x.index for x in t.before})
    excluded: list[tuple[int, ...]] = []
    while True:
        r = q.check()
        if r != z3.sat or len(excluded) >= MAX_EXCLUDED:
            break
        # a counterexample at one key: prove the rest, that key stays in software
        m = q.model()
        points = [k for k in ks] + [
            sub(value_term(lv, k, offs)) for lv, k in zip(t.lookups, ks) for _, offs in lv.vkeys
        ]
        bad = tuple(m.eval(x, model_completion=True).as_long() for x in points)
        excluded.append(bad)
        q.add(z3.Or([x != v for x, v in zip(points, bad)]))
    ok = r == z3.unsat
    t.proved[shape] = ok
    if ok:
        t.excluded[shape] = excluded
    return ok


def value_term(lv: Level, k: z3.BitVecRef, offs: tuple[int, ...]) -> z3.BitVecRef:
    """A value-given flower key (Level.vkeys) as the entry's value bytes at key `k`."""
    parts = [map_val(lv.map, k.size())(k, z3.BitVecVal(o, 32)) for o in offs]
    return parts[0] if len(parts) == 1 else z3.Concat(parts)


def pass_region(t: Template) -> z3.BoolRef:
    """Packets some filled pass filter of template `t` takes, whatever its map holds (a
    subset of them, which is what an assumption may use): the packet's flower keys, as
    the filter's protocol sees them equal to the walk's (`d.keys`), form a key the map
    holds (and whose value takes the decision)."""
    s = t.synth
    (lv,) = t.levels
    d = s.d
    parts = []
    for kb in lv.layout:
        if kb.key is None:
            parts.append(z3.BitVecVal(kb.const, 8))
        else:
            hi = FLOWER_KEYS[kb.key].width - 1 - 8 * kb.byte
            parts.append(z3.Extract(hi, hi - 7, d.keys[kb.key]))
    if lv.kind == "lpm":
        plen = 8 * len(lv.layout)
        parts = [z3.BitVecVal(plen >> (8 * i) & 0xFF, 8) for i in range(4)] + parts
    key = z3.Concat(parts[::-1]) if len(parts) > 1 else parts[0]
    if lv.kind == "index":
        found = z3.ULT(key, lv.max_entries) if key.size() >= 32 else z3.BoolVal(True)
    else:
        found = map_found(lv.map, key.size())(key)
    if t.value_cond is not None:
        found = z3.And(found, z3.substitute(t.value_cond, (key_vars(t.levels)[0], key)))
    found = z3.And(found, *[d.keys[n] == value_term(lv, key, offs) for n, offs in lv.vkeys])
    names = lv.keys + tuple(n for n, _ in lv.vkeys)
    symbolic = {n: d.keys[n] for n in names}
    placeholders = tuple((n, exact(n, 0)) for n in names)
    region = [match_formula(FlowerMatch(t.protocol, c + placeholders), d, symbolic) for c in t.combos]
    return z3.And(z3.Or(region), found)


# --- filling -------------------------------------------------------------------------------


def entry_shape(t: Template, level: int, key: bytes) -> int | None:
    """The mask shape of one entry at `level`: its prefix length (LPM), None (exact key)."""
    lv = t.levels[level]
    if lv.kind == "lpm":
        return int.from_bytes(key[:4], "little")
    return None


def fill_entry(
    t: Template, level: int, key: bytes, values: tuple[bytes, ...], contents: MapContents | None = None
) -> tuple[list[FilledFilter], Reason | None]:
    """The filters of ONE map entry at `level` of template `t`, and None; or [] and the Reason
    the entry gets no filter (code pass-to-host: this lookup never asks for the key or the
    value does not take the decision, nothing to offload; other codes: it would, but cannot).

    Contract (what `sync` relies on):
    * `key`/`values` are the entry's raw bytes as in rules.mapcontents (values: one per CPU
      for per-CPU maps; every CPU's value must take the decision).
    * The result depends on this entry alone, never on other entries: on an insert or
      update, replace the entry's previous filters by these; on a delete, remove its filters.
    * Every filter is an instance of the template's z3 proof (for every key and value of
      this mask shape): it is sound wherever it sits, whatever else the maps hold. A level
      before the last `goto`s the next level's chain; the last level acts.
    * One entry may give several filters (one per fixed-key combination: tcp and udp), all
      with `sources` == ((map name, key),); chain and prio are the template's (its level's
      band, plus the prefix's offset for LPM), stable for one `find_templates` result.
    * A template with gates (Template.gates) reads the gates' entries from `contents`: its
      filters depend on those entries too (rules only; sync leaves such templates alone).
    The first call for a new LPM prefix length proves that shape (cached on `t`)."""
    lv = t.levels[level]
    if len(key) != lv.key_size:
        return [], Reason("unknown", f"map {lv.map}: key of {len(key)} bytes, the map's are {lv.key_size}")
    vals = {}
    shape_len = None
    if lv.kind == "lpm":
        plen = int.from_bytes(key[:4], "little")
        data = key[4:]
        width = 8 * len(data)
        if not 0 < plen <= width:
            return [], Reason("not-expressible", f"map {lv.map}: prefix length {plen}")
        n = lv.keys[0]
        addr = int.from_bytes(data, "big")
        mask = prefix_mask(plen, width)
        vals[n] = Exact(addr & mask, mask)
        shape_len = plen
    else:
        for i, kb in enumerate(lv.layout):
            if kb.key is None and key[i] != kb.const:
                return [], Reason("pass-to-host", f"map {lv.map}: this lookup never asks for this key")
        for n in lv.keys:
            v = 0
            for j in range(FLOWER_KEYS[n].width // 8):
                i = next(i for i, kb in enumerate(lv.layout) if kb.key == n and kb.byte == j)
                v = v << 8 | key[i]
            vals[n] = exact(n, v)
    shield = False
    # a pass filter is due where any CPU's value takes the decision (a complement relies on
    # it); a drop filter only where every CPU's does
    every = any if t.outcome.is_pass else all
    if t.value_cond is not None and not every(value_ok(t, level, key, v) for v in values):
        if not t.longest:
            return [], Reason("pass-to-host", f"map {lv.map}: the entry's value does not take this decision")
        shield = True  # longest match: its packets must not reach a shorter entry's filter
    vvals = []
    for n, offs in lv.vkeys:
        got = {int.from_bytes(bytes(v[o] for o in offs), "big") for v in values}
        if len(got) != 1:
            return [], Reason("not-expressible", f"map {lv.map}: the CPUs' values give {n} {len(got)} values")
        vvals.append(got.pop())
        vals[n] = exact(n, vvals[-1])
    why = gates_hold(t, contents)
    if why is not None:
        return [], why
    shape = tuple(shape_len if i == level else None for i in range(len(t.levels)))
    if t.outcome.is_pass or shield:  # a pass filter is always safe: nothing to prove
        t.excluded.setdefault(shape, [])
    elif not prove(t, shape):
        return [], Reason("not-expressible", f"map {lv.map}: the template did not prove for this key shape")
    kint = int.from_bytes(key, "little")
    if shield:
        return [
            FilledFilter(
                t.index,
                level,
                lv.chain,
                lv.prio + 8 * len(lv.layout) - shape_len,
                FlowerMatch(t.protocol, combo + tuple(vals.items())),
                ("pass",),
                "shield",
                ((lv.map, bytes(key)),),
                tuple(t.paths),
            )
            for combo in t.combos
        ], None
    at = len(t.lookups) + sum(len(x.vkeys) for x in t.lookups[:level])
    if any(bad[level] == kint and list(bad[at : at + len(vvals)]) == vvals for bad in t.excluded[shape]):
        return [], Reason(
            "atypical-packets",
            f"map {lv.map}: at this {'value' if vvals else 'key'} flower cannot separate packets the program "
            "treats otherwise "
            "(a z3 counterexample: fragments, IP options)",
        )
    last = level == len(t.levels) - 1
    action = t.outcome.action if last else ("goto", "chain", str(t.levels[level + 1].chain))
    prio = lv.prio + (0 if shape_len is None else 8 * len(lv.layout) - shape_len)
    out = []
    for combo in t.combos:
        match = FlowerMatch(t.protocol, combo + tuple(vals.items()))
        out.append(
            FilledFilter(
                t.index,
                level,
                lv.chain,
                prio,
                match,
                action,
                ("shield" if t.outcome.is_pass else "rule") if last else "goto",
                ((lv.map, bytes(key)),),
                tuple(t.paths),
            )
        )
    return out, None


def gates_hold(t: Template, contents: MapContents | None) -> Reason | None:
    """None when every gate's entry (in `contents`) takes the template's decision on every
    CPU; else the Reason the template fills nothing now."""
    for i, g in enumerate(t.gates, start=len(t.levels)):
        me = contents.get(g.map) if contents is not None else None
        key = bytes(kb.const for kb in g.layout)
        values = me.value(key) if me is not None else None
        if values is None:
            return Reason("map-dependent", f"its filters need the contents of {g.map}")
        if t.value_cond is not None and not all(value_ok(t, i, key, v) for v in values):
            return Reason("pass-to-host", f"map {g.map}: the entry's value switches this decision off")
    return None


def value_ok(t: Template, level: int, key: bytes, value: bytes) -> bool:
    """Whether the template's value condition holds for this entry's value (its conjuncts
    each speak of one lookup: _template refuses others, so the other lookups' conjuncts are
    their own entries' business). `level` indexes Template.lookups. Cached per value when
    the condition does not read the key."""
    lv = t.lookups[level]
    memo = (level, None if t.value_by_value else key, value)
    if memo in t.value_memo:
        return t.value_memo[memo]
    ks = key_vars(t.lookups)
    kbits = 8 * lv.key_size
    kval = z3.BitVecVal(int.from_bytes(key, "little"), kbits)
    off = z3.Var(1, z3.BitVecSort(32))
    q = z3.Var(0, z3.BitVecSort(kbits))
    body = map_val(lv.map, kbits)(q, off)
    for i in range(len(value) - 1, -1, -1):
        body = z3.If(z3.And(q == kval, off == i), z3.BitVecVal(value[i], 8), body)
    c = z3.substitute(t.value_cond, (ks[level], kval))
    c = z3.simplify(z3.substitute_funs(c, (map_val(lv.map, kbits), body)))
    ok = z3.is_true(c) or (not z3.is_false(c) and solver(c).check() == z3.sat)
    t.value_memo[memo] = ok
    return ok


def fill(templates: list[Template], contents: MapContents, aggregate: bool = True) -> Fill:
    """Every template filled from `contents`, in template then level order: `fill_entry` per
    entry, so the result is the union of the per-entry results (`aggregate=False`: exactly
    that, what `sync` extends entry by entry). With `aggregate`, the filters of a hash level
    whose only key is one address become the fewest prefixes covering exactly the same
    addresses, proven equal with z3; a prefix filter's `sources` are every entry it stands
    for (so it changes when a neighbour does: incremental users re-aggregate or keep exact
    filters). Entries that get no filter for a reason other than pass-to-host are in
    `software`. A map absent from `contents` fills nothing (unknown is not empty). An allow
    list's pass filters are filled only where a drop template's proof relies on them
    (Template.needs); a drop template needing an allow list whose contents are not given
    fills nothing.

    The collector is off while filling: a fill makes a few objects per entry (and an
    aggregation a trie node per prefix bit) and keeps them, so its passes would only walk
    the growing heap again and again (as sync's start does)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _fill(templates, contents, aggregate)
    finally:
        if enabled:
            gc.enable()


def _fill(templates: list[Template], contents: MapContents, aggregate: bool) -> Fill:
    out = Fill([])
    per: dict[int, list[FilledFilter]] = {}
    for t in templates:  # the drop templates first: their proofs say which allow lists they need
        if t.complement is not None:
            per[t.index] = fill_complement(t)
        elif not t.outcome.is_pass:
            per[t.index] = _fill_template(t, contents, aggregate, out)
            missing = [x.map for i in t.needs for x in templates[i].levels if contents.get(x.map) is None]
            if missing and per[t.index]:  # the proof relied on pass filters of maps not given
                why = Reason("map-dependent", f"its filters need the contents of {', '.join(missing)}")
                out.software += [(src, why) for f in per.pop(t.index) for src in f.sources]
    needed = {i for t in templates if per.get(t.index) for i in t.needs}
    incomplete = set()
    for t in templates:  # allow lists: only where a drop template's proof relies on them
        if t.outcome.is_pass and t.index in needed:
            before = len(out.software)
            per[t.index] = _fill_template(t, contents, aggregate, out)
            if len(out.software) > before:  # an entry without its pass filter
                incomplete.add(t.index)
    for t in templates:  # a proof that relied on every entry's pass filter
        if incomplete & set(t.needs) and per.get(t.index):
            why = Reason("map-dependent", "an entry of an allow list it relies on has no pass filter")
            out.software += [(src, why) for f in per.pop(t.index) for src in f.sources]
    for t in templates:
        out.filters += per.get(t.index, [])
    return out


def fill_complement(t: Template) -> list[FilledFilter]:
    """A complement's own filters (complements()): its static pass shields, then the
    catch-all, one per fixed-key combination; chain 0 from Template.prio on."""
    out = [
        FilledFilter(t.index, 0, 0, t.prio + i, m, ("pass",), "shield", (), tuple(t.paths))
        for i, m in enumerate(t.complement)
    ]
    at = t.prio + len(t.complement)
    out += [
        FilledFilter(t.index, 0, 0, at, FlowerMatch(t.protocol, c), t.outcome.action, "rule", (), tuple(t.paths))
        for c in t.combos
    ]
    return out


def _fill_template(t: Template, contents: MapContents, aggregate: bool, out: Fill) -> list[FilledFilter]:
    """fill_entry over every entry of the template's maps (its batch form, one call per
    level: rules/levelfill.py), then aggregation (see fill)."""
    from .levelfill import fill_level  # it builds on this module's fill_entry

    got: list[FilledFilter] = []
    for level, lv in enumerate(t.levels):
        me = contents.get(lv.map)
        if me is None:
            continue
        done = fill_level(t, level, me.entries, contents)
        filled = done.filters
        missing = [((lv.map, key), why) for key, why in done.refused if why.code != "pass-to-host"]
        out.software += missing
        if t.longest and missing and filled:  # a shorter entry's filter would take its packets
            why = Reason("map-dependent", f"map {lv.map}: an LPM entry without a filter breaks the longest match")
            out.software += [(src, why) for f in filled for src in f.sources]
            filled = []
        if t.longest:
            filled.sort(key=lambda f: f.prio)  # printed as tc takes them: longest prefix first
        address_set = lv.kind == "hash" and len(lv.keys) == 1 and lv.keys[0] in ADDRESS_KEYS
        if aggregate and filled and (address_set or lv.kind == "lpm"):
            # an address set is a band of /32s with one label: the same longest-match aggregation
            width = FLOWER_KEYS[lv.keys[0]].width
            filled, out.aggregated[lv.map] = lpmagg.aggregate_filters(filled, lv.keys[0], width, lv.prio)
        got += filled
    return got


# --- the printed, filled script against the program with these contents ------------------------


def content_substitutions(e, contents: MapContents) -> list[tuple]:
    """z3 substitutions that give the program's map functions the meaning of `contents`:
    `map.M.found` true exactly at the entries (LPM: at the lookups an entry's prefix
    covers), `map.M.val` their bytes (LPM: the longest match's; per-CPU values that differ
    between CPUs stay unknown). Maps absent from `contents` keep every content."""
    subs = []
    for mdef in e.obj.maps:
        me = contents.get(mdef.name)
        if me is None or mdef.type is None or mdef.key_size is None:
            continue
        kbits = 8 * mdef.key_size
        ksort = z3.BitVecSort(kbits)
        q, off = z3.Var(0, ksort), z3.Var(1, z3.BitVecSort(32))
        unknown = z3.Function(f"content.{mdef.name}.unknown", ksort, z3.BitVecSort(32), z3.BitVecSort(8))
        items = sorted(me.entries.items())
        if mdef.type.keyed == "lpm":
            width = 8 * (mdef.key_size - 4)

            def hit(key: bytes, width=width, q=q):
                plen = int.from_bytes(key[:4], "little")
                return _lpm_hit(q, plen, z3.BitVecVal(int.from_bytes(key[4:], "big"), width), width)

            subs.append((map_found(mdef.name, kbits), z3.Or([hit(k) for k, _ in items] or [z3.BoolVal(False)])))
            body = unknown(q, off)
            for k, vs in sorted(items, key=lambda kv: int.from_bytes(kv[0][:4], "little")):
                body = z3.If(hit(k), _bytes_term(vs, off, unknown(q, off)), body)
            subs.append((map_val(mdef.name, kbits), body))
            continue
        if mdef.type.keyed == "hash":
            eqs = [q == int.from_bytes(k, "little") for k, _ in items]
            subs.append((map_found(mdef.name, kbits), z3.Or(eqs or [z3.BoolVal(False)])))
        elif mdef.type.keyed != "index":
            continue
        body = unknown(q, off)
        default = array_default(me, mdef.max_entries)
        if default is not None:  # a whole array: the most common value everywhere else
            body = _bytes_term(default, off, body)
            items = [(k, vs) for k, vs in items if vs != default]
        for k, vs in items:
            body = z3.If(q == int.from_bytes(k, "little"), _bytes_term(vs, off, unknown(q, off)), body)
        subs.append((map_val(mdef.name, kbits), body))
    return subs


def array_default(me, max_entries: int | None) -> tuple[bytes, ...] | None:
    """For the contents of a whole array (every index below max_entries): its most common
    value, which content proofs take as the value of every index not listed apart; None
    when the contents are not the whole array."""
    if not max_entries or len(me.entries) != max_entries:
        return None
    counts: dict[tuple[bytes, ...], int] = {}
    for vs in me.entries.values():
        counts[vs] = counts.get(vs, 0) + 1
    return max(counts, key=counts.get)


def _bytes_term(values: tuple[bytes, ...], off, otherwise):
    if len(set(values)) != 1:
        return otherwise
    value = values[0]
    body = otherwise
    for i in range(len(value) - 1, -1, -1):
        body = z3.If(off == i, z3.BitVecVal(value[i], 8), body)
    return body


class ContentSynth:
    """The synthesis state of `synth` with the map functions replaced by `contents`
    (content_substitutions): what proof.prove_script needs to prove a filled script."""

    def __init__(self, synth: Synthesizer, contents: MapContents):
        subs = content_substitutions(synth.e, contents)

        def sub(x):
            return z3.substitute_funs(x, *subs) if subs else x

        self.e = synth.e
        self.d = synth.d
        self.ifnames = synth.ifnames
        self.outcomes = synth.outcomes
        self.env = [sub(x) for x in synth.env]
        self.conds = {p: sub(c) for p, c in synth.conds.items()}

    def good(self, outcome: Outcome) -> z3.BoolRef:
        conds = [self.conds[p] for p, o in self.outcomes.items() if o == outcome]
        return z3.Or(conds) if conds else z3.BoolVal(False)
