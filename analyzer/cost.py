"""The cost model: what each path executes, and what that costs in ns on a calibrated kernel.

Counting. `count(obj, program)` explores the program exactly as `explore` does (same paths,
same order, same merges) with one difference: the explorer's per-path instruction counter
(`State.steps`, an int or an if-then-else over merged sub-paths) becomes a vector of
counters packed into one wide bit-vector, `FIELD_BITS` bits per field. Field 0 is the
instruction count (the explorer adds 1 per instruction, as always); `CountingExplorer.step`
adds the other fields before each instruction runs: the instruction's class (`INSN_CLASSES`:
ALU, jump, packet/stack/map-value/ctx load or store, ...), helper calls by name (the names of
analyzer/helpers.py), map lookups by map type (lifter/maptypes.py), key bytes hashed, packet
bytes read and written, bpf_loop callback invocations and attempts per tail-call site.
Because the vector is one number, the explorer's exact merging (if-then-else on the path
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

Pricing. A `Profile` (made by `xdp2tc calibrate`, analyzer/calibrate.py; the default one in
analyzer/profiles/default.json was measured on the machine it names) gives ns per
instruction class, per helper, per lookup by map type (4-byte keys, plus ns per extra
hashed key byte), per map update by map type, per tail call (constant/variable, taken/missed), per bpf-to-bpf call and
bpf_loop callback, and the fixed per-run overhead of BPF_PROG_TEST_RUN (not part of a
path's cost). A path's cost is the sum over its counters. A merged path has one vector
per feasible sub-path (each checked with the solver); its cost is given as min / median /
max over them. A fitted profile adds `path_ns` once per path (analyzer/fit.py).
Anything the profile has no number for is listed as `uncalibrated` (the
estimate is then a lower bound).
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path as FsPath

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
    Store,
)
from lifter.maptypes import MAP_TYPES
from lifter.opcodes import CallSrc
from lifter.program import BpfObject, Program

from .explore import Exploration, Explorer, Options, Path
from .helpers import HELPERS, helper
from .state import State
from .symbolic import XDP_MD_FIELDS, Pointer, RegionKind, Scalar, const_value

SCHEMA = "xdp2tc.cost/1"
PROFILE_SCHEMA = "xdp2tc.profile/1"
DEFAULT_PROFILE = FsPath(__file__).resolve().parent / "profiles" / "default.json"

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
#: Helpers whose price is not under `helper`: lookups and updates are priced by map type
#: (an update of a type without its own price at `helper.map_update_elem`), tail calls by
#: site kind.
PRICED_ELSEWHERE = ("map_lookup_elem", "map_update_elem", "tail_call")
#: Map types whose lookups hash their key (`hash_key_bytes` counts the bytes).
HASHED = frozenset(t.name for t in MAP_TYPES if t.keyed == "hash")


def base_fields() -> tuple[str, ...]:
    return (
        ("insns",)
        + tuple(f"insn.{c}" for c in INSN_CLASSES)
        + tuple(f"helper.{h.name}" for h in HELPERS)
        + ("helper.unknown",)
        + tuple(f"lookup.{t.name}" for t in MAP_TYPES)
        + ("lookup.unknown",)
        + tuple(f"update.{t.name}" for t in MAP_TYPES)
        + ("update.unknown",)
        + ("hash_key_bytes", "pkt.read_bytes", "pkt.write_bytes", "callback")
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
                if isinstance(insn, Call) and insn.kind == CallSrc.HELPER and insn.imm == 12:
                    out.append(Site(prog.name, insn.pc))
    return out


class CountingExplorer(Explorer):
    """`Explorer` whose `steps` counter is the packed vector of `Layout` (see module doc).
    `site_keys` collects, per tail-call site, every (map, index) any path passed (index
    None: not a constant) -- the verifier's view of the site."""

    def __init__(self, obj: BpfObject, program: Program, options: Options, progress=None):
        super().__init__(obj, program, options, progress)
        sites = tail_call_sites(obj)
        self.layout = Layout(base_fields() + tuple(s.field for s in sites))
        self.site_keys: dict[Site, set[tuple[str | None, int | None]]] = {s: set() for s in sites}
        self._units = {name: self.layout.unit(name) for name in self.layout.fields}

    def _initial(self, program: Program) -> State:
        s = super()._initial(program)
        s.steps = z3.BitVecVal(0, self.layout.width)
        return s

    def step(self, s: State, insn) -> list[State]:
        delta = sum(self._units[name] * n for name, n in self.events(s, insn))
        steps = s.steps
        if z3.is_bv_value(steps):
            s.steps = z3.BitVecVal(steps.as_long() + delta, self.layout.width)
        else:
            s.steps = z3.simplify(steps + delta) if delta else z3.simplify(steps)
        return super().step(s, insn)

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
            name = f"update.{mdef.type.name}" if mdef is not None and mdef.type is not None else "update.unknown"
            out.append((name if name in self._units else "update.unknown", 1))
        elif h.name == "map_lookup_elem":
            if mdef is None or mdef.type is None:
                out.append(("lookup.unknown", 1))
            else:
                out.append(
                    (f"lookup.{mdef.type.name}", 1)
                    if f"lookup.{mdef.type.name}" in self._units
                    else ("lookup.unknown", 1)
                )
                if mdef.type.name in HASHED:
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
        cut where they start. Past `budget` solver checks or `seconds` the list is not
        exact: the values of the tree, unchecked, with only the extremes kept past 512.
        A feasible path has at least one feasible sub-path, so an empty answer (the
        solver said unknown everywhere) is never taken as exact either."""
        steps = path.steps
        if z3.is_bv_value(steps):
            return [self.layout.unpack(steps.as_long())], True
        values = _feasible_values(self.exploration.solver, path.literals, steps, budget, seconds)
        exact = bool(values)
        if not exact:
            values, _ = _sum_values(steps, 512)
        return [self.layout.unpack(v) for v in sorted(values or ())], exact


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
    ex = CountingExplorer(obj, program, options or Options(), progress)
    e = ex.run()
    return Counted(e, ex.layout, ex.site_keys)


# --------------------------------------------------------------------------- profiles


class ProfileError(Exception):
    """A profile file that cannot be used (message names the file and the problem)."""


@dataclass
class Profile:
    """ns per counted thing, measured on one machine (see analyzer/calibrate.py)."""

    kernel: str
    cpu: str
    machine: str
    created: str
    overhead_ns: float
    insn: dict[str, float]
    helper: dict[str, float]
    lookup: dict[str, float]
    hash_key_byte: float
    tail_call: dict[str, float]  # constant, variable, constant_miss, variable_miss
    call: dict[str, float]  # bpf2bpf, callback
    method: dict = field(default_factory=dict)
    spread: dict = field(default_factory=dict)  # entry -> [min, max] over rounds
    notes: list[str] = field(default_factory=list)
    source: str = ""
    path_ns: float = 0.0  # per path, fitted on real programs (analyzer/fit.py)
    fit: dict = field(default_factory=dict)  # how the instruction prices were fitted, and the fit's error
    update: dict[str, float] = field(default_factory=dict)  # map_update_elem by map type

    TAIL_KINDS = ("constant", "variable", "constant_miss", "variable_miss")

    def to_json(self) -> dict:
        return {
            "schema": PROFILE_SCHEMA,
            "kernel": self.kernel,
            "cpu": self.cpu,
            "machine": self.machine,
            "created": self.created,
            "overhead_ns": self.overhead_ns,
            "insn": self.insn,
            "helper": self.helper,
            "lookup": self.lookup,
            "hash_key_byte": self.hash_key_byte,
            "tail_call": self.tail_call,
            "call": self.call,
            "method": self.method,
            "spread": self.spread,
            "notes": self.notes,
            "path_ns": self.path_ns,
            "fit": self.fit,
            "update": self.update,
        }

    @classmethod
    def from_json(cls, doc: dict, source: str = "") -> Profile:
        where = source or "profile"
        if not isinstance(doc, dict) or doc.get("schema") != PROFILE_SCHEMA:
            raise ProfileError(f"{where}: not an xdp2tc profile (schema {PROFILE_SCHEMA!r} expected)")

        def number(value, what):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ProfileError(f"{where}: {what} must be a finite number, got {value!r}")
            return float(value)

        def table(name):
            value = doc.get(name)
            if not isinstance(value, dict):
                raise ProfileError(f"{where}: missing table {name!r}")
            return {str(k): number(v, f"{name}.{k}") for k, v in value.items()}

        for key in ("kernel", "cpu"):
            if not isinstance(doc.get(key), str):
                raise ProfileError(f"{where}: missing {key!r}")
        prof = cls(
            doc["kernel"],
            doc["cpu"],
            str(doc.get("machine", "")),
            str(doc.get("created", "")),
            number(doc.get("overhead_ns"), "overhead_ns"),
            table("insn"),
            table("helper"),
            table("lookup"),
            number(doc.get("hash_key_byte", 0.0), "hash_key_byte"),
            table("tail_call"),
            table("call"),
            doc.get("method") or {},
            doc.get("spread") or {},
            list(doc.get("notes") or []),
            source,
            number(doc.get("path_ns", 0.0), "path_ns"),
            doc.get("fit") or {},
            table("update") if "update" in doc else {},
        )
        missing = [f"tail_call.{k}" for k in cls.TAIL_KINDS if k not in prof.tail_call]
        missing += [f"call.{k}" for k in ("bpf2bpf", "callback") if k not in prof.call]
        if missing:
            raise ProfileError(f"{where}: missing {', '.join(missing)}")
        return prof

    def save(self, path: str | FsPath) -> None:
        FsPath(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")


def cpu_model() -> str:
    """The running machine's CPU model, as profiles name it (/proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("model name", "Model", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def foreign_profile(profile: Profile) -> str | None:
    """What differs between the machine the profile was measured on and this one (CPU
    model, kernel release), or None when they match."""
    here_cpu, here_kernel = cpu_model(), platform.release()
    diffs = []
    if profile.cpu != here_cpu:
        diffs.append(f"CPU {profile.cpu!r}, this machine {here_cpu!r}")
    if profile.kernel != here_kernel:
        diffs.append(f"kernel {profile.kernel}, this machine {here_kernel}")
    return "; ".join(diffs) or None


