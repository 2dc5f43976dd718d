"""`_key_values` on a key whose path is an OR of many tests (rules/synthesis.py
`_claim_values`): past NAMED_AFTER values the rest are read off the claim's formula
(`_named`) and one query proves the set, else the enumeration goes on.

The expected sets are the constants the constraints are written with (by hand, not by the
code under test); the cases where the read-off values are not the set (a range besides the
equalities, a value excluded again) must still come out exact, through the enumeration.
"""

from __future__ import annotations

import z3

from analyzer.symbolic import PACKET
from rules import synthesis

PORTS = [20000 + 131 * i for i in range(20)]
ADDRS = [0x0A010007 + (i << 8) + 3 * i for i in range(12)]


def _bytes(at: int, n: int) -> z3.BitVecRef:
    return z3.Concat(*[z3.Select(PACKET, z3.BitVecVal(at + i, 64)) for i in range(n)])


def _values(constraint, term):
    s = z3.Solver()
    s.add(constraint)
    assert s.check() == z3.sat
    out = synthesis._key_values(s, s.model(), term, synthesis.MAX_VALUES + 1)
    return None if out is None else sorted(out)


def _read_off(constraint, term) -> list[int]:
    """What `_named` reads off the claim around a model (the candidates alone)."""
    s = z3.Solver()
    s.add(constraint)
    assert s.check() == z3.sat
    claim = synthesis._around(s, s.model(), term)
    return sorted(synthesis._named(z3.simplify(claim), synthesis._every_x(term.size())))


def test_an_or_of_ports_gives_its_ports():
    port = _bytes(34, 2)
    c = z3.Or([port == p for p in PORTS])
    assert _read_off(c, port) == sorted(PORTS)  # the shortcut's candidates are the set
    assert _values(c, port) == sorted(PORTS)


def test_an_or_of_addresses_gives_its_addresses():
    addr = _bytes(26, 4)
    c = z3.Or([addr == a for a in ADDRS])
    assert _values(c, addr) == sorted(ADDRS)


def test_a_range_besides_the_equalities_is_enumerated():
    port = _bytes(34, 2)
    c = z3.Or(*[port == p for p in PORTS[:12]], z3.And(z3.UGE(port, 1000), z3.ULE(port, 1003)))
    assert _values(c, port) == sorted(PORTS[:12] + [1000, 1001, 1002, 1003])


def test_a_value_excluded_again_is_not_taken():
    port = _bytes(34, 2)
    c = z3.And(z3.Or([port == p for p in PORTS]), port != PORTS[5], port != PORTS[17])
    expected = sorted(p for i, p in enumerate(PORTS) if i not in (5, 17))
    assert _values(c, port) == expected
