"""bench/z3work.py: the z3 work count it prints is the sum of every context's resource counter.

The module run under it reports its contexts' own counters (read from its solvers' statistics
after its last check); the launcher, which only sees the checks go by, must print their sum,
the same on a second run - also where a context is made at the address of a freed one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "z3work.py"

MODULE = """
import gc
import z3

def last(s):
    return int(s.statistics().get_key_value("rlimit count"))

counts = []
for i in range(5):  # contexts one after the other, each doing more work than the last
    ctx = z3.Context()
    x, y = z3.BitVec("x", 32, ctx), z3.BitVec("y", 32, ctx)
    a = z3.Solver(ctx=ctx)
    a.add(x * y == 1234567 + i, x > 3, y > 3)
    a.check()
    b = z3.Solver(ctx=ctx)
    for k in range(i + 1):
        b.add(x * x == y + 77 + k * y)
        b.check()
    counts.append(last(b))
    del a, b, x, y, ctx  # freed: the next context may be made at its address
    gc.collect()
print(sum(counts))
"""


def _run(tmp_path: Path) -> tuple[int, int]:
    (tmp_path / "twocontexts.py").write_text(MODULE)
    out = subprocess.run(
        [sys.executable, str(BENCH), "twocontexts"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    work = [int(line.split()[1]) for line in out.stderr.splitlines() if line.startswith("z3-work ")]
    assert len(work) == 1, out.stderr
    return int(out.stdout), work[0]


def test_work_is_the_sum_over_contexts(tmp_path):
    own, work = _run(tmp_path)
    assert own > 0 and work == own
    assert _run(tmp_path) == (own, work)
