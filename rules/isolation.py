"""z3 queries asked in a context of their own, so that their models do not depend on history.

z3 hash-conses terms per context and orders its choices by term ids, so which model a check
returns depends on every term its context made before: the queries extraction, reports and
other proofs happened to ask. A query whose model decides what xdp2tc prints (the shields a
counterexample leads to, a counterexample frame's class and the suggestion made from it) is
asked here instead: its constraints are translated into a fresh `z3.Context`, solved there,
and the model translated back into the main context. Its answer then depends on the
constraints alone.
"""

from __future__ import annotations

import z3

from analyzer.symbolic import fresh_context


def _flat(constraints) -> list[z3.BoolRef]:
    return [c for x in constraints for c in (x if isinstance(x, list) else [x])]


def own_solver(*constraints, timeout_ms: int | None = None, rlimit: int | None = None) -> z3.Solver:
    """A solver in a fresh z3 context holding the constraints (lists are flattened),
    translated there; with a timeout or z3's deterministic resource limit. Terms added to
    it later must be translated into its context (`s.ctx`)."""
    ctx = fresh_context()
    s = z3.Solver(ctx=ctx)
    if rlimit is not None:
        s.set("rlimit", rlimit)
    if timeout_ms is not None:
        s.set("timeout", timeout_ms)
    s.add(*[c.translate(ctx) for c in _flat(constraints)])
    return s


def home(model: z3.ModelRef) -> z3.ModelRef:
    """A model of an own_solver, translated back into the main context."""
    return model.translate(z3.main_ctx())


def isolated(
    *constraints, timeout_ms: int | None = None, rlimit: int | None = None
) -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
    """check() of the constraints (lists are flattened) in a z3 context of their own, and
    the model (back in the main context) when satisfiable."""
    s = own_solver(*constraints, timeout_ms=timeout_ms, rlimit=rlimit)
    r = s.check()
    if r == z3.sat:
        return z3.sat, home(s.model())
    return (z3.unsat if r == z3.unsat else z3.unknown), None
