"""Key extraction's shortcuts (rules/synthesis.py `_key_values`) against plain enumeration.

A key proved to take every value of its width on a path is left out of the block without
enumerating it, and the values a key takes around one model (`_around`) come from a small
query before the path's own solver is asked for the rest. If either over-claimed, a
constrained key would be dropped or get a wrong value set and its
filter lost (or widened into one the proof then refuses): on corpus programs that have
filters on MACs, TTL/TOS, TCP flags, ports, addresses and VLAN tags, every target path's
extracted blocks must equal those of the enumeration alone (as a set: the masked values of
a flag key come in the order of z3's models, which depends on the queries before).
"""

from __future__ import annotations

import pytest
import z3

import corpus
from analyzer.explore import explore
from lifter.program import load_object
from rules import synthesis
from rules.synthesis import Outcome, Synthesizer
from tests.conftest import need_object


def _blocks(path):
    return extracted_blocks(explore(*_program(path)))


def extracted_blocks(e) -> dict[int, list[str]]:
    """Every target path's extracted blocks (under no-ip-options), as a sorted list of their
    keys per path (test_synthesis_witness compares them too)."""
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
    monkeypatch.setattr(synthesis, "_around", lambda s, model, term: False)  # both shortcuts off
    assert proved == _blocks(path)


def _first_target(stem):
    e = explore(*_program(need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o")))
    s = Synthesizer(e, ("no-ip-options",), {})
    p = next(p for p in e.paths if isinstance(s.outcomes[p.id], Outcome) and not s.outcomes[p.id].is_pass)
    solver, _ = s._typical_solver(p)
    assert solver.check().r == 1
    return s, solver


def test_every_value_is_used():
    """The shortcuts do fire (else the test above shows nothing): a MAC the program never
    reads takes every value, and so do the TCP flags of a program that reads none (in the
    first model the TCP header may be too short for flower to read them: another model is
    taken); a port compared with K constants takes those K values around one model."""
    s, solver = _first_target("ttl_tos")
    assert synthesis._key_values(solver, solver.model(), s.d.keys["src_mac"], 65) is None
    s, solver = _first_target("or_stress_k2")
    solver.add(s.d.skb_protocol == 0x0800)
    assert solver.check().r == 1
    model = solver.model()
    assert synthesis._key_values(solver, model, s.d.keys["tcp_flags"], 65) is None
    claim = synthesis._around(solver, model, s.d.keys["dst_port"])
    assert isinstance(claim, z3.BoolRef)
    around = synthesis._values(synthesis.solver(claim), synthesis._every_x(16), 65)
    assert sorted(around) == sorted(synthesis._values(solver, s.d.keys["dst_port"], 65))
    assert len(around) == 2
