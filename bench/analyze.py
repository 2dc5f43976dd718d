"""Analysis time and memory per object: `load_object` + `explore` of each of its XDP programs,
and the whole analysis a user of `analyze --json` waits for (the same plus the report,
`analyzer.report.analysis_json`: decoded path conditions, decision classes, map uses).

Over the corpus (every toolchain) and Debian's objects.  Each object runs in a fresh
subprocess (`--one PATH`, sequentially) so that its peak RSS (`ru_maxrss`: interpreter,
imports and analysis) is its own; in there, imports are done before timing and, REPEAT
times, the wall time of load + explore of all its XDP programs together (`explore_s`) and
of load + explore + report (`median_s`, the figure the targets apply to) is taken and the
medians kept (no untimed warm-up: the first run pays z3's start-up).  Each repetition
loads and explores afresh, so the report never sees another run's caches.  Also recorded: paths,
branch sites and instructions executed, summed over the object's programs, and the CPU time
(`cpu_s`, process time) split by phase (`phases_cpu_s`, see PHASES).  Programs in
sections of other attach types (fentry/, kprobe/, ...) are skipped; `unknown` (legacy
names such as `prog`) are analysed.  An exception, a crash or a timeout is reported for
its object and counted, and the bench goes on (a timed-out object's RSS is what it had
reached when killed, so the RSS target is then "unknown" unless already missed).
Targets (issue 14, on the whole analysis): median < 0.3 s per object, max < 5 s, peak RSS
< 1 GiB, and no path left unknown because a value grew too large (`term_size_unknown`).

    .venv/bin/python bench/analyze.py [--repeat 3] [--filter SUBSTRING] [--timeout 120]
                                      [--json bench/results/analyze-<date>.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import corpus  # noqa: E402
from analyzer import fields  # noqa: E402
from analyzer.classify import classes  # noqa: E402
from analyzer.exploration import UNKNOWN  # noqa: E402
from analyzer.explore import Options, explore  # noqa: E402
from analyzer.report import analysis_json  # noqa: E402
from lifter.program import load_object  # noqa: E402

# `attach` is "unknown" for every non-XDP section, so libbpf's other SEC() prefixes are
# excluded by name.
TARGETS = {"median_s": 0.3, "max_s": 5.0, "rss_mib": 1024.0}
#: How a path cut because a value grew too large says so (the issue's "values too large to
#: track exactly"); the target is none.
TERM_SIZE = "too large"
#: The phases of the whole analysis whose CPU time is split (`phases_cpu_s`): load + explore,
#: the decision classes (map-use proofs of mapuse.py and classify.py: `classes`, which the report
#: reads memoised), decoding path conditions (fields.Decoder.render, inside the report) and the
#: rest of the report (analysis_json's own work: instruction ranges, lines, conditions printed).
PHASES = ("explore", "classify", "decode", "report")


class _DecodeClock:
    """CPU seconds spent in fields.Decoder.render (wrapped for the bench's process only)."""

    def __init__(self):
        self.seconds = 0.0
        render = fields.Decoder.render

        def timed(decoder, *args, **kwargs):
            t = time.process_time()
            try:
                return render(decoder, *args, **kwargs)
            finally:
                self.seconds += time.process_time() - t

        fields.Decoder.render = timed


def run_one(path: Path, repeat: int) -> dict:
    """Child side (`--one`): measure one object, return the row printed as JSON."""
    row = {"object": os.path.relpath(path, ROOT), "rss_base_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    try:
        row["bytes"] = path.stat().st_size
        times, explore_times, cpu = [], [], {k: [] for k in ("total", *PHASES)}
        clock = _DecodeClock()
        for _ in range(repeat):
            start, cpu0 = time.perf_counter(), time.process_time()
            obj = load_object(path)
            progs = [(p, explore(obj, p, Options())) for p in obj.programs if p.is_xdp]
            explore_times.append(time.perf_counter() - start)
            cpu1 = time.process_time()
            for _, e in progs:
                classes(e)
            cpu2, decoded = time.process_time(), clock.seconds
            for _, e in progs:
                analysis_json(e)
            times.append(time.perf_counter() - start)
            cpu3 = time.process_time()
            decode = clock.seconds - decoded
            for k, v in zip(("total", *PHASES), (cpu3 - cpu0, cpu1 - cpu0, cpu2 - cpu1, decode, cpu3 - cpu2 - decode)):
                cpu[k].append(v)
        row["programs"] = [
            {
                "name": p.name,
                "section": p.section,
                "paths": len(e.paths),
                "truncated": sum(1 for q in e.paths if q.truncated),
                "sites": len(e.sites),
                "insns_executed": e.insns_executed,
            }
            for p, e in progs
        ]
        row["skipped"] = [f"{p.name} ({p.section})" for p in obj.programs if not p.is_xdp]
        for key in ("paths", "truncated", "sites", "insns_executed"):
            row[key] = sum(p[key] for p in row["programs"])
        row["unknown"] = sum(1 for _, e in progs for q in e.paths if q.verdict == UNKNOWN)
        row["term_size_unknown"] = sum(1 for _, e in progs for q in e.paths if q.truncated and TERM_SIZE in q.truncated)
        row.update(
            median_s=statistics.median(times),
            min_s=min(times),
            explore_s=statistics.median(explore_times),
            cpu_s=statistics.median(cpu["total"]),
            phases_cpu_s={k: statistics.median(cpu[k]) for k in PHASES},
        )
    except Exception as exc:  # noqa: BLE001 - reported per object
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc(limit=-3)
    row["rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return row


def measure(path: Path, repeat: int, timeout: float) -> dict:
    """Parent side: run `--one` in a fresh interpreter, parse its JSON line."""
    rel = os.path.relpath(path, ROOT)
    cmd = [sys.executable, __file__, "--one", str(path), "--repeat", str(repeat)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # reaped by wait4 for its rusage: the peak RSS reached so far
        _, proc.returncode, usage = os.wait4(proc.pid, 0)
        proc.communicate()
        return {"object": rel, "error": f"timeout after {timeout:g} s", "timeout": True, "rss_kib": usage.ru_maxrss}
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = err.strip().splitlines()[-1:] or ["no output"]
        return {"object": rel, "error": f"exit {proc.returncode}: {tail[0]}"}


def pick_objects(substring: str | None) -> list[Path]:
    objects = sorted(corpus.built_objects() + corpus.external_objects())
    return [p for p in objects if not substring or substring in os.path.relpath(p, ROOT)]


def summarize(rows: list[dict], repeat: int) -> dict:
    ok = sorted((r for r in rows if "error" not in r), key=lambda r: r["median_s"])
    times = [r["median_s"] for r in ok]
    timeouts = sum(1 for r in rows if r.get("timeout"))
    with_rss = [r for r in rows if "rss_kib" in r]
    top_rss = max(with_rss, key=lambda r: r["rss_kib"], default=None)
    top_paths = max(ok, key=lambda r: r["paths"], default=None)
    explore = sorted(r["explore_s"] for r in ok)
    s = {
        "objects": len(rows),
        "errors": len(rows) - len(ok),
        "timeouts": timeouts,
        "repeat": repeat,
        "median_s": statistics.median(times) if times else None,
        "p90_s": times[math.ceil(0.9 * len(times)) - 1] if times else None,
        "max_s": times[-1] if times else None,
        "max_object": ok[-1]["object"] if ok else None,
        "explore_median_s": statistics.median(explore) if explore else None,
        "explore_p90_s": explore[math.ceil(0.9 * len(explore)) - 1] if explore else None,
        "explore_max_s": explore[-1] if explore else None,
        "unknown_paths": sum(r["unknown"] for r in ok),
        "term_size_unknown_paths": sum(r["term_size_unknown"] for r in ok),
        "max_paths": top_paths and top_paths["paths"],
        "max_paths_object": top_paths and top_paths["object"],
        "cpu_median_s": statistics.median(r["cpu_s"] for r in ok) if ok else None,
        "cpu_max_s": max((r["cpu_s"] for r in ok), default=None),
        "phases_cpu_s": {
            k: {
                "sum": sum(r["phases_cpu_s"][k] for r in ok),
                "median": statistics.median(r["phases_cpu_s"][k] for r in ok) if ok else None,
                "max": max((r["phases_cpu_s"][k] for r in ok), default=None),
            }
            for k in PHASES
        },
        "max_rss_mib": top_rss and top_rss["rss_kib"] / 1024,
        "max_rss_object": top_rss and top_rss["object"],
        "python": sys.version.split()[0],
    }
    s["targets"] = {
        "median < 0.3 s": None if not times else s["median_s"] < TARGETS["median_s"],
        "max < 5 s": s["max_s"] is not None and s["max_s"] < TARGETS["max_s"] and not timeouts,
        "RSS < 1 GiB": s["max_rss_mib"] is not None and s["max_rss_mib"] < TARGETS["rss_mib"],
        "0 unknown paths from term size": None if not ok else s["term_size_unknown_paths"] == 0,
    }
    if timeouts and s["targets"]["RSS < 1 GiB"]:  # a killed object's RSS is a lower bound
        s["targets"]["RSS < 1 GiB"] = None
    return s


def report(rows: list[dict], summary: dict) -> None:
    ok = sorted((r for r in rows if "error" not in r), key=lambda r: -r["median_s"])
    cpu = " ".join(f"{k[:8]:>8}" for k in PHASES)
    print(f"{'total s':>8} {'explore':>8} {'paths':>6} {'unkn':>5} {'sites':>5} {'RSS MiB':>7} | CPU s {cpu}  object")
    for r in ok[:15]:
        split = " ".join(f"{r['phases_cpu_s'][k]:8.3f}" for k in PHASES)
        print(
            f"{r['median_s']:8.3f} {r['explore_s']:8.3f} {r['paths']:6d} {r['unknown']:5d} {r['sites']:5d} "
            f"{r['rss_kib'] / 1024:7.1f} |       {split}  {r['object']}"
        )
    for r in rows:
        if r.get("skipped"):
            print(f"skipped in {r['object']}: {', '.join(r['skipped'])}")
    for r in rows:
        if "error" in r:
            print(f"ERROR {r['object']}: {r['error']}")
    print(json.dumps(summary, indent=2))
    for name, met in summary["targets"].items():
        state = {True: "met", False: "MISSED", None: f"unknown ({summary['errors']} errors)"}
        print(f"target {name}: {state[met]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--filter", metavar="SUBSTRING", help="only objects whose path contains it")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per object subprocess")
    ap.add_argument(
        "--json", type=Path, default=ROOT / "bench" / "results" / f"analyze-{time.strftime('%Y-%m-%d')}.json"
    )
    ap.add_argument("--one", type=Path, metavar="PATH", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.repeat)))
        return 0
    objects = pick_objects(args.filter)
    if not objects:
        print("no objects: run `make corpus external` first (or check --filter)", file=sys.stderr)
        return 2
    rows = []
    for i, path in enumerate(objects, 1):
        rows.append(measure(path, args.repeat, args.timeout))
        r = rows[-1]
        status = (
            r["error"] if "error" in r else f"{r['median_s']:.3f} s (explore {r['explore_s']:.3f} s) {r['paths']} paths"
        )
        print(f"[{i}/{len(objects)}] {r['object']}: {status}", file=sys.stderr, flush=True)
    summary = summarize(rows, args.repeat)
    report(rows, summary)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"summary": summary, "objects": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
