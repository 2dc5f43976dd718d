"""Counterexamples and suggestions (rules/counterexample.py `examples`) alone, per object.

Issue 14: counterexamples + suggestions < 0.5 s per xdp-filter object. Each object is
explored, synthesized and accounted for (untimed), then `examples` runs on that state as
`rules` runs it (once, cold: its caches are the command's); its CPU time (z3 runs in this
process) and wall time are recorded with the load average, and the examples themselves
(kind, frame hex, path taken, verdict, suggestion) so two checkouts' outputs can be compared.
Repeats rebuild the state each time; medians are reported.

    .venv/bin/python bench/counterexamples.py [--repeat 3] [--code DIR] [--json FILE] OBJ...

--code runs another checkout's code (e.g. /work/main) with the same measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def measure(path: Path, repeat: int) -> dict:
    from analyzer.classify import classes
    from analyzer.explore import explore
    from lifter.program import load_object
    from rules.counterexample import examples
    from rules.reasons import account
    from rules.ruleset import build

    obj = load_object(path)
    cpu, wall, found = [], [], {}
    for _ in range(repeat):
        e = explore(obj, obj.programs[0])
        rs = build(e, ())
        rs.finish("eth0", "skip_sw")
        fates = account(e, rs, classes(e)[1])
        t, c = time.perf_counter(), time.process_time()
        found = examples(rs, fates)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
    return {
        "object": str(path),
        "load": [round(x, 2) for x in os.getloadavg()],
        "cpu_seconds": round(statistics.median(cpu), 3),
        "cpu_runs": [round(x, 3) for x in cpu],
        "seconds": round(statistics.median(wall), 3),
        "examples": {
            str(pid): [ex.kind, ex.frame.hex(), ex.other, ex.other_verdict, ex.suggestion]
            for pid, ex in sorted(found.items())
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("objects", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--code", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    rows = []
    for path in args.objects:
        row = measure(path.resolve(), args.repeat)
        rows.append(row)
        sug = sum(1 for v in row["examples"].values() if v[4])
        print(
            f"{path.name}: examples {row['cpu_seconds']} s CPU (runs {row['cpu_runs']}), {row['seconds']} s wall, "
            f"{len(row['examples'])} examples, {sug} suggestions, load {row['load']}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
