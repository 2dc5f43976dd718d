"""Cross-check of the two symbolic engines: the z3 explorer (explore.py) and angr (angr_engine.py).

Each engine's paths are turned into concrete inputs (`Input`: a packet, the ingress ifindex,
the map entries the path looks up; global data as the object initialises it) and the other
engine must agree on them:

* every z3 path's witness (a model of its condition) must satisfy the constraints of an angr
  path with the same verdict, the same tail-call targets and the same output packet, and
* every angr path's model must satisfy the condition of a z3 path with the same outcome.

"Satisfy" leaves helper results (time, random numbers) free in the other engine: only the
inputs are fixed. Paths that end UNKNOWN or carry notes (values an engine approximates) are
not compared, and are listed with the reason. A disagreement is run through the kernel
(BPF_PROG_TEST_RUN, analyzer/kernel/) with the same packet and map entries, and the kernel's
answer says which engine is wrong.

Inputs are restricted to what the kernel's test run can take (see verify.py): 14..3520-byte
packets, an existing ingress device, queue 0, no fragments.

angr explores without state merging when the program fits in UNMERGED_STATES open states
(each unmerged path gives a model of its own: the z3 engine is tested on more inputs), else
with merging (angr_engine.py), which keeps OR-heavy programs to a few exact, larger paths.

Three modes (`CrossCheckReport.mode`; `cross_check(mode=...)`). "auto" explores with angr in
one piece; where the program reads the packet at an offset taken from the packet (a protocol
walk) that exploration gets WALK_PROBE_SHARE of the budget more, and if it does not finish,
"sharded" gets the rest; cut by its budget without a walk, "replay"; finished, "symbolic":

* "symbolic": angr explored the program completely. Both directions as above: z3's witnesses
  against angr's path constraints, angr's models against z3's conditions. It checks that the
  two path sets cover the same inputs with the same outcomes, on one input per path (a path
  of either engine that the other lacks shows on that path's own input).
* "replay": angr's exploration was cut by its budget (xdp-filter's IPv6 walks: minutes).
  Every z3 path's witness is executed by the angr engine concretely (`explore_angr` with
  `Concrete`: packet, ctx and map entries fixed, nothing forks but helper results, no
  solver on the way) and must end with the same outcome: every z3 path is checked by the
  second engine's semantics. angr's paths that finished within the budget are checked
  against z3 as in "symbolic" (`angr_compared` of `angr_paths`; the cut ones are listed as
  skipped). What it does not check: inputs that neither engine's paths were made from,
  i.e. a path z3 missed entirely shows only if angr finished the path that covers it;
  the report says the angr side is partial (`angr_complete` false).
* "sharded": angr explores the input space in shards (analyzer/shards.py: the ethertype,
  VLAN tags, IPv4 IHL and IPv6 extension-header bytes that move packet offsets fixed per
  shard, so packet reads are at concrete addresses; the shards proved with z3 to cover every
  packet once), each shard with merged states and a share of angr's time budget (up to
  CONCRETE_SHARE_FACTOR or OPEN_SHARE_FACTOR times what the shards before it left, split
  evenly over the rest: the first ones finish, the last ones are cut). Every angr path of a finished part of
  a shard is checked against z3 as in "symbolic" (its model lies in the shard, so the z3
  path it must satisfy is one whose condition meets the shard); every z3 witness is checked
  against the angr paths of the shard it falls in, and replayed concretely as in "replay"
  when it falls into a path the shard's budget cut. `CrossCheckReport.shards` says per
  shard what finished and what was cut, and where.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import z3
from z3 import z3core

from lifter.maps import MapDef, is_global_data_section
from lifter.program import BpfObject, Program

from . import kernel
from .exploration import UNKNOWN, VERDICTS, Exploration, Options, Path
from .explore import explore
from .symbolic import PACKET, PACKET_FRAGS, PACKET_LEN, ctx_field, map_found, map_val, symbols
from .verify import MAX_TEST_LEN, MIN_TEST_LEN, UNFILLABLE, existing_ifindexes, output_of

#: Packet lengths tried for a witness, shortest first (a short witness is quick to check).
LENGTH_STEPS = (64, 256, None)


@dataclass(frozen=True)
class Outcome:
    """What the program does with one input: return code, output packet, tail-call targets."""

    retval: int
    packet: bytes
    tail_calls: tuple

    def __str__(self) -> str:
        tails = f", tail calls {' -> '.join(t or '?' for t in self.tail_calls)}" if self.tail_calls else ""
        return (
            f"{VERDICTS.get(self.retval, 'INVALID')}({self.retval}) with {len(self.packet)}-byte packet "
            f"{self.packet[:64].hex()}{tails}"
        )


@dataclass
class Input:
    """A concrete input: the packet, the ingress ifindex, and the entries of looked-up maps
    (key -> value bytes, None when the entry is absent; unlisted keys are absent)."""

    packet: bytes
    ifindex: int
    entries: dict[str, dict[int, bytes | None]] = field(default_factory=dict)
    rx_queue: int = 0
    egress: int = 0
    frags: int = 0
    runnable: bool = True  # within what BPF_PROG_TEST_RUN can take

    def __str__(self) -> str:
        maps = "; ".join(
            f"{m}[{k}]={'absent' if v is None else v.hex()}"
            for m, es in sorted(self.entries.items())
            for k, v in sorted(es.items())
        )
        ctx = f"ifindex {self.ifindex}" + (
            f", rx queue {self.rx_queue}, egress {self.egress}, {self.frags} fragment bytes (not test-runnable)"
            if not self.runnable
            else ""
        )
        return f"packet {self.packet.hex()} ({ctx})" + (f", maps {maps}" if maps else "")


@dataclass
class Disagreement:
    """One input on which the engines differ. `found` is the engine whose path the input
    came from, `other` what the other engine allows for it (empty: no path at all)."""

    found: str  # "z3" | "angr"
    path: int
    input: Input
    expected: Outcome
    other: list[Outcome]
    kernel: Outcome | None = None
    kernel_error: str | None = None
    shard: str | None = None  # the angr shard the path is of (mode "sharded")

    @property
    def wrong(self) -> str:
        """Which engine the kernel contradicts ("unconfirmed" without a kernel answer)."""
        if self.kernel is None:
            return "unconfirmed"
        found_ok = self.kernel == self.expected
        other_ok = self.kernel in self.other
        if found_ok and not other_ok:
            return "angr" if self.found == "z3" else "z3"
        if other_ok and not found_ok:
            return self.found
        return "both" if not found_ok else "neither"

    def __str__(self) -> str:
        other = "angr" if self.found == "z3" else "z3"
        allowed = " or ".join(map(str, self.other)) if self.other else "no path for this input"
        kern = f"kernel: {self.kernel}" if self.kernel else f"kernel: not run ({self.kernel_error})"
        where = f" (shard {self.shard})" if self.shard else ""
        return (
            f"{self.found} path #{self.path}{where}: {self.input}\n      {self.found}: {self.expected}\n"
            f"      {other}: {allowed}\n      {kern} -> wrong: {self.wrong}"
        )


@dataclass
class ShardResult:
    """One shard of a "sharded" cross-check: its angr paths, how many finished (not cut by
    its budget) and were compared with z3, its CPU time, and what cut the rest, where."""

    name: str
    paths: int
    finished: int
    compared: int = 0
    seconds: float = 0.0
    cut: str | None = None  # the first cut path's reason (budget, instruction, source line)

    def __str__(self) -> str:
        text = f"shard {self.name}: {self.finished} of {self.paths} angr paths finished, {self.compared} compared"
        return text + f" ({self.seconds:.2f} s CPU)" + (f"; cut: {self.cut}" if self.cut else "")


@dataclass
class CrossCheckReport:
    program: str
    z3_paths: int = 0
    angr_paths: int = 0
    z3_compared: int = 0
    angr_compared: int = 0
    z3_seconds: float = 0.0
    angr_seconds: float = 0.0
    angr_merged: bool = False  # whether angr merged states (crosscheck.angr_exploration)
    mode: str = "symbolic"  # "symbolic" | "replay" | "sharded" (module docstring)
    angr_complete: bool = True  # angr's symbolic exploration finished within its budget
    angr_budget: str | None = None  # what cut it, in words, when it did not finish
    z3_replayed: int = 0  # z3 witnesses executed concretely by angr (mode "replay")
    replay_seconds: float = 0.0
    shards: list[ShardResult] = field(default_factory=list)  # mode "sharded", in shard order
    chosen: str | None = None  # why mode "auto" chose "sharded" (None: it did not, or was not asked)
    skipped: list[tuple[str, int, str]] = field(default_factory=list)  # (engine, path, why)
    disagreements: list[Disagreement] = field(default_factory=list)


def _bytes(value: int, size: int) -> bytes:
    return (value % (1 << (8 * size))).to_bytes(size, "little")


def _segment_links(st, a, cons: list, packet: bytes | None = None) -> list | None:
    """Ties the bytes of an angr path's packet segments (angr_engine.Segment: parts of the
    packet read at an offset taken from the packet) to the packet's own byte symbols, so a
    model of the path is one packet and a packet fixes the path's segment bytes: each
    segment's start is fixed to its value under `cons` (the packet's bytes decide it) and
    each byte it read is the packet byte there (`packet`: that packet's byte; else the
    packet's symbol; past the packet it stays free, as the packet's symbols there do).
    Appends to `cons`; None when no input satisfies them."""
    from angr import claripy
    from angr.errors import SimUnsatError

    segs = st.globals.get("segments", ())
    starts: list = []
    for seg in segs:
        start = seg.delta if seg.parent < 0 else starts[seg.parent] + seg.delta
        starts.append(start)
        try:
            v = st.solver.eval(start, extra_constraints=cons)
        except SimUnsatError:
            return None
        cons.append(start == v)
        for c in range(seg.lowest, seg.highest):
            sym = claripy.BVS(f"pkt.{seg.key}.{c}", 8, explicit_name=True)
            if packet is not None:
                if v + c < len(packet):
                    cons.append(sym == packet[v + c])
            elif v + c < len(a.packet):
                cons.append(a.packet[v + c] == sym)
    return cons


#: Widths (bits) of claripy's byte reversal (`bvreverse` in its SMT-LIB text) that `_z3_of_angr` defines.
REVERSE_WIDTHS = tuple(range(16, 136, 8))


def _z3_of_angr(constraints: list, terms: list) -> tuple[list, list]:
    """claripy `constraints` and `terms` as z3 (one translation through SMT-LIB text): the
    constraints as z3 assertions, each term as a z3 term over the same symbols (claripy
    names them in the text as z3 does: `pkt.3`, `pkt.len`)."""
    from angr import claripy

    solver = claripy.Solver()
    names = [claripy.BVS(f"xcheck.term.{i}", t.size(), explicit_name=True) for i, t in enumerate(terms)]
    solver.add(list(constraints) + [n == t for n, t in zip(names, terms)])
    text = solver.to_smt2()
    reverses = []
    if "bvreverse" in text:  # claripy's byte reversal, not an SMT-LIB function: declared, then defined
        text = "".join(f"(declare-fun bvreverse ((_ BitVec {w})) (_ BitVec {w}))\n" for w in REVERSE_WIDTHS) + text
        for w in REVERSE_WIDTHS:
            x = z3.Var(0, z3.BitVecSort(w))
            body = z3.Concat(*[z3.Extract(8 * i + 7, 8 * i, x) for i in range(w // 8)])
            reverses.append((z3.Function("bvreverse", z3.BitVecSort(w), z3.BitVecSort(w)), body))
    parsed = z3.parse_smt2_string(text)
    if reverses:
        parsed = [z3.substitute_funs(a, *reverses) for a in parsed]
    wanted = {f"xcheck.term.{i}": i for i in range(len(terms))}
    asserts, out = [], [None] * len(terms)
    for a in parsed:
        if z3.is_eq(a) and z3.is_const(a.arg(0)) and a.arg(0).decl().name() in wanted:
            out[wanted[a.arg(0).decl().name()]] = a.arg(1)
        else:
            asserts.append(a)
    if any(t is None for t in out):  # claripy rewrote a definition: it stays an assertion
        raise ValueError("a term's definition was rewritten")
    return asserts, out


def _entry_parts(entries) -> list:
    """The claripy terms a model gives of angr map entries: per entry its key, then whether it
    was there at the start (1 or 0, 8 bits) and its value at the start, where the path read them."""
    from angr import claripy

    parts = []
    for e in entries:
        parts.append(e.key)
        if e.init_found is not None:
            parts.append(claripy.If(e.init_found, claripy.BVV(1, 8), claripy.BVV(0, 8)))
        if e.init_val is not None:
            parts.append(e.init_val)
    return parts


def _is_array(mdef: MapDef) -> bool:
    return mdef.type is not None and mdef.type.keyed == "index" and mdef.type.holds == "data"


def _input_equations(inp: Input) -> list[z3.BoolRef]:
    """`inp`'s packet, length and ctx fields as z3 equations."""
    return [
        PACKET_LEN == len(inp.packet),
        PACKET_FRAGS == inp.frags,
        ctx_field("ingress_ifindex") == inp.ifindex,
        ctx_field("rx_queue_index") == inp.rx_queue,
        ctx_field("egress_ifindex") == inp.egress,
        *[z3.Select(PACKET, i) == b for i, b in enumerate(inp.packet)],
    ]


