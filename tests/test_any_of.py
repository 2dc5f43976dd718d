"""rules/proof.py `any_of`: the Or of filters' matches with their shared conjuncts taken out.

Two independent checks per case: z3 proves the result equivalent to the plain Or, and the
result is the very term (same z3 id) the construction with z3.And/z3.Or on Python terms
makes (the reference below, written out here): any_of reads the conjuncts through z3's C
API, and a different term would change which models later checks return.
"""

from __future__ import annotations

import z3

from rules.proof import any_of


def _reference(terms):
    parts = [t.children() if z3.is_and(t) else [t] for t in terms]
    shared = set.intersection(*({x.get_id() for x in p} for p in parts))
    if not shared:
        return z3.Or(terms)
    rests = [[x for x in p if x.get_id() not in shared] for p in parts]
    common = [x for x in parts[0] if x.get_id() in shared]
    if any(not r for r in rests):
        return z3.And(common)
    return z3.And(common + [z3.Or([r[0] if len(r) == 1 else z3.And(r) for r in rests])])


def _check(terms):
    got = any_of(terms)
    s = z3.Solver()
    s.add(got != z3.Or(terms))
    assert s.check() == z3.unsat
    assert got.get_id() == _reference(terms).get_id()
    return got


def test_one_differing_key():
    proto, port = z3.BitVec("t.proto", 8), z3.BitVec("t.port", 16)
    ok = z3.Bool("t.ok")
    got = _check([z3.And(ok, proto == 6, port == p) for p in (22, 80, 443)])
    assert z3.is_and(got) and got.num_args() == 3  # ok, proto == 6, Or(ports)


def test_several_differing_conjuncts():
    a, b = z3.BitVec("t.a", 8), z3.BitVec("t.b", 8)
    ok = z3.Bool("t.ok")
    _check([z3.And(ok, a == 1, b == 2), z3.And(ok, a == 3, b == 4), z3.And(ok, a == 5)])


def test_nothing_shared():
    a = z3.BitVec("t.a", 8)
    _check([a == 1, z3.And(a != 2, a != 3)])


def test_a_term_that_is_the_shared_part():
    a, b = z3.BitVec("t.a", 8), z3.BitVec("t.b", 8)
    got = _check([z3.And(a == 1, b == 2), a == 1])
    assert got.eq(z3.And(a == 1))
