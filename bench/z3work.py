"""Run a module as `python -m` would, and print how much work z3's solvers did in it.

    python bench/z3work.py offload.cli rules OBJ --dev eth0

CPU seconds on this VM move by ±20 % across hours and by 30-60 % when the other core is busy;
z3's resource counter ("rlimit count", the unit `rlimit` limits are given in) does not: the same
queries in the same order cost the same count on a loaded machine. So a change that makes z3
do less shows as a smaller count even where CPU medians cannot tell it from noise. (Python's
own work is not in it: compare CPU too.)

How: every solver check goes through `Z3_solver_check_assumptions` (z3.py's `Solver.check`,
analyzer/symbolic.py's `check`: both names are wrapped); after each one the solver's statistics
give its context's counter, which every solver of the context adds to and which only grows
while the context lives. The total is the sum over contexts of the last count seen. Contexts
are told apart by pointer, and a context made at an address an earlier one had (z3.py's
`Z3_mk_context_rc`, wrapped too) closes that one's count: without it the total depended on
which addresses malloc handed out (k48 measured 5.2-7.0 M).
Printed on stderr at exit as `z3-work N` (bench/rules_outputs.py `timed_run` reads it).
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys

import z3
from z3 import z3 as z3_api
from z3 import z3core

LINE = "z3-work"
_last: dict[int, int] = {}  # context pointer -> last count seen
_ended = [0]  # counts of contexts that ended (a lower count at the same pointer)


class _Context:
    """What z3.Statistics needs of a context: its pointer."""

    def __init__(self, ref):
        self._ref = ref

    def ref(self):
        return self._ref


def _count(ctx, solver) -> int:
    stats = z3.Statistics(z3core.Z3_solver_get_statistics(ctx, solver), _Context(ctx))
    return int(stats.get_key_value("rlimit count")) if "rlimit count" in stats.keys() else 0


def _counted(check):
    def run(ctx, solver, n, assumptions):
        answer = check(ctx, solver, n, assumptions)
        _last[int(ctx.value or 0)] = _count(ctx, solver)
        return answer

    return run


def _made(make):
    def run(conf):
        ctx = make(conf)
        _ended[0] += _last.pop(int(ctx.value or 0), 0)  # an ended context's address, reused
        return ctx

    return run


def total() -> int:
    """z3 work units of the checks so far."""
    return _ended[0] + sum(_last.values())


def main() -> None:
    counted = _counted(z3core.Z3_solver_check_assumptions)
    z3_api.Z3_solver_check_assumptions = z3core.Z3_solver_check_assumptions = counted
    z3_api.Z3_mk_context_rc = _made(z3_api.Z3_mk_context_rc)
    atexit.register(lambda: print(f"{LINE} {total()}", file=sys.stderr))
    module, sys.argv = sys.argv[1], sys.argv[1:]
    sys.path[0] = os.getcwd()  # as `python -m` has it (not bench/, whose rules.py would shadow the package)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
