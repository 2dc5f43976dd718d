"""A path's counterexample frame (rules/counterexample.py `_example`) does not depend on the z3
queries the process asked before it.

z3 hash-conses terms per context and orders its choices by term ids, so the model a check
returns depends on every term the context made before. The frame's classes decide which
assumptions `_suggest` tries (issue 14: xdpfilt_dny_udp's path 1 frame was classed
[malformed, fragments] in one run and [IP options, fragments] in another, so no-ip-options
was tried in one and not the other), and the path the frame takes is printed. The frames are
asked in a context of their own (rules/isolation.py): after any history, the same path gets
a frame of the same kind and classes, taking the same path. The test makes unrelated terms
and a query in the program's context between the runs; with the shared context the frames
differ (the second test, so that the first can fail).
"""

from __future__ import annotations

import pytest
import z3
from conftest import need_object

import corpus
from analyzer.classify import classes
from analyzer.explore import explore
from analyzer.fields import frame
from analyzer.symbolic import PACKET_LEN
from lifter.program import load_object
from rules import counterexample
from rules.counterexample import _Asker, _example
from rules.reasons import account
from rules.ruleset import build

#: xdpfilt_dny_udp's paths asked: a map-decided drop (1) and the UDP drop (12).
PATHS = (1, 12)


@pytest.fixture(scope="module")
def dny_udp():
    obj = load_object(need_object(corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_dny_udp.o"))
    e = explore(obj, obj.programs[0])
    rs = build(e, ())
    rs.finish("eth0", "skip_sw")
    codes = {f.path: f.reason.code for f in account(e, rs, classes(e)[1]) if f.reason is not None}
    return e, rs, codes


def _frames(state, junk: int) -> dict[int, tuple]:
    """Per path of PATHS: its example's kind, frame classes, the path the frame takes and its
    verdict, after `junk` unrelated terms and one query in the program's context."""
    e, rs, codes = state
    if junk:
        xs = [z3.BitVec(f"history!{junk}!{i}", 32) + i for i in range(junk)]
        z3.Solver().check(z3.Or([x == 7 for x in xs[:50]]))
    ask = _Asker(rs)  # a fresh one: its memo would answer the second run from the first
    out = {}
    for pid in PATHS:
        ex = _example(rs, ask, e.paths[pid], codes[pid])
        out[pid] = (ex.kind, tuple(frame(ex.frame).classes), ex.other, ex.other_verdict)
    return out


def test_frames_do_not_depend_on_history(dny_udp):
    first = _frames(dny_udp, 0)
    assert all(kind == "differs" for kind, *_ in first.values())
    for junk in (3000, 1234, 77):
        again = _frames(dny_udp, junk)  # (not in the assert: pytest would print the terms)
        assert again == first


def test_shared_context_depends_on_history(dny_udp, monkeypatch):
    """Asked in the program's own context, the same paths get frames of other classes or
    taking other paths: what the test above guards against is real."""

    def shared(*constraints):
        """_shortest as it was: the same queries in the program's context."""
        s = z3.Solver()
        s.set("rlimit", counterexample.QUERY_RLIMIT)
        s.add(*constraints)
        for limit in counterexample.LENGTHS:
            s.push()
            if limit is not None:
                s.add(z3.ULE(PACKET_LEN, limit))
            if s.check() == z3.sat:
                return s.model()
            s.pop()
        return None

    monkeypatch.setattr(counterexample, "_shortest", shared)
    runs = {repr(_frames(dny_udp, n)) for n in (0, 3000, 1234, 77)}
    assert len(runs) > 1
