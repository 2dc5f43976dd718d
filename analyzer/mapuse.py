"""What the program's own writes to a map mean for the decisions that read it.

A map the program writes is not necessarily data-plane state. Two cases are proved with z3,
over all map contents and all packets, and change the class of the map and of the branches
that read it (classify.py):

* **preserved** - every write the program makes to the map leaves every decision that
  reads it unchanged: xdp-filter keeps a hit counter in the upper bits of the same u64
  whose low bits are the flags it decides on; `value += 1 << COUNTER_SHIFT` never changes
  `value & FLAGS`. The decisions then depend on what the control plane put there only:
  control-plane map.
* **fateless** - no packet's verdict, output bytes or redirect depends on the map, and no
  write to another map carries its contents: `if (!count) init(); else (*count)++` decides
  only how to count. Its branches are `stats-only`.

The proofs rename the writing packet's inputs (`pkt` -> `pkt#w`, ...) so that "a packet
that writes" and "a later packet that decides" are independent, then substitute the map's
state after the write (state.found_after / byte_after with z3.Var arguments) for its
uninterpreted functions. Anything the explorer cut (truncated paths, sites with more
conditions than it kept) or a solver timeout leaves the map data-plane: unknown is not a
proof.

The proofs keep the command's time budget (`--timeout`: fields.decode_deadline, the same end
the decoding keeps): each query is stopped at it, and a map whose proofs it interrupted, or
that it left unstarted, is neither preserved nor fateless, its `why` saying so (`BUDGET_WHY`,
`MapUse.cut`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3
from z3 import z3core

from .exploration import Exploration, Path
from .fields import decode_deadline
from .state import byte_after, found_after
from .symbolic import Z3_C, source_of, symbols, wrap, wrap_decl

_AST_KIND, _AST_ID, _NUM_ARGS, _ARG = Z3_C.ast_kind, Z3_C.ast_id, Z3_C.num_args, Z3_C.arg
_DECL, _DECL_KIND, _DECL_NAME, _SYMBOL = Z3_C.decl, Z3_C.decl_kind, Z3_C.decl_name, Z3_C.symbol
_SORT, _SORT_KIND = Z3_C.sort, Z3_C.sort_kind

#: Per z3 query: a deterministic resource limit (z3's rlimit), not a time, so that a proof's
#: answer does not depend on the machine's speed or load (issue 14: the same object must
#: give the same output on every run); past it the answer is "not proved". The corpus' and
#: xdp-filter's proofs take at most ~31,000 (bench/mapuse_rlimit.py), about 0.02 s.
PROOF_RLIMIT = 20_000_000
#: `MapUse.why` of a map whose proofs the command's time budget cut (not proved: data-plane).
BUDGET_WHY = "not proved: the time budget ran out"


@dataclass(frozen=True)
class MapUse:
    """The outcome of the proofs for one written map; `why` says what stopped a proof."""

    name: str
    decided: bool  # some decision (branch, verdict, output) reads it
    preserved: bool
    fateless: bool
    why: str = ""
    #: the time budget stopped its proofs: neither preserved nor fateless is claimed, and
    #: `decided` is True (not known not to be read)
    cut: bool = False


class _OutOfTime(Exception):
    """The time budget ran out in the middle of a map's proofs."""


def map_uses(e: Exploration) -> dict[str, MapUse]:
    """MapUse of every map the program writes (memoised on the exploration), proved within the
    command's time budget (`decode_deadline`)."""
    if e.map_use is None:
        e.map_use = _Prover(e, decode_deadline(e)).run() if e.written_maps else {}
    return e.map_use


