"""Symbolic exploration of every path of an XDP program with z3.

`explore(obj, program)` runs the lifter's IR over symbolic inputs (see symbolic.py) and
returns an `Exploration`: every path with its verdict, condition and effects, and every
conditional branch with the inputs its condition depends on.

How paths are kept in check:

* infeasible branches are pruned: each branch condition gets a literal defined once in one
  incremental solver, and a path is the list of literals it took (`check(assumptions)`);
  a state keeps the model of its last check (`Witness`), so the direction that model
  takes needs no solver call; the model is fetched from z3 only when read (a state merged
  away first never needs it: `_settle`);
* states are processed in reverse post-order, and two states that reach the same place
  with identical contents are merged exactly (path conditions or-ed, instruction counts
  kept as an if-then-else), so N independent or-ed tests give N+1 states, not 2^N;
* loops are unrolled up to `Options.loop_bound` iterations, bpf_loop up to the same bound;
  a path cut there ends with verdict UNKNOWN and says so (`truncated`);
* past `Options.max_insns` executed instructions every remaining state ends the same way;
  so does every state open when `Options.timeout` runs out, and a state that has taken more
  than `Options.path_timeout`: each says where it was cut, and `Exploration.budget` lists the
  functions explored and those not reached (a partial report);
* a load or store at a constant offset past a map value's or global section's value_size,
  which the kernel's verifier refuses (`xdp.refused_value_access`), ends the path UNKNOWN
  saying so (`Refused`) instead of reading bytes no loaded program has;
* a value whose operations nest deeper than MAX_DEPTH (a hash, a long checksum) becomes a
  `summary.<n>` symbol (`bounded`): any value to the solver, its definition kept aside, so
  long computations neither slow z3 down nor cut the path.

Semantics follow RFC 9669 for instructions and the kernel for helpers (helpers.py, calls.py).
"""

from __future__ import annotations

import heapq
import itertools
import time

import z3
from z3 import z3core

from lifter.errors import LiftError
from lifter.insn import (
    Alu,
    AluOp,
    Atomic,
    ByteOrder,
    Call,
    Cond,
    Endian,
    Exit,
    ExternRef,
    FuncRef,
    Goto,
    Imm,
    Jump,
    LegacyLoad,
    Load,
    LoadImm64,
    MapRef,
    MovSx,
    Neg,
    Store,
    slots,
)
from lifter.maps import is_global_data_section
from lifter.opcodes import AtomicOp
from lifter.program import BpfObject, Function, Program

from . import calls
from .exploration import (
    MAX_SITE_CONDITIONS,
    UNKNOWN,
    BranchSite,
    Budget,
    Exploration,
    ExplorationError,
    Options,
    Path,
)
from .semantics import alu, compare
from .state import Effect, Frame, MapAccess, MapWrite, PtrByte, State, Witness, byte_after, found_after
from .symbolic import (
    PACKET,
    PACKET_FRAGS,
    PACKET_LEN,
    XDP_MD_FIELDS,
    Z3_C,
    Fresh,
    Pointer,
    Region,
    RegionKind,
    Scalar,
    Source,
    Value,
    bv,
    check,
    const_value,
    ctx_field,
    input_reads,
    map_found,
    map_val,
    mk_and,
    mk_eq,
    mk_ite,
    mk_not,
    mk_or,
    nonlinear_terms,
    scalar,
    source_of,
    symbols,
    truth,
)
from .xdp import MAX_FRAGS_BYTES, refused_value_access

#: Nesting depth of operations past which a value is summarised (`Explorer.bounded`): a
#: parser's offsets, a checksum over a header or a short hash stay well below it.
MAX_DEPTH = 32
#: The same for an operand of a multiplication, division or remainder of two variables.
MAX_NONLINEAR_DEPTH = 8


class Observer:
    """Watches an exploration instruction by instruction (the cost model counts with one).

    Every method does nothing here; an observer overrides what it needs. The engine calls
    `on_start` with the program's initial state before the first instruction,
    `on_instruction` before each instruction runs (the state's `steps` already counts it),
    `after_instruction` with the states it left (what a helper returned is known only then),
    and `on_path_end` with each path as it ends. An observer may set the state's `steps` to
    any value that supports `+ 1` and merging (the cost model packs a vector into it); it
    must not change anything else the engine reads."""

    def on_start(self, state: State) -> None:
        """The initial state of the explored program, before it runs."""

    def on_instruction(self, state: State, insn) -> None:
        """`insn` is about to run on `state`."""

    def after_instruction(self, insn, states: list[State]) -> None:
        """`insn` ran; `states` are its successors (paths it ended are not among them)."""

    def on_path_end(self, state: State, path: Path) -> None:
        """`state` ended as `path`."""


#: The share of `Options.timeout` the exploration may take: the rest is left to the report of
#: what it found and cut (decoding fields, map proofs: ~5-9 s of 60 on the 20k-instruction
#: tailcall_stages and on eUPF under load, issue 14).
EXPLORE_SHARE = 0.8

#: z3's own default for a solver's "timeout" parameter (UINT_MAX ms: none).
NO_SOLVER_TIMEOUT = 4294967295


class Refused(Exception):
    """An access the kernel's verifier refuses (`refused_value_access`): no packet ever runs
    it, since the program does not load. The state ends UNKNOWN at the instruction with this
    reason and the path condition it had before the instruction (forks of the instruction
    included), so that it covers the inputs of every direction it drops."""


