"""`Synthesizer._good_check` asks the shield loop's typical-packet questions (`shield`'s
narrowest match, `widen`'s merged one) of one solver per block and path, held while `prove`
works on the block, each question pushed and popped (rules/synthesis.py `_typical_good`,
issue 14: z3 reads the block's big fixed part once, not once a question).

The answers must be the plain checks' (a fresh solver per question, as before): each one is
compared here, on icmpv6_filter's echo-request DROP block (path 4), which goes through all
MAX_SHIELDS rounds with both answers (shields refused and taken, merges refused and made),
and the block ends with the same shields either way.
"""

from __future__ import annotations

import z3

import corpus
from analyzer.exploration import Options
from analyzer.explore import explore
from lifter.program import load_object
from rules.synthesis import DROP, Block, Synthesizer, solver
from tests.conftest import need_object


def _plain(s: Synthesizer, b: Block, extra: list[z3.BoolRef]) -> z3.CheckSatResult:
    """_good_check's answer by a fresh solver per path (its code before the held solvers)."""
    own = [pid for pid in b.paths if s.outcomes[pid] == b.outcome]
    others = [p.id for p in s.e.paths if p.id not in own and s.outcomes[p.id] == b.outcome]
    answer = z3.unsat
    for pid in own + others:
        r = solver(s.region(b), s.conds[pid], *s.env, *extra).check()
        if r == z3.sat:
            return r
        if r == z3.unknown:
            answer = r
    return answer


def _proved(monkeypatch, incremental: bool) -> tuple[Block, list[tuple], int]:
    """icmpv6_filter's path 4 block after `prove`; per _good_check question the answer
    given (held solvers on or off) and the plain one; how many held solvers were made."""
    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / "icmpv6_filter.o"))
    e = explore(obj, obj.programs[0], Options(witnesses=True))
    s = Synthesizer(e, (), {})
    p = e.paths[4]
    assert s.outcomes[p.id] == DROP
    b = s.extract(p, DROP, quiet=True)
    asked: list[tuple] = []
    held: set[int] = set()
    real_check, real_typical = Synthesizer._good_check, Synthesizer._typical_good

    def good_check(self, block, query, extra):
        r = real_check(self, block, query, extra)
        asked.append((r, _plain(self, block, extra)))
        return r

    def typical_good(self, block, pid):
        got = real_typical(self, block, pid)
        if got is not None:
            held.add(id(got))
        return got

    monkeypatch.setattr(Synthesizer, "_good_check", good_check)
    monkeypatch.setattr(Synthesizer, "_typical_good", typical_good if incremental else lambda self, block, pid: None)
    s.prove(b, [])
    monkeypatch.undo()
    return b, asked, len(held)


def test_held_solver_answers_are_the_plain_checks(monkeypatch):
    b, asked, held = _proved(monkeypatch, incremental=True)
    assert held >= 1 and len(asked) > held, "questions went to held solvers, several to one"
    assert {str(r) for r, _ in asked} == {"sat", "unsat"}
    assert [r for r, _ in asked] == [plain for _, plain in asked]
    plain_b, _, none = _proved(monkeypatch, incremental=False)
    assert none == 0
    assert (b.shields, b.refused, b.proved, str(b.why)) == (
        plain_b.shields,
        plain_b.refused,
        plain_b.proved,
        str(plain_b.why),
    )
