"""Symbolic values and the inputs they are built from.

A register or stack slot holds a `Value`: a `Scalar` (a 64-bit z3 bit-vector) or a
`Pointer` into a `Region` (packet, ctx, stack frame, map value, ...). Pointers carry a
byte offset, never an address, so `data + 14 > data_end` becomes a comparison of offsets.

Every free z3 symbol is one program input, and its name says which (the classifier and
the witness builder read these names, nothing else):

    pkt                    Array(BV64 -> BV8): the packet bytes, offset 0 = ctx->data at entry
    pkt.len                BV64: data_end - data at entry (>= 14, <= the configured maximum)
    pkt.frags              BV64: bytes in page fragments (xdp.frags programs)
    ctx.<field>            BV32: ingress_ifindex, rx_queue_index, egress_ifindex
    map.<name>.found       Function(key -> Bool): the entry exists before the program runs
    map.<name>.val         Function(key, BV32 -> BV8): its value bytes before the program runs
    helper.<name>.<n>      BV64: the n-th result of a helper (time, random, ...)
    unknown.<why>.<n>      BV64: a value xdp2tc cannot model (the path says why)
    summary.<n>            BV64: a long computation of inputs (a hash, a checksum), kept as
                           its definition outside the solver: any value, as far as z3 knows
    b!<n>                  Bool: internal literal naming a branch condition (not an input)
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from enum import StrEnum

import z3
from z3 import z3core

#: z3's C accessors that z3.py calls on about every term it makes, wraps or reads (reference
#: counts, sort, kind, id, arguments: ~420k calls in `rules` of xdpfilt_alw_ip, ~1/3 of its
#: Python function calls). Each z3core wrapper calls the C function, then asks the context for
#: its error code in a second C call; these set none on a live term of the context (z3.py
#: asserts an application before asking its arguments or declaration, an index in range).
UNCHECKED_ACCESSORS = (
    "Z3_inc_ref",
    "Z3_dec_ref",
    "Z3_sort_to_ast",
    "Z3_func_decl_to_ast",
    "Z3_get_ast_kind",
    "Z3_get_ast_id",
    "Z3_get_sort",
    "Z3_get_sort_kind",
    "Z3_is_finite_set_sort",
    "Z3_is_eq_ast",
    "Z3_get_app_decl",
    "Z3_get_decl_kind",
    "Z3_get_app_num_args",
    "Z3_get_app_arg",
    "Z3_is_numeral_ast",
    "Z3_get_bool_value",
    "Z3_get_arity",
    "Z3_get_bv_sort_size",
    "Z3_is_app",
)


def bind_unchecked(names) -> list[str]:
    """Have z3.py (module z3.z3, whose classes look these names up when called) call the C
    functions behind the z3core wrappers `names` directly: the ctypes functions the wrappers
    call, with z3's argument and result types, so the same results, without the wrapper's
    Python frame and error check. A wrapper that does more than call and check (converts a
    string, say) is left alone, as is any name when z3core is laid out differently. The
    names bound; calls through z3core.* or the z3 package's names keep their checks."""
    api = sys.modules["z3.z3"]
    bound = []
    for name in names:
        wrapper = getattr(z3core, name, None)
        try:
            c_function = wrapper.__defaults__[-1].f
            only_checks = set(wrapper.__code__.co_names) <= {"f", "Check"}
        except (AttributeError, IndexError, TypeError):
            continue
        if only_checks and callable(c_function) and getattr(api, name, None) is wrapper:
            setattr(api, name, c_function)
            bound.append(name)
    return bound


bind_unchecked(UNCHECKED_ACCESSORS)

BV64 = z3.BitVecSort(64)
BV8 = z3.BitVecSort(8)
BV32 = z3.BitVecSort(32)


def bv(value: int, bits: int = 64) -> z3.BitVecRef:
    return z3.BitVecVal(value % (1 << bits), bits)


def const_value(expr: z3.ExprRef) -> int | None:
    """The unsigned value of a concrete bit-vector (after simplification), else None."""
    if z3.is_bv_value(expr):
        return expr.as_long()
    expr = z3.simplify(expr)
    return expr.as_long() if z3.is_bv_value(expr) else None


