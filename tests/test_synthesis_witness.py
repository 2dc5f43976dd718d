"""Synthesis starting from exploration's witnesses (Path.witness, rules/synthesis.py `_witness`).

Exploration keeps, per path, the model its solver found when that model was fetched (when
asked: Options.witnesses).
Synthesis uses it instead of a query when z3's own evaluation of the query's constraints
(the path's condition, the environment and assumptions, typical packets) in that model is
true. Two things must hold: each kept witness really is a model of its path's condition
(checked here by z3's evaluation, independent of how exploration got it), and starting
from it changes no extracted block: every target path's blocks must equal those extracted
with the witnesses hidden (each query then asked as before), on programs whose paths take
tagged and untagged frames.
"""

from __future__ import annotations

import dataclasses

import pytest
import z3

import corpus
from analyzer.exploration import Options
from analyzer.explore import explore
from lifter.program import load_object
from rules.synthesis import Synthesizer
from tests.conftest import need_object
from tests.test_synthesis_keys import extracted_blocks

STEMS = ["vlan_tags", "qinq_tags", "thesis_static_rules", "or_stress_k2"]


def _exploration(stem):
    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o"))
    return explore(obj, obj.programs[0], Options(witnesses=True))


@pytest.mark.parametrize("stem", STEMS)
def test_witness_is_a_model_of_its_path(stem):
    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o"))
    assert all(p.witness is None for p in explore(obj, obj.programs[0]).paths), "kept only when asked"
    e = _exploration(stem)
    kept = [p for p in e.paths if p.witness is not None]
    assert kept, "exploration kept some witness"
    for p in kept:
        assert z3.is_true(p.witness.eval(e.condition(p), model_completion=True)), f"path {p.id}"
        assert all(z3.is_true(p.witness.eval(c, model_completion=True)) for c in e.environment())


def _typical_witnesses(e):
    """Each path's witness replaced by a model z3 gives of it under typical packets (when
    there is one): the queries synthesis asks first are then all answered by witnesses."""
    s = Synthesizer(e, ("no-ip-options",), {})
    out = []
    for p in e.paths:
        q = z3.Solver()
        q.add(s.conds[p.id], *s.env, s.typical)
        out.append(dataclasses.replace(p, witness=q.model() if q.check() == z3.sat else None))
    return out


@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("witnesses", ["explored", "typical"])
def test_blocks_same_without_witness(stem, witnesses, monkeypatch):
    """Exploration's witnesses (whether they satisfy the queries depends on the models z3
    gave), then models of the typical-packet query, which always do."""
    used = []
    real = Synthesizer._witness

    def counted(self, p, *extra):
        m = real(self, p, *extra)
        used.append(m is not None)
        return m

    monkeypatch.setattr(Synthesizer, "_witness", counted)
    e = _exploration(stem)
    if witnesses == "typical":
        e.paths = _typical_witnesses(e)
    with_witness = extracted_blocks(e)
    assert any(with_witness.values()), "the program has target paths with blocks"
    if witnesses == "typical":
        assert any(used), "some query was answered by a witness"
    hidden = _exploration(stem)
    hidden.paths = [dataclasses.replace(p, witness=None) for p in hidden.paths]
    assert with_witness == extracted_blocks(hidden)