class Undecided(Exception):
    """A z3 term that does not evaluate to a constant on the input (`Z3Eval.number`)."""


#: `_numerals`' terms: per width, the numerals 0, 1, ... made so far (the wrappers hold
#: them), and under the negated width their ASTs.
_NUMERAL_TERMS: dict[int, list] = {}


def _numerals(bits: int, count: int) -> list:
    """The ASTs of the `bits`-wide numerals 0..count-1 in PACKET's context, made once for
    every input of the process (Z3Eval's packets: made per input they were ~60 % of its
    set-up)."""
    made = _NUMERAL_TERMS.setdefault(bits, [])
    if len(made) < count:
        made += [z3.BitVecVal(i, bits, PACKET.ctx) for i in range(len(made), count)]
        _NUMERAL_TERMS[-bits] = [t.as_ast() for t in made]
    return _NUMERAL_TERMS[-bits]


class Z3Eval:
    """z3 terms evaluated on one concrete input: the packet, its length, the ctx fields and
    the map contents substituted, the branch literals replaced by their conditions'
    values (each literal once, in definition order), then z3's simplifier. Packet bytes
    past the input's length stay the free `pkt` (a Store chain over it), like helper
    results: a term reading one does not become a constant, and its caller asks the solver.
    The definitions evaluated are the exact ones (explore.py's solver may see products
    abstracted): on a concrete input they are the program's arithmetic."""

    def __init__(self, inp: Input, funcs: list[tuple], definitions: dict):
        pkt = PACKET
        if inp.packet:
            # z3's C API directly (z3py's Store checks sorts and wraps each step: ~0.1 ms a
            # byte), the indices and byte values made once for all inputs (`_numerals`)
            ref, arr = PACKET.ctx.ref(), PACKET.as_ast()
            idx, val = _numerals(64, len(inp.packet)), _numerals(8, 256)
            for i, b in enumerate(inp.packet):  # each new term held (reference counted) while used
                store = z3core.Z3_mk_store(ref, arr, idx[i], val[b])
                z3core.Z3_inc_ref(ref, store)
                if i:
                    z3core.Z3_dec_ref(ref, arr)
                arr = store
            pkt = z3.ArrayRef(arr, PACKET.ctx)  # (takes a reference of its own)
            z3core.Z3_dec_ref(ref, arr)
        self.pairs = [
            (PACKET, pkt),
            (PACKET_LEN, z3.BitVecVal(len(inp.packet), 64)),
            (PACKET_FRAGS, z3.BitVecVal(inp.frags, 64)),
            (ctx_field("ingress_ifindex"), z3.BitVecVal(inp.ifindex, 32)),
            (ctx_field("rx_queue_index"), z3.BitVecVal(inp.rx_queue, 32)),
            (ctx_field("egress_ifindex"), z3.BitVecVal(inp.egress, 32)),
        ]
        self.funcs, self.definitions = funcs, definitions
        self.ctx = PACKET.ctx
        # z3's C API directly (z3py's substitute checks every pair's sorts: most of the time)
        n = len(funcs)
        self._funs_from, self._funs_to = (z3.FuncDecl * n)(), (z3.Ast * n)()
        for i, (f, t) in enumerate(funcs):
            self._funs_from[i], self._funs_to[i] = f.as_func_decl(), t.as_ast()
        self._from = [a.as_ast() for a, _ in self.pairs]
        self._to = [b.as_ast() for _, b in self.pairs]
        self.literals: dict[str, z3.ExprRef] = {}  # literal name -> its value
        self._memo: dict[int, tuple] = {}  # term id -> (term, value)
        self._symbols: dict = {}
        self.expanded: dict | None = None  # literal name -> (literal, expanded condition), when given

    def _literal_values(self, names) -> None:
        """Evaluate the literals `names` and, first, every literal their conditions refer to."""
        todo = [n for n in names if n not in self.literals]
        order, seen = [], set()
        while todo:  # the literals needed, then evaluated lowest number first (definition order)
            n = todo.pop()
            if n in seen or n in self.literals:
                continue
            seen.add(n)
            order.append(n)
            todo.extend(self.definitions[n][2])
        for n in sorted(order, key=lambda n: int(n[2:])):
            self.literals[n] = self._simplify(self.definitions[n][1], self.definitions[n][2])

    def _simplify(self, term: z3.ExprRef, refs) -> z3.ExprRef:
        """`term` with the input and the literals `refs` (evaluated) substituted, simplified."""
        froms = self._from + [self.definitions[r][0] for r in refs]
        tos = self._to + [self.literals[r].as_ast() for r in refs]
        n, ref = len(froms), self.ctx.ref()
        out = z3core.Z3_substitute(ref, term.as_ast(), n, (z3.Ast * n)(*froms), (z3.Ast * n)(*tos))
        out = z3.ExprRef(out, self.ctx)  # held (reference counted) until the next step
        if self.funcs:
            k = len(self.funcs)
            out = z3.ExprRef(z3core.Z3_substitute_funs(ref, out.as_ast(), k, self._funs_from, self._funs_to), self.ctx)
        return z3.simplify(out)  # z3's own wrapper gives the result its class (BoolRef, numeral...)

    def value(self, term: z3.ExprRef) -> z3.ExprRef:
        """`term` on the input (a constant, or what stays free)."""
        memo = self._memo.get(term.get_id())
        if memo is not None and memo[0].eq(term):
            return memo[1]
        names = sorted(n for n in symbols(term, self._symbols) if n.startswith("b!"))
        self._literal_values(names)
        out = self._simplify(term, names)
        self._memo[term.get_id()] = (term, out)
        return out

    def number(self, term: z3.ExprRef) -> int:
        """`term`'s value as an unsigned int; Undecided when it is not a constant."""
        out = None
        if self.expanded is not None:  # the literals it refers to as their expanded conditions: one simplify
            names = sorted(n for n in symbols(term, self._symbols) if n.startswith("b!"))
            pairs = [self.expanded[n] for n in names]
            out = self._simplify(z3.substitute(term, *pairs) if pairs else term, [])
            if not z3.is_bv_value(out):
                out = None
        if out is None:
            out = self.value(term)
        if not z3.is_bv_value(out):
            raise Undecided(str(term)[:80])
        return out.as_long()


