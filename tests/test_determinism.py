"""Issue 14: the same object gives the same output on every run, whatever the machine's speed
or load. A z3 query stopped by wall-clock time (`timeout`) answers differently on a loaded
machine, and every later answer of the process can change with it (z3's models depend on
what the process asked before): seen on xdp-filter's alw_tcp, whose printed `when` texts and
counterexample packets changed between runs when a 1 s shortcut query in the synthesis
finished just in time or just too late. So without a `--timeout` budget, the proofs bound
their queries by z3's resource limit (deterministic), never by the clock."""

from __future__ import annotations

import z3

from analyzer import mapuse
from analyzer.explore import Options, explore
from lifter.program import load_object
from tests.conftest import corpus_object


class _Recorder:
    """Records the parameters every z3.Solver gets (`Solver.set`) while installed."""

    def __init__(self, monkeypatch):
        self.params: list[str] = []
        original = z3.Solver.set

        def record(solver, *args, **keys):
            self.params += [a for a in args if isinstance(a, str)] + list(keys)
            return original(solver, *args, **keys)

        monkeypatch.setattr(z3.Solver, "set", record)


def _flag_counter(options: Options):
    # flag_counter.c writes `port_flags` (a counter beside the flags it decides on) and
    # `hit_budget`: map_uses asks z3 several proofs (5 on clang's build)
    obj = load_object(corpus_object("flag_counter"))
    return explore(obj, obj.programs[0], options)


def test_map_proofs_without_budget_use_no_clock(monkeypatch):
    e = _flag_counter(Options())
    rec = _Recorder(monkeypatch)
    uses = mapuse.map_uses(e)
    assert "port_flags" in uses and "rlimit" in rec.params
    assert "timeout" not in rec.params, "a map proof's answer would depend on the machine's load"


def test_map_proofs_keep_the_time_budget(monkeypatch):
    # with --timeout, the budget still stops each query (README: the report's budget)
    e = _flag_counter(Options(timeout=600))
    rec = _Recorder(monkeypatch)
    mapuse.map_uses(e)
    assert "rlimit" in rec.params and "timeout" in rec.params
