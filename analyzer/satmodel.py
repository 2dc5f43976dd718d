"""A z3 check whose model is a model: every assertion of the solver holds in it.

z3 can answer `sat` with a model in which an assertion is false (z3-solver 5.3.1, the
version pyproject.toml pins; invalid models on array and bit-vector queries are a
long-known class of z3 bugs). Seen on flag_counter's witness
query (tests/data/invalid_model.smt2, printed by `rules` for its path 4): a solver checked
once, without `push` - z3's non-incremental engine, which preprocesses the query first -
returns UDP ports 0x0808 with the map's only entry at key 0, a packet that takes another
path; the same solver asked again with a scope pushed (the incremental engine) gives a
model that holds. Printed as a frame, the first was claimed DROP and the kernel passed it
(tests/test_frame_replay.py caught it while frames were asked unpushed).

Used where a model becomes a claim or builds one: counterexample frames
(rules/counterexample.py) and the isolated queries of synthesis (rules/isolation.py).
Not by field decoding (analyzer/fields.py), whose fresh-context questions got such models
on 5 objects of the corpus (port_flags_map, thesis_ddos_blacklist, rate_limiter,
lpm_src_block, tailcall_variable): there a model only refutes (a claim is stated on z3's
unsat alone), so a wrong one can leave a field unnamed, never name a wrong one; asked
through `check`, rate_limiter's path 2 lost `ipv4.saddr` (the incremental engine gave no
answer, so the premise had none either).

`check` therefore evaluates every assertion in the model it returns (`holds`: ~1 ms on
a counterexample query, nothing beside the solving), asks the incremental engine once when
one is false, and answers `unknown` without a model when that one's is not a model either:
a query xdp2tc cannot trust is one it has no answer to (a path left in software, a frame not
printed), never a claim resting on a wrong model.
"""

from __future__ import annotations

import z3


def holds(model: z3.ModelRef, assertions) -> bool:
    """Whether every one of `assertions` is true in `model`, completed where it says nothing
    (z3 completes the model itself: what it is read as later, e.g. a frame's bytes)."""
    return all(z3.is_true(model.eval(a, model_completion=True)) for a in assertions)


def check(s: z3.Solver) -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
    """s.check() and, when sat, a model in which all of s's assertions hold; `unknown` and
    None where z3 gives none (the module's docstring). A pushed scope is popped again: `s`
    holds what it held."""
    r = s.check()
    if r != z3.sat:
        return r, None
    model = s.model()
    held = s.assertions()
    if holds(model, held):
        return r, model
    s.push()  # the incremental engine: it reads the assertions without the preprocessing
    try:
        r = s.check()
        model = s.model() if r == z3.sat else None
    finally:
        s.pop()
    if model is not None and holds(model, held):
        return z3.sat, model
    return z3.unknown, None  # unsat now would contradict the sat before: no answer to trust
