"""The explorer's CPU time on one object for a fixed amount of work, and a digest of what it
found (to show that a speed change leaves the exploration identical).

    bench/explore_cpu.py OBJ [--max-insns N] [--repeat R] [--tree DIR]

Each run is a fresh subprocess of DIR's code (default: this tree) running `load_object` +
`explore` with `Options(max_insns=N)` (a budget in instructions, not seconds: the same work
whatever the machine's load); it reports the process CPU time of `explore` alone, the
instructions executed, paths, merges (definitions), and a digest of every path's verdict,
literals and cut reason and of every literal's definition. Prints each run and the median
CPU time; exit 1 when the runs' digests differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable  # the interpreter this bench runs under (the venv's), for every tree

CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, ".")
from analyzer.explore import explore
from analyzer.exploration import Options
from lifter.program import load_object
from offload.programs import device_programs
obj = load_object(sys.argv[1])
prog = device_programs(obj, None, per_program_output=False)[0]
t = time.process_time()
e = explore(obj, prog, Options(max_insns=int(sys.argv[2])))
cpu = time.process_time() - t
h = hashlib.sha256()
for p in e.paths:
    h.update(f"{p.id} {p.verdict} {p.truncated} {[x.sexpr() for x in p.literals]}\n".encode())
for lit, cond in e.definitions:
    h.update(f"{lit.sexpr()}={cond.sexpr()}\n".encode())
print(json.dumps({"cpu": cpu, "insns": e.insns_executed, "paths": len(e.paths),
                  "definitions": len(e.definitions), "digest": h.hexdigest()[:16]}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("obj")
    ap.add_argument("--max-insns", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", default=str(ROOT))
    args = ap.parse_args()
    obj = str(Path(args.obj).resolve())
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run(
            [PYTHON, "-c", CHILD, obj, str(args.max_insns)], cwd=args.tree, capture_output=True, text=True, check=True
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), flush=True)
    digests = {r["digest"] for r in runs}
    median = statistics.median(r["cpu"] for r in runs)
    print(f"median explore CPU {median:.2f} s over {len(runs)} runs; digests {digests}")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