class CrossCheck:
    """Both engines on one program of one object; `run` fills a CrossCheckReport."""

    def __init__(
        self,
        obj: BpfObject,
        program: Program,
        options: Options,
        z3e: Exploration,
        angre,
        test_run: bool = True,
        mode: str = "auto",
        shards: list | None = None,
        project=None,
    ):
        """`angre`: the angr exploration (with `shards`, list of ShardRun: the first
        shard's, for what all share: its inputs' names). `project`: an angr Project of the
        object (angr_engine.make_project) for the replays to reuse."""
        self.obj, self.program, self.options, self.test_run = obj, program, options, test_run
        self.z3e, self.angre, self.shards, self.project = z3e, angre, shards or [], project
        self.maps = {m.name: m for m in obj.maps}
        #: how angr paths' models are given a z3 path: "evaluate" each condition on the
        #: model (the solver only where that leaves a free term) or "solve" every one
        self.z3_eval = "evaluate"
        self.z3_evaluated = self.z3_solved = 0  # z3 paths decided each way
        #: how an angr path's model is read: "z3" (its constraints translated to z3 once, one
        #: model read for all values: `_angr_input_z3`) or "claripy" (`_angr_input_claripy`)
        self.angr_model = "z3"
        self._definitions: dict | None = None
        self._literal_bits: tuple | None = None  # `_z3_path_literal_bits`' memo
        self._functions: dict[str, list[tuple]] = {}  # `_z3_functions`' memo
        self._solver_for: tuple | None = None
        self.ifindexes = existing_ifindexes()
        self.max_len = min(options.max_len, MAX_TEST_LEN)
        runs = [s.exploration for s in self.shards] or [angre]
        self.report = CrossCheckReport(
            program.name,
            len(z3e.paths),
            sum(len(a.paths) for a in runs),
            z3_seconds=z3e.seconds,
            angr_seconds=sum(a.seconds for a in runs),
            angr_merged=angre.options.merge,
        )
        cuts = [_cut_by_budget(a) for a in runs]
        cut = any(cuts)
        self.report.angr_complete = not cut
        if self.shards:
            if cut:
                self.report.angr_budget = f"{sum(cuts)} of {len(cuts)} shards cut by their share of the time budget"
            for s in self.shards:
                self.report.shards.append(s.result())
            self.report.mode = "sharded"
            return
        if cut:
            budget = angre.budget
            self.report.angr_budget = budget.limit or (
                f"time budget ({budget.timeout:g} s)" if budget.timeout else "time budget"
            )
        self.report.mode = mode if mode != "auto" else ("replay" if cut else "symbolic")

    def run(self, compare_seconds: float | None = None) -> CrossCheckReport:
        """Both directions. `compare_seconds`: CPU seconds the angr -> z3 direction may take;
        the angr paths not reached by then are listed as skipped, saying so (None: all)."""
        for path in self.z3e.paths:
            self._check_z3_path(path)
        end = None if compare_seconds is None else time.process_time() + compare_seconds

        def check(path, a=None, shard=None) -> None:
            if end is not None and time.process_time() >= end:
                self._skip(
                    "angr", path, f"not compared: the comparison's budget of {compare_seconds:g} CPU s ran out", shard
                )
            else:
                self._check_angr_path(path, a, shard)

        if not self.shards:
            for path in self.angre.paths:
                check(path)
        for run, result in zip(self.shards, self.report.shards):
            before = self.report.angr_compared
            for path in run.exploration.paths:
                check(path, run.exploration, run.shard.name)
            result.compared = self.report.angr_compared - before
        return self.report

    def _skip(self, engine: str, path, why: str, shard: str | None = None) -> None:
        self.report.skipped.append((engine, path.id, f"shard {shard}: {why}" if shard else why))

    def _comparable(self, engine: str, path, shard: str | None = None) -> bool:
        if path.verdict == UNKNOWN:
            self._skip(engine, path, path.truncated or "outcome unknown", shard)
            return False
        if path.notes:
            self._skip(engine, path, "approximated: " + "; ".join(path.notes), shard)
            return False
        if engine == "z3" and self.z3e.summarised(path):
            self._skip(engine, path, "decides on summarised values: " + ", ".join(self.z3e.summarised(path)))
            return False
        maps = {a.map for a in path.accesses} if engine == "z3" else {e.map for e in path.entries}
        for name in maps:
            mdef = self.maps[name]
            if mdef.type is not None and mdef.type.name in UNFILLABLE:
                self._skip(engine, path, f"needs {UNFILLABLE[mdef.type.name]} in {name}", shard)
                return False
        return True

    def _attempts(self):
        """(runnable, packet length limit) to try in turn: inputs the kernel can run first,
        short packets first; then any input the program's environment allows."""
        if self.test_run:
            yield from ((True, limit) for limit in LENGTH_STEPS)
        yield from ((False, limit) for limit in LENGTH_STEPS)

    # --- z3 paths, checked by angr ----------------------------------------------------

    def _z3_env(self, runnable: bool) -> list[z3.BoolRef]:
        """What every input satisfies: global data as initialised, and with `runnable` what the
        kernel's test run can take (else the engines are still compared, without a kernel)."""
        ifindex = ctx_field("ingress_ifindex")
        env = (
            [
                z3.UGE(PACKET_LEN, MIN_TEST_LEN),
                z3.ULE(PACKET_LEN, self.max_len),
                PACKET_FRAGS == 0,
                z3.Or(*[ifindex == i for i in self.ifindexes]),
                ctx_field("rx_queue_index") == 0,
                ctx_field("egress_ifindex") == 0,
            ]
            if runnable
            else []
        )
        for mdef in self.obj.maps:
            if is_global_data_section(mdef.section) and mdef.value_size:
                bits = 8 * (mdef.key_size or 4)
                data = mdef.initial or bytes(mdef.value_size)
                env += [
                    map_val(mdef.name, bits)(z3.BitVecVal(0, bits), z3.BitVecVal(i, 32)) == b
                    for i, b in enumerate(data)
                ]
        return env

    def _check_z3_path(self, path: Path) -> None:
        if not self._comparable("z3", path):
            return
        solver = z3.Solver()
        solver.add(*self.z3e.base_constraints(), *path.literals)
        model = None
        for runnable, limit in self._attempts():
            solver.push()
            solver.add(*self._z3_env(runnable))
            if limit is not None:
                solver.add(z3.ULE(PACKET_LEN, limit))
            if solver.check() == z3.sat:
                model = solver.model()
                solver.pop()
                break
            solver.pop()
        if model is None:
            self._skip("z3", path, "no input satisfies it")
            return
        ev = lambda x: model.eval(x, model_completion=True)  # noqa: E731
        n = ev(PACKET_LEN).as_long()
        packet = bytes(ev(z3.Select(PACKET, i)).as_long() for i in range(n))
        entries: dict[str, dict[int, bytes | None]] = {}
        for access in path.accesses:
            mdef = self.maps[access.map]
            if is_global_data_section(mdef.section) or mdef.type is None or mdef.type.holds == "program":
                continue
            key = ev(access.key).as_long()
            bits = 8 * mdef.key_size
            found = (
                key < (mdef.max_entries or 0)
                if _is_array(mdef)
                else z3.is_true(ev(map_found(mdef.name, bits)(access.key)))
            )
            value = (
                bytes(
                    ev(map_val(mdef.name, bits)(access.key, z3.BitVecVal(i, 32))).as_long()
                    for i in range(mdef.value_size or 0)
                )
                if found
                else None
            )
            entries.setdefault(mdef.name, {})[key] = value
        inp = Input(
            packet,
            ev(ctx_field("ingress_ifindex")).as_long(),
            entries,
            ev(ctx_field("rx_queue_index")).as_long(),
            ev(ctx_field("egress_ifindex")).as_long(),
            ev(PACKET_FRAGS).as_long(),
            runnable,
        )
        retval, out = output_of(path, lambda x: ev(x).as_long(), packet)
        expected = Outcome(retval, out, tuple(t.target for t in path.tail_calls))
        self.report.z3_compared += 1
        if self.report.mode == "replay":
            allowed, cut = self._replay(inp, expected)
        elif self.shards:
            allowed, cut = self._sharded(inp, expected)
        else:
            allowed, cut = self._angr_outcomes(inp, expected)
        if cut:
            self._skip("z3", path, "angr cut the path this witness takes: " + cut)
            self.report.z3_compared -= 1
        elif expected not in allowed:
            self.report.disagreements.append(Disagreement("z3", path.id, inp, expected, allowed))

    def _sharded(self, inp: Input, expected: Outcome) -> tuple[list[Outcome], str | None]:
        """Mode "sharded": what the angr paths of the shard `inp` falls in allow; a concrete
        replay when it falls into a path that shard's budget cut."""
        from .shards import shard_of

        shard = shard_of([s.shard for s in self.shards], inp.packet)
        run = next((s for s in self.shards if s.shard is shard), None)
        if run is None:
            return self._replay(inp, expected)
        allowed, cut = self._angr_outcomes(inp, expected, run.exploration)
        return self._replay(inp, expected) if cut else (allowed, cut)

    def _replay(self, inp: Input, expected: Outcome) -> tuple[list[Outcome], str | None]:
        """What the angr engine does with `inp` run concretely (modes "replay", "sharded")."""
        from .angr_engine import Concrete, Limits, explore_angr, make_project

        start = time.process_time()
        conc = Concrete(inp.packet, inp.ifindex, inp.rx_queue, inp.egress, inp.frags, inp.entries)
        opts = replace(self.options, timeout=None, merge=False, max_len=max(self.options.max_len, len(inp.packet)))
        if self.project is None:  # one Project per program: the replays only need a new Context
            self.project, _ = make_project(self.obj, opts)
        run = explore_angr(
            self.obj, self.program, opts, limits=Limits(max_seconds=REPLAY_SECONDS), concrete=conc, project=self.project
        )
        self.report.z3_replayed += 1
        try:
            return self._angr_outcomes(inp, expected, run)
        finally:
            self.report.replay_seconds += time.process_time() - start

    def _angr_bindings(self, st, inp: Input, a=None) -> list | None:
        """Constraints fixing the angr inputs to `inp` (helper results stay free); None when
        the packet and ctx alone, or with the map entries of `inp`, contradict the path.
        `a`: the angr exploration the path is of (default: the cross-check's)."""
        from angr import claripy
        from angr.errors import SimUnsatError

        a = a or self.angre
        n = len(inp.packet)
        cons = [
            a.packet_len == n,
            st.globals["frags"] == inp.frags,
            a.ctx["ingress_ifindex"] == inp.ifindex,
            a.ctx["rx_queue_index"] == inp.rx_queue,
            a.ctx["egress_ifindex"] == inp.egress,
        ]
        cons += [sym == b for sym, b in zip(a.packet, inp.packet)]
        for name, sym in a.globals_.items():
            mdef = self.maps[name]
            cons.append(sym == int.from_bytes(mdef.initial or bytes(mdef.value_size), "big"))
        if _segment_links(st, a, cons, inp.packet) is None:
            return None
        if st.globals["entries"] and not st.solver.satisfiable(extra_constraints=cons):
            return None
        for e in st.globals["entries"]:
            mdef = self.maps[e.map]
            if e.key.symbolic:
                try:
                    keys = st.solver.eval_upto(e.key, 2, extra_constraints=cons)
                except SimUnsatError:  # an earlier entry's presence in the input rules this path out
                    return None
                if len(keys) != 1:
                    continue  # the key depends on helper results: the entry stays free
                key = keys[0]
            else:
                key = e.key.concrete_value
            value = inp.entries.get(e.map, {}).get(key)
            if e.init_found is not None:
                cons.append(e.init_found if value is not None else claripy.Not(e.init_found))
            if e.init_val is not None:
                cons.append(e.init_val == int.from_bytes(value or bytes(mdef.value_size), "big"))
        return cons

    @staticmethod
    def _output_bytes(path, n: int):
        """The first `n` bytes of an angr path's output packet, as one big-endian expression."""
        from angr import claripy

        from .angr_engine import PKT_BASE

        start = PKT_BASE + path.head  # 64-bit: a head moved before data wraps as the engine's does
        if not start.symbolic:  # one load (first byte first): byte by byte, each slices the packet
            return path.state.memory.load(start.concrete_value, n)
        return claripy.Concat(*[path.state.memory.load(PKT_BASE + path.head + i, 1) for i in range(n)])

    def _angr_outcomes(self, inp: Input, expected: Outcome, a=None) -> tuple[list[Outcome], str | None]:
        """What angr allows for `inp`: [expected] if some path allows it, else the outcome of
        every path the input satisfies. Also the reason when the input falls into a path
        angr cut. Paths with the expected verdict are tried first: one solver call each.
        `a`: the angr exploration to ask (default: the cross-check's; a concrete replay's)."""
        a = a or self.angre
        verdict = VERDICTS.get(expected.retval, "INVALID")
        order = sorted(a.paths, key=lambda p: p.verdict != verdict)
        bindings = {}
        for path in order:
            if path.verdict != verdict:
                break
            if tuple(t[3] for t in path.tail_calls) != expected.tail_calls or path.notes:
                continue
            st = path.state
            cons = bindings[path.id] = self._angr_bindings(st, inp, a)
            if cons is None:
                continue
            n = len(expected.packet)
            want = cons + [path.retval[31:0] == expected.retval, path.end - path.head == n]
            if n:
                want.append(self._output_bytes(path, n) == int.from_bytes(expected.packet, "big"))
            if st.solver.satisfiable(extra_constraints=want):
                return [expected], None
        allowed = []
        for path in order:
            st = path.state
            if st is None:  # a cut path let go (`sharded_exploration`): the input may fall in it
                return [], path.truncated or "cut"
            cons = bindings[path.id] if path.id in bindings else self._angr_bindings(st, inp, a)
            if cons is None or not st.solver.satisfiable(extra_constraints=cons):
                continue
            if path.verdict == UNKNOWN or path.notes:
                return [], path.truncated or "; ".join(path.notes)
            allowed.append(self._angr_outcome(path, cons, tuple(t[3] for t in path.tail_calls)))
        return allowed, None

    def _angr_outcome(self, path, extra: list, tails: tuple, known: tuple[int, int] | None = None) -> Outcome:
        """The outcome of an angr path in one model of `extra` (which it extends). `known`:
        its return value and output length in that model, evaluated with its inputs (one
        solver call fewer each)."""
        st = path.state
        if known is None:
            retval = st.solver.eval(path.retval[31:0], extra_constraints=extra)
            extra.append(path.retval[31:0] == retval)
            n = st.solver.eval(path.end - path.head, extra_constraints=extra)
        else:
            retval, n = known
            extra.append(path.retval[31:0] == retval)
        n = n if n < 1 << 16 else 0
        extra.append(path.end - path.head == n)
        data = st.solver.eval(self._output_bytes(path, n), extra_constraints=extra).to_bytes(n, "big") if n else b""
        return Outcome(retval, data, tails)

    # --- angr paths, checked by z3 ----------------------------------------------------

    def _check_angr_path(self, path, a=None, shard: str | None = None) -> None:
        """`a`: the exploration `path` is of (default: the cross-check's), `shard` its name."""
        if not self._comparable("angr", path, shard):
            return
        a = a or self.angre
        read = self._angr_input_z3 if self.angr_model == "z3" else self._angr_input_claripy
        got = read(path, a, shard)
        if got is None:
            return
        inp, expected = got
        self.report.angr_compared += 1
        allowed, cut = self._z3_outcomes(inp, expected)
        if cut:
            self._skip("angr", path, "z3 cut the path this model takes: " + cut, shard)
            self.report.angr_compared -= 1
        elif expected not in allowed:
            self.report.disagreements.append(Disagreement("angr", path.id, inp, expected, allowed, shard=shard))

    def _angr_input_limits(self, st, a) -> tuple[list, list]:
        """claripy constraints on angr state `st`'s inputs (exploration `a`): what a runnable
        input needs (length, this machine's ifindexes, queue 0, no egress, no fragments) and
        the globals as initialised."""
        from angr import claripy

        strict = [
            claripy.UGE(a.packet_len, MIN_TEST_LEN),
            claripy.ULE(a.packet_len, self.max_len),
            claripy.Or(*[a.ctx["ingress_ifindex"] == i for i in self.ifindexes]),
            a.ctx["rx_queue_index"] == 0,
            a.ctx["egress_ifindex"] == 0,
            st.globals["frags"] == 0,
        ]
        env = []
        for name, sym in a.globals_.items():
            mdef = self.maps[name]
            env.append(sym == int.from_bytes(mdef.initial or bytes(mdef.value_size), "big"))
        return strict, env

    def _angr_input_claripy(self, path, a, shard: str | None):
        """One model of angr path `path` (of exploration `a`) as an Input and the path's
        Outcome on it, by claripy's solver (a call per group of values); None when no input
        satisfies the path (listed as skipped)."""
        from angr import claripy

        st = path.state
        strict, env = self._angr_input_limits(st, a)
        for runnable, limit in self._attempts():
            extra = (
                env + (strict if runnable else []) + ([claripy.ULE(a.packet_len, limit)] if limit is not None else [])
            )
            if st.solver.satisfiable(extra_constraints=extra):
                break
        else:
            self._skip("angr", path, "no input satisfies it", shard)
            return
        # One model for all inputs: packet, length, ifindex, and the entries' keys and contents.
        entries = [e for e in path.entries if self.maps[e.map].type is None or self.maps[e.map].type.holds != "program"]
        if _segment_links(st, a, extra) is None:
            self._skip("angr", path, "no packet places its segments' bytes (angr_engine.Segment)", shard)
            return
        n = st.solver.eval(a.packet_len, extra_constraints=extra)
        extra.append(a.packet_len == n)
        parts = [
            a.ctx["ingress_ifindex"],
            a.ctx["rx_queue_index"],
            a.ctx["egress_ifindex"],
            st.globals["frags"],
        ] + a.packet[:n]
        parts += _entry_parts(entries)
        # the path's return value and output length in the same model (solver calls are most
        # of a comparison's time: ~10-20 ms each)
        outputs = [path.retval[31:0], path.end - path.head]
        whole = claripy.Concat(*parts, *outputs)
        value = st.solver.eval(whole, extra_constraints=extra)
        values, shift = [], whole.size()
        for part in parts + outputs:
            shift -= part.size()
            values.append((value >> shift) & ((1 << part.size()) - 1))
        known = values[-2], values[-1]
        values = values[: len(parts)]
        extra += [part == v for part, v in zip(parts, values)]
        ifindex, rx_queue, egress, frags = values[:4]
        packet = bytes(values[4 : 4 + n])
        rest = iter(values[4 + n :])
        found_entries: dict[str, dict[int, bytes | None]] = {}
        for e in entries:
            mdef = self.maps[e.map]
            key = next(rest)
            found = next(rest) == 1 if e.init_found is not None else key < (mdef.max_entries or 0)
            val = next(rest).to_bytes(mdef.value_size, "big") if e.init_val is not None else b""
            found_entries.setdefault(e.map, {})[key] = val if found else None
        expected = self._angr_outcome(path, extra, tuple(t[3] for t in path.tail_calls), known)
        inp = Input(packet, ifindex, found_entries, rx_queue, egress, frags, runnable)
        return inp, expected

    def _angr_input_z3(self, path, a, shard: str | None):
        """`_angr_input_claripy` with z3 directly: the path's constraints and the terms
        read (inputs, segment starts, return value, output length) translated to z3 once
        (`_z3_of_angr`), the input restrictions as assumptions tried in turn (`_attempts`),
        one check per segment (its start fixed and its bytes tied to the packet's, as
        `_segment_links`), then every value read from the one model; the output bytes are
        the packet's where they are its term (`_output_is_input`), else translated and read
        from the model too. Falls back to `_angr_input_claripy` when a translation fails."""
        from angr import claripy

        st = path.state
        strict, env = self._angr_input_limits(st, a)
        segs = st.globals.get("segments", ())
        starts: list = []
        for seg in segs:
            starts.append(seg.delta if seg.parent < 0 else starts[seg.parent] + seg.delta)
        entries = [e for e in path.entries if self.maps[e.map].type is None or self.maps[e.map].type.holds != "program"]
        bit = lambda c: claripy.If(c, claripy.BVV(1, 1), claripy.BVV(0, 1))  # noqa: E731
        limits = [limit for limit in LENGTH_STEPS if limit is not None]
        flags = [bit(claripy.And(*strict))] + [bit(claripy.ULE(a.packet_len, limit)) for limit in limits]
        parts = [a.packet_len, a.ctx["ingress_ifindex"], a.ctx["rx_queue_index"], a.ctx["egress_ifindex"]]
        parts.append(st.globals["frags"])
        parts += _entry_parts(entries)
        outputs = [path.retval[31:0], path.end - path.head]
        try:
            asserts, terms = _z3_of_angr(list(st.solver.constraints) + env, flags + parts + starts + outputs)
        except (ValueError, z3.Z3Exception):  # a definition rewritten, or text z3 does not parse
            return self._angr_input_claripy(path, a, shard)
        zflags, terms = terms[: len(flags)], terms[len(flags) :]
        zparts, terms = terms[: len(parts)], terms[len(parts) :]
        zstarts, zoutputs = terms[: len(starts)], terms[len(starts) :]
        solver = z3.Solver()
        solver.add(*asserts)
        one = z3.BitVecVal(1, 1)
        for runnable, limit in self._attempts():
            assume = ([zflags[0] == one] if runnable else []) + (
                [zflags[1 + limits.index(limit)] == one] if limit is not None else []
            )
            if solver.check(*assume) == z3.sat:
                break
        else:
            self._skip("angr", path, "no input satisfies it", shard)
            return None
        model = solver.model()
        solver.add(*assume)  # (after reading the model: adding drops it)
        for seg, start in zip(segs, zstarts):  # as _segment_links: in order, each start fixed in turn
            solver.add(*self._segment_link(a, seg, start, model))
            if solver.check() != z3.sat:
                self._skip("angr", path, "no packet places its segments' bytes (angr_engine.Segment)", shard)
                return None
            model = solver.model()

        def ev(t) -> int:
            return model.eval(t, model_completion=True).as_long()

        n, ifindex, rx_queue, egress, frags = (ev(t) for t in zparts[:5])
        # the packet's symbols read from the model at once (one not in it is free: 0, as model completion)
        assigned = {d.name(): model[d] for d in model.decls() if d.arity() == 0 and d.name().startswith("pkt.")}
        packet = bytes(self._packet_byte_value(a, i, assigned) for i in range(n))
        rest = iter(zparts[5:])
        found_entries: dict[str, dict[int, bytes | None]] = {}
        for e in entries:
            mdef = self.maps[e.map]
            key = ev(next(rest))
            found = ev(next(rest)) == 1 if e.init_found is not None else key < (mdef.max_entries or 0)
            val = ev(next(rest)).to_bytes(mdef.value_size, "big") if e.init_val is not None else b""
            found_entries.setdefault(e.map, {})[key] = val if found else None
        retval, size = ev(zoutputs[0]), ev(zoutputs[1])
        size = size if size < 1 << 16 else 0
        data = b""
        if size and size <= n and self._output_is_input(path, a, size):  # the input's bytes: no translation
            data = packet[:size]
        elif size:
            try:
                _, (out,) = _z3_of_angr([], [self._output_bytes(path, size)])
            except (ValueError, z3.Z3Exception):
                return self._angr_input_claripy(path, a, shard)
            data = ev(out).to_bytes(size, "big")
        expected = Outcome(retval, data, tuple(t[3] for t in path.tail_calls))
        return Input(packet, ifindex, found_entries, rx_queue, egress, frags, runnable), expected

    def _output_is_input(self, path, a, size: int) -> bool:
        """Whether angr path `path`'s first `size` output bytes are, as a term, the input
        packet's first `size` bytes (exploration `a`): the same claripy AST (equal hashes:
        claripy hashes an AST by its structure), so in any model their value is the packet's
        there (a path that wrote, moved or grew the packet has another term)."""
        from angr import claripy

        want = a.packet[0] if size == 1 else claripy.Concat(*a.packet[:size])
        return self._output_bytes(path, size).hash() == want.hash()

    def _segment_link(self, a, seg, start, model) -> list:
        """z3 constraints fixing segment `seg`'s start (z3 term `start`) where `model` puts it
        and tying the bytes it read to the packet's there (as `_segment_links`)."""
        v = model.eval(start, model_completion=True).as_long()
        links = [start == v]
        for c in range(seg.lowest, seg.highest):
            if v + c < len(a.packet):
                links.append(z3.BitVec(f"pkt.{seg.key}.{c}", 8) == self._z3_packet_byte(a, v + c))
        return links

    @staticmethod
    def _packet_byte_value(a, i: int, assigned: dict) -> int:
        """angr's packet byte `i` (exploration `a`) in a model whose constants named pkt.*
        are `assigned` (name -> value; unlisted: free, 0)."""
        sym = a.packet[i]
        if not sym.symbolic:
            return sym.concrete_value
        (name,) = sym.variables
        value = assigned.get(name)
        return 0 if value is None else value.as_long()

    @staticmethod
    def _z3_packet_byte(a, i: int):
        """angr's packet byte `i` (exploration `a`) as z3: its symbol, or its value."""
        sym = a.packet[i]
        if not sym.symbolic:
            return z3.BitVecVal(sym.concrete_value, 8)
        (name,) = sym.variables
        return z3.BitVec(name, 8)

    def _z3_functions(self, inp: Input) -> list[tuple]:
        """Map contents of `inp` as z3 functions (absent unless listed; globals as initialised;
        the last few kept: models of one shard often share their entries)."""
        key = repr(sorted((m, sorted(es.items())) for m, es in inp.entries.items()))
        if key in self._functions:
            return self._functions[key]
        pairs = self._functions[key] = self._z3_functions_of(inp)
        if len(self._functions) > 64:
            self._functions.pop(next(iter(self._functions)))
        return pairs

    def _z3_functions_of(self, inp: Input) -> list[tuple]:
        pairs = []
        for mdef in self.obj.maps:
            if (
                mdef.type is not None
                and mdef.type.holds == "program"
                or not mdef.key_size
                and not is_global_data_section(mdef.section)
            ):
                continue
            bits = 8 * (mdef.key_size or 4)
            key, off = z3.Var(0, z3.BitVecSort(bits)), z3.Var(1, z3.BitVecSort(32))
            if is_global_data_section(mdef.section):
                rows = {0: mdef.initial or bytes(mdef.value_size or 0)}
            else:
                rows = inp.entries.get(mdef.name, {})
            found = z3.Or(z3.BoolVal(False), *[key == k for k, v in rows.items() if v is not None])
            val = z3.BitVecVal(0, 8)
            for k, v in rows.items():
                for i, b in enumerate(v or b""):
                    val = z3.If(z3.And(key == k, off == i), z3.BitVecVal(b, 8), val)
            pairs += [(map_found(mdef.name, bits), found), (map_val(mdef.name, bits), val)]
        return pairs

    def _z3_outcomes(self, inp: Input, expected: Outcome) -> tuple[list[Outcome], str | None]:
        """What z3 allows for `inp`: [expected] if some path allows it, else the outcome of
        every path the input satisfies; the reason when it falls into a path z3 cut. Each
        path's condition is evaluated on the input (`Z3Eval`); a path whose condition or
        outcome does not evaluate to a constant (a helper's result) asks the solver
        (`_z3_outcomes_solved`, which `solve` makes the only way)."""
        if self.z3_eval == "solve":
            return self._z3_outcomes_solved(inp, expected)
        ev = Z3Eval(inp, self._z3_functions(inp), self._z3_definitions())
        env = [ev.value(c) for c in self.z3e.environment()]
        if any(z3.is_false(v) for v in env):
            return [], None
        if not all(z3.is_true(v) for v in env):
            return self._z3_outcomes_solved(inp, expected)
        allowed = []
        verdict = VERDICTS.get(expected.retval, "INVALID")
        decided = self._z3_literals_at_once(ev)
        ev.expanded = self._expanded
        for path in sorted(self.z3e.paths, key=lambda p: p.verdict != verdict):
            values = []
            for lit in path.literals:  # up to the first false one: the input is not on this path
                values.append(ev.value(lit) if decided is None else decided[lit.get_id()])
                if z3.is_false(values[-1]):
                    break
            if values and z3.is_false(values[-1]):
                continue
            if not all(z3.is_true(v) for v in values):
                got = self._z3_path_solved(inp, expected, path)
                self.z3_solved += 1
            else:
                self.z3_evaluated += 1
                got = None
                if path.verdict == UNKNOWN or path.notes:
                    return [], path.truncated or "; ".join(path.notes)
                try:
                    retval, out = output_of(path, ev.number, inp.packet)
                    got = Outcome(retval, out, tuple(t.target for t in path.tail_calls))
                except Undecided:  # the output reads a helper's result or new bytes
                    got = self._z3_path_solved(inp, expected, path)
                    self.z3_solved += 1
            if got is None:
                continue
            if isinstance(got, str):
                return [], got
            if got == expected:
                return [expected], None
            allowed.append(got)
        return allowed, None

    def _z3_literals_at_once(self, ev: Z3Eval) -> dict | None:
        """Every z3 path literal's value on `ev`'s input (literal id -> BoolVal) by one
        substitution and simplification of one term (`_z3_path_literal_bits`); None when
        some of them stay open (then `ev` evaluates literal by literal)."""
        terms, bits = self._z3_path_literal_bits()
        value = ev._simplify(bits, [])
        if not z3.is_bv_value(value):
            return None
        n, v = len(terms), value.as_long()
        return {t.get_id(): z3.BoolVal(bool(v >> (n - 1 - i) & 1)) for i, t in enumerate(terms)}

    def _z3_path_literal_bits(self) -> tuple[list, z3.ExprRef]:
        """The z3 paths' distinct literals and one term of the inputs: their values as bits
        (first literal highest), each literal's condition expanded (the literals it refers
        to replaced by their own expanded conditions), once."""
        if self._literal_bits is None:
            expanded: dict[str, tuple] = {}
            defs = self._z3_definitions()
            for lit, cond in sorted(self.z3e.definitions, key=lambda lc: int(lc[0].decl().name()[2:])):
                refs = defs[lit.decl().name()][2]
                if refs:
                    cond = z3.substitute(cond, *[expanded[r] for r in refs])
                expanded[lit.decl().name()] = (lit, cond)
            self._expanded = expanded
            terms = list({lit.get_id(): lit for p in self.z3e.paths for lit in p.literals}.values())
            cache: dict = {}
            one, zero = z3.BitVecVal(1, 1), z3.BitVecVal(0, 1)
            bits = []
            for t in terms:
                refs = sorted(n for n in symbols(t, cache) if n.startswith("b!"))
                bits.append(z3.If(z3.substitute(t, *[expanded[r] for r in refs]) if refs else t, one, zero))
            self._literal_bits = (terms, z3.Concat(*bits) if len(bits) > 1 else bits[0] if bits else one)
        return self._literal_bits

    def _z3_definitions(self) -> dict:
        """Branch literal name -> (the literal's AST, its condition, names of the literals the
        condition refers to), once (the literals kept alive in `_literal_terms`)."""
        if self._definitions is None:
            cache: dict = {}
            self._literal_terms = [lit for lit, _ in self.z3e.definitions]
            self._definitions = {
                lit.decl().name(): (lit.as_ast(), cond, sorted(n for n in symbols(cond, cache) if n.startswith("b!")))
                for lit, cond in self.z3e.definitions
            }
        return self._definitions

    def _z3_path_solved(self, inp: Input, expected: Outcome, path: Path) -> Outcome | str | None:
        """One z3 path on `inp` by the solver: None when the input does not satisfy it, the
        reason when the path is cut, `expected` when it allows that, else its outcome."""
        solver, concrete = self._z3_input_solver(inp)
        solver.push()
        try:
            solver.add(*[concrete(lit) for lit in path.literals])
            if solver.check() != z3.sat:
                return None
            if path.verdict == UNKNOWN or path.notes:
                return path.truncated or "; ".join(path.notes)
            tails = tuple(t.target for t in path.tail_calls)
            if tails == expected.tail_calls and path.retval is not None:
                solver.push()
                solver.add(*self._z3_output_is(path, expected, concrete))
                ok = solver.check() == z3.sat
                solver.pop()
                if ok:
                    return expected
            solver.check()
            model = solver.model()
            ev = lambda x: model.eval(concrete(x), model_completion=True).as_long()  # noqa: E731
            retval, out = output_of(path, ev, inp.packet)
            return Outcome(retval, out, tails)
        finally:
            solver.pop()

    def _z3_input_solver(self, inp: Input):
        """A solver with z3's base constraints and `inp` fixed (one per input), and the
        substitution of its map contents."""
        if self._solver_for is not None and self._solver_for[0] is inp:
            return self._solver_for[1:]
        funcs = self._z3_functions(inp)

        def concrete(x):
            return z3.substitute_funs(x, *funcs) if funcs else x

        solver = z3.Solver()
        solver.add(*[concrete(c) for c in self.z3e.base_constraints()])
        solver.add(*_input_equations(inp))
        self._solver_for = (inp, solver, concrete)
        return solver, concrete

    def _z3_outcomes_solved(self, inp: Input, expected: Outcome) -> tuple[list[Outcome], str | None]:
        """`_z3_outcomes` by the solver alone: each path's condition checked with the input
        (`_z3_path_solved`), the paths with the expected verdict first: an agreeing input
        stops at its path."""
        allowed = []
        verdict = VERDICTS.get(expected.retval, "INVALID")
        for path in sorted(self.z3e.paths, key=lambda p: p.verdict != verdict):
            got = self._z3_path_solved(inp, expected, path)
            if got is None:
                continue
            if isinstance(got, str):  # the path was cut: no outcome to compare
                return [], got
            if got is expected:
                return [expected], None
            allowed.append(got)
        return allowed, None

    @staticmethod
    def _z3_output_is(path: Path, expected: Outcome, concrete) -> list[z3.BoolRef]:
        n = len(expected.packet)
        out = [z3.Extract(31, 0, path.retval) == expected.retval, path.end - path.head == n]
        out += [z3.Select(path.pkt, path.head + i) == b for i, b in enumerate(expected.packet)]
        return [concrete(c) for c in out]

    # --- the kernel's answer --------------------------------------------------------

    def confirm(self, loaded: kernel.LoadedObject) -> None:
        """Run every disagreement's input through the kernel and record its answer."""
        for d in self.report.disagreements:
            if not d.input.runnable:
                d.kernel_error = "input outside what BPF_PROG_TEST_RUN can take"
                continue
            try:
                self._set_maps(loaded, d.input)
                result = loaded.run(self.program.name, d.input.packet, ctx=kernel.XdpCtx(d.input.ifindex, 0))
            except kernel.KernelRunError as err:
                d.kernel_error = str(err).splitlines()[0]
                continue
            d.kernel = Outcome(result.retval, result.packet_out, d.expected.tail_calls)

    def _set_maps(self, loaded: kernel.LoadedObject, inp: Input) -> None:
        for mdef in self.obj.maps:
            if mdef.type is None or is_global_data_section(mdef.section) or mdef.type.holds == "program":
                continue
            angr_read = set().union(self.angre.read_maps, *[s.exploration.read_maps for s in self.shards])
            if mdef.name not in self.z3e.read_maps | self.z3e.written_maps | angr_read:
                continue
            rows = inp.entries.get(mdef.name, {})
            if mdef.type.keyed in ("hash", "lpm"):
                loaded.map_clear(mdef.name)
            for key, value in rows.items():
                kb = _bytes(key, mdef.key_size)
                if value is None:
                    if mdef.type.keyed not in ("hash", "lpm"):
                        loaded.map_delete(mdef.name, kb)
                    continue
                if mdef.type.holds == "device":
                    value = (1).to_bytes(4, "little") + bytes(max(mdef.value_size - 4, 0))
                if mdef.type.percpu:
                    value = (value + bytes((-len(value)) % 8)) * kernel.possible_cpus()
                loaded.map_update(mdef.name, kb, value)
        for mdef in self.obj.maps:
            if is_global_data_section(mdef.section) and not mdef.read_only and mdef.value_size:
                loaded.map_update(
                    loaded.map(mdef.section).name, bytes(mdef.key_size or 4), mdef.initial or bytes(mdef.value_size)
                )


