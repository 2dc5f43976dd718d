"""One symbolic execution state: registers, call frames, stack bytes, packet, map contents,
path condition and what the path has done so far.

States are copied when a branch splits them (`fork`), so everything mutable here is small:
a list of 11 registers, one dict of stack bytes per frame, tuples for histories. Two states
at the same place whose `fingerprint()`s are equal differ only in how they got there and
can be merged exactly (their path conditions or-ed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from lifter.program import Function, Program

from .symbolic import Pointer, Value


@dataclass(frozen=True, eq=False)
class PtrByte:
    """Byte `index` of a pointer spilled to the stack (pointers are not bit patterns)."""

    ptr: Pointer
    index: int

    def fingerprint(self) -> tuple:
        return ("pb", self.ptr.fingerprint(), self.index)


StackByte = z3.BitVecRef | PtrByte


@dataclass(frozen=True)
class LoopCall:
    """A bpf_loop in progress: `callback` runs for index 0..count-1 while it returns 0."""

    callback: tuple[str, int]
    index: int
    count: int
    ctx: Value | None


@dataclass(frozen=True)
class Frame:
    """A function activation. `ret_pc` is where the caller resumes (None for the program
    entry); `saved` holds the caller's r6-r9, which a call preserves."""

    func: Function
    ret_pc: int | None = None
    saved: tuple = ()
    loop: LoopCall | None = None

    def fingerprint(self) -> tuple:
        saved = tuple(None if v is None else v.fingerprint() for v in self.saved)
        return (
            self.func.key,
            self.ret_pc,
            saved,
            self.loop
            and (self.loop.callback, self.loop.index, self.loop.count, self.loop.ctx and self.loop.ctx.fingerprint()),
        )


@dataclass(frozen=True, eq=False)
class MapWrite:
    """A change the program makes to a map: `put` a whole value (found afterwards),
    `delete` an entry, or set one value `byte` at `off`."""

    kind: str
    key: z3.BitVecRef
    off: z3.BitVecRef | None = None  # BV32, for "byte"
    data: tuple = ()  # BV8 values: the whole value for "put", one byte for "byte"

    def fingerprint(self) -> tuple:
        return (
            self.kind,
            self.key.get_id(),
            None if self.off is None else self.off.get_id(),
            tuple(d.get_id() for d in self.data),
        )


def _same(a: z3.ExprRef, b: z3.ExprRef) -> bool | None:
    """Whether two terms are equal when that is plain without the solver (the same term, or
    two different constants), else None."""
    if a.get_id() == b.get_id():
        return True
    if z3.is_bv_value(a) and z3.is_bv_value(b):
        return a.as_long() == b.as_long()
    return None


def found_after(writes: tuple[MapWrite, ...], key: z3.BitVecRef, found: z3.BoolRef) -> z3.BoolRef:
    """Whether entry `key` exists after `writes`, given it did (`found`) before them."""
    for w in writes:
        if w.kind in ("put", "delete"):
            same = _same(key, w.key)
            if same is None:
                found = z3.If(key == w.key, z3.BoolVal(w.kind == "put"), found)
            elif same:
                found = z3.BoolVal(w.kind == "put")
    return found


def byte_after(writes: tuple[MapWrite, ...], key: z3.BitVecRef, off: z3.BitVecRef, value: z3.BitVecRef) -> z3.BitVecRef:
    """Byte `off` (BV32) of entry `key` after `writes`, given it was `value` before them.
    Writes whose key and offset plainly match or miss (the same term, different
    constants) are resolved here without building a term: from the newest write back, the
    first that plainly matches gives the byte; the others are if-then-else layers."""
    layers = []  # (condition or None for a sure match, byte), newest first
    constant_off = off.as_long() if z3.is_bv_value(off) else None
    for w in reversed(writes):
        same_key = _same(key, w.key)
        if same_key is False:
            continue
        if w.kind == "put":
            if constant_off is not None:
                chosen = w.data[constant_off] if constant_off < len(w.data) - 1 else w.data[-1]
            else:
                chosen = w.data[-1]
                for i in range(len(w.data) - 2, -1, -1):
                    chosen = z3.If(off == i, w.data[i], chosen)
            layers.append((None if same_key else key == w.key, chosen))
        elif w.kind == "byte":
            same_off = _same(off, w.off)
            if same_off is False:
                continue
            if same_key and same_off:
                cond = None
            elif same_key:
                cond = off == w.off
            elif same_off:
                cond = key == w.key
            else:
                cond = z3.And(key == w.key, off == w.off)
            layers.append((cond, w.data[0]))
        else:
            continue
        if layers[-1][0] is None:
            value = layers.pop()[1]
            break
    for cond, byte in reversed(layers):
        value = z3.If(cond, byte, value)
    return value


@dataclass(eq=False)
class Witness:
    """A z3 model of a state's path condition, found by the exploring solver's last check
    on it (shared by the state's forks): a branch whose condition the model decides needs
    no solver call for that direction. `known` is the fresh-symbol count when it was found
    (every literal numbered up to it was defined then, so the model satisfies its
    definition); `values` memoises the literals defined since, each evaluated through its
    definition (which keeps the extended model a model of every assertion)."""

    model: z3.ModelRef | None  # None: not fetched yet (Explorer._settle fetches it)
    known: int
    values: dict[str, bool | None] = field(default_factory=dict)
    shared: bool = False  # held by a fork of the state it was found for


