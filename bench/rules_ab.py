"""`xdp2tc rules` CPU of two trees on the same objects, runs interleaved (A, B, A, B, ...).

    .venv/bin/python bench/rules_ab.py BASE_TREE NEW_TREE OBJ... [--repeat 3] [--json OUT]

Each run is a fresh process (bench/rules_outputs.py `timed_run`: the child's user + sys CPU,
PYTHONHASHSEED 0), so both trees pay the same imports; interleaving spreads a load that
changes during the measurement over both. Printed per object: the median CPU of each tree,
the runs, the ratio NEW/BASE, the median wall-clock seconds of each (what a user waits for:
a tree that works on both cores, rules/ahead.py, spends more CPU than it takes wall time;
the CPU counts its reaped children too), and whether the two trees' stdout was the same;
the load average before and after. `--z3-work`: runs go through bench/z3work.py, and z3's work count
of each tree (the same on every run of a tree, whatever the load) and its ratio are printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rules_outputs import timed_run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("objects", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--z3-work", action="store_true", help="also count z3's work (bench/z3work.py)")
    args = ap.parse_args()
    rows = []
    load = [os.getloadavg()]
    for obj in args.objects:
        cpu: dict[str, list[float]] = {"base": [], "new": []}
        wall: dict[str, list[float]] = {"base": [], "new": []}
        out: dict[str, set[str]] = {"base": set(), "new": set()}
        work: dict[str, set[int | None]] = {"base": set(), "new": set()}
        for _ in range(args.repeat):
            for name, tree in (("base", args.base), ("new", args.new)):
                run = timed_run(tree.resolve(), obj, "0", [], z3_work=args.z3_work)
                cpu[name].append(run["cpu"])
                wall[name].append(run["wall"])
                work[name].add(run.get("z3_work"))
                out[name].add(run["stdout"])
        a, b = statistics.median(cpu["base"]), statistics.median(cpu["new"])
        same = out["base"] == out["new"] and len(out["base"]) == 1
        wa_, wb_ = statistics.median(wall["base"]), statistics.median(wall["new"])
        row = {"object": obj, "base": cpu["base"], "new": cpu["new"], "ratio": b / a, "same_stdout": same}
        row["wall"] = {"base": wall["base"], "new": wall["new"], "ratio": wb_ / wa_}
        runs = " ".join(f"{x:.2f}" for x in cpu["base"]) + " | " + " ".join(f"{x:.2f}" for x in cpu["new"])
        line = (
            f"{Path(obj).name:28s} {a:6.2f} {b:6.2f}  ratio {b / a:.3f}  [{runs}]  "
            f"wall {wa_:.2f} {wb_:.2f} ratio {wb_ / wa_:.3f}{'  same stdout' if same else ''}"
        )
        if args.z3_work:
            row["z3_work"] = {name: sorted(w, key=str) for name, w in work.items()}
            wa, wb = (max(w, key=lambda x: x or 0) for w in work.values())
            line += f"  z3 work {wa} -> {wb}" + (f" ({wb / wa:.3f})" if wa and wb else "")
        rows.append(row)
        print(line)
    load.append(os.getloadavg())
    print("load before/after:", " ".join(f"{x:.2f}" for x in load[0]), "/", " ".join(f"{x:.2f}" for x in load[1]))
    if args.json:
        args.json.write_text(json.dumps({"base": str(args.base), "new": str(args.new), "load": load, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
