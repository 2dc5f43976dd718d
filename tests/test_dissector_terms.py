"""rules/dissector.py's term helpers make through z3's C API the very terms z3's Python API
makes (the reference: the same expression written with z3.BitVecVal, z3.Select, z3.Or and
==). The same term means the same z3 id, so the dissector model, and every model z3 returns
for queries over it, stays what it was."""

from __future__ import annotations

import z3

from rules import dissector


def test_numerals_are_z3s():
    for value, bits in ((0, 8), (0x86DD, 16), (-1, 12), (1 << 70, 128), (5, 64)):
        got = dissector._bv(value, bits)
        assert got.get_id() == z3.BitVecVal(value % (1 << bits), bits).get_id()
        assert got.as_long() == value % (1 << bits)


def test_membership_is_z3s_or():
    x = z3.BitVec("t.ethertype", 16)
    for values in ((0x8100,), (0x8100, 0x88A8), (1, 58, 6)):
        assert dissector._in(x, values).get_id() == z3.Or([x == v for v in values]).get_id()


def test_a_byte_is_z3s_select():
    pkt = z3.Array("t.pkt", z3.BitVecSort(64), z3.BitVecSort(8))
    m = dissector._Model(pkt, z3.BitVec("t.len", 64))
    off = z3.BitVec("t.off", 64)
    assert m.byte(14).get_id() == z3.Select(pkt, z3.BitVecVal(14, 64)).get_id()
    assert m.byte(off + 2).get_id() == z3.Select(pkt, off + 2).get_id()


def test_ite_keeps_its_shortcuts():
    c = z3.Bool("t.c")
    a, b = z3.BitVec("t.a", 8), z3.BitVec("t.b", 8)
    assert dissector._ite(c, a, b).get_id() == z3.If(c, a, b).get_id()
    assert dissector._ite(c, a, a).get_id() == a.get_id()
    assert dissector._ite(z3.BoolVal(True), a, b).get_id() == a.get_id()
    assert dissector._ite(z3.BoolVal(False), a, b, known=False).get_id() == b.get_id()
