"""`with_assumption` shares the build's extraction when typical packets satisfy the
assumption (rules/synthesis.py). Whether they do is first asked without the program's
environment (`typical_implies`, a context of its own): no-ip-options is implied by typical
packets' IHL 5 whatever the environment, so the question under the environment - asked in
z3's main context, whose cost moved with the context's history (issue 14: 0.62 M vs 1.33 M
z3 work units on xdpfilt_dny_udp) - is not asked. The shortcut must answer only where the
question under the environment is unsat (checked here), and say nothing for the
assumptions typical packets do not imply.
"""

from __future__ import annotations

import pytest
import z3
from conftest import corpus_object

import rules.synthesis as synthesis
from analyzer.explore import explore
from lifter.program import load_object
from rules.ruleset import build
from rules.synthesis import assumption_constraints, typical_implies, typical_packet


def _typical() -> z3.BoolRef:
    return z3.Or(typical_packet(), typical_packet(fragments=True))


def test_typical_packets_imply_no_ip_options():
    assert typical_implies(_typical(), z3.And(assumption_constraints(["no-ip-options"])))


@pytest.mark.parametrize("name", ["no-fragments", "no-ipv6-ext"])
def test_typical_packets_do_not_imply(name):
    """Typical fragments are fragments, and typical packets' IPv6 is unconstrained: the
    shortcut concludes nothing, the question under the environment decides."""
    assert not typical_implies(_typical(), z3.And(assumption_constraints([name])))


def test_with_assumption_shares_without_asking_under_the_environment(monkeypatch):
    obj = load_object(corpus_object("thesis_static_rules"))
    base = build(explore(obj, obj.programs[0]), ()).synth
    asked = []
    real = synthesis.maybe_sat
    monkeypatch.setattr(synthesis, "maybe_sat", lambda *c: asked.append(c) or real(*c))
    other = base.with_assumption("no-ip-options")
    assert other.extracted is base.extracted
    assert other.fixed_keys is base.fixed_keys
    assert asked == []
    # what the skipped question would have answered: unsat, so sharing is what it decided
    added = z3.And(assumption_constraints(["no-ip-options"]))
    query = synthesis.solver(*base.env, z3.Or(base.typical, base.typical_fragment), z3.Not(added))
    assert query.check() == z3.unsat
