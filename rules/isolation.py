"""z3 queries asked in a context of their own, so that their models do not depend on history.

z3 hash-conses terms per context and orders its choices by term ids, so which model a check
returns depends on every term its context made before: the queries extraction, reports and
other proofs happened to ask. A query whose model decides what xdp2tc prints (the shields a
counterexample leads to, a counterexample frame's class and the suggestion made from it) is
asked here instead, in a fresh `z3.Context`, and the model translated back into the main
context.

The fresh context is built from the constraints' SMT-LIB text (z3's printer, parsed there),
not by `translate`: a translated query still gave other models after other histories of
unrelated checks in the main context (issue 14: 4 models for one query after 0, 1, 5, 50 and
200 earlier checks; ipv6_filter's and xdpfilt_alw_ip's printed frames moved when z3 work
moved), the parsed one the same model in every history tried (tests/test_isolation.py;
why the translated copy, the same terms, is not enough was not found out).
The text is used only when it defines the same constraints: it must parse, and the parsed
assertions, translated back, must be the very terms given, one by one (z3 hash-conses, so
that is `eq`; it makes no new term in the main context). Two habits of the printer are
undone first, else nearly every query of the corpus failed that check: it writes
`(distinct a b)` as `(and (distinct a b) true)`, and leaves out a last assertion `true`.
The text is printed from a context holding nothing but the constraints (translated there):
z3's printer names a subterm with `let` where the term has more than one reference, and in
the main context that counts every other holder of the term (a solver kept for later, a
Python variable), so the main context's text of one query changed with what else was alive
(with `_good_check`'s held solvers, 10 objects' frames moved).
The text is not used when two constants share a name (with different sorts it is ambiguous:
z3 refuses it), when a name cannot be written in SMT-LIB (`|`, `\\`, the empty name, a
builtin's name, a leading digit) or when the text loses an attribute (quantifiers' and
lambdas' ids): then the constraints are translated, as before, and the model may depend on
history again. Never is a different query asked. A caller whose constraints hold a
lambda made by z3.Lambda (optiontwins' twin packet) says so (`text=False`): its text never
comes back the same, and its constraints are translated without the round trip. (Counted
before `text` existed: the corpus' 92 objects asked 828 such queries; besides
tx_vlan_push's, whose lambda comes back with a `qid` the parser made, every options-twin
query fell back.)

What is still not independent of history: the constraints themselves, as the main context
made them (a term z3 built in another shape - simplify orders arguments by id - is another
query), and every query asked in the main context (`synthesis.solver`, extraction, reports).
"""

from __future__ import annotations

import re

import z3

from analyzer.satmodel import check, plainest
from analyzer.symbolic import PACKET, PACKET_LEN, fresh_context


def _flat(constraints) -> list[z3.BoolRef]:
    return [c for x in constraints for c in (x if isinstance(x, list) else [x])]


#: z3's SMT-LIB printer writes `(distinct a b)` as `(and (distinct a b) true)`: another term
_DISTINCT = re.compile(r"\(and \(distinct ")
_PARENS = re.compile(r"[()]|\|[^|]*\|")


def _undistinct(text: str) -> str:
    """`text` with the printer's `(and (distinct ...) true)` wrappers taken off (only where
    `true)` follows the distinct's closing parenthesis; `parsed` checks the result anyway)."""
    cut: list[tuple[int, int]] = []
    for m in _DISTINCT.finditer(text):
        depth = 0
        for tok in _PARENS.finditer(text, m.start() + 5):
            depth += {"(": 1, ")": -1}.get(tok.group(), 0)
            if depth == 0:
                end = tok.end()
                if text.startswith(" true)", end):
                    cut += [(m.start(), m.start() + 5), (end, end + 6)]
                break
    if not cut:
        return text
    cut.sort()
    out, at = [], 0
    for a, b in cut:
        out.append(text[at:a])
        at = b
    out.append(text[at:])
    return "".join(out)


def smt2_text(constraints: list[z3.BoolRef]) -> str:
    """The SMT-LIB benchmark asserting `constraints` one by one (a `true` too), declarations
    first, as z3's printer writes it (`Solver.to_smt2`'s) in a context holding only them
    (its `let`s then depend on the constraints alone), with `distinct` as itself."""
    mid = fresh_context()
    constraints = [c.translate(mid) for c in constraints]
    true = z3.BoolVal(True, mid)
    vec = (z3.Ast * len(constraints))(*[c.as_ast() for c in constraints])
    text = z3.Z3_benchmark_to_smtlib_string(
        true.ctx_ref(), "benchmark generated from python API", "", "unknown", "", len(constraints), vec, true.as_ast()
    )
    return _undistinct(text)