class _Prover:
    def __init__(self, e: Exploration, deadline: float | None = None):
        self.e = e
        self.deadline = deadline  # time.perf_counter() value; None: no budget
        self.env = e.environment()
        self.expanded: dict = {}  # term id or literal name -> (expanded, the term kept alive)
        self.names: dict = {}  # symbols' cache over every term read here
        self.outputs = [self._outputs(p) for p in e.paths]

    def expand(self, t: z3.ExprRef) -> z3.ExprRef:
        """`e.expand(t)`, once per term and without walking the term again (write logs
        repeat a long key in every byte): its literals' conditions in place of them."""
        memo = self.expanded.get(t.get_id())
        if memo is None:  # the literals found through the prover's symbols cache
            memo = self.expanded[t.get_id()] = (self.e.expand(t, self.names), t)
        return memo[0]

    def literal(self, name: str) -> z3.BoolRef:
        """The condition over inputs branch literal `name` stands for."""
        return self.e.literal_condition(name)

    def inputs(self, t: z3.ExprRef) -> frozenset[str]:
        """The names `e.expand(t)` reads, without expanding it."""
        names = symbols(t, self.names)
        literals = [n for n in sorted(names) if n.startswith("b!")]
        if not literals:
            return names
        out = names.difference(literals)
        for n in literals:
            out |= symbols(self.literal(n), self.names)
        return out

    def reads(self, expr: z3.ExprRef, name: str) -> bool:
        """Whether `expr` (expanded) reads map `name`: its entries' existence or bytes."""
        names = self.inputs(expr)
        return f"map.{name}.found" in names or f"map.{name}.val" in names

    def left(self) -> float | None:
        """Seconds left of the time budget (None: no budget); raises _OutOfTime past it."""
        if self.deadline is None:
            return None
        left = self.deadline - time.perf_counter()
        if left <= 0:
            raise _OutOfTime
        return left

    def unsat(self, *constraints: z3.BoolRef) -> bool:
        """Whether z3 proves `constraints` unsatisfiable within PROOF_RLIMIT and the time
        budget (raises _OutOfTime when the budget stopped it or was spent before)."""
        left = self.left()
        proved = _unsat(*constraints, timeout_ms=None if left is None else max(1, int(left * 1000)))
        if not proved:
            self.left()  # an unknown answer at the budget's end is the budget's, not a refutation
        return proved

    def run(self) -> dict[str, MapUse]:
        out = {}
        for name in sorted(self.e.written_maps):
            try:
                out[name] = self._use(name)
            except _OutOfTime:
                out[name] = MapUse(name, True, False, False, BUDGET_WHY, cut=True)
        return out

    def _use(self, name: str) -> MapUse:
        """The proofs for map `name` (raises _OutOfTime when the budget runs out)."""
        self.left()
        truncated = next((p.truncated for p in self.e.paths if p.truncated), None)
        terms, overflow = self._decisions(name)
        if not terms and not overflow:
            return MapUse(name, False, False, True)
        if truncated:
            return MapUse(name, True, False, False, f"exploration cut: {truncated}")
        if overflow:
            return MapUse(name, True, False, False, "a decision site was visited too often to prove")
        preserved, why = self._preserved(name, terms)
        fateless, why2 = (False, "") if preserved else self._fateless(name)
        return MapUse(name, True, preserved, fateless, "" if preserved or fateless else f"{why}; {why2}")

    # --- what reads the map ---------------------------------------------------------

    def _outputs(self, p: Path) -> list[z3.ExprRef]:
        """What a path does to the packet beyond its condition: return value, redirect,
        packet bytes and bounds (none for a path a time budget cut: it never got to its end),
        not expanded (`reads` does not need it; `_decisions` expands those it keeps)."""
        if self.e.cut_by_budget(p):
            return []
        out = [p.pkt, p.head, p.end]
        if p.retval is not None:
            out.append(p.retval)
        if p.redirect is not None:
            out += [x for x in p.redirect if isinstance(x, z3.ExprRef)]
        return out

    def _decisions(self, name: str) -> tuple[list[z3.ExprRef], bool]:
        """Every branch condition and path output that reads map `name`, and whether a
        site reading it kept fewer conditions than it saw."""
        terms, overflow = [], False
        for site in self.e.sites.values():
            self.left()
            if any(s.kind == "map" and s.name == name for s in site.sources):
                terms += [self.expand(c) for c in site.conditions]
                overflow |= site.overflow
        for outs in self.outputs:
            terms += [self.expand(t) for t in outs if self.reads(t, name)]
        return terms, overflow

    # --- preserved --------------------------------------------------------------------

    def _preserved(self, name: str, terms: list[z3.ExprRef]) -> tuple[bool, str]:
        """First for any entry (`_Generalised`: one query for all paths whose write logs
        have the same shape), then on skeletons (every part of a term that does not read
        the map made a free variable: a stronger claim, and a small one), then, where both
        fail, exactly. Each stage proves a claim that implies the next one's."""
        skeleton = _Skeleton(name, self.names)
        shapes = [skeleton(t) for t in terms]
        atoms = skeleton.atoms(shapes)
        if atoms is not None:  # preserved atoms preserve every term built from them
            shapes = atoms
        after = _After(list(skeleton.decls.values()))
        general = _Generalised(skeleton, shapes)
        proved: set[tuple[int, ...]] = set()
        for p in self.e.paths:
            writes = dict(p.map_writes).get(name)
            if not writes:
                continue
            self.left()
            if general.preserved(tuple(_renamed(w, skeleton, ()) for w in writes), after, self.unsat):
                continue
            sketch = tuple(_renamed(w, lambda t: skeleton(self.expand(t)), ()) for w in writes)
            ids = _ids(sketch)
            if ids in proved:
                continue
            if self.unsat(z3.Or(*[t != after(t, sketch) for t in shapes])):
                proved.add(ids)
                continue
            rename = _renaming([self.e.condition(p), *self.env] + [t for w in writes for t in _terms(w)])
            cond = z3.substitute(self.e.condition(p), *rename) if rename else self.e.condition(p)
            writes = tuple(_renamed(w, self.expand, rename) for w in writes)
            changed = z3.Or(*[t != after(t, writes) for t in terms])
            env_w = [z3.substitute(a, *rename) if rename else a for a in self.env]
            if not self.unsat(*self.env, *env_w, cond, changed):
                return False, f"a write on path {p.id} can change a decision that reads it"
        return True, ""

    # --- fateless ---------------------------------------------------------------------

    def _fateless(self, name: str) -> tuple[bool, str]:
        if any(self.reads(t, name) for outs in self.outputs for t in outs):
            return False, "a verdict, redirect or packet byte depends on it"
        for p in self.e.paths:
            for other, writes in p.map_writes:
                if other != name and any(self.reads(t, name) for w in writes for t in _terms(w)):
                    return False, f"path {p.id} copies it into map {other}"
        by_verdict: dict[str, list[z3.BoolRef]] = {}
        for p in self.e.paths:
            by_verdict.setdefault(p.verdict, []).append(self.e.condition(p))
        other_state = _other_copy(name)
        for verdict, conds in by_verdict.items():
            union = z3.Or(*conds)
            if not self.reads(union, name):
                continue
            if not self.unsat(*self.env, union != other_state(union)):
                return False, f"whether the program returns {verdict} depends on it"
        return True, ""


