"""LPM aggregation: the prefixes of one LPM level as the fewest prefixes that give every
address the same longest-prefix-match answer, proven equal with z3 (issue 12, item 2).

The input is a band of prefix rules evaluated longest first (what an LPM trie's lookup does,
and what one template level's tc filters do: their prios grow as the prefix shortens), each
with a label (the filter's action); an address no prefix covers gets FALLTHROUGH (in tc: the
band matches nothing, classification goes on). A longer prefix with another label inside a
shorter one stays right because the output is again evaluated longest first: a /24 `pass`
inside a /16 `drop` is kept as a hole (2 prefixes) rather than split (9 prefixes).

The algorithm is ORTC (Draves, King, Venkatachary, Zill, "Constructing optimal IP routing
tables", INFOCOM 1999): complete the binary trie (each address range gets the label of its
longest covering prefix), then bottom up each node's candidate labels (the children's common
labels, or all of them when they share none), then top down a prefix only where the label
inherited from above is not a candidate. One constraint of our own: FALLTHROUGH cannot be a
rule (tc has no action that leaves a band but stays in the chain), so a node above any
fall-through address carries no prefix; its other subtrees are solved on their own.

The trie is path-compressed (a node per entry and per prefix with entries below both halves,
at most 2n+1): the one-kid nodes between two of them are solved in closed form (their
candidates are the same from the second above the lower node up) and walked one by one only
where they emit a prefix. 100k random /32s made 1.6M nodes of the full trie; now 200k.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import z3

from .flower import Exact, MatchShape, prefix_mask

#: The label of an address no prefix covers.
FALLTHROUGH = None


@dataclass(slots=True)
class _Node:
    """A node of the path-compressed trie: the root, a prefix with an entry, or a prefix with
    entries below both halves. Between a node and its kid lies a chain of trie nodes with
    one kid, no entry and the node's `down` (their other half a leaf answering `down`)."""

    value: int
    depth: int
    label: Hashable = FALLTHROUGH  # the entry at this prefix (with has_entry)
    has_entry: bool = False
    down: Hashable = FALLTHROUGH  # the label this prefix's addresses get from the rules
    kids: list = field(default_factory=lambda: [None, None])
    cand: frozenset = frozenset()
    chain: list = field(default_factory=lambda: [None, None])  # per kid: (c1, c2) of the chain above it


def _order(label: Hashable) -> str:
    return repr(label)


def aggregate(rules: dict[tuple[int, int], Hashable], width: int) -> list[tuple[int, int, Hashable]]:
    """The fewest (value, length, label) prefixes with the same longest-match answer as
    `rules` for every `width`-bit address (module docstring); sorted by (length, value).
    Labels are never FALLTHROUGH; values are aligned to their length."""
    for (value, plen), label in rules.items():
        if label is FALLTHROUGH:
            raise ValueError("FALLTHROUGH is not a rule's label")
        if value & ~prefix_mask(plen, width):
            raise ValueError(f"{value:#x}/{plen}: bits set beyond the prefix")
    entries = sorted(rules.items())  # by value, then length: a prefix before the ones inside it
    values = [v for (v, _), _ in entries]
    plens = [p for (_, p), _ in entries]
    labels = [lab for _, lab in entries]
    pool: dict = {}
    root = _build(values, plens, labels, 0, len(entries), 0, FALLTHROUGH, width, pool)
    out: list[tuple[int, int, Hashable]] = []
    _choose(root, FALLTHROUGH, width, out)
    out.sort(key=lambda r: (r[1], r[0]))
    return out


def _merge(s0: frozenset, s1: frozenset, pool: dict) -> frozenset:
    """A node's candidate labels from its halves' (ORTC pass 2); {FALLTHROUGH} alone wherever
    a fall-through address is below (no prefix may cover one). Equal sets are one object."""
    if s0 is s1:  # a set holding FALLTHROUGH is {FALLTHROUGH}
        return s0
    if FALLTHROUGH in s0 or FALLTHROUGH in s1:
        cand = frozenset((FALLTHROUGH,))
    else:
        cand = (s0 & s1) or (s0 | s1)
    return pool.setdefault(cand, cand)


