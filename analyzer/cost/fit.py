"""Fitting the instruction prices of a profile against whole-program path timings.

Micro-programs (analyzer/cost/calibrate.py) time each instruction class in isolation, as
throughput of independent chains; a real program overlaps instructions differently (a
parser's loads feed its compares, stores retire in the background), so summing
micro-benchmark prices over-predicts long paths and under-predicts short ones. `calibrate`
therefore times real paths (analyzer/cost/pathtiming.py) and fits, by non-negative least
squares, one price per instruction class plus a fixed price per path (`Profile.path_ns`:
the entry, the first cache and branch-predictor touches, what the empty-program overhead
does not contain) to

    measured - overhead - fixed  ~=  path_ns + sum over classes of price * count

where `fixed` is what the micro-programs price well (helpers, lookups by map type and
hit/miss, updates and inserts, tail calls, calls) at the profile's prices. One more column
models how the CPU overlaps instructions: `chain`, the cycles of the path's longest
dependency chain (count.py `Chains`), priced per cycle -- independent instructions cost their
throughput (the class prices), instructions that wait for each other cost their latency
too. Rows are weighted by 1/measured, so the fit minimises relative error (the accuracy
target is relative), or by 1/(measured - overhead) (`weight="net"`, the relative error of
what the program itself costs, without the test run's fixed overhead). A class executed on
too few paths keeps its micro-benchmark price (it is moved into `fixed`).

The fit is judged by k-fold cross-validation grouped by source program (every build of
one C file is held back together): each path's error is computed with prices fitted
without its program. The summary goes into the profile's `fit`.
"""

from __future__ import annotations

import dataclasses
import statistics
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from .profile import Profile

#: Instruction classes never fitted: their cost is in another price by definition.
NOT_FITTED = frozenset({"exit", "call_helper", "call_local", "call_other"})
#: A class is fitted when it is executed on at least this many timed paths.
MIN_PATHS = 8
#: The per-path term's name in the fitted prices.
PATH_TERM = "path"
#: The dependency-chain column (ns per cycle of a path's longest chain, kept in `insn`).
CHAIN = "chain"
#: Default row weighting (see the module doc).
WEIGHT = "measured"
BAND = 0.20


def nnls(
    rows: Sequence[Sequence[float]], target: Sequence[float], sweeps: int = 20000, tol: float = 1e-12
) -> list[float]:
    """argmin_x>=0 |A x - b|^2 by cyclic coordinate descent on the normal equations (a
    convex problem with box constraints: it converges to the exact optimum; the systems
    here have a few dozen columns)."""
    n = len(rows[0]) if rows else 0
    g = [[0.0] * n for _ in range(n)]
    h = [0.0] * n
    for r, y in zip(rows, target):
        for i in range(n):
            if r[i]:
                h[i] += r[i] * y
                gi = g[i]
                for j in range(n):
                    gi[j] += r[i] * r[j]
    x = [0.0] * n
    for _ in range(sweeps):
        change = 0.0
        for i in range(n):
            if g[i][i] <= 0:
                continue
            grad = sum(g[i][j] * x[j] for j in range(n)) - h[i]
            new = max(0.0, x[i] - grad / g[i][i])
            change = max(change, abs(new - x[i]) * (g[i][i] ** 0.5))
            x[i] = new
        if change < tol:
            break
    return x


@dataclass
class Sample:
    """One timed path: its group (source program), instruction counts by class, the
    micro-priced rest (ns) and the measured ns minus the test-run overhead."""

    group: str
    insns: dict[str, int]
    fixed_ns: float
    net_ns: float
    measured_ns: float


def samples(rows: list[dict], profile: Profile, with_chain: bool = True) -> list[Sample]:
    """Samples from pathtiming rows (timed, with every counter priced); the dependency
    chain (count.py `Chains`) is a column like an instruction class unless `with_chain`
    is false (the model without it, for comparison)."""
    out = []
    for r in rows:
        if "measured_ns" not in r or r.get("uncalibrated") or r["measured_ns"] <= 0:
            continue
        insns = {k.split(".", 1)[1]: n for k, n in r["counts"].items() if k.startswith("insn.")}
        if with_chain and r["counts"].get("chain"):
            insns[CHAIN] = r["counts"]["chain"]
        out.append(
            Sample(
                group_of(r["object"]), insns, r["fixed_ns"], r["measured_ns"] - profile.overhead_ns, r["measured_ns"]
            )
        )
    return out


def group_of(obj: str) -> str:
    """Every build of one source program is one group (corpus/build/<toolchain>/x.o -> x)."""
    return obj.rsplit("/", 1)[-1].removesuffix(".o")