def parsed(s: z3.Solver, constraints: list[z3.BoolRef]) -> bool:
    """Assert `constraints` (non-empty, in the main context) into `s`, an empty solver of
    another context, by parsing their SMT-LIB text there; whether that gave the same
    constraints (parsed without error, and the parsed assertions translated back are
    `constraints`, one by one). When it returns False, `s` holds something else: throw it away."""
    try:
        s.from_string(smt2_text(constraints))
    except z3.Z3Exception:
        return False
    got = s.assertions()
    if len(got) != len(constraints):
        return False
    main = constraints[0].ctx
    return all(g.translate(main).eq(c) for g, c in zip(got, constraints))


def _solver(ctx: z3.Context, timeout_ms: int | None, rlimit: int | None) -> z3.Solver:
    s = z3.Solver(ctx=ctx)
    if rlimit is not None:
        s.set("rlimit", rlimit)
    if timeout_ms is not None:
        s.set("timeout", timeout_ms)
    return s


def own_solver(*constraints, timeout_ms: int | None = None, rlimit: int | None = None, text: bool = True) -> z3.Solver:
    """A solver in a fresh z3 context holding the constraints (lists are flattened), parsed
    there from their SMT-LIB text (or translated, where the text would not be the same
    constraints: the module's docstring); with a timeout or z3's deterministic resource
    limit. Terms added to it later must be translated into its context (`s.ctx`): a
    constant translated there is the parsed one (same name and sort, checked by `parsed`).

    `text=False` is for constraints that hold a lambda made by z3.Lambda: its text never
    comes back the same (z3.Lambda gives it no quantifier id, `<null>`; the parser names
    it `k!N`, so `parsed` is False), and they are translated at once, as they would be
    after the failed round trip (optiontwins' query: its twin packet is a lambda; ~20 ms
    of printing, parsing and two contexts saved on the 48-OR stress programs)."""
    flat = _flat(constraints)
    if text:
        s = _solver(fresh_context(), timeout_ms, rlimit)
        if not flat or parsed(s, flat):
            return s
    ctx = fresh_context()  # not the one a failed parse made terms in
    s = _solver(ctx, timeout_ms, rlimit)
    s.add(*[c.translate(ctx) for c in flat])
    return s


def sibling(s: z3.Solver, *extra: z3.BoolRef, rlimit: int | None = None) -> z3.Solver:
    """A new solver in `s`'s context (an own_solver's: its terms are the query's alone)
    holding `s`'s assertions and `extra` (terms of that context), with z3's deterministic
    resource limit: how to ask a narrower query without `push`. A pushed solver is answered
    by z3's incremental engine, without the preprocessing a solver checked unpushed gets:
    the 48-OR stress programs' shortest-frame query ran out of its resource limit there at
    64 and 128 bytes (0.25-0.37 s each) and fell back to a 1344-byte frame, where a solver
    of its own answers each bound in ~0.04 s (issue 14). Not the first choice: where the
    incremental engine answers (xdp-filter's frame queries, mostly unsat at 64 and 128
    bytes), it answers sooner, its learnt clauses kept from bound to bound."""
    out = _solver(s.ctx, None, rlimit)
    out.add(*s.assertions(), *extra)
    return out


def home(model: z3.ModelRef) -> z3.ModelRef:
    """A model of an own_solver, translated back into the main context."""
    return model.translate(z3.main_ctx())


def plain(s: z3.Solver, model: z3.ModelRef, *extra: z3.BoolRef) -> z3.ModelRef:
    """`model`, a model of own_solver `s` (with `extra`, terms of its context, asserted too),
    with the packet bytes the assertions leave free set to 0 (analyzer.satmodel.plainest),
    worked out in `s`'s context: the terms it makes are not the main context's, whose term
    ids the queries asked there depend on (rules/isolation.py's docstring)."""
    return plainest(model, [*s.assertions(), *extra], PACKET.translate(s.ctx), PACKET_LEN.translate(s.ctx))


def isolated(
    *constraints, timeout_ms: int | None = None, rlimit: int | None = None, text: bool = True
) -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
    """check() of the constraints (lists are flattened) in a z3 context of their own, and
    the model (back in the main context) when satisfiable: one in which they hold
    (analyzer/satmodel.py; unknown where z3 gives none). `text`: as own_solver's."""
    s = own_solver(*constraints, timeout_ms=timeout_ms, rlimit=rlimit, text=text)
    r, model = check(s)
    if r == z3.sat:
        return z3.sat, home(model)
    return (z3.unsat if r == z3.unsat else z3.unknown), None