def _build(values, plens, labels, lo, hi, depth, inherited, width, pool) -> _Node:
    """Passes 1 and 2 on entries[lo:hi] (sorted, inside one prefix at least `depth` long):
    their compressed node, at the longest prefix they all share (`depth` for the root), with
    its candidates. A chain of m one-kid nodes above a kid with candidates c has c1 =
    merge(c, {down}) at its bottom and c2 = merge(c1, {down}) from there up: merging
    with {down} again changes nothing (c1 holds down or is {FALLTHROUGH})."""
    if depth:  # not the root (a kid's entries are never none): the longest shared prefix
        depth = min(min(plens[lo:hi]), width - (values[lo] ^ values[hi - 1]).bit_length())
    node = _Node(values[lo] & prefix_mask(depth, width) if lo < hi else 0, depth)
    if lo < hi and plens[lo] == depth:
        node.label, node.has_entry = labels[lo], True
        lo += 1
    node.down = node.label if node.has_entry else inherited
    sets = []
    if depth < width:
        half = node.value | 1 << (width - 1 - depth)
        cut = bisect.bisect_left(values, half, lo, hi)
        for bit, (a, b) in enumerate(((lo, cut), (cut, hi))):
            if a == b:
                sets.append(pool.setdefault(frozenset((node.down,)), frozenset((node.down,))))
                continue
            kid = _build(values, plens, labels, a, b, depth + 1, node.down, width, pool)
            node.kids[bit] = kid
            down = pool.setdefault(frozenset((node.down,)), frozenset((node.down,)))
            c1 = _merge(kid.cand, down, pool)
            node.chain[bit] = (c1, _merge(c1, down, pool))
            sets.append((kid.cand, c1, node.chain[bit][1])[min(kid.depth - depth - 1, 2)])
    else:
        sets = [pool.setdefault(frozenset((node.down,)), frozenset((node.down,)))] * 2
    node.cand = _merge(sets[0], sets[1], pool)
    return node


def _step(cand, inherited, value, depth, out) -> Hashable:
    """Pass 3 at one trie node: a prefix only when the inherited label is not a candidate."""
    if inherited in cand:
        return inherited
    here = min(cand, key=_order)
    out.append((value, depth, here))
    return here


def _choose(node: _Node, inherited: Hashable, width: int, out: list) -> None:
    """Pass 3 on the compressed trie: a missing half (a leaf answering node.down) gets a
    prefix when its answer differs from the label chosen above it; the chain to each kid is
    walked node by node only where it emits something."""
    here = _step(node.cand, inherited, node.value, node.depth, out)
    if node.depth == width:
        return
    has_kids = node.kids != [None, None]
    d = node.down
    for bit, kid in enumerate(node.kids):
        at = node.value | bit << (width - 1 - node.depth)
        if kid is None:
            if d != here and has_kids:
                out.append((at, node.depth + 1, d))
            continue
        h = here
        t = node.depth + 1
        while t < kid.depth:  # the chain's nodes: c1 at the lowest, c2 above it
            j = kid.depth - t
            h = _step(node.chain[bit][j >= 2], h, kid.value & prefix_mask(t, width), t, out)
            if d != h:  # its other half, a leaf answering d
                out.append(((kid.value & prefix_mask(t + 1, width)) ^ 1 << (width - 1 - t), t + 1, d))
            elif j > 2:  # the same candidates and inherited label down to the lowest: nothing emitted
                t = kid.depth - 1
                continue
            t += 1
        _choose(kid, h, width, out)


def lpm_term(rules: Iterable[tuple[int, int, Hashable]], x: z3.BitVecRef, ids: dict, width: int, default=FALLTHROUGH):
    """z3: the id (`ids`: label -> int) of the longest prefix of `rules` covering x
    (`default` where none does)."""
    body = z3.IntVal(ids[default])
    for value, plen, label in sorted(rules, key=lambda r: r[1]):
        body = z3.If(x & prefix_mask(plen, width) == value, z3.IntVal(ids[label]), body)
    return body


#: Rules (both sides) up to which one region is proved in one z3 query.
CELL = 16


