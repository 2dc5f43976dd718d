"""The angr engine's time per program next to the z3 engine's (issue 16).

For every XDP program of Debian's objects, then the clang corpus build (--toolchain all: the
gcc, clang-v4 and nobtf builds too; or those matching --filter), in one process (angr's
import, ~20 s on a loaded machine, is paid once and printed; z3's and angr's start-up are
paid by an untimed warm-up on the first program): `explore` (z3) and `explore_angr` (merged
states, the default), each timed REPEAT times, the median kept, with both engines' path
counts and how many paths a budget cut; --unmerged adds angr without merging; then, unless
--no-cross-check, the whole cross-check (both explorations, unmerged angr when it fits in
crosscheck.UNMERGED_STATES, plus the comparison; one run): its time, comparisons,
agreements and disagreements, and the paths each of its explorations finished (not cut);
--repeat 0 runs the cross-check alone (the table of issue 16: paths finished, agreements,
disagreements, time per engine). Disagreements are run through the kernel (untimed) and the
row says which engine it finds wrong. --timeout bounds each exploration with the engines' own budget (the run
then ends PARTIAL, shown as cut paths). Then, unless --no-replay, the cross-check in mode
"replay" (analyzer/crosscheck.py: every z3 witness run concretely by the angr engine; angr's
symbolic exploration bounded by --replay-angr-seconds, as tests/test_angr.py does for the
objects angr cannot finish): the replays' own time (`replay_s`), how many, and disagreements.
With --sharded S, angr's exploration in one piece and shard by shard (analyzer/shards.py),
each with S seconds of CPU time as budget (angr_engine.Limits.cpu), REPEAT times: the paths
each finishes (median) and its CPU time (median); then the cross-check in mode "sharded"
with that budget (one run): angr paths finished and compared, z3 witnesses replayed, disagreements, per-shard results.
With --z3-side S, the angr models of a sharded cross-check (S CPU seconds of angr) given
their z3 paths by evaluation and by the solver (`run_z3_side`): time per model, same answers.
With --cross S, the cross-check alone (`run_cross`) in --mode auto (the CLI's default) or
sharded, S CPU seconds of angr budget: the mode chosen, paths finished and compared, CPU.
Times are CPU seconds of this process (`time.process_time`; the machine is shared, wall time
is noisy). Results in bench/results/angr-<date>[-<filter>].json, with the machine's load
(`os.getloadavg`) before and after.

    .venv/bin/python bench/engines.py [--repeat 3|0] [--filter SUBSTRING] [--skip SUBSTRING] [--toolchain clang|all]
        [--timeout 300] [--unmerged] [--no-cross-check] [--no-replay] [--replay-angr-seconds 10]
        [--sharded 60] [--z3-side 20] [--cross 40 [--mode auto|sharded]]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import corpus  # noqa: E402
from analyzer.explore import Options, explore  # noqa: E402
from lifter.program import load_object  # noqa: E402


def run_one(
    path: Path, program: str, repeat: int, cross: bool, unmerged: bool, timeout: float, replay: float | None = None
) -> dict:
    """One program's row: each engine's median time and paths, then the cross-check, then
    (`replay`: angr's symbolic budget in seconds) the cross-check in mode "replay"."""
    from analyzer.angr_engine import Limits, explore_angr
    from analyzer.crosscheck import cross_check

    obj = load_object(path)
    prog = obj.program(program)
    options = Options(timeout=timeout)
    row = {"object": str(path.relative_to(ROOT)), "program": program}
    engines = [("z3", explore, options), ("angr", explore_angr, options)] if repeat else []
    if unmerged and repeat:
        engines.append(("angr_unmerged", explore_angr, replace(options, merge=False)))
    for engine, fn, opts in engines:
        times, paths = [], 0
        for _ in range(repeat):
            start = time.process_time()
            e = fn(obj, prog, opts)
            times.append(time.process_time() - start)
            paths = len(e.paths)
        row[engine] = {"median_s": statistics.median(times), "paths": paths}
        if e.budget is not None and e.budget.cut:
            row[engine]["cut"] = len(e.budget.cut)
    if cross:
        start = time.process_time()
        check = cross_check(obj, prog, options)
        r = check.report
        seconds = time.process_time() - start
        confirmed = confirm(path, prog, check)
        row["cross_check"] = {
            "s": seconds,
            "disagreements": len(r.disagreements),
            # which engine the kernel (BPF_PROG_TEST_RUN) says is wrong, per disagreement
            "wrong": confirmed,
            "compared": r.z3_compared + r.angr_compared,
            "agreements": r.z3_compared + r.angr_compared - len(r.disagreements),
            "skipped": len(r.skipped),
            "angr_merged": r.angr_merged,
            # paths each engine finished (not cut by a budget) in the cross-check's own explorations
            "z3_finished": len(check.z3e.paths) - len(check.z3e.budget.cut if check.z3e.budget else []),
            "z3_s": r.z3_seconds,
            "angr_finished": len(check.angre.paths) - len(check.angre.budget.cut if check.angre.budget else []),
            "angr_s": r.angr_seconds,
            "why_skipped": sorted({why[:90] for _, _, why in r.skipped}),
            "disagreeing": [str(d) for d in r.disagreements],
            "mode": r.mode,
        }
    if replay is not None:
        check = cross_check(obj, prog, options, limits=Limits(max_seconds=replay), mode="replay")
        r = check.report
        row["replay"] = {
            "replay_s": r.replay_seconds,
            "replayed": r.z3_replayed,
            "disagreements": len(r.disagreements),
            "wrong": confirm(path, prog, check),
            "angr_complete": r.angr_complete,
            "angr_compared": r.angr_compared,
            "angr_paths": r.angr_paths,
        }
    return row


def run_sharded(path: Path, program: str, repeat: int, seconds: float) -> dict:
    """angr in one piece vs shard by shard, each with `seconds` of budget: finished paths and
    CPU medians over `repeat` runs; then the sharded cross-check (one run)."""
    from analyzer.angr_engine import Limits
    from analyzer.crosscheck import angr_exploration, cross_check, sharded_exploration

    obj = load_object(path)
    prog = obj.program(program)
    limits = Limits(max_seconds=seconds, cpu=True)  # CPU seconds for both: the same work on a loaded machine

    def finished(a) -> int:
        return len(a.paths) - len(a.budget.cut if a.budget else [])

    row: dict = {}
    for name, fn in (
        ("whole", lambda: [angr_exploration(obj, prog, Options(), limits)]),
        ("shards", lambda: [r.exploration for r in sharded_exploration(obj, prog, Options(), limits)]),
    ):
        times, done = [], []
        for _ in range(max(repeat, 1)):
            start = time.process_time()
            runs = fn()
            times.append(time.process_time() - start)
            done.append(sum(finished(a) for a in runs))
        row[name] = {"cpu_s": statistics.median(times), "finished": statistics.median(done), "runs": done}
    start = time.process_time()
    check = cross_check(obj, prog, Options(), limits=limits, mode="sharded")
    r = check.report
    row["cross_check"] = {
        "cpu_s": time.process_time() - start,
        "angr_finished": sum(s.finished for s in r.shards),
        "angr_paths": r.angr_paths,
        "angr_compared": r.angr_compared,
        "z3_compared": r.z3_compared,
        "z3_replayed": r.z3_replayed,
        "replay_s": r.replay_seconds,
        "disagreements": len(r.disagreements),
        "wrong": confirm(path, prog, check),
        "shards": [str(s) for s in r.shards],
    }
    return row


def run_cross(path: Path, program: str, seconds: float, mode: str) -> dict:
    """The cross-check alone in `mode` ("auto", the CLI's default, or "sharded") with
    `seconds` of angr budget (CPU seconds; in mode auto the one-piece try's probe after a
    protocol walk is a tenth of it): CPU, the mode auto chose, angr paths finished of
    explored and compared, z3 paths compared and replayed, disagreements (one run)."""
    from analyzer.angr_engine import Limits
    from analyzer.crosscheck import cross_check

    obj = load_object(path)
    prog = obj.program(program)
    start = time.process_time()
    check = cross_check(obj, prog, Options(), limits=Limits(max_seconds=seconds, cpu=True), mode=mode)
    r = check.report
    a = check.angre
    finished = sum(s.finished for s in r.shards) if r.shards else len(a.paths) - len(a.budget.cut if a.budget else [])
    return {
        "cpu_s": time.process_time() - start,
        "mode": r.mode,
        "chosen": r.chosen,
        "angr_paths": r.angr_paths,
        "angr_finished": finished,
        "angr_compared": r.angr_compared,
        "z3_paths": r.z3_paths,
        "z3_compared": r.z3_compared,
        "z3_replayed": r.z3_replayed,
        "z3_evaluated": check.z3_evaluated,
        "z3_solved": check.z3_solved,
        "disagreements": len(r.disagreements),
        "wrong": confirm(path, prog, check),
        "shards": [str(s) for s in r.shards],
    }


def run_z3_side(path: Path, program: str, repeat: int, seconds: float) -> dict:
    """The z3 side of the angr->z3 comparison: a sharded cross-check with `seconds` of
    angr budget records every angr model it hands to z3 (CrossCheck._z3_outcomes), then
    each model is given its z3 paths both ways, by evaluating the conditions on it
    (`evaluate`, the default) and by the solver (`solve`, the way before): CPU seconds per
    model (median over the models of the median of `repeat` runs) and whether the two
    answers (outcomes allowed, cut reason) are the same on every model."""
    from analyzer.angr_engine import Limits
    from analyzer.crosscheck import CrossCheck, cross_check

    obj = load_object(path)
    prog = obj.program(program)
    seen: list = []
    original = CrossCheck._z3_outcomes

    def recording(self, inp, expected):
        seen.append((inp, expected))
        return original(self, inp, expected)

    CrossCheck._z3_outcomes = recording
    try:
        check = cross_check(obj, prog, Options(), limits=Limits(max_seconds=seconds, cpu=True), mode="sharded")
    finally:
        CrossCheck._z3_outcomes = original
    row: dict = {"models": len(seen)}
    answers: dict = {}
    for how in ("evaluate", "solve"):
        check.z3_eval, check.z3_evaluated, check.z3_solved = how, 0, 0
        times, answers[how] = [], []
        for inp, expected in seen:
            runs = []
            for _ in range(max(repeat, 1)):
                start = time.process_time()
                got = check._z3_outcomes(inp, expected)
                runs.append(time.process_time() - start)
            times.append(statistics.median(runs))
            answers[how].append(got)
        row[how] = {
            "median_s": statistics.median(times) if times else 0.0,
            "sum_s": sum(times),
            "evaluated": check.z3_evaluated,
            "solved": check.z3_solved,
        }
    row["same"] = answers["evaluate"] == answers["solve"]
    row["differ"] = [
        f"{inp}: evaluate {a}, solve {b}"
        for (inp, _), a, b in zip(seen, answers["evaluate"], answers["solve"])
        if a != b
    ][:5]
    return row


def confirm(path: Path, prog, check) -> dict:
    """Run the disagreements' inputs through the kernel (untimed): {engine found wrong: count},
    or {"not run": reason} when the kernel cannot load or run the program."""
    from analyzer import kernel

    if not check.report.disagreements:
        return {}
    if prog.section.startswith(("xdp/devmap", "xdp/cpumap")):
        return {"not run": "devmap/cpumap programs cannot be test-run"}
    try:
        kernel.check_kernel()
        with kernel.load(path, programs=[prog.name]) as loaded:
            check.confirm(loaded)
    except (kernel.KernelUnavailable, kernel.KernelLoadError) as err:
        return {"not run": str(err).splitlines()[0]}
    out: dict = {}
    for d in check.report.disagreements:
        out[d.wrong] = out.get(d.wrong, 0) + 1
    return out


def line(row: dict) -> str:
    """The row as a table line."""
    if "error" in row:
        return f"{row['object']:<44} {row['program']:<22} {row['error'][:60]}"

    if "z3" not in row:  # --repeat 0: the cross-check's explorations only
        c = row["cross_check"]
        return (
            f"{row['object']:<44} z3 {c['z3_finished']:3} paths {c['z3_s']:7.2f} s, angr {c['angr_finished']:3} "
            f"paths {c['angr_s']:7.2f} s{' merged' if c['angr_merged'] else ''}; compared {c['compared']}, "
            f"agree {c['agreements']}, disagree {c['disagreements']}, skipped {c['skipped']}"
            + (f"; kernel says wrong: {c['wrong']}" if c.get("wrong") else "")
        )

    def cell(engine: str) -> str:
        if engine not in row:
            return " " * 14
        e = row[engine]
        return f"{e['median_s']:8.2f} {e['paths']:4}{'*' if 'cut' in e else ' '}"

    cc = ""
    if "cross_check" in row:
        c = row["cross_check"]
        cc = f"{c['s']:8.2f} {c['compared']:4} {c['disagreements']:3} {'merged' if c['angr_merged'] else ''}"
    if "replay" in row:
        r = row["replay"]
        cc += f" | replay {r['replay_s']:6.2f} s {r['replayed']:3} runs {r['disagreements']} dis"
    return f"{row['object']:<44} {row['program']:<22} {cell('z3')} {cell('angr')} {cell('angr_unmerged')} {cc}"


def save(out: Path, import_s: float, load0, rows: list, load1=None) -> None:
    data = {"import_angr_s": import_s, "load_before": load0, "load_after": load1, "rows": rows}
    out.write_text(json.dumps(data, indent=2))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--filter", default="")
    ap.add_argument("--skip", default=None, help="leave out objects whose path contains this")
    ap.add_argument("--toolchain", choices=("clang", "all"), default="clang")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--unmerged", action="store_true")
    ap.add_argument("--no-cross-check", action="store_true")
    ap.add_argument("--no-replay", action="store_true")
    ap.add_argument("--replay-angr-seconds", type=float, default=10.0)
    ap.add_argument("--sharded", type=float, default=None, metavar="SECONDS")
    ap.add_argument("--z3-side", type=float, default=None, metavar="SECONDS")
    ap.add_argument("--cross", type=float, default=None, metavar="SECONDS")
    ap.add_argument("--mode", choices=("auto", "sharded"), default="auto")
    args = ap.parse_args()
    load0 = os.getloadavg()
    start = time.process_time()
    import analyzer.angr_engine  # noqa: F401

    import_s = time.process_time() - start
    print(f"import angr (and the engine): {import_s:.2f} s; load: {load0}")
    builds = ("clang", "gcc", "clang-v4", "nobtf") if args.toolchain == "all" else ("clang",)
    objs = sorted(corpus.external_objects()) + [p for b in builds for p in sorted((corpus.BUILD_DIR / b).glob("*.o"))]
    print(
        f"{'object':<44} {'program':<22} {'z3 s':>8} {'path':>4}  {'angr s':>8} {'path':>4}  {'unmrg s':>8} "
        f"{'path':>4}  {'cross s':>8} {'cmp':>4} {'dis':>3}   (* = a budget cut paths)"
    )
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "".join(c if c.isalnum() or c in "-_" else "_" for c in args.filter)
    out = out_dir / f"angr-{datetime.date.today().isoformat()}{'-' + suffix if suffix else ''}.json"
    rows, warm, began = [], False, time.process_time()
    for path in objs:
        if args.filter not in str(path) or (args.skip and args.skip in str(path)):
            continue
        for prog in load_object(path).programs:
            if not prog.is_xdp:
                continue
            if args.cross is not None:
                row = {"object": str(path.relative_to(ROOT)), "program": prog.name}
                row.update(run_cross(path, prog.name, args.cross, args.mode))
                print(
                    f"{row['object']:<44} {row['mode']}: angr {row['angr_finished']} of {row['angr_paths']} finished, "
                    f"{row['angr_compared']} compared; z3 {row['z3_compared']} of {row['z3_paths']} compared "
                    f"({row['z3_replayed']} replayed); {row['disagreements']} disagreements; {row['cpu_s']:.1f} s CPU",
                    flush=True,
                )
                rows.append(row)
                save(out, import_s, load0, rows)
                continue
            if args.z3_side is not None:
                row = {"object": str(path.relative_to(ROOT)), "program": prog.name}
                row.update(run_z3_side(path, prog.name, args.repeat, args.z3_side))
                ev, so = row["evaluate"], row["solve"]
                print(
                    f"{row['object']:<44} {row['models']:4} angr models: evaluate "
                    f"{ev['median_s'] * 1000:7.1f} ms/model (sum {ev['sum_s']:6.2f} s; z3 paths evaluated "
                    f"{ev['evaluated']}, solved {ev['solved']}) | solve {so['median_s'] * 1000:7.1f} ms/model "
                    f"(sum {so['sum_s']:6.2f} s) | same answers: {row['same']}",
                    flush=True,
                )
                rows.append(row)
                save(out, import_s, load0, rows)
                continue
            if args.sharded is not None:
                row = {"object": str(path.relative_to(ROOT)), "program": prog.name}
                row.update(run_sharded(path, prog.name, args.repeat, args.sharded))
                w, sh, c = row["whole"], row["shards"], row["cross_check"]
                print(
                    f"{row['object']:<44} whole: {w['finished']:5} finished {w['cpu_s']:7.2f} s CPU | sharded: "
                    f"{sh['finished']:5} finished {sh['cpu_s']:7.2f} s CPU | cross-check {c['cpu_s']:7.2f} s: angr "
                    f"{c['angr_compared']} compared, z3 {c['z3_compared']} ({c['z3_replayed']} replayed), "
                    f"{c['disagreements']} disagreements",
                    flush=True,
                )
                rows.append(row)
                save(out, import_s, load0, rows)
                continue
            try:
                if not warm and args.repeat:
                    run_one(path, prog.name, 1, False, False, args.timeout)
                    warm = True
                row = run_one(
                    path,
                    prog.name,
                    args.repeat,
                    not args.no_cross_check,
                    args.unmerged,
                    args.timeout,
                    None if args.no_replay else args.replay_angr_seconds,
                )
            except Exception as e:  # noqa: BLE001 - a failing program is a row of the table
                row = {"object": str(path.relative_to(ROOT)), "program": prog.name, "error": f"{type(e).__name__}: {e}"}
            rows.append(row)
            print(line(row), flush=True)
            save(out, import_s, load0, rows)  # after each row: a stopped run keeps what it measured
    ok = [r for r in rows if "error" not in r and "z3" in r]
    total = time.process_time() - began
    if ok:
        cc = [r["cross_check"] for r in ok if "cross_check" in r]
        print(
            f"{len(ok)} programs in {total:.0f} s; median per program: z3 "
            f"{statistics.median(r['z3']['median_s'] for r in ok):.3f} s, angr "
            f"{statistics.median(r['angr']['median_s'] for r in ok):.3f} s; sums: z3 "
            f"{sum(r['z3']['median_s'] for r in ok):.0f} s, angr {sum(r['angr']['median_s'] for r in ok):.0f} s; "
            f"cut by a budget: z3 {sum('cut' in r['z3'] for r in ok)}, angr {sum('cut' in r['angr'] for r in ok)}; "
            f"cross-checked {len(cc)} in {sum(c['s'] for c in cc):.0f} s, "
            f"{sum(c['disagreements'] for c in cc)} disagreements; {len(rows) - len(ok)} failed"
        )
        rp = [r["replay"] for r in ok if "replay" in r]
        if rp:
            print(
                f"replay: median per program {statistics.median(r['replay_s'] for r in rp):.3f} s CPU "
                f"({statistics.median(r['replayed'] for r in rp)} runs), sum {sum(r['replay_s'] for r in rp):.1f} s, "
                f"{sum(r['disagreements'] for r in rp)} disagreements"
            )
    load1 = os.getloadavg()
    print(f"load before {load0}, after {load1}")
    save(out, import_s, load0, rows, load1)
    print(f"results in {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