def load_profile(path: str | FsPath | None = None) -> Profile:
    """The profile at `path`, or the default one shipped in the package."""
    path = FsPath(path) if path is not None else DEFAULT_PROFILE
    try:
        doc = json.loads(path.read_text())
    except OSError as err:
        raise ProfileError(f"{path}: cannot read the profile: {err.strerror or err}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ProfileError(f"{path}: not JSON ({err})") from None
    return Profile.from_json(doc, str(path))


# --------------------------------------------------------------------------- pricing


@dataclass
class Price:
    """The cost of one counter vector: total ns, ns per part, and what has no price."""

    ns: float
    parts: dict[str, float]  # insns, helpers, lookups, tail_calls, calls
    uncalibrated: set[str]
    saving_merge: float  # ns saved per packet if tail-called programs were merged
    saving_const: float  # ns saved if variable-index sites were constant-index


def price(counts: dict[str, int], taken: Counter, counted: Counted, profile: Profile) -> Price:
    """Price the counters `counts` of one sub-path; `taken` counts the tail calls the path
    takes per Site (from Path.tail_calls)."""
    parts = dict.fromkeys(("insns", "helpers", "lookups", "tail_calls", "calls"), 0.0)
    parts["insns"] = profile.path_ns
    missing: set[str] = set()
    hashed = 0
    for name, n in counts.items():
        kind, _, what = name.partition(".")
        if kind == "insn":
            if what in ("call_local",):
                cost = profile.call.get("bpf2bpf")
                part = "calls"
            else:
                cost, part = profile.insn.get(what), "insns"
            if cost is None:
                missing.add(name)
            else:
                parts[part] += n * cost
        elif kind == "helper":
            if what in PRICED_ELSEWHERE:
                continue
            cost = profile.helper.get(what)
            if cost is None:
                missing.add(name)
            else:
                parts["helpers"] += n * cost
        elif kind == "lookup":
            cost = profile.lookup.get(what)
            if cost is None:
                missing.add(name)
            else:
                parts["lookups"] += n * cost
            if what in HASHED:
                hashed += n
        elif kind == "update":
            cost = profile.update.get(what, profile.helper.get("map_update_elem"))
            if cost is None:
                missing.add(name)
            else:
                parts["helpers"] += n * cost
        elif name == "callback":
            parts["calls"] += n * profile.call["callback"]
    extra_key = counts.get("hash_key_bytes", 0) - 4 * hashed
    parts["lookups"] += extra_key * profile.hash_key_byte
    tc = profile.tail_call
    goto = profile.insn.get("goto", 0.0)
    saving_merge = saving_const = 0.0
    for site in counted.site_keys:
        attempts = counts.get(site.field, 0)
        if not attempts:
            continue
        hit = min(taken.get(site, 0), attempts)
        miss = attempts - hit
        kind = counted.site_kind(site)
        parts["tail_calls"] += hit * tc[kind] + miss * tc[f"{kind}_miss"]
        saving_merge += hit * max(tc[kind] - goto, 0.0)
        if kind == "variable":
            saving_const += hit * (tc["variable"] - tc["constant"]) + miss * (tc["variable_miss"] - tc["constant_miss"])
    return Price(sum(parts.values()), parts, missing, saving_merge, saving_const)


def taken_tail_calls(path: Path) -> Counter:
    return Counter(Site(t.caller, t.pc) for t in path.tail_calls)


@dataclass
class PathCost:
    """A path and its price over its feasible sub-paths."""

    path: Path
    vectors: list[dict[str, int]]
    prices: list[Price]
    exact: bool

    @property
    def worst(self) -> int:
        return max(range(len(self.prices)), key=lambda i: self.prices[i].ns) if self.prices else -1

    def ns(self) -> tuple[float, float, float] | None:
        if not self.prices:
            return None
        values = sorted(p.ns for p in self.prices)
        return values[0], statistics.median(values), values[-1]

    def insns(self) -> tuple[int, int]:
        values = [v.get("insns", 0) for v in self.vectors] or [0]
        return min(values), max(values)


def path_costs(counted: Counted, profile: Profile) -> list[PathCost]:
    out = []
    for path in counted.exploration.paths:
        vectors, exact = counted.vectors(path)
        taken = taken_tail_calls(path)
        out.append(PathCost(path, vectors, [price(v, taken, counted, profile) for v in vectors], exact))
    return out


def grouped(counts: dict[str, int]) -> dict[str, dict[str, int]]:
    """{"insn": {class: n}, "helper": {name: n}, "lookup": {type: n}, ...} for reports."""
    out: dict[str, dict[str, int]] = {}
    for name, n in counts.items():
        kind, _, what = name.partition(".")
        if kind in ("insn", "helper", "lookup", "pkt"):
            out.setdefault(kind, {})[what] = n
    return out
