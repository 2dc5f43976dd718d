"""The angr engine's time per program next to the z3 engine's (issue 16).

For every XDP program of the clang corpus build and Debian's objects (--toolchain all: the
gcc, clang-v4 and nobtf builds too; or those matching --filter): `explore` (z3) and
`explore_angr` (merged states, the default), each timed REPEAT times in this process after
one untimed warm-up of both (angr's import and z3's start-up are not per-program costs), the
median kept, with both engines' path counts and any budget the angr run hit; then, unless
--no-cross-check, the whole cross-check (both explorations, unmerged angr when it fits in
crosscheck.UNMERGED_STATES, plus the comparison; one run): its time, comparisons and
disagreements. A program past --timeout seconds is reported as such (the run goes on in a
child process that is killed). Results in bench/results/angr-<date>[-<filter>].json; the import time
of angr and the machine's load (`uptime`) are printed too.

    .venv/bin/python bench/engines.py [--repeat 3] [--filter SUBSTRING] [--toolchain clang|all]
        [--timeout 120] [--no-cross-check]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import corpus  # noqa: E402
from analyzer.explore import Options, explore  # noqa: E402
from lifter.program import load_object  # noqa: E402


def run_one(path: str, program: str, repeat: int, cross: bool) -> dict:
    from analyzer.angr_engine import explore_angr
    from analyzer.crosscheck import cross_check

    obj = load_object(path)
    prog = obj.program(program)
    explore(obj, prog, Options())
    explore_angr(obj, prog, Options())
    row = {"object": str(Path(path).relative_to(ROOT)), "program": program}
    engines = (
        ("z3", explore, Options()),
        ("angr", explore_angr, Options()),
        ("angr_unmerged", explore_angr, Options(merge=False)),  # the engine before merging (default Limits)
    )
    for engine, fn, options in engines:
        times, paths = [], 0
        for _ in range(repeat):
            start = time.perf_counter()
            e = fn(obj, prog, options)
            times.append(time.perf_counter() - start)
            paths = len(e.paths)
        row[engine] = {"median_s": statistics.median(times), "paths": paths}
        if e.budget is not None and e.budget.cut:
            row[engine]["cut"] = len(e.budget.cut)
    if cross:
        start = time.perf_counter()
        r = cross_check(obj, prog, Options()).report
        row["cross_check"] = {
            "s": time.perf_counter() - start,
            "disagreements": len(r.disagreements),
            "compared": r.z3_compared + r.angr_compared,
            "skipped": len(r.skipped),
            "angr_merged": r.angr_merged,
        }
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--filter", default="")
    ap.add_argument("--toolchain", choices=("clang", "all"), default="clang")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--no-cross-check", action="store_true")
    ap.add_argument("--one", nargs=2, metavar=("PATH", "PROGRAM"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(*args.one, args.repeat, not args.no_cross_check)))
        return 0
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import angr"], check=True, capture_output=True)
    import_s = time.perf_counter() - start
    print(f"python -c 'import angr': {import_s:.2f} s; load: {os.getloadavg()}")
    builds = ("clang", "gcc", "clang-v4", "nobtf") if args.toolchain == "all" else ("clang",)
    objs = [p for b in builds for p in sorted((corpus.BUILD_DIR / b).glob("*.o"))] + sorted(corpus.external_objects())
    rows = []
    print(
        f"{'object':<44} {'program':<22} {'z3 s':>7} {'paths':>5} {'angr s':>7} {'paths':>5} {'unmrg s':>7} "
        f"{'paths':>5}  {'cross s':>8} "
        f"{'cmp':>4} {'dis':>3}"
    )
    for path in objs:
        if args.filter not in str(path):
            continue
        for prog in load_object(path).programs:
            if not prog.is_xdp:
                continue
            cmd = [sys.executable, __file__, "--one", str(path), prog.name, "--repeat", str(args.repeat)]
            if args.no_cross_check:
                cmd.append("--no-cross-check")
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
                row = (
                    json.loads(out.stdout.strip().splitlines()[-1])
                    if out.returncode == 0
                    else {"object": str(path.relative_to(ROOT)), "program": prog.name, "error": out.stderr[-300:]}
                )
            except subprocess.TimeoutExpired:
                row = {
                    "object": str(path.relative_to(ROOT)),
                    "program": prog.name,
                    "error": f"over {args.timeout:.0f} s",
                }
            rows.append(row)
            if "error" in row:
                print(f"{row['object']:<44} {prog.name:<22} {row['error'].splitlines()[-1][:60]}")
                continue
            cc = ""
            if "cross_check" in row:
                c = row["cross_check"]
                cc = f"{c['s']:8.2f} {c['compared']:4} {c['disagreements']:3} {'merged' if c['angr_merged'] else ''}"
            print(
                f"{row['object']:<44} {prog.name:<22} {row['z3']['median_s']:7.3f} {row['z3']['paths']:5} "
                f"{row['angr']['median_s']:7.3f} {row['angr']['paths']:5} {row['angr_unmerged']['median_s']:7.3f} "
                f"{row['angr_unmerged']['paths']:5}{'*' if 'cut' in row['angr_unmerged'] else ' '} {cc}",
                flush=True,
            )
    ok = [r for r in rows if "error" not in r]
    if ok:
        print(
            f"median per program: z3 {statistics.median(r['z3']['median_s'] for r in ok):.3f} s, "
            f"angr {statistics.median(r['angr']['median_s'] for r in ok):.3f} s, angr unmerged "
            f"{statistics.median(r['angr_unmerged']['median_s'] for r in ok):.3f} s over {len(ok)} programs; "
            f"{len(rows) - len(ok)} failed or timed out"
        )
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "".join(c if c.isalnum() or c in "-_" else "_" for c in args.filter)
    out = out_dir / f"angr-{datetime.date.today().isoformat()}{'-' + suffix if suffix else ''}.json"
    out.write_text(json.dumps({"import_angr_s": import_s, "load": os.getloadavg(), "rows": rows}, indent=2))
    print(f"results in {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