@dataclass(frozen=True, eq=False)
class Effect:
    """A side effect on the path: kind is one of helpers.py's effect names, plus
    `map_write` for stores through a map value pointer; `target` names the map or helper."""

    kind: str
    target: str
    pc: int
    section: str

    def fingerprint(self) -> tuple:
        return (self.kind, self.target, self.pc, self.section)


@dataclass(frozen=True, eq=False)
class MapAccess:
    """A lookup of `key` in map `map` (the witness builder fills these entries)."""

    map: str
    key: z3.BitVecRef


@dataclass(frozen=True)
class TailCall:
    """A tail call on the path: into `target` (None when unknown) from program `caller`,
    with a constant index (`index`) or a variable one (None)."""

    caller: str
    map: str
    index: int | None
    target: str | None
    pc: int


@dataclass
class State:
    program: Program
    frames: list[Frame]
    pc: int
    regs: list[Value | None]
    stacks: list[dict[int, StackByte]]
    pkt: z3.ArrayRef
    head: z3.BitVecRef  # offset of ctx->data (moves with bpf_xdp_adjust_head)
    end: z3.BitVecRef  # offset of ctx->data_end
    meta: z3.BitVecRef  # bytes of metadata before data
    maps: dict[str, tuple[MapWrite, ...]] = field(default_factory=dict)
    path: tuple[z3.BoolRef, ...] = ()
    steps: int | z3.BitVecRef = 0
    effects: tuple[Effect, ...] = ()
    redirect: tuple | None = None  # ("ifindex", expr) | ("map", name, key expr)
    tail_calls: tuple[TailCall, ...] = ()
    loops: dict[tuple, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    accesses: tuple[MapAccess, ...] = ()
    writes: tuple[z3.BitVecRef, ...] = ()  # packet offsets written
    sites: frozenset = frozenset()  # (section, pc) of branches decided on the path
    dead: bool = False  # merged into another state
    merge_key: tuple | None = None
    spent: float = 0.0  # seconds spent on this state and the states it was forked from
    witness: Witness | None = None  # a model of `path` (None: none known)

    @property
    def func(self) -> Function:
        return self.frames[-1].func

    @property
    def depth(self) -> int:
        return len(self.frames) - 1

    def fork(self) -> State:
        if self.witness is not None and self.witness.model is None:
            self.witness.shared = True
        s = State(
            self.program,
            list(self.frames),
            self.pc,
            list(self.regs),
            [dict(st) for st in self.stacks],
            self.pkt,
            self.head,
            self.end,
            self.meta,
            dict(self.maps),
            self.path,
            self.steps,
            self.effects,
            self.redirect,
            self.tail_calls,
            dict(self.loops),
            self.notes,
            self.accesses,
            self.writes,
            self.sites,
            spent=self.spent,
            witness=self.witness,
        )
        return s

    def note(self, why: str) -> None:
        if why not in self.notes:
            self.notes = self.notes + (why,)

    def location(self) -> tuple:
        return (self.program.name, tuple(f.fingerprint() for f in self.frames), self.pc)

    def shape(self, exact_r0: bool) -> tuple:
        """The fingerprint with numbers abstracted: states of equal shape at one place can
        be merged by choosing each differing number with an if-then-else on the path
        condition. `exact_r0` keeps r0 exact (at a program exit, so verdicts stay apart)."""

        def value_shape(v):
            if v is None:
                return None
            if isinstance(v, Pointer):
                return ("p", v.region.fingerprint(), v.null is None)
            return "s"

        regs = tuple(value_shape(r) for r in self.regs)
        if exact_r0 and self.regs[0] is not None:
            regs = (self.regs[0].fingerprint(),) + regs[1:]
        stacks = tuple(
            tuple(sorted((o, b.fingerprint() if isinstance(b, PtrByte) else "s") for o, b in st.items()))
            for st in self.stacks
        )
        return (regs, stacks) + self._rest()

    def fingerprint(self) -> tuple:
        """Everything that decides the future of the state (not how it got here)."""
        regs = tuple(None if r is None else r.fingerprint() for r in self.regs)
        stacks = tuple(
            tuple(sorted((o, b.fingerprint() if isinstance(b, PtrByte) else b.get_id()) for o, b in st.items()))
            for st in self.stacks
        )
        heap = (self.pkt.get_id(), self.head.get_id(), self.end.get_id(), self.meta.get_id())
        return (regs, stacks, *heap) + self._rest()

    def _rest(self) -> tuple:
        """The part of the fingerprint that `shape` keeps as it is."""
        maps = tuple(sorted((n, tuple(w.fingerprint() for w in ws)) for n, ws in self.maps.items()))
        redirect = (
            None
            if self.redirect is None
            else tuple(x.get_id() if isinstance(x, z3.ExprRef) else x for x in self.redirect)
        )
        return (
            maps,
            tuple(e.fingerprint() for e in self.effects),
            redirect,
            self.tail_calls,
            tuple(sorted(self.loops.items())),
            self.notes,
            tuple(w.get_id() for w in self.writes),
        )