class OutOfTime(Exception):
    """A solver check that a time budget stopped; `why` says which budget and where the
    state was (the state is cut there as a whole: forks of the same instruction included)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class Nonlinear:
    """Products, quotients and remainders of two variables, kept out of the exploring
    solver: z3 bit-blasts each into a 64-bit multiplier or divider circuit, and every later
    check of that incremental solver carries it (eUPF's rate limiter: 30-100 ms a check).

    Once the program has computed one (`seen`), each branch condition reaches the solver
    with such terms replaced by symbols `nonlinear!<n>` (`abstract`), which the solver may
    set to anything: an unsatisfiable check is unsatisfiable with the real terms too, and a
    model is taken only after it is shown to be one of the real terms: the symbols already
    equal their terms' values in it (`consistent`), or a check with every input the terms
    read fixed to the model's values and the symbols to the resulting values (`pinned`)
    finds one; otherwise an exact solver decides. So the directions found are exactly those
    of the real terms, and the witnesses kept are models of them."""

    def __init__(self):
        self.seen = False
        self.terms: dict[int, tuple[z3.ExprRef, z3.BitVecRef]] = {}  # term id -> (term, symbol)
        self._memo: dict = {}
        self._reads: dict[int, list[z3.ExprRef]] = {}
        self.exact_checks = 0

    def abstract(self, cond: z3.BoolRef) -> z3.BoolRef:
        found = nonlinear_terms(cond, self._memo)
        if not found:
            return cond
        pairs = []
        for t in found:
            entry = self.terms.get(t.get_id())
            if entry is None:
                symbol = z3.BitVec(f"nonlinear!{len(self.terms) + 1}", t.size())
                entry = self.terms[t.get_id()] = (t, symbol)
                self._reads[t.get_id()] = input_reads(t, {})
            pairs.append((t, entry[1]))
        return z3.substitute(cond, *pairs)

    def consistent(self, model: z3.ModelRef) -> bool:
        for term, symbol in self.terms.values():
            if not z3.eq(model.eval(symbol, model_completion=True), model.eval(term, model_completion=True)):
                return False
        return True

    def pinned(self, model: z3.ModelRef) -> list[z3.BoolRef]:
        out = []
        for tid, (term, symbol) in self.terms.items():
            out.append(symbol == model.eval(term, model_completion=True))
            out += [r == model.eval(r, model_completion=True) for r in self._reads[tid]]
        return out


class Explorer:
    """One exploration; `calls.py` adds the helper and call semantics (it sees this class only
    through its `Engine` interface)."""

    def __init__(
        self, obj: BpfObject, program: Program, options: Options, progress=None, observer: Observer | None = None
    ):
        self.obj = obj
        self.program = program
        self.options = options
        self.progress = progress
        self.observer = observer or Observer()
        self.fresh = Fresh()
        self.solver = z3.Solver()
        self.definitions: list[tuple[z3.BoolRef, z3.BoolRef]] = []
        self._defined: dict[str, z3.BoolRef] = {}  # literal name -> its condition
        self._literals: dict[str, z3.BoolRef] = {}  # literal name -> the literal
        self.sites: dict[tuple[str, int], BranchSite] = {}
        self.paths: list[Path] = []
        self.maps = {m.name: m for m in obj.maps}
        self.written_maps: set[str] = set()
        self.read_maps: set[str] = set()
        self.insns = 0
        self.programs_seen = [program.name]
        self._heap: list = []
        self._pending: dict[tuple, State] = {}
        self._seq = itertools.count()
        self._order: dict[tuple, dict[int, int]] = {}
        self._leaders: dict[tuple, set[int]] = {}
        self._back_edges: dict[tuple, set[tuple[int, int]]] = {}
        self._exit_blocks: dict[tuple, set[int]] = {}
        self._insn_at: dict[tuple, dict[int, object]] = {}
        self._sym_cache: dict = {}
        self._literal_sources: dict[str, set[Source]] = {}  # literals and large-term unknowns
        self._depths: dict[int, tuple[int, z3.ExprRef]] = {}
        self._deadline: float | None = None
        self._functions_run: set[tuple[str, int]] = set()
        self._block_start = 0.0
        self._ran_out = False
        self._exact: z3.Solver | None = None  # see _exact_solver
        #: the witness of the exploring solver's last sat check, its model not fetched yet
        #: (see `_settle`): most such witnesses die in a merge before anyone reads them
        self._unfetched: Witness | None = None
        #: summary symbol name -> (the value it stands for, where it was made)
        self.summaries: dict[str, tuple[z3.BitVecRef, str]] = {}
        frags = program.attach == "xdp.frags"
        self._environment = [z3.UGE(PACKET_LEN, options.min_len), z3.ULE(PACKET_LEN, options.max_len)]
        self._environment.append(z3.ULE(PACKET_FRAGS, MAX_FRAGS_BYTES) if frags else PACKET_FRAGS == 0)
        self.solver.add(*self._environment)
        self.nonlinear = Nonlinear()

    # --- driver ---------------------------------------------------------------------

    def run(self) -> Exploration:
        start = time.perf_counter()
        opts = self.options
        begun = start if opts.started is None else opts.started
        deadline = self._deadline = None if opts.timeout is None else begun + opts.timeout * EXPLORE_SHARE
        initial = self._initial(self.program)
        self.observer.on_start(initial)
        self._push(initial)
        last_report = start
        self._ran_out = False
        while self._heap:
            _, _, state = heapq.heappop(self._heap)
            if state.dead:
                continue
            key = getattr(state, "merge_key", None)
            if key is not None and self._pending.get(key) is state:
                del self._pending[key]
            if self.insns >= opts.max_insns or len(self.paths) >= opts.max_paths:
                limit = f"{opts.max_insns} instructions" if self.insns >= opts.max_insns else f"{opts.max_paths} paths"
                self.end_path(state, UNKNOWN, None, truncated=f"exploration budget of {limit} reached")
                continue
            now = time.perf_counter()
            if deadline is not None and now >= deadline:
                self._ran_out = True
                self.end_path(state, UNKNOWN, None, truncated=self._cut(state, f"time budget of {opts.timeout:g} s"))
                continue
            if opts.path_timeout is not None and state.spent >= opts.path_timeout:
                self.end_path(
                    state, UNKNOWN, None, truncated=self._cut(state, f"path time budget of {opts.path_timeout:g} s")
                )
                continue
            self._functions_run.add(state.func.key)
            self._block_start = now
            try:
                self._run_block(state)
            except OutOfTime as stop:  # a solver check the budget stopped: cut where it was
                self.end_path(state, UNKNOWN, None, truncated=stop.why)
            if self.progress is not None and time.perf_counter() - last_report > 0.5:
                last_report = time.perf_counter()
                self.progress(len(self.paths), len(self._heap), self.insns)
        budget = None
        if opts.timeout is not None or opts.path_timeout is not None:
            budget = self._budget(self._ran_out)
        solver = self._exact_solver() if self.nonlinear.terms else self.solver
        solver.set("timeout", NO_SOLVER_TIMEOUT)  # the solver goes on to the proofs
        return Exploration(
            self.obj,
            self.program,
            self.options,
            self.paths,
            self.sites,
            solver,
            self.definitions,
            self.written_maps,
            self.read_maps,
            self.insns,
            time.perf_counter() - start,
            self.programs_seen,
            summaries=self.summaries,
            budget=budget,
        )

    def _out_of_time(self, state: State) -> bool:
        """Inside a long block: end `state` as cut when a time budget ran out."""
        why = self._over_budget(state)
        if why is not None:
            self.end_path(state, UNKNOWN, None, truncated=why)
        return why is not None

    def _over_budget(self, state: State) -> str | None:
        """Why and where `state` is cut when a time budget has run out, else None."""
        now = time.perf_counter()
        if self._deadline is not None and now >= self._deadline:
            self._ran_out = True
            return self._cut(state, f"time budget of {self.options.timeout:g} s")
        if self.options.path_timeout is not None and state.spent + now - self._block_start >= self.options.path_timeout:
            return self._cut(state, f"path time budget of {self.options.path_timeout:g} s")
        return None

    def _time_left(self, state: State) -> float | None:
        """Seconds until a time budget cuts `state` (None: no budget)."""
        now = time.perf_counter()
        left = None if self._deadline is None else self._deadline - now
        if self.options.path_timeout is not None:
            path_left = self.options.path_timeout - (state.spent + now - self._block_start)
            left = path_left if left is None else min(left, path_left)
        return left

    def _cut(self, s: State, budget: str) -> str:
        """Why and where a budget cut this state (the instruction and source line it was at)."""
        steps = f", {s.steps} instructions in" if isinstance(s.steps, int) else ""
        return f"{budget} ran out at {self.where(s)}{steps}"

    def _budget(self, ran_out: bool) -> Budget:
        # the programs it ran, and those the object's PROG_ARRAYs name that no path reached
        named = {
            n
            for m in self.obj.maps
            if m.type is not None and m.type.holds == "program"
            for n in m.static_values.values()
        }
        programs = [self.program] + [
            p for p in self.obj.programs if (p.name in self.programs_seen or p.name in named) and p is not self.program
        ]
        explored, not_reached = [], []
        for prog in programs:
            for f in prog.functions:
                name = f"{prog.name}:{f.name}" if f.name != prog.name else prog.name
                (explored if f.key in self._functions_run else not_reached).append(name)
        cut = [p.id for p in self.paths if p.truncated and " time budget of " in f" {p.truncated}"]
        return Budget(self.options.timeout, self.options.path_timeout, ran_out, explored, not_reached, cut)

    def _initial(self, program: Program) -> State:
        regs: list[Value | None] = [None] * 11
        regs[1] = Pointer(Region(RegionKind.CTX), bv(0))
        regs[10] = Pointer(Region(RegionKind.STACK, frame=0), bv(0))
        return State(program, [Frame(program.entry)], program.entry.start, regs, [{}], PACKET, bv(0), PACKET_LEN, bv(0))

    def _priority(self, state: State) -> tuple:
        parts: list = [len(state.tail_calls)]
        for caller, frame in zip(state.frames, state.frames[1:]):
            parts.append((self._rank(caller.func, frame.ret_pc), 0))
        parts.append((self._rank(state.func, state.pc), 1))
        return tuple(parts)

    def _rank(self, func: Function, pc: int) -> int:
        order = self._order.get(func.key)
        if order is None:
            cfg = func.cfg
            rpo = cfg.postorder()[::-1]
            index = {b: i for i, b in enumerate(rpo)}
            order = {}
            for b, block in cfg.blocks.items():
                for insn in block.insns:
                    order[insn.pc] = index.get(b, len(rpo)) * 1_000_000 + insn.pc
            self._order[func.key] = order
        return order[pc]

    def _merge_key(self, state: State) -> tuple:
        self.insn_at(state.func, state.pc)
        at_exit = state.depth == 0 and state.pc in self._exit_blocks[state.func.key]
        return (state.location(), state.shape(exact_r0=at_exit))

    def _push(self, state: State) -> None:
        if self.options.merge:
            key = state.merge_key = self._merge_key(state)
            other = self._pending.get(key)
            if other is not None and not other.dead:
                self._forget(state)  # before the merge's definition moves the solver on
                self._merge(other, state)
                return
            self._pending[key] = state
        heapq.heappush(self._heap, (self._priority(state), next(self._seq), state))

    def _merge(self, into: State, other: State) -> None:
        """Merge `other` into `into` (same place, same shape): the path condition becomes
        the disjunction, every differing number an if-then-else on which path was taken.
        Exact: the two path conditions are disjoint."""
        common = 0
        for a, b in zip(into.path, other.path):
            if a.get_id() != b.get_id():
                break
            common += 1
        rest_a, rest_b = into.path[common:], other.path[common:]
        cond_a = mk_and(rest_a) if rest_a else z3.BoolVal(True)
        cond_b = mk_and(rest_b) if rest_b else z3.BoolVal(True)
        lit = self._define(mk_or(cond_a, cond_b))

        def pick(a, b):
            return a if a.get_id() == b.get_id() else mk_ite(cond_a, a, b)

        def pick_null(a, b):
            if a is None and b is None:
                return None
            return pick(a if a is not None else z3.BoolVal(False), b if b is not None else z3.BoolVal(False))

        def pick_value(a, b):
            if a is None or a.fingerprint() == b.fingerprint():
                return a
            if isinstance(a, Scalar):
                return Scalar(pick(a.bv, b.bv))
            return Pointer(a.region, pick(a.off, b.off), pick_null(a.null, b.null))

        into.regs = [pick_value(a, b) for a, b in zip(into.regs, other.regs)]
        spilled: dict[tuple[int, int], Pointer] = {}  # one merged pointer per spill slot pair
        for sa, sb in zip(into.stacks, other.stacks):
            for off, byte in sa.items():
                if not isinstance(byte, PtrByte):
                    sa[off] = pick(byte, sb[off])
                elif byte.fingerprint() != sb[off].fingerprint():
                    pair = (id(byte.ptr), id(sb[off].ptr))
                    if pair not in spilled:
                        spilled[pair] = pick_value(byte.ptr, sb[off].ptr)
                    sa[off] = PtrByte(spilled[pair], byte.index)
        into.pkt, into.head = pick(into.pkt, other.pkt), pick(into.head, other.head)
        into.end, into.meta = pick(into.end, other.end), pick(into.meta, other.meta)
        if not (isinstance(into.steps, int) and isinstance(other.steps, int) and into.steps == other.steps):
            sa = bv(into.steps) if isinstance(into.steps, int) else into.steps
            sb = bv(other.steps) if isinstance(other.steps, int) else other.steps
            into.steps = mk_ite(cond_a, sa, sb)
        into.path = into.path[:common] + (lit,)
        into.spent = max(into.spent, other.spent)
        into.sites = into.sites | other.sites
        seen = {(a.map, a.key.get_id()) for a in into.accesses}
        into.accesses = into.accesses + tuple(a for a in other.accesses if (a.map, a.key.get_id()) not in seen)
        other.dead = True

    def _define(self, cond: z3.BoolRef, sources: set[Source] | None = None) -> z3.BoolRef:
        """A new branch literal standing for `cond`, its definition asserted; `sources`:
        `self.sources(cond)` when the caller has it already (fork_on)."""
        self._settle()
        lit = self.fresh.literal()
        definition = mk_eq(lit, self.nonlinear.abstract(cond) if self.nonlinear.seen else cond)
        z3core.Z3_solver_assert(self.solver.ctx.ref(), self.solver.solver, definition.as_ast())
        if self._exact is not None:
            self._exact.add(lit == cond)
        self.definitions.append((lit, cond))
        name = lit.decl().name()
        self._defined[name] = cond
        self._literals[name] = lit
        self._literal_sources[name] = self.sources(cond) if sources is None else sources
        return lit

    def sources(self, expr: z3.ExprRef) -> set[Source]:
        """The program inputs `expr` depends on, through merged values (whose if-then-else
        conditions are literals) too."""
        out = set()
        for name in symbols(expr, self._sym_cache):
            if name in self._literal_sources:
                out |= self._literal_sources[name]
            else:
                src = source_of(name)
                if src is not None:
                    out.add(src)
        return out

    def feasible(self, state: State, *extra: z3.BoolRef) -> z3.ModelRef | None:
        """A model of `state`'s path and `extra` (a model of every definition: the
        literals' and the nonlinear terms'), None when there is none; `_LATER` when it is
        the exploring solver's last model, to be fetched by `_settle` if it is read."""
        if not self.nonlinear.terms:  # the model is fetched when it is read (`_settle`)
            return self._check(self.solver, state, extra, lazy=True)
        model = self._check(self.solver, state, extra)
        if model is None:
            return model
        # The solver saw products and quotients as free symbols: a model that gives them
        # their values is a model; else one with their operands fixed to the model's values
        # (a cheap check); else the exact solver decides (slow: it bit-blasts them).
        if self.nonlinear.consistent(model):
            return model
        pinned = self._check(self.solver, state, (*extra, *self.nonlinear.pinned(model)))
        if pinned is not None:
            return pinned
        self.nonlinear.exact_checks += 1
        return self._check(self._exact_solver(), state, extra)

    def _check(self, solver: z3.Solver, state: State, extra, lazy: bool = False) -> z3.ModelRef | None:
        """A model of `state`'s path and `extra` from `solver`, None when there is none
        (`lazy`: `_LATER` for a model to be fetched from the exploring solver by `_settle`)."""
        self._settle()
        left = self._time_left(state)
        if left is not None:  # one check must not outlast the budget (z3 counts milliseconds)
            solver.set("timeout", max(1, int(left * 1000) + 1))
        result = check(solver, (*state.path, *extra))
        if result == z3.unknown:
            why = None if left is None else self._over_budget(state)
            if why is not None:
                raise OutOfTime(why)
            raise ExplorationError(f"z3 gave up on a path condition: {solver.reason_unknown()}")
        if result != z3.sat:
            return None
        return _LATER if lazy else solver.model()

    def _settle(self) -> None:
        """Fetch the model of the exploring solver's last check for the witness still
        waiting for it, before the solver moves on (a check or an assertion): the same model
        an eager fetch would have got. A witness whose state died first (merged into
        another, or ended) is never fetched (`_forget`): z3 takes as long to hand out a
        model as to find it."""
        w = self._unfetched
        if w is not None:
            self._unfetched = None
            w.model = self.solver.model()

    def _forget(self, s: State) -> None:
        """`s` died (merged away or ended): its witness, if still unfetched and held by no
        other state, will never be read."""
        w = s.witness
        if w is not None and w is self._unfetched and not w.shared:
            self._unfetched = None

    def _exact_solver(self) -> z3.Solver:
        """A solver with the literals' definitions as they are (products and quotients
        included), made when first needed."""
        if self._exact is None:
            self._settle()
            self._exact = z3.Solver()
            self._exact.add(*self._environment)
            self._exact.add(*[lit == cond for lit, cond in self.definitions])
        return self._exact

    def _decide(self, s: State, lit: z3.BoolRef) -> dict[bool, Witness | None]:
        """The feasible directions of branch literal `lit` on `s`, each with a model of the
        path that takes it: the direction `s`'s witness satisfies needs no solver call, the
        other one a check (whose model the state taking it keeps)."""
        known = self._value_under(s.witness, lit)
        out: dict[bool, Witness | None] = {}
        for d, c in ((True, lit), (False, mk_not(lit))):
            if d == known:
                out[d] = s.witness
            else:
                model = self.feasible(s, c)
                if model is _LATER:
                    out[d] = self._unfetched = Witness(None, self.fresh.count)
                elif model is not None:
                    out[d] = Witness(model, self.fresh.count)
        return out

    def _value_under(self, w: Witness | None, expr: z3.BoolRef) -> bool | None:
        """`expr`'s value in `w`'s model extended by the literals defined since it was found
        (None: no witness, or not decided)."""
        if w is None:
            return None
        if w.model is None:  # the last check's: nothing has used the solver since
            self._settle()
        for name in sorted(symbols(expr, self._sym_cache)):
            if name.startswith("b!") and int(name[2:]) > w.known:
                if name not in w.values:
                    try:
                        value = self._value_under(w, self._defined[name])
                    except RecursionError:  # a long chain of merges: ask the solver
                        value = None
                    w.values[name] = value
                    if value is not None:  # the model extended by it (no substitution per query)
                        w.model.update_value(self._literals[name], z3.BoolVal(value))
                if w.values[name] is None:
                    return None
        value = w.model.eval(expr, model_completion=True)
        return truth(value)

    # --- instructions ---------------------------------------------------------------

    def insn_at(self, func: Function, pc: int):
        table = self._insn_at.get(func.key)
        if table is None:
            table = {i.pc: i for i in func.insns}
            self._insn_at[func.key] = table
            self._leaders[func.key] = set(func.cfg.blocks)
            self._exit_blocks[func.key] = {
                i.pc for b in func.cfg.blocks.values() if isinstance(b.last, Exit) for i in b.insns
            }
            self._back_edges[func.key] = {(func.cfg.blocks[b].last.pc, h) for b, h in func.cfg.retreating}
        return table[pc]

    def _run_block(self, state: State) -> None:
        timed = self._deadline is not None or self.options.path_timeout is not None
        while True:
            insn = self.insn_at(state.func, state.pc)
            self.insns += 1
            if timed and self.insns % 1024 == 0 and self._out_of_time(state):
                return
            state.steps = state.steps + 1 if isinstance(state.steps, int) else state.steps + 1
            func, depth = state.func, state.depth
            self.observer.on_instruction(state, insn)
            try:
                successors = self.step(state, insn)
            except Refused as refused:
                self.end_path(state, UNKNOWN, None, truncated=f"{refused} at {self.where(state, insn.pc)}", pc=insn.pc)
                successors = []
            self.observer.after_instruction(insn, successors)
            for t in successors:  # a back edge may be taken, fall through or be a goto
                if t.frames and t.func is func and t.depth == depth:
                    self._count_back_edge(t, insn.pc, t.pc)
            successors = [t for t in successors if t.frames]
            if len(successors) == 1 and successors[0] is state and state.frames:
                self.insn_at(state.func, state.pc)  # builds the function's tables
                if state.pc not in self._leaders[state.func.key]:
                    continue
            spent = time.perf_counter() - self._block_start
            for s in successors:
                s.spent += spent
            for s in successors:
                if s.frames:
                    self._push(s)
            return

    def step(self, s: State, insn) -> list[State]:
        """Execute one instruction; returns the successor states (ended paths are not)."""
        if isinstance(insn, Alu):
            self._alu(s, insn)
        elif isinstance(insn, Neg):
            v = self.scalar_of(s, insn.dst, insn.pc)
            s.regs[insn.dst] = scalar(alu(AluOp.SUB, insn.wide, bv(0), v))
        elif isinstance(insn, MovSx):
            v = self.scalar_of(s, insn.src, insn.pc)
            r = z3.SignExt(64 - insn.bits, z3.Extract(insn.bits - 1, 0, v))
            s.regs[insn.dst] = scalar(z3.simplify(r if insn.wide else z3.ZeroExt(32, z3.Extract(31, 0, r))))
        elif isinstance(insn, Endian):
            self._endian(s, insn)
        elif isinstance(insn, Load):
            v = self.load(s, s.regs[insn.base], insn.off, insn.size, insn.pc)
            if insn.signed and isinstance(v, Scalar):
                v = scalar(z3.simplify(z3.SignExt(64 - 8 * insn.size, z3.Extract(8 * insn.size - 1, 0, v.bv))))
            s.regs[insn.dst] = v
        elif isinstance(insn, Store):
            value = scalar(bv(insn.src.value)) if isinstance(insn.src, Imm) else s.regs[insn.src.n]
            self.store(s, s.regs[insn.base], insn.off, insn.size, value, insn.pc)
        elif isinstance(insn, Atomic):
            self._atomic(s, insn)
        elif isinstance(insn, LoadImm64):
            s.regs[insn.dst] = self._ld_imm64(s, insn)
        elif isinstance(insn, LegacyLoad):
            self.end_path(
                s,
                UNKNOWN,
                None,
                truncated=f"legacy packet load (ld_abs/ld_ind) at {self.where(s)}, which XDP programs cannot use",
            )
            return []
        elif isinstance(insn, Jump):
            return self._jump(s, insn)
        elif isinstance(insn, Goto):
            s.pc = insn.target
            return [s]
        elif isinstance(insn, Call):
            return calls.call(self, s, insn)
        elif isinstance(insn, Exit):
            return calls.exit(self, s, insn)
        else:  # pragma: no cover - the IR is closed
            raise ExplorationError(f"unknown instruction {insn!r}")
        s.pc = insn.pc + slots(insn)
        return [s]

    def where(self, s: State, pc: int | None = None) -> str:
        pc = s.pc if pc is None else pc
        line = self.obj.line_at(s.func.section, pc)
        loc = f"{s.func.section}:{pc}"
        return f"{loc} ({line.file_name}:{line.line})" if line else loc

    def scalar_of(self, s: State, reg: int, pc: int) -> z3.BitVecRef:
        v = s.regs[reg]
        if isinstance(v, Scalar):
            return v.bv
        if v is None:
            s.note(f"read of uninitialised r{reg} at {s.func.section}:{pc}")
            return self.fresh.unknown("uninit")
        s.note(f"pointer used as a number at {s.func.section}:{pc}")
        return self.fresh.unknown("pointer-arith")

    def operand(self, s: State, op, pc: int) -> Value:
        if isinstance(op, Imm):
            return scalar(bv(op.value))
        v = s.regs[op.n] if hasattr(op, "n") else s.regs[op]
        if v is None:
            s.note(f"read of uninitialised register at {s.func.section}:{pc}")
            return scalar(self.fresh.unknown("uninit"))
        return v

    def _alu(self, s: State, insn: Alu) -> None:
        src = self.operand(s, insn.src, insn.pc)
        if insn.op == AluOp.MOV:
            if insn.wide or isinstance(src, Scalar):
                s.regs[insn.dst] = src if insn.wide else scalar(z3.ZeroExt(32, z3.Extract(31, 0, src.bv)))
            else:
                s.regs[insn.dst] = scalar(self._ptr_as_int(s, insn.pc))
            return
        dst = s.regs[insn.dst]
        if dst is None:
            dst = scalar(self.scalar_of(s, insn.dst, insn.pc))
        if isinstance(dst, Pointer) or isinstance(src, Pointer):
            s.regs[insn.dst] = self._pointer_alu(s, insn, dst, src)
            return
        a, b = dst.bv, src.bv
        if insn.op in _NONLINEAR and not z3.is_bv_value(a) and not z3.is_bv_value(b):
            # x * y, x / y, x % y of two variables: z3 decides these by bit-blasting a
            # multiplier, hopeless over a long computation (a hash modulo a count read from
            # a map), so such operands are summarised already past MAX_NONLINEAR_DEPTH.
            a, b = (self.bounded(s, v, insn.pc, MAX_NONLINEAR_DEPTH) for v in (a, b))
            self.nonlinear.seen = True
        s.regs[insn.dst] = scalar(self.bounded(s, alu(insn.op, insn.wide, a, b), insn.pc))

    def bounded(self, s: State, expr: z3.BitVecRef, pc: int, depth: int | None = None) -> z3.BitVecRef:
        """`expr`, or a summary standing for it when its operations nest deeper than
        MAX_DEPTH (long arithmetic chains such as hashes: z3 would need minutes to invert
        them). A summary is a fresh `summary.<n>` symbol: an uninterpreted value of the
        inputs of `expr` (kept for classification) whose definition is kept in
        `Exploration.summaries`, not given to the solver. That is sound for everything made
        of paths: a decision on a summary is taken as feasible both ways, and a proof over
        paths holds for every value the summary could have, so for the real one. No note:
        a path that never decides on the value is exact; one that does says so
        (`Exploration.summarised`)."""
        if self._depth(expr) <= (MAX_DEPTH if depth is None else depth):
            return expr
        v = self.fresh.summary()
        name = v.decl().name()
        self._literal_sources[name] = self.sources(expr)
        self.summaries[name] = (expr, self.where(s, pc))
        return v

    def _depth(self, e: z3.ExprRef) -> int:
        """Nesting depth of operations in `e`, memoised per node; a packet byte or map value
        read counts as one, whatever its index (a header offset merged over many paths is
        wide, not deep). Walked through z3's C API (no Python wrapper per node: this runs on
        every ALU result). The memo holds the term each node was reached from, which keeps
        the node alive: z3 reuses the id of a freed term."""
        depths = self._depths
        eid = e.get_id()
        if eid in depths:
            return depths[eid][0]
        ctx, root = Z3_C.handles(e)  # z3's C functions, unchecked where this build allows
        ast_id, num_args, arg, decl = Z3_C.ast_id, Z3_C.num_args, Z3_C.arg, Z3_C.decl
        stack = [(root, eid)]
        while stack:
            a, aid = stack[-1]
            if aid in depths:
                stack.pop()
                continue
            n = num_args(ctx, a) if Z3_C.ast_kind(ctx, a) == z3.Z3_APP_AST else 0
            if n and Z3_C.decl_kind(ctx, decl(ctx, a)) in _ATOMIC_OPS:
                n = 0
            kids = [(k, ast_id(ctx, k)) for k in (arg(ctx, a, i) for i in range(n))]
            missing = [k for k in kids if k[1] not in depths]
            if missing:
                stack.extend(missing)
                continue
            depths[aid] = (1 + max((depths[k][0] for _, k in kids), default=0), e)
            stack.pop()
        return depths[eid][0]

    def _ptr_as_int(self, s: State, pc: int) -> z3.BitVecRef:
        s.note(f"pointer truncated to 32 bits at {s.func.section}:{pc}")
        return self.fresh.unknown("pointer-arith")

    def _pointer_alu(self, s: State, insn: Alu, dst: Value, src: Value) -> Value:
        if insn.wide and insn.op == AluOp.ADD and isinstance(dst, Pointer) and isinstance(src, Scalar):
            return dst.moved(src.bv)
        if insn.wide and insn.op == AluOp.ADD and isinstance(src, Pointer) and isinstance(dst, Scalar):
            return src.moved(dst.bv)
        if insn.wide and insn.op == AluOp.SUB and isinstance(dst, Pointer) and isinstance(src, Scalar):
            return dst.moved(-src.bv)
        if (
            insn.wide
            and insn.op == AluOp.SUB
            and isinstance(dst, Pointer)
            and isinstance(src, Pointer)
            and dst.region.same(src.region)
        ):
            return scalar(z3.simplify(dst.off - src.off))
        return scalar(self._ptr_as_int(s, insn.pc))

    def _endian(self, s: State, insn: Endian) -> None:
        v = self.scalar_of(s, insn.dst, insn.pc)
        low = z3.Extract(insn.bits - 1, 0, v)
        if insn.order != ByteOrder.LE:  # BE on a little-endian host, and bswap, swap bytes
            low = (
                z3.Concat(*[z3.Extract(8 * i + 7, 8 * i, low) for i in range(insn.bits // 8)]) if insn.bits > 8 else low
            )
        s.regs[insn.dst] = scalar(z3.simplify(z3.ZeroExt(64 - insn.bits, low) if insn.bits < 64 else low))

    def _ld_imm64(self, s: State, insn: LoadImm64) -> Value:
        ref = insn.ref
        if isinstance(ref, MapRef):
            mdef = self.maps.get(ref.map)
            if ref.offset is None:
                return Pointer(Region(RegionKind.MAP, ref.map), bv(0))
            self.read_maps.add(ref.map)
            return Pointer(Region(RegionKind.MAP_VALUE, ref.map, bv(0, 8 * (mdef.key_size or 4))), bv(ref.offset))
        if isinstance(ref, FuncRef):
            return Pointer(Region(RegionKind.FUNC, f"{ref.section}:{ref.offset}"), bv(0))
        if isinstance(ref, ExternRef):
            s.note(f"extern {ref.name} resolved by the loader at {s.func.section}:{insn.pc}")
            return scalar(self.fresh.unknown(f"extern-{ref.name}"))
        return scalar(bv(insn.value))

    def _atomic(self, s: State, insn: Atomic) -> None:
        base = s.regs[insn.base]
        if insn.op == AtomicOp.LOAD_ACQ:
            s.regs[insn.src] = self.load(s, base, insn.off, insn.size, insn.pc)
            return
        if insn.op == AtomicOp.STORE_REL:
            self.store(s, base, insn.off, insn.size, s.regs[insn.src], insn.pc)
            return
        old = self.load(s, base, insn.off, insn.size, insn.pc)
        oldv = old.bv if isinstance(old, Scalar) else self.fresh.unknown("atomic-pointer")
        srcv = self.scalar_of(s, insn.src, insn.pc)
        bits = 8 * insn.size
        o, v = z3.Extract(bits - 1, 0, oldv), z3.Extract(bits - 1, 0, srcv)
        if insn.op == AtomicOp.CMPXCHG:
            r0 = z3.Extract(bits - 1, 0, self.scalar_of(s, 0, insn.pc))
            new = z3.If(o == r0, v, o)
        else:
            new = {
                AtomicOp.ADD: lambda: o + v,
                AtomicOp.OR: lambda: o | v,
                AtomicOp.AND: lambda: o & v,
                AtomicOp.XOR: lambda: o ^ v,
                AtomicOp.XCHG: lambda: v,
            }[insn.op]()
        self.store(s, base, insn.off, insn.size, scalar(z3.simplify(z3.ZeroExt(64 - bits, new))), insn.pc)
        if insn.fetch:
            dst = 0 if insn.op == AtomicOp.CMPXCHG else insn.src
            s.regs[dst] = scalar(z3.simplify(z3.ZeroExt(64 - bits, o)))

    # --- memory ---------------------------------------------------------------------

    def read_bytes(self, s: State, ptr: Value | None, off: int, size: int, pc: int) -> list | None:
        """The bytes at ptr+off (BV8, or PtrByte from the stack); None if not modelled."""
        if not isinstance(ptr, Pointer):
            s.note(f"memory read through a non-pointer at {s.func.section}:{pc}")
            return None
        at = z3.simplify(ptr.off + off)
        kind = ptr.region.kind
        if kind == RegionKind.PACKET:
            return [z3.simplify(z3.Select(s.pkt, at + i)) for i in range(size)]
        if kind == RegionKind.STACK:
            o = const_value(at)
            if o is None:
                s.note(f"variable-offset stack read at {s.func.section}:{pc}")
                return None
            o = o - (1 << 64) if o >= 1 << 63 else o
            stack = s.stacks[ptr.region.frame]
            out = []
            for i in range(size):
                b = stack.get(o + i)
                if b is None:
                    b = z3.Extract(7, 0, self.fresh.unknown("uninit-stack"))
                    stack[o + i] = b
                out.append(b)
            return out
        if kind == RegionKind.MAP_VALUE:
            self.read_maps.add(ptr.region.name)
            base = at.as_long() if z3.is_bv_value(at) else None
            self.check_value_access(ptr, base, size, "load")
            offs = [
                bv(base + i, 32) if base is not None else z3.simplify(z3.Extract(31, 0, at + i)) for i in range(size)
            ]
            return [self.map_byte(s, ptr.region.name, ptr.region.key, o) for o in offs]
        s.note(f"read from {kind} memory at {s.func.section}:{pc} is not modelled")
        return None

    def load(self, s: State, ptr: Value | None, off: int, size: int, pc: int) -> Value:
        if isinstance(ptr, Pointer) and ptr.region.kind == RegionKind.CTX:
            return self._ctx_load(s, ptr, off, size, pc)
        data = self.read_bytes(s, ptr, off, size, pc)
        if data is None:
            return scalar(self.fresh.unknown("memory"))
        if all(isinstance(b, PtrByte) for b in data):
            first = data[0]
            if size == 8 and all(b.ptr is first.ptr and b.index == i for i, b in enumerate(data)):
                return first.ptr
        if any(isinstance(b, PtrByte) for b in data):
            s.note(f"partial read of a spilled pointer at {s.func.section}:{pc}")
            return scalar(self.fresh.unknown("pointer-bytes"))
        value = z3.Concat(*reversed(data)) if size > 1 else data[0]
        return scalar(z3.simplify(z3.ZeroExt(64 - 8 * size, value)))

    def _ctx_load(self, s: State, ptr: Pointer, off: int, size: int, pc: int) -> Value:
        at = const_value(z3.simplify(ptr.off + off))
        field_name = XDP_MD_FIELDS.get(at) if size == 4 else None
        if field_name is None:
            s.note(f"ctx read of {size} bytes at offset {at} ({s.func.section}:{pc}) is not an xdp_md field")
            return scalar(self.fresh.unknown("ctx"))
        packet = Region(RegionKind.PACKET)
        if field_name == "data":
            return Pointer(packet, s.head)
        if field_name == "data_end":
            return Pointer(packet, s.end)
        if field_name == "data_meta":
            return Pointer(packet, z3.simplify(s.head - s.meta))
        return scalar(z3.ZeroExt(32, ctx_field(field_name)))

    def store(self, s: State, ptr: Value | None, off: int, size: int, value: Value | None, pc: int) -> None:
        if value is None:
            value = scalar(self.fresh.unknown("uninit"))
        if not isinstance(ptr, Pointer):
            s.note(f"memory write through a non-pointer at {s.func.section}:{pc}")
            return
        at = z3.simplify(ptr.off + off)
        kind = ptr.region.kind
        if isinstance(value, Pointer):
            if kind == RegionKind.STACK and size == 8:
                data = [PtrByte(value, i) for i in range(8)]
            else:
                s.note(f"pointer stored to {kind} memory at {s.func.section}:{pc}")
                data = [z3.Extract(7, 0, self.fresh.unknown("pointer-bytes")) for _ in range(size)]
        else:
            data = [z3.simplify(z3.Extract(8 * i + 7, 8 * i, value.bv)) for i in range(size)]
        self.write_bytes(s, ptr, at, data, pc)

    def write_bytes(self, s: State, ptr: Pointer, at: z3.BitVecRef, data: list, pc: int) -> None:
        kind = ptr.region.kind
        if kind == RegionKind.PACKET:
            pkt = s.pkt
            for i, b in enumerate(data):
                pkt = z3.Store(pkt, z3.simplify(at + i), b)
                s.writes = s.writes + (z3.simplify(at + i),)
            s.pkt = pkt
        elif kind == RegionKind.STACK:
            o = const_value(at)
            if o is None:
                s.note(f"variable-offset stack write at {s.func.section}:{pc}")
                return
            o = o - (1 << 64) if o >= 1 << 63 else o
            for i, b in enumerate(data):
                s.stacks[ptr.region.frame][o + i] = b
        elif kind == RegionKind.MAP_VALUE:
            name = ptr.region.name
            self.check_value_access(ptr, const_value(at), len(data), "store")
            self.written_maps.add(name)
            writes = s.maps.get(name, ())
            for i, b in enumerate(data):
                writes += (MapWrite("byte", ptr.region.key, z3.simplify(z3.Extract(31, 0, at + i)), (b,)),)
            s.maps[name] = writes
            self.add_effect(s, "map_write", name, pc)
        elif kind == RegionKind.MEM:
            pass  # a ring buffer record: its content is output, not state
        else:
            s.note(f"write to {kind} memory at {s.func.section}:{pc} is not modelled")

    def check_value_access(self, ptr: Pointer, at: int | None, size: int, access: str) -> None:
        """Raise `Refused` when `size` bytes at the constant offset `at` (None: a variable
        one, not checked) of the map value `ptr` points into reach past its value_size."""
        if at is None:
            return
        name = ptr.region.name
        why = refused_value_access(
            access, name, at - (1 << 64) if at >= 1 << 63 else at, size, self.maps[name].value_size
        )
        if why is not None:
            raise Refused(why)

    def add_effect(self, s: State, kind: str, target: str, pc: int) -> None:
        effect = Effect(kind, target, pc, s.func.section)
        if not any(e.fingerprint() == effect.fingerprint() for e in s.effects):
            s.effects = s.effects + (effect,)

    # --- maps -----------------------------------------------------------------------

    def key_bits(self, name: str) -> int:
        return 8 * (self.maps[name].key_size or 4)

    def map_found(self, s: State, name: str, key: z3.BitVecRef) -> z3.BoolRef:
        """Whether `key` has an entry at this point of the path."""
        mdef = self.maps[name]
        if is_global_data_section(mdef.section) or (mdef.type and mdef.type.always_present):
            found = z3.ULT(key, bv(mdef.max_entries or 1, key.size())) if key.size() >= 32 else z3.BoolVal(True)
        else:
            found = map_found(name, key.size())(key)
        return z3.simplify(found_after(s.maps.get(name, ()), key, found))

    def map_byte(self, s: State, name: str, key: z3.BitVecRef, off: z3.BitVecRef) -> z3.BitVecRef:
        """Value byte `off` (BV32) of entry `key` at this point of the path."""
        value = map_val(name, key.size())(key, off)
        return z3.simplify(byte_after(s.maps.get(name, ()), key, off, value))

    def access(self, s: State, name: str, key: z3.BitVecRef) -> None:
        self.read_maps.add(name)
        if not any(a.map == name and a.key.get_id() == key.get_id() for a in s.accesses):
            s.accesses = s.accesses + (MapAccess(name, key),)

    # --- branches -------------------------------------------------------------------

    def _jump(self, s: State, insn: Jump) -> list[State]:
        out = []
        for taken, t in self.fork_on(s, self.condition(s, insn), insn.pc, "jump"):
            t.pc = insn.target if taken else insn.pc + 1
            out.append(t)
        return out

    def fork_on(self, s: State, cond: z3.BoolRef, pc: int, kind: str) -> list[tuple[bool, State]]:
        """Fork `s` on `cond` at decision site `pc` of the current function: the feasible
        directions, each with its state (`s` itself when only one is feasible). Records
        the site: how often it was decided both ways and on which inputs."""
        cond = z3.simplify(cond)
        site = self._site(s, pc, kind)
        site.visits += 1
        srcs = self.sources(cond)
        site.all_sources |= srcs
        witnesses: dict[bool, Witness | None] = {}
        known = truth(cond)
        if known is not None:
            directions = [known]
        else:
            lit = self._define(cond, srcs)
            witnesses = self._decide(s, lit)
            directions = list(witnesses)
            if not directions:  # the path itself is infeasible (cannot happen after pruning)
                raise ExplorationError(f"infeasible state at {self.where(s, pc)}")
        if len(directions) == 1:
            site.one_way.add(directions[0])
            s.sites = s.sites | {(s.func.section, pc)}
            s.witness = witnesses.get(directions[0], s.witness)
            return [(directions[0], s)]
        site.both += 1
        site.sources |= srcs
        if len(site.conditions) < MAX_SITE_CONDITIONS:
            site.conditions.append(cond)
        else:
            site.overflow = True
        out = []
        for d in directions:
            t = s.fork()
            t.path = t.path + ((lit if d else mk_not(lit)),)
            t.witness = witnesses[d]
            t.sites = t.sites | {(s.func.section, pc)}
            out.append((d, t))
        return out

    def _site(self, s: State, pc: int, kind: str) -> BranchSite:
        key = (s.func.section, pc)
        site = self.sites.get(key)
        if site is None:
            site = self.sites[key] = BranchSite(s.program.name, s.func.name, s.func.section, pc, kind)
        return site

    def _count_back_edge(self, s: State, pc: int, target: int) -> None:
        if (pc, target) not in self._back_edges[s.func.key]:
            return
        key = (s.depth, s.func.key, target)
        count = s.loops.get(key, 0) + 1
        s.loops[key] = count
        if count > self.options.loop_bound:
            self.end_path(
                s,
                UNKNOWN,
                None,
                truncated=f"loop at {self.where(s, target)} cut after "
                f"{self.options.loop_bound} iterations (--loop-bound)",
            )

    def condition(self, s: State, insn: Jump) -> z3.BoolRef:
        dst = s.regs[insn.dst]
        src = self.operand(s, insn.src, insn.pc)
        if dst is None:
            dst = scalar(self.scalar_of(s, insn.dst, insn.pc))
        if isinstance(dst, Scalar) and isinstance(src, Scalar):
            return compare(insn.cond, insn.wide, dst.bv, src.bv)
        if isinstance(dst, Pointer) and isinstance(src, Pointer) and dst.region.same(src.region) and insn.wide:
            return compare(insn.cond, True, dst.off, src.off, pointers=True)
        ptr, other = (dst, src) if isinstance(dst, Pointer) else (src, dst)
        if isinstance(other, Scalar) and const_value(other.bv) == 0 and insn.cond in (Cond.EQ, Cond.NE):
            is_null = ptr.null if ptr.null is not None else z3.BoolVal(False)
            return is_null if insn.cond == Cond.EQ else z3.Not(is_null)
        s.note(f"comparison of {describe(dst)} with {describe(src)} at {self.where(s, insn.pc)} is not modelled")
        return self.fresh.condition("unknown.compare")

    # --- path ends ------------------------------------------------------------------

    def end_path(
        self, s: State, verdict: str, retval: z3.BitVecRef | None, truncated: str | None = None, pc: int | None = None
    ) -> None:
        """End `s` as a path with this verdict (calls.py ends paths through it too)."""
        # a witness's model is kept when it was fetched (fetching one more would change later
        # terms' ids, as keeping any does: Options.witnesses)
        w = s.witness if self.options.witnesses else None
        self.paths.append(
            Path(
                len(self.paths),
                verdict,
                retval,
                s.path,
                s.steps,
                s.effects,
                s.redirect,
                s.pkt,
                s.head,
                s.end,
                s.writes,
                s.tail_calls,
                s.notes,
                truncated,
                (s.program.name,)
                if not s.tail_calls
                else tuple([self.program.name] + [t.target for t in s.tail_calls if t.target]),
                s.accesses,
                s.sites,
                s.pc if pc is None else pc,
                s.func.section,
                tuple(sorted(s.maps.items())),
                None if w is None else w.model,
            )
        )
        self.observer.on_path_end(s, self.paths[-1])
        self._forget(s)
        s.frames = []


#: `Explorer._check`'s answer "sat, the model to be fetched later".
_LATER = object()

_NONLINEAR = frozenset({AluOp.MUL, AluOp.DIV, AluOp.SDIV, AluOp.MOD, AluOp.SMOD})

#: Reads of an input, leaves for `Explorer._depth`: a packet byte (array select) or a map
#: value (uninterpreted function application).
_ATOMIC_OPS = frozenset({z3.Z3_OP_SELECT, z3.Z3_OP_UNINTERPRETED})


def describe(v: Value | None) -> str:
    if v is None:
        return "an uninitialised register"
    if isinstance(v, Scalar):
        return "a number"
    return f"a {v.region.kind} pointer"


def explore(
    obj: BpfObject, program: Program, options: Options | None = None, progress=None, observer: Observer | None = None
) -> Exploration:
    """Explore every path of `program` (an XDP program of `obj`), `observer` watching (see
    `Observer`). A program of another type (a tc section's struct __sk_buff ctx) is refused
    with a LiftError naming it."""
    if not program.is_xdp:
        raise LiftError(
            f"not an XDP program: section {program.section} names another program "
            "type; xdp2tc explores XDP programs only",
            file=obj.path,
            program=program.name,
        )
    return Explorer(obj, program, options or Options(), progress, observer).run()
