"""Whole-program path timings on the running kernel: what `calibrate` fits the instruction
prices against and what bench/cost.py judges the cost model with.

Every path of an object with a witness: the object is loaded (analyzer/kernel/), the
path's witness packet and map entries are built as `xdp2tc verify` builds them
(analyzer/verify.py), the packet is run once and must give the predicted verdict and
output, then it is timed with BPF_PROG_TEST_RUN (`repeat` runs, maps reset before each of
`rounds` rounds) and must still give the prediction afterwards. The test run's fixed
overhead is timed beside it: the empty program `r0 = XDP_PASS; exit` on the same packet,
once per round right after the path, so the path's own time does not depend on an
overhead measured at another moment, under another load. The rounds are made one time by
`estimate` (ESTIMATOR, the mean of the fastest half of the rounds of each: `measured_ns`,
`overhead_ns`, and their difference `net_measured_ns`; every round is kept in `runs` and
`overhead_runs`). The
kernel reports whole ns: a net time is the difference of two whole-ns readings, exact to
within 1 ns. Paths are
left out, with the reason, when the kernel cannot run them the same way every repetition:
helper results (time, random numbers), a packet the program rewrites into one that takes
another path, or map state that moves the path.

A timed row carries the counters of the sub-path the witness takes as repetitions run it
(`counts`: an insert of a new key is an overwrite from the second run on), the price
under the given profile split into `insns_ns` (instruction classes) and `fixed_ns`
(helpers, lookups, tail calls, calls: what micro-programs measure), and `measured_ns`.
"""

from __future__ import annotations

import os
import statistics

import z3

from lifter.asm import mov
from lifter.encode import encode_all
from lifter.insn import Call, Exit, Imm
from lifter.program import load_object

from .. import kernel
from ..exploration import UNKNOWN
from ..symbolic import PACKET, symbols
from ..verify import Verifier
from .count import count
from .price import price, taken_tail_calls
from .profile import Profile

#: Sections the kernel cannot test-run (devmap/cpumap egress programs).
NO_TEST_RUN = ("xdp/devmap", "xdp/cpumap", "xdp.frags/devmap", "xdp.frags/cpumap")
#: The empty program's name in a Loader.
EMPTY = "xdp2tc_empty"


def empty_program() -> kernel.LoadedObject:
    """`r0 = XDP_PASS; exit` loaded on its own: what a test run costs around any program
    (see the module doc); close it after use."""
    loader = kernel.Loader("<empty program>")
    try:
        loader.program(EMPTY, kernel.BPF_PROG_TYPE_XDP, encode_all([mov(0, Imm(2)), Exit(0)]))
    except kernel.KernelLoadError:
        loader.object.close()
        raise
    return loader.object


def time_object(path, profile: Profile, repeat: int, rounds: int, name: str | None = None) -> list[dict]:
    """One row per path of every XDP program of the object at `path` (see the module doc);
    `name` is the object's name in the rows (default: the path as given)."""
    obj = load_object(path)
    with empty_program() as empty:
        return _time_programs(obj, path, name or str(path), profile, repeat, rounds, empty)


def _time_programs(obj, path, rel: str, profile: Profile, repeat: int, rounds: int, empty) -> list[dict]:
    rows = []
    for prog in obj.programs:
        if not prog.is_xdp:
            continue
        base = {"object": rel, "program": prog.name}
        if prog.section.startswith(NO_TEST_RUN):
            rows.append(base | {"skip": "devmap/cpumap egress programs cannot be test-run"})
            continue
        counted = count(obj, prog)
        e = counted.exploration
        try:
            loaded = kernel.load(os.fspath(path), programs=[prog.name])
        except kernel.KernelLoadError as err:
            rows.append(base | {"skip": f"load failed: {str(err).splitlines()[0]}"})
            continue
        with loaded:
            v = Verifier(e, loaded)
            for p, cond in zip(e.paths, v.conditions):
                rows.append(base | time_path(counted, v, loaded, prog.name, p, cond, profile, repeat, rounds, empty))
    return rows


