"""Where the explorer's solver time goes: every feasibility check of one exploration, with
its answer, its CPU time and the number of branch-literal definitions the solver held then.

Prints, per object, the checks (sat/unsat and their CPU seconds, against the exploration's
total CPU time) and the mean CPU time of a check per tenth of the run, with the definitions
held: a check's cost grows with the definitions asserted so far (issue 14: on xdp-filter
~0.5 ms with 10, ~20 ms with 250), which every satisfiable check pays for in full.

    .venv/bin/python bench/explore_checks.py [--objects xdpfilt_alw_tcp,or_stress_k48]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import corpus  # noqa: E402
from analyzer import explore as explore_mod  # noqa: E402
from analyzer.exploration import Options  # noqa: E402
from lifter.program import load_object  # noqa: E402


def measure(path: Path) -> None:
    rows: list[tuple[int, str, float]] = []  # (definitions held, answer, CPU s)
    current: list = []
    check, init = explore_mod.check, explore_mod.Explorer.__init__

    def timed(solver, assumptions):
        t = time.process_time()
        result = check(solver, assumptions)
        rows.append((len(current[-1].definitions), str(result), time.process_time() - t))
        return result

    def remembered(self, *args, **kwargs):
        init(self, *args, **kwargs)
        current.append(self)

    explore_mod.check, explore_mod.Explorer.__init__ = timed, remembered
    try:
        obj = load_object(path)
        for prog in [p for p in obj.programs if p.is_xdp]:
            rows.clear()
            t = time.process_time()
            e = explore_mod.explore(obj, prog, Options())
            total = time.process_time() - t
            by = {a: [r[2] for r in rows if r[1] == a] for a in ("sat", "unsat", "unknown")}
            parts = ", ".join(f"{len(v)} {a} {sum(v):.2f} s" for a, v in by.items() if v)
            print(f"{path.stem}:{prog.name}: explore {total:.2f} s CPU, {len(e.paths)} paths, checks: {parts}")
            step = max(1, len(rows) // 10)
            for i in range(0, len(rows), step):
                chunk = rows[i : i + step]
                mean = 1000 * sum(r[2] for r in chunk) / len(chunk)
                print(f"  checks {i:4d}-{i + len(chunk) - 1:4d}: {chunk[0][0]:4d} definitions, {mean:6.2f} ms/check")
    finally:
        explore_mod.check, explore_mod.Explorer.__init__ = check, init


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--objects", default="xdpfilt_alw_tcp,xdpfilt_dny_all,or_stress_k48")
    args = ap.parse_args()
    wanted = args.objects.split(",")
    for path in sorted(corpus.built_objects() + corpus.external_objects()):
        if path.stem in wanted and ("clang/" in str(path) or "external" in str(path)):
            measure(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