#: Open states the angr engine may keep without merging before the cross-check explores the
#: program again with merging (see `angr_exploration`).
UNMERGED_STATES = 64
#: Share of `--timeout` the unmerged try may take (on xdp-filter it took all of a 60 s budget,
#: leaving the merged run nothing); in mode auto, share of the walk probe (`Limits.walk_probe`).
UNMERGED_SHARE = 0.25
#: Least share of the walk probe the merged run keeps after the unmerged try (mode auto).
PROBE_KEPT = 0.5


def angr_exploration(obj: BpfObject, program: Program, options: Options, limits=None):
    """The angr exploration the cross-check compares: without state merging when the
    program's paths fit in UNMERGED_STATES open states (one model per unmerged path tests
    more of the z3 engine), else with merging (exact, fewer and larger paths). `limits`
    (angr_engine.Limits) bound the merged run; `options.timeout` bounds both runs together
    (the unmerged try gets UNMERGED_SHARE of it, the merged run what it left). With
    `limits.walk_probe` (mode auto) the probe is one for both tries: the unmerged try gets
    UNMERGED_SHARE of it in all, the merged run what the unmerged try left of it (at least
    PROBE_KEPT) past its own walk; an unmerged try cut after a protocol walk is returned as
    it is: the caller explores that program shard by shard (`cross_check`)."""
    from .angr_engine import Limits, explore_angr  # angr is imported only when a cross-check is asked for

    if options.merge:
        tight = replace(limits or Limits(), max_active=UNMERGED_STATES)
        first = replace(options, merge=False)
        if options.timeout is not None:  # the unmerged try gets a share, the merged run the rest
            first = replace(first, timeout=options.timeout * UNMERGED_SHARE)
        probe = tight.walk_probe
        if probe is not None:  # mode auto: the unmerged try gets UNMERGED_SHARE of the probe (xdp-filter: 21 s)
            tight = replace(tight, max_seconds=min(tight.max_seconds or probe, probe * UNMERGED_SHARE))
            if first.timeout is not None:
                first = replace(first, timeout=min(first.timeout, probe * UNMERGED_SHARE))
        clock = time.process_time if tight.cpu else time.perf_counter
        began = clock()
        unmerged = explore_angr(obj, program, first, limits=tight)
        if unmerged.budget is None or not unmerged.budget.cut:
            return unmerged
        if unmerged.walk is not None and tight.walk_probe is not None:
            return unmerged  # mode auto: a protocol walk angr cannot finish unmerged goes to the shards
        if options.timeout is not None:  # one budget for both tries
            options = replace(options, timeout=max(options.timeout - unmerged.seconds, 0.001))
        if probe is not None:  # the merged run's probe: what the unmerged try left of it (one probe for both)
            limits = replace(limits or Limits(), walk_probe=max(probe - (clock() - began), probe * PROBE_KEPT))
    return explore_angr(obj, program, options, limits=limits)