# --- z3 plumbing ----------------------------------------------------------------------


def _uninterpreted(expr: z3.ExprRef) -> dict[str, z3.FuncDeclRef]:
    """Free constants and uninterpreted functions of `expr`, by name."""
    out: dict[str, z3.FuncDeclRef] = {}
    stack, seen = [expr], set()
    while stack:
        x = stack.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_app(x):
            if x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                out[x.decl().name()] = x.decl()
            stack.extend(x.children())
        elif z3.is_quantifier(x) or z3.is_lambda(x):
            stack.append(x.body())
    return out


def _terms(w) -> list[z3.ExprRef]:
    return [w.key, *([w.off] if w.off is not None else []), *w.data]


def _ids(writes) -> tuple:
    """A write log's identity: its kinds and the z3 ids of its terms."""
    return tuple((w.kind, *(t.get_id() for t in _terms(w))) for w in writes)


def _renaming(exprs: list[z3.ExprRef]) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
    """A fresh copy (`name#w`) of every per-packet input in `exprs`: packet, ctx, helper
    results, unknowns. Maps are shared state and stay."""
    pairs = {}
    for e in exprs:
        for n, d in _uninterpreted(e).items():
            src = source_of(n)
            if d.arity() == 0 and src is not None and src.kind != "map" and n not in pairs:
                pairs[n] = (d(), z3.Const(f"{n}#w", d.range()))
    return list(pairs.values())


