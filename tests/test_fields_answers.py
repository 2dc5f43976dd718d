"""z3's answers to a rendering's questions are kept for every later rendering (fields'
`_ANSWERS`), whole-condition questions too, and a map key is rendered on the very condition
the path's `when` is rendered on, so the two renderings' questions are answered once.

Each question is asked in a z3 context made for it (fields._Session.solve): its answer is a
function of the question, whichever rendering asks it. Oracle for the second test:
rules/reasons.py renders xdp-filter's keys against the path's condition, as `decode` does.
"""

from __future__ import annotations

from pathlib import Path

import z3
from conftest import require

import analyzer.fields as fields
import corpus
from analyzer.explore import explore
from analyzer.fields import Decoder, decode
from analyzer.symbolic import PACKET, PACKET_LEN
from lifter.program import load_object
from rules import reasons
from rules.reasons import path_reason


def test_a_whole_condition_answer_is_kept_for_the_next_rendering():
    """The whole-condition question (`keep=False`: `_implied` on a condition with reads at
    computed offsets) asked by one decoder is not asked of z3 again by another."""
    fields.forget()
    index = z3.BitVec("answers!i", 64)
    cond = z3.And(z3.UGE(PACKET_LEN, 40), PACKET[index + 14] == 6, z3.ULT(index, 4))
    claim = PACKET[z3.BitVecVal(23, 64)] == 6
    question = [cond, z3.Not(claim)]
    one, two = Decoder(), Decoder()
    first = one._check(question, keep=False)
    assert first[0] == z3.sat
    assert one.checks == 1
    assert two._check(question, keep=False)[0] == first[0]
    assert two.checks == 0  # the answer z3 gives the question every time, kept


def test_a_map_key_is_rendered_on_the_condition_decode_renders(monkeypatch):
    """xdpfilt_alw_tcp's map-dependent drops: `key_fields` is handed the condition `render`
    is, so each canonical condition a key rendering decides on is one the `when` text is
    rendered on (the z3 simplifier in the process's context made another term of 23 of
    the 25 conditions that read a map, whose layout questions then were other questions)."""
    objs = [p for p in corpus.external_objects() if p.name == "xdpfilt_alw_tcp.o"]
    require(bool(objs), "xdpfilt_alw_tcp.o is missing (run `make external`)")
    obj = load_object(Path(objs[0]))
    e = explore(obj, obj.programs[0])
    seen: dict[str, list[z3.BoolRef]] = {"key_fields": [], "render": []}  # kept alive
    key_fields, render = Decoder.key_fields, Decoder.render
    canonical = fields._Session.canonical
    where: list[str] = []

    def recorded(self, t):
        out = canonical(self, t)
        if where and t.sort() == z3.BoolSort():
            seen[where[-1]].append(out)
        return out

    def keyed(self, *a, **k):
        where.append("key_fields")
        try:
            return key_fields(self, *a, **k)
        finally:
            where.pop()

    def rendered(self, *a, **k):
        where.append("render")
        try:
            return render(self, *a, **k)
        finally:
            where.pop()

    monkeypatch.setattr(fields._Session, "canonical", recorded)
    monkeypatch.setattr(Decoder, "key_fields", keyed)
    monkeypatch.setattr(Decoder, "render", rendered)
    reasons.forget()
    drops = [p for p in e.paths if p.verdict == "DROP" and p.accesses][:3]
    assert drops
    for p in drops:
        assert path_reason(e, p, {}).code == "map-dependent"
        e.decoded.pop(p.id, None)
        decode(e, p)
    assert seen["key_fields"]
    assert all(any(k.eq(r) for r in seen["render"]) for k in seen["key_fields"])
