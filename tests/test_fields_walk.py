"""The term walks of analyzer/fields.py (`_offsets`, `_shape`, `_has_long`) on hand-built
terms: the expected offsets and operation counts are read off each term by hand. They walk
z3's terms through its C API with a memo per node; the same answers are required from z3's
own checked wrappers (the fallback for a z3 build laid out differently) and for a node met
first inside a larger term."""

from __future__ import annotations

import dataclasses

import pytest
import z3

from analyzer import fields
from analyzer.symbolic import PACKET


def _b(i: int) -> z3.BitVecRef:
    return PACKET[z3.BitVecVal(i, 64)]


def _terms():
    ihl = z3.ZeroExt(56, _b(14) & 0x0F) * 4
    proto = z3.Concat(_b(12), _b(13))
    computed = PACKET[z3.BitVecVal(16, 64) + ihl]  # a read at a computed index
    x, y = z3.BitVecs("walk_x walk_y", 32)
    mix = ((x * 31) ^ y) * 17  # 2 multiplications + 1 xor: 3 mixing, 3 arithmetic
    sums = x + y + x + y  # one n-ary sum of 4 terms (3 additions) or nested: 3 additions
    return {
        "proto": (proto == 0x0800, frozenset({12, 13})),
        "and": (z3.And(proto == 0x0800, _b(23) == 6), frozenset({12, 13, 23})),
        "computed": (z3.And(proto == 0x0800, computed == 1), None),
        "ihl": (ihl == 20, frozenset({14})),
        "none": (x == 1, frozenset()),
        "mix": (mix, frozenset()),
        "sums": (sums, frozenset()),
    }


def _fallback(monkeypatch) -> None:
    # the walks start from Z3_C.handles: the wrappers take ctypes objects, not raw pointers
    monkeypatch.setattr(fields, "Z3_C", dataclasses.replace(fields.Z3_C, raw=False))
    for name, api in (
        ("_AST_KIND", z3.Z3_get_ast_kind),
        ("_AST_ID", z3.Z3_get_ast_id),
        ("_NUM_ARGS", z3.Z3_get_app_num_args),
        ("_ARG", z3.Z3_get_app_arg),
        ("_DECL", z3.Z3_get_app_decl),
        ("_DECL_KIND", z3.Z3_get_decl_kind),
        ("_NUMERAL", z3.Z3_get_numeral_string),
        ("_SORT", z3.Z3_get_sort),
        ("_SORT_KIND", z3.Z3_get_sort_kind),
    ):
        monkeypatch.setattr(fields, name, api)


@pytest.mark.parametrize("raw", [True, False])
def test_offsets_by_hand(monkeypatch, raw):
    if not raw:
        _fallback(monkeypatch)
    monkeypatch.setattr(fields, "_NODE_OFFSETS", {})
    monkeypatch.setattr(fields, "_OFFSET_ROOTS", {})
    for name, (term, expected) in _terms().items():
        assert fields._offsets(term) == expected, name


def test_offsets_of_a_node_met_inside_a_larger_term(monkeypatch):
    monkeypatch.setattr(fields, "_NODE_OFFSETS", {})
    monkeypatch.setattr(fields, "_OFFSET_ROOTS", {})
    terms = _terms()
    whole = z3.Or(terms["and"][0], terms["ihl"][0])
    assert fields._offsets(whole) == frozenset({12, 13, 14, 23})
    assert fields._offsets(terms["ihl"][0]) == frozenset({14})  # answered from the node memo
    assert fields._offsets(z3.Or(whole, terms["computed"][0])) is None


@pytest.mark.parametrize("raw", [True, False])
def test_shape_and_long_by_hand(monkeypatch, raw):
    if not raw:
        _fallback(monkeypatch)
    monkeypatch.setattr(fields, "_NODE_SHAPES", {})
    monkeypatch.setattr(fields, "_SHAPE_ROOTS", {})
    x, y = z3.BitVecs("walk_x walk_y", 32)
    mix = ((x * 31) ^ y) * 17
    assert fields._shape(mix) == (3, 3, False)
    assert fields._has_long(mix == 5)  # MIX_OPS = 3 mixing operations: a hash
    assert not fields._has_long(((x * 31) ^ y) == 5)  # 2 of them: not long
    merged = z3.If(x == 1, mix, y)  # an if-then-else: printed whole, not a computation
    assert fields._shape(merged)[2] is True
    assert not fields._long(merged)
    assert fields._has_long(merged == 3)  # the hash in its branch is still in the condition
    # a long computation inside a map key still counts; a packet read's index does not
    found = z3.Function("map.walk.found", z3.BitVecSort(32), z3.BoolSort())
    assert fields._has_long(found(mix))
    assert fields._shape(found(mix)) == (0, 0, False)  # a map lookup is a leaf of a computation
    read = PACKET[z3.ZeroExt(32, mix)]
    assert not fields._has_long(read == 1)
