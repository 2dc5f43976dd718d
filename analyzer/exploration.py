"""The result of exploring a program: the public seam between the engine and its consumers.

An `Exploration` holds every `Path` (verdict, condition as branch literals, effects, tail
calls) and every `BranchSite` (what was seen at a conditional jump); `Options` are the bounds
it ran under. The engine that makes one is explore.py (`explore()`); classify, mapuse, report,
verify, fields and rules/ read results through this module only (an import-linter contract
in pyproject.toml keeps them off the engine).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3
from z3 import z3core

from lifter.maps import MapDef, is_global_data_section
from lifter.program import BpfObject, Program

from .state import Effect, MapAccess, MapWrite
from .symbolic import Z3_C, Source, map_found, map_val, symbols
from .xdp import INVALID, VERDICTS

__all__ = [
    "INVALID",
    "UNKNOWN",
    "VERDICTS",
    "BranchSite",
    "Budget",
    "Exploration",
    "ExplorationError",
    "Options",
    "Path",
]

#: A path whose outcome xdp2tc cannot tell (unknown tail-call target, cut loop, ...).
UNKNOWN = "UNKNOWN"
#: Conditions kept per decision site for the map proofs of mapuse.py.
MAX_SITE_CONDITIONS = 32


@dataclass
class Options:
    """Bounds of one exploration (CLI flags of `xdp2tc analyze`)."""

    min_len: int = 0  # smallest packet considered (the kernel's test run needs 14)
    max_len: int = 1514  # largest packet considered (bytes of linear data)
    loop_bound: int = 64  # iterations of one loop on one path (and bpf_loop callbacks)
    max_insns: int = 2_000_000  # instructions executed over all states
    max_paths: int = 20_000
    merge: bool = True
    #: seconds for the exploration and its report (None: no limit; explore.EXPLORE_SHARE of
    #: it explores); states still open when it runs out end as UNKNOWN paths that say where
    #: they were cut (`--timeout`)
    timeout: float | None = None
    #: seconds one path may take (None: no limit), counted from the start of its oldest branch
    path_timeout: float | None = None
    #: when `timeout` started counting (`time.perf_counter()`; None: when the exploration
    #: starts): a command that explores several programs gives them one budget
    started: float | None = None
    #: keep each path's model (Path.witness) for `rules` to start from; off by default:
    #: kept models hold z3 terms alive, which moves the ids of later terms and with them how
    #: z3 orders what it simplifies (the printed conditions of `analyze`, semantically the same)
    witnesses: bool = False


@dataclass
class Budget:
    """What a time budget left out (`Options.timeout`, `Options.path_timeout`): whether the
    whole budget ran out, the functions some path executed and those none reached
    ("program:function"; tail-called programs and every program a PROG_ARRAY of the object
    names in its static `.values` included), and the paths a budget cut (each
    says where in `truncated`: UNKNOWN, so never offloaded)."""

    timeout: float | None
    path_timeout: float | None
    ran_out: bool
    functions_explored: list[str]
    functions_not_reached: list[str]
    cut: list[int]
    #: what ran out, in words, when it is not the time budget (the angr engine's state and
    #: memory budgets, analyzer/angr_engine.py `Limits`)
    limit: str | None = None


@dataclass
class Path:
    """One way through the program (several, merged, when they behave the same)."""

    id: int
    verdict: str  # VERDICTS value, INVALID or UNKNOWN
    retval: z3.BitVecRef | None  # r0 at exit (64 bits)
    literals: tuple[z3.BoolRef, ...]
    steps: int | z3.BitVecRef  # instructions executed (an if-then-else over merged paths)
    effects: tuple[Effect, ...]
    redirect: tuple | None
    pkt: z3.ArrayRef
    head: z3.BitVecRef
    end: z3.BitVecRef
    writes: tuple[z3.BitVecRef, ...]  # offsets written, from the packet's original first byte
    tail_calls: tuple
    notes: tuple[str, ...]  # why parts of the path are not understood
    truncated: str | None
    programs: tuple[str, ...]  # entry program, then tail-called ones
    accesses: tuple[MapAccess, ...]
    sites: frozenset
    exit_pc: int
    exit_section: str
    map_writes: tuple[tuple[str, tuple[MapWrite, ...]], ...] = ()  # (map, its write log)
    #: the model the exploring solver found of this path, when it was fetched and
    #: Options.witnesses asked for it (its inputs satisfy the path's condition; synthesis
    #: starts from it instead of asking z3 again)
    witness: z3.ModelRef | None = None


@dataclass
class BranchSite:
    """A conditional jump (kind "jump") or a verdict chosen by a symbolic return value
    (kind "verdict") and what was seen at it over all paths."""

    program: str
    function: str
    section: str
    pc: int
    kind: str = "jump"
    visits: int = 0
    both: int = 0  # visits on which both directions were feasible
    one_way: set[bool] = field(default_factory=set)  # direction when only one was feasible
    sources: set[Source] = field(default_factory=set)  # inputs of conditions decided both ways
    all_sources: set[Source] = field(default_factory=set)
    #: the conditions of visits decided both ways (for proofs about maps, mapuse.py); at
    #: most MAX_SITE_CONDITIONS, `overflow` when more were seen
    conditions: list[z3.BoolRef] = field(default_factory=list)
    overflow: bool = False


@dataclass
class Exploration:
    """What `explore` returns: every path, every decision site, and the solver state their
    literals are defined in (`condition`/`expand` turn literals into formulas over inputs)."""

    obj: BpfObject
    program: Program
    options: Options
    paths: list[Path]
    sites: dict[tuple[str, int], BranchSite]
    solver: z3.Solver
    definitions: list[tuple[z3.BoolRef, z3.BoolRef]]  # literal -> condition, in order
    written_maps: set[str]
    read_maps: set[str]
    insns_executed: int
    seconds: float
    programs: list[str]  # entry and every program reached by a tail call
    _expanded: dict[str, tuple[z3.BoolRef, z3.BoolRef]] | None = None  # name -> (literal, condition over inputs)
    map_use: dict | None = None  # mapuse.map_uses, computed on first use
    classes: tuple | None = None  # classify.classes (branch and map classes), computed on first use
    #: summary symbol -> (the value it stands for, where it was made): see Explorer.bounded
    summaries: dict[str, tuple[z3.BitVecRef, str]] = field(default_factory=dict)
    budget: Budget | None = None  # what the time budget cut, when one was given
    #: memos of `condition` (path id -> (path, condition)) and `environment` ((assertions, list))
    _conditions: dict = field(default_factory=dict)
    #: report.insn_range's memo over the paths' instruction-count terms (z3 id -> values)
    step_values: dict = field(default_factory=dict)
    #: fields.decode's memo (path id -> (path, environment, decoded condition))
    decoded: dict = field(default_factory=dict)
    _environment: tuple | None = None

    def cut_by_budget(self, path: Path) -> bool:
        """Whether a time budget cut `path` (UNKNOWN): the reports skip what they would
        derive from its end (decoded fields, counterexamples, outputs), which it never
        reached, and which would outlast the budget."""
        return self.budget is not None and path.id in self.budget.cut

    def summarised(self, path: Path) -> list[str]:
        """The summaries the path's condition, verdict or redirect reads: on those its
        decisions are taken as possible both ways (sound for proofs, not for witnesses)."""
        if not self.summaries:
            return []
        names = set(symbols(self.condition(path)))
        for term in (path.retval, *(path.redirect or ())):
            if isinstance(term, z3.ExprRef):
                names |= symbols(self.expand(term))
        return sorted((n for n in names if n in self.summaries), key=lambda n: int(n.split(".")[1]))

    def condition(self, path: Path) -> z3.BoolRef:
        """The path condition over program inputs only (literals expanded; once per path)."""
        memo = self._conditions.get(path.id)
        if memo is None or memo[0] is not path:
            memo = (path, self.expand(z3.And(*path.literals) if path.literals else z3.BoolVal(True)))
            self._conditions[path.id] = memo
        return memo[1]

    def expand(self, expr: z3.ExprRef, cache: dict | None = None) -> z3.ExprRef:
        """`expr` with every branch literal replaced by its condition over inputs. `cache`:
        a `symbols` cache of the caller's that finds the literals `expr` reads (mapuse
        shares one over all the terms it expands); without one, `expr` is walked afresh."""
        if self._expanded is None:
            self._expanded = {}
            # one symbols cache over the definitions: it holds the definitions' own terms
            # (alive in `definitions` anyway), so no term lives longer for it, and a merged
            # value's if-then-else under many definitions is walked once, not per definition
            shared: dict = {}
            for lit, cond in self.definitions:  # each refers to earlier literals only
                name = lit.decl().name()
                self._expanded[name] = (lit, self._substitute_literals(cond, shared))
        return self._substitute_literals(expr, cache)

    def literal_condition(self, name: str) -> z3.BoolRef:
        """The condition over inputs that branch literal `name` (`b!<n>`) stands for."""
        if self._expanded is None:
            self.expand(z3.BoolVal(True))
        return self._expanded[name][1]

    def _substitute_literals(self, expr: z3.ExprRef, cache: dict | None = None) -> z3.ExprRef:
        """z3.substitute(expr, (literal, its expansion)...) for the literals `expr` reads,
        through z3's C API for a Boolean `expr` (no sort checks per pair), the literals
        being the definitions' own terms (no z3.Bool per name). The same terms, made in
        the same order, whatever `cache` (see `expand`): it only finds the literals."""
        names = [n for n in sorted(symbols(expr, cache)) if n.startswith("b!")]
        if not names:
            return expr
        pairs = [self._expanded[n] for n in names]
        if not z3.is_bool(expr):  # a value (a merged return code): z3's own wrapper picks its class
            return z3.substitute(expr, *pairs)
        src = (z3.Ast * len(pairs))(*[lit.as_ast() for lit, _ in pairs])
        dst = (z3.Ast * len(pairs))(*[cond.as_ast() for _, cond in pairs])
        ctx = expr.ctx
        return z3.BoolRef(z3core.Z3_substitute(ctx.ref(), expr.as_ast(), len(pairs), src, dst), ctx)

    def maps_as_loaded(self, global_bytes=None) -> list[tuple[z3.FuncDeclRef, z3.ExprRef]]:
        """The map contents a freshly loaded program starts with, as `z3.substitute_funs`
        pairs for the maps the paths read or write: hash, LRU and LPM maps empty (no entry
        found), arrays zeroed, global data (`.data`, `.bss`, `.rodata`) as `global_bytes(mdef)`
        gives it (default: the object's initial bytes, what the loader writes). One map
        state every map can be in, so a formula true of it is true of some run."""
        pairs: list[tuple[z3.FuncDeclRef, z3.ExprRef]] = []
        maps = {m.name: m for m in self.obj.maps}
        for name in sorted(self.read_maps | self.written_maps):
            mdef = maps[name]
            bits = 8 * (mdef.key_size or 4)
            if is_global_data_section(mdef.section):
                data = global_bytes(mdef) if global_bytes is not None else _initial_bytes(mdef)
                off = z3.Var(1, z3.BitVecSort(32))  # the second argument of map.<name>.val
                value = z3.BitVecVal(0, 8)
                for i in range(len(data) - 1, -1, -1):
                    value = z3.If(off == i, z3.BitVecVal(data[i], 8), value)
                pairs.append((map_val(name, bits), value))
                continue
            pairs.append((map_found(name, bits), z3.BoolVal(False)))
            pairs.append((map_val(name, bits), z3.BitVecVal(0, 8)))
        return pairs

    def base_constraints(self) -> list[z3.BoolRef]:
        return list(self.solver.assertions())

    def environment(self) -> list[z3.BoolRef]:
        """What holds of every input before any branch (packet length bounds, fragments):
        the solver's assertions without the branch-literal definitions (worked out once for
        a given number of assertions: walking the definitions is slow on big programs)."""
        assertions = self.solver.assertions()
        if self._environment is None or self._environment[0] != len(assertions):
            cache: dict = {}
            env = [
                a
                for a in assertions
                if not _is_definition(a) and not any(n.startswith("b!") for n in symbols(a, cache))
            ]
            self._environment = (len(assertions), env)
        return list(self._environment[1])


def _initial_bytes(mdef: MapDef) -> bytes:
    """A global data section's bytes as the loader writes them (zeros for `.bss`)."""
    return mdef.initial or bytes(mdef.value_size or 0)


def _is_definition(a: z3.BoolRef) -> bool:
    """Whether assertion `a` is a branch literal's definition `b!<n> == condition` (as the
    explorer asserts them), read from its top through z3's C API: it reads a literal, so it
    is no part of the environment, and its condition need not be walked."""
    ref, ast = Z3_C.handles(a)
    if Z3_C.ast_kind(ref, ast) != z3.Z3_APP_AST or Z3_C.decl_kind(ref, Z3_C.decl(ref, ast)) != z3.Z3_OP_EQ:
        return False
    lhs = Z3_C.arg(ref, ast, 0)
    if Z3_C.ast_kind(ref, lhs) != z3.Z3_APP_AST or Z3_C.num_args(ref, lhs) != 0:
        return False
    decl = Z3_C.decl(ref, lhs)
    if Z3_C.decl_kind(ref, decl) != z3.Z3_OP_UNINTERPRETED:
        return False
    name = Z3_C.symbol(ref, Z3_C.decl_name(ref, decl))
    return (name.decode() if isinstance(name, bytes) else name).startswith("b!")


class ExplorationError(Exception):
    """The program uses something the explorer cannot even start on (message names it)."""
