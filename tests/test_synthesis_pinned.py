"""`_around`'s formula built by one substitution of the whole conjunction (rules/synthesis.py,
issue 14) against the construction it replaced, kept here as the reference: each assertion of
the path's solver substituted on its own (model constants, then the model's functions), then
the packet bytes of the key placed by a second substitution. On real paths of xdp-filter and
of the VLAN corpus objects, for every flower key and the skb protocol, both must say the same
(False, None or a formula) and z3 must prove the two formulas equivalent.
"""

from __future__ import annotations

import pytest
import z3

import corpus
from analyzer.explore import explore
from analyzer.symbolic import PACKET
from lifter.program import load_object
from rules import synthesis
from rules.synthesis import Outcome, Synthesizer
from tests.conftest import need_object

#: An IP protocol whose ports the dissector model leaves fresh (`_around_var`'s case).
DCCP = 33


def reference_around(s: z3.Solver, model: z3.ModelRef, term: z3.BitVecRef):
    """`_around` as built before: per-assertion z3.substitute + substitute_funs, then the bytes."""
    at = synthesis._value_bytes(term, model)
    width = term.size()
    if not at:
        return reference_around_var(s, model, term)
    if len(at) * 8 < width:
        return None
    fresh = [z3.BitVec(f"every!{i}", 8) for i in range(len(at))]
    b = z3.Concat(*fresh) if len(fresh) > 1 else fresh[0]
    pkt = model.eval(PACKET, model_completion=True)
    for offset, byte in zip(at, fresh):
        pkt = z3.Store(pkt, offset, byte)
    consts = [d() for d in model.decls() if d.arity() == 0]
    pins = [(c, model.eval(c, model_completion=True)) for c in consts if not c.eq(PACKET)] + [(PACKET, pkt)]
    funs = [
        (d, f) for d in model.decls() if d.arity() > 0 and (f := synthesis._interpretation(d, model[d])) is not None
    ]

    def pinned(x):
        x = z3.substitute(x, *pins)
        return z3.substitute_funs(x, *funs) if funs else x

    value = pinned(term)
    model_bytes = sum(
        model.eval(PACKET[o], model_completion=True).as_long() << (8 * i) for i, o in enumerate(reversed(at))
    )
    ones = (1 << width) - 1
    low = next(
        (
            i
            for i in range(b.size() - width + 1)
            if all(synthesis._at(value, fresh, model_bytes & ~(ones << i) | v << i) == v for v in (0, 1, ones))
        ),
        None,
    )
    if low is None:
        return False
    x = synthesis._every_x(width)
    keep = model_bytes & ~(ones << low)
    bits = z3.BitVecVal(keep, b.size()) | z3.ZeroExt(b.size() - width, x) << low if b.size() > width else x
    placed = [(byte, z3.Extract(b.size() - 1 - 8 * i, b.size() - 8 - 8 * i, bits)) for i, byte in enumerate(fresh)]
    return z3.substitute(z3.And(*[pinned(a) for a in s.assertions()], value == x), *placed)


def reference_around_var(s: z3.Solver, model: z3.ModelRef, term: z3.BitVecRef):
    """`_around_var` as built before (per-assertion substitutions)."""
    var = synthesis._value_var(term, model)
    if var is None:
        return None
    x = synthesis._every_x(term.size())
    consts = [d() for d in model.decls() if d.arity() == 0]
    pins = [(c, model.eval(c, model_completion=True)) for c in consts if not c.eq(var)]
    funs = [
        (d, f) for d in model.decls() if d.arity() > 0 and (f := synthesis._interpretation(d, model[d])) is not None
    ]

    def pinned(t):
        t = z3.substitute(t, *pins) if pins else t
        return z3.substitute_funs(t, *funs) if funs else t

    value = pinned(term)
    ones = (1 << term.size()) - 1
    for v in (0, 1, ones):
        at = z3.simplify(z3.substitute(value, (var, z3.BitVecVal(v, term.size()))))
        if not z3.is_bv_value(at) or at.as_long() != v:
            return None
    return z3.substitute(z3.And(*[pinned(a) for a in s.assertions()], value == x), (var, x))


def _object(stem: str):
    if stem.startswith("xdpfilt_"):
        return need_object(corpus.EXTERNAL_DIR / "libxdp1" / f"{stem}.o")
    return need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o")


def _target_paths(stem: str, most: int, proto: int | None = None):
    """(synthesizer, solver, model) of up to `most` target paths of `stem` under typical packets
    (with `proto`: of IP protocol `proto`, the solver holding that too)."""
    obj = load_object(_object(stem))
    e = explore(obj, obj.programs[0])
    synth = Synthesizer(e, (), {})
    out = []
    for p in e.paths:
        outcome = synth.outcomes[p.id]
        if not isinstance(outcome, Outcome) or outcome.is_pass:
            continue
        found = synth._typical(p)
        if found is not None and proto is not None:
            found[0].add(synth.d.keys["ip_proto"] == proto)
            found = (found[0], found[1], found[0].model()) if found[0].check() == z3.sat else None
        if found is not None:
            out.append((synth, found[0], found[2]))
        if len(out) == most:
            break
    return out


def _equivalent(a: z3.BoolRef, b: z3.BoolRef) -> bool:
    q = z3.Solver()
    q.add(a != b)
    return q.check() == z3.unsat


@pytest.mark.parametrize(
    ("stem", "proto"), [("xdpfilt_alw_ip", None), ("xdpfilt_alw_ip", DCCP), ("vlan_tags", None), ("qinq_tags", None)]
)
def test_one_substitution_is_the_old_construction(stem, proto):
    paths = _target_paths(stem, 6, proto)
    assert paths, "the program has target paths"
    kinds = {"formula": 0, "var": 0, "False": 0, "None": 0}
    for synth, s, model in paths:
        terms = {"skb": synth.d.skb_protocol, **synth.d.keys}
        for name, term in terms.items():
            new = synthesis._around(s, model, term)
            old = reference_around(s, model, term)
            if isinstance(old, bool) or old is None:
                assert new is old, name
                kinds[str(old)] += 1
                continue
            assert isinstance(new, z3.BoolRef), name
            assert _equivalent(new, old), name
            kinds["var" if not synthesis._value_bytes(term, model) else "formula"] += 1
    assert kinds["formula"] > 0  # the bytes case is compared, not only the refusals
    if proto == DCCP:
        assert kinds["var"] > 0  # DCCP ports, fresh in the dissector model: the one-variable case