def proven_equal(rules: dict[tuple[int, int], Hashable], out: list[tuple[int, int, Hashable]], width: int) -> bool:
    """z3: for every address, `rules` and `out` give the same longest-match label.

    One query per region of the address space (a prefix) holding at most CELL rules: a region
    is split in halves until it does; the rules as long as the region or shorter that cover it
    act in it only through the longest of them (its label is the region's default), so each
    query has the region's own rules and that default, on x restricted to the region. The
    regions are the leaves of one binary split of the whole space: every address is in one.
    A region where both sides hold the same rules and default needs no query (what
    aggregation left alone: most of a sparse set)."""
    labels = [FALLTHROUGH, *sorted(set(rules.values()) | {r[2] for r in out}, key=_order)]
    ids = {label: i for i, label in enumerate(labels)}
    x = z3.BitVec("lpm.addr", width)
    s = z3.Solver()
    a = sorted(((v, p, lab) for (v, p), lab in rules.items()), key=lambda r: (r[0], -r[1]))
    b = sorted(out, key=lambda r: (r[0], -r[1]))
    return _region(s, x, ids, width, 0, 0, a, b, FALLTHROUGH, FALLTHROUGH)


def _region(s, x, ids, width, value, plen, a, b, da, db) -> bool:
    """Equality inside value/plen: `a`, `b` the rules within the region (sorted by value),
    `da`, `db` the labels the outer rules give it."""
    # the rules exactly as long as the region cover it whole: they are its defaults
    da = next((lab for v, p, lab in a if p == plen), da)
    db = next((lab for v, p, lab in b if p == plen), db)
    a = [r for r in a if r[1] > plen]
    b = [r for r in b if r[1] > plen]
    if a == b and da == db:  # the same rules and default on both sides: the same answer, no query
        return True
    if len(a) + len(b) <= CELL or plen == width:
        s.push()
        s.add(x & prefix_mask(plen, width) == value)
        s.add(lpm_term(a, x, ids, width, da) != lpm_term(b, x, ids, width, db))
        ok = s.check() == z3.unsat
        s.pop()
        return ok
    half = value | 1 << (width - 1 - plen)
    parts = []
    for rs in (a, b):
        cut = next((i for i, r in enumerate(rs) if r[0] >= half), len(rs))
        parts.append((rs[:cut], rs[cut:]))
    return _region(s, x, ids, width, value, plen + 1, parts[0][0], parts[1][0], da, db) and _region(
        s, x, ids, width, half, plen + 1, parts[0][1], parts[1][1], da, db
    )


def aggregate_filters(filled: list, name: str, width: int, first_prio: int) -> tuple[list, tuple[int, int, bool]]:
    """One LPM template level's per-entry filters (rules.templates.FilledFilter, address key
    `name` of `width` bits, prio first_prio + width - length) as the fewest prefix filters
    with the same answer, per fixed-key combination: (filters, (entries, prefixes, proven
    equal)). A filter's label is its (action, role); its `sources` become every entry whose
    prefix lies inside it. Unchanged (and not proven) when two filters share a prefix."""
    by_combo: dict[tuple, dict[tuple[int, int], object]] = {}
    for f in filled:
        combo = tuple((n, v) for n, v in f.match.keys if n != name)
        v = f.match.get(name)
        key = (v.value, v.mask.bit_count())
        if key in by_combo.setdefault(combo, {}):
            return filled, (len(filled), len(filled), False)
        by_combo[combo][key] = f
    out = []
    equal = True
    for combo, fs in by_combo.items():
        shape = None
        rules = {k: (f.action, f.role) for k, f in fs.items()}
        got = aggregate(rules, width)
        equal &= proven_equal(rules, got, width)
        inside = sorted(fs)
        values = [k[0] for k in inside]
        for value, plen, (action, role) in got:
            lo = bisect.bisect_left(values, value)
            hi = bisect.bisect_right(values, value | ~prefix_mask(plen, width) & ((1 << width) - 1))
            srcs = tuple(s for k in inside[lo:hi] if k[1] >= plen for s in fs[k].sources)
            f0 = fs[inside[lo]] if lo < hi else next(iter(fs.values()))
            if shape is None:  # every prefix's match is this one with another address
                shape = MatchShape(f0.match.protocol, combo, (name,))
            match = shape.match({name: Exact(value, prefix_mask(plen, width))})
            out.append(
                dataclasses.replace(
                    f0, prio=first_prio + width - plen, match=match, action=action, role=role, sources=srcs
                )
            )
    entries = len({s for f in filled for s in f.sources})
    if not equal:  # never expected; the per-entry filters are what the template's proof covers
        return filled, (entries, len(filled), False)
    first = {s: i for i, f in enumerate(filled) for s in f.sources}  # print in the entries' order
    out.sort(key=lambda f: (min((first[s] for s in f.sources), default=len(first)), f.prio))
    return out, (entries, len(out), True)