def _renamed(w, expand, rename):
    """Write `w` with `expand` applied to each of its terms, then `rename`."""

    def r(x):
        x = expand(x)
        return z3.substitute(x, *rename) if rename else x

    return type(w)(w.kind, r(w.key), None if w.off is None else r(w.off), tuple(r(d) for d in w.data))


class _Skeleton:
    """A term with every largest part that does not read map `name` replaced by a free
    variable (the same part, the same variable): proving a claim for all values of the
    variables proves it for the term. Constants stay."""

    def __init__(self, name: str, names: dict | None = None):
        self.names = (f"map.{name}.found", f"map.{name}.val")
        self.memo: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}  # id -> (skeleton, term)
        self.reads: dict[int, tuple[bool, z3.ExprRef]] = {}
        self.symbols = {} if names is None else names  # symbols' cache (shared with the prover's)
        self.parts: set[int] = set()  # ids of the variables made (kept alive by `memo`)
        self.decls: dict[str, z3.FuncDeclRef] = {}  # the map's functions met, by sexpr

    def _reads(self, e: z3.ExprRef) -> bool:
        memo = self.reads.get(e.get_id())
        if memo is None:
            names = symbols(e, self.symbols)
            memo = self.reads[e.get_id()] = (self.names[0] in names or self.names[1] in names, e)
        return memo[0]

    def _reads_raw(self, ref, a, aid: int, ctx: z3.Context) -> bool:
        """`_reads` of a raw AST met in a walk under a term `symbols` has cached (its
        compound subterms are in the cache, with the root that keeps them alive)."""
        memo = self.reads.get(aid)
        if memo is None:
            cached = self.symbols.get(aid)
            if cached is None:  # a leaf: not in the cache
                x = wrap(ctx, a)
                cached = (symbols(x, self.symbols), x)
            names = cached[0]
            memo = self.reads[aid] = (self.names[0] in names or self.names[1] in names, cached[1])
        return memo[0]

    def __call__(self, e: z3.ExprRef) -> z3.ExprRef:
        """The skeleton of `e`, from the top: only parts that read the map are walked into.
        Walked through z3's C API (`Z3_C`): a Python term is made only for what is kept
        (the parts, the terms rebuilt from them)."""
        memo = self.memo
        eid = e.get_id()
        if eid in memo:
            return memo[eid][0]
        ctx = e.ctx
        ref, root = Z3_C.handles(e)
        symbols(e, self.symbols)  # every compound subterm's names, cached by id
        stack = [(root, eid)]
        while stack:
            a, aid = stack[-1]
            if aid in memo:
                stack.pop()
                continue
            if not self._reads_raw(ref, a, aid, ctx):
                x = wrap(ctx, a)
                constant = _is_constant(ref, a)
                part = x if constant else z3.FreshConst(x.sort(), "part")
                memo[aid] = (part, x)
                if not constant:
                    self.parts.add(part.get_id())
                stack.pop()
                continue
            n = _NUM_ARGS(ref, a)  # a term that reads the map: an application
            kids = [_ARG(ref, a, i) for i in range(n)]
            ids = [_AST_ID(ref, k) for k in kids]
            missing = [(k, i) for k, i in zip(kids, ids) if i not in memo]
            if missing:
                stack.extend(missing)
                continue
            x = wrap(ctx, a)
            if n:
                decl = wrap_decl(ctx, _DECL(ref, a))
                if decl.name() in self.names:
                    self.decls.setdefault(decl.sexpr(), decl)
                args = (z3.Ast * n)(*[memo[i][0].as_ast() for i in ids])
                out = wrap(ctx, z3core.Z3_mk_app(ctx.ref(), decl.as_func_decl(), n, args))
            else:
                out = x
            memo[aid] = (out, x)
            stack.pop()
        return memo[eid][0]

    def atoms(self, terms: list[z3.ExprRef]) -> list[z3.BoolRef] | None:
        """The map-reading yes/no questions `terms` are built from (a comparison with a
        map value, an entry's existence), when every read of the map in them is inside
        one; else None. Proving each atom preserved is small where the whole term (path
        offsets merged over dozens of paths) is not. Only the parts that read the map are
        walked (through z3's C API): the others hold no atom and no read."""
        if not terms:
            return []
        ctx = terms[0].ctx
        ref = Z3_C.handles(terms[0])[0]
        for t in terms:
            symbols(t, self.symbols)

        def is_bool_read(a, aid):
            return _SORT_KIND(ref, _SORT(ref, a)) == z3.Z3_BOOL_SORT and self._reads_raw(ref, a, aid, ctx)

        inner: dict[int, bool] = {}  # id -> a proper subterm is a reading atom (terms alive)
        found: dict[int, object] = {}  # id -> raw AST of an atom
        stack = [(Z3_C.handles(t)[1], t.get_id()) for t in terms]
        while stack:
            a, aid = stack[-1]
            if aid in inner:
                stack.pop()
                continue
            if not self._reads_raw(ref, a, aid, ctx):
                inner[aid] = False
                stack.pop()
                continue
            n = _NUM_ARGS(ref, a) if _AST_KIND(ref, a) == z3.Z3_APP_AST else 0
            kids = [_ARG(ref, a, i) for i in range(n)]
            ids = [_AST_ID(ref, k) for k in kids]
            missing = [(k, i) for k, i in zip(kids, ids) if i not in inner]
            if missing:
                stack.extend(missing)
                continue
            below = any(inner[i] or is_bool_read(k, i) for k, i in zip(kids, ids))
            inner[aid] = below
            if not below and is_bool_read(a, aid):
                found[aid] = a
            stack.pop()
        if self._read_outside(ref, terms, found):
            return None
        return [wrap(ctx, a) for a in found.values()]

    def _read_outside(self, ref, terms: list[z3.ExprRef], atoms: dict[int, object]) -> bool:
        """Whether some term reads the map outside `atoms` (id -> raw AST): what the terms
        would still read with each atom replaced by a fresh yes/no symbol."""
        ctx = terms[0].ctx
        stack = [(Z3_C.handles(t)[1], t.get_id()) for t in terms]
        seen: set[int] = set()
        while stack:
            a, aid = stack.pop()
            if aid in seen or aid in atoms:
                continue
            seen.add(aid)
            if _AST_KIND(ref, a) != z3.Z3_APP_AST or not self._reads_raw(ref, a, aid, ctx):
                continue
            if _DECL_KIND(ref, _DECL(ref, a)) == z3.Z3_OP_UNINTERPRETED and _NUM_ARGS(ref, a):
                name = _SYMBOL(ref, _DECL_NAME(ref, _DECL(ref, a)))
                if (name.decode() if isinstance(name, bytes) else name) in self.names:
                    return True
            n = _NUM_ARGS(ref, a)
            stack.extend((k, _AST_ID(ref, k)) for k in (_ARG(ref, a, i) for i in range(n)))
        return False


