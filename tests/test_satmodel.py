"""analyzer/satmodel.py: a sat answer comes with a model its assertions hold in, or is unknown.

The query of tests/data/invalid_model.smt2 is flag_counter's path-4 witness question as
`rules` printed it (tests/data/README.md). Its model is checked here assertion by
assertion with z3's evaluator, apart from `holds`; the fallback's logic is checked on a
stand-in solver whose answers are set by hand, so it is exercised whatever z3 version
answers the real query.
"""

from __future__ import annotations

from pathlib import Path

import z3

from analyzer.satmodel import check

QUERY = Path(__file__).resolve().parent / "data" / "invalid_model.smt2"


def _parsed() -> z3.Solver:
    s = z3.Solver(ctx=z3.Context())
    s.from_string(QUERY.read_text())
    return s


def test_the_query_gets_a_model_each_assertion_holds_in():
    q = _parsed()
    r, model = check(q)
    assert r == z3.sat and q.num_scopes() == 0
    for a in q.assertions():
        assert z3.is_true(model.eval(a, model_completion=True)), a
    # the packet the model gives takes the path: UDP over IPv4 with hit_budget's entry at
    # the source port present (path 4 drops on it), read off the model by hand
    pkt = z3.Array("pkt", z3.BitVecSort(64, model.ctx), z3.BitVecSort(8, model.ctx))
    byte = [model.eval(pkt[i], model_completion=True).as_long() for i in range(0x26)]
    assert byte[12:14] == [0x08, 0x00] and byte[23] == 17
    sport = z3.BitVecVal(byte[0x23] << 8 | byte[0x22], 16, model.ctx)
    found = z3.Function("map.hit_budget.found", z3.BitVecSort(16, model.ctx), z3.BoolSort(model.ctx))
    assert z3.is_true(model.eval(found(sport), model_completion=True))


class _Stand:
    """A stand-in solver: `answers` are (result, model) per check, in order."""

    def __init__(self, assertions, answers):
        self._assertions, self._answers = assertions, list(answers)
        self.scopes, self.pushes = 0, 0

    def check(self):
        self._result, self._model = self._answers.pop(0)
        return self._result

    def model(self):
        return self._model

    def assertions(self):
        return self._assertions

    def push(self):
        self.scopes += 1
        self.pushes += 1

    def pop(self):
        self.scopes -= 1


def _model_of(*constraints) -> z3.ModelRef:
    s = z3.Solver()
    s.add(*constraints)
    assert s.check() == z3.sat
    return s.model()


def test_a_model_that_breaks_an_assertion_is_asked_again_pushed():
    x = z3.BitVec("x", 8)
    wrong, right = _model_of(x == 1), _model_of(x == 2)
    s = _Stand([x == 2], [(z3.sat, wrong), (z3.sat, right)])
    r, model = check(s)
    assert (r, model.eval(x).as_long(), s.pushes, s.scopes) == (z3.sat, 2, 1, 0)


def test_no_model_that_holds_is_unknown():
    x = z3.BitVec("x", 8)
    wrong = _model_of(x == 1)
    for second in [(z3.sat, wrong), (z3.unsat, None), (z3.unknown, None)]:
        s = _Stand([x == 2], [(z3.sat, wrong), second])
        assert check(s) == (z3.unknown, None) and s.scopes == 0


def test_a_model_that_holds_is_returned_at_once():
    x = z3.BitVec("x", 8)
    s = _Stand([x == 2], [(z3.sat, _model_of(x == 2))])
    r, model = check(s)
    assert r == z3.sat and model.eval(x).as_long() == 2 and s.pushes == 0
    s = _Stand([x == 2], [(z3.unsat, None)])
    assert check(s) == (z3.unsat, None) and s.pushes == 0
