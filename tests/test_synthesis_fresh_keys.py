"""`_key_values` on a key whose value is a variable, not packet bytes (rules/synthesis.py
`_around_var`): the ports of DCCP and UDP-Lite, which the dissector model leaves fresh.

Around a model where the key is such a variable, the shortcut changes that variable alone
(every other one keeps its model value). The expected value sets below are worked out by
hand from the constraints; each is also what plain enumeration of the solver gives.
"""

from __future__ import annotations

import z3

from analyzer.symbolic import PACKET
from rules import synthesis


def _key():
    proto = z3.BitVec("t.proto", 8)
    port = z3.BitVec("t.fresh_port", 16)
    tcp = z3.Concat(z3.Select(PACKET, z3.BitVecVal(34, 64)), z3.Select(PACKET, z3.BitVecVal(35, 64)))
    term = z3.If(proto == 33, port, z3.If(proto == 6, tcp, z3.BitVecVal(0, 16)))
    return proto, port, term


def _solver(*constraints):
    s = z3.Solver()
    s.add(*constraints)
    assert s.check() == z3.sat
    return s


def test_a_free_fresh_port_takes_every_value():
    proto, _, term = _key()
    s = _solver(proto == 33)
    claim = synthesis._around(s, s.model(), term)
    assert isinstance(claim, z3.BoolRef), "the shortcut fires on a variable"
    assert synthesis._key_values(s, s.model(), term, 65) is None


def test_a_bounded_fresh_port_takes_its_values():
    proto, port, term = _key()
    s = _solver(proto == 33, z3.ULT(port, 3))
    assert sorted(synthesis._key_values(s, s.model(), term, 65)) == [0, 1, 2]


def test_a_fresh_port_tied_to_packet_bytes_is_enumerated():
    # the variable equals the low two bits of packet byte 0: changing it alone breaks the
    # assertion, so only the model's value is found around it; the path's solver gives the rest
    proto, port, term = _key()
    byte0 = z3.ZeroExt(8, z3.Select(PACKET, z3.BitVecVal(0, 64)))
    s = _solver(proto == 33, port == byte0 & 3)
    assert sorted(synthesis._key_values(s, s.model(), term, 65)) == [0, 1, 2, 3]


def test_a_constant_in_the_model_is_not_a_variable():
    # ICMP (1): the key is the constant 0 in this model, no variable
    proto, _, term = _key()
    s = _solver(proto == 1)
    assert synthesis._around(s, s.model(), term) is None


def test_a_fresh_port_missing_one_value_is_not_every_value():
    # DCCP with any port but 7 (or ICMP: 0): every value but 7, so not "every value"
    proto, _, term = _key()
    s = _solver(z3.Or(proto == 1, proto == 33), z3.Not(z3.And(proto == 33, term == 7)))
    values = synthesis._key_values(s, s.model(), term, 65)
    assert values is not None and len(values) == 65 and 7 not in values