def time_path(
    counted, v: Verifier, loaded, prog: str, path, cond, profile: Profile, repeat: int, rounds: int, empty=None
) -> dict:
    """The row of one path (see the module doc): `skip` says why it was not timed; `empty`
    (`empty_program()`) times the overhead beside it (without: the profile's)."""
    row: dict = {"path": path.id, "verdict": path.verdict}
    if path.verdict == UNKNOWN:
        return row | {"skip": f"outcome unknown to xdp2tc ({path.truncated or 'unsupported'})"}
    why = v.unfillable(path)
    if why:
        return row | {"skip": why}
    model = v.witness(cond)
    if model is None:
        return row | {"skip": "no witness under test-run conditions"}
    counts = as_repeated(counted.counts_at(path, model))
    pr = price(counts, taken_tail_calls(path), counted, profile)
    row.update(
        insns=counts.get("insns", 0),
        counts=counts,
        predicted_ns=round(pr.ns + profile.overhead_ns, 3),
        predicted_net_ns=round(pr.ns, 3),
        insns_ns=round(pr.parts["insns"], 4),
        fixed_ns=round(pr.ns - pr.parts["insns"], 4),
        uncalibrated=sorted(pr.uncalibrated),
        tail_calls=len(path.tail_calls),
        parts={k: round(x, 3) for k, x in pr.parts.items() if x},
    )
    ev = lambda x: model.eval(x, model_completion=True)  # noqa: E731
    packet = v.witness_packet(ev)
    ctx = kernel.XdpCtx(ev(z3.BitVec("ctx.ingress_ifindex", 32)).as_long(), 0)

    def reset():
        v.set_maps(path, ev)

    try:
        reset()
    except kernel.KernelRunError as err:
        return row | {"skip": f"map entry rejected: {err}"}
    expected = v.prediction(path, ev)
    first = loaded.run(prog, packet, ctx=ctx)
    if (first.retval, first.packet_out) != expected:
        return row | {
            "skip": "helper-dependent path: the kernel took another one"
            if v.nondeterministic[path.id]
            else "kernel result differs from the prediction (see xdp2tc verify)"
        }
    if v.nondeterministic[path.id]:
        return row | {"skip": "depends on helper results (time, random): repetitions take other paths"}
    if self_moving(counted.exploration.obj, path, cond):
        return row | {"skip": "writes map state its own condition reads: repetitions take other paths"}
    if path.writes and first.packet_out != packet:
        again = loaded.run(prog, first.packet_out, ctx=ctx)
        holds = z3.is_true(model.eval(z3.substitute(cond, (PACKET, _array(first.packet_out))), model_completion=True))
        if not holds or again.retval != first.retval:
            return row | {"skip": "rewrites the packet into one that takes another path on repetition"}
    runs, base = [], []
    for _ in range(rounds):
        reset()
        runs.append(loaded.run(prog, packet, repeat=repeat, ctx=ctx).duration_ns)
        if empty is not None:
            try:
                base.append(empty.run(EMPTY, packet, repeat=repeat, ctx=ctx).duration_ns)
            except (kernel.KernelRunError, kernel.PacketError):  # a multi-buffer packet: no linear-only twin
                empty = None
                base.clear()
    last = loaded.run(prog, packet, ctx=ctx)
    if last.retval != expected[0]:
        return row | {"skip": "map state written by the program moves the path under repetition"}
    measured, overhead, net = estimate(runs, base, profile.overhead_ns)
    row.update(
        measured_ns=measured,
        runs=runs,
        error=round((row["predicted_ns"] - measured) / measured, 4),
        error_resolution=resolution_error(row["predicted_ns"], measured),
        overhead_ns=overhead,
        overhead_runs=base,
        net_measured_ns=round(net, 3),
        estimator=ESTIMATOR,
    )
    return row


def _median(runs: list[float], base: list[float]) -> tuple[float, float]:
    return statistics.median(runs), statistics.median(base)


def _minimum(runs: list[float], base: list[float]) -> tuple[float, float]:
    return min(runs), min(base)


def _paired_median(runs: list[float], base: list[float]) -> tuple[float, float]:
    gross = statistics.median(runs)
    return gross, gross - statistics.median(a - b for a, b in zip(runs, base))


