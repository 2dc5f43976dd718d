"""Header-field decoding time (analyzer/fields.py) and counterexample time
(rules/counterexample.py) on the Debian xdp-filter objects, the slowest seen (issue 11).

Per object: decoding every path's condition with one Decoder (what `analyze`, `rules` and
`check` print), and the counterexamples of a `rules` run under --assume no-ip-options (the
rules build itself is not timed). Medians of REPEAT runs of process CPU time (the machine is
shared) after one untimed warm-up; the exploration is done once. Also counts renderings
longer than one line (must be 0) and the z3 checks the decoding made (each rendering asks
in a z3 context of its own, nothing is kept between renderings: every run makes the same).
`--witnesses`: explore with witnesses and render each path with its own, as `rules` does
(fields.Decoder.render's `witness`: fewer z3 checks, the same texts).

    .venv/bin/python bench/fields.py [--repeat 3] [--objects xdpfilt_dny_all,...] [--witnesses]
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
from analyzer.exploration import Options  # noqa: E402
from analyzer.explore import explore  # noqa: E402
from analyzer.fields import Decoder  # noqa: E402
from lifter.program import load_object  # noqa: E402
from rules import ruleset  # noqa: E402
from rules.counterexample import examples  # noqa: E402
from rules.reasons import account  # noqa: E402


def _median(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--objects", default="xdpfilt_dny_all,xdpfilt_dny_ip")
    ap.add_argument("--no-examples", action="store_true", help="time the decoding only")
    ap.add_argument("--witnesses", action="store_true", help="render each path with its exploration witness")
    args = ap.parse_args()
    wanted = set(args.objects.split(","))
    for path in [p for p in corpus.external_objects() if p.stem in wanted]:
        obj = load_object(path)
        for prog in [p for p in obj.programs if p.is_xdp]:
            e = explore(obj, prog, Options(witnesses=args.witnesses))
            texts: list[str] = []
            checks: list[int] = []

            def decode(e=e, texts=texts, checks=checks):
                d = Decoder(e.environment())
                texts[:] = [d.render(e.condition(p), witness=p.witness) for p in e.paths]
                checks.append(d.checks)

            t_fields = _median(decode, args.repeat)
            line = f"{path.stem} {prog.name}: {len(e.paths)} paths, fields {t_fields:.2f} s"
            line += f" (multi-line {sum(chr(10) in t for t in texts)}, z3 checks {checks[0]})"
            if not args.no_examples:
                rs = ruleset.build(e, ("no-ip-options",))

                def explain(rs=rs, e=e):
                    rs.examples = None
                    examples(rs, account(e, rs, rs.synth.maps))

                line += f", counterexamples {_median(explain, args.repeat):.2f} s"
            print(line, flush=True)


if __name__ == "__main__":
    main()