def _cut_by_budget(a) -> bool:
    """Whether a budget cut angr's exploration `a` (or it ran out of one)."""
    budget = a.budget
    return budget is not None and (bool(budget.cut) or budget.ran_out or budget.limit is not None)


@dataclass
class ShardRun:
    """angr's exploration of one shard (mode "sharded") and its CPU time."""

    shard: object  # shards.Shard
    exploration: object  # angr_engine.AngrExploration
    seconds: float

    def result(self) -> ShardResult:
        a = self.exploration
        cut = [p for p in a.paths if a.budget is not None and p.id in a.budget.cut]
        why = cut[0].truncated if cut else (a.budget.limit if _cut_by_budget(a) else None)
        return ShardResult(self.shard.name, len(a.paths), len(a.paths) - len(cut), seconds=self.seconds, cut=why)


#: Share of a "sharded" run's time budget kept for the shards after the first levels (deep, open).
OPEN_SHARDS_SHARE = 0.25
#: Fair shares of what is left that one shard may take: where every shard needs a little
#: more than its fair share (xdpfilt_*_all: ~2 CPU s each, 40 s for 17 concrete shards; the
#: open shards ~1-6 s each, ~0.9 s of the tests' 40 s for 38 of them) an even split cuts
#: them all near their end and finishes none; this way the first ones finish and the last
#: ones are cut (their z3 witnesses replayed).
CONCRETE_SHARE_FACTOR = 4.0
#: The same for an open shard (a free header length: angr_engine's segment model): the open
#: shards' needs vary more (xdp-filter's: 1-6 CPU s, twice as much on a loaded machine), and
#: each one cut near its end is CPU spent on nothing; with the tests' 40 s, per-shard needs
#: measured for xdpfilt_alw_ip's 38 open shards finish 12 of them with 4 fair shares at most
#: and 15 with 8 (all of what is left: 16; the last ones, three VLAN tags deep, need more
#: than 10 s each and come last).
OPEN_SHARE_FACTOR = 8.0
#: angr's time budget (CPU seconds) of a "sharded" run when neither --timeout nor the
#: engine's Limits give one.
SHARDED_SECONDS = 600.0


