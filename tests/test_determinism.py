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
    """Records the parameters every z3.Solver gets (`Solver.set`) while installed: all of
    them (`params`) and per solver (`by_solver`)."""

    def __init__(self, monkeypatch):
        self.params: list[str] = []
        self.by_solver: list[tuple[z3.Solver, list[str]]] = []
        original = z3.Solver.set

        def record(solver, *args, **keys):
            names = [a for a in args if isinstance(a, str)] + list(keys)
            self.params += names
            self.by_solver.append((solver, names))
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


def test_key_shortcut_queries_use_no_clock(monkeypatch):
    # rules/synthesis.py `_key_values`: the shortcut asks, in its own solvers, whether a key
    # term takes every value of its width (here a 16-bit port the path fixes to 22 or 80:
    # two values, found by the shortcut's second query). Those solvers must be bounded by
    # z3's rlimit only: the 1 s timeout they had fired on alw_tcp depending on the load.
    from rules import synthesis

    pkt = z3.Array("pkt", z3.BitVecSort(64), z3.BitVecSort(8))
    port = z3.Concat(pkt[z3.BitVecVal(36, 64)], pkt[z3.BitVecVal(37, 64)])
    s = z3.Solver()
    s.add(z3.Or(port == 22, port == 80))
    assert s.check() == z3.sat
    model = s.model()
    rec = _Recorder(monkeypatch)
    values = synthesis._key_values(s, model, port, 8)
    made = [names for solver, names in rec.by_solver if solver is not s]
    assert sorted(values) == [22, 80]
    assert made and all("rlimit" in p and "timeout" not in p for p in made), made
