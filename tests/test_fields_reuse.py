"""Work the decoder no longer does twice, and the texts that stay the same without it.

* whether a premise model satisfies a branch `cond ∧ c` (`Decoder._satisfies`) is worked out
  from whether it satisfies `cond` (once per model) and `c`, not by evaluating the whole path
  condition again for each branch: every answer is the whole evaluation's (checked for every
  condition known and every model at hand at the end of each rendering: both answers occur,
  on branches too), and the texts are the ones the whole evaluation gives;
* the terms `layout` asks about are made once (`fields._claim`, `_equal`, `_negation`): each
  one returned is the term a fresh build gives (the key names it), and the texts are the ones
  terms made afresh for every question give;
* a condition's conjuncts at constant offsets (`fields._fixed_part`) are worked out once per
  term: each answer is the walk's, and the texts are the ones the walk each time gives.
"""

from __future__ import annotations

import pytest
import z3
from conftest import decoded_texts, explored_with_witnesses

import analyzer.fields as fields
import corpus
from analyzer.fields import Decoder

OBJECTS = [
    corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_tcp.o",
    corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_dny_udp.o",
    corpus.BUILD_DIR / "clang" / "vlan_tags.o",
]


def _whole(m: z3.ModelRef, known) -> bool:
    return z3.is_true(m.eval(known.cond, model_completion=True))


@pytest.fixture(scope="module", params=OBJECTS, ids=lambda p: p.stem)
def explored(request):
    return request.param.stem, explored_with_witnesses(request.param)


def test_a_model_satisfies_a_branch_as_it_satisfies_the_whole_condition(explored, monkeypatch):
    stem, e = explored
    reference = _texts_with(e, monkeypatch, lambda self, m, known: _whole(m, known))
    monkeypatch.undo()
    seen: set[tuple[bool, bool]] = set()  # (a branch, the answer)
    forget = Decoder._forget

    def checking(self):
        for known in list(self.known.values()):
            for m in self.models:
                answer = self._satisfies(m, known)
                assert answer == _whole(m, known), known.cond
                seen.add((known.via is not None, answer))
        forget(self)

    monkeypatch.setattr(Decoder, "_forget", checking)
    assert decoded_texts(e, expand_keys=False) == reference
    if stem.startswith("xdpfilt"):  # conditions with Or branches
        assert {(True, True), (True, False)} <= seen  # branches, both answers: the check bites


def _texts_with(e, monkeypatch, satisfies) -> list[str]:
    monkeypatch.setattr(Decoder, "_satisfies", satisfies)
    return decoded_texts(e, expand_keys=False)


def test_terms_made_once_ask_what_fresh_terms_ask(explored, monkeypatch):
    _, e = explored
    claim, negation = fields._claim, fields._negation
    made = []

    def checking_claim(key, make):
        term = claim(key, make)
        assert term.eq(make()), key  # the key names the term: the one a fresh build gives
        made.append(key[0])
        return term

    def checking_negation(c):
        term = negation(c)
        assert term.eq(z3.Not(c))
        return term

    monkeypatch.setattr(fields, "_claim", checking_claim)
    monkeypatch.setattr(fields, "_negation", checking_negation)
    kept = decoded_texts(e, expand_keys=False)
    assert {"vlan", "eq"} <= set(made)
    monkeypatch.setattr(fields, "_claim", lambda key, make: make())
    monkeypatch.setattr(fields, "_negation", z3.Not)
    assert decoded_texts(e, expand_keys=False) == kept


def test_fixed_parts_worked_out_once_are_the_walk_s(explored, monkeypatch):
    _, e = explored
    fixed, walk = fields._fixed_part, fields._conjuncts_at_fixed_offsets
    calls = []

    def checking(cond):
        got = fixed(cond)
        assert [f.get_id() for f in got] == [f.get_id() for f in walk(cond)]
        calls.append(cond.get_id())
        return got

    monkeypatch.setattr(fields, "_fixed_part", checking)
    kept = decoded_texts(e, expand_keys=False)
    assert len(calls) > len(set(calls))  # the same term met again: the memo answered
    monkeypatch.setattr(fields, "_fixed_part", walk)
    assert decoded_texts(e, expand_keys=False) == kept
