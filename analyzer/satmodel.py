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
`plainest` sets the bytes of a model's packet that its assertions leave free to 0, checked
by evaluation alone: counterexample frames are made of such models (rules/isolation.py
`plain`), so a frame's bytes show what its query needs, not what z3 happened to fill in.
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


def plainest(model: z3.ModelRef, assertions, packet: z3.ArrayRef, length: z3.BitVecRef) -> z3.ModelRef:
    """`model` (changed in place, and returned) with the bytes of its packet that
    `assertions` leave free set to 0: what is read from it (a shield's keys, a frame) then
    depends less on which of many models z3 returned, and a cheaper form of the same query
    can give the same answer. No solver is asked: candidates are evaluated.

    Bytes 0 .. len-1 that are not 0 are tried in a fixed order: all of them at once, else
    each half in turn (first half first), down to single bytes, keeping every try under
    which all `assertions` still hold, and again over the bytes left until a pass zeroes
    none: then no byte left that is not 0 can be set to 0 alone (the assertions would fail).
    Bytes past the length are 0. Which model z3 returned still shows where the assertions
    leave a choice among values other than 0 (one of 48 addresses, an IPv4 option's
    length): those bytes keep z3's values, so this is no canonical model. The assertions are
    evaluated in the model once with the packet left open, and each try is evaluated in
    what is left (in a model holding only the try: 3x faster than substituting it on the
    48-OR stress program's frame, whose 68 tries took 0.1 s so). The result holds every
    assertion (`holds`, evaluated in the changed model) - it is only kept then; else
    `model` is given back as it was."""
    n = model.eval(length, model_completion=True)
    if not z3.is_bv_value(n) or n.as_long() > MAX_PLAIN_LENGTH:
        return model
    was = model.eval(packet, model_completion=True)
    values = _packet_bytes(model, was, packet, n.as_long())
    free = z3.Const("plainest!packet", packet.sort())
    left = model.eval(z3.substitute(z3.And(*assertions), (packet, free)), model_completion=False)
    build = _ArrayBuilder(packet)

    probe = z3.Model(packet.ctx)

    def holds_with(trial: list[int]) -> bool:
        probe.update_value(free, build.array(trial))
        return z3.is_true(probe.eval(left, model_completion=True))

    def zeroed(at: list[int]) -> None:
        trial = list(values)
        for i in at:
            trial[i] = 0
        if holds_with(trial):
            values[:] = trial
        elif len(at) > 1:
            half = len(at) // 2
            zeroed(at[:half])
            zeroed(at[half:])

    nonzero = [i for i, v in enumerate(values) if v]
    while nonzero:  # passes until one zeroes no byte
        zeroed(nonzero)
        kept = [i for i in nonzero if values[i]]
        nonzero = kept if len(kept) < len(nonzero) else []
    model.update_value(packet, build.array(values))
    if not holds(model, assertions):
        model.update_value(packet, was)
    return model


#: Longest packet `plainest` works on (a longer model is left as z3 gave it).
MAX_PLAIN_LENGTH = 1 << 16


def _packet_bytes(model: z3.ModelRef, value: z3.ArrayRef, packet: z3.ArrayRef, n: int) -> list[int]:
    """Bytes 0 .. n-1 of `value` (the packet's value in `model`): read off its stores over a
    constant array where it is one (z3's models are), else evaluated byte by byte."""
    stored: dict[int, int] = {}
    t = value
    while z3.is_store(t) and z3.is_bv_value(t.arg(1)) and z3.is_bv_value(t.arg(2)):
        stored.setdefault(t.arg(1).as_long(), t.arg(2).as_long())  # the outermost store wins
        t = t.arg(0)
    if z3.is_K(t) and z3.is_bv_value(t.arg(0)):
        default = t.arg(0).as_long()
        return [stored.get(i, default) for i in range(n)]
    width = packet.domain().size()
    return [model.eval(packet[z3.BitVecVal(i, width)], model_completion=True).as_long() for i in range(n)]


class _ArrayBuilder:
    """Constant arrays of the packet's sort - 0 but at the bytes given - made through z3's C
    API (z3.Store in Python costs ~0.1 ms a byte: a 1280-byte model's tries took seconds)."""

    def __init__(self, packet: z3.ArrayRef):
        self.ctx = packet.ctx
        self.zero = z3.K(packet.domain(), z3.BitVecVal(0, packet.range()))
        self.index_sort = packet.domain()
        self.value_sort = packet.range()
        self.keep: list[z3.ExprRef] = []  # the index and value terms, alive while used
        self.indices: dict[int, z3.ExprRef] = {}
        self.values: dict[int, z3.ExprRef] = {}

    def _index(self, i: int) -> z3.ExprRef:
        if i not in self.indices:
            self.indices[i] = z3.BitVecVal(i, self.index_sort)
        return self.indices[i]

    def _value(self, v: int) -> z3.ExprRef:
        if v not in self.values:
            self.values[v] = z3.BitVecVal(v, self.value_sort)
        return self.values[v]

    def array(self, values: list[int]) -> z3.ArrayRef:
        """The array holding values[i] at i (0 elsewhere)."""
        ref = self.ctx.ref()
        ast = self.zero.as_ast()
        z3.Z3_inc_ref(ref, ast)
        for i, v in enumerate(values):
            if v:
                new = z3.Z3_mk_store(ref, ast, self._index(i).as_ast(), self._value(v).as_ast())
                z3.Z3_inc_ref(ref, new)
                z3.Z3_dec_ref(ref, ast)
                ast = new
        out = z3.ArrayRef(ast, self.ctx)  # takes a reference of its own
        z3.Z3_dec_ref(ref, ast)
        return out
