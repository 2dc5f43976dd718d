"""The rule list tc runs: blocks laid out as filters (chains, prios), minimised, and proved.

Layout. A block's value sets become filters: one value -> an exact key; a run of values ->
a port range or aligned masks/prefixes; several multi-valued keys -> one tc chain per key
(`action goto chain N`), so K values for each of four keys take 4K filters, not K^4. tc
semantics this relies on (net/sched/cls_api.c tcf_classify): filters of a chain run in prio
order, the first match acts; a `goto chain` never comes back, and a chain where nothing
matches ends classification (the packet goes on to the host: pass).

Prios: one mask shape per prio (flower keeps one mask per tcf_proto); consecutive filters
of one shape and one action share a prio, anything else opens the next one.

Proof: `build` ends with final.finish, which proves the printed script as read back by a
separate parser (script.py, proof.py); `Checker.reaching` is the same tc semantics over
the rule objects, used to minimise before printing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

import z3

from .dissector import dissect, match_formula
from .final import finish
from .flower import FLOWER_KEYS, Exact, FlowerMatch, Range, render
from .proof import FirstMatch
from .reasons import Reason
from .synthesis import PASS, Outcome, Synthesis, Synthesizer, solver

#: A block whose value sets multiply to at most this many filters is laid out flat.
MAX_FLAT = 8


@dataclass
class Rule:
    """One tc filter. `outcome` is None for a `goto chain` filter."""

    chain: int
    match: FlowerMatch
    action: tuple[str, ...]
    outcome: Outcome | None
    paths: list[int]
    role: str  # "rule" | "shield" | "goto"
    prio: int = 0
    proved: bool | None = None  # None for pass filters (nothing to prove)
    block: int = -1  # index of the synthesis block it lays out


@dataclass
class RuleSet:
    """A program's rules as printed. `rules` in print order; `software`: (paths, why) for
    what stays in the host; `taken`: the paths synthesis meant to offload; `printed`:
    (dev, skip, lines) of the last proven rendering (final.py); `proofs`: printed-script
    proofs by parsed semantics; `synth`: the synthesis state the proofs run against."""

    rules: list[Rule]
    software: list[tuple[list[int], Reason]]
    assumptions: tuple[str, ...]
    proved: int = 0
    unproved: int = 0
    dropped: list[tuple[list[int], str]] = field(default_factory=list)  # over --max-rules
    synth: Synthesizer | None = None
    blocks: list = field(default_factory=list)  # the proved synthesis blocks (the spec)
    taken: list[int] = field(default_factory=list)
    proofs: dict = field(default_factory=dict)
    printed: tuple | None = None
    #: paths the script offloads only in part (the rest of their packets stay in the host)
    partly: dict = field(default_factory=dict)
    max_rules: int = 512
    examples: dict | None = None  # counterexample.examples, once computed
    lines: dict = field(default_factory=dict)  # final.source_lines' memo: path id -> file:line list

    def finish(self, dev: str, skip: str | None) -> list[str]:
        """The proven filter block for this device (final.finish)."""
        if self.printed is None or self.printed[:2] != (dev, skip):
            finish(self, dev, skip, Checker(self.synth).relayout)
        return self.printed[2]


def _size(b) -> int:
    size = 1
    for v in b.sets.values():
        size *= len(v)
    return size


def _lead(blocks) -> str | None:
    """The key to put in chain 0 for every chained block: a `goto` never comes back, so a
    packet of a later block that matches an earlier block's chain-0 level is lost to it.
    Wanted: a key on which every two chained blocks not already told apart (protocol, a
    single value) take disjoint values. None if there is no such key."""
    chained = [b for b in blocks if _size(b) > MAX_FLAT]
    if len(chained) < 2:
        return None

    def apart(a, b) -> bool:
        return a.protocol != b.protocol or any(
            len(a.sets[n]) == 1 and len(b.sets.get(n, ())) == 1 and a.sets[n] != b.sets[n] for n in a.sets
        )

    pairs = [(a, b) for i, a in enumerate(chained) for b in chained[i + 1 :] if not apart(a, b)]
    for name in chained[0].sets:
        if all(
            name in a.sets
            and name in b.sets
            and a.set_masks.get(name) == b.set_masks.get(name)
            and not set(a.sets[name]) & set(b.sets[name])
            for a, b in pairs
        ):
            return name
    return None


def lay_out(syn: Synthesis) -> list[Rule]:
    rules: list[Rule] = []
    next_chain = 1
    lead = _lead(syn.blocks)
    for n, b in enumerate(syn.blocks):
        # a block's shields all pass, so their order is free: sorted, the script does not
        # depend on the order z3's counterexamples came in
        for m in sorted(b.shields, key=lambda m: render(m)):
            rules.append(Rule(0, m, ("pass",), PASS, b.paths, "shield", block=n))
        fixed = [(n, Exact(v[0], _full(n))) for n, v in b.sets.items() if len(v) == 1]
        fixed += list(b.masked.items())
        ranges = not {"src_port", "dst_port"} <= set(b.sets)  # tc: no range beside another port
        multi = [(n, value_cover(n, v, ranges, b.set_masks.get(n))) for n, v in b.sets.items() if len(v) > 1]
        multi.sort(key=lambda nc: nc[0] != lead)  # the lead key first (stable otherwise)
        size = 1
        for _, c in multi:
            size *= len(c)
        if size <= MAX_FLAT:
            for combo in product(*[c for _, c in multi]):
                keys = fixed + [(k, v) for (k, _), v in zip(multi, combo)]
                rules.append(
                    Rule(0, FlowerMatch(b.protocol, tuple(keys)), b.outcome.action, b.outcome, b.paths, "rule", block=n)
                )
            continue
        chain = 0
        for i, (name, cover) in enumerate(multi):
            last = i == len(multi) - 1
            target = None if last else next_chain
            for v in cover:
                keys = fixed + [(name, v)]
                if last:
                    rules.append(
                        Rule(
                            chain,
                            FlowerMatch(b.protocol, tuple(keys)),
                            b.outcome.action,
                            b.outcome,
                            b.paths,
                            "rule",
                            block=n,
                        )
                    )
                else:
                    rules.append(
                        Rule(
                            chain,
                            FlowerMatch(b.protocol, tuple(keys)),
                            ("goto", "chain", str(target)),
                            None,
                            b.paths,
                            "goto",
                            block=n,
                        )
                    )
            if not last:
                chain, next_chain = next_chain, next_chain + 1
    return rules


def assign_prios(rules: list[Rule]) -> None:
    """Per chain: the next prio whenever the mask shape or the action changes."""
    last: dict[int, tuple] = {}
    prio: dict[int, int] = {}
    for r in rules:
        key = (r.match.mask_shape(), r.action)
        if last.get(r.chain) != key:
            prio[r.chain] = prio.get(r.chain, 0) + 1
            last[r.chain] = key
        r.prio = prio[r.chain]


def build(e, assume=(), ifnames=None, max_rules: int = 512, dev: str = "DEV", skip: str | None = "skip_sw") -> RuleSet:
    """Synthesis, layout, minimisation, then the proof of the printed script (final.py):
    every count and label in the RuleSet comes from that proof."""
    s = Synthesizer(e, assume, ifnames or {})
    syn = s.run()
    rules = lay_out(syn)
    checker = Checker(s)
    rules = checker.minimise(rules)
    dropped = []
    if len(rules) > max_rules:
        rules, dropped = spend_budget(rules, max_rules, checker)
    rs = RuleSet(
        rules,
        list(syn.software) + dropped,
        syn.assumptions,
        dropped=dropped,
        synth=s,
        blocks=syn.blocks,
        taken=sorted({p for b in syn.blocks for p in b.paths}),
        max_rules=max_rules,
    )
    assign_prios(rs.rules)
    rs.finish(dev, skip)
    return rs


def spend_budget(rules: list[Rule], max_rules: int, checker) -> tuple[list[Rule], list]:
    """Whole blocks (a verdict's filters with their shields and chain jumps) that fit in
    `max_rules`, the most valuable first: most paths per filter, then fewest filters, then
    program order; kept in program order, so no chain is cut off (a chain that ends in
    nothing would spend NIC entries for no drop). The rest: (paths, rule-budget reason)."""
    blocks: dict[int, list[Rule]] = {}
    for r in rules:
        blocks.setdefault(r.block, []).append(r)
    paths = {n: sorted({p for r in rs for p in r.paths if r.role != "shield"}) for n, rs in blocks.items()}
    order = sorted(blocks, key=lambda n: (-len(paths[n]) / len(blocks[n]), len(blocks[n]), n))
    kept, left, room = set(), {}, max_rules
    for n in order:
        if len(blocks[n]) <= room:
            kept.add(n)
            room -= len(blocks[n])
        else:
            left[n] = room
    out = []
    for n, room_then in sorted(left.items()):
        verdict = next((r.action[0] for r in blocks[n] if r.role == "rule"), "?")
        why = Reason(
            "rule-budget",
            f"--max-rules {max_rules}: this {verdict} needs {len(blocks[n])} filters, {room_then} "
            "were left after the verdicts that take more paths per filter",
        )
        out.append((paths[n], why))
    return checker.minimise([r for r in rules if r.block in kept]), out


class Checker:
    """tc's first-match semantics over the dissector model, and the proofs."""

    def __init__(self, s: Synthesizer):
        self.s = s
        self.d = dissect()
        self._match: dict[int, z3.BoolRef] = {}
        self._solver: z3.Solver | None = None

    def possible(self, *constraints: z3.BoolRef) -> bool:
        """maybe_sat under the program's environment, on one incremental solver that keeps
        the environment asserted (push/pop per question): minimisation asks many small
        questions, mostly satisfiable, each ~6x cheaper this way than on a fresh solver.
        False only on unsat (a timeout counts as satisfiable: the filter stays). The proofs
        keep fresh solvers: z3's incremental core is far slower on their unsat queries."""
        if self._solver is None:
            self._solver = solver(*self.s.env)
        self._solver.push()
        try:
            self._solver.add(*constraints)
            return self._solver.check() != z3.unsat
        finally:
            self._solver.pop()

    def match(self, r: Rule) -> z3.BoolRef:
        if id(r) not in self._match:
            self._match[id(r)] = match_formula(r.match, self.d)
        return self._match[id(r)]

    def first_match(self, rules: list[Rule]) -> FirstMatch:
        """tc's semantics over the rule list (keys: positions in `rules`)."""
        fm = FirstMatch()
        for i, r in enumerate(rules):
            fm.add(i, r.chain, self.match(r), int(r.action[2]) if r.role == "goto" else None)
        return fm

    def reaching(self, rules: list[Rule]) -> list[z3.BoolRef]:
        """Per filter: the packets that reach it and match it."""
        fm = self.first_match(rules)
        return [fm.hit[i] for i in range(len(rules))]

    def minimise(self, rules: list[Rule]) -> list[Rule]:
        """Drop filters no packet reaches, and pass filters that no later non-pass filter of
        their chain overlaps (removing them changes nothing)."""
        fm = self.first_match(rules)
        hits = [fm.hit[i] for i in range(len(rules))]
        # Filters no packet reaches go: any in chain 0 (blocks, shields), and whole chains
        # no goto leads a packet into (a shield before the gotos may take them all). Inside
        # an entered chain each filter is a value some path takes. A goto into a chain left
        # empty goes too.
        entered = {0: True}
        for c in sorted({r.chain for r in rules} - {0}):
            entered[c] = self.possible(fm.entry(c))
        kept = [r for r, h in zip(rules, hits) if entered[r.chain] and (r.chain or self.possible(h))]
        while True:
            chains = {r.chain for r in kept}
            empty = [r for r in kept if r.role == "goto" and int(r.action[2]) not in chains]
            if not empty:
                break
            gone = {id(r) for r in empty}
            kept = [r for r in kept if id(r) not in gone]
        changed = True
        while changed:
            changed = False
            for i, r in enumerate(kept):
                if r.role != "shield":
                    continue
                later = [x for x in kept[i + 1 :] if x.chain == r.chain and x.role != "shield"]
                nxt = next((j for j in range(i + 1, len(kept)) if kept[j].role != "shield"), len(kept))
                wider = [x for x in kept[i + 1 : nxt] if x.chain == r.chain]  # pass rules right after
                if any(not self.possible(self.match(r), z3.Not(self.match(x))) for x in wider) or not any(
                    self.possible(self.match(r), self.match(x)) for x in later
                ):
                    kept = kept[:i] + kept[i + 1 :]
                    changed = True
                    break
        return kept

    def relayout(self, rules: list[Rule]) -> list[Rule]:
        """After filters were taken out: minimise again and renumber the prios."""
        rules = self.minimise(rules)
        assign_prios(rules)
        return rules


def _full(name: str) -> int:
    return (1 << FLOWER_KEYS[name].width) - 1


def value_cover(
    name: str, values: tuple[int, ...], ranges: bool = True, mask: int | None = None
) -> list[Exact | Range]:
    """The fewest filter values covering exactly `values`: ranges for ports, aligned
    masked blocks (prefixes) where the key takes masks, single values otherwise. With a
    prefix `mask`, the values are prefixes under it: covered as prefixes of that length."""
    row = FLOWER_KEYS[name]
    if mask is not None:
        shift = row.width - mask.bit_count()
        full = _full(name)
        return [
            Exact(v << shift, (m << shift) & full)
            for v, m in (_aligned_cover(tuple(x >> shift for x in values), mask.bit_count()))
        ]
    if row.kind == "flags":
        return [Exact(v, m) for v, m in _cubes(values, row.width)]
    out: list[Exact | Range] = []
    for lo, hi in _runs(values):
        if lo == hi or row.mask == "none":
            out += [Exact(v, _full(name)) for v in range(lo, hi + 1)]
        elif row.ranges and ranges and lo > 0:
            out.append(Range(lo, hi))
        else:
            out += [Exact(b, m) for b, m in _aligned(lo, hi, row.width)]
    return out


def _cubes(values: tuple[int, ...], width: int) -> list[tuple[int, int]]:
    """(value, mask) pairs whose union is exactly `values`, few of them (flag keys: `ip_flags
    frag` for {frag, frag/firstfrag}): values differing in one bit merge until none do
    (the prime implicants), then the widest cover the values first."""
    full = (1 << width) - 1
    level = {(v, full) for v in values}
    primes: set[tuple[int, int]] = set()
    while level:
        merged: set[tuple[int, int]] = set()
        used: set[tuple[int, int]] = set()
        for v, m in level:
            for bit in range(width):
                if m >> bit & 1 and (v ^ 1 << bit, m) in level:
                    merged.add((v & ~(1 << bit), m & ~(1 << bit)))
                    used |= {(v, m), (v ^ 1 << bit, m)}
        primes |= level - used
        level = merged
    out: list[tuple[int, int]] = []
    left = set(values)
    for v, m in sorted(primes, key=lambda vm: (vm[1].bit_count(), vm)):
        covered = {x for x in left if x & m == v}
        if covered:
            out.append((v, m))
            left -= covered
    return out


def _runs(values: tuple[int, ...]) -> list[tuple[int, int]]:
    """The sorted values as runs of consecutive integers (lo, hi)."""
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and runs[-1][1] + 1 == v:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _aligned_cover(values: tuple[int, ...], width: int):
    """(value, mask) blocks of `width` bits covering exactly the sorted `values`."""
    for lo, hi in _runs(values):
        yield from _aligned(lo, hi, width)


def _aligned(lo: int, hi: int, width: int):
    """Aligned power-of-two blocks covering lo..hi (the CIDR split)."""
    while lo <= hi:
        size = lo & -lo if lo else 1 << width
        while size > hi - lo + 1:
            size >>= 1
        yield lo, ((1 << width) - 1) ^ (size - 1)
        lo += size
