"""A second, independent symbolic engine: the lifter's IR executed on angr states (claripy).

Why a `SimEngine` over the IR and not a VEX lifter: pyvex has no eBPF front end, and writing
one means re-describing every instruction in VEX IR, a second decoder next to lifter/decode.py
with its own bugs. The lifter's IR is a closed set of dataclasses (lifter/insn.py) that the
ISA tests already check against llvm-objdump; executing it directly keeps one decoder and
makes what is independent here exactly what should be: the state model (angr's registers,
paged memory, history, constraint solver), the expression layer (claripy instead of z3
terms), path splitting and pruning (angr's `SimSuccessors`), and the exploration strategy
(`SimulationManager` with exploration techniques). Nothing is shared with explore.py,
calls.py, state.py or symbolic.py except the helper table (helpers.py, the `model` column
picks the semantics) and the names inputs are given (`source_of` reads them for the report).

The object is loaded through the project's lifter (maps, relocations, globals, subprograms)
and its code sections are mapped into an angr `Project` at `CODE_BASE` (a blob; addresses
are section base + 8 * slot), under `ArchBPF`: r0-r10, 64-bit, little-endian. Big-endian
objects never get here (the lifter refuses them); `ArchBPF` refuses any other endianness.

Memory is flat and concrete-addressed, as the kernel's is: the xdp_md context at `CTX_BASE`
(data, data_end, data_meta as 32-bit addresses, ingress_ifindex... as symbols), the packet
at `PKT_BASE` (symbols `pkt.0`, `pkt.1`... for max_len bytes, its length the symbol `pkt.len`, so
`data + 14 > data_end` is a comparison of real addresses), one stack per call depth, map
values at fresh addresses. A map lookup splits the path: the key equals the key of an entry
the path already touched (same entry, same value memory), or it is a new entry that is
present (`map.<name>.f<n>`, value bytes `map.<name>.v<n>`; n is the entry's place on its path)
or not (NULL); arrays are present exactly for an index below max_entries. Helper results are
fresh symbols `helper.<name>.<n>`, except bpf_csum_diff, computed exactly as Linux does.

State merging (`Options.merge`, on by default): our own, at the join points of the lifter's
CFG, not angr's Veritesting (which needs angr's VEX-based CFG of the code, and an eBPF blob has
none). `Scheduler` steps states in reverse post-order, so every state bound for a join point is
there before any leaves it; states there with the same `shape` (call stack, map entries by
slot, tail calls, effects, notes, loop counts) become one (`merge_states`): a fresh selector
symbol is i exactly where state i's own constraints hold, the path condition is the common
constraints and the disjunction of "selector i and state i's own", every differing register,
memory byte and path value a claripy If-term on the selector. Exact, as the z3 engine's merge;
K OR-ed tests then keep about K states instead of 2^K paths. A load through a merged pointer
is split into one successor per address (`address_cases`), so packet reads stay at concrete
addresses where the unmerged states' were (also in the form claripy gives `PKT_BASE + If(...)`:
a concatenation of PKT_BASE's high bits and an If-term). A store through an address with
several values is never handed to angr, which would pin it to the maximum and narrow the path
silently: it is split the same way, or the path ends UNKNOWN saying so. A load through an
address that is still symbolic (an offset read from the packet: IPv6 extension headers) is
not handed to angr either, whose read strategy pins an address with over 1024 values to one
of them (the path then silently loses every other offset): it is read exactly, as a
selection by the offset's bits among the bytes of the memory object it falls in (packet,
stack frame, map value, global data), and a path on which it can fall outside that object
ends UNKNOWN. A load or store at a concrete address past a map value's or global section's
value_size (which angr's memory would answer with free bytes) ends UNKNOWN as well, saying
that the kernel's verifier refuses it (`xdp.refused_value_access`, as the z3 engine).

The segment model (`explore_angr(segments=True)`, the cross-check's open shards): a packet read
at `data + k + D1 + ... + Dn` (each D a term of packet bytes: an extension header's length
scaled, `(len << 3)`) is byte k of the segment that starts D1 + ... + Dn bytes into the
packet, a symbol of its own (`Segment`, `pkt.<segment>.<k>`), so reads stay at concrete
offsets of segments and every length check against data_end is one linear constraint. It
is exact because no two bytes read can be one packet byte: each D is at most --max-len
(checked with the solver: no wrap), a segment has at most one child, and a segment's reads
end at or below its child's lowest read plus the child's D's lower bound (from its form);
a read that breaks this, a packet write, or a read the model cannot place ends the path
UNKNOWN once it has segments (before, the read goes as above). The cross-check ties a
segment's bytes to the packet's own symbols at its start in the model
(crosscheck.py `_segment_links`).

Loops are bounded by the `LoopBound` exploration technique (back edges from the lifter's CFG,
counted per loop header as the z3 engine counts them). Resources are bounded by `Options`
(instructions, paths, --timeout, --path-timeout) and `Limits` (open states, memory, wall time): past a
budget the open states end UNKNOWN saying which budget and where, and the exploration's
`budget` makes the report PARTIAL. No solver query starts past the deadline (`TimedSolver`),
and no query gets a term with more than MAX_PRODUCTS nested products (past it the value is an
unknown and the path says so): angr 10's claripy solver does not stop a call at the timeout
it is given, so keeping each query small is what keeps the budget inside a step.

`explore_angr(concrete=Concrete(...))` runs one input: packet, ctx fields and map entries
are constants, so branches are decided without the solver and only helper results fork
(the cross-check's "replay" mode, analyzer/crosscheck.py).
"""

from __future__ import annotations

import io
import logging
import os
import time
from dataclasses import dataclass, field, replace

logging.getLogger("angr").setLevel(logging.CRITICAL)  # before the import: unicorn's load message

import angr  # noqa: E402
import archinfo  # noqa: E402
from angr import claripy
from angr.engines.successors import SuccessorsEngine
from angr.errors import SimMemoryAddressError
from angr.exploration_techniques import ExplorationTechnique
from angr.state_plugins.solver import SimSolver
from archinfo.arch import Endness, Register

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
    ends_block,
    slots,
)
from lifter.maps import MapDef, is_global_data_section
from lifter.opcodes import AtomicOp, CallSrc
from lifter.program import BpfObject, Function, Program

from .exploration import INVALID, UNKNOWN, VERDICTS, BranchSite, Budget, Options
from .helpers import helper
from .symbolic import XDP_MD_FIELDS, source_of
from .xdp import HEADROOM, MAX_FRAGS_BYTES, MAX_LINEAR_PACKET, MAX_META, MAX_TAIL_CALLS, refused_value_access

#: Where things live in the flat address space of a state (all below 4 GiB except code, so
#: 32-bit ctx fields hold full addresses).
CTX_BASE = 0x1000_0000
PKT_BASE = 0x2000_0000
STACK_TOP = 0x3000_0000  # frame d's r10 is STACK_TOP - d * STACK_SPAN
STACK_SPAN = 0x1_0000
GLOBAL_BASE = 0x4000_0000  # global data section i at GLOBAL_BASE + i * REGION_SPAN
VALUE_BASE = 0x5000_0000  # map entry n's value at VALUE_BASE + n * REGION_SPAN
MAP_BASE = 0x6000_0000  # the address ld_imm64 gives map i: MAP_BASE + i * 0x100
MEM_BASE = 0x7000_0000  # helper-owned memory (ring buffer records)
REGION_SPAN = 0x10_0000
CODE_BASE = 0x1_0000_0000
EXIT_ADDR = 0xFFFF_0000  # where ended paths go (never executed)
#: Nesting depth an ALU result may reach before it is replaced by an unknown.
MAX_DEPTH = 256
#: Nested products, divisions and remainders an ALU result may hold before it is replaced by
#: an unknown (as the z3 engine summarises products deeper than 8). A solver call on a chain
#: of them is what takes minutes (isa_gotol's 40000-step port hash: at MAX_DEPTH alone about
#: 50 multiplications reached each fork; 12 nested 32-bit multiplications take claripy ~3 s to
#: invert, 16 over a minute), and angr's claripy does not stop a call at its timeout.
MAX_PRODUCTS = 8
PRODUCT_OPS = frozenset({"__mul__", "__floordiv__", "__mod__", "SDiv", "SMod"})
#: A frame's stack (bytes below r10) and the most frames a path has (bpf-to-bpf calls and
#: bpf_loop callbacks nest at most 8 deep in the kernel; the stack regions leave room for more).
MAX_STACK = 512
MAX_CALL_DEPTH = 64

#: errno value the resize helpers return (the resize limits are the kernel's, from xdp.py; see
#: analyzer/calls.py for the kernel sources; no code of the z3 engine is shared).
EINVAL = 22


class TimedSolver(SimSolver):
    """angr's solver plugin bound to the exploration's deadline (`--timeout`, else
    Limits.max_seconds): no query (satisfiable, eval, eval_upto, min, max of a symbolic
    value) starts past it, it raises ClaripySolverInterruptError instead, and the engine
    ends the state UNKNOWN with the time budget's reason. Its claripy solver is also made
    with the time left as timeout (claripy takes one only when a solver is made; it is made
    again when its timeout exceeds the time left by more than a quarter plus
    SOLVER_SLACK_MS). angr 10.0.5's claripy stops z3 at that timeout (it raises
    ClaripySolverInterruptError: 14 chained 32-bit multiplications with 0.3 and 1 s stopped
    after 0.7 and 1.1 s wall on a loaded machine), but not its own work before z3 (60 chained
    multiplications once ran for minutes): MAX_PRODUCTS keeps terms small. The deadline is
    the exploration Context's (`ctx`), so a walk probe that moves it nearer
    (`Step.load_anywhere`) bounds the solver's calls too. `deadline` None: no deadline (the
    cross-check's calls after the exploration)."""

    def __init__(self, deadline: float | None = None, clock=time.perf_counter, ctx=None, **kwargs):
        super().__init__(**kwargs)
        self._deadline, self.clock, self.ctx = deadline, clock, ctx

    @property
    def deadline(self) -> float | None:
        """The exploration's deadline: its Context's (`ctx`), which a protocol walk's probe
        moves nearer (`Step.load_anywhere`), else the one given; set: that one, no Context."""
        return self.ctx.deadline if self.ctx is not None else self._deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self._deadline, self.ctx = value, None

    @property
    def _solver(self):
        stored = self._stored_solver
        if self.deadline is None:
            if stored is None or stored.timeout is not None:
                self._stored_solver = claripy.Solver(timeout=None)
                if stored is not None:
                    self._stored_solver.add(stored.constraints)
            return self._stored_solver
        left = max(1, int((self.deadline - self.clock()) * 1000))
        if stored is None or stored.timeout is None or stored.timeout > left + left // 4 + SOLVER_SLACK_MS:
            self._stored_solver = claripy.Solver(timeout=left)
            if stored is not None:
                self._stored_solver.add(stored.constraints)
        return self._stored_solver

    def copy(self, memo):
        c = super().copy(memo)
        c._deadline, c.clock, c.ctx = self._deadline, self.clock, self.ctx
        return c

    def _past_deadline(self, e=None) -> None:
        """Raise ClaripySolverInterruptError past the deadline (for `e`: when it is symbolic;
        angr evaluates concrete values, the program counter, through the same calls)."""
        if e is not None and not getattr(e, "symbolic", False):
            return
        if self.deadline is not None and self.clock() >= self.deadline:
            raise claripy.ClaripySolverInterruptError("the exploration's time budget ran out")

    # No query starts past the deadline: angr 10's claripy solver does not stop a call at its
    # timeout (a 1 s timeout on 60 chained multiplications ran for minutes), so this check
    # and the engine's bound on nested products (MAX_PRODUCTS) are what keep the budget.
    def satisfiable(self, *args, **kwargs):
        self._past_deadline()
        return super().satisfiable(*args, **kwargs)

    def eval_upto(self, e, *args, **kwargs):
        self._past_deadline(e)
        return super().eval_upto(e, *args, **kwargs)

    def eval(self, e, *args, **kwargs):
        self._past_deadline(e)
        return super().eval(e, *args, **kwargs)

    def min(self, e, *args, **kwargs):
        self._past_deadline(e)
        return super().min(e, *args, **kwargs)

    def max(self, e, *args, **kwargs):
        self._past_deadline(e)
        return super().max(e, *args, **kwargs)


#: Milliseconds a solver call may run past the deadline before its solver is made again.
SOLVER_SLACK_MS = 200


