"""The decoder keeps z3's unknown answers that the resource limit gave, however z3 words them.

tests/data/rlimit_canceled.smt2 is a premise `rules` asks on xdpfilt_alw_all. Under
fields.QUERY_RLIMIT z3 stops it with the reason "canceled" (its SMT core noticing the limit),
the same way on every try. Without a timeout that unknown is the limit's (nothing else can
stop z3): it is kept like any answer, and a second decoder asking it gets it without z3. With
a timeout a "canceled" may be the timer's, and is not kept (a timer stop depends on the
machine, not on the question).
"""

from __future__ import annotations

from pathlib import Path

import z3

import analyzer.fields as fields
from analyzer.fields import Decoder

QUERY = Path(__file__).resolve().parent / "data" / "rlimit_canceled.smt2"


def _question() -> list[z3.BoolRef]:
    return list(z3.parse_smt2_string(QUERY.read_text()))


def _reason(formulas: list[z3.BoolRef]) -> tuple[z3.CheckSatResult, str]:
    ctx = z3.Context()
    s = z3.Solver(ctx=ctx)
    s.set("rlimit", fields.QUERY_RLIMIT)
    s.add(*[f.translate(ctx) for f in formulas])
    answer = s.check()
    return answer, s.reason_unknown() if answer == z3.unknown else ""


def test_the_query_is_stopped_by_the_limit_as_canceled():
    question = _question()
    first = _reason(question)
    assert first == (z3.unknown, "canceled")
    assert _reason(question) == first  # deterministic: the same stop on every try


def test_an_unknown_of_the_limit_is_kept_without_a_timeout():
    fields.forget()
    question = _question()
    answer, model, by_limit = fields._Session().solve(question, None)
    assert (answer, model, by_limit) == (z3.unknown, None, True)
    one, two = Decoder(), Decoder()
    assert one._check(question) == (z3.unknown, None)
    assert one.checks == 1
    assert two._check(question) == (z3.unknown, None)
    assert two.checks == 0  # kept: the answer z3 gives the question every time


def test_a_canceled_unknown_under_a_timeout_is_not_taken_for_the_limit():
    question = _question()
    # a 1 ms timer stops z3 long before the resource limit (~25 ms of search on this query)
    answer, _, by_limit = fields._Session().solve(question, 1)
    assert answer == z3.unknown
    assert not by_limit
