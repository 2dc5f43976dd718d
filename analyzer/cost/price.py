"""Pricing: the ns of a counter vector under a profile, and of every path of a program.

A path's cost is the sum over its counters (a lookup miss at the profile's miss price, an
insert of a new key at its insert price, where the profile has them; the dependency chain
at the fitted price per cycle, 0 in a profile that was not fitted). A merged path has one vector per feasible
sub-path (each checked with the solver, count.py `Counted.vectors`); its cost is given as
min / median / max over them. Anything the profile has no number for is listed as
`uncalibrated` (the estimate is then a lower bound).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

from ..exploration import Path
from .count import HASHED, Counted, Site
from .profile import Profile

#: Helpers whose price is not under `helper`: lookups and updates are priced by map type
#: (an update of a type without its own price at `helper.map_update_elem`), tail calls by
#: site kind.
PRICED_ELSEWHERE = ("map_lookup_elem", "map_update_elem", "tail_call")


@dataclass
class Price:
    """The cost of one counter vector: total ns, ns per part, and what has no price."""

    ns: float
    parts: dict[str, float]  # insns, helpers, lookups, tail_calls, calls
    uncalibrated: set[str]
    saving_merge: float  # ns saved per packet if tail-called programs were merged
    saving_const: float  # ns saved if variable-index sites were constant-index


def price(counts: dict[str, int], taken: Counter, counted: Counted, profile: Profile) -> Price:
    """Price the counters `counts` of one sub-path; `taken` counts the tail calls the path
    takes per Site (from Path.tail_calls)."""
    parts = dict.fromkeys(("insns", "helpers", "lookups", "tail_calls", "calls"), 0.0)
    parts["insns"] = profile.path_ns
    missing: set[str] = set()
    hashed = 0
    for name, n in counts.items():
        kind, _, what = name.partition(".")
        if kind == "insn":
            if what in ("call_local",):
                cost = profile.call.get("bpf2bpf")
                part = "calls"
            else:
                cost, part = profile.insn.get(what), "insns"
            if cost is None:
                missing.add(name)
            else:
                parts[part] += n * cost
        elif kind == "helper":
            if what in PRICED_ELSEWHERE:
                continue
            cost = profile.helper.get(what)
            if cost is None:
                missing.add(name)
            else:
                parts["helpers"] += n * cost
        elif kind in ("lookup", "lookup_miss"):
            cost = profile.lookup_price(what, hit=kind == "lookup")
            if cost is None:
                missing.add(name)
            else:
                parts["lookups"] += n * cost
            if what in HASHED:
                hashed += n
        elif kind in ("update", "insert"):
            cost = profile.update_price(what, insert=kind == "insert")
            if cost is None:
                missing.add(name)
            else:
                parts["helpers"] += n * cost
        elif name == "chain":
            parts["insns"] += n * profile.insn.get("chain", 0.0)
        elif name == "callback":
            parts["calls"] += n * profile.call["callback"]
    extra_key = counts.get("hash_key_bytes", 0) - 4 * hashed
    parts["lookups"] += extra_key * profile.hash_key_byte
    tc = profile.tail_call
    goto = profile.insn.get("goto", 0.0)
    saving_merge = saving_const = 0.0
    for site in counted.site_keys:
        attempts = counts.get(site.field, 0)
        if not attempts:
            continue
        hit = min(taken.get(site, 0), attempts)
        miss = attempts - hit
        kind = counted.site_kind(site)
        parts["tail_calls"] += hit * tc[kind] + miss * tc[f"{kind}_miss"]
        saving_merge += hit * max(tc[kind] - goto, 0.0)
        if kind == "variable":
            saving_const += hit * (tc["variable"] - tc["constant"]) + miss * (tc["variable_miss"] - tc["constant_miss"])
    return Price(sum(parts.values()), parts, missing, saving_merge, saving_const)


def taken_tail_calls(path: Path) -> Counter:
    return Counter(Site(t.caller, t.pc) for t in path.tail_calls)


@dataclass
class PathCost:
    """A path and its price over its feasible sub-paths."""

    path: Path
    vectors: list[dict[str, int]]
    prices: list[Price]
    exact: bool

    @property
    def worst(self) -> int:
        return max(range(len(self.prices)), key=lambda i: self.prices[i].ns) if self.prices else -1

    def ns(self) -> tuple[float, float, float] | None:
        if not self.prices:
            return None
        values = sorted(p.ns for p in self.prices)
        return values[0], statistics.median(values), values[-1]

    def insns(self) -> tuple[int, int]:
        values = [v.get("insns", 0) for v in self.vectors] or [0]
        return min(values), max(values)


def path_costs(counted: Counted, profile: Profile) -> list[PathCost]:
    out = []
    for path in counted.exploration.paths:
        vectors, exact = counted.vectors(path)
        taken = taken_tail_calls(path)
        out.append(PathCost(path, vectors, [price(v, taken, counted, profile) for v in vectors], exact))
    return out


def grouped(counts: dict[str, int]) -> dict[str, dict[str, int]]:
    """{"insn": {class: n}, "helper": {name: n}, "lookup": {type: n}, "lookup_miss": {type: n},
    "update"/"insert": {type: n}, "pkt": {...}} for reports."""
    out: dict[str, dict[str, int]] = {}
    for name, n in counts.items():
        kind, _, what = name.partition(".")
        if kind in ("insn", "helper", "lookup", "lookup_miss", "update", "insert", "pkt"):
            out.setdefault(kind, {})[what] = n
    return out