class ArchBPF(archinfo.Arch):
    """eBPF for archinfo: eleven 64-bit registers, r10 the read-only frame pointer."""

    name = "eBPF"
    bits = 64
    vex_arch = None
    qemu_name = None
    ida_processor = None
    linux_name = "bpf"
    triplet = "bpf"
    max_inst_bytes = 16
    instruction_alignment = 8
    register_list = [Register(name=f"r{i}", size=8, vex_offset=8 * i) for i in range(11)] + [
        Register(name="pc", size=8, vex_offset=88, alias_names=("ip",))
    ]
    ip_offset = 88
    sp_offset = 80
    bp_offset = 80
    ret_offset = 0

    def __init__(self, endness=Endness.LE):
        if endness != Endness.LE:
            raise AngrEngineError("big-endian eBPF (bpfeb) is not supported by the angr engine")
        super().__init__(endness)


class AngrEngineError(Exception):
    """The angr engine cannot run this program (message names the place)."""


class PathCut(Exception):
    """The state cannot go on exactly: it ends UNKNOWN with this reason (not a budget)."""


# --- what a path carries (in state.globals; immutable values only) -----------------------


@dataclass(frozen=True)
class Frame:
    """A function activation: `ret` is the caller's resume address (None at the entry),
    `saved` the caller's r6-r9, `loop` a bpf_loop in progress (callback, index, count, ctx)."""

    func: tuple[str, int]
    ret: int | None = None
    saved: tuple = ()
    loop: tuple | None = None


@dataclass(frozen=True)
class Segment:
    """A part of the packet that starts at a symbolic offset (the segment model of a
    protocol walk): it starts `delta` bytes after its parent's start (parent -1: the
    packet's start), delta a term of packet bytes (an extension header's length) whose
    form bounds it below by `lo`. Its byte c is the symbol `pkt.<key>.<c>` (the packet's
    byte at its start + c). `lowest`/`highest`: the range of offsets read in it.
    `proven`: an offset the path's constraints were proven to keep its start + `proven`
    within --max-len, its start's form bounding start + `proven` below 2**64 (`interval`:
    no wrap), so every read ending at or before it fits too and needs no solver call
    (`Step.segment_fits`); constraints only grow along a path, and a merged state keeps
    the smallest of its states' (`merge_states`)."""

    key: str
    parent: int
    delta: object
    lo: int
    chain: tuple  # sorted hashes of the deltas from the packet's start to its start
    lowest: int = 1 << 30
    highest: int = 0
    proven: int = 0


@dataclass(frozen=True)
class Entry:
    """A map entry the path touched: its key, whether it existed before the program ran
    (`init_found`, None for arrays and globals: decided by the key), its value before
    (`init_val`, value_size bytes, first byte most significant) and now (`found`, memory
    at `addr`)."""

    map: str
    key: object
    init_found: object
    init_val: object
    found: object
    addr: int


@dataclass(frozen=True)
class End:
    verdict: str
    retval: object | None
    truncated: str | None
    exit_pc: int
    exit_section: str


@dataclass
class AngrPath:
    """One ended angr state, read back into plain fields for the report and the cross-check."""

    id: int
    verdict: str
    retval: object | None  # claripy BV64
    state: angr.SimState
    redirect: tuple | None
    tail_calls: tuple  # (caller, map, index or None, target or None, pc)
    effects: tuple  # (kind, target, pc, section)
    writes: tuple  # packet offsets (relative to data) written, claripy BV64
    head: object
    end: object
    steps: int  # instructions executed (the most, over merged paths)
    notes: tuple[str, ...]
    truncated: str | None
    programs: tuple[str, ...]
    sites: frozenset
    entries: tuple[Entry, ...]
    exit_pc: int
    exit_section: str
    min_steps: int = 0  # the fewest instructions over merged paths


@dataclass
class AngrExploration:
    """Every path angr found through one program, and its decision sites."""

    obj: BpfObject
    program: Program
    options: Options
    paths: list[AngrPath]
    sites: dict[tuple[str, int], BranchSite]
    written_maps: set[str]
    read_maps: set[str]
    insns_executed: int
    seconds: float
    programs: list[str]
    packet: list  # the packet bytes `pkt.<i>` (max_len of them)
    packet_len: object
    ctx: dict[str, object]  # xdp_md field -> BV32 symbol
    globals_: dict[str, object] = field(default_factory=dict)  # global map -> value symbol
    budget: Budget | None = None  # what a budget cut (Options' and `Limits`), when one did or was given
    walk: str | None = None  # where it read the packet at a packet-dependent offset (Context.walk)


@dataclass(frozen=True)
class Concrete:
    """One concrete input for `explore_angr(concrete=...)`: the packet, the ctx fields, and
    per map the entries a lookup finds (key -> value bytes; None or unlisted: absent, an
    array's unlisted index reads zeros). Global data is as the object initialises it.
    Nothing is symbolic then but helper results (time, random numbers) and keys built from
    them, so the exploration runs the one path the input takes, its branches decided
    without the solver."""

    packet: bytes
    ifindex: int
    rx_queue: int = 0
    egress: int = 0
    frags: int = 0
    entries: dict = field(default_factory=dict)  # map name -> {key: bytes | None}


# --- the project ---------------------------------------------------------------------------


@dataclass
class Context:
    """What the engine needs besides the state: the lifted object and the bounds."""

    obj: BpfObject
    options: Options
    section_base: dict[str, int]
    maps: dict[str, MapDef]
    map_addr: dict[str, int]
    global_addr: dict[str, int]
    insn_at: dict[int, tuple[Function, object]] = field(default_factory=dict)
    leaders: set[int] = field(default_factory=set)
    back_edges: set[tuple[int, int]] = field(default_factory=set)
    #: address -> place in its function's reverse post-order (block rank, then pc): the order
    #: states are stepped in, so that every state bound for a join point is there together
    rank: dict[int, int] = field(default_factory=dict)
    functions_run: set = field(default_factory=set)
    deadline: float | None = None  # Options.timeout (else Limits.max_seconds) as a `clock` time
    clock: object = time.perf_counter  # wall time; process CPU time with Limits.cpu
    products: dict = field(default_factory=dict)  # term hash -> nested products (`products`)
    concrete: Concrete | None = None  # the input of a concrete run (`explore_angr`)
    limits: Limits | None = None
    sites: dict[tuple[str, int], BranchSite] = field(default_factory=dict)
    written_maps: set[str] = field(default_factory=set)
    read_maps: set[str] = field(default_factory=set)
    programs_seen: list[str] = field(default_factory=list)
    insns: int = 0
    fresh: int = 0
    #: merge selector name -> the inputs its conditions depend on (`merge_states`, `sources`)
    merged_sources: dict[str, set] = field(default_factory=dict)
    #: where the program first read the packet at an offset that depends on packet bytes
    #: (a protocol walk: `Step.load_anywhere`), None until it does
    walk: str | None = None
    #: packet reads at offsets taken from the packet go through the segment model (`Segment`)
    segments: bool = False

    def addr(self, section: str, pc: int) -> int:
        return self.section_base[section] + 8 * pc

    def where(self, addr: int) -> tuple[str, int]:
        func, insn = self.insn_at[addr]
        return func.section, insn.pc

    def next_id(self) -> int:
        self.fresh += 1
        return self.fresh


def make_project(obj: BpfObject, options: Options) -> tuple[angr.Project, Context]:
    """An angr Project holding the object's code sections, with `BpfEngine` as its engine."""
    sections = sorted({f.section for f in obj.functions.values()})
    base, blob, section_base = CODE_BASE, bytearray(), {}
    for name in sections:
        section_base[name] = base + len(blob)
        data = obj.image.section(name).data
        blob += data + bytes((-len(data)) % 0x1000 or 0x1000)
    maps = {m.name: m for m in obj.maps}
    ctx = Context(
        obj,
        options,
        section_base,
        maps,
        {m.name: MAP_BASE + 0x100 * i for i, m in enumerate(obj.maps)},
        {m.name: GLOBAL_BASE + REGION_SPAN * i for i, m in enumerate(obj.maps) if is_global_data_section(m.section)},
    )
    for func in obj.functions.values():
        for insn in func.insns:
            ctx.insn_at[ctx.addr(func.section, insn.pc)] = (func, insn)
        for b in func.cfg.blocks:
            ctx.leaders.add(ctx.addr(func.section, b))
        order = func.cfg.postorder()[::-1]
        for i, b in enumerate(order):
            for insn in func.cfg.blocks[b].insns:
                ctx.rank[ctx.addr(func.section, insn.pc)] = i * 1_000_000 + insn.pc
        for b, h in func.cfg.retreating:
            ctx.back_edges.add((ctx.addr(func.section, func.cfg.blocks[b].last.pc), ctx.addr(func.section, h)))
    project = angr.Project(
        io.BytesIO(bytes(blob)),
        main_opts={"backend": "blob", "arch": ArchBPF(), "base_addr": CODE_BASE, "entry_point": CODE_BASE},
        engine=BpfEngine,
        auto_load_libs=False,
    )
    project.xdp2tc = ctx
    return project, ctx


def fresh_context(project: angr.Project, options: Options) -> tuple[angr.Project, Context]:
    """`project` (from `make_project`) ready for another exploration: a new Context sharing
    the old one's tables of the code (addresses, CFG ranks, back edges), not its counters."""
    old: Context = project.xdp2tc
    ctx = Context(
        old.obj,
        options,
        old.section_base,
        old.maps,
        old.map_addr,
        old.global_addr,
        insn_at=old.insn_at,
        leaders=old.leaders,
        back_edges=old.back_edges,
        rank=old.rank,
    )
    project.xdp2tc = ctx
    return project, ctx


# --- the engine ----------------------------------------------------------------------------


class BpfEngine(SuccessorsEngine):
    """Executes one basic block of the lifter's IR on a state; splits at conditional jumps,
    map lookups and helper outcomes, each successor guarded by its condition."""

    def process_successors(self, successors, **kwargs):
        ctx: Context = self.project.xdp2tc
        state = self.state
        addr = start = state.globals["pc"]
        steps = 0
        began = time.perf_counter()
        ctx.functions_run.add(ctx.insn_at[addr][0].key)
        while True:
            func, insn = ctx.insn_at[addr]
            steps += 1
            ctx.insns += 1
            # every instruction (the clock is ~1 us, an instruction on angr's state far more):
            # a shard's state stops at its share, not a group of states later
            if ctx.deadline is not None and ctx.clock() >= ctx.deadline:
                section, pc = ctx.where(addr)
                state.globals["ended"] = End(UNKNOWN, None, cut_reason(ctx, "time", state, addr), pc, section)
                state.globals["cut"] = True
                outs = [(state, EXIT_ADDR, claripy.true())]
                break
            # a fork goes on in the state itself (`Step.fork`): a cut later in the same
            # instruction ends the state with the constraints it had before it, so that it
            # still covers the inputs of the directions it drops
            before = state.solver.constraints
            try:
                outs = Step(ctx, state, func, insn).run()
            except (PathCut, SimMemoryAddressError) as cut:
                section, pc = ctx.where(addr)
                state.solver.reload_solver(before)
                state.globals["ended"] = End(UNKNOWN, None, str(cut), pc, section)
                outs = [(state, EXIT_ADDR, claripy.true())]
                break
            except claripy.ClaripySolverInterruptError:
                # a solver call ran into the time left (TimedSolver): the budget is spent
                state.solver.reload_solver(before)
                section, pc = ctx.where(addr)
                state.globals["ended"] = End(UNKNOWN, None, cut_reason(ctx, "time", state, addr), pc, section)
                state.globals["cut"] = True
                outs = [(state, EXIT_ADDR, claripy.true())]
                break
            nxt = addr + 8 * slots(insn)
            if (
                len(outs) == 1
                and outs[0][0] is state
                and outs[0][1] == nxt
                and not ends_block(insn)
                and not isinstance(insn, Call)
                and nxt not in ctx.leaders
            ):
                addr = nxt
                continue
            break
        spent = time.perf_counter() - began
        for st, target, guard in outs:
            lo, hi = st.globals["steps"]
            st.globals["steps"] = (lo + steps, hi + steps)
            st.globals["spent"] = st.globals["spent"] + spent
            st.globals["pc"] = target  # angr's add_successor sets the state's ip (a register load to read)
            successors.add_successor(
                st, target, guard, "Ijk_Exit" if target == EXIT_ADDR else "Ijk_Boring", exit_ins_addr=addr, source=start
            )
        successors.processed = True
        successors.description = f"eBPF block at {ctx.where(start)}"


def _bv(value: int, bits: int = 64):
    return claripy.BVV(value % (1 << bits), bits)


def _sym(name: str, bits: int):
    return claripy.BVS(name, bits, explicit_name=True)