def _fastest_half(runs: list[float], base: list[float]) -> tuple[float, float]:
    def mean_low(xs):
        return statistics.fmean(sorted(xs)[: max(1, len(xs) // 2)])

    return mean_low(runs), mean_low(base)


#: Ways to make one time out of a path's rounds (`runs`) and the empty program's rounds
#: timed beside them (`base`, same length): (gross ns, overhead ns), the net time being
#: their difference. `median`: the median of each; `paired_median`: the median of the
#: per-round differences (path minus overhead of the same round); `minimum`: the fastest
#: round of each -- interference (other processes, interrupts, cache and frequency
#: changes) only ever adds time, so the fastest round is the one least disturbed;
#: `fastest_half`: the mean of the fastest half of the rounds of each -- as robust to
#: interference as the minimum, and finer than a whole ns: the kernel reports each round
#: as a whole ns (the mean per run, truncated), so a minimum or a median is a whole ns
#: and a net time a difference of two, while the mean of several truncated readings
#: recovers fractions of a ns from their spread.
ESTIMATORS = {
    "median": _median,
    "paired_median": _paired_median,
    "minimum": _minimum,
    "fastest_half": _fastest_half,
}
#: The estimator every timed row uses (bench/cost.py, calibrate's fit and overhead, tests);
#: bench/cost.py's repeatability check compares them all. Chosen on 1,434 corpus paths
#: (12 rounds x 100,000 runs, load 10-16): even against odd rounds of the same path agree
#: within ±20 %/±1 ns net for 96.8 % (median 96.6 %, paired_median 98.4 %, minimum
#: 94.6 %), and a fit judged against it reaches 89.8 % in 5-fold cross-validation (85.8 to
#: 86.3 % with the others): its finer net times are what a model can be judged against at
#: a few ns.
ESTIMATOR = "fastest_half"


def estimate(
    runs: list[float], base: list[float], overhead_ns: float, how: str = ESTIMATOR
) -> tuple[float, float, float]:
    """(gross ns, overhead ns, net ns) of a path timed in rounds `runs` with the empty
    program's rounds `base` beside them (ESTIMATORS[how]); without `base` (a packet the
    empty program cannot run), the gross estimate less `overhead_ns` (the profile's)."""
    if not runs:
        raise ValueError("no rounds to estimate a time from")
    if len(base) != len(runs):
        gross = gross_time(runs, how)
        return gross, overhead_ns, gross - overhead_ns
    gross, over = ESTIMATORS[how](runs, base)
    return gross, over, gross - over


def as_repeated(counts: dict[str, int]) -> dict[str, int]:
    """The counters repetitions of a timed path run: its inserts of new keys are overwrites
    from the second run on (a path whose condition reads the entry it inserts is not timed,
    see `self_moving`), so a timing of thousands of runs measures overwrites."""
    out = dict(counts)
    for name in counts:
        if name.startswith("insert."):
            other = "update." + name.split(".", 1)[1]
            out[other] = out.get(other, 0) + out.pop(name)
    return out


def gross_time(runs: list[float], how: str = ESTIMATOR) -> float:
    """One time out of the rounds of a program timed alone (ESTIMATORS[how]'s gross
    figure): what `calibrate` keeps of the empty program's rounds as `overhead_ns`."""
    if not runs:
        raise ValueError("no rounds to estimate a time from")
    return ESTIMATORS[how](runs, runs)[0]


def resolution_error(predicted: float, measured: float) -> float:
    """The kernel reports whole ns (the mean per run, truncated): a measurement of k ns means
    a true mean in [k, k+1). 0 when the prediction is in there, else the distance to the
    interval relative to its middle."""
    lo, hi = measured, measured + 1
    if lo <= predicted < hi:
        return 0.0
    return round((predicted - (lo if predicted < lo else hi)) / (measured + 0.5), 4)


def self_moving(obj, path, cond) -> bool:
    """Does the path change map state its own condition reads? Inserting or deleting
    entries (helpers) moves conditions on `found` and values; storing into a value moves
    conditions on values."""
    names = symbols(cond)
    for eff in path.effects:
        if eff.kind not in ("map_write", "map_delete"):
            continue
        func = obj.function_at(eff.section, eff.pc)
        insn = next((i for i in func.insns if i.pc == eff.pc), None) if func else None
        by_helper = isinstance(insn, Call)
        if f"map.{eff.target}.val" in names or (by_helper and f"map.{eff.target}.found" in names):
            return True
    return False


def _array(packet: bytes):
    arr = z3.K(z3.BitVecSort(64), z3.BitVecVal(0, 8))
    for i, b in enumerate(packet):
        arr = z3.Store(arr, z3.BitVecVal(i, 64), z3.BitVecVal(b, 8))
    return arr