def _is_constant(ref, a) -> bool:
    """Whether raw AST `a` is a bit-vector value, true or false (z3.is_bv_value, is_true,
    is_false)."""
    kind = _AST_KIND(ref, a)
    if kind == z3.Z3_NUMERAL_AST:
        return _SORT_KIND(ref, _SORT(ref, a)) == z3.Z3_BV_SORT
    return kind == z3.Z3_APP_AST and _DECL_KIND(ref, _DECL(ref, a)) in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE)


class _After:
    """Terms of map `name` evaluated on its state after a write log instead of before: its
    functions (`decls`: all those the terms asked about use) replaced by state.found_after /
    byte_after over z3.Var arguments, built once per write log."""

    def __init__(self, decls: list[z3.FuncDeclRef]):
        self.decls = decls
        self.pairs: dict[tuple, tuple[list, tuple]] = {}  # write log ids -> (pairs, the log)

    def __call__(self, expr: z3.ExprRef, writes) -> z3.ExprRef:
        ids = _ids(writes)
        if ids not in self.pairs:
            self.pairs[ids] = (self._pairs(writes), writes)  # the log kept: its ids stay its own
        pairs = self.pairs[ids][0]
        return z3.substitute_funs(expr, *pairs) if pairs else expr

    def _pairs(self, writes) -> list[tuple[z3.FuncDeclRef, z3.ExprRef]]:
        pairs = []
        for d in self.decls:
            key = z3.Var(0, d.domain(0))
            if d.arity() == 1:  # found
                pairs.append((d, found_after(writes, key, d(key))))
            else:
                off = z3.Var(1, d.domain(1))
                pairs.append((d, byte_after(writes, key, off, d(key, off))))
        return pairs


