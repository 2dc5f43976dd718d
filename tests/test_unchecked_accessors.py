"""analyzer/symbolic.py binds z3.py's hot accessors (symbolic.UNCHECKED_ACCESSORS) to z3's C
functions without z3core's per-call error check: z3.py then calls them directly, the terms
it makes and reads are the same, and a wrapper that does more than call and check is left
alone."""

from __future__ import annotations

import sys

import z3
from z3 import z3core

from analyzer import symbolic

API = sys.modules["z3.z3"]


def test_z3_calls_the_c_functions():
    for name in symbolic.UNCHECKED_ACCESSORS:
        wrapper = getattr(z3core, name)
        assert getattr(API, name) is wrapper.__defaults__[-1].f, name
        assert getattr(z3, name) is wrapper  # the package's names keep their checks


def test_a_converting_wrapper_is_left_alone():
    # Z3_get_symbol_string turns the C string into a str: not a call and a check
    assert symbolic.bind_unchecked(["Z3_get_symbol_string", "Z3_no_such_function"]) == []
    assert API.Z3_get_symbol_string is z3core.Z3_get_symbol_string


def test_terms_read_the_same_as_through_the_checked_wrappers():
    x = z3.BitVec("unchecked_x", 32)
    e = z3.If(z3.ULT(x, 5), x + 1, z3.Extract(31, 0, symbolic.PACKET_LEN))
    ctx = e.ctx_ref()
    assert e.get_id() == z3core.Z3_get_ast_id(ctx, e.as_ast())
    assert e.sort().size() == 32 and z3.is_bv(e) and not z3.is_bv_value(e)
    assert e.decl().kind() == z3.Z3_OP_ITE and e.num_args() == 3
    assert [c.get_id() for c in e.children()] == [
        z3core.Z3_get_ast_id(ctx, z3core.Z3_get_app_arg(ctx, e.as_ast(), i)) for i in range(3)
    ]
    assert e.arg(1).arg(0).eq(x) and e.arg(1).arg(1).as_long() == 1
    assert z3.is_true(z3.simplify(e.arg(0).arg(1) == 5)) and z3.is_false(z3.simplify(e.arg(0).arg(1) == 4))
    assert z3.simplify(z3.substitute(e, (x, z3.BitVecVal(3, 32)))).as_long() == 4
    s = z3.Solver()
    s.add(e == 7, x == 6)
    assert s.check() == z3.sat and s.model()[x].as_long() == 6
