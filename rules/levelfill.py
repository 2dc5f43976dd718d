"""The batch form of templates.fill_entry: one template level filled from many map entries
in one call (issue 12, initial fill: 100k entries).

`fill_level` gives exactly the filters and reasons that `fill_entry` gives entry by entry,
in entry order, but works out once per level what is the same for every entry: where each
flower key's bytes sit in the map key, the action, role and paths, the flower match's
validation and key order (flower.MatchShape), the gates, and per mask shape the proof and
the keys it set aside; the value condition is asked once per distinct value (per key and
value when the condition reads the key). A level this form does not cover (a key layout
without some byte, a vkey named twice, a match that does not validate) is filled entry by
entry. tests/test_sync.py compares both forms on random entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

from .flower import FLOWER_KEYS, Exact, MatchShape, exact, prefix_mask
from .mapcontents import MapContents
from .reasons import Reason
from .templates import FilledFilter, Template, fill_entry, gates_hold, prove, value_ok


@dataclass
class LevelFill:
    """A level's filters (entry order, each entry's in combo order) and the entries that got
    none, with the Reason fill_entry gives (pass-to-host included)."""

    filters: list[FilledFilter] = field(default_factory=list)
    refused: list[tuple[bytes, Reason]] = field(default_factory=list)


def per_entry(t: Template, level: int, entries: dict, contents: MapContents | None = None) -> LevelFill:
    """fill_entry over every entry: the reference form."""
    out = LevelFill()
    for key, values in entries.items():
        fs, why = fill_entry(t, level, key, values, contents)
        out.filters += fs
        if why is not None:
            out.refused.append((key, why))
    return out


def _reader(positions: list[int]):
    """key bytes -> the integer those bytes of the key make, most significant first."""
    n = len(positions)
    a = positions[0]
    if positions == list(range(a, a + n)):
        return lambda k: int.from_bytes(k[a : a + n], "big")
    if positions == list(range(a, a - n, -1)):
        return lambda k: int.from_bytes(k[a - n + 1 : a + 1], "little")
    if n == 1:
        return lambda k: k[a]
    pick = itemgetter(*positions)
    return lambda k: int.from_bytes(bytes(pick(k)), "big")


def fill_level(t: Template, level: int, entries: dict, contents: MapContents | None = None) -> LevelFill:
    """The filters of every entry (key -> values, as MapEntries.entries) at `level` of
    template `t`: what fill_entry gives for each, in entry order (module doc)."""
    lv = t.levels[level]
    lpm = lv.kind == "lpm"
    vnames = tuple(n for n, _ in lv.vkeys)
    names = (lv.keys[0],) if lpm else lv.keys
    if len(set(names + vnames)) != len(names + vnames) or (t.longest and not lpm) or (lpm and len(lv.keys) != 1):
        return per_entry(t, level, entries, contents)
    readers = []
    if not lpm:
        for n in lv.keys:
            positions = []
            for j in range(FLOWER_KEYS[n].width // 8):
                at = [i for i, kb in enumerate(lv.layout) if kb.key == n and kb.byte == j]
                if not at:
                    return per_entry(t, level, entries, contents)
                positions.append(at[0])
            readers.append((n, _reader(positions), (1 << FLOWER_KEYS[n].width) - 1))
    try:
        shapes = [MatchShape(t.protocol, combo, names + vnames) for combo in t.combos]
    except ValueError:  # fill_entry raises it at the first entry that gets this far
        return per_entry(t, level, entries, contents)
    consts = [(i, kb.const) for i, kb in enumerate(lv.layout) if kb.key is None]
    cpos = itemgetter(*[i for i, _ in consts]) if consts else None
    cwant = tuple(c for _, c in consts) if len(consts) > 1 else (consts[0][1] if consts else None)
    size = lv.key_size
    span = 8 * len(lv.layout)
    wrong_size: dict[int, Reason] = {}
    never = Reason("pass-to-host", f"map {lv.map}: this lookup never asks for this key")
    not_taken = Reason("pass-to-host", f"map {lv.map}: the entry's value does not take this decision")
    atypical = Reason(
        "atypical-packets",
        f"map {lv.map}: at this {'value' if lv.vkeys else 'key'} flower cannot separate packets the program "
        "treats otherwise "
        "(a z3 counterexample: fragments, IP options)",
    )
    every = any if t.outcome.is_pass else all
    by_value = t.value_by_value if t.value_cond is not None else True
    value_memo: dict = {}
    gates: list = []  # [Reason | None] once asked
    proven: dict = {}  # shape length -> Reason (not proven) | the excluded (key, vkey values) set
    last = level == len(t.levels) - 1
    action = t.outcome.action if last else ("goto", "chain", str(t.levels[level + 1].chain))
    role = ("shield" if t.outcome.is_pass else "rule") if last else "goto"
    paths = tuple(t.paths)
    at = len(t.lookups) + sum(len(x.vkeys) for x in t.lookups[:level])
    nv = len(lv.vkeys)
    nlevels = len(t.levels)
    exact_shape = (None,) * nlevels  # a hash or index level's one mask shape
    index, chain, prio0, lmap = t.index, lv.chain, lv.prio, lv.map
    out = LevelFill()
    filters, refused = out.filters, out.refused
    for key, values in entries.items():
        if len(key) != size:
            why = wrong_size.get(len(key))
            if why is None:
                why = wrong_size[len(key)] = Reason(
                    "unknown", f"map {lmap}: key of {len(key)} bytes, the map's are {size}"
                )
            refused.append((key, why))
            continue
        if lpm:
            plen = int.from_bytes(key[:4], "little")
            width = 8 * (size - 4)
            if not 0 < plen <= width:
                refused.append((key, Reason("not-expressible", f"map {lmap}: prefix length {plen}")))
                continue
            mask = prefix_mask(plen, width)
            vals = {names[0]: Exact(int.from_bytes(key[4:], "big") & mask, mask)}
            shape_len = plen
        else:
            if cpos is not None and cpos(key) != cwant:
                refused.append((key, never))
                continue
            vals = {n: Exact(read(key), top) for n, read, top in readers}
            shape_len = None
        shield = False
        if t.value_cond is not None:
            memo = values if by_value else (key, values)
            ok = value_memo.get(memo)
            if ok is None:
                ok = value_memo[memo] = every(value_ok(t, level, key, v) for v in values)
            if not ok:
                if not t.longest:
                    refused.append((key, not_taken))
                    continue
                shield = True
        vvals = []
        if nv:
            bad = None
            for n, offs in lv.vkeys:
                got = {int.from_bytes(bytes(v[o] for o in offs), "big") for v in values}
                if len(got) != 1:
                    bad = Reason("not-expressible", f"map {lmap}: the CPUs' values give {n} {len(got)} values")
                    break
                vvals.append(got.pop())
                vals[n] = exact(n, vvals[-1])
            if bad is not None:
                refused.append((key, bad))
                continue
        if not gates:
            gates.append(gates_hold(t, contents))
        if gates[0] is not None:
            refused.append((key, gates[0]))
            continue
        shape = tuple(shape_len if i == level else None for i in range(nlevels)) if lpm else exact_shape
        if shield:
            t.excluded.setdefault(shape, [])
            prio = prio0 + span - shape_len
            src = ((lmap, bytes(key)),)
            filters += [
                FilledFilter(index, level, chain, prio, s.match(vals), ("pass",), "shield", src, paths) for s in shapes
            ]
            continue
        state = proven.get(shape_len)
        if state is None:
            if t.outcome.is_pass:
                t.excluded.setdefault(shape, [])
            elif not prove(t, shape):
                state = Reason("not-expressible", f"map {lmap}: the template did not prove for this key shape")
            if state is None:
                state = {(b[level], tuple(b[at : at + nv])) for b in t.excluded[shape]}
            proven[shape_len] = state
        if isinstance(state, Reason):
            refused.append((key, state))
            continue
        if state and (int.from_bytes(key, "little"), tuple(vvals)) in state:
            refused.append((key, atypical))
            continue
        prio = prio0 + (0 if shape_len is None else span - shape_len)
        src = ((lmap, bytes(key)),)
        filters += [FilledFilter(index, level, chain, prio, s.match(vals), action, role, src, paths) for s in shapes]
    return out
