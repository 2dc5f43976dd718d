"""Suggestions (`offloadable with --assume X`, rules/counterexample.py) on the corpus: the
paths whose blocks are the same under one assumption share one shield loop; what each path
is told must be what proving its own block alone concludes.

The oracle is the plain per-path procedure written out here on synthesis's public API:
for a path left to software for atypical packets or flower's view, with a `differs` frame,
each class of the frame (in order) names an assumption; a fresh synthesizer under it
extracts the path's block and proves it alone (`Synthesizer.prove(block, [])`); the first
that proves is the suggestion.
"""

from __future__ import annotations

import pytest
from conftest import corpus_object

from analyzer.classify import classes
from analyzer.explore import explore
from analyzer.fields import frame
from lifter.program import load_object
from rules.counterexample import RULES_OUT, _proves, examples
from rules.reasons import account
from rules.ruleset import build
from rules.synthesis import ASSUMPTIONS, DEFAULT_ASSUMPTIONS, Block, Outcome

#: Objects with suggestions (thesis_static_rules: path 7 with no-ip-options) and with
#: several paths of one block under one assumption (bounded_loop: 8 paths, no-ip-options).
OBJECTS = ("thesis_static_rules", "or_flags_tcp_k4", "tailcall_dispatch", "ipv6_filter", "bounded_loop")


def _state(stem: str):
    obj = load_object(corpus_object(stem))
    e = explore(obj, obj.programs[0])
    rs = build(e, ())
    rs.finish("eth0", "skip_sw")
    return e, rs, account(e, rs, classes(e)[1])


def _alone(rs, fates, found) -> tuple[dict[int, str | None], dict[tuple, list[int]]]:
    """Per path examples() gave a frame to: the suggestion proving its block alone gives;
    and which paths asked the same assumption with blocks of the same keys and outcome."""
    codes = {f.path: f.reason.code for f in fates if f.reason is not None}
    free = [a for a in ASSUMPTIONS if a not in DEFAULT_ASSUMPTIONS]
    synths, out, shapes = {}, {}, {}
    for pid, ex in sorted(found.items()):
        out[pid] = None
        if ex.kind != "differs" or codes.get(pid) not in ("atypical-packets", "not-expressible"):
            continue
        for c in frame(ex.frame).classes:
            a = RULES_OUT.get(c)
            if a not in free:
                continue
            s = synths.setdefault(a, rs.synth.with_assumption(a))
            outcome = s.outcomes[pid]
            block = s.extract(s.e.paths[pid], outcome, quiet=True) if isinstance(outcome, Outcome) else None
            if block is None:
                continue
            shape = (a, block.protocol, repr(sorted(block.sets.items())), repr(block.masked), repr(block.set_masks))
            shapes.setdefault(shape + (outcome,), []).append(pid)
            s.prove(block, [])
            if block.proved:
                out[pid] = a
                break
    return out, shapes


@pytest.mark.parametrize("stem", OBJECTS)
def test_suggestions_are_what_each_path_proves_alone(stem):
    """Every path's suggestion is the one the per-path procedure finds (on a fresh state:
    the shared work must not leak from one path to another)."""
    e, rs, fates = _state(stem)
    found = examples(rs, fates)
    got = {pid: ex.suggestion for pid, ex in sorted(found.items())}
    _, rs2, fates2 = _state(stem)
    want, _ = _alone(rs2, fates2, examples_without_suggestions(rs2, fates2))
    assert got == want


def examples_without_suggestions(rs, fates):
    """examples()' frames with the suggestions cleared (the oracle works them out again)."""
    found = examples(rs, fates)
    for ex in found.values():
        ex.suggestion = None
    return found


def test_corpus_has_suggestions_and_shared_blocks():
    """The objects above exercise both sides: some paths get a suggestion, and some
    assumption is asked by several paths whose blocks are the same (one shield loop)."""
    told, shared = 0, 0
    for stem in OBJECTS:
        _, rs, fates = _state(stem)
        want, shapes = _alone(rs, fates, examples_without_suggestions(rs, fates))
        told += sum(1 for a in want.values() if a)
        shared += sum(1 for pids in shapes.values() if len(pids) > 1)
    assert told >= 3 and shared >= 1


def _copy(b: Block, pid: int) -> Block:
    return Block(b.protocol, dict(b.sets), b.outcome, [pid], masked=dict(b.masked), set_masks=dict(b.set_masks))


def test_one_shield_loop_judges_each_path_as_prove_does():
    """thesis_static_rules' path 7 proves under no-ip-options. Its block stood for two
    paths at once (7 and each other path in turn) is judged per path exactly as
    `Synthesizer.prove` judges that block for that path alone; one loop gives the two
    paths different answers (path 7 proves, another does not)."""
    e, rs, _ = _state("thesis_static_rules")
    s = rs.synth.with_assumption("no-ip-options")
    b = s.extract(e.paths[7], s.outcomes[7], quiet=True)
    seen = set()
    for p in e.paths:
        if p.id == 7:
            continue
        got = _proves(s, [(7, _copy(b, 7)), (p.id, _copy(b, p.id))])
        want = []
        for pid in (7, p.id):
            alone = _copy(b, pid)
            s.prove(alone, [])
            if alone.proved:
                want.append(pid)
        assert got == want, p.id
        seen.add((7 in got, p.id in got))
    assert (True, False) in seen  # one block, one loop, two answers
