"""The decoder's memo of sub-term texts (fields.Decoder._memo: per rendering, and `_PURE`
across renderings for texts that asked nothing of the condition) changes no text: every
condition renders as the decoder without the memo renders it (each sub-term worked out where
it occurs), whether the renderings before filled `_PURE` or not; and where a repeated
sub-term meets the MAX_TEXT cut, the "…" falls where it fell without the memo."""

from __future__ import annotations

import z3
from conftest import corpus_object

import analyzer.fields as fields
from analyzer.explore import explore
from analyzer.fields import MAX_TEXT, Decoder
from analyzer.symbolic import PACKET, PACKET_LEN
from lifter.program import load_object

#: VLAN and QinQ walks (branches with layouts of their own), IPv4 options (fixed-offset L4
#: reads and their note), TCP flags (sub-byte fields)
OBJECTS = ("vlan_tags", "qinq_tags", "ipv4_options", "tcp_flags")


def _plain(monkeypatch):
    """Decoder._memo replaced by the work itself: the decoder before the memo."""
    monkeypatch.setattr(Decoder, "_memo", lambda self, kind, t, lay, cond, make: make(t, lay, cond))


def _conditions():
    out = []
    for name in OBJECTS:
        obj = load_object(corpus_object(name))
        e = explore(obj, obj.programs[0])
        out += [(f"{name} {p.id}", e.environment(), e.condition(p)) for p in e.paths]
    return out


def test_memo_changes_no_text(monkeypatch):
    conds = _conditions()
    fields.forget()
    memo = [Decoder(env).render(c) for _, env, c in conds]  # `_PURE` filled as they go
    assert fields._PURE, "some sub-terms asked nothing of their condition"
    again = [Decoder(env).render(c) for _, env, c in conds]  # every pure text taken from `_PURE`
    with monkeypatch.context() as m:
        _plain(m)
        fields.forget()
        plain = [Decoder(env).render(c) for _, env, c in conds]
    differ = [(n, a, b) for (n, _, _), a, b in zip(conds, memo, plain, strict=True) if a != b]
    assert not differ, differ
    assert again == memo
    assert any(fields.FIXED_NOTE in t for t in plain)  # the note set inside sub-terms survives
    assert any("vlan" in t for t in plain) and any("tcp." in t for t in plain)


def test_cut_falls_where_it_fell(monkeypatch):
    # One disjunct repeated in many conjuncts: its text is taken from the memo each time,
    # until the characters counted pass MAX_TEXT; the "…" must land as without the memo.
    tag = z3.Concat(PACKET[z3.BitVecVal(12, 64)], PACKET[z3.BitVecVal(13, 64)])
    shared = z3.Or(tag == 0x8100, tag == 0x88A8, z3.ULT(PACKET_LEN, 60))
    atoms = [z3.Or(shared, PACKET[z3.BitVecVal(20 + i, 64)] == i) for i in range(60)]
    cond = z3.And(z3.UGE(PACKET_LEN, 14), *atoms)
    fields.forget()
    memo = Decoder([]).render(cond)
    with monkeypatch.context() as m:
        _plain(m)
        fields.forget()
        plain = Decoder([]).render(cond)
    assert memo == plain
    assert plain.endswith("…") and len(plain) <= MAX_TEXT