class RegionKind(StrEnum):
    """What a pointer points into."""

    PACKET = "packet"
    CTX = "ctx"
    STACK = "stack"
    MAP_VALUE = "map_value"  # a map entry's value (global data: the one entry of .data...)
    MAP = "map"  # the map itself (an ld_imm64 map reference): only helpers use it
    FUNC = "func"  # a function address (bpf_loop callback)
    MEM = "mem"  # helper-owned memory (ring buffer record)


@dataclass(frozen=True, eq=False)
class Region:
    """A memory region. `name` is the map or function; `key` the map key expression (an
    entry of `name`); `frame` the call depth of a stack region."""

    kind: RegionKind
    name: str = ""
    key: z3.BitVecRef | None = None
    frame: int = 0

    def fingerprint(self) -> tuple:
        fp = self.__dict__.get("_fp")  # immutable (its terms too): worked out once
        if fp is None:
            fp = (self.kind, self.name, None if self.key is None else self.key.get_id(), self.frame)
            object.__setattr__(self, "_fp", fp)
        return fp

    def same(self, other: Region) -> bool:
        return self.fingerprint() == other.fingerprint()


@dataclass(frozen=True, eq=False)
class Scalar:
    """A number."""

    bv: z3.BitVecRef  # 64 bits

    def fingerprint(self) -> tuple:
        fp = self.__dict__.get("_fp")
        if fp is None:
            fp = ("s", self.bv.get_id())
            object.__setattr__(self, "_fp", fp)
        return fp


@dataclass(frozen=True, eq=False)
class Pointer:
    """A pointer: `region` + `off` bytes. `null` is the condition under which it is NULL
    (map lookups, ring buffer reservations); None means never NULL."""

    region: Region
    off: z3.BitVecRef  # 64 bits, signed
    null: z3.BoolRef | None = None

    def fingerprint(self) -> tuple:
        fp = self.__dict__.get("_fp")
        if fp is None:
            null = None if self.null is None else self.null.get_id()
            fp = ("p", self.region.fingerprint(), self.off.get_id(), null)
            object.__setattr__(self, "_fp", fp)
        return fp

    def moved(self, delta: z3.BitVecRef) -> Pointer:
        return Pointer(self.region, z3.simplify(self.off + delta), self.null)


Value = Scalar | Pointer


def scalar(value: int | z3.BitVecRef) -> Scalar:
    return Scalar(bv(value) if isinstance(value, int) else value)


# --- inputs -----------------------------------------------------------------------------

PACKET = z3.Array("pkt", BV64, BV8)
PACKET_LEN = z3.BitVec("pkt.len", 64)
PACKET_FRAGS = z3.BitVec("pkt.frags", 64)

#: struct xdp_md (include/uapi/linux/bpf.h): byte offset -> field. data/data_end/data_meta
#: are rewritten by the verifier into pointers; the others are u32 inputs.
XDP_MD_FIELDS = {
    0: "data",
    4: "data_end",
    8: "data_meta",
    12: "ingress_ifindex",
    16: "rx_queue_index",
    20: "egress_ifindex",
}


def ctx_field(name: str) -> z3.BitVecRef:
    return z3.BitVec(f"ctx.{name}", 32)


def map_found(name: str, key_bits: int) -> z3.FuncDeclRef:
    return z3.Function(f"map.{name}.found", z3.BitVecSort(key_bits), z3.BoolSort())


def map_val(name: str, key_bits: int) -> z3.FuncDeclRef:
    return z3.Function(f"map.{name}.val", z3.BitVecSort(key_bits), BV32, BV8)


