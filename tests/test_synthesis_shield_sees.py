"""A pass shield takes the counterexample it is made from (rules/synthesis.py `shield`).

An address key whose value flower does not compare on the counterexample is not one of the
keys it "sees": an IPv4 header with IHL < 5 stops flower's walk before the addresses, so no
address type is set and fl_set_key's addr_type check fails for any address match, though
the dissector's dst_ip term is 0 there. A shield with dst_ip 0.0.0.0 made from such a packet
would not take it, and the next round's query finds its twin again: with prove's
counterexamples made plain (every free byte 0, analyzer/satmodel.py `plainest`; tried in
issue 14), isa_v4's path-3 block got the same shield 11 times and was given up after
MAX_SHIELDS instead of as taken by its shields.
"""

from __future__ import annotations

import z3

import corpus
from analyzer.symbolic import PACKET, PACKET_LEN
from rules.dissector import match_formula
from rules.synthesis import Synthesizer
from tests.conftest import explored_with_witnesses


def test_a_shield_takes_its_malformed_counterexample():
    """isa_v4's path-3 block (protocol ip, ip_ttl's top bit 0) with an all-zero IPv4 packet
    (IHL 0): the path it takes fixes dst_ip 0.0.0.0 and ip_ttl 0, and the packet's key values
    are 0 - but flower's walk stops before the addresses (no address type), so a shield on
    dst_ip would not match it (without `_sees`: `dst_ip 0.0.0.0 ip_ttl 0x0`, which does not).
    The shield keeps ip_ttl only, and takes the packet."""
    e = explored_with_witnesses(corpus.BUILD_DIR / "clang" / "isa_v4.o")
    s = Synthesizer(e, (), {})
    b = s.extract(e.paths[3], s.outcomes[3], quiet=True)
    zero = z3.Store(z3.K(z3.BitVecSort(64), z3.BitVecVal(0, 8)), 12, 8)
    q = z3.Solver()
    q.add(PACKET == zero, PACKET_LEN == 128, *s.env, b.formula(s.d), z3.Not(s.good(b.outcome)))
    assert q.check() == z3.sat
    model = q.model()
    shield = s.shield(b, model, s.good(b.outcome))
    assert z3.is_true(model.eval(match_formula(shield, s.d), model_completion=True)), shield
    assert "dst_ip" not in dict(shield.keys)
