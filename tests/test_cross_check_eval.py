"""The cross-check's angr->z3 direction: z3 paths given to an angr model by evaluating their
conditions on it (crosscheck.Z3Eval, the default) answer as the solver does (issue 16).

The oracle is the solver-only way (`CrossCheck.z3_eval = "solve"`: every z3 path condition
checked by z3 with the input fixed, the way before): on every angr model of a few corpus
objects (maps and their entries, globals, rewrites and a grown packet, tail calls, a helper's
random result that evaluation leaves free) both give the same outcomes or cut reason, and
the evaluation actually decided paths without the solver (else it would test nothing).
"""

from __future__ import annotations

import pytest

import corpus
from analyzer.explore import Options
from lifter.program import load_object
from tests.conftest import need_object

pytest.importorskip("analyzer.angr_engine", reason="the angr extra is not installed")
from analyzer import crosscheck  # noqa: E402

#: Objects with what they exercise: map entries (hash, array, lpm), global data, packet
#: rewrites, adjust_head (bytes the model invents), tail calls, a random helper result.
OBJECTS = (
    "thesis_ddos_blacklist",
    "lpm_src_block",
    "globals",
    "rewrite_tos",
    "tx_vlan_push",
    "tailcall_dispatch",
    "random_drop",
)


@pytest.mark.parametrize("stem", OBJECTS)
def test_evaluation_answers_as_the_solver(stem, monkeypatch):
    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o"))
    seen: list = []
    original = crosscheck.CrossCheck._z3_outcomes

    def recording(self, inp, expected):
        seen.append((inp, expected))
        return original(self, inp, expected)

    monkeypatch.setattr(crosscheck.CrossCheck, "_z3_outcomes", recording)
    checks = [crosscheck.cross_check(obj, prog, Options()) for prog in obj.programs if prog.is_xdp]
    monkeypatch.setattr(crosscheck.CrossCheck, "_z3_outcomes", original)
    assert seen, "no angr model was compared"
    evaluated = 0
    for check in checks:
        for inp, expected in seen:
            check.z3_eval, check.z3_evaluated, check.z3_solved = "evaluate", 0, 0
            by_eval = check._z3_outcomes(inp, expected)
            evaluated += check.z3_evaluated
            check.z3_eval = "solve"
            assert by_eval == check._z3_outcomes(inp, expected), (stem, str(inp))
    assert evaluated > 0, "evaluation decided no z3 path"


def test_free_helper_result_asks_the_solver():
    """random_drop decides on bpf_get_prandom_u32: its condition does not evaluate to a
    constant on the input, so those paths go to the solver (and the answer is still the
    solver's, test above)."""
    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / "random_drop.o"))
    prog = next(p for p in obj.programs if p.is_xdp)
    check = crosscheck.cross_check(obj, prog, Options())
    assert check.report.angr_compared > 0 and not check.report.disagreements
    assert check.z3_solved > 0, (check.z3_evaluated, check.z3_solved)


@pytest.mark.parametrize(
    "stem, walks",
    [
        ("ipv4_options", True),  # the transport header at 14 + 4 * IHL: an offset taken from the packet
        ("thesis_static_rules", False),  # every read at a fixed offset
    ],
)
def test_walk_is_recorded(stem, walks):
    """What mode "auto" goes by: angr records the first packet read at an offset that
    depends on packet bytes (by hand from the sources: ipv4_options reads past the IHL)."""
    from analyzer.angr_engine import explore_angr

    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o"))
    a = explore_angr(obj, next(p for p in obj.programs if p.is_xdp), Options())
    assert (a.walk is not None) == walks, a.walk


@pytest.mark.parametrize("stem", ("rewrite_tos", "tx_vlan_push", "thesis_ddos_blacklist"))
def test_output_read_as_the_input_only_where_it_is(stem):
    """`CrossCheck._output_is_input` lets an angr path's expected output be the input
    packet's bytes without translating its term to z3: only where the output bytes equal
    the input's in every model of the path (claripy's solver finds no model where they
    differ). rewrite_tos writes the TOS byte and tx_vlan_push grows the packet: some of
    their paths' outputs differ from the input; thesis_ddos_blacklist only reads: every
    one of its paths takes the shortcut."""
    from angr import claripy

    from analyzer.angr_engine import explore_angr

    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o"))
    prog = next(p for p in obj.programs if p.is_xdp)
    a = explore_angr(obj, prog, Options(merge=False))  # one path per way through the program
    check = crosscheck.CrossCheck(obj, prog, Options(), crosscheck.explore(obj, prog, Options()), a, test_run=False)
    taken, differing = [], 0
    for path in a.paths:
        st = path.state
        if path.verdict == "UNKNOWN" or path.notes or not st.solver.satisfiable():
            continue
        size = st.solver.eval(path.end - path.head)
        if not 0 < size <= len(a.packet):
            continue
        same = [path.end - path.head == size]
        out = check._output_bytes(path, size)
        differs = st.solver.satisfiable(extra_constraints=same + [out != claripy.Concat(*a.packet[:size])])
        taken.append(check._output_is_input(path, a, size))
        assert not (taken[-1] and differs), (stem, path.id)
        differing += differs
    assert any(taken), "no path took the shortcut"
    assert all(taken) if stem == "thesis_ddos_blacklist" else differing, (stem, taken)
