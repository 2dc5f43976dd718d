"""prove's last question, answered by a known model where one holds (rules/synthesis.py
`_own_left`): is some packet of the block's own paths left past the shields and earlier
blocks? A model of one of its paths (exploration's witness, a seed) in which the question's
constraints hold is a model of the query, so z3's answer would be sat.

On or_stress_k2 under no-ip-options (what the suggestion proves): the seed - the typical
packet the weaker synthesizer kept - answers without z3; the answer is z3's; where the
constraints exclude every packet of the block, z3 is asked and says so.
"""

from __future__ import annotations

import pytest
import z3

import corpus
from rules import synthesis
from rules.synthesis import Outcome, Synthesizer
from tests.conftest import explored_with_witnesses


@pytest.fixture(scope="module")
def suggested():
    """(synthesizer under no-ip-options made by with_assumption, a DROP block of it)."""
    e = explored_with_witnesses(corpus.BUILD_DIR / "clang" / "or_stress_k2.o")
    s = Synthesizer(e, (), {})
    s.run()
    other = s.with_assumption("no-ip-options")
    p = next(p for p in e.paths if isinstance(other.outcomes[p.id], Outcome) and not other.outcomes[p.id].is_pass)
    return other, other.extract(p, other.outcomes[p.id], quiet=True)


def _past(s, b, *more):
    return [*s.env, s.reach([]), b.formula(s.d), *more]


def _z3_answer(s, b, past) -> bool:
    own = z3.Or([s.conds[p] for p in b.paths])
    return synthesis.solver(*past, own).check() != z3.unsat


def test_a_seed_answers_without_z3(suggested, monkeypatch):
    s, b = suggested
    past = _past(s, b)
    assert s.seeds, "the weaker synthesizer's typical packets are the seeds"
    assert _z3_answer(s, b, past)

    def refused(*_, **__):
        raise AssertionError("z3 asked")

    monkeypatch.setattr(synthesis, "solver", refused)
    assert s._own_left(b, past) is True


def test_nothing_left_asks_z3(suggested, monkeypatch):
    s, b = suggested
    past = _past(s, b, z3.Not(b.formula(s.d)))  # a shield taking the whole block
    asked = []
    real = synthesis.solver
    monkeypatch.setattr(synthesis, "solver", lambda *c, **k: asked.append(1) or real(*c, **k))
    assert s._own_left(b, past) is False and asked
    assert _z3_answer(s, b, past) is False