class _Generalised:
    """ "Preserved" claimed for every entry at once, a stronger claim than the skeleton's:
    in each shape, a map read whose key is a skeleton variable reads the entry of a key
    variable of that shape's own (`mapuse.key.N`, in the order they occur), and a write log's
    skeleton variables are renamed in the order they occur (`mapuse.w.N`). The original
    keys and variables are values the claim covers. Write logs that differ only in which
    entry they update (xdp-filter: the same counter update on each filter entry) then are
    one query, asked once."""

    def __init__(self, skeleton: _Skeleton, shapes: list[z3.ExprRef]):
        self.skeleton = skeleton
        self.shapes = self._general(shapes)  # None: some key reads the map itself
        self.outcome: dict[tuple, tuple[bool, tuple]] = {}  # renamed log ids -> (proved, log)

    def preserved(self, sketch, after: _After, unsat) -> bool:
        """Whether the write log `sketch` (skeleton terms) provably leaves every shape unchanged
        (`unsat`: the prover's query, which keeps the time budget)."""
        if self.shapes is None:
            return False
        log = self._renamed(sketch)
        ids = _ids(log)
        if ids not in self.outcome:
            self.outcome[ids] = (unsat(z3.Or(*[s != after(s, log) for s in self.shapes])), log)
        return self.outcome[ids][0]

    def _general(self, shapes: list[z3.ExprRef]) -> list[z3.ExprRef] | None:
        out: dict[int, z3.ExprRef] = {}
        for shape in shapes:
            keys: dict[int, z3.ExprRef] = {}
            pairs = []
            for read in _in_order([shape], self._is_read):
                key = read.arg(0)
                if self.skeleton._reads(key):
                    return None
                if key.get_id() not in self.skeleton.parts:
                    continue  # a constant key stays: its entry is not any entry
                if key.get_id() not in keys:
                    keys[key.get_id()] = z3.Const(f"mapuse.key.{len(keys)}", key.sort())
                args = [keys[key.get_id()], *(read.arg(i) for i in range(1, read.num_args()))]
                pairs.append((read, read.decl()(*args)))
            general = z3.substitute(shape, *pairs) if pairs else shape
            out.setdefault(general.get_id(), general)
        return list(out.values())

    def _is_read(self, ref, a, aid: int) -> bool:
        """Whether raw AST `a` applies one of the map's functions (`_in_order`'s test)."""
        if _AST_KIND(ref, a) != z3.Z3_APP_AST:
            return False
        decl = _DECL(ref, a)
        if _DECL_KIND(ref, decl) != z3.Z3_OP_UNINTERPRETED:
            return False
        name = _SYMBOL(ref, _DECL_NAME(ref, decl))
        return (name.decode() if isinstance(name, bytes) else name) in self.skeleton.names

    def _renamed(self, sketch):
        parts = _in_order([t for w in sketch for t in _terms(w)], lambda ref, a, aid: aid in self.skeleton.parts)
        pairs = [(v, z3.Const(f"mapuse.w.{i}", v.sort())) for i, v in enumerate(parts)]
        if not pairs:
            return sketch
        r = _substitution(pairs)

        return tuple(
            type(w)(w.kind, r(w.key), None if w.off is None else r(w.off), tuple(r(d) for d in w.data)) for w in sketch
        )