def shard_share(shard, left: float, total: float, to_go: int, first_to_go: int) -> float:
    """CPU seconds of a sharded run's budget `total` that `shard` may take, `left` of it
    being left and `to_go` shards still to explore with it (`first_to_go` of them of the
    walk's first levels): a first-level one up to CONCRETE_SHARE_FACTOR fair shares of what
    is left less OPEN_SHARDS_SHARE of the budget (what one leaves goes on); a deep one up to
    CONCRETE_SHARE_FACTOR fair shares of what is left, an open one up to OPEN_SHARE_FACTOR
    (`sharded_exploration`)."""
    if shard.concrete and not shard.deep:
        left -= OPEN_SHARDS_SHARE * total
        share = min(left, CONCRETE_SHARE_FACTOR * left / first_to_go)
    else:
        share = min(left, (CONCRETE_SHARE_FACTOR if shard.concrete else OPEN_SHARE_FACTOR) * left / to_go)
    return max(share, 0.001)


def sharded_exploration(
    obj: BpfObject, program: Program, options: Options, limits=None, project=None, only: list | None = None
) -> list:
    """angr's exploration of `program` shard by shard (analyzer/shards.py; the partition
    proved with z3 first): merged states (unless --no-merge), one Project for all. The time
    budget (`options.timeout`, else `limits.max_seconds`; seconds of this process's CPU
    time, Limits.cpu, so that the shards get their work done on a loaded machine) is shared: the concrete shards
    of the walk's first levels (shards.Shard.concrete, not `deep`) go first, each with what
    is left of the budget less OPEN_SHARDS_SHARE of it, divided by those still to go, times
    CONCRETE_SHARE_FACTOR (at most all of it); then the deep ones (concrete shards carved
    out of what would be open: sampled header lengths, a third level), each with
    CONCRETE_SHARE_FACTOR times what is left divided by the shards still to go; then the
    open ones, each with OPEN_SHARE_FACTOR times that (an open shard takes ~1-6 CPU s,
    several times its fair share of a CI budget: split evenly, every one of them was cut
    near its end and none finished; this way the first ones finish and the last ones are
    cut). So the first
    levels get the budget they had before the deep shards were carved out, and a long run
    finishes the deep and open ones too. `only`: explore these shards of the partition alone (a
    test's choice; the z3 witnesses outside them are replayed). Returns [ShardRun] in
    shard order."""
    from .angr_engine import Limits, explore_angr, make_project
    from .shards import proven_split

    shards = [s for s in proven_split() if only is None or s in only]
    limits = replace(limits or Limits(), cpu=True)
    total = options.timeout if options.timeout is not None else (limits.max_seconds or SHARDED_SECONDS)
    opts = replace(options, timeout=None)
    if project is None:
        project, _ = make_project(obj, opts)
    start, out = time.process_time(), []
    n_first = sum(s.concrete and not s.deep for s in shards)  # shards come in order: first, deep, open
    for i, shard in enumerate(shards):
        share = shard_share(shard, total - (time.process_time() - start), total, len(shards) - i, n_first - i)
        cpu = time.process_time()
        a = explore_angr(
            obj,
            program,
            opts,
            limits=replace(limits, max_seconds=share),
            shard=shard,
            project=project,
            segments=not shard.concrete,  # a free length byte: offsets from the packet, as segments
        )
        for p in a.paths:  # a cut path is never compared (`_comparable`): its state, often the
            if p.verdict == UNKNOWN:  # biggest (reads at free offsets), is let go shard by shard
                p.state = None
        out.append(ShardRun(shard, a, time.process_time() - cpu))
    return out


