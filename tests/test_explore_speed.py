"""The explorer's speed-ups keep what it finds (issue 14, performance).

* witness models are fetched only when read: the exploration equals one that fetches every
  model at once (same paths, literals and definitions), and fewer models are fetched than
  checks found satisfiable;
* `symbols` with its subterm memo names what a plain recursive walk over z3's Python API
  names, also when one cache serves terms that share subterms;
* the C-API term builders make the very terms z3.And/Or/Not/If and `==` make.
"""

from __future__ import annotations

import z3

import corpus
from analyzer import explore as explore_mod
from analyzer.exploration import Options
from analyzer.symbolic import mk_and, mk_eq, mk_ite, mk_not, mk_or, symbols, truth
from lifter.program import load_object


def _digest(e) -> tuple:
    paths = tuple((p.id, p.verdict, p.truncated, tuple(x.sexpr() for x in p.literals)) for p in e.paths)
    return paths, tuple((lit.sexpr(), cond.sexpr()) for lit, cond in e.definitions)


def _explore(stem: str, monkeypatch, eager: bool) -> tuple[tuple, int, int]:
    """The exploration's digest, the models fetched and the sat checks made."""
    counts = {"fetched": 0, "sat": 0}
    settle, check = explore_mod.Explorer._settle, explore_mod.Explorer._check

    def counting_settle(self):
        if self._unfetched is not None:
            counts["fetched"] += 1
        settle(self)

    def counting_check(self, solver, state, extra, lazy=False):
        model = check(self, solver, state, extra, lazy=lazy)
        counts["sat"] += model is not None
        if eager and model is explore_mod._LATER:
            return solver.model()
        return model

    with monkeypatch.context() as m:
        m.setattr(explore_mod.Explorer, "_settle", counting_settle)
        m.setattr(explore_mod.Explorer, "_check", counting_check)
        obj = load_object(corpus.BUILD_DIR / "clang" / f"{stem}.o")
        e = explore_mod.explore(obj, obj.programs[0], Options())
    return _digest(e), counts["fetched"], counts["sat"]


def test_lazy_witness_models_keep_the_exploration(monkeypatch):
    lazy, fetched, sat = _explore("or_stress_k8", monkeypatch, eager=False)
    eager, eager_fetched, _ = _explore("or_stress_k8", monkeypatch, eager=True)
    assert lazy == eager
    assert eager_fetched == 0  # the eager run fetched every model in _check itself
    assert 0 < fetched < sat  # merges left some models unread


def _plain_symbols(e: z3.ExprRef, out: set[str]) -> set[str]:
    """The oracle: a recursive walk over z3's Python API."""
    if z3.is_quantifier(e):
        _plain_symbols(e.body(), out)
    elif z3.is_app(e):
        if e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(e.decl().name())
        for c in e.children():
            _plain_symbols(c, out)
    return out


def test_symbols_memo_names_what_a_plain_walk_names():
    x, y = z3.BitVecs("sx sy", 8)
    f = z3.Function("map.m.found", z3.BitVecSort(8), z3.BoolSort())
    a = z3.Array("spkt", z3.BitVecSort(8), z3.BitVecSort(8))
    b = z3.Bool("b!7")
    shared = z3.Select(a, x + 1) ^ y
    v = z3.BitVec("v", 8)
    terms = [
        z3.And(f(shared), b),
        z3.If(b, shared, x) == 3,
        z3.Or(z3.Not(b), shared == 0, f(y)),
        z3.ForAll([v], z3.Implies(f(v), z3.Select(a, v) == shared)),
        z3.BitVecVal(5, 8) == 5,
        b,
    ]
    cache: dict = {}
    for t in terms:  # one cache over terms sharing subterms, and each alone
        expected = _plain_symbols(t, set())
        assert symbols(t, cache) == expected
        assert symbols(t) == expected
        assert symbols(t, cache) == expected  # from the cache
    assert symbols(shared, cache) == {"spkt", "sx", "sy"}  # a subterm first met inside others


def test_c_api_builders_make_the_python_api_terms():
    p, q, r = z3.Bools("p q r")
    x, y = z3.BitVecs("x y", 64)
    arr = z3.Array("arr", z3.BitVecSort(64), z3.BitVecSort(8))
    assert mk_and([p, q, r]).eq(z3.And(p, q, r))
    assert mk_and([p]).eq(z3.And(p))
    assert mk_or(p, q).eq(z3.Or(p, q))
    assert mk_not(p).eq(z3.Not(p))
    assert mk_eq(p, z3.And(q, r)).eq(p == z3.And(q, r))
    assert mk_ite(p, x, y).eq(z3.If(p, x, y))
    assert isinstance(mk_ite(p, x, y), z3.BitVecRef)
    assert mk_ite(p, arr, z3.Store(arr, x, 1)).eq(z3.If(p, arr, z3.Store(arr, x, 1)))
    assert mk_ite(z3.BoolVal(True), x, y).eq(z3.If(z3.BoolVal(True), x, y))
    assert [truth(z3.BoolVal(True)), truth(z3.BoolVal(False)), truth(p)] == [True, False, None]
