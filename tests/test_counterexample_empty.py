"""A block with no packet of another verdict gets one frame query, not one per frame class
(rules/counterexample.py `_Asker.empty`), and every path the same example as when each class
is asked.

xdp-filter's paths that synthesis gave up on have the block `protocol all` past a shield that
takes every packet: no frame differs there. Before, `_example` asked z3 for a frame of each
class an assumption rules out, then typical, then any (6 queries, each unsatisfiable); now
the first query's None is followed by one question on the block alone, and its unsat answer
stands for the rest (a query with more constraints has no model either).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from conftest import need_object

import corpus
from analyzer.classify import classes
from analyzer.explore import explore
from lifter.program import load_object
from rules import counterexample
from rules.counterexample import _Asker, _example
from rules.reasons import account
from rules.ruleset import build


@dataclass(repr=False)  # a failure's report shows it: no z3 term is printed
class Program:
    """xdpfilt_dny_udp explored, its rule set, and its software paths' reason codes."""

    e: object
    rs: object
    wanted: dict[int, str]


@pytest.fixture(scope="module")
def dny_udp() -> Program:
    obj = load_object(need_object(corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_dny_udp.o"))
    e = explore(obj, obj.programs[0])
    rs = build(e, ())
    rs.finish("eth0", "skip_sw")
    fates = account(e, rs, classes(e)[1])
    wanted = {f.path: f.reason.code for f in fates if not f.offloaded and f.reason.code != "pass-to-host"}
    return Program(e, rs, wanted)


def _examples(state: Program, monkeypatch) -> tuple[dict[int, tuple], int]:
    """Every software path's example (kind, frame, the path it takes, its verdict) with a
    fresh asker, and how many frame queries (`_shortest`) it took."""
    e, rs, wanted = state.e, state.rs, state.wanted
    asked = [0]
    shortest = counterexample._shortest

    def counted(*constraints):
        asked[0] += 1
        return shortest(*constraints)

    monkeypatch.setattr(counterexample, "_shortest", counted)
    ask = _Asker(rs)
    out = {}
    for pid, code in wanted.items():
        ex = _example(rs, ask, e.paths[pid], code)
        out[pid] = None if ex is None else (ex.kind, ex.frame, ex.other, ex.other_verdict)
    return out, asked[0]


def test_an_empty_block_is_asked_once_with_the_same_examples(dny_udp, monkeypatch):
    found, asked = _examples(dny_udp, monkeypatch)
    # every class asked (raising=False: without `empty` the test fails on the count)
    monkeypatch.setattr(_Asker, "empty", lambda self, *constraints: False, raising=False)
    every, asked_every = _examples(dny_udp, monkeypatch)
    assert found == every
    assert any(v is not None for v in found.values())
    assert asked_every - asked >= 5  # the empty block's other classes (xdp-filter: 5)
