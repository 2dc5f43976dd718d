"""`xdp2tc rules --dev eth0` per object and Python hash seed for one tree, and the comparison of
two such records: what a change of speed or of iteration order must leave identical.

    record: bench/rules_outputs.py record TREE OUT.json [--seeds 0,1,2,3] [--objects GLOB...] [-j N]
    compare: bench/rules_outputs.py compare A.json B.json      (A, B: two records, e.g. base and new)
    seeds:   bench/rules_outputs.py seeds A.json               (one record: same output on every seed?)

`record` runs `python -m offload.cli rules OBJ --dev eth0` in TREE (its own code first on
sys.path) with PYTHONHASHSEED fixed per run, and stores per (object, seed) the exit code, the
whole stdout, its filter lines (`tc filter add ...`) and the child's CPU seconds (user + sys,
resource.getrusage). Objects default to corpus/build/clang/*.o and corpus/external/**/*.o.
`compare` reports, per object and seed, whether exit code, filter lines and whole stdout
agree; `seeds` whether one tree's outputs agree across seeds. Exit 1 when something differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable  # the interpreter this bench runs under (the venv's), for every tree
DEFAULT_GLOBS = ("corpus/build/clang/*.o", "corpus/external/**/*.o")


def filter_lines(stdout: str) -> list[str]:
    """The lines of the script that install filters (what a change must not alter): `filter
    add ...` in the tc -batch script (`tc filter ...` too, should a script spell it so)."""
    return [line for line in stdout.splitlines() if line.lstrip().startswith(("filter ", "tc filter "))]


def timed_run(tree: Path, obj: str, seed: str, extra: list[str], z3_work: bool = False) -> dict:
    """One `rules` run in its own process: exit code, stdout, filter lines, the child's CPU
    seconds; with `z3_work`, run through bench/z3work.py and add z3's work count ("z3_work")."""
    env = dict(os.environ, PYTHONHASHSEED=seed)
    start_wall = time.perf_counter()
    launch = [PYTHON, str(ROOT / "bench" / "z3work.py")] if z3_work else [PYTHON, "-m"]
    proc = subprocess.Popen(
        [*launch, "offload.cli", "rules", obj, "--dev", "eth0", *extra],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # read both pipes without reaping, then reap with wait4 to get this child's own rusage
    with ThreadPoolExecutor(2) as pool:
        fo = pool.submit(proc.stdout.read)
        fe = pool.submit(proc.stderr.read)
        out, err = fo.result(), fe.result()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start_wall
    work = [line.split()[1] for line in err.splitlines() if line.startswith("z3-work ")]
    return {
        "object": obj,
        "seed": seed,
        "rc": proc.returncode,
        "stdout": out,
        "stderr_tail": err[-400:],
        "filters": filter_lines(out),
        "cpu": round(usage.ru_utime + usage.ru_stime, 3),
        "wall": round(wall, 3),
        **({"z3_work": int(work[-1]) if work else None} if z3_work else {}),
    }


def objects(tree: Path, globs: list[str]) -> list[str]:
    found: list[str] = []
    for g in globs:
        found += sorted(str(p.relative_to(tree)) for p in tree.glob(g) if p.is_file())
    return found


def record(args) -> int:
    tree = Path(args.tree).resolve()
    objs = objects(tree, args.objects or list(DEFAULT_GLOBS))
    seeds = args.seeds.split(",")
    jobs = [(o, s) for o in objs for s in seeds]
    rows = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(lambda j: timed_run(tree, j[0], j[1], args.extra or []), jobs):
            rows.append(row)
            print(f"{row['object']:<55} seed {row['seed']} rc {row['rc']} cpu {row['cpu']:.2f}", flush=True)
    Path(args.out).write_text(json.dumps({"tree": str(tree), "load": os.getloadavg(), "rows": rows}, indent=1) + "\n")
    return 0


def compare(args) -> int:
    a = {(r["object"], r["seed"]): r for r in json.loads(Path(args.a).read_text())["rows"]}
    b = {(r["object"], r["seed"]): r for r in json.loads(Path(args.b).read_text())["rows"]}
    bad = 0
    same_stdout = 0
    for key in sorted(a.keys() & b.keys()):
        ra, rb = a[key], b[key]
        diffs = [k for k in ("rc", "filters") if ra[k] != rb[k]]
        if ra["stdout"] == rb["stdout"]:
            same_stdout += 1
        if diffs:
            bad += 1
            print(f"DIFFERS {key[0]} seed {key[1]}: {', '.join(diffs)}")
    print(
        f"{len(a.keys() & b.keys())} runs compared: {bad} differ in exit code or filter lines; "
        f"{same_stdout} with byte-identical stdout; "
        f"only in A: {len(a.keys() - b.keys())}, only in B: {len(b.keys() - a.keys())}"
    )
    return 1 if bad else 0


def seeds(args) -> int:
    rows = json.loads(Path(args.a).read_text())["rows"]
    per: dict[str, list[dict]] = {}
    for r in rows:
        per.setdefault(r["object"], []).append(r)
    bad = 0
    for obj, rs in sorted(per.items()):
        outs = {(r["rc"], r["stdout"]) for r in rs}
        if len(outs) > 1:
            bad += 1
            filt = len({tuple(r["filters"]) for r in rs})
            print(
                f"SEED-DEPENDENT {obj}: {len(outs)} distinct outputs over {len(rs)} seeds "
                f"({filt} distinct filter lists)"
            )
    print(f"{len(per)} objects: {bad} with output depending on the hash seed")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("tree")
    r.add_argument("out")
    r.add_argument("--seeds", default="0")
    r.add_argument("--objects", nargs="*")
    r.add_argument("--extra", nargs="*", help="more arguments to rules")
    r.add_argument("-j", "--jobs", type=int, default=1)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    s = sub.add_parser("seeds")
    s.add_argument("a")
    args = ap.parse_args()
    return {"record": record, "compare": compare, "seeds": seeds}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
