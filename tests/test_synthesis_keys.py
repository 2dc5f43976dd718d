"""Key extraction's shortcut (rules/synthesis.py `_every_value`) against plain enumeration.

A key proved to take every value of its width on a path is left out of the block without
enumerating it. If that proof over-claimed, a constrained key would be dropped and its
filter lost (or widened into one the proof then refuses): on corpus programs that have
filters on MACs, TTL/TOS, TCP flags, ports, addresses and VLAN tags, every target path's
extracted blocks must equal those of the enumeration alone (as a set: the masked values of
a flag key come in the order of z3's models, which depends on the queries before).
"""

from __future__ import annotations

import pytest

import corpus
from analyzer.explore import explore
from lifter.program import load_object
from rules import synthesis
from rules.synthesis import Outcome, Synthesizer
from tests.conftest import need_object


def _blocks(path):
    e = explore(*_program(path))
    s = Synthesizer(e, ("no-ip-options",), {})
    out = {}
    for p in e.paths:
        o = s.outcomes[p.id]
        if isinstance(o, Outcome) and not o.is_pass:
            # a flag key's masked values (_cubes) come in the order z3's models give them
            out[p.id] = sorted(repr((b.protocol, b.sets, b.masked, b.set_masks)) for b in s.extract_all(p, o))
    return out


def _program(path):
    obj = load_object(path)
    return obj, obj.programs[0]


@pytest.mark.parametrize("stem", ["ttl_tos", "tcp_flags", "qinq_tags", "allow_block", "or_stress_k2"])
def test_every_value_agrees_with_enumeration(stem, monkeypatch):
    path = need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o")
    proved = _blocks(path)
    assert any(proved.values()), "the program has target paths with blocks"
    monkeypatch.setattr(synthesis, "_every_value", lambda s, model, term: False)
    assert proved == _blocks(path)


def test_every_value_is_used():
    """The shortcut does find keys that matter nothing (else the test above shows nothing)."""
    path = need_object(corpus.BUILD_DIR / "clang" / "ttl_tos.o")
    e = explore(*_program(path))
    s = Synthesizer(e, ("no-ip-options",), {})
    p = next(p for p in e.paths if isinstance(s.outcomes[p.id], Outcome) and not s.outcomes[p.id].is_pass)
    solver, _ = s._typical_solver(p)
    assert solver.check().r == 1
    model = solver.model()
    assert synthesis._every_value(solver, model, s.d.keys["src_mac"])