def _in_order(exprs: list[z3.ExprRef], wanted) -> list[z3.ExprRef]:
    """The distinct subterms of `exprs` for which `wanted(ref, ast, id)` holds (a raw AST of
    a `Z3_C` walk), in the order a depth-first walk meets them (the same order for terms of
    the same shape): not below a wanted one."""
    if not exprs:
        return []
    ctx = exprs[0].ctx
    ref = Z3_C.handles(exprs[0])[0]
    out: dict[int, object] = {}
    seen: set[int] = set()
    for root in exprs:
        stack = [(Z3_C.handles(root)[1], root.get_id())]
        while stack:
            a, aid = stack.pop()
            if aid in seen:
                continue
            seen.add(aid)
            if wanted(ref, a, aid):
                out.setdefault(aid, a)
            elif _AST_KIND(ref, a) in (z3.Z3_APP_AST, z3.Z3_NUMERAL_AST):
                kids = [_ARG(ref, a, i) for i in range(_NUM_ARGS(ref, a))]
                stack.extend((k, _AST_ID(ref, k)) for k in reversed(kids))
    return [wrap(ctx, a) for a in out.values()]


def _substitution(pairs: list[tuple[z3.ExprRef, z3.ExprRef]]):
    """z3.substitute(x, *pairs) as a function, for pairs whose sorts match (no sort check
    per pair and call: the C arrays are built once)."""
    n = len(pairs)
    frm = (z3.Ast * n)(*[a.as_ast() for a, _ in pairs])
    to = (z3.Ast * n)(*[b.as_ast() for _, b in pairs])

    def substitute(x: z3.ExprRef) -> z3.ExprRef:
        return wrap(x.ctx, z3core.Z3_substitute(x.ctx.ref(), x.as_ast(), n, frm, to))

    return substitute


def _map_decls(expr: z3.ExprRef, name: str) -> list[z3.FuncDeclRef]:
    return [d for n, d in _uninterpreted(expr).items() if n in (f"map.{name}.found", f"map.{name}.val")]


def _other_copy(name: str):
    """A function giving `expr` over an independent copy of map `name`'s contents."""

    def copy(expr):
        pairs = []
        for d in _map_decls(expr, name):
            twin = z3.Function(d.name() + "#2", *[d.domain(i) for i in range(d.arity())], d.range())
            args = [z3.Var(i, d.domain(i)) for i in range(d.arity())]
            pairs.append((d, twin(*args)))
        return z3.substitute_funs(expr, *pairs) if pairs else expr

    return copy


def _unsat(*constraints: z3.BoolRef, timeout_ms: int | None = None) -> bool:
    """Whether z3 proves `constraints` unsatisfiable within PROOF_RLIMIT (and `timeout_ms`,
    given only by a command's time budget: without one, no answer depends on the clock)."""
    s = z3.Solver()
    s.set("rlimit", PROOF_RLIMIT)
    if timeout_ms is not None:
        s.set("timeout", timeout_ms)
    s.add(*constraints)
    return s.check() == z3.unsat
