"""The map proofs' term walks through z3's C API (analyzer/mapuse.py `_Skeleton`, issue 14,
performance) find what their definitions say, on terms built by hand and on xdp-filter's:

* `wrap` gives back the very term of a raw AST, in the class of its sort;
* a skeleton keeps the map's reads and constants, replaces every largest part that does not
  read the map by a variable (the same part, the same variable);
* `atoms` are the lowest yes/no terms that read the map, or None when a read is left outside
  them: checked against the definition (each atom replaced by a fresh yes/no symbol with
  z3.substitute, then whether the map's functions are still named).
"""

from __future__ import annotations

import z3

import corpus
from analyzer.explore import explore
from analyzer.mapuse import _Prover, _Skeleton
from analyzer.symbolic import Z3_C, symbols, wrap
from lifter.program import load_object

FOUND = z3.Function("map.m.found", z3.BitVecSort(32), z3.BoolSort())
VAL = z3.Function("map.m.val", z3.BitVecSort(32), z3.BitVecSort(32), z3.BitVecSort(8))
X, Y = z3.BitVec("pkt.x", 8), z3.BitVec("pkt.y", 8)
K = z3.BitVec("pkt.k", 32)


def _raw_args(t: z3.ExprRef) -> list:
    ref, a = Z3_C.handles(t)
    return [Z3_C.arg(ref, a, i) for i in range(Z3_C.num_args(ref, a))]


def test_wrap_gives_the_same_term_in_its_sort_class():
    arr = z3.Array("pkt", z3.BitVecSort(64), z3.BitVecSort(8))
    t = z3.And(X + 1 == 5, z3.Store(arr, 0, X) == arr)
    (b, eq) = _raw_args(t)
    assert isinstance(wrap(t.ctx, b), z3.BoolRef) and wrap(t.ctx, b).eq(X + 1 == 5)
    (store, _) = _raw_args(wrap(t.ctx, eq))
    assert isinstance(wrap(t.ctx, store), z3.ArrayRef) and wrap(t.ctx, store).eq(z3.Store(arr, 0, X))
    (plus, _) = _raw_args(X + 1 == 5)
    assert isinstance(wrap(t.ctx, plus), z3.BitVecRef) and wrap(t.ctx, plus).get_id() == (X + 1).get_id()


def test_skeleton_replaces_the_parts_that_do_not_read_the_map():
    t = z3.And(X + 1 == 5, VAL(K, 0) == Y + 2, FOUND(K))
    sk = _Skeleton("m")(t)
    first, second, third = sk.children()
    # x + 1 == 5 reads no map: one variable of its sort, a fresh one
    assert z3.is_const(first) and first.decl().kind() == z3.Z3_OP_UNINTERPRETED and z3.is_bool(first)
    assert not first.eq(X + 1 == 5)
    # val(k, 0) == y + 2: the read stays, its key and y + 2 become variables, 0 stays
    read, rhs = second.children()
    assert read.decl().name() == "map.m.val" and read.arg(1).eq(z3.BitVecVal(0, 32))
    key = read.arg(0)
    assert z3.is_const(key) and not key.eq(K) and z3.is_const(rhs) and not rhs.eq(Y + 2)
    # found(k): the same key, the same variable
    assert third.decl().name() == "map.m.found" and third.arg(0).eq(key)
    assert symbols(sk) >= {"map.m.val", "map.m.found"} and not symbols(sk) & {"pkt.x", "pkt.y", "pkt.k"}


def test_atoms_by_hand():
    s = _Skeleton("m")
    a1, a2 = VAL(K, 0) == Y + 2, FOUND(K)
    assert {x.get_id() for x in s.atoms([z3.And(X == 1, a1, z3.Not(a2))])} == {a1.get_id(), a2.get_id()}
    # a map byte read outside any yes/no read of the map: no atoms
    assert s.atoms([z3.If(a2, VAL(K, 0), z3.BitVecVal(0, 8)) == 3]) is None
    # a yes/no read below another one: the lowest is the atom
    bit = z3.Extract(0, 0, VAL(K, 1)) == 1
    assert [x.get_id() for x in s.atoms([z3.Or(bit, X == 2)])] == [bit.get_id()]
    assert s.atoms([X == 2]) == []


def _atoms_by_definition(terms: list[z3.ExprRef], name: str):
    """The lowest Boolean subterms reading map `name`, by a plain walk; None when a read is
    left after substituting them away."""
    names = {f"map.{name}.found", f"map.{name}.val"}

    def reads(x):
        return bool(symbols(x) & names)

    found, seen, stack = {}, set(), list(terms)
    while stack:
        x = stack.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if not z3.is_app(x):
            continue
        kids = x.children()
        if z3.is_bool(x) and reads(x) and not any(z3.is_bool(k) and reads(k) for k in _subterms(kids)):
            found[x.get_id()] = x
        stack.extend(kids)
    marks = [(a, z3.FreshBool("mark")) for a in found.values()]
    if any(reads(z3.substitute(t, *marks) if marks else t) for t in terms):
        return None
    return set(found)


def _subterms(roots):
    out, stack, seen = [], list(roots), set()
    while stack:
        x = stack.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        out.append(x)
        if z3.is_app(x):
            stack.extend(x.children())
    return out


def test_atoms_of_xdp_filter_match_the_definition():
    path = next(p for p in corpus.external_objects() if p.stem == "xdpfilt_dny_udp")
    obj = load_object(path)
    e = explore(obj, next(p for p in obj.programs if p.is_xdp))
    prover = _Prover(e)
    checked = 0
    for name in sorted(e.written_maps | e.read_maps):
        terms, _ = prover._decisions(name)
        if not terms:
            continue
        skeleton = _Skeleton(name, prover.names)
        shapes = [skeleton(t) for t in terms]
        got = skeleton.atoms(shapes)
        want = _atoms_by_definition(shapes, name)
        assert (None if got is None else {a.get_id() for a in got}) == want, name
        checked += 1
    assert checked
