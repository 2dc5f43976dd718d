"""The decoder's witnesses (fields.Decoder.render's `witness`, `_refuted`) save z3 queries and
change nothing: a path's text is the same without a witness, with its exploration witness
(and the untagged variants of it), and with another model of the same path; and every claim
a witness refuted is one z3 finds a counterexample to (sat of the environment, the
condition and the claim's negation), asked independently of the decoder."""

from __future__ import annotations

import pytest
import z3
from conftest import explored_with_witnesses

import analyzer.fields as fields
import corpus
from analyzer.fields import Decoder, witnesses
from analyzer.symbolic import PACKET, PACKET_LEN

#: z3's resource limit for the independent checks (the decoder's is fields.QUERY_RLIMIT):
#: generous, so that a refuted claim's counterexample is found, not given up on
CHECK_RLIMIT = 50_000_000

OBJECTS = [
    corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_tcp.o",
    corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_dny_udp.o",
    corpus.BUILD_DIR / "clang" / "vlan_tags.o",
]


def _other_model(env, cond, w: z3.ModelRef) -> z3.ModelRef | None:
    """A model of the path other than its witness: another ethertype at 12 if the path
    allows one, else other bytes somewhere in the first 64."""
    byte = [w.eval(PACKET[i], model_completion=True) for i in range(64)]
    ethertype = z3.Or(PACKET[12] != byte[12], PACKET[13] != byte[13])
    for differ in (ethertype, z3.Or([PACKET[i] != byte[i] for i in range(64)])):
        s = z3.Solver()
        s.set("rlimit", CHECK_RLIMIT)
        s.add(*env, cond, differ)
        if s.check() == z3.sat:
            return s.model()
    return None


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda p: p.stem)
def test_texts_do_not_depend_on_the_witness(obj, monkeypatch):
    e = explored_with_witnesses(obj)
    env = e.environment()
    refuted: list[tuple[z3.BoolRef, z3.BoolRef]] = []
    plain = Decoder._refuted

    def recording(self, known, claim):
        hit = plain(self, known, claim)
        if hit:
            refuted.append((known.cond, claim))
        return hit

    monkeypatch.setattr(Decoder, "_refuted", recording)
    others = 0
    for path in e.paths:
        cond = e.condition(path)
        fields.forget()  # nothing kept across renderings: each text from scratch
        alone = Decoder(env, None, e.summaries).render(cond)
        if path.witness is None:
            continue
        fields.forget()
        assert Decoder(env, None, e.summaries).render(cond, witness=path.witness) == alone, path.id
        other = _other_model(env, cond, path.witness)
        if other is not None:
            others += 1
            fields.forget()
            assert Decoder(env, None, e.summaries).render(cond, witness=other) == alone, path.id
    assert others  # the other witnesses were rendered with, not skipped
    assert refuted  # the witnesses refuted claims: the texts compared above took that way
    for cond, claim in refuted:  # each a claim z3 refutes too: a packet of the path where it fails
        s = z3.Solver()
        s.set("rlimit", CHECK_RLIMIT)
        s.add(*env, cond, z3.Not(claim))
        assert s.check() == z3.sat, claim


def test_untagged_variants_are_models_of_the_condition():
    """A witness with a VLAN tag gives its untagged packet when the condition allows it (the
    Witness read with the tag's 4 bytes cut out): checked against z3's own evaluation of the
    condition on that packet, built by hand."""
    e = explored_with_witnesses(corpus.BUILD_DIR / "clang" / "vlan_tags.o")
    env = e.environment()
    seen = 0
    for path in e.paths:
        if path.witness is None:
            continue
        cond = fields.canonical(e.condition(path))
        ws = witnesses(path.witness, [*env, cond])
        for w in ws[1:]:  # the variants: each a packet with tags removed
            seen += 1
            tagged = [path.witness.eval(PACKET[i], model_completion=True).as_long() for i in range(80)]
            untagged = tagged[:12] + tagged[12 + 4 * w.untagged :]
            assert [w.value(PACKET[i]).as_long() for i in range(60)] == untagged[:60]
            length = path.witness.eval(PACKET_LEN, model_completion=True).as_long() - 4 * w.untagged
            s = z3.Solver()  # the condition allows that packet: z3 on its bytes, not the Witness
            s.set("rlimit", CHECK_RLIMIT)
            s.add(*env, cond, PACKET_LEN == length, *[PACKET[i] == b for i, b in enumerate(untagged[:60])])
            assert s.check() == z3.sat
    assert seen  # vlan_tags has paths whose witness is tagged and whose condition allows no tag
