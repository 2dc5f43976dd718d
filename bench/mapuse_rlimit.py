"""What the map-use proofs (analyzer/mapuse.py) cost z3 per query, to choose PROOF_RLIMIT:
per object and program, the number of proof queries and the largest CPU time and z3
resource count (`rlimit count` consumed) of one, each asked without a limit.

    bench/mapuse_rlimit.py [OBJ ...]     (default: the corpus objects that write maps and
                                          Debian's xdp-filter objects)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import z3

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer import mapuse  # noqa: E402
from analyzer.exploration import Options  # noqa: E402
from analyzer.explore import explore  # noqa: E402
from lifter.program import load_object  # noqa: E402
from offload.programs import device_programs  # noqa: E402

WRITERS = (
    "atomics counted_blacklist flag_counter globals hash_counter rate_limiter syn_tracker thesis_drop_count".split()
)


def _count(s: z3.Solver) -> int:
    st = s.statistics()
    return st.get_key_value("rlimit count") if "rlimit count" in st.keys() else 0


def main() -> int:
    objs = sys.argv[1:] or [str(ROOT / f"corpus/build/clang/{w}.o") for w in WRITERS] + sorted(
        str(p) for p in (ROOT / "corpus/external").rglob("xdpfilt_*.o")
    )
    rows: list[tuple[float, int]] = []

    def unsat(*constraints, timeout_ms=None):
        s = z3.Solver()
        s.add(*constraints)
        before, t = _count(s), time.process_time()
        r = s.check()
        rows.append((time.process_time() - t, _count(s) - before))  # the count is the process's
        return r == z3.unsat

    mapuse._unsat = unsat
    worst = 0
    for f in objs:
        obj = load_object(f)
        for prog in device_programs(obj, None, per_program_output=True):
            rows.clear()
            mapuse.map_uses(explore(obj, prog, Options()))
            top = max(rows, default=(0.0, 0), key=lambda r: r[1])
            worst = max(worst, top[1])
            print(f"{Path(f).name:<28} {prog.name:<24} queries {len(rows):>3}  max {top[0]:.3f} s  {top[1]:>9,} rlimit")
    print(f"largest: {worst:,} (PROOF_RLIMIT {mapuse.PROOF_RLIMIT:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