def fitted_classes(data: list[Sample]) -> list[str]:
    seen: dict[str, int] = {}
    for s in data:
        for c, n in s.insns.items():
            if n and c not in NOT_FITTED:
                seen[c] = seen.get(c, 0) + 1
    return sorted(c for c, k in seen.items() if k >= MIN_PATHS)


def solve(data: list[Sample], classes: list[str], profile: Profile, weight: str = "measured") -> dict[str, float]:
    """Prices for `classes` and PATH_TERM fitted on `data` (the other classes at the
    profile's prices). Rows are weighted by 1/measured ns (`weight="measured"`: relative
    error of the whole test run) or by 1/(measured - overhead) (`"net"`: relative error of
    what the program itself costs, with a floor of one ns)."""
    rows, target = [], []
    for s in data:
        rest = s.fixed_ns + sum(profile.insn.get(c, 0.0) * n for c, n in s.insns.items() if c not in classes)
        w = 1.0 / (s.measured_ns if weight == "measured" else max(s.net_ns, 1.0))
        rows.append([w * s.insns.get(c, 0) for c in classes] + [w])
        target.append(w * (s.net_ns - rest))
    x = nnls(rows, target)
    return dict(zip([*classes, PATH_TERM], x))


def predict(s: Sample, prices: dict[str, float], profile: Profile) -> float:
    """Predicted ns of a sample (overhead included) under fitted `prices`."""
    insn = sum(prices.get(c, profile.insn.get(c, 0.0)) * n for c, n in s.insns.items() if c not in NOT_FITTED)
    return profile.overhead_ns + prices.get(PATH_TERM, profile.path_ns) + insn + s.fixed_ns


def folds_of(data: list[Sample], k: int) -> list[int]:
    """Fold number per sample: groups spread over k folds by a stable hash."""
    return [zlib.crc32(s.group.encode()) % k for s in data]


def summary(errors: list[float]) -> dict:
    if not errors:
        return {"paths": 0}
    return {
        "paths": len(errors),
        "within_20pct": round(sum(1 for e in errors if abs(e) <= BAND) / len(errors), 4),
        "median_error": round(statistics.median(errors), 4),
        "median_abs_error": round(statistics.median(abs(e) for e in errors), 4),
        "max_abs_error": round(max(abs(e) for e in errors), 4),
    }


def cross_validate(
    data: list[Sample], profile: Profile, k: int = 5, weight: str = WEIGHT
) -> tuple[list[float], list[float]]:
    """Per sample: the relative error with prices fitted on the other folds, and with the
    profile's own (micro-benchmark) prices."""
    folds = folds_of(data, k)
    held = [0.0] * len(data)
    for f in range(k):
        train = [s for s, g in zip(data, folds) if g != f]
        if not train:
            continue
        prices = solve(train, fitted_classes(train), profile, weight)
        for i, (s, g) in enumerate(zip(data, folds)):
            if g == f:
                held[i] = (predict(s, prices, profile) - s.measured_ns) / s.measured_ns
    micro = [(predict(s, {}, profile) - s.measured_ns) / s.measured_ns for s in data]
    return held, micro


def fit_profile(profile: Profile, rows: list[dict], k: int = 5, weight: str = WEIGHT) -> Profile:
    """`profile` with its instruction prices, the chain's price and `path_ns` fitted on the
    timed `rows` (pathtiming rows priced with this profile), and `fit` describing the fit."""
    data = samples(rows, profile)
    if len(data) < 2 * MIN_PATHS:
        raise ValueError(f"{len(data)} timed paths: too few to fit instruction prices (at least {2 * MIN_PATHS})")
    classes = fitted_classes(data)
    held, micro = cross_validate(data, profile, k, weight)
    net_held = [e * s.measured_ns / s.net_ns for e, s in zip(held, data) if s.net_ns > 0]
    prices = solve(data, classes, profile, weight)
    insn = dict(profile.insn)
    for c in classes:
        insn[c] = round(prices[c], 4)
    fit = {
        "method": f"non-negative least squares, rows weighted by 1/{weight} ns, per class, per chain cycle, per path",
        "paths": len(data),
        "programs": len({s.group for s in data}),
        "classes": classes,
        "micro_insn": {c: profile.insn.get(c) for c in classes},
        "path_ns": round(prices[PATH_TERM], 4),
        "cross_validation": {"folds": k, "grouped_by": "source program"} | summary(held),
        "cross_validation_net": summary(net_held),
        "micro_prices": summary(micro),
        "fitted_on": sorted({r["object"] for r in rows if "measured_ns" in r}),
    }
    return dataclasses.replace(
        profile,
        insn=insn,
        notes=[*profile.notes, "insn prices and path_ns fitted on real paths (see fit)"],
        path_ns=round(prices[PATH_TERM], 4),
        fit=fit,
    )
