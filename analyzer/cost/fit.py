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
#: The absolute tolerance of a net time (ns): the kernel reports whole ns (the mean per run,
#: truncated), and a net time is the difference of two such readings (the path's and the
#: empty program's), so it is exact to within 1 ns before any noise; most corpus paths
#: cost a few ns net, where ±20 % is below that resolution.
ABS_NS = 1.0
#: Net times this long or longer are also judged by ±BAND alone.
NET_FLOOR = 10.0


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
    micro-priced rest (ns), the measured ns, and the measured ns minus the test-run
    overhead timed beside it (pathtiming.py; rows without it: the profile's)."""

    group: str
    insns: dict[str, int]
    fixed_ns: float
    net_ns: float
    measured_ns: float
    name: str = ""  # object, program and path id, for reports


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
                group_of(r["object"]),
                insns,
                r["fixed_ns"],
                r["measured_ns"] - r.get("overhead_ns", profile.overhead_ns),
                r["measured_ns"],
                f"{r['object']} {r.get('program', '')} #{r.get('path', '')}",
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


def predict_net(s: Sample, prices: dict[str, float], profile: Profile) -> float:
    """Predicted ns of a sample without the test run's overhead, under fitted `prices`."""
    insn = sum(prices.get(c, profile.insn.get(c, 0.0)) * n for c, n in s.insns.items() if c not in NOT_FITTED)
    return prices.get(PATH_TERM, profile.path_ns) + insn + s.fixed_ns


def predict(s: Sample, prices: dict[str, float], profile: Profile) -> float:
    """Predicted ns of a sample as the kernel reports it (the profile's overhead included)."""
    return profile.overhead_ns + predict_net(s, prices, profile)


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


def within(predicted_net: float, s: Sample, abs_ns: float = ABS_NS) -> bool:
    """Is a net prediction within BAND of the net measurement, or within `abs_ns` of it
    (see ABS_NS: the resolution of a net time)?"""
    return abs(predicted_net - s.net_ns) <= max(BAND * s.net_ns, abs_ns)


def net_summary(predicted: list[float], data: list[Sample]) -> dict:
    """How net predictions (overhead excluded) compare with net measurements: within
    ±BAND or ±ABS_NS (and ±2 ABS_NS), within ±BAND alone for paths of NET_FLOOR ns or
    more, and the median error in ns."""
    if not data:
        return {"paths": 0}
    big = [(p, s) for p, s in zip(predicted, data) if s.net_ns >= NET_FLOOR]
    return {
        "paths": len(data),
        "within_20pct_or_1ns": round(sum(within(p, s) for p, s in zip(predicted, data)) / len(data), 4),
        "within_20pct_or_2ns": round(sum(within(p, s, 2 * ABS_NS) for p, s in zip(predicted, data)) / len(data), 4),
        f"paths_net_{NET_FLOOR:g}ns_or_more": len(big),
        f"within_20pct_net_{NET_FLOOR:g}ns_or_more": round(sum(within(p, s, 0.0) for p, s in big) / len(big), 4)
        if big
        else None,
        "median_error_ns": round(statistics.median(p - s.net_ns for p, s in zip(predicted, data)), 3),
    }


def cross_validate(
    data: list[Sample], profile: Profile, k: int = 5, weight: str = WEIGHT
) -> tuple[list[float], list[float]]:
    """Per sample: the predicted net ns with prices fitted on the other folds, and with
    the profile's own (micro-benchmark) prices."""
    folds = folds_of(data, k)
    held = [0.0] * len(data)
    for f in range(k):
        train = [s for s, g in zip(data, folds) if g != f]
        if not train:
            continue
        prices = solve(train, fitted_classes(train), profile, weight)
        for i, (s, g) in enumerate(zip(data, folds)):
            if g == f:
                held[i] = predict_net(s, prices, profile)
    micro = [predict_net(s, {}, profile) for s in data]
    return held, micro


def gross_errors(predicted: list[float], data: list[Sample], profile: Profile) -> list[float]:
    """Relative errors of net predictions plus the profile's overhead against the
    measured ns as the kernel reports them."""
    return [(p + profile.overhead_ns - s.measured_ns) / s.measured_ns for p, s in zip(predicted, data)]


def micro_profile(profile: Profile) -> Profile:
    """`profile` as calibration measured it before the fit: its micro-benchmark instruction
    prices back (the fit keeps them in `fit.micro_insn`), no chain price, no per-path term.
    A profile that was not fitted is returned as it is. What bench/cost.py's held-back
    check starts from, so no price in it has seen the held-back paths."""
    if not profile.fit:
        return profile
    insn = {c: p for c, p in profile.insn.items() if c != CHAIN}
    insn |= {c: p for c, p in profile.fit.get("micro_insn", {}).items() if p is not None}
    notes = [n for n in profile.notes if "fitted on real paths" not in n]
    return dataclasses.replace(profile, insn=insn, path_ns=0.0, fit={}, notes=notes)


def fit_profile(profile: Profile, rows: list[dict], k: int = 5, weight: str = WEIGHT) -> Profile:
    """`profile` with its instruction prices, the chain's price and `path_ns` fitted on the
    timed `rows` (pathtiming rows priced with this profile), and `fit` describing the fit."""
    data = samples(rows, profile)
    if len(data) < 2 * MIN_PATHS:
        raise ValueError(f"{len(data)} timed paths: too few to fit instruction prices (at least {2 * MIN_PATHS})")
    classes = fitted_classes(data)
    held, micro = cross_validate(data, profile, k, weight)
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
        "cross_validation": {"folds": k, "grouped_by": "source program"} | summary(gross_errors(held, data, profile)),
        "cross_validation_net": net_summary(held, data),
        "micro_prices": summary(gross_errors(micro, data, profile)),
        "micro_prices_net": net_summary(micro, data),
        "fitted_on": sorted({r["object"] for r in rows if "measured_ns" in r}),
    }
    return dataclasses.replace(
        profile,
        insn=insn,
        notes=[*profile.notes, "insn prices and path_ns fitted on real paths (see fit)"],
        path_ns=round(prices[PATH_TERM], 4),
        fit=fit,
    )
