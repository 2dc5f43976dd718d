"""The decoder keeps z3's unknown answers that the resource limit gave, however z3 words them.

tests/data/rlimit_canceled.smt2 is a premise `rules` asks on xdpfilt_alw_all. Under
fields.QUERY_RLIMIT z3 stops it with the reason "canceled" (its SMT core noticing the limit),
the same way on every try. Without a timeout that unknown is the limit's (nothing else can
stop z3): it is kept like any answer, and a second decoder asking it gets it without z3. With
a timeout a "canceled" may be the timer's, and is not kept (a timer stop depends on the
machine, not on the question).

The first two tests ask z3 in a fresh interpreter (`_fresh`): in a process that did much
before (tests/test_printed_proof.py's builds, in one order of test files), the same query in a
fresh context came out sat under the limit. What z3 does at its resource limit is a function of
the question only within one process history, which is all the decoder's memo needs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import z3
from conftest import ROOT

import analyzer.fields as fields

QUERY = Path(__file__).resolve().parent / "data" / "rlimit_canceled.smt2"


def _question() -> list[z3.BoolRef]:
    return list(z3.parse_smt2_string(QUERY.read_text()))


def _fresh(body: str) -> list:
    """The JSON list `body` prints, run in a fresh interpreter with the question parsed as `q`."""
    prelude = (
        "import json, z3\n"
        "import analyzer.fields as fields\n"
        "from analyzer.fields import Decoder\n"
        f"q = list(z3.parse_smt2_string(open({str(QUERY)!r}).read()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(body)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_query_is_stopped_by_the_limit_as_canceled():
    first, again = _fresh(
        """
        def reason():
            ctx = z3.Context()
            s = z3.Solver(ctx=ctx)
            s.set("rlimit", fields.QUERY_RLIMIT)
            s.add(*[f.translate(ctx) for f in q])
            answer = s.check()
            return [str(answer), s.reason_unknown() if answer == z3.unknown else ""]
        print(json.dumps([reason(), reason()]))
        """
    )
    assert first == ["unknown", "canceled"]
    assert again == first  # deterministic: the same stop on every try


def test_an_unknown_of_the_limit_is_kept_without_a_timeout():
    solved, one, one_checks, two, two_checks = _fresh(
        """
        answer, model, by_limit = fields._Session().solve(q, None)
        one, two = Decoder(), Decoder()
        a, b = one._check(q), two._check(q)
        print(json.dumps([[str(answer), model is None, by_limit], [str(a[0]), a[1] is None],
                          one.checks, [str(b[0]), b[1] is None], two.checks]))
        """
    )
    assert solved == ["unknown", True, True]
    assert one == ["unknown", True]
    assert one_checks == 1
    assert two == ["unknown", True]
    assert two_checks == 0  # kept: the answer z3 gives the question every time


def test_a_canceled_unknown_under_a_timeout_is_not_taken_for_the_limit():
    question = _question()
    # a 1 ms timer stops z3 long before the resource limit (~25 ms of search on this query)
    answer, _, by_limit = fields._Session().solve(question, 1)
    assert answer == z3.unknown
    assert not by_limit