class Fresh:
    """Numbered fresh symbols of one exploration (helper results, unknowns, literals)."""

    def __init__(self):
        self.count = 0

    def _next(self) -> int:
        self.count += 1
        return self.count

    def helper(self, name: str) -> z3.BitVecRef:
        return z3.BitVec(f"helper.{name}.{self._next()}", 64)

    def unknown(self, why: str) -> z3.BitVecRef:
        return z3.BitVec(f"unknown.{why}.{self._next()}", 64)

    def summary(self) -> z3.BitVecRef:
        """A value standing for a long computation of inputs (see Explorer.bounded)."""
        return z3.BitVec(f"summary.{self._next()}", 64)

    def condition(self, prefix: str) -> z3.BoolRef:
        """A fresh unknown yes/no input named `<prefix>.<n>` (e.g. helper.ringbuf_reserve)."""
        return z3.BitVec(f"{prefix}.{self._next()}", 1) == 1

    def literal(self) -> z3.BoolRef:
        return z3.Bool(f"b!{self._next()}")


# --- what a symbol is -------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """One input a condition depends on: kind is packet | ctx | map | helper | unknown;
    `name` says which field/map/helper/reason."""

    kind: str
    name: str = ""


#: Prefixes of symbols z3 may choose freely although the program computes them (helper
#: results, unknowns, summaries): a model that sets one is no witness of what the program does.
FREE_PREFIXES = ("helper.", "unknown.", "summary.")


def source_of(symbol: str) -> Source | None:
    """The input behind a z3 symbol name (None for internal literals)."""
    if symbol.startswith("b!"):
        return None
    head, _, rest = symbol.partition(".")
    if head == "pkt":
        return Source("packet")
    if head == "ctx":
        return Source("ctx", rest)
    if head == "map":
        return Source("map", rest.rsplit(".", 1)[0])
    if head == "helper":
        return Source("helper", rest.rsplit(".", 1)[0])
    if head == "summary":
        return Source("summary", rest)
    return Source("unknown", rest.rsplit(".", 1)[0] if rest else symbol)


def native(wrapper, restype, nargs: int = 2):
    """z3's C function behind a z3core wrapper, called without the wrapper's per-call error
    check and without making a Python ExprRef per term (symbols walks whole DAGs: ~10x;
    fields' walks read whole conditions). `nargs` counts the context: two pointers, then
    unsigned ints. None when this z3 build's wrappers are laid out differently: callers then
    use z3's checked wrappers."""
    try:
        address = ctypes.cast(wrapper.__defaults__[0].f, ctypes.c_void_p).value
    except (AttributeError, IndexError, TypeError, ctypes.ArgumentError):
        return None
    return ctypes.CFUNCTYPE(restype, *[ctypes.c_void_p] * 2, *[ctypes.c_uint] * (nargs - 2))(address)


@dataclass(frozen=True)
class Z3C:
    """z3's C functions the term walks call on raw ASTs (`symbols` here, fields' offset and
    shape walks, report's instruction ranges, reasons' constant reads), one table for all.
    With `raw` each is the C function itself (`native`: it takes `ctx_ref().value` and
    `as_ast().value`); else z3's checked wrappers, which take the ExprRef's `ctx_ref()` and
    `as_ast()`. `handles` gives a walk's start in the form the table takes."""

    raw: bool
    ast_kind: object
    ast_id: object
    num_args: object
    arg: object
    decl: object
    decl_kind: object
    decl_name: object
    symbol: object
    body: object
    numeral: object
    sort: object
    sort_kind: object

    def handles(self, e: z3.AstRef) -> tuple:
        """(context, AST) of `e` as this table's functions take them: the raw pointers for
        the C functions, the ctypes objects for z3's wrappers (the walks' starting point)."""
        if self.raw:
            return e.ctx_ref().value, e.as_ast().value
        return e.ctx_ref(), e.as_ast()


def _z3c() -> Z3C:
    table = [  # (z3core wrapper, C return type, arguments counting the context)
        (z3core.Z3_get_ast_kind, ctypes.c_uint, 2),
        (z3core.Z3_get_ast_id, ctypes.c_uint, 2),
        (z3core.Z3_get_app_num_args, ctypes.c_uint, 2),
        (z3core.Z3_get_app_arg, ctypes.c_void_p, 3),
        (z3core.Z3_get_app_decl, ctypes.c_void_p, 2),
        (z3core.Z3_get_decl_kind, ctypes.c_uint, 2),
        (z3core.Z3_get_decl_name, ctypes.c_void_p, 2),
        (z3core.Z3_get_symbol_string, ctypes.c_char_p, 2),
        (z3core.Z3_get_quantifier_body, ctypes.c_void_p, 2),
        (z3core.Z3_get_numeral_string, ctypes.c_char_p, 2),
        (z3core.Z3_get_sort, ctypes.c_void_p, 2),
        (z3core.Z3_get_sort_kind, ctypes.c_uint, 2),
    ]
    natives = [native(wrapper, restype, nargs) for wrapper, restype, nargs in table]
    if all(natives):
        return Z3C(True, *natives)
    return Z3C(False, *[getattr(z3, wrapper.__name__) for wrapper, _, _ in table])


#: The C functions of this z3 build (see Z3C).
Z3_C = _z3c()

#: z3's public Python classes for a term, by its sort's kind (`wrap`).
_CLASS_OF_SORT = {z3.Z3_BOOL_SORT: z3.BoolRef, z3.Z3_BV_SORT: z3.BitVecRef, z3.Z3_ARRAY_SORT: z3.ArrayRef}


def wrap(ctx: z3.Context, ast) -> z3.ExprRef:
    """A raw AST (of a `Z3_C` walk) of context `ctx` as z3's Python term of its sort's class
    (BoolRef, BitVecRef, ArrayRef; else ExprRef), which keeps the term alive. `ast` may
    also be what z3core's wrappers return (a ctypes object)."""
    if Z3_C.raw and not isinstance(ast, int):
        ast = ast.value
    ref = ctx.ref().value if Z3_C.raw else ctx.ref()
    cls = _CLASS_OF_SORT.get(Z3_C.sort_kind(ref, Z3_C.sort(ref, ast)), z3.ExprRef)
    return cls(z3.Ast.from_buffer_copy(ctypes.c_void_p(ast)) if Z3_C.raw else ast, ctx)


def wrap_decl(ctx: z3.Context, decl) -> z3.FuncDeclRef:
    """A raw function declaration (`Z3_C.decl`) of context `ctx` as z3's FuncDeclRef."""
    return z3.FuncDeclRef(z3.FuncDecl.from_buffer_copy(ctypes.c_void_p(decl)) if Z3_C.raw else decl, ctx)


_AST_KIND, _AST_ID, _NUM_ARGS, _ARG = Z3_C.ast_kind, Z3_C.ast_id, Z3_C.num_args, Z3_C.arg
_DECL, _DECL_KIND, _DECL_NAME = Z3_C.decl, Z3_C.decl_kind, Z3_C.decl_name
_SYMBOL, _BODY = Z3_C.symbol, Z3_C.body


_NONE: frozenset[str] = frozenset()


def symbols(expr: z3.ExprRef, cache: dict | None = None) -> frozenset[str]:
    """Names of the free constants and uninterpreted functions in `expr`. `cache` maps a
    term id to (names, term) for `expr` and every compound term under it (`term`: `expr`,
    which keeps them alive: z3 reuses the ids of freed terms), so a subterm met again,
    under this term or another, is answered from the cache without walking it. The walk
    reads z3's terms through its C API, no Python wrapper per node."""
    cache = {} if cache is None else cache
    eid = expr.get_id()
    if eid in cache:
        return cache[eid][0]
    ctx, root = Z3_C.handles(expr)
    leaves: dict[int, frozenset[str]] = {}  # constants and leaf names met in this walk
    # post-order: (ast, id, None) first visit; (ast, id, child ids) once the children are done
    stack: list = [(root, eid, None)]
    while stack:
        a, aid, kids = stack.pop()
        if kids is not None:
            names = _NONE
            for k in kids:
                got = leaves[k] if k in leaves else cache[k][0]
                if got and got is not names:
                    names = got if not names else names | got
            cache[aid] = (names, expr)
            continue
        if aid in cache or aid in leaves:
            continue
        kind = _AST_KIND(ctx, a)
        if kind == z3.Z3_APP_AST:
            decl = _DECL(ctx, a)
            own = _NONE
            if _DECL_KIND(ctx, decl) == z3.Z3_OP_UNINTERPRETED:
                name = _SYMBOL(ctx, _DECL_NAME(ctx, decl))
                own = frozenset((name.decode() if isinstance(name, bytes) else name,))
            n = _NUM_ARGS(ctx, a)
            if n == 0:
                leaves[aid] = own
                continue
            args = [_ARG(ctx, a, i) for i in range(n)]
            ids = [_AST_ID(ctx, x) for x in args]
            if own:
                leaves[-aid - 1] = own  # the application's own name, with its arguments'
                ids.append(-aid - 1)
            stack.append((a, aid, ids))
            stack.extend((x, i, None) for x, i in zip(args, ids) if i >= 0 and i not in cache and i not in leaves)
        elif kind == z3.Z3_QUANTIFIER_AST:  # quantifiers and lambdas
            body = _BODY(ctx, a)
            bid = _AST_ID(ctx, body)
            stack.append((a, aid, [bid]))
            stack.append((body, bid, None))
        else:  # variables, sorts: no names
            leaves[aid] = _NONE
    return cache[eid][0] if eid in cache else leaves[eid]


# --- terms built without the Python API's coercions -------------------------------------
# z3.And/Or/If/Not and `==` check and cast every argument's sort in Python (most of a merge's
# time); these make the same terms (the same C calls, z3 hash-conses them) from arguments
# that already have the right sorts.


#: glibc malloc settings (malloc.h: M_MMAP_THRESHOLD, M_TRIM_THRESHOLD) `fresh_context`
#: makes once per process: blocks up to 16 MiB come from the heap, and up to 64 MiB free at
#: its top stay there.
HEAP_SETTINGS = ((-3, 16 << 20), (-1, 64 << 20))
_heap_kept = False


def fresh_context() -> z3.Context:
    """A new z3 context, for a query whose answer must not depend on the terms the process
    made before (fields' renderings, rules/isolation.py, reasons' facts).

    The first call has glibc's malloc reuse freed memory for them: a z3 context allocates
    ~16 MiB in blocks glibc maps afresh and unmaps when they are freed (above its mmap
    threshold, which stays at 128 KiB once the heap is fragmented), so each context
    page-faulted ~4,000 pages, ~12 ms of CPU, instead of ~1.5 ms from the heap (bench:
    xdpfilt_dny_all's 162 renderings 1.9 s -> 0.25 s). Without glibc (no mallopt) the
    settings are left alone."""
    global _heap_kept
    if not _heap_kept:
        _heap_kept = True
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            mallopt = None
        for param, value in HEAP_SETTINGS if mallopt is not None else ():
            mallopt(param, value)
    return z3.Context()


def truth(e: z3.BoolRef) -> bool | None:
    """True or False when `e` is that constant, else None (z3.is_true/is_false in one C call)."""
    v = z3core.Z3_get_bool_value(e.ctx.ref(), e.as_ast())
    return True if v == z3.Z3_L_TRUE else False if v == z3.Z3_L_FALSE else None


def mk_and(args) -> z3.BoolRef:
    """z3.And(*args) for Boolean terms (at least one)."""
    ctx = args[0].ctx
    arr = (z3.Ast * len(args))(*[a.as_ast() for a in args])
    return z3.BoolRef(z3core.Z3_mk_and(ctx.ref(), len(args), arr), ctx)


def mk_or(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    """z3.Or(a, b) for Boolean terms."""
    arr = (z3.Ast * 2)(a.as_ast(), b.as_ast())
    return z3.BoolRef(z3core.Z3_mk_or(a.ctx.ref(), 2, arr), a.ctx)


def mk_not(a: z3.BoolRef) -> z3.BoolRef:
    """z3.Not(a) for a Boolean term."""
    return z3.BoolRef(z3core.Z3_mk_not(a.ctx.ref(), a.as_ast()), a.ctx)


def mk_eq(a: z3.ExprRef, b: z3.ExprRef) -> z3.BoolRef:
    """a == b for terms of the same sort."""
    return z3.BoolRef(z3core.Z3_mk_eq(a.ctx.ref(), a.as_ast(), b.as_ast()), a.ctx)


def mk_ite(c: z3.BoolRef, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
    """z3.If(c, a, b) for `a` and `b` of the same sort."""
    for cls in (z3.BitVecRef, z3.ArrayRef, z3.BoolRef):
        if isinstance(a, cls) and truth(c) is None:  # else a value may come back
            return cls(z3core.Z3_mk_ite(c.ctx.ref(), c.as_ast(), a.as_ast(), b.as_ast()), c.ctx)
    return z3.If(c, a, b)


def check(solver: z3.Solver, assumptions) -> z3.CheckSatResult:
    """solver.check(*assumptions) for Boolean terms (no sort cast per assumption)."""
    arr = (z3.Ast * len(assumptions))(*[a.as_ast() for a in assumptions])
    return z3.CheckSatResult(z3core.Z3_solver_check_assumptions(solver.ctx.ref(), solver.solver, len(assumptions), arr))


# --- nonlinear terms --------------------------------------------------------------------

#: Operations z3 decides by bit-blasting a multiplier or a divider circuit (64 bits: thousands
#: of clauses that every later check carries) when the operands vary.
_MUL_OPS = frozenset({z3.Z3_OP_BMUL})
_DIV_OPS = frozenset(
    {
        z3.Z3_OP_BUDIV,
        z3.Z3_OP_BUDIV0,
        z3.Z3_OP_BUDIV_I,
        z3.Z3_OP_BSDIV,
        z3.Z3_OP_BSDIV0,
        z3.Z3_OP_BSDIV_I,
        z3.Z3_OP_BUREM,
        z3.Z3_OP_BUREM0,
        z3.Z3_OP_BUREM_I,
        z3.Z3_OP_BSREM,
        z3.Z3_OP_BSREM0,
        z3.Z3_OP_BSREM_I,
        z3.Z3_OP_BSMOD,
        z3.Z3_OP_BSMOD0,
        z3.Z3_OP_BSMOD_I,
    }
)
#: Reads of an input: a constant, an uninterpreted function's value, an array element.
_READ_OPS = frozenset({z3.Z3_OP_UNINTERPRETED, z3.Z3_OP_SELECT})


def _is_nonlinear(e: z3.ExprRef) -> bool:
    kind = e.decl().kind()
    if kind in _MUL_OPS:
        return sum(not z3.is_bv_value(a) for a in e.children()) >= 2
    if kind in _DIV_OPS:
        return not z3.is_bv_value(e.arg(1))
    return False


def _is_read(e: z3.ExprRef) -> bool:
    return e.decl().kind() in _READ_OPS


def _outermost(expr: z3.ExprRef, wanted, memo: dict) -> list[z3.ExprRef]:
    """The outermost subterms of `expr` for which `wanted` holds (each once, in the order
    met). `memo` maps a term id to (whether such a subterm is under it, the term): a term
    known to have none is not walked again (holding the term keeps z3 from reusing its id)."""
    found: dict[int, z3.ExprRef] = {}
    stack, seen = [expr], set()
    visited = []
    while stack:
        e = stack.pop()
        eid = e.get_id()
        if eid in seen:
            continue
        seen.add(eid)
        known = memo.get(eid)
        if known is not None and not known[0]:
            continue
        if not z3.is_app(e):
            continue
        if wanted(e):
            found[eid] = e
            continue
        visited.append(e)
        stack.extend(e.children())
    # a walked term has a wanted subterm exactly when one of its walked descendants was
    # found; record "none" only for terms whose whole walk found nothing
    if not found:
        for e in visited:
            memo[e.get_id()] = (False, e)
    return list(found.values())


def nonlinear_terms(expr: z3.ExprRef, memo: dict) -> list[z3.ExprRef]:
    """The outermost products, quotients and remainders of two non-constant operands in
    `expr` (`memo`: see `_outermost`; one memo per kind of walk)."""
    return _outermost(expr, _is_nonlinear, memo)


def input_reads(expr: z3.ExprRef, memo: dict) -> list[z3.ExprRef]:
    """The outermost reads of inputs in `expr` (constants, uninterpreted function values,
    array elements): fixing their values fixes the value of `expr`."""
    return _outermost(expr, _is_read, memo)
