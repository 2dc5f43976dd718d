"""Counter references: the stats entries an offloaded path increments, derived from the
exploration's map writes (issue 12, item 4), so `sync` can fold the filters' hardware
counters into exactly the entries the program would have incremented.

Per DROP path, each map the path writes gives an `Increment` when z3 shows, under the path's
condition: the write's key is a constant (`drop_reasons[REASON_SRC]`) or the key of one of
the template's lookups (`src_blacklist[saddr]`: a per-entry counter, the filter's own map
entry); the bytes written at offsets o..o+n-1 (n = 1, 2, 4, 8) are the little-endian integer
that was there plus a constant (`*c += 1`: amount 1 per packet). Anything else (a counter
keyed by a packet field no filter fixes, a byte count, an insert of a fresh value) gives
no Increment and a reason, and the template's filters carry no counters: sync then folds
nothing for them rather than something wrong.

A template's filters carry its paths' Increments only when every one of its paths makes the
same ones and z3 proves that every packet an instantiated filter matches (for every key and
map content, as the template's own proof: templates.prove) takes one of those paths: a
packet the filter takes may otherwise follow another DROP path that counts elsewhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import z3

from analyzer.symbolic import map_val

from .reasons import Reason
from .synthesis import solver
from .templates import Template, prove

#: Integer widths a counter may have (bytes).
WIDTHS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Increment:
    """`amount` added per packet to the `size`-byte little-endian integer at `offset` of the
    value of map `map` under a constant key (`key`: its bytes) or under the key of template
    level `level` (the filter's own entry)."""

    map: str
    key: bytes | None
    level: int | None
    offset: int
    size: int
    amount: int


def _const(e: z3.ExprRef, cond: list) -> int | None:
    """The value `e` has on every solution of `cond`, or None."""
    e = z3.simplify(e)
    if z3.is_bv_value(e):
        return e.as_long()
    s = solver(*cond)
    if s.check() != z3.sat:
        return None
    v = s.model().eval(e, model_completion=True)
    return v.as_long() if solver(*cond, e != v).check() == z3.unsat else None


def path_increments(t: Template, path_id: int) -> list[Increment] | Reason:
    """The counters path `path_id` of template `t` increments (module docstring)."""
    s = t.synth
    p = next(x for x in s.e.paths if x.id == path_id)
    cond = [s.conds[path_id], *s.env]
    sizes = {m.name: m.key_size for m in s.e.obj.maps}
    out: list[Increment] = []
    for name, writes in p.map_writes:
        last: dict[tuple[int, int], z3.ExprRef] = {}
        keys: dict[int, z3.ExprRef] = {}
        for w in writes:
            if w.kind != "byte":
                return Reason("map-dependent", f"map {name}: the path {w.kind}s an entry (not a counter increment)")
            off = _const(w.off, [])
            if off is None:
                return Reason("map-dependent", f"map {name}: a write at a variable offset")
            keys[w.key.get_id()] = w.key
            last[(w.key.get_id(), off)] = w.data[0]
        kbits = 8 * sizes[name]
        for kid, key in keys.items():
            const = _const(key, cond)
            level = None
            if const is None:
                level = next(
                    (
                        i
                        for i, lv in enumerate(t.levels)
                        if lv.lookup is not None
                        and lv.lookup.size() == key.size()
                        and solver(*cond, key != lv.lookup).check() == z3.unsat
                    ),
                    None,
                )
                if level is None:
                    return Reason("map-dependent", f"map {name}: a counter keyed by packet fields no filter fixes")
            offs = sorted(o for k, o in last if k == kid)
            runs: list[list[int]] = []
            for o in offs:
                if runs and o == runs[-1][-1] + 1:
                    runs[-1].append(o)
                else:
                    runs.append([o])
            for run in runs:
                if len(run) not in WIDTHS:
                    return Reason("map-dependent", f"map {name}: {len(run)} bytes written at offset {run[0]}")
                new = z3.Concat([last[(kid, o)] for o in reversed(run)]) if len(run) > 1 else last[(kid, run[0])]
                olds = [map_val(name, kbits)(key, z3.BitVecVal(o, 32)) for o in reversed(run)]
                old = z3.Concat(olds) if len(olds) > 1 else olds[0]
                amount = _const(new - old, cond)
                if amount is None:
                    return Reason("map-dependent", f"map {name}: not a constant increment at offset {run[0]}")
                kbytes = None if const is None else const.to_bytes(sizes[name], "little")
                out.append(Increment(name, kbytes, level, run[0], len(run), amount))
    return sorted(out, key=lambda i: (i.map, i.key or b"", i.offset))


class _PathsOnly:
    """A template's synthesis state whose `good` is "one of these paths" (for prove)."""

    def __init__(self, synth, paths: list[int]):
        self._synth = synth
        self._paths = paths

    def __getattr__(self, name):
        return getattr(self._synth, name)

    def good(self, outcome) -> z3.BoolRef:
        return z3.Or([self._synth.conds[p] for p in self._paths])


def template_increments(t: Template, shape: tuple) -> list[Increment] | Reason:
    """The Increments every filter of template `t` at mask shape `shape` may fold (module
    docstring), or why none."""
    if t.outcome.is_pass:
        return []
    got = [path_increments(t, p) for p in t.paths]
    for g in got:
        if isinstance(g, Reason):
            return g
    if any(g != got[0] for g in got):
        return Reason("map-dependent", "the template's paths increment different counters")
    if not got[0]:
        return []
    probe = dataclasses.replace(t, proved={}, excluded={}, synth=_PathsOnly(t.synth, list(t.paths)))
    if not prove(probe, shape) or probe.excluded.get(shape) != t.excluded.get(shape, []):
        return Reason(
            "map-dependent", "a packet the filter takes may follow another path of the program (other counters)"
        )
    return got[0]
