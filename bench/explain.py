"""The script phase of `xdp2tc rules` (rules/output.py `tc_script`): reasons, counterexamples,
suggestions and the decoded conditions, in CPU seconds, split by part (issue 14).

Each run is a fresh process (`--tree`'s code: another worktree as a baseline) that explores
(with witnesses, as `rules` does: the decoder refutes claims on them) and builds the rules
untimed, then prints the tc script under no assumption as the CLI does,
timing its parts with wrappers: `account` (the reasons, keys of map-dependent paths and the
IP-options facts included), `examples` (counterexamples; `suggest` the suggestions within
it), the decoding of conditions (`render`: every Decoder.render, wherever it runs), and the
synthesis work the script asks for (`extract`: Synthesizer.extract_all, the suggestions'
re-extractions under an assumption and the examples' blocks; `prove`: Synthesizer.prove,
the suggestions' shield loops). A
fresh process per run: the decoder's memo of z3 answers (analyzer/fields.py `_ANSWERS`)
would make a second run in the same process cheaper than the command ever is. Medians over
`--repeat` runs; process CPU time (z3 runs in the process), so a loaded machine stretches it
little.

    .venv/bin/python bench/explain.py [--repeat 3] [--only STEM]... [--tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The objects timed by default: the xdp-filter objects and the 48-OR stress programs.
DEFAULT = (
    "xdpfilt_alw_tcp",
    "xdpfilt_dny_udp",
    "xdpfilt_alw_ip",
    "xdpfilt_dny_all",
    "or_stress_k48",
    "or_direct_udp_k48",
)

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import corpus
import analyzer.fields as fields
import rules.counterexample as counterexample
import rules.output as output
import rules.synthesis as synthesis
from analyzer.exploration import Options
from analyzer.explore import explore
from lifter.program import load_object
from rules.ruleset import build

stem = sys.argv[2]
found = [*(corpus.EXTERNAL_DIR / "libxdp1").glob(stem + ".o"), *(corpus.BUILD_DIR / "clang").glob(stem + ".o")]
if not found:
    sys.exit(stem + ": not built (make corpus external)")
path = found[0]
cpu = {"account": 0.0, "examples": 0.0, "suggest": 0.0, "render": 0.0, "extract": 0.0, "prove": 0.0}

def timed(owner, name, label):
    f = getattr(owner, name)
    def g(*a, **k):
        c = time.process_time()
        try:
            return f(*a, **k)
        finally:
            cpu[label] += time.process_time() - c
    setattr(owner, name, g)

timed(output, "account", "account")
timed(output, "examples", "examples")
timed(counterexample, "_suggest", "suggest")
timed(fields.Decoder, "render", "render")
timed(synthesis.Synthesizer, "extract_all", "extract")
timed(synthesis.Synthesizer, "prove", "prove")
obj = load_object(path)
e = explore(obj, obj.programs[0], Options(witnesses=True))  # as `rules` explores: the decoder refutes on them
rs = build(e, ())
for k in cpu:
    cpu[k] = 0.0
c = time.process_time()
output.tc_script(e, rs, "eth0", "skip_sw")
cpu["script"] = time.process_time() - c
print(json.dumps(cpu))
"""


def run(tree: Path, stem: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), stem],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", metavar="STEM", action="append", help="only these objects (repeatable)")
    ap.add_argument("--tree", default=str(ROOT), help="the worktree whose code runs (default: this one)")
    args = ap.parse_args()
    tree = Path(args.tree).resolve()
    for stem in args.only or DEFAULT:
        runs = [run(tree, stem) for _ in range(args.repeat)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"{stem:<20} script {med['script']:6.2f} s CPU (runs "
            + " ".join(f"{r['script']:.2f}" for r in runs)
            + f"): account {med['account']:.2f}, examples {med['examples']:.2f} (suggest {med['suggest']:.2f}), "
            f"render {med['render']:.2f}, extract {med['extract']:.2f}, prove {med['prove']:.2f}; "
            f"load {os.getloadavg()[0]:.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