#: Share of angr's time budget (`--timeout`, else Limits.max_seconds) that mode "auto" lets
#: angr's exploration in one piece take once the program reads the packet at an offset taken
#: from the packet (a protocol walk, angr_engine.Context.walk): if that does not finish it,
#: the rest of the budget goes to the shards (mode "sharded"), where the offsets are constants.
WALK_PROBE_SHARE = 0.1


#: Wall-time limit of one concrete replay (mode "replay"): it runs one path; only a helper's
#: result forks it.
REPLAY_SECONDS = 60.0


def cross_check(
    obj: BpfObject,
    program: Program,
    options: Options | None = None,
    test_run: bool = True,
    limits=None,
    mode: str = "auto",
    compare_seconds: float | None = None,
    shards: list | None = None,
) -> CrossCheck:
    """Explore `program` with both engines and compare them (kernel confirmation is separate:
    `CrossCheck.confirm`). Without `test_run` (programs the kernel cannot test-run) inputs
    are not restricted to what BPF_PROG_TEST_RUN takes. `mode`: "symbolic", "replay",
    "sharded" or "auto": angr in one piece; once it reads the packet at an offset taken from
    the packet (a protocol walk) it gets WALK_PROBE_SHARE of the budget more, and if that
    does not finish it the rest goes to "sharded" (`CrossCheckReport.chosen` says so); cut
    by its budget without a walk: "replay" (sharding would not make it easier); else
    "symbolic" (module docstring). `compare_seconds`: `CrossCheck.run`'s bound on the angr ->
    z3 direction (None: every angr path). `shards`: in mode "sharded", explore only these
    shards of the partition (`sharded_exploration`'s `only`)."""
    options = options or Options()
    z3e = explore(obj, program, options)
    chosen = None
    if mode == "auto":
        from .angr_engine import Limits

        limits = limits or Limits()
        total = options.timeout if options.timeout is not None else (limits.max_seconds or SHARDED_SECONDS)
        start = time.process_time()
        angre = angr_exploration(obj, program, options, replace(limits, walk_probe=WALK_PROBE_SHARE * total))
        if angre.walk is not None and _cut_by_budget(angre):
            spent = time.process_time() - start
            chosen = (
                f"sharded: angr in one piece reads the packet at offsets taken from it (first at {angre.walk}) "
                f"and was cut ({angre.budget.limit or 'time budget'}) after {spent:.1f} s CPU"
            )
            mode, options = "sharded", replace(options, timeout=None)
            limits = replace(limits, max_seconds=max(total - spent, total * (1 - WALK_PROBE_SHARE) / 2))
    if mode == "sharded":
        from .angr_engine import make_project

        project, _ = make_project(obj, replace(options, timeout=None))
        runs = sharded_exploration(obj, program, options, limits, project, shards)
        check = CrossCheck(obj, program, options, z3e, runs[0].exploration, test_run, mode, runs, project)
    else:
        if mode != "auto":
            angre = angr_exploration(obj, program, options, limits)
        check = CrossCheck(obj, program, options, z3e, angre, test_run, mode)
    check.report.chosen = chosen
    check.run(compare_seconds)
    return check
