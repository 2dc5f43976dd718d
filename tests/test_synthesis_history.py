"""The shield loop (rules/synthesis.py `Synthesizer.prove`) does not depend on the z3 queries
asked before it.

z3 hash-conses terms per context and orders its choices by term ids, so which counterexample
a check returns depends on every term the context made before. prove turns counterexamples
into pass shields and gives a block up after MAX_SHIELDS of them, so with the program's own
context its verdict on icmpv6_filter's echo-request block (IPv6 extension headers move the
ICMPv6 header where flower still finds it: every shield takes good packets too) changed with
the queries extraction happened to ask (issue 14: model reuse in extraction turned path 4's
"taken by a pass shield" into "not proved after 12 shields"). The counterexamples are asked
in a context of their own (rules/isolation.py `isolated`): the same block gets the same shields and the same
verdict after any history. The test makes other terms and queries in between, so the
program context's term ids differ between the two proofs; with the shared context the
shields differ (checked by the second test, so the first can fail).
"""

from __future__ import annotations

import z3

import corpus
from analyzer.explore import explore
from lifter.program import load_object
from rules import synthesis
from rules.flower import render
from rules.synthesis import Synthesizer
from tests.conftest import need_object


def _echo_block_proof(e, junk: int) -> tuple:
    """prove's result (proved, reason, shields) for icmpv6_filter's path 4 block, after
    `junk` unrelated terms and one query in the program's context."""
    if junk:
        xs = [z3.BitVec(f"history!{i}", 32) + i for i in range(junk)]
        z3.Solver().check(z3.Or([x == 7 for x in xs[:50]]))
    s = Synthesizer(e, (), {})
    p = e.paths[4]
    assert s.outcomes[p.id] == synthesis.DROP
    block = s.extract(p, s.outcomes[p.id], quiet=True)
    assert block.sets == {"icmp_type": (128,), "ip_proto": (58,)}  # ICMPv6 echo request
    s.prove(block, [])
    return block.proved, str(block.why), [" ".join(render(m)) for m in block.shields]


def _exploration():
    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / "icmpv6_filter.o"))
    return explore(obj, obj.programs[0])


def test_shields_do_not_depend_on_history():
    e = _exploration()
    first = _echo_block_proof(e, 0)
    assert not first[0] and first[2], "the block is refused with shields (flower cannot separate)"
    assert _echo_block_proof(e, 3000) == first
    assert _echo_block_proof(e, 1234) == first


def test_shared_context_depends_on_history(monkeypatch):
    """Without the context of its own the same proofs give other shields: what the test
    above guards against is real."""

    def shared(*constraints, timeout_ms=None):
        s = synthesis.solver(*[c for x in constraints for c in (x if isinstance(x, list) else [x])])
        r = s.check()
        return r, s.model() if r == z3.sat else None

    monkeypatch.setattr(synthesis, "isolated", shared)
    e = _exploration()
    runs = {repr(_echo_block_proof(e, n)) for n in (0, 3000, 1234)}
    assert len(runs) > 1