class Step:
    """One instruction on one state; `run` returns [(state, next address, guard)]."""

    def __init__(self, ctx: Context, state: angr.SimState, func: Function, insn):
        self.ctx, self.s, self.func, self.insn = ctx, state, func, insn

    @property
    def here(self) -> int:
        return self.ctx.addr(self.func.section, self.insn.pc)

    def where(self) -> str:
        line = self.ctx.obj.line_at(self.func.section, self.insn.pc)
        loc = f"{self.func.section}:{self.insn.pc}"
        return f"{loc} ({line.file_name}:{line.line})" if line else loc

    def next(self, state=None, guard=None):
        return [(state or self.s, self.here + 8 * slots(self.insn), guard if guard is not None else claripy.true())]

    def reg(self, n: int, state=None):
        return (state or self.s).globals["regs"][n]

    def set(self, n: int, value, state=None) -> None:
        g = (state or self.s).globals
        regs = list(g["regs"])
        regs[n] = value
        g["regs"] = tuple(regs)

    def operand(self, op):
        return _bv(op.value) if isinstance(op, Imm) else self.reg(op.n)

    def note(self, why: str, state=None) -> None:
        st = state or self.s
        if why not in st.globals["notes"]:
            st.globals["notes"] = st.globals["notes"] + (why,)

    def fresh(self, prefix: str, bits: int = 64):
        return _sym(f"{prefix}.{self.ctx.next_id()}", bits)

    def end(self, verdict: str, retval=None, truncated: str | None = None, state=None, guard=None):
        st = state or self.s
        st.globals["ended"] = End(verdict, retval, truncated, self.insn.pc, self.func.section)
        return [(st, EXIT_ADDR, guard if guard is not None else claripy.true())]

    # --- dispatch ------------------------------------------------------------------

    def run(self):
        insn = self.insn
        if isinstance(insn, Alu):
            self.alu()
        elif isinstance(insn, Neg):
            self.set(insn.dst, alu(AluOp.SUB, insn.wide, _bv(0), self.reg(insn.dst)))
        elif isinstance(insn, MovSx):
            r = claripy.SignExt(64 - insn.bits, self.reg(insn.src)[insn.bits - 1 : 0])
            self.set(insn.dst, r if insn.wide else claripy.ZeroExt(32, r[31:0]))
        elif isinstance(insn, Endian):
            low = self.reg(insn.dst)[insn.bits - 1 : 0]
            if insn.order != ByteOrder.LE and insn.bits > 8:  # this is a little-endian machine
                low = claripy.Reverse(low)
            self.set(insn.dst, low if insn.bits == 64 else claripy.ZeroExt(64 - insn.bits, low))
        elif isinstance(insn, Load):
            addr = self.reg(insn.base) + insn.off
            cases = address_cases(addr) if addr.symbolic else []
            if len(cases) > 1:
                return self.split_load(cases)
            v = self.load(addr, insn.size)
            self.set(
                insn.dst,
                claripy.SignExt(64 - 8 * insn.size, v)
                if insn.signed
                else claripy.ZeroExt(64 - 8 * insn.size, v)
                if insn.size < 8
                else v,
            )
        elif isinstance(insn, Store):
            addr = self.reg(insn.base) + insn.off
            value = self.operand(insn.src)[8 * insn.size - 1 : 0]
            cases = address_cases(addr) if addr.symbolic else []
            if len(cases) > 1:
                return self.split_store(cases, value)
            self.store(addr, value)
        elif isinstance(insn, Atomic):
            self.atomic()
        elif isinstance(insn, LoadImm64):
            self.set(insn.dst, self.ld_imm64())
        elif isinstance(insn, LegacyLoad):
            return self.end(
                UNKNOWN,
                truncated=f"legacy packet load (ld_abs/ld_ind) at {self.where()}, which XDP programs cannot use",
            )
        elif isinstance(insn, Jump):
            return self.jump()
        elif isinstance(insn, Goto):
            return [(self.s, self.ctx.addr(self.func.section, insn.target), claripy.true())]
        elif isinstance(insn, Call):
            return self.call()
        elif isinstance(insn, Exit):
            return self.exit()
        else:  # pragma: no cover - the IR is closed
            raise AngrEngineError(f"unknown instruction {insn!r}")
        return self.next()

    def alu(self) -> None:
        insn = self.insn
        self.set(insn.dst, self.bounded(alu(insn.op, insn.wide, self.reg(insn.dst), self.operand(insn.src))))

    def bounded(self, value):
        """`value`, or a fresh unknown once it is nested deeper than MAX_DEPTH operations (long
        hashes: the solver would need minutes to invert them); the path says so."""
        if value.depth <= MAX_DEPTH and products(value, self.ctx.products) <= MAX_PRODUCTS:
            return value
        if not any(n.startswith("values too large") for n in self.s.globals["notes"]):
            self.note(
                f"values too large to track exactly (over {MAX_DEPTH} nested operations or {MAX_PRODUCTS} "
                f"nested products), first at {self.where()}: treated as unknowns"
            )
        return self.fresh("unknown.large-term")

    def atomic(self) -> None:
        insn = self.insn
        addr = self.reg(insn.base) + insn.off
        if insn.op == AtomicOp.LOAD_ACQ:
            v = self.load(addr, insn.size)
            self.set(insn.src, claripy.ZeroExt(64 - 8 * insn.size, v) if insn.size < 8 else v)
            return
        if insn.op == AtomicOp.STORE_REL:
            self.store(addr, self.reg(insn.src)[8 * insn.size - 1 : 0])
            return
        bits = 8 * insn.size
        old = self.load(addr, insn.size)
        v = self.reg(insn.src)[bits - 1 : 0]
        if insn.op == AtomicOp.CMPXCHG:
            new = claripy.If(old == self.reg(0)[bits - 1 : 0], v, old)
        else:
            new = {
                AtomicOp.ADD: lambda: old + v,
                AtomicOp.OR: lambda: old | v,
                AtomicOp.AND: lambda: old & v,
                AtomicOp.XOR: lambda: old ^ v,
                AtomicOp.XCHG: lambda: v,
            }[insn.op]()
        self.store(addr, new)
        if insn.fetch:
            self.set(
                0 if insn.op == AtomicOp.CMPXCHG else insn.src, claripy.ZeroExt(64 - bits, old) if bits < 64 else old
            )

    def ld_imm64(self):
        ref = self.insn.ref
        if isinstance(ref, MapRef):
            if ref.offset is None:
                return _bv(self.ctx.map_addr[ref.map])
            self.ctx.read_maps.add(ref.map)
            return _bv(self.ctx.global_addr.get(ref.map, self.ctx.map_addr[ref.map]) + ref.offset)
        if isinstance(ref, FuncRef):
            return _bv(self.ctx.addr(ref.section, ref.offset))
        if isinstance(ref, ExternRef):
            self.note(f"extern {ref.name} resolved by the loader at {self.func.section}:{self.insn.pc}")
            return self.fresh(f"unknown.extern-{ref.name}")
        return _bv(self.insn.value)

    # --- memory --------------------------------------------------------------------

    def region(self, addr, state=None) -> tuple[str, int] | None:
        """(kind, base) of the region an address falls in (one solution decides); a stack
        frame's base is its r10. A symbolic address whose bounds from its form alone
        (`interval`: an IHL-relative packet offset) lie in one region is in it whatever its
        value: no solver call. In the segment model (Context.segments) shifts by a bounded
        amount count too: a merged header length's (len + 1) << (2 or 3). (Not elsewhere:
        with them the test's cross-check of xdpfilt_alw_ip compared 151 of the concrete
        shards' 211 angr paths in its budget, not all; why was not found.)"""
        if not addr.symbolic:
            return self.region_at(addr.concrete_value)
        span = interval(addr, shifts=bool(self.ctx.segments))
        if span is not None:
            lo = self.region_at(span[0])
            if lo is not None and lo == self.region_at(span[1]):
                return lo
        return self.region_at((state or self.s).solver.eval(addr))

    def region_at(self, a: int) -> tuple[str, int] | None:
        """`region` of the address `a` (the regions are intervals)."""
        if PKT_BASE - 0x1000 <= a < PKT_BASE + 0x10000:
            return "packet", PKT_BASE
        if STACK_TOP - MAX_CALL_DEPTH * STACK_SPAN <= a < STACK_TOP:
            return "stack", STACK_TOP - (STACK_TOP - 1 - a) // STACK_SPAN * STACK_SPAN
        for name, base in self.ctx.global_addr.items():
            if base <= a < base + REGION_SPAN:
                return "global:" + name, base
        if VALUE_BASE <= a < VALUE_BASE + 0x1000 * REGION_SPAN:
            return "value", a - (a - VALUE_BASE) % REGION_SPAN
        if MEM_BASE <= a < MEM_BASE + REGION_SPAN:
            return "mem", MEM_BASE
        return None

    def load(self, addr, size: int, state=None):
        """`size` bytes at `addr`, little-endian. A symbolic address is read exactly
        (`load_anywhere`), never handed to angr: past 1024 possible addresses angr's read
        strategy pins the address to one of them, which narrows the path silently."""
        st = state or self.s
        region = self.region(addr, st)
        if region and region[0].startswith("global:"):
            self.ctx.read_maps.add(region[0][7:])
        self.check_value_access(addr, size, region, "load", st)
        if region is not None and region[0] == "packet":
            value = self.segment_load(addr, size, st)
            if value is not None:
                return value
        if addr.symbolic:
            return self.load_anywhere(addr, size, region, st)
        return st.memory.load(addr, size, endness=Endness.LE)

    def check_value_access(self, addr, size: int, region, access: str, st) -> None:
        """PathCut when `size` bytes at the concrete address `addr` of a map value's or global
        section's `region` reach past its value_size (`refused_value_access`: the kernel's
        verifier refuses the program). A symbolic address is bounded by `load_anywhere`."""
        if addr.symbolic or region is None or not (region[0].startswith("global:") or region[0] == "value"):
            return
        kind, base = region
        if kind == "value":
            name = next((e.map for e in st.globals["entries"] if e.addr == base), None)
            if name is None:
                return
        else:
            name = kind[7:]
        why = refused_value_access(access, name, addr.concrete_value - base, size, self.ctx.maps[name].value_size)
        if why is not None:
            raise PathCut(f"{why} at {self.where()}")

    def segment_load(self, addr, size: int, st):
        """A packet read in the segment model (`Segment`): None where the model does not
        apply (the caller reads as before); the value when the read is classified; PathCut
        when the path has segments and the read cannot be placed in one without aliasing."""
        if not self.ctx.segments:
            return None
        g = st.globals
        segs = g.get("segments", ())
        if not addr.symbolic:
            if segs:  # the packet's own bytes must stay below its first segment's
                return self.segment_bytes(st, segs, -1, addr.concrete_value - PKT_BASE, size)
            g["pkt_hi"] = max(g.get("pkt_hi", 0), addr.concrete_value - PKT_BASE + size)
            return None
        if not segs and (g.get("flat_walk") or g["writes"] or g["head"].symbolic or g["head"].concrete_value != 0):
            return None
        terms, k = [], -PKT_BASE
        for a in addr.args if addr.op == "__add__" else (addr,):
            if a.symbolic:
                terms.append(a)
            else:
                k += a.concrete_value
        hashes = sorted(a.hash() for a in terms)
        for i, seg in enumerate(segs):
            if list(seg.chain) == hashes:
                return self.segment_bytes(st, segs, i, k, size)
        for j, d in enumerate(terms):
            rest = sorted(a.hash() for a in terms[:j] + terms[j + 1 :])
            parent = -1 if not rest else next((i for i, seg in enumerate(segs) if list(seg.chain) == rest), None)
            if parent is None or any(x.kind != "packet" for x in sources(d, self.ctx)):
                continue
            if any(seg.parent == parent for seg in segs):
                break  # a second child of one segment: siblings could alias
            span = interval(d)
            key = f"s{len(segs)}x{abs(hash(tuple(hashes))) % (1 << 32):08x}"
            seg = Segment(key, parent, d, 0 if span is None else span[0], tuple(hashes))
            # the read proven to fit the packet (the solver call segment_bytes needs anyway)
            # implies d does (d <= its start <= the read's end: no wrap, `segment_fits`);
            # else d is checked on its own
            fits = self.segment_fits(st, segs + (seg,), len(segs), k + size)
            if (fits is None or fits.proven < k + size) and st.solver.satisfiable(
                extra_constraints=[claripy.UGT(d, self.ctx.options.max_len)]
            ):
                break
            seg = fits or seg
            top = g.get("pkt_hi", 0) if parent < 0 else segs[parent].highest
            if top > seg.lo + k:  # its bytes could be ones its parent's reads took
                if segs:
                    break
                g["flat_walk"] = True
                return None
            segs = segs + (seg,)
            g["segments"] = segs
            return self.segment_bytes(st, segs, len(segs) - 1, k, size)
        if segs:
            raise PathCut(f"unsupported: packet read outside the segment model at {self.where()}")
        g["flat_walk"] = True
        return None

    def segment_bytes(self, st, segs: tuple, i: int, c: int, size: int):
        """Bytes c..c+size of segment i (-1: the packet's own), little-endian; records the
        read and checks the model's invariant: a segment's reads end at or below the
        smallest offset its child's bytes can take (its delta's lower bound plus the child's
        lowest read), so no two read bytes can be the same packet byte."""
        g = st.globals
        segs = list(segs)
        if c < 0:
            raise PathCut(f"unsupported: packet read before its segment's start at {self.where()}")
        if i >= 0:
            seg = segs[i] if c + size <= segs[i].proven else self.segment_fits(st, segs, i, c + size)
            if seg is None:
                raise PathCut(f"unsupported: segment read that can fall outside the packet at {self.where()}")
            segs[i] = replace(seg, lowest=min(seg.lowest, c), highest=max(seg.highest, c + size))
        else:
            g["pkt_hi"] = max(g.get("pkt_hi", 0), c + size)
        for seg in segs:
            top = g.get("pkt_hi", 0) if seg.parent < 0 else segs[seg.parent].highest
            if seg.highest and top > seg.lo + seg.lowest:
                raise PathCut(f"unsupported: packet read that can alias a segment's bytes at {self.where()}")
        g["segments"] = tuple(segs)
        if i < 0:
            return st.memory.load(PKT_BASE + c, size, endness=Endness.LE)
        parts = [claripy.BVS(f"pkt.{segs[i].key}.{c + n}", 8, explicit_name=True) for n in range(size)]
        return parts[0] if size == 1 else claripy.Concat(*reversed(parts))

    def segment_fits(self, st, segs, i: int, end: int):
        """Segment i with `proven` raised to `end` when its start + `end` cannot exceed
        --max-len on this path (one solver call); None when it can. `proven` is raised only
        where the start's form bounds start + `end` below 2**64 (`interval`), so that the
        bound holds for every smaller offset as well."""
        chain = self.segment_chain(segs, i)
        start = sum((segs[j].delta for j in chain[1:]), segs[chain[0]].delta)
        if st.solver.satisfiable(extra_constraints=[claripy.UGT(start + end, self.ctx.options.max_len)]):
            return None
        span = interval(start, shifts=True)
        if end < 0 or span is None or span[1] + end >= 1 << start.size():
            return segs[i]
        return replace(segs[i], proven=max(segs[i].proven, end))

    @staticmethod
    def segment_chain(segs, i: int) -> list:
        """The indices of segment i's ancestors, the packet's first child first, i last."""
        out = []
        while i >= 0:
            out.append(i)
            i = segs[i].parent
        return out[::-1]

    def window(self, region: tuple[str, int] | None, st) -> tuple[int, int] | None:
        """[lo, hi): the memory the program may read in `region` (from `region`): the
        packet from data_meta (HEADROOM before the packet when the head moved by an
        unknown amount) to --max-len, or further to a data_end moved there; a stack
        frame's 512 bytes; a map value's or global section's value_size bytes."""
        if region is None:
            return None
        kind, base = region
        g = st.globals
        if kind == "packet":
            h, m, e = g["head"], g["meta"], g["end"]
            lo = h.concrete_value - m.concrete_value if not (h.symbolic or m.symbolic) else -HEADROOM
            hi = max(self.ctx.options.max_len, 0 if e.symbolic else e.concrete_value)
            return PKT_BASE + _signed(lo), PKT_BASE + hi
        if kind == "stack":
            return base - MAX_STACK, base
        if kind.startswith("global:"):
            return base, base + (self.ctx.maps[kind[7:]].value_size or 0)
        if kind == "value":
            entry = next((e for e in g["entries"] if e.addr == base), None)
            return None if entry is None else (base, base + (self.ctx.maps[entry.map].value_size or 0))
        return None

    def load_anywhere(self, addr, size: int, region, st):
        """The bytes at a symbolic address, exactly: the address must fall in one memory
        object (`window`, the object of one solution; a path that can read outside it ends
        UNKNOWN here) and the value is a selection, by the bits of the offset, among the
        object's contents at every offset (`select`): no solver call enumerates addresses,
        none is pinned."""
        window = self.window(region, st)
        if window is None or window[1] - window[0] < size:
            raise PathCut(f"unsupported: load through an address that depends on the input at {self.where()}")
        lo, hi = window
        if region[0] == "packet" and self.ctx.walk is None and any(x.kind == "packet" for x in sources(addr, self.ctx)):
            self.ctx.walk = self.where()
            probe = self.ctx.limits.walk_probe if self.ctx.limits is not None else None
            if probe is not None:  # a protocol walk: the caller explores it shard by shard past the probe
                end = self.ctx.clock() + probe
                self.ctx.deadline = end if self.ctx.deadline is None else min(self.ctx.deadline, end)
        span = interval(addr)  # the addresses it can take at most, from its form alone
        within = span is not None and lo <= span[0] and span[1] + size <= hi
        if span is not None:  # only the bytes it can reach: a few for an IHL-relative offset
            lo, hi = max(lo, span[0]), min(hi, span[1] + size)
            if hi - lo < size:
                raise PathCut(f"unsupported: load through an address that depends on the input at {self.where()}")
        count = hi - lo - size + 1
        off = addr - lo
        inside = claripy.ULT(off, _bv(count))
        if not within and st.solver.satisfiable(extra_constraints=[claripy.Not(inside)]):
            srcs = ", ".join(sorted({f"{x.kind} {x.name}".strip() for x in sources(addr, self.ctx)})) or "merged paths"
            raise PathCut(
                f"unsupported: load through an address that depends on the input ({srcs}) and can fall "
                f"outside the {region[0].split(':')[0]} at {self.where()}"
            )
        data = byte_list(st.memory.load(lo, hi - lo))  # first byte first
        leaves = [data[i] if size == 1 else claripy.Concat(*reversed(data[i : i + size])) for i in range(count)]
        return select(off, leaves)

    def split_load(self, cases: list):
        """A load through a merged pointer (an If-term over the merged states' addresses):
        one successor per address, guarded by its case's condition, each loading at that
        address. Without the split angr concretizes the If-address into a range read (solver
        calls for its bounds, then an If-chain over every byte between), and every later
        branch on the loaded value is as slow."""
        insn, out = self.insn, []
        cases = [(cond, leaf) for cond, leaf in cases if self.s.solver.satisfiable(extra_constraints=[cond])]
        for i, (cond, leaf) in enumerate(cases):
            t = self.s.copy() if i < len(cases) - 1 else self.s  # the last case in the state itself (`fork`)
            t.solver.add(cond)
            v = Step(self.ctx, t, self.func, insn).load(leaf, insn.size)
            if insn.size < 8:
                v = claripy.SignExt(64 - 8 * insn.size, v) if insn.signed else claripy.ZeroExt(64 - 8 * insn.size, v)
            self.set(insn.dst, v, t)
            out += self.next(t, cond)
        return out

    def split_store(self, cases: list, value):
        """A store through a merged pointer: one successor per address, as `split_load`."""
        out = []
        cases = [(cond, leaf) for cond, leaf in cases if self.s.solver.satisfiable(extra_constraints=[cond])]
        for i, (cond, leaf) in enumerate(cases):
            t = self.s.copy() if i < len(cases) - 1 else self.s  # the last case in the state itself (`fork`)
            t.solver.add(cond)
            self.store(leaf, value, t)
            out += self.next(t, cond)
        return out

    def store(self, addr, value, state=None) -> None:
        """Store `value` at `addr`. An address that can take several values is not given to
        angr, which would pin it to its maximum and so silently narrow the path: the path
        ends UNKNOWN here (`PathCut`); an address with one value is stored at that value."""
        st = state or self.s
        if addr.symbolic:
            values = st.solver.eval_upto(addr, 2)
            if len(values) > 1:
                srcs = (
                    ", ".join(sorted({f"{x.kind} {x.name}".strip() for x in sources(addr, self.ctx)})) or "merged paths"
                )
                raise PathCut(
                    f"unsupported: store through an address that depends on the input ({srcs}) at {self.where()}"
                )
            addr = _bv(values[0])
        region = self.region(addr, st)
        self.check_value_access(addr, value.size() // 8, region, "store", st)
        if region is not None:
            kind, base = region
            if kind == "packet":
                if st.globals.get("segments"):  # its bytes would not be the segments' symbols
                    raise PathCut(f"unsupported: packet write on a path read in segments at {self.where()}")
                off = addr - PKT_BASE - st.globals["head"]
                st.globals["writes"] = st.globals["writes"] + tuple(off + i for i in range(value.size() // 8))
            elif kind.startswith("global:") or kind == "value":
                name = (
                    kind[7:] if kind != "value" else next((e.map for e in st.globals["entries"] if e.addr == base), "?")
                )
                self.ctx.written_maps.add(name)
                self.effect("map_write", name, st)
        st.memory.store(addr, value, endness=Endness.LE)

    def effect(self, kind: str, target: str, state=None) -> None:
        st = state or self.s
        e = (kind, target, self.insn.pc, self.func.section)
        if e not in st.globals["effects"]:
            st.globals["effects"] = st.globals["effects"] + (e,)

    # --- branches ------------------------------------------------------------------

    def jump(self):
        insn = self.insn
        cond = compare(insn.cond, insn.wide, self.reg(insn.dst), self.operand(insn.src))
        target = self.ctx.addr(self.func.section, insn.target)
        return [(t, target if taken else self.here + 8, g) for taken, t, g in self.fork(cond, "jump")]

    def fork(self, cond, kind: str | None, state=None):
        """The feasible directions of `cond` at this instruction: [(taken, state, guard)];
        records the decision site (visits, both ways, the inputs it depends on)."""
        st = state or self.s
        if cond.is_true():
            ways = [True]
        elif cond.is_false():
            ways = [False]
        elif not st.solver.satisfiable(extra_constraints=[cond]):
            # one solver call where the branch goes one way: every state's constraints are
            # satisfiable (each was checked when it was added, the merged ones are a
            # disjunction of such), so the other direction is
            ways = [False]
        else:
            ways = [True, False] if st.solver.satisfiable(extra_constraints=[claripy.Not(cond)]) else [True]
        if kind is not None:  # a decision of the program (not a split of the engine's own)
            key = (self.func.section, self.insn.pc)
            site = self.ctx.sites.get(key)
            if site is None:
                site = self.ctx.sites[key] = BranchSite(
                    st.globals["program"], self.func.name, self.func.section, self.insn.pc, kind
                )
            site.visits += 1
            srcs = sources(cond, self.ctx)
            site.all_sources |= srcs
            st.globals["sites"] = st.globals["sites"] | {key}
            if len(ways) == 1:
                site.one_way.add(ways[0])
            else:
                site.both += 1
                site.sources |= srcs
        if len(ways) == 1:
            return [(ways[0], st, claripy.true())]
        out = []
        for i, w in enumerate(ways):
            # the last direction goes on in `st` itself (its claripy solver is warm: a copy's
            # first query re-sends every constraint to z3), the others in copies made first
            t = st.copy() if i < len(ways) - 1 else st
            guard = cond if w else claripy.Not(cond)
            t.solver.add(guard)  # later splits of the same instruction see it
            out.append((w, t, guard))
        return out

    # --- calls ---------------------------------------------------------------------

    def call(self):
        insn = self.insn
        if insn.kind == CallSrc.HELPER:
            return self.helper()
        if insn.kind == CallSrc.LOCAL and insn.callee is not None:
            callee = self.ctx.obj.functions[insn.callee]
            self.push_frame(Frame(callee.key, self.here + 8, tuple(self.reg(r) for r in range(6, 10))))
            return [(self.s, self.ctx.addr(callee.section, callee.start), claripy.true())]
        what = (
            f"kfunc {insn.symbol or insn.imm}"
            if insn.kind == CallSrc.KFUNC
            else f"call to undefined function {insn.symbol or '?'}"
        )
        return self.end(UNKNOWN, truncated=f"unsupported: {what} at {self.where()}")

    def push_frame(self, frame: Frame, state=None) -> None:
        st = state or self.s
        st.globals["frames"] = st.globals["frames"] + (frame,)
        self.set(10, _bv(STACK_TOP - STACK_SPAN * (len(st.globals["frames"]) - 1)), st)

    def exit(self):
        frames = self.s.globals["frames"]
        frame = frames[-1]
        if frame.loop is not None:
            return self.callback_returned(frame)
        if len(frames) > 1:
            self.s.globals["frames"] = frames[:-1]
            for r, v in zip(range(6, 10), frame.saved):
                self.set(r, v)
            self.set(10, _bv(STACK_TOP - STACK_SPAN * (len(frames) - 2)))
            return [(self.s, frame.ret, claripy.true())]
        r0 = self.reg(0)
        action = r0[31:0]
        if not action.symbolic:
            return self.end(VERDICTS.get(action.concrete_value, INVALID), r0)
        out, rest = [], [(self.s, claripy.true())]
        for v, name in list(VERDICTS.items()) + [(None, INVALID)]:
            if not rest:
                break
            st, g0 = rest[0]
            cond = action == v if v is not None else claripy.UGT(action, 4)
            rest = []
            for hit, t, g in self.fork(cond, "verdict", st):
                guard = claripy.And(g0, g)
                if hit:
                    out += self.end(name, r0, state=t, guard=guard)
                else:
                    rest = [(t, guard)]
        return out

    def helper(self):
        insn = self.insn
        h = helper(insn.imm)
        model = h.model if h else "havoc"
        name = h.name if h else f"helper_{insn.imm}"
        if h is None:
            self.note(f"unsupported: helper {insn.imm} at {self.where()}")
        for effect in h.effects if h else ():
            if effect in ("output", "lock", "map_delete", "map_write"):
                target = self.map_arg(1) if effect.startswith("map") or model == "output" else None
                self.effect(effect, target.name if target else name)
        outs = getattr(self, "h_" + model, self.h_havoc)(name)
        done = []
        for st, target, guard in outs:
            if target == self.here + 8:  # helpers clobber r1-r5
                for r in range(1, 6):
                    self.set(r, _bv(0), st)
            done.append((st, target, guard))
        return done

    def map_arg(self, reg: int, state=None) -> MapDef | None:
        v = self.reg(reg, state)
        if v.symbolic:
            return None
        for name, a in self.ctx.map_addr.items():
            if a == v.concrete_value:
                return self.ctx.maps[name]
        return None

    def key(self, mdef: MapDef, reg: int):
        return self.load(self.reg(reg), mdef.key_size or 4)

    def r0(self, value, state=None):
        self.set(0, value, state)

    # --- helper models (the `model` column of helpers.py) ----------------------------

    def h_fresh64(self, name):
        self.r0(self.fresh(f"helper.{name}"))
        return self.next()

    def h_fresh32(self, name):
        self.r0(claripy.ZeroExt(32, self.fresh(f"helper.{name}", 32)))
        return self.next()

    h_havoc = h_fresh64
    h_output = h_fresh64

    def h_effect(self, name):
        return self.next()

    def h_havoc_mem(self, name):
        ptr, size = (self.reg(2), self.reg(3)) if name == "fib_lookup" else (self.reg(1), self.reg(2))
        if not size.symbolic and size.concrete_value <= 512 and not ptr.symbolic:
            n = size.concrete_value
            if n:
                self.check_value_access(ptr, n, self.region(ptr), "store", self.s)
                self.s.memory.store(ptr, self.fresh(f"helper.{name}", 8 * n))
        else:
            self.note(f"memory written by bpf_{name} not modelled at {self.where()}")
        return self.h_fresh64(name)

    def entry_for(self, mdef: MapDef, key, state):
        """Split on which entry `key` names: one of the path's entries of this map with an
        equal key, or a new one. Returns [(state, entry, guard)]."""
        out = []
        rest, guard = state, claripy.true()
        for e in state.globals["entries"]:
            if e.map != mdef.name:
                continue
            new_rest = None
            for same, t, g in self.fork(key == e.key, None, rest):
                if same:
                    out.append((t, e, claripy.And(guard, g)))
                else:
                    new_rest, new_guard = t, claripy.And(guard, g)
            if new_rest is None:
                return out
            rest, guard = new_rest, new_guard
        entry = self.new_entry(mdef, key, rest)
        out.append((rest, entry, guard))
        return out

    def new_entry(self, mdef: MapDef, key, state) -> Entry:
        # The n-th entry of a path: paths that touch entries in the same order use the same
        # symbols and value addresses, so their states can be merged (`merge_states`).
        n = len(state.globals["entries"]) + 1
        bits = 8 * (mdef.value_size or 0)
        init_val = _sym(f"map.{mdef.name}.v{n}", bits) if bits else None
        given = self.ctx.concrete is not None and not key.symbolic
        if given:  # a concrete run: the input's entry (absent unless listed)
            value = self.ctx.concrete.entries.get(mdef.name, {}).get(key.concrete_value)
            if bits:
                init_val = _bv(int.from_bytes((value or bytes(bits // 8))[: bits // 8], "big"), bits)
        if mdef.type is not None and mdef.type.keyed == "index" and mdef.type.holds == "data":
            init_found = None
            found = claripy.ULT(key, _bv(mdef.max_entries or 0, key.size())) if key.size() >= 32 else claripy.true()
        elif given:
            init_found = found = claripy.true() if value is not None else claripy.false()
        else:
            init_found = found = claripy.BoolS(f"map.{mdef.name}.f{n}", explicit_name=True)
        addr = VALUE_BASE + REGION_SPAN * n
        if init_val is not None:
            state.memory.store(addr, init_val)
        entry = Entry(mdef.name, key, init_found, init_val, found, addr)
        state.globals["entries"] = state.globals["entries"] + (entry,)
        return entry

    def set_entry(self, state, entry: Entry, **changes) -> None:
        state.globals["entries"] = tuple(replace(e, **changes) if e is entry else e for e in state.globals["entries"])

    def h_map_lookup(self, name):
        mdef = self.map_arg(1)
        if mdef is None:
            self.note(f"bpf_map_lookup_elem on something that is not a map at {self.where()}")
            return self.h_fresh64(name)
        if mdef.type is not None and mdef.type.holds == "map":
            return self.end(UNKNOWN, truncated=f"unsupported: map-in-map lookup in {mdef.name} at {self.where()}")
        self.ctx.read_maps.add(mdef.name)
        key = self.key(mdef, 2)
        out = []
        for st, entry, g in self.entry_for(mdef, key, self.s):
            # NULL unless the entry is there: the program's own null check decides.
            self.r0(claripy.If(entry.found, _bv(entry.addr), _bv(0)), st)
            out.append((st, self.here + 8, g))
        return out

    def h_map_update(self, name):
        mdef = self.map_arg(1)
        if mdef is None:
            self.note(f"bpf_map_update_elem on something that is not a map at {self.where()}")
            return self.h_fresh64(name)
        self.ctx.written_maps.add(mdef.name)
        self.ctx.read_maps.add(mdef.name)
        key = self.key(mdef, 2)
        value = self.load(self.reg(3), mdef.value_size) if mdef.value_size else None
        out = []
        for st, entry, g in self.entry_for(mdef, key, self.s):
            if value is not None:
                st.memory.store(entry.addr, value, endness=Endness.LE)
            self.set_entry(st, entry, found=claripy.true())
            # The result depends on the map's fill level and flags (-E2BIG, -EEXIST...): unknown.
            self.r0(self.fresh(f"helper.{name}"), st)
            out.append((st, self.here + 8, g))
        return out

    def h_map_delete(self, name):
        mdef = self.map_arg(1)
        if mdef is None:
            return self.h_fresh64(name)
        self.ctx.written_maps.add(mdef.name)
        key = self.key(mdef, 2)
        out = []
        for st, entry, g in self.entry_for(mdef, key, self.s):
            self.set_entry(st, entry, found=claripy.false())
            self.r0(self.fresh(f"helper.{name}"), st)
            out.append((st, self.here + 8, g))
        return out

    def h_redirect(self, name):
        ifindex, flags = self.reg(1), self.reg(2)
        out = []
        for ok, t, g in self.fork(flags == 0, "helper"):
            if ok:
                t.globals["redirect"] = ("ifindex", ifindex[31:0])
            self.r0(_bv(4 if ok else 0), t)
            out += self.next(t, g)
        return out

    def h_redirect_map(self, name):
        mdef = self.map_arg(1)
        if mdef is None:
            self.note(f"bpf_redirect_map arguments not modelled at {self.where()}")
            return self.h_fresh64(name)
        self.ctx.read_maps.add(mdef.name)
        key = self.reg(2)[8 * (mdef.key_size or 4) - 1 : 0]
        out = []
        for st, entry, g in self.entry_for(mdef, key, self.s):
            # __bpf_xdp_redirect_map: a miss returns flags' low bits (the fallback action).
            self.r0(claripy.If(entry.found, _bv(4), self.reg(3, st) & 3), st)
            st.globals["redirect"] = ("map", mdef.name, key)
            out.append((st, self.here + 8, g))
        return out

    def h_tail_call(self, name):
        mdef = self.map_arg(2)
        if mdef is None:
            self.note(f"bpf_tail_call arguments not modelled at {self.where()}")
            return self.h_fresh64(name)
        self.ctx.read_maps.add(mdef.name)
        idx = self.reg(3)[31:0]
        const = None if idx.symbolic else idx.concrete_value
        chain_full = len(self.s.globals["tail_calls"]) >= MAX_TAIL_CALLS
        targets = {}
        for slot, pname in sorted(mdef.static_values.items()):
            prog = next((p for p in self.ctx.obj.programs if pname in (p.name, p.entry.name)), None)
            if prog is not None:
                targets[slot] = prog
        out, rest = [], [(self.s, claripy.true())]
        for slot, prog in [] if chain_full else targets.items():
            if not rest:
                break
            st, g0 = rest[0]
            rest = []
            for hit, t, g in self.fork(idx == slot, "tail_call", st):
                guard = claripy.And(g0, g)
                if hit:
                    t.globals["tail_calls"] = t.globals["tail_calls"] + (
                        (t.globals["program"], mdef.name, const, prog.name, self.insn.pc),
                    )
                    out.append((t, self.enter_program(t, prog), guard))
                else:
                    rest = [(t, guard)]
        if not rest:
            return out
        st, g0 = rest[0]
        # Any other slot: filled by the control plane (unknown program) or empty (falls through).
        if chain_full:
            filled = claripy.false()
        else:
            others = claripy.And(claripy.ULT(idx, _bv(mdef.max_entries or 0, 32)), *[idx != slot for slot in targets])
            filled = claripy.And(others, claripy.BoolS(f"map.{mdef.name}.f{self.ctx.next_id()}", explicit_name=True))
        for hit, t, g in self.fork(filled, "tail_call", st):
            guard = claripy.And(g0, g)
            if hit:
                t.globals["tail_calls"] = t.globals["tail_calls"] + (
                    (t.globals["program"], mdef.name, const, None, self.insn.pc),
                )
                out += self.end(
                    UNKNOWN,
                    truncated=f"tail call into an unknown program ({mdef.name}"
                    f"[{const if const is not None else 'variable index'}]) at {self.where()}",
                    state=t,
                    guard=guard,
                )
            else:
                self.r0(self.fresh("helper.tail_call"), t)
                out += self.next(t, guard)
        return out

    def enter_program(self, st, prog: Program) -> int:
        st.globals["program"] = prog.name
        st.globals["frames"] = (Frame(prog.entry.key),)
        for r in range(11):
            self.set(r, _bv(0), st)
        self.set(1, _bv(CTX_BASE), st)
        self.set(10, _bv(STACK_TOP), st)
        if prog.name not in self.ctx.programs_seen:
            self.ctx.programs_seen.append(prog.name)
        return self.ctx.addr(prog.section, prog.entry.start)

    def h_loop(self, name):
        nr, cb = self.reg(1), self.reg(2)
        if nr.symbolic or cb.symbolic or cb.concrete_value not in self.ctx.insn_at:
            return self.end(UNKNOWN, truncated=f"unsupported: bpf_loop with a variable count at {self.where()}")
        count = nr.concrete_value & 0xFFFFFFFF
        if count > self.ctx.options.loop_bound:
            return self.end(
                UNKNOWN,
                truncated=f"bpf_loop of {count} iterations at {self.where()} is over "
                f"--loop-bound {self.ctx.options.loop_bound}",
            )
        if count == 0:
            self.r0(_bv(0))
            return self.next()
        func, _ = self.ctx.insn_at[cb.concrete_value]
        return [(self.s, self.call_callback(self.s, (func.key, 0, count, self.reg(3)), self.here + 8), claripy.true())]

    def call_callback(self, st, loop: tuple, ret: int) -> int:
        callee = self.ctx.obj.functions[loop[0]]
        self.push_frame(Frame(callee.key, ret, tuple(self.reg(r, st) for r in range(6, 10)), loop), st)
        self.set(1, _bv(loop[1]), st)
        self.set(2, loop[3], st)
        return self.ctx.addr(callee.section, callee.start)

    def callback_returned(self, frame: Frame):
        st = self.s
        cb, index, count, cb_ctx = frame.loop
        ret = self.reg(0)[31:0]
        frames = st.globals["frames"][:-1]
        st.globals["frames"] = frames
        for r, v in zip(range(6, 10), frame.saved):
            self.set(r, v)
        self.set(10, _bv(STACK_TOP - STACK_SPAN * (len(frames) - 1)))
        out = []
        for stopped, t, g in self.fork(ret != 0, "callback"):
            if stopped or index + 1 >= count:
                self.r0(_bv(index + 1 if stopped else count), t)
                out.append((t, frame.ret, g))
            else:
                out.append((t, self.call_callback(t, (cb, index + 1, count, cb_ctx), frame.ret), g))
        return out

    def resize(self, name: str, ok, apply):
        out = []
        for good, t, g in self.fork(ok, "helper"):
            if good:
                apply(t)
            self.r0(_bv(0 if good else -EINVAL), t)
            out += self.next(t, g)
        return out

    def set_packet(self, st, head=None, end=None, meta=None) -> None:
        for k, v in (("head", head), ("end", end), ("meta", meta)):
            if v is not None:
                st.globals[k] = v
        h, e, m = st.globals["head"], st.globals["end"], st.globals["meta"]
        st.memory.store(CTX_BASE + 0, (h + PKT_BASE)[31:0], endness=Endness.LE)
        st.memory.store(CTX_BASE + 4, (e + PKT_BASE)[31:0], endness=Endness.LE)
        st.memory.store(CTX_BASE + 8, (h - m + PKT_BASE)[31:0], endness=Endness.LE)

    def delta(self):
        return claripy.SignExt(32, self.reg(2)[31:0])

    def h_adjust_head(self, name):
        g = self.s.globals
        new = g["head"] + self.delta()
        # bpf_xdp_adjust_head: data stays after the xdp_frame (+ metadata) and leaves at
        # least ETH_HLEN bytes before data_end.
        ok = claripy.And(claripy.SGE(new - g["meta"], _bv(-HEADROOM)), claripy.SLE(new, g["end"] - 14))
        return self.resize(name, ok, lambda t: self.set_packet(t, head=new))

    def h_adjust_meta(self, name):
        g = self.s.globals
        new = g["meta"] - self.delta()
        ok = claripy.And(
            claripy.SGE(new, _bv(0)),
            claripy.SLE(new, _bv(MAX_META)),
            (new & 3) == 0,
            claripy.SGE(g["head"] - new, _bv(-HEADROOM)),
        )
        return self.resize(name, ok, lambda t: self.set_packet(t, meta=new))

    def h_adjust_tail(self, name):
        g = self.s.globals
        new = g["end"] + self.delta()
        ok = claripy.And(claripy.SGE(new - g["head"], _bv(14)), claripy.SLE(new, _bv(MAX_LINEAR_PACKET)))
        return self.resize(name, ok, lambda t: self.set_packet(t, end=new))

    def h_buff_len(self, name):
        g = self.s.globals
        self.r0(g["end"] - g["head"] + g["frags"])
        return self.next()

    def packet_span(self, off_reg: int, n: int):
        g = self.s.globals
        off = claripy.ZeroExt(32, self.reg(off_reg)[31:0])
        return PKT_BASE + g["head"] + off, claripy.ULE(off + n, g["end"] - g["head"])

    def h_load_bytes(self, name):
        size, buf = self.reg(4), self.reg(3)
        if size.symbolic or buf.symbolic:  # (h_havoc_mem reads r1/r2 as the buffer: not this helper's)
            self.note(f"bpf_xdp_load_bytes arguments not modelled at {self.where()}")
            return self.h_fresh64(name)
        n = size.concrete_value
        src, ok = self.packet_span(2, n)

        def apply(t):
            if n:  # copied as loaded: little-endian both ways (memory order)
                self.check_value_access(buf, n, self.region(buf, t), "store", t)
                t.memory.store(buf, self.load(src, n, t), endness=Endness.LE)

        return self.resize(name, ok, apply)

    def h_store_bytes(self, name):
        size, buf = self.reg(4), self.reg(3)
        if size.symbolic:
            self.note(f"bpf_xdp_store_bytes arguments not modelled at {self.where()}")
            return self.h_fresh64(name)
        n = size.concrete_value
        dst, ok = self.packet_span(2, n)
        if n and not buf.symbolic:
            self.check_value_access(buf, n, self.region(buf), "load", self.s)

        def apply(t):
            if n:
                self.store(dst, t.memory.load(buf, n, endness=Endness.LE), t)

        return self.resize(name, ok, apply)

    def h_csum_diff(self, name):
        """bpf_csum_diff(from, from_size, to, to_size, seed) as Linux 6.13+ computes it
        (net/core/filter.c): `csum_partial(to, to_size, seed)`, less `csum_partial(from,
        from_size, 0)` by `csum_sub` when both sizes are given, `~csum_partial(from, from_size,
        ~seed)` for `from` alone, and the result folded to 16 bits (`csum_from32to16`).
        Sizes must be constant multiples of 4 up to 512 bytes here; otherwise the result is an
        unknown and the path says so."""
        sizes = self.reg(2), self.reg(4)
        if any(n.symbolic or n.concrete_value % 4 or n.concrete_value > 512 for n in sizes):
            self.note(f"bpf_csum_diff with sizes not modelled (variable, unaligned or over 512) at {self.where()}")
            return self.h_fresh64(name)
        from_n, to_n = (n.concrete_value for n in sizes)
        seed = self.reg(5)[31:0]
        if from_n and to_n:
            ret = csum_add(csum_partial(self.words(3, to_n), seed), ~csum_partial(self.words(1, from_n), _bv(0, 32)))
        elif to_n:
            ret = csum_partial(self.words(3, to_n), seed)
        elif from_n:
            ret = ~csum_partial(self.words(1, from_n), ~seed)
        else:
            ret = seed
        self.r0(claripy.ZeroExt(48, csum_from32to16(ret)))
        return self.next()

    def words(self, reg: int, size: int) -> list:
        """The 32-bit words of `size` bytes at the pointer in `reg`, each loaded as the x86-64
        kernel loads it (little-endian)."""
        base = self.reg(reg)
        return [self.load(base + 4 * i, 4) for i in range(size // 4)]

    def h_ringbuf_reserve(self, name):
        got = self.fresh("helper.ringbuf_reserve", 1) == 1
        out = []
        for ok, t, g in self.fork(got, "helper"):
            self.r0(_bv(MEM_BASE if ok else 0), t)
            out += self.next(t, g)
        return out


def alu(op: AluOp, wide: bool, a, b):
    """dst OP src (RFC 9669 4.1): 32-bit ops zero the upper half, shifts use the low 5/6
    bits of the count, division by zero gives 0, modulo by zero keeps dst."""
    if not wide:
        a, b = a[31:0], b[31:0]
    width = 64 if wide else 32
    zero = _bv(0, width)
    if op == AluOp.ADD:
        r = a + b
    elif op == AluOp.SUB:
        r = a - b
    elif op == AluOp.MUL:
        r = a * b
    elif op == AluOp.DIV:
        r = claripy.If(b == zero, zero, claripy.UDiv(a, b))
    elif op == AluOp.SDIV:
        r = claripy.If(b == zero, zero, claripy.SDiv(a, b))
    elif op == AluOp.MOD:
        r = claripy.If(b == zero, a, claripy.UMod(a, b))
    elif op == AluOp.SMOD:
        r = claripy.If(b == zero, a, claripy.SMod(a, b))
    elif op == AluOp.OR:
        r = a | b
    elif op == AluOp.AND:
        r = a & b
    elif op == AluOp.XOR:
        r = a ^ b
    elif op == AluOp.LSH:
        r = a << (b & (width - 1))
    elif op == AluOp.RSH:
        r = claripy.LShR(a, b & (width - 1))
    elif op == AluOp.ARSH:
        r = claripy.AShR(a, b & (width - 1))
    elif op == AluOp.MOV:
        r = b
    else:  # pragma: no cover
        raise AngrEngineError(f"unknown ALU op {op}")
    return r if wide else claripy.ZeroExt(32, r)


def csum_partial(words: list, seed):
    """Linux's x86-64 `csum_partial` (arch/x86/lib/csum-partial_64.c) of whole 32-bit words:
    an add-with-carry (one's complement) accumulation, folded to 32 bits with the carry added
    back. Such a sum is 0 only when every addend is 0, and otherwise is the one number in
    1..2^32-1 congruent to the plain sum T modulo 2^32-1: two folds of T (under 2^40 for at
    most 128 words) give exactly that."""
    total = claripy.ZeroExt(32, seed)
    for w in words:
        total = total + claripy.ZeroExt(32, w)
    for _ in range(2):
        total = (total & 0xFFFFFFFF) + claripy.LShR(total, 32)
    return total[31:0]


def csum_add(a, b):
    """include/net/checksum.h `csum_add`: a 32-bit add with the carry added back."""
    s = claripy.ZeroExt(1, a) + claripy.ZeroExt(1, b)
    return s[31:0] + claripy.ZeroExt(31, s[32:32])


def csum_from32to16(x):
    """include/net/checksum.h `csum_from32to16`: the upper half of x + (x rotated by 16),
    i.e. the two 16-bit halves added with the carry added back."""
    return (x + claripy.RotateRight(x, 16))[31:16]


#: Most addresses a load through a merged pointer is split into (`address_cases`).
MAX_ADDRESS_CASES = 16


def products(e, memo: dict) -> int:
    """The most products, divisions and remainders of symbolic values nested in `e`
    (memoised by the term's hash: a term is a DAG that shares its subterms)."""
    if not e.symbolic:
        return 0
    h = e.hash()
    n = memo.get(h)
    if n is None:
        n = max((products(a, memo) for a in e.args if hasattr(a, "op")), default=0)
        n = memo[h] = n + (e.op in PRODUCT_OPS)
    return n


def address_cases(addr) -> list:
    """[(condition, address)] for an address built of If-terms (a pointer merged from states
    that held different ones), additions and concatenations: the If-terms pushed out, each
    address free of them, the same addresses' conditions joined; [] when it has none or more
    than MAX_ADDRESS_CASES of them. Cases may be infeasible (a selector value no merged state
    has): the caller drops those."""
    if addr.op == "If":
        c, a, b = addr.args
        inner = [(claripy.And(c, ca), x) for ca, x in address_cases(a) or [(claripy.true(), a)]]
        inner += [(claripy.And(claripy.Not(c), cb), x) for cb, x in address_cases(b) or [(claripy.true(), b)]]
    elif addr.op in ("__add__", "Concat") and any(x.op in ("If", "Concat") for x in addr.args):
        # claripy writes PKT_BASE + If(sel, 14, 18) as Concat(PKT_BASE's high bits, If(sel,
        # 14, 18)): the parts of a concatenation are pushed out like those of a sum.
        combine = (lambda x, y: x + y) if addr.op == "__add__" else (lambda x, y: claripy.Concat(x, y))
        inner = []
        for arg in addr.args:
            parts = address_cases(arg) or [(claripy.true(), arg)]
            inner = [(claripy.And(c, ca), combine(x, y)) for c, x in inner for ca, y in parts] if inner else list(parts)
            if len(inner) > MAX_ADDRESS_CASES:
                return []
        if len(inner) < 2:
            return []
    else:
        return []
    joined: dict = {}
    for c, x in inner:
        prev = joined.get(x.hash())
        joined[x.hash()] = (c if prev is None else claripy.Or(prev[0], c), x)
    out = list(joined.values())
    return out if len(out) <= MAX_ADDRESS_CASES else []


def select(off, leaves: list):
    """leaves[off] for a symbolic `off` known to be below len(leaves): a tree of If-terms
    on the bits of `off`, lowest bit at the leaves (exact, and as deep as `off` has bits)."""
    level, bit = list(leaves), 0
    while len(level) > 1:
        b = off[bit:bit] == 1
        level = [
            claripy.If(b, level[i + 1], level[i]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)
        ]
        bit += 1
    return level[0]


def interval(e, shifts: bool = False) -> tuple[int, int] | None:
    """Unsigned bounds [lo, hi] of a claripy value from its form alone (constants, symbols
    by width, sums, shifts by bounded amounts, masks by constants, extensions,
    concatenations, If-terms); None when an operation could wrap or is not one of those. Sound, not tight.
    `shifts`: also bound shifts by a symbolic amount (else only by a constant)."""
    n = e.size()
    top = (1 << n) - 1
    if not e.symbolic:
        v = e.concrete_value
        return v, v
    op, args = e.op, e.args
    if op == "BVS":
        return 0, top
    if op == "ZeroExt":
        return interval(args[1], shifts)
    if op == "If":
        a, b = interval(args[1], shifts), interval(args[2], shifts)
        return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
    if op == "Concat":
        lo = hi = 0
        for a in args:
            r = interval(a, shifts)
            if r is None:
                return None
            lo, hi = (lo << a.size()) + r[0], (hi << a.size()) + r[1]
        return lo, hi
    if op == "Extract" and args[1] == 0:
        r = interval(args[2], shifts)
        return r if r is not None and r[1] <= top else (0, top)
    if op == "__add__":
        rs = [interval(a, shifts) for a in args]
        if any(r is None for r in rs) or sum(r[1] for r in rs) > top:
            return None
        return sum(r[0] for r in rs), sum(r[1] for r in rs)
    if op == "__sub__" and len(args) == 2:
        a, b = interval(args[0], shifts), interval(args[1], shifts)
        return None if a is None or b is None or a[0] < b[1] else (a[0] - b[1], a[1] - b[0])
    if op == "__lshift__" and (shifts or not args[1].symbolic):  # merged header lengths: by 2 or 3
        a, k = interval(args[0], shifts), interval(args[1], shifts)
        if a is None or k is None or k[1] >= n or a[1] << k[1] > top:
            return None
        return a[0] << k[0], a[1] << k[1]
    if op == "LShR" and (shifts or not args[1].symbolic):
        a, k = interval(args[0], shifts), interval(args[1], shifts)
        return None if a is None or k is None else (a[0] >> min(k[1], n), a[1] >> min(k[0], n))
    if op == "__and__":
        his = [a.concrete_value if not a.symbolic else (interval(a, shifts) or (0, top))[1] for a in args]
        return 0, min(his)
    return 0, top


def byte_list(v) -> list:
    """The bytes of a claripy value, most significant first: the parts of a concatenation
    as they are (the packet is a concatenation of its byte symbols), else extracted."""
    if v.op == "Concat" and all(a.size() % 8 == 0 for a in v.args):
        return [b for a in v.args for b in byte_list(a)]
    n = v.size() // 8
    return [v] if n == 1 else [v[8 * (n - i) - 1 : 8 * (n - i - 1)] for i in range(n)]


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def compare(cond: Cond, wide: bool, a, b):
    """The jump condition `a COND b` on real values (pointers are addresses here)."""
    if not wide:
        a, b = a[31:0], b[31:0]
    ops = {
        Cond.EQ: lambda: a == b,
        Cond.NE: lambda: a != b,
        Cond.SET: lambda: (a & b) != 0,
        Cond.GT: lambda: claripy.UGT(a, b),
        Cond.GE: lambda: claripy.UGE(a, b),
        Cond.LT: lambda: claripy.ULT(a, b),
        Cond.LE: lambda: claripy.ULE(a, b),
        Cond.SGT: lambda: claripy.SGT(a, b),
        Cond.SGE: lambda: claripy.SGE(a, b),
        Cond.SLT: lambda: claripy.SLT(a, b),
        Cond.SLE: lambda: claripy.SLE(a, b),
    }
    return ops[cond]()


def sources(expr, ctx: Context | None = None) -> set:
    """The program inputs a claripy expression depends on (by symbol name, symbolic.py; a
    merge selector stands for the inputs of the conditions it selects by)."""
    out = set()
    for name in expr.variables:
        if ctx is not None and name in ctx.merged_sources:
            out |= ctx.merged_sources[name]
        elif (src := source_of(name)) is not None:
            out.add(src)
    return out


# --- exploration: loop bounds, budgets, merging -------------------------------------------


class LoopBound(ExplorationTechnique):
    """Cuts a path whose loop has run more than `bound` times (per call depth), ending it
    UNKNOWN with the reason. As in the z3 engine, an iteration is a taken back edge of the
    lifter's CFG and all back edges into one loop header count together (`continue` edges
    too). angr's own LoopSeer/LocalLoopSeer cannot be used: they find loops in angr's
    VEX-based CFG, which an eBPF blob does not have; the back edges here are the lifter's,
    the edge taken is the state's last jump in angr's history."""

    def __init__(self, ctx: Context, bound: int):
        super().__init__()
        self.ctx, self.bound = ctx, bound

    def filter(self, simgr, state, **kwargs):
        if "ended" in state.globals:
            return "ended"
        edge = (state.history.jump_source, state.globals["pc"])
        # angr filters every state of the stash at each step, stepped or waiting (Scheduler):
        # an edge is counted once, on the step that took it.
        taken = (state.history.depth, edge)
        if edge in self.ctx.back_edges and state.globals.get("counted") != taken:
            state.globals["counted"] = taken
            key = (len(state.globals["frames"]), state.globals["pc"])
            loops = dict(state.globals["loops"])
            loops[key] = loops.get(key, 0) + 1
            state.globals["loops"] = tuple(sorted(loops.items()))
            if loops[key] > self.bound:
                section, pc = self.ctx.where(state.globals["pc"])
                line = self.ctx.obj.line_at(section, pc)
                at = f"{section}:{pc}" + (f" ({line.file_name}:{line.line})" if line else "")
                state.globals["ended"] = End(
                    UNKNOWN, None, f"loop at {at} cut after {self.bound} iterations (--loop-bound)", pc, section
                )
                return "ended"
        return simgr.filter(state, **kwargs)


@dataclass(frozen=True)
class Limits:
    """The angr engine's own resource budget, on top of `Options` (instructions, paths,
    `--timeout`, `--path-timeout`, all honoured here too). angr keeps every open state in
    memory; a path explosion once took a test run to 24 GiB and the OOM killer. Past a limit
    the states still open are cut (UNKNOWN, each saying which budget and where), and the
    exploration's `budget` says what ran out: a partial report, never a crash.

    `max_active`: open states at once; the ones latest in the exploration order are cut.
    `max_rss_mib`: growth of this process's resident memory during the exploration; None is
    half the memory available when it starts, at most DEFAULT_MAX_RSS_MIB.
    `max_seconds`: wall time of the exploration when `Options.timeout` gives none (angr's
    solver calls on merged states can take seconds each: no run is open-ended).
    `cpu`: the time budgets (`max_seconds`, `Options.timeout`) count this process's CPU time
    (`time.process_time`) instead of wall time: on a shared machine a run then gets the
    same work done however loaded the machine is (the cross-check's shards use it).
    `walk_probe`: once the program reads the packet at an offset that depends on packet
    bytes (Context.walk), the exploration gets at most this many seconds more (the
    cross-check's mode "auto" then explores it shard by shard, crosscheck.py)."""

    max_active: int = 512
    max_rss_mib: int | None = None
    max_seconds: float | None = 600.0
    cpu: bool = False
    walk_probe: float | None = None


DEFAULT_MAX_RSS_MIB = 4096


def rss_mib() -> float:
    """This process's resident memory now (Linux /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def available_mib() -> float:
    """MemAvailable of /proc/meminfo, in MiB."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return 2.0 * DEFAULT_MAX_RSS_MIB


def cut_reason(ctx: Context, kind: str, state, addr: int | None = None, what: str = "") -> str:
    """Why and where a budget cut `state` (instruction, source line, instructions run)."""
    section, pc = ctx.where(state.globals["pc"] if addr is None else addr)
    line = ctx.obj.line_at(section, pc)
    at = f"{section}:{pc}" + (f" ({line.file_name}:{line.line})" if line else "")
    seconds = ctx.options.timeout if ctx.options.timeout is not None else ctx.limits.max_seconds
    budget = {
        "time": f"{'CPU ' if ctx.limits is not None and ctx.limits.cpu else ''}time budget of {seconds:g} s",
        "path": f"path time budget of {ctx.options.path_timeout:g} s" if ctx.options.path_timeout else "",
    }.get(kind, what)
    return f"{budget} ran out at {at}, {state.globals['steps'][1]} instructions in"


def priority(ctx: Context, state) -> tuple:
    """The exploration order (reverse post-order of each function's CFG, callers first, then
    tail-called programs): a state is stepped only when no state can still reach its place,
    so the states meeting at a join point are merged there."""
    frames = state.globals["frames"]
    parts: list = [len(state.globals["tail_calls"])]
    parts += [(ctx.rank.get(f.ret, 0), 0) for f in frames[1:]]
    parts.append((ctx.rank.get(state.globals["pc"], 1 << 62), 1))
    return tuple(parts)


def _h(x) -> object:
    """A hashable identity of a claripy value (claripy ASTs are hash-consed) or plain value."""
    return x.hash() if hasattr(x, "hash") and hasattr(x, "op") else x


def shape(state) -> tuple:
    """What two states at one place must share to be merged: call stack, entries touched
    (map and slot, in order), tail calls, effects, notes, loop counts, redirect kind. Values
    (registers, memory, keys, packet bounds) may differ: they become if-then-else terms.
    In the segment model (Context.segments) also the segments with their read ranges and
    the end of the packet's own reads (`pkt_hi`), before the first segment too: a state
    that read the packet further at fixed offsets (past an 8-byte fragment header) merged
    with one about to read past a header of free length would make that read one that can
    alias the bytes read (`Step.segment_load`), and the merged state read the packet flat
    (`load_anywhere`), slowly; apart, the latter reads in segments (xdp-filter's
    ipv6/ext8/ext8/chain: merged, 33 paths in 22 CPU s and more; apart, 77 in ~1.2 s)."""
    g = state.globals
    redirect = g["redirect"]
    r0 = None
    if len(g["frames"]) == 1 and isinstance(state.project.xdp2tc.insn_at[g["pc"]][1], Exit):
        r0 = _h(g["regs"][0])  # as the z3 engine: paths leaving with different values stay apart
    return (
        g["pc"],
        r0,
        g["program"],
        tuple((f.func, f.ret, None if f.loop is None else f.loop[:3]) for f in g["frames"]),
        tuple((e.map, e.addr, e.init_found is None, e.init_val is None) for e in g["entries"]),
        g["tail_calls"],
        g["effects"],
        g["notes"],
        g["loops"],
        None if redirect is None else (redirect[0], redirect[1] if redirect[0] == "map" else None),
        tuple((seg.key, seg.lowest, seg.highest) for seg in g.get("segments", ())),
        g.get("pkt_hi", 0) if state.project.xdp2tc.segments else None,
        bool(g.get("flat_walk")),
    )


def join(values: list, conds: list):
    """One value standing for values[i] where conds[i] holds (the conditions are disjoint
    and cover the merged state): the value itself when all are the same."""
    first = values[0]
    if all(_h(v) == _h(first) for v in values[1:]):
        return first
    out = values[-1]
    for v, c in zip(reversed(values[:-1]), reversed(conds[:-1])):
        out = claripy.If(c, v, out)
    return out


def merge_states(ctx: Context, states: list):
    """One state for several at the same place with the same `shape`: a fresh selector
    `b!merge.<n>` equals i exactly where state i's own constraints (those not common to all)
    hold, and the path condition is the common constraints and the disjunction of
    "selector i and state i's rest"; registers and memory are merged by angr on "selector
    == i" (if-then-else per differing value), and the path data in `globals` is joined
    here. Exact: the conditions are disjoint, so the selector is a function of the inputs.
    Why a selector and not the conditions themselves in every if-then-else: each merged
    value would carry a copy of the path conditions, which nest merge after merge (terms of
    10^8 characters on xdp-filter's VLAN and IPv6 walks, 10-25 s per solver call)."""
    cons = [list(s.solver.constraints) for s in states]
    common_ids = set.intersection(*[{c.hash() for c in cs} for cs in cons])
    common = [c for c in cons[0] if c.hash() in common_ids]
    rests = [[c for c in cs if c.hash() not in common_ids] for cs in cons]
    own = [claripy.And(*rest) if rest else claripy.true() for rest in rests]
    name = f"b!merge.{ctx.next_id()}"
    selector = claripy.BVS(name, max(1, (len(states) - 1).bit_length()), explicit_name=True)
    conds = [selector == i for i in range(len(states))]
    ctx.merged_sources[name] = sources(claripy.Or(*own), ctx)
    merged, _, _ = states[0].merge(
        *states[1:], merge_conditions=[[c] for c in conds], plugin_whitelist=["registers", "memory"]
    )
    merged.solver.reload_solver(common + [claripy.Or(*[claripy.And(c, o) for c, o in zip(conds, own)])])
    gs = [s.globals for s in states]
    g = merged.globals
    for k in ("head", "end", "meta", "frags"):
        g[k] = join([x[k] for x in gs], conds)
    frames = []
    for i, f in enumerate(gs[0]["frames"]):
        fs = [x["frames"][i] for x in gs]
        saved = tuple(join([x.saved[j] for x in fs], conds) for j in range(len(f.saved)))
        loop = None if f.loop is None else f.loop[:3] + (join([x.loop[3] for x in fs], conds),)
        frames.append(replace(f, saved=saved, loop=loop))
    g["frames"] = tuple(frames)
    g["regs"] = tuple(join([x["regs"][i] for x in gs], conds) for i in range(len(gs[0]["regs"])))
    entries = []
    for i, e in enumerate(gs[0]["entries"]):
        es = [x["entries"][i] for x in gs]
        entries.append(
            replace(
                e,
                key=join([x.key for x in es], conds),
                init_found=None if e.init_found is None else join([x.init_found for x in es], conds),
                init_val=None if e.init_val is None else join([x.init_val for x in es], conds),
                found=join([x.found for x in es], conds),
            )
        )
    g["entries"] = tuple(entries)
    if gs[0]["redirect"] is not None:
        r = gs[0]["redirect"]
        g["redirect"] = r[:-1] + (join([x["redirect"][-1] for x in gs], conds),)
    writes = {}
    for x in gs:
        for w in x["writes"]:
            writes.setdefault(_h(w), w)
    g["writes"] = tuple(writes.values())
    g["pkt_hi"] = max(x.get("pkt_hi", 0) for x in gs)
    if gs[0].get("segments"):  # the same segments and read ranges (`shape`): their proven bounds joined
        g["segments"] = tuple(
            replace(seg, proven=min(x["segments"][i].proven for x in gs))  # each state's holds on the merged one
            for i, seg in enumerate(gs[0]["segments"])
        )
    g["steps"] = (min(x["steps"][0] for x in gs), max(x["steps"][1] for x in gs))
    g["spent"] = max(x["spent"] for x in gs)
    g["sites"] = frozenset().union(*[x["sites"] for x in gs])
    g["merged"] = sum(x.get("merged", 1) for x in gs)
    return merged


class Scheduler:
    """Steps the states of one exploration in `priority` order, merges those that meet (with
    `Options.merge`), and enforces the budgets (`Options`, `Limits`). Why merging of our own
    and not angr's Veritesting: Veritesting rebuilds a static CFG of the region with angr's
    CFGEmulated over VEX, which an eBPF blob has none of; the lifter's CFG is at hand, and
    merging where states meet in its reverse post-order is what the z3 engine's exactness
    argument needs (disjoint path conditions, every differing value an if-then-else)."""

    def __init__(self, ctx: Context, options: Options, limits: Limits):
        self.ctx, self.options, self.limits = ctx, options, limits
        self.rss0 = rss_mib()
        self.max_rss = (
            limits.max_rss_mib if limits.max_rss_mib is not None else min(DEFAULT_MAX_RSS_MIB, available_mib() / 2)
        )
        self.limit: str | None = None  # what ran out, for the report
        self.ran_out = False
        self.checks = 0

    def cut(self, simgr, states: list, reason) -> None:
        for st in states:
            section, pc = self.ctx.where(st.globals["pc"])
            st.globals["ended"] = End(UNKNOWN, None, reason(st), pc, section)
            st.globals["cut"] = True
        ids = {id(st) for st in states}
        simgr.move("active", "ended", filter_func=lambda st: id(st) in ids)

    def run(self, simgr, progress=None) -> None:
        last = time.perf_counter()
        while simgr.active:
            simgr.move("active", "ended", filter_func=lambda st: "ended" in st.globals)
            if not simgr.active or self.over_budget(simgr):
                break
            group = self.next_group(simgr)
            ids = {id(st) for st in group}
            simgr.step(selector_func=lambda st, ids=ids: id(st) in ids)
            if simgr.errored:
                err = simgr.errored[0]
                raise AngrEngineError(f"angr failed at {self.ctx.where(err.state.addr)}: {err.error}") from err.error
            if progress is not None and time.perf_counter() - last > 0.5:
                last = time.perf_counter()
                progress(len(simgr.stashes.get("ended", [])), len(simgr.active), self.ctx.insns)

    def next_group(self, simgr) -> list:
        """The states to step now: those first in `priority` order, merged by `shape`
        (without merging, every open state: angr's breadth-first order)."""
        if not self.options.merge:
            return list(simgr.active)
        keyed = [(priority(self.ctx, st), st) for st in simgr.active]
        best = min(k for k, _ in keyed)
        group = [st for k, st in keyed if k == best]
        if len(group) < 2:
            return group
        by_shape: dict = {}
        for st in group:
            by_shape.setdefault(shape(st), []).append(st)
        out = []
        for states in by_shape.values():
            if len(states) == 1:
                out.append(states[0])
                continue
            merged = merge_states(self.ctx, states)
            ids = {id(st) for st in states}
            simgr.drop(stash="active", filter_func=lambda st, ids=ids: id(st) in ids)
            simgr.active.append(merged)
            out.append(merged)
        return out

    def over_budget(self, simgr) -> bool:
        """Cut states as the budgets say; True when nothing more is to be explored."""
        ctx, opts = self.ctx, self.options
        ended = len(simgr.stashes.get("ended", []))
        if ctx.insns >= opts.max_insns or ended >= opts.max_paths:
            what = f"{opts.max_insns} instructions" if ctx.insns >= opts.max_insns else f"{opts.max_paths} paths"
            self.ran_out = True
            self.limit = f"the exploration budget of {what} (--max-insns/--max-paths)"
            self.cut(simgr, list(simgr.active), lambda st: f"exploration budget of {what} reached")
            return True
        if ctx.deadline is not None and ctx.clock() >= ctx.deadline:
            self.ran_out = True
            if ctx.walk is not None and self.limits.walk_probe is not None:
                self.limit = f"the protocol walk's probe ({self.limits.walk_probe:g} s; a walk at {ctx.walk})"
            elif opts.timeout is None:
                self.limit = f"the angr engine's time budget ({self.limits.max_seconds:g} s)"
            self.cut(simgr, list(simgr.active), lambda st: cut_reason(ctx, "time", st))
            return True
        self.checks += 1
        if self.checks % 8 == 0 and rss_mib() - self.rss0 > self.max_rss:
            self.ran_out = True
            self.limit = f"the angr engine's memory budget ({self.max_rss:.0f} MiB)"
            what = f"memory budget of {self.max_rss:.0f} MiB"
            self.cut(simgr, list(simgr.active), lambda st: cut_reason(ctx, "", st, what=what))
            return True
        if opts.path_timeout is not None:
            late = [st for st in simgr.active if st.globals["spent"] >= opts.path_timeout]
            if late:
                self.cut(simgr, late, lambda st: cut_reason(ctx, "path", st))
        if len(simgr.active) > self.limits.max_active:
            self.ran_out = True
            n = self.limits.max_active
            self.limit = f"the angr engine's budget of {n} open states"
            order = sorted(simgr.active, key=lambda st: priority(ctx, st))
            what = f"open-state budget of {n} states"
            self.cut(simgr, order[n:], lambda st: cut_reason(ctx, "", st, what=what))
        return not simgr.active

    def budget(self, programs: list[Program], paths: list) -> Budget | None:
        """What the budgets cut (None when no budget was given and nothing was cut)."""
        cut = [p.id for p in paths if p.state.globals.get("cut")]
        if not cut and self.options.timeout is None and self.options.path_timeout is None:
            return None
        explored, not_reached = [], []
        for prog in programs:
            for f in prog.functions:
                name = f"{prog.name}:{f.name}" if f.name != prog.name else prog.name
                (explored if f.key in self.ctx.functions_run else not_reached).append(name)
        return Budget(
            self.options.timeout, self.options.path_timeout, self.ran_out, explored, not_reached, cut, self.limit
        )


# --- driver --------------------------------------------------------------------------------


def explore_angr(
    obj: BpfObject,
    program: Program,
    options: Options | None = None,
    progress=None,
    limits: Limits | None = None,
    concrete: Concrete | None = None,
    shard=None,
    project=None,
    segments: bool = False,
) -> AngrExploration:
    """Explore every path of `program` with angr (see the module docstring); with
    `concrete`, only the path that input takes (helper results stay symbolic); with `shard`
    (analyzer/shards.py `Shard`), only the packets of that shard: its fixed bytes are
    constants in the packet, its other atoms constraints on the initial state. `project`:
    a `make_project` result to reuse (the cross-check's replays and shards of one program)."""
    options = options or Options()
    limits = limits or Limits()
    start = time.perf_counter()
    project, ctx = make_project(obj, options) if project is None else fresh_context(project, options)
    ctx.limits = limits
    ctx.concrete = concrete
    ctx.segments = segments
    ctx.clock = time.process_time if limits.cpu else time.perf_counter
    seconds = options.timeout if options.timeout is not None else limits.max_seconds
    ctx.deadline = None if seconds is None else ctx.clock() + seconds
    ctx.programs_seen.append(program.name)
    state = project.factory.blank_state(
        addr=ctx.addr(program.section, program.entry.start),
        add_options={
            angr.options.SYMBOL_FILL_UNCONSTRAINED_MEMORY,
            angr.options.SYMBOL_FILL_UNCONSTRAINED_REGISTERS,
            angr.options.LAZY_SOLVES,
            # no read is pinned to one address (Step.load reads symbolic addresses itself)
            angr.options.CONSERVATIVE_READ_STRATEGY,
        },  # Step.fork checks
        # COPY_STATES off: a state is stepped in place (the Scheduler drops it for its
        # successors), so its claripy solver stays warm; a fork copies it for one direction only
        remove_options={angr.options.SIMPLIFY_EXIT_STATE, angr.options.COPY_STATES},
    )
    packet = [_sym(f"pkt.{i}", 8) for i in range(max(options.max_len, 1))]
    packet_len = _sym("pkt.len", 64)
    frags = _sym("pkt.frags", 64)
    given: dict = {}  # ctx field -> its value in a concrete run
    if concrete is not None:
        n = len(concrete.packet)
        packet = [_bv(b, 8) for b in concrete.packet] + packet[n:]
        packet_len, frags = _bv(n), _bv(concrete.frags)
        given = {"ingress_ifindex": concrete.ifindex, "rx_queue_index": concrete.rx_queue}
        given["egress_ifindex"] = concrete.egress
    if shard is not None:
        for i, b in shard.fixed.items():
            if i < len(packet):
                packet[i] = _bv(b, 8)
    state.memory.store(PKT_BASE, claripy.Concat(*packet))
    state.solver.add(claripy.UGE(packet_len, options.min_len), claripy.ULE(packet_len, options.max_len))
    if shard is not None:
        state.solver.add(*shard.claripy(packet + [_bv(0, 8)] * 64))
    state.solver.add(claripy.ULE(frags, MAX_FRAGS_BYTES) if program.attach == "xdp.frags" else frags == 0)
    ctxf = {
        name: _bv(given[name], 32) if name in given else _sym(f"ctx.{name}", 32)
        for off, name in XDP_MD_FIELDS.items()
        if off >= 12
    }
    for off, name in XDP_MD_FIELDS.items():
        if off >= 12:
            state.memory.store(CTX_BASE + off, ctxf[name], endness=Endness.LE)
    globals_ = {}
    for name, base in ctx.global_addr.items():
        mdef = ctx.maps[name]
        if mdef.value_size:
            globals_[name] = (
                _sym(f"map.{name}.v0", 8 * mdef.value_size)
                if concrete is None
                else _bv(int.from_bytes(mdef.initial or bytes(mdef.value_size), "big"), 8 * mdef.value_size)
            )
            state.memory.store(base, globals_[name])
    for k, v in {
        "program": program.name,
        "frames": (Frame(program.entry.key),),
        "entries": (),
        "notes": (),
        "effects": (),
        "tail_calls": (),
        "writes": (),
        "redirect": None,
        "loops": (),
        "steps": (0, 0),
        "spent": 0.0,
        "sites": frozenset(),
        "head": _bv(0),
        "end": packet_len,
        "meta": _bv(0),
        "frags": frags,
        "pc": ctx.addr(program.section, program.entry.start),
        "regs": (_bv(0),) * 11,  # r0-r10 (here, not in angr's register file: a read there is a memory load)
    }.items():
        state.globals[k] = v
    initial = list(state.solver.constraints)
    state.register_plugin("solver", TimedSolver(clock=ctx.clock, ctx=ctx))
    state.solver.add(*initial)
    step = Step(ctx, state, program.entry, program.entry.insns[0])
    step.set_packet(state)
    for r in range(10):
        step.set(r, _bv(0))
    step.set(1, _bv(CTX_BASE))
    step.set(10, _bv(STACK_TOP))
    simgr = project.factory.simulation_manager(state)
    simgr.use_technique(LoopBound(ctx, options.loop_bound))
    scheduler = Scheduler(ctx, options, limits)
    scheduler.run(simgr, progress)
    for st in simgr.stashes.get("ended", []):
        st.solver.deadline = None  # the report's and the cross-check's calls are not the exploration's
    paths = [_path(i, st, ctx, program) for i, st in enumerate(simgr.stashes.get("ended", []))]
    programs = [program] + [p for p in obj.programs if p.name in ctx.programs_seen and p is not program]
    return AngrExploration(
        obj,
        program,
        options,
        paths,
        ctx.sites,
        ctx.written_maps,
        ctx.read_maps,
        ctx.insns,
        time.perf_counter() - start,
        ctx.programs_seen,
        packet,
        packet_len,
        ctxf,
        globals_,
        scheduler.budget(programs, paths),
        ctx.walk,
    )


def _path(i: int, st, ctx: Context, program: Program) -> AngrPath:
    g = st.globals
    end: End = g["ended"]
    tails = g["tail_calls"]
    programs = (program.name,) if not tails else tuple([program.name] + [t[3] for t in tails if t[3]])
    return AngrPath(
        i,
        end.verdict,
        end.retval,
        st,
        g["redirect"],
        tails,
        g["effects"],
        g["writes"],
        g["head"],
        g["end"],
        g["steps"][1],
        g["notes"],
        end.truncated,
        programs,
        g["sites"],
        g["entries"],
        end.exit_pc,
        end.exit_section,
        g["steps"][0],
    )
