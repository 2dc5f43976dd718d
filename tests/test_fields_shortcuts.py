"""z3 questions the decoder no longer asks, and texts that stay the same without them.

* a claim its premise holds (`fields._held`: a branch's premise carries what its parent was
  proven to imply, and the branch's layout asks those claims again) is implied without z3:
  the texts are the ones the decoder gives when it asks z3 each time (the old way, as the
  reference), and each claim it skipped is one z3 answers unsat on, asked as the decoder
  would (a fresh context, fields.QUERY_RLIMIT) but independently of it;
* a map key rendered for a reason (`Decoder.key_fields`) with the path's witness is the text
  without one, and the witness did refute claims there (the saving was taken).
"""

from __future__ import annotations

import pytest
import z3
from conftest import explored_with_witnesses

import analyzer.fields as fields
import corpus
from analyzer.fields import Decoder

OBJECTS = [
    corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_ip.o",
    corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_dny_udp.o",
    corpus.BUILD_DIR / "clang" / "vlan_tags.o",
]


def _texts(e) -> list[str]:
    out = []
    for p in e.paths:
        fields.forget()  # each text from scratch: no answer kept from another rendering
        out.append(Decoder(e.environment(), None, e.summaries).render(e.condition(p), witness=p.witness))
    return out


def _z3_unsat(formulas: list[z3.BoolRef]) -> bool:
    ctx = z3.Context()
    s = z3.Solver(ctx=ctx)
    s.set("rlimit", fields.QUERY_RLIMIT)
    s.add(*[f.translate(ctx) for f in formulas])
    return s.check() == z3.unsat


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda p: p.stem)
def test_held_claims_change_no_text(obj, monkeypatch):
    e = explored_with_witnesses(obj)
    held = fields._held
    monkeypatch.setattr(fields, "_held", lambda premise, claim: False)
    asked = _texts(e)  # every claim asked of z3
    skipped: list[list[z3.BoolRef]] = []

    def recording(premise, claim):
        hit = held(premise, claim)
        if hit:
            skipped.append([*e.environment(), *premise, z3.Not(claim)])
        return hit

    monkeypatch.setattr(fields, "_held", recording)
    assert _texts(e) == asked
    assert skipped  # the shortcut was taken on this object
    for question in skipped:
        assert _z3_unsat(question)


@pytest.mark.parametrize("stem", ["xdpfilt_alw_ip", "xdpfilt_alw_tcp"])
def test_key_texts_do_not_depend_on_the_witness(stem, monkeypatch):
    e = explored_with_witnesses(corpus.EXTERNAL_DIR / "libxdp1" / f"{stem}.o")
    refuted = []
    plain = Decoder._refuted

    def recording(self, known, claim):
        hit = plain(self, known, claim)
        refuted.extend([claim] if hit else [])
        return hit

    monkeypatch.setattr(Decoder, "_refuted", recording)
    keys = 0
    for p in e.paths:
        cond = z3.simplify(e.condition(p))  # as rules/reasons.py asks it
        for a in p.accesses:
            if a.key is None or p.witness is None:
                continue
            keys += 1
            fields.forget()
            alone = Decoder(e.environment(), None, e.summaries).key_fields(a.key, cond)
            fields.forget()
            assert Decoder(e.environment(), None, e.summaries).key_fields(a.key, cond, witness=p.witness) == alone
    assert keys and refuted
