"""Counting: what each path of a program executes, as a vector of counters.

`count(obj, program)` explores the program exactly as `explore` does (same paths, same
order, same merges) with one difference: the `Counting` observer (analyzer/explore.py
`Observer`) makes the explorer's per-path instruction counter (`State.steps`, an int or an
if-then-else over merged sub-paths) a vector of counters packed into one wide bit-vector,
`FIELD_BITS` bits per field. Field 0 is the instruction count (the explorer adds 1 per
instruction, as always); `Counting.on_instruction` adds the other fields before each
instruction runs: the instruction's class (`INSN_CLASSES`: ALU, jump, packet/stack/map-value/ctx
load or store, ...), helper calls by name (the names of analyzer/helpers.py), map lookups by
map type (lifter/maptypes.py) split into hits and misses, map updates by map type split into
overwrites and inserts of a new key, key bytes hashed, packet bytes read and written,
bpf_loop callback invocations, attempts per tail-call site, and `chain`, the length in
cycles of the path's longest dependency chain (`Chains`). Whether a lookup finds its key and
whether an update's key was there before are known once the helper ran
(`Counting.after_instruction`): they are if-then-else terms on the path's own map
conditions (`map.<name>.found`), so each sub-path and each witness gets its own. Because
the vector is one number, the explorer's exact merging (if-then-else on the path
condition) and forking carry it along unchanged: every sub-path of a merged path keeps its
own exact vector, and the vector of the sub-path a concrete input takes is
`model.eval(expand(path.steps))`.

Tail calls: a taken tail call is a `TailCall` on the path (constant or variable index as
the analyzer sees it). What the kernel does depends on the call *site*: the verifier
patches a tail call into a direct jump only when every path reaching the site passes the
same map and the same constant index (kernel/bpf/verifier.c, record_func_key and
do_misc_fixups: otherwise the key is "poisoned" and the indirect, bounds- and
counter-checking path runs). The explorer records every (map, index) seen per site, so a
site is `constant` or `variable` in the kernel's sense. (clang merges the three
`bpf_tail_call(ctx, &map, CONST)` calls of corpus/tailcall_dispatch.c into one call
site with three constants: the kernel runs it as a variable-index tail call.)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import z3

from lifter.insn import (
    Alu,
    AluOp,
    Atomic,
    Call,
    Endian,
    Exit,
    Goto,
    Jump,
    LegacyLoad,
    Load,
    LoadImm64,
    MovSx,
    Neg,
    Reg,
    Store,
)
from lifter.maps import is_global_data_section
from lifter.maptypes import MAP_TYPES
from lifter.opcodes import CallSrc
from lifter.program import BpfObject, Program

from ..exploration import Exploration, Options, Path
from ..explore import Explorer, Observer
from ..helpers import HELPER_BY_NAME, HELPERS, helper
from ..state import State, found_after
from ..symbolic import XDP_MD_FIELDS, Pointer, RegionKind, Scalar, const_value, map_found

#: Bits per counter in the packed vector (a path executes far fewer than 2**32 of anything).
FIELD_BITS = 32

#: Instruction classes; every executed instruction is in exactly one.
INSN_CLASSES = (
    "alu",  # ALU/ALU64 other than mul/div/mod, neg, movsx, byte swaps
    "mul",  # multiplication
    "div",  # div/mod, signed or not
    "ld_imm64",  # 64-bit immediates and map/function references
    "jump",  # conditional jumps
    "goto",  # unconditional jumps
    "load_pkt",
    "store_pkt",  # through a packet pointer
    "load_stack",
    "store_stack",  # through the frame pointer
    "load_map",
    "store_map",  # through a map value pointer (global data too)
    "load_ctx",  # xdp_md data/data_end/data_meta (the verifier rewrites these)
    "load_ctx_dev",  # xdp_md ingress_ifindex/rx_queue_index/egress_ifindex (pointer chases)
    "load_other",
    "store_other",  # anything else (ring buffer records, unknown bases)
    "atomic",  # atomic read-modify-write, load-acquire, store-release
    "call_helper",  # the call instruction of a helper (priced with the helper)
    "call_local",  # bpf-to-bpf call (priced with `call.bpf2bpf`)
    "call_other",  # kfunc or unresolved call
    "exit",  # return from the program or a subprogram (priced with overhead/call)
)
#: Map types whose lookups hash their key (`hash_key_bytes` counts the bytes).
HASHED = frozenset(t.name for t in MAP_TYPES if t.keyed == "hash")
#: The helper id of bpf_tail_call (from the helper table).
TAIL_CALL = HELPER_BY_NAME["tail_call"].id


def base_fields() -> tuple[str, ...]:
    return (
        ("insns",)
        + tuple(f"insn.{c}" for c in INSN_CLASSES)
        + tuple(f"helper.{h.name}" for h in HELPERS)
        + ("helper.unknown",)
        + tuple(f"lookup.{t.name}" for t in MAP_TYPES)
        + ("lookup.unknown",)
        + tuple(f"lookup_miss.{t.name}" for t in MAP_TYPES)
        + tuple(f"update.{t.name}" for t in MAP_TYPES)
        + ("update.unknown",)
        + tuple(f"insert.{t.name}" for t in MAP_TYPES)
        + ("hash_key_bytes", "pkt.read_bytes", "pkt.write_bytes", "callback", "chain")
    )


@dataclass(frozen=True)
class Site:
    """A tail-call site: the call instruction at `pc` of `program` (as the path runs it)."""

    program: str
    pc: int

    @property
    def field(self) -> str:
        return f"tail.{self.program}:{self.pc}"

    def __str__(self) -> str:
        return f"{self.program}:{self.pc}"


@dataclass
class Layout:
    """Which counter sits where in the packed vector."""

    fields: tuple[str, ...]

    def __post_init__(self):
        self.index = {f: i for i, f in enumerate(self.fields)}
        self.width = FIELD_BITS * len(self.fields)
        self.mask = (1 << FIELD_BITS) - 1

    def unit(self, name: str) -> int:
        return 1 << (FIELD_BITS * self.index[name])

    def unpack(self, value: int) -> dict[str, int]:
        out = {}
        for i, name in enumerate(self.fields):
            v = (value >> (FIELD_BITS * i)) & self.mask
            if v:
                out[name] = v
        return out


def tail_call_sites(obj: BpfObject) -> list[Site]:
    """Every `call bpf_tail_call` of every program (subprograms included)."""
    out = []
    for prog in obj.programs:
        for func in prog.functions:
            for insn in func.insns:
                if isinstance(insn, Call) and insn.kind == CallSrc.HELPER and insn.imm == TAIL_CALL:
                    out.append(Site(prog.name, insn.pc))
    return out


#: Cycles from an instruction's inputs to its result, roughly as the JIT's x86-64 code takes
#: them (the dependency-chain model of `Chains`; the fit prices a cycle, so only ratios matter).
LATENCY = {"alu": 1, "mul": 3, "div": 20, "ld_imm64": 1, "load": 4, "load_stack": 5, "atomic": 8}


class Chains:
    """The longest dependency chain of each state's path, in cycles (`LATENCY`), for the
    `chain` counter: straight-line code whose instructions wait for each other costs more
    than the same instructions side by side, which the CPU overlaps.

    Per state: when each register's value is ready, when each stack slot was last stored
    (a later load of it waits for the store: store-to-load forwarding), and the path's
    chain so far. An instruction starts when its inputs are ready; `step` returns how much
    it lengthens the chain. Branches and stores lengthen nothing (branches are predicted; a
    store retires in the background). A call -- helper, subprogram, tail call -- is a
    barrier: what it returns and everything after starts at the chain so far (its own time
    is priced as the call's). Forked states inherit the table; a merged state keeps the
    table of the state it was merged into (an approximation the fit absorbs)."""

    def __init__(self):
        self._tables: dict[int, tuple[list[int], dict, int]] = {}

    def start(self, s: State) -> None:
        self._tables[id(s)] = ([0] * 11, {}, 0)

    def forked(self, parent: State | None, states: list[State]) -> None:
        table = self._tables.get(id(parent)) if parent is not None else None
        if table is None:
            return
        for t in states:
            if t is not parent:
                self._tables[id(t)] = (list(table[0]), dict(table[1]), table[2])

    def end(self, s: State) -> None:
        self._tables.pop(id(s), None)

    def step(self, s: State, insn) -> int:
        table = self._tables.get(id(s))
        if table is None:
            table = self._tables[id(s)] = ([0] * 11, {}, 0)
        ready, slots, chain = table
        done = None
        if isinstance(insn, Alu):
            srcs = [insn.dst] if insn.op != AluOp.MOV else []
            if isinstance(insn.src, Reg):
                srcs.append(insn.src.n)
            lat = (
                "mul"
                if insn.op == AluOp.MUL
                else "div"
                if insn.op in (AluOp.DIV, AluOp.SDIV, AluOp.MOD, AluOp.SMOD)
                else "alu"
            )
            done = ready[insn.dst] = max((ready[r] for r in srcs), default=0) + LATENCY[lat]
        elif isinstance(insn, (Neg, Endian)):
            done = ready[insn.dst] = ready[insn.dst] + LATENCY["alu"]
        elif isinstance(insn, MovSx):
            done = ready[insn.dst] = ready[insn.src] + LATENCY["alu"]
        elif isinstance(insn, LoadImm64):
            ready[insn.dst] = LATENCY["ld_imm64"]
        elif isinstance(insn, Load):
            start = ready[insn.base]
            if insn.base == 10:
                start = max(start, slots.get((s.depth, insn.off), 0))
                done = start + LATENCY["load_stack"]
            else:
                done = start + LATENCY["load"]
            ready[insn.dst] = done
        elif isinstance(insn, Store):
            if insn.base == 10:
                value = ready[insn.src.n] if isinstance(insn.src, Reg) else 0
                slots[(s.depth, insn.off)] = max(value, ready[10]) + LATENCY["alu"]
        elif isinstance(insn, Atomic):
            done = max(ready[insn.base], ready[insn.src]) + LATENCY["atomic"]
            if insn.fetch:
                ready[insn.src] = done
        elif isinstance(insn, Call):
            ready[:] = [chain] * 11
        grown = max(chain, done or 0) - chain
        self._tables[id(s)] = (ready, slots, chain + grown)
        return grown


class Counting(Observer):
    """The exploration observer that makes each state's `steps` counter the packed vector of
    `Layout` (see module doc). `site_keys` collects, per tail-call site, every (map, index)
    any path passed (index None: not a constant) -- the verifier's view of the site."""

    def __init__(self, obj: BpfObject):
        sites = tail_call_sites(obj)
        self.maps = {m.name: m for m in obj.maps}
        self.layout = Layout(base_fields() + tuple(s.field for s in sites))
        self.site_keys: dict[Site, set[tuple[str | None, int | None]]] = {s: set() for s in sites}
        self._units = {name: self.layout.unit(name) for name in self.layout.fields}
        self.chains = Chains()
        self._current: State | None = None
        self._update: tuple[str, int] | None = None  # (map, writes before) of the running update

    def on_start(self, state: State) -> None:
        state.steps = z3.BitVecVal(0, self.layout.width)
        self.chains.start(state)

    def on_instruction(self, s: State, insn) -> None:
        self._current, self._update = s, None
        events = self.events(s, insn)
        events.append(("chain", self.chains.step(s, insn)))
        self._add(s, sum(self._units[name] * n for name, n in events))

    def after_instruction(self, insn, states: list[State]) -> None:
        self.chains.forked(self._current, states)
        if not (isinstance(insn, Call) and insn.kind == CallSrc.HELPER):
            return
        h = helper(insn.imm)
        if h is None:
            return
        if h.name == "map_lookup_elem":
            for t in states:
                self._lookup_result(t)
        elif h.name == "map_update_elem" and self._update is not None:
            name, before = self._update
            self._update = None
            for t in states:
                self._update_kind(t, name, before)

    def on_path_end(self, state: State, path: Path) -> None:
        self.chains.end(state)

    def _add(self, s: State, delta) -> None:
        """Add `delta` (an int or a bit-vector term) to the state's vector."""
        steps = s.steps
        if isinstance(delta, int) and z3.is_bv_value(steps):
            s.steps = z3.BitVecVal(steps.as_long() + delta, self.layout.width)
        elif isinstance(delta, int) and not delta:
            s.steps = z3.simplify(steps)
        else:
            s.steps = z3.simplify(steps + delta)

    def _either(self, s: State, cond: z3.BoolRef, yes: str, no: str) -> None:
        """Count `yes` on the sub-paths where `cond` holds, `no` on the others."""
        cond = z3.simplify(cond)
        if z3.is_true(cond):
            self._add(s, self._units[yes])
        elif z3.is_false(cond):
            self._add(s, self._units[no])
        else:
            w = self.layout.width
            self._add(s, z3.If(cond, z3.BitVecVal(self._units[yes], w), z3.BitVecVal(self._units[no], w)))

    def _lookup_result(self, t: State) -> None:
        """A lookup returned: a hit or a miss (`lookup_miss.<type>`), as the path's
        condition on the returned pointer's NULL-ness says."""
        r0 = t.regs[0]
        mdef = (
            self.maps.get(r0.region.name)
            if isinstance(r0, Pointer) and r0.region.kind == RegionKind.MAP_VALUE
            else None
        )
        if mdef is None or mdef.type is None or f"lookup.{mdef.type.name}" not in self._units:
            self._add(t, self._units["lookup.unknown"])
            return
        kind = mdef.type.name
        self._either(t, r0.null if r0.null is not None else z3.BoolVal(False), f"lookup_miss.{kind}", f"lookup.{kind}")

    def _update_kind(self, t: State, name: str, before: int) -> None:
        """An update ran: an overwrite when its key had an entry before it (on the path's
        own map conditions and earlier writes), else an insert (`insert.<type>`)."""
        mdef = self.maps[name]
        writes = t.maps.get(name, ())
        kind = mdef.type.name if mdef.type is not None else None
        if kind is None or len(writes) <= before or f"update.{kind}" not in self._units:
            self._add(t, self._units["update.unknown"])
            return
        key = writes[before].key
        if is_global_data_section(mdef.section) or mdef.type.always_present:
            existed = z3.BoolVal(True)
        else:
            existed = found_after(writes[:before], key, map_found(name, key.size())(key))
        self._either(t, existed, f"update.{kind}", f"insert.{kind}")

    # -- classification -----------------------------------------------------------------

    def events(self, s: State, insn) -> list[tuple[str, int]]:
        """The counters `insn` adds on state `s` (before it runs)."""
        if isinstance(insn, Alu):
            if insn.op == AluOp.MUL:
                return [("insn.mul", 1)]
            if insn.op in (AluOp.DIV, AluOp.SDIV, AluOp.MOD, AluOp.SMOD):
                return [("insn.div", 1)]
            return [("insn.alu", 1)]
        if isinstance(insn, (Neg, MovSx, Endian)):
            return [("insn.alu", 1)]
        if isinstance(insn, LoadImm64):
            return [("insn.ld_imm64", 1)]
        if isinstance(insn, Jump):
            return [("insn.jump", 1)]
        if isinstance(insn, Goto):
            return [("insn.goto", 1)]
        if isinstance(insn, Load):
            return self._memory(s, insn.base, insn.off, insn.size, "load")
        if isinstance(insn, Store):
            return self._memory(s, insn.base, insn.off, insn.size, "store")
        if isinstance(insn, LegacyLoad):
            return [("insn.load_pkt", 1)]
        if isinstance(insn, Atomic):
            return [("insn.atomic", 1)]
        if isinstance(insn, Exit):
            out = [("insn.exit", 1)]
            if s.frames and s.frames[-1].loop is not None:
                out.append(("callback", 1))
            return out
        if isinstance(insn, Call):
            if insn.kind == CallSrc.HELPER:
                return self._helper(s, insn)
            if insn.kind == CallSrc.LOCAL and insn.callee is not None:
                return [("insn.call_local", 1)]
            return [("insn.call_other", 1)]
        return []

    def _memory(self, s: State, base: int, off: int, size: int, what: str) -> list[tuple[str, int]]:
        ptr = s.regs[base]
        if not isinstance(ptr, Pointer):
            return [(f"insn.{what}_other", 1)]
        kind = ptr.region.kind
        if kind == RegionKind.PACKET:
            return [(f"insn.{what}_pkt", 1), ("pkt.read_bytes" if what == "load" else "pkt.write_bytes", size)]
        if kind == RegionKind.STACK:
            return [(f"insn.{what}_stack", 1)]
        if kind == RegionKind.MAP_VALUE:
            return [(f"insn.{what}_map", 1)]
        if kind == RegionKind.CTX and what == "load":
            at = const_value(z3.simplify(ptr.off + off))
            name = XDP_MD_FIELDS.get(at)
            return [("insn.load_ctx" if name in ("data", "data_end", "data_meta") else "insn.load_ctx_dev", 1)]
        return [(f"insn.{what}_other", 1)]

    def _helper(self, s: State, insn: Call) -> list[tuple[str, int]]:
        h = helper(insn.imm)
        out = [("insn.call_helper", 1), (f"helper.{h.name}" if h else "helper.unknown", 1)]
        if h is None:
            return out
        ptr = s.regs[1]
        mdef = (
            self.maps.get(ptr.region.name) if isinstance(ptr, Pointer) and ptr.region.kind == RegionKind.MAP else None
        )
        if h.name == "map_update_elem":
            # overwrite or insert: counted once the helper ran (after_instruction)
            self._update = (mdef.name, len(s.maps.get(mdef.name, ()))) if mdef is not None else None
            if mdef is None:
                out.append(("update.unknown", 1))
        elif h.name == "map_lookup_elem":
            # hit or miss: counted once the helper ran (after_instruction)
            if mdef is not None and mdef.type is not None and mdef.type.name in HASHED:
                out.append(("hash_key_bytes", mdef.key_size or 4))
        elif h.name == "tail_call":
            site = Site(s.program.name, insn.pc)
            if site in self.site_keys:
                out.append((site.field, 1))
                ptr, idx = s.regs[2], s.regs[3]
                name = ptr.region.name if isinstance(ptr, Pointer) and ptr.region.kind == RegionKind.MAP else None
                index = z3.simplify(z3.Extract(31, 0, idx.bv)) if isinstance(idx, Scalar) else None
                # A merged index (an if-then-else over constants) is several constants to
                # the verifier, which never merges paths.
                values = _sum_values(index, 64)[0] if index is not None else None
                for v in values if values and _sum_values(index, 64)[1] else [None]:
                    self.site_keys[site].add((name, v))
        elif h.name in ("xdp_load_bytes", "xdp_store_bytes"):
            n = s.regs[4]
            size = const_value(n.bv) if isinstance(n, Scalar) else None
            if size is not None and size < 1 << 16:
                out.append(("pkt.read_bytes" if h.name == "xdp_load_bytes" else "pkt.write_bytes", size))
        return out


@dataclass
class Counted:
    """An exploration whose paths' `steps` are packed counter vectors."""

    exploration: Exploration
    layout: Layout
    site_keys: dict[Site, set[tuple[str | None, int | None]]]

    def site_kind(self, site: Site) -> str:
        """`constant` when every path reaching the site passes one map and one constant
        index (the verifier patches it into a direct jump), else `variable`."""
        keys = self.site_keys.get(site, set())
        if len(keys) == 1:
            name, index = next(iter(keys))
            if name is not None and index is not None:
                return "constant"
        return "variable"

    def counts_at(self, path: Path, model: z3.ModelRef) -> dict[str, int]:
        """The counters of the sub-path a concrete input (the model) takes."""
        steps = path.steps
        if not z3.is_bv_value(steps):
            steps = model.eval(self.exploration.expand(steps), model_completion=True)
        return self.layout.unpack(steps.as_long())

    def vectors(self, path: Path, budget: int = 4000, seconds: float = 1.0) -> tuple[list[dict[str, int]], bool]:
        """The counter vectors of the path's feasible sub-paths, and whether the list is
        exact. The if-then-else tree is walked depth first, each merge condition checked
        with the solver together with the path's literals, so infeasible combinations are
        cut where they start; a path of more than `budget` combinations is not walked
        (`_combinations`). Past `budget` solver checks or `seconds` the list is not
        exact: the values of the tree, unchecked, with only the extremes kept past UNCHECKED_CAP.
        A feasible path has at least one feasible sub-path, so an empty answer (the
        solver said unknown everywhere) is never taken as exact either."""
        steps = path.steps
        if z3.is_bv_value(steps):
            return [self.layout.unpack(steps.as_long())], True
        values = None
        if _combinations(steps, budget) <= budget:  # else the walk runs out of checks anyway
            values = _feasible_values(self.exploration.solver, path.literals, steps, budget, seconds)
        exact = bool(values)
        if not exact:
            values, _ = _sum_values(steps, UNCHECKED_CAP)
        return [self.layout.unpack(v) for v in sorted(values or ())], exact


#: Values kept for a path whose sub-paths are not checked (`Counted.vectors`): past it a
#: node keeps its extremes (combining sets of 512 cost xdp-filter's `cost` 1.5 s per object).
UNCHECKED_CAP = 64


def _feasible_values(
    solver: z3.Solver, literals, e: z3.ExprRef, budget: int, seconds: float = math.inf
) -> set[int] | None:
    """Values of the sum of if-then-else trees `e` on the sub-paths `literals` allow
    (None past `budget` solver checks, past `seconds`, or for another shape). The solver
    is left as it was found (every push popped, also when the walk stops early)."""
    mask = (1 << e.size()) - 1
    out: set[int] = set()
    checks = 0
    deadline = time.monotonic() + seconds

    class Stop(Exception):
        pass

    def walk(pending: list, acc: int) -> None:
        nonlocal checks
        while pending:
            t = pending.pop()
            if z3.is_bv_value(t):
                acc = (acc + t.as_long()) & mask
            elif z3.is_app_of(t, z3.Z3_OP_BADD):
                pending.extend(t.children())
            elif z3.is_app_of(t, z3.Z3_OP_ITE):
                for cond, branch in ((t.arg(0), t.arg(1)), (z3.Not(t.arg(0)), t.arg(2))):
                    checks += 1
                    if checks > budget or time.monotonic() > deadline:
                        raise Stop
                    solver.push()
                    try:
                        solver.add(cond)
                        if solver.check(*literals) != z3.unsat:
                            walk(pending + [branch], acc)
                    finally:
                        solver.pop()
                return
            else:
                raise Stop
        out.add(acc)

    try:
        walk([e], 0)
    except Stop:
        return None
    return out


def _combinations(e: z3.ExprRef, cap: int, memo: dict | None = None) -> int:
    """How many sub-paths the if-then-else trees of `e` combine, unchecked (at most cap + 1;
    cap + 1 also for a shape the walk cannot take). `Counted.vectors` walks only paths of
    at most `budget` combinations: xdp-filter's merged paths combine millions, and their
    walks spent the whole budget and gave up on every path (3-5 s per object, most of
    `cost`). A heuristic: a walk that prunes early can finish on more combinations (14 of
    the corpus's 623 merged paths did, with a 5 s deadline); those are now priced
    unchecked (`exact` false: bounds, not the feasible set)."""
    memo = {} if memo is None else memo
    key = e.get_id()
    if key in memo:
        return memo[key][0]
    if z3.is_bv_value(e):
        n = 1
    elif z3.is_app_of(e, z3.Z3_OP_ITE):
        n = min(cap + 1, _combinations(e.arg(1), cap, memo) + _combinations(e.arg(2), cap, memo))
    elif z3.is_app_of(e, z3.Z3_OP_BADD):
        n = 1
        for child in e.children():
            n = min(cap + 1, n * _combinations(child, cap, memo))
    else:
        n = cap + 1
    memo[key] = (n, e)  # holding e: z3 reuses the ids of freed terms
    return n


def _sum_values(e: z3.ExprRef, cap: int, memo: dict | None = None) -> tuple[set[int] | None, bool]:
    """The values of a sum of if-then-else trees over constants (None for other shapes),
    unchecked. Past `cap` values a node keeps its extremes by instruction count."""
    memo = {} if memo is None else memo
    key = e.get_id()
    if key in memo:
        return memo[key][:2]
    mask = (1 << e.size()) - 1
    exact = True
    if z3.is_bv_value(e):
        out = {e.as_long()}
    elif z3.is_app_of(e, z3.Z3_OP_ITE):
        a, ea = _sum_values(e.arg(1), cap, memo)
        b, eb = _sum_values(e.arg(2), cap, memo)
        out = None if a is None or b is None else a | b
        exact = ea and eb
    elif z3.is_app_of(e, z3.Z3_OP_BADD):
        out = {0}
        for child in e.children():
            vals, ex = _sum_values(child, cap, memo)
            exact &= ex
            if vals is None:
                out = None
                break
            out = {(a + b) & mask for a in out for b in vals}
            if len(out) > cap:
                out, exact = _extremes(out), False
    else:
        out = None
    if out is not None and len(out) > cap:
        out, exact = _extremes(out), False
    memo[key] = (out, exact, e)  # holding e: z3 reuses the ids of freed terms
    return out, exact


def _extremes(values: set[int]) -> set[int]:
    low = (1 << FIELD_BITS) - 1
    return {min(values, key=lambda v: v & low), max(values, key=lambda v: v & low)}


def count(obj: BpfObject, program: Program, options: Options | None = None, progress=None) -> Counted:
    """Explore `program` counting (see the module doc)."""
    counting = Counting(obj)
    e = Explorer(obj, program, options or Options(), progress, counting).run()
    return Counted(e, counting.layout, counting.site_keys)
