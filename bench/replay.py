"""CPU time of one concrete replay (the cross-check's mode "replay", issue 16): every z3
witness of a program run by the angr engine concretely, with one angr Project per program
reused across witnesses (the default) and with a new Project per witness (`--new-project`:
what the replay did before). Medians over --repeat runs of the whole replay; CPU seconds of
this process (`time.process_time`).

    .venv/bin/python bench/replay.py FILE.o... [--repeat 3] [--new-project]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.explore import Options, explore  # noqa: E402
from lifter.program import load_object  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--new-project", action="store_true")
    args = ap.parse_args()
    from analyzer import crosscheck
    from analyzer.angr_engine import Limits

    for f in args.files:
        obj = load_object(f)
        prog = obj.program()
        z3e = explore(obj, prog, Options())
        angre = crosscheck.angr_exploration(obj, prog, Options(), Limits(max_seconds=0.001))
        per = []
        for _ in range(args.repeat):
            check = crosscheck.CrossCheck(obj, prog, Options(), z3e, angre, mode="replay")
            if args.new_project:  # a new Project for every witness
                orig = check._replay

                def fresh(inp, expected, check=check, orig=orig):
                    check.project = None
                    return orig(inp, expected)

                check._replay = fresh
            for path in z3e.paths:
                check._check_z3_path(path)
            r = check.report
            per.append(r.replay_seconds / max(r.z3_replayed, 1))
        print(
            f"{f}: {r.z3_replayed} witnesses replayed, {len(r.disagreements)} disagreements; median CPU per "
            f"replay {1000 * statistics.median(per):.1f} ms ({'new' if args.new_project else 'one'} Project), "
            f"runs {[round(1000 * x, 1) for x in per]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
