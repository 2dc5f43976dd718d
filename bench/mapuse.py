"""Map-use classification and reason accounting time (analyzer/mapuse.py, analyzer/classify.py,
rules/reasons.py) on the Debian xdp-filter objects (issue 14: well under 1 s together).

Per object: the exploration and the rule set are built once (not timed); then, CPU time of
`classes` (the map proofs of mapuse.py and the branch classes) and of `reasons.account` on a
fresh copy of what they memoise on the exploration. The first run (what a command pays) and
the median of REPEAT further runs are printed; the outputs of every run must be equal.

    .venv/bin/python bench/mapuse.py [--repeat 3] [--objects xdpfilt_dny_udp,...] [--no-rules]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import corpus  # noqa: E402
from analyzer.classify import classes  # noqa: E402
from analyzer.explore import explore  # noqa: E402
from lifter.program import load_object  # noqa: E402
from rules import ruleset  # noqa: E402
from rules.reasons import account  # noqa: E402

#: Attributes of an Exploration that memoise the work timed here (reset before each run).
MEMOS = ("map_use", "classes")


def _runs(fn, repeat: int) -> tuple[float, float, list]:
    """(first run's CPU s, median of `repeat` more, their results)."""
    times, results = [], []
    for _ in range(1 + repeat):
        t = time.process_time()
        results.append(fn())
        times.append(time.process_time() - t)
    return times[0], statistics.median(times[1:]) if repeat else times[0], results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--objects", default="xdpfilt_dny_udp,xdpfilt_alw_tcp,xdpfilt_alw_all")
    ap.add_argument("--no-rules", action="store_true", help="time the classification only")
    args = ap.parse_args()
    wanted = set(args.objects.split(","))
    for path in [p for p in corpus.external_objects() if p.stem in wanted]:
        obj = load_object(path)
        for prog in [p for p in obj.programs if p.is_xdp]:
            e = explore(obj, prog)

            def classify(e=e):
                for m in MEMOS:
                    setattr(e, m, None)
                branches, maps = classes(e)
                return [(b.cls, b.detail) for b in branches], maps, e.map_use

            first, median, out = _runs(classify, args.repeat)
            assert all(o == out[0] for o in out), "classification differs between runs"
            line = f"{path.stem} {prog.name}: {len(e.paths)} paths, classes first {first:.2f} s median {median:.2f} s"
            if not args.no_rules:
                rs = ruleset.build(e, ())

                def fates(e=e, rs=rs):
                    return [(f.path, f.offloaded, f.reason) for f in account(e, rs, rs.synth.maps)]

                first, median, out = _runs(fates, args.repeat)
                assert all(o == out[0] for o in out), "fates differ between runs"
                line += f", account first {first:.2f} s median {median:.2f} s"
            print(line, flush=True)


if __name__ == "__main__":
    main()
