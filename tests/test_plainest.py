"""Models made plain before they are read (analyzer/satmodel.py `plainest`): a counterexample
frame's bytes and a prove counterexample's bytes that the query leaves free are 0.

Which of its many models z3 returns for a query is an accident of the query's form (issue 14:
a cheaper equivalent query gave other frames and shields). Bytes z3 set that no assertion
needs set are the plainest part of that accident: xdpfilt_dny_udp's path 1 frame was classed
[malformed, fragments] by a fragment field z3 filled for nothing, and `_suggest` then tried
no-fragments too. Checked here: on hand-made models (constrained bytes kept, free ones 0,
the result a model of the assertions), on every frame xdpfilt_dny_udp's examples ask for (no
byte of a frame that is not 0 can be set to 0 alone, its query's constraints still holding:
fails with the frames as z3 gives them).
"""

from __future__ import annotations

import pytest
import z3
from conftest import need_object

import corpus
from analyzer.classify import classes
from analyzer.explore import explore
from analyzer.satmodel import holds, plainest
from analyzer.symbolic import PACKET, PACKET_LEN
from lifter.program import load_object
from rules import counterexample
from rules.counterexample import _Asker, _example
from rules.reasons import account
from rules.ruleset import build


def _byte(i: int) -> z3.BitVecRef:
    return PACKET[z3.BitVecVal(i, 64)]


def _frame(model: z3.ModelRef) -> bytes:
    n = model.eval(PACKET_LEN, model_completion=True).as_long()
    return bytes(model.eval(_byte(i), model_completion=True).as_long() for i in range(n))


def test_free_bytes_become_zero_and_constrained_ones_stay():
    query = [PACKET_LEN == 64, _byte(12) == 8, _byte(13) == 0, _byte(20) != 0, z3.ULT(_byte(30), 0x40)]
    s = z3.Solver()
    s.add(*query, _byte(3) == 0x77, _byte(20) == 0x42, _byte(30) == 0x21, _byte(63) == 1, _byte(100) == 9)
    assert s.check() == z3.sat
    model = plainest(s.model(), query, PACKET, PACKET_LEN)
    want = bytearray(64)
    want[12], want[20] = 8, 0x42  # byte 20 must not be 0: z3's value stays
    assert _frame(model) == bytes(want)
    assert holds(model, query)


def test_a_model_it_cannot_change_is_given_back():
    query = [PACKET_LEN == 16, *[_byte(i) == i + 1 for i in range(16)]]
    s = z3.Solver()
    s.add(*query)
    assert s.check() == z3.sat
    model = plainest(s.model(), query, PACKET, PACKET_LEN)
    assert _frame(model) == bytes(range(1, 17)) and holds(model, query)


@pytest.fixture(scope="module")
def dny_udp():
    obj = load_object(need_object(corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_dny_udp.o"))
    e = explore(obj, obj.programs[0])
    rs = build(e, ())
    rs.finish("eth0", "skip_sw")
    fates = account(e, rs, classes(e)[1])
    return e, rs, [f for f in fates if not f.offloaded and f.reason is not None and f.reason.code != "pass-to-host"]


def _asked_frames(state, monkeypatch) -> list[tuple[tuple, z3.ModelRef]]:
    """(constraints, model) of every frame the software paths' examples ask for."""
    e, rs, fates = state
    asked = []
    real = counterexample._shortest

    def shortest(*constraints):
        model = real(*constraints)
        if model is not None:
            asked.append((constraints, model))
        return model

    monkeypatch.setattr(counterexample, "_shortest", shortest)
    ask = _Asker(rs)
    for f in fates:
        _example(rs, ask, e.paths[f.path], f.reason.code)
    return asked


def test_no_byte_of_a_frame_can_be_zero_alone(dny_udp, monkeypatch):
    asked = _asked_frames(dny_udp, monkeypatch)
    assert asked
    for constraints, model in asked:
        assert holds(model, constraints)
        data = _frame(model)
        value = model.eval(PACKET, model_completion=True)
        for i, b in enumerate(data):
            if b:
                model.update_value(PACKET, z3.Store(value, i, 0))
                assert not holds(model, constraints), (data.hex(), i)
        model.update_value(PACKET, value)


def test_frames_as_z3_gives_them_have_such_bytes(dny_udp, monkeypatch):
    """The test above fails without `plain`: z3's own frames have bytes no constraint needs."""
    monkeypatch.setattr(counterexample, "plain", lambda s, model, *extra: model)
    free = 0
    for constraints, model in _asked_frames(dny_udp, monkeypatch):
        value = model.eval(PACKET, model_completion=True)
        for i, b in enumerate(_frame(model)):
            if b:
                model.update_value(PACKET, z3.Store(value, i, 0))
                free += holds(model, constraints)
        model.update_value(PACKET, value)
    assert free > 0
