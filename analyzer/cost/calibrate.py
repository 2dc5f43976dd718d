"""Calibration: what each counted thing of the cost model costs on the running kernel.

`calibrate()` builds micro-programs directly as bytecode (lifter/insn.py instructions
encoded by lifter/encode.py; no compiler), loads them with bpf(BPF_PROG_LOAD) together with
the maps they use, and times them with BPF_PROG_TEST_RUN (analyzer/kernel/) on one
128-byte packet.

Method. BPF_PROG_TEST_RUN reports the mean ns per run as an integer, so one instruction
cannot be timed alone. Each micro-benchmark is one program shape built with 0, n and 2n
copies of a *unit* (e.g. four ALU instructions, or the argument set-up and call of one
helper) between a fixed prologue and `r0 = XDP_PASS; exit`. Every size is run with a large
repeat count; the least-squares slope over the sizes, divided by the calls per unit, is
the round's value; rounds are interleaved (every benchmark once per round) and the
profile keeps the median over rounds (and min/max in `spread`). What a unit executes
besides the thing measured (argument set-up, the load of a variable index, ...) is
subtracted at the already calibrated prices, so a helper's price is the call alone and a
path's argument set-up is paid once, by its own instructions.

Fit on real code. Micro-programs time instructions as throughput in isolation; real
programs overlap them differently, so summed micro prices mispredict long paths. With
`fit_objects` (`xdp2tc calibrate` defaults to the corpus's clang builds; `--fit FILE.o`
names others, `--no-fit` skips), every path of those objects with a witness is timed on
the kernel (analyzer/cost/pathtiming.py) and the instruction-class prices plus a per-path
term are fitted by non-negative least squares, judged by grouped cross-validation
(analyzer/cost/fit.py); the profile's `fit` keeps the held-back error. Helpers, lookups,
updates, tail calls and calls keep their micro-program prices.

The fixed cost of a test run (the kernel's loop around the program and the program's
entry and exit) is the time of the empty program `r0 = XDP_PASS; exit`, made of its rounds
as a path's time is (pathtiming.ESTIMATOR: the mean of the fastest half of the rounds), and
is not part of any path's price (`overhead_ns`).

Choices that shape the numbers (also in the profile's `notes`):

* Instructions are timed as throughput: six independent dependency chains (ALU, loads),
  branches not taken, as compiled XDP code mostly is (parsing loads feed compares, little
  else depends on them) -- BPF_PROG_TEST_RUN repeats independent runs, so the CPU overlaps
  them too. One chain, two chains and a compiled-like parsing unit are recorded in
  `method.variants` for comparison.
* Loads and stores use independent registers/offsets; packet loads read within the first
  64 bytes after one bounds check.
* Map lookups hit an existing entry with a 4-byte key (LPM: an 8-byte key, a /32 lookup
  matching the trie's one /24 prefix; every further trie level it walks costs more, see
  `method.variants.lpm_trie_3_prefixes`); `hash_key_byte` is the extra per hashed key
  byte, from a 16-byte-key hash map.
* Tail calls: chains of 0, 2 and 4 programs that each tail-call the next, with the index
  an immediate (the verifier patches a direct jump) or read from ctx->rx_queue_index (the
  kernel's indirect path); misses call an empty slot. Longer chains cost far more per call
  on this kind of machine (0.5 ns per call up to 4, about 6 ns per call from 8 to 32 with
  constant indices), so a profile is for chains of a few calls, as XDP programs use.
* `update.<map type>` overwrites an existing entry (BPF_ANY) of a map of that type;
  `insert.<map type>` inserts a key never used before (a counter): hash and LPM maps are
  emptied before each timing, LRU maps are kept full so every insert evicts. Each map type
  has its own price because the kernel's update paths differ (Linux kernel/bpf/hashtab.c,
  lpm_trie.c): an LRU hash update always takes a fresh node (htab_lru_map_update_elem:
  prealloc_lru_pop before the bucket lock, the old node back with htab_lru_push_free), so
  its overwrite costs an allocation like an insert; a per-CPU hash overwrites in place
  (__htab_percpu_map_update_elem: pcpu_copy_value), an LRU per-CPU hash pops a node first
  and pushes it back when the key exists (__htab_lru_percpu_map_update_elem); an LPM trie
  allocates a node for every update and frees the one it replaces (trie_update_elem).
  `lookup_miss.<map type>` looks up a key the map does not hold. `helper.map_update_elem`
  (the hash map's overwrite) prices updates of other types. `map_delete_elem` is timed as
  update+delete pairs minus the update.
* Not calibrated (reported as `uncalibrated` when a path uses them): helpers that need
  outside state (fib_lookup, perf/ring buffer output, trace_printk, spin locks,
  probe_read_kernel), kfuncs, and lookups in map types not listed in LOOKUP_MAPS.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from lifter.asm import FIRST_FUNC_TYPE, Asm, add, alu, func_btf, ld_map, mov
from lifter.encode import encode_all
from lifter.errors import LiftError
from lifter.insn import AluOp, Atomic, Call, Cond, Exit, Imm, Jump, Load, LoadImm64, Reg, Store, slots
from lifter.maptypes import map_type_by_name
from lifter.opcodes import AtomicOp, CallSrc

from .. import kernel
from ..exploration import ExplorationError
from ..helpers import HELPER_BY_NAME
from .fit import fit_profile
from .pathtiming import ESTIMATOR, gross_time, time_object
from .profile import Profile, cpu_model

#: The packet every micro-benchmark runs on: Ethernet + IPv4 + TCP, zero padded.
PACKET = (
    bytes.fromhex("0200000000010200000000020800")
    + struct.pack("!BBHHHBBH4s4s", 0x45, 0, 114, 0, 0, 64, 6, 0, bytes([10, 1, 2, 3]), bytes([10, 9, 9, 9]))
    + struct.pack("!HHIIBBHHH", 40000, 80, 1, 0, 0x50, 0x10, 65535, 0, 0)
).ljust(128, b"\0")

#: Maps whose lookup is calibrated (profile `lookup`): map type -> (key size, value size).
LOOKUP_MAPS = {
    "array": (4, 8),
    "percpu_array": (4, 8),
    "hash": (4, 8),
    "percpu_hash": (4, 8),
    "lru_hash": (4, 8),
    "lru_percpu_hash": (4, 8),
    "lpm_trie": (8, 8),
    "devmap": (4, 4),
    "devmap_hash": (4, 4),
}
BPF_F_NO_PREALLOC = 1
XDP_PASS = 2
TAIL_SLOTS = 64
EMPTY_SLOT = TAIL_SLOTS - 1


class CalibrationError(Exception):
    """A micro-program the kernel refused, or a run that failed (one line)."""


class HelperUnavailable(CalibrationError):
    """A micro-program refused because the running kernel gives XDP programs no such helper:
    there is nothing to time, and no program using the helper loads on that kernel either.
    Linux 6.18.44 (this project's machine since December 2026) refuses bpf_xdp_adjust_meta
    in XDP programs ("program of this type cannot use helper"), which earlier kernels took."""


#: What the verifier says of a helper call the running kernel does not offer the program's
#: type (kernel/bpf/verifier.c, check_helper_call): no such helper at all, or not for this type.
NO_SUCH_HELPER = ("unknown func", "cannot use helper")


@dataclass
class Settings:
    """How hard to measure: `repeat` runs per timing, `rounds` rounds, sizes scaled by
    `scale` (tests use small values; the shipped profile the defaults)."""

    repeat: int = 100_000
    rounds: int = 7
    scale: float = 1.0
    fit_repeat: int = 100_000  # per path timing of the fit's programs (as bench/cost.py)
    fit_rounds: int = 12  # the fastest half is kept (pathtiming.ESTIMATOR): it needs rounds


def helper_call(name: str) -> Call:
    return Call(0, CallSrc.HELPER, HELPER_BY_NAME[name].id)


def ret_pass() -> list:
    return [mov(0, Imm(XDP_PASS)), Exit(0)]


# --------------------------------------------------------------------------- the rig


class Rig:
    """Maps and programs loaded for one calibration, closed together."""

    def __init__(self):
        kernel.check_kernel()
        self.loader = kernel.Loader("<calibrate>")
        self.runner = self.loader.object
        self.maps: dict[str, int] = {}

    def close(self) -> None:
        self.runner.close()

    def __enter__(self) -> Rig:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def map(self, name: str, type_name: str, key_size: int, value_size: int, max_entries: int, flags: int = 0) -> int:
        mtype = map_type_by_name(type_name)
        try:
            info = self.loader.map(name, mtype.id, key_size, value_size, max_entries, flags)
        except kernel.KernelLoadError as err:
            raise CalibrationError(f"a {type_name} map: {err}") from None
        self.maps[name] = info.fd
        return info.fd

    def update(self, name: str, key: bytes, value: bytes) -> None:
        try:
            self.runner.map_update(name, key, value)
        except kernel.KernelRunError as err:
            raise CalibrationError(str(err)) from None

    def prog(self, name: str, insns: list, funcs: list[tuple[int, str, str]] | None = None) -> int:
        """Load `insns` as an XDP program; `funcs` = (pc, name, main|callback) adds BTF
        func_info (needed for bpf_loop callbacks)."""
        btf_fd, info = None, None
        try:
            if funcs:
                btf_fd = self.loader.btf(func_btf([(n, k) for _, n, k in funcs]))
                info = [(pc, FIRST_FUNC_TYPE + i) for i, (pc, _, _) in enumerate(funcs)]
            return self.loader.program(
                name, kernel.BPF_PROG_TYPE_XDP, encode_all(insns), b"GPL", btf_fd=btf_fd, func_info=info
            )
        except kernel.KernelLoadError as err:
            why = f"micro-program {name} refused by the kernel: {str(err).splitlines()[0]}"
            raise (HelperUnavailable if any(w in str(err) for w in NO_SUCH_HELPER) else CalibrationError)(why) from None

    def run(self, name: str, repeat: int) -> int:
        try:
            return self.runner.run(name, PACKET, repeat=repeat).duration_ns
        except kernel.KernelRunError as err:
            raise CalibrationError(f"micro-program {name}: {err}") from None


# --------------------------------------------------------------------------- benchmarks


@dataclass
class Bench:
    """One micro-benchmark: `make(rig, n)` returns the name of a loaded program running
    `n` units; a unit performs `per_unit` of the measured thing plus `extra` (entry ->
    count per unit) that is subtracted at calibrated prices."""

    entry: str
    make: Callable[[Rig, int], str]
    unit: int  # the middle size (sizes are 0, unit, 2*unit, scaled)
    per_unit: float = 1.0
    extra: dict[str, float] = field(default_factory=dict)
    programs: dict[int, str] = field(default_factory=dict)
    reset: str | None = None  # a map emptied before each timing (inserts need room)
    repeat_share: int = 1  # runs per timing: the settings' repeat divided by this


def _prologue(a: Asm) -> Asm:
    """r6 = ctx, r7 = data, r8 = data_end, packet bounds-checked for 64 bytes, r2-r5 read
    from the packet (unknown to the verifier), stack fp-64..fp-8 zeroed."""
    a(mov(6, 1), Load(0, 7, 6, 0, 4), Load(0, 8, 6, 4, 4), mov(9, 7), add(9, Imm(64)))
    a.jump(Cond.GT, 9, 8, "out")
    a(Load(0, 2, 7, 0, 1), Load(0, 3, 7, 1, 1), Load(0, 4, 7, 2, 1), Load(0, 5, 7, 3, 1))
    for off in range(-64, 0, 8):
        a(Store(0, 10, off, 8, Imm(0)))
    return a


def _epilogue(a: Asm) -> list:
    a.label("out")
    a(*ret_pass())
    return a.build()


def _straight(name: str, unit: Callable[[int], list], setup: Callable[[Rig, Asm], None] | None = None):
    """A program: prologue, optional setup, n units (unit(i) gives the i-th), epilogue."""

    def make(rig: Rig, n: int) -> str:
        a = _prologue(Asm())
        if setup:
            setup(rig, a)
        for i in range(n):
            a(*unit(i))
        prog = f"{name}_{n}"
        rig.prog(prog, _epilogue(a))
        return prog

    return make


def _map_value(rig: Asm, a: Asm, name: str = "cal_value") -> None:
    """r9 = pointer to the value of key 0 of a 1-entry array map (64-byte value)."""
    a(
        Store(0, 10, -72, 4, Imm(0)),
        ld_map(1, rig.maps[name]),
        mov(2, 10),
        add(2, Imm(-72)),
        helper_call("map_lookup_elem"),
    )
    a.jump(Cond.EQ, 0, Imm(0), "out")
    a(mov(9, 0), Load(0, 2, 7, 0, 1), Load(0, 3, 7, 1, 1), Load(0, 4, 7, 2, 1), Load(0, 5, 7, 3, 1))


#: Registers free for the units (r1 ctx, r6-r8 kept; r9 as the unit's setup leaves it).
FREE = (0, 2, 3, 4, 5, 9)


def _alu_unit(variant: str) -> Callable[[int], list]:
    ops = (AluOp.ADD, AluOp.XOR, AluOp.LSH, AluOp.OR, AluOp.AND, AluOp.SUB)
    if variant == "dependent":  # one chain: each result feeds the next
        return lambda i: [alu(ops[k], 2, Imm(k + 1)) for k in range(6)]
    if variant == "two":  # two interleaved chains
        return lambda i: [alu(ops[k], 2 + k % 2, Imm(k + 1)) for k in range(6)]
    return lambda i: [alu(ops[k], FREE[k], Imm(k + 1)) for k in range(6)]  # six chains


def _scalars(rig: Rig, a: Asm) -> None:
    """r0 and r9 become scalars (the prologue leaves r9 a packet pointer)."""
    a(mov(0, Imm(0)), mov(9, Imm(0)))


def _parse_unit(i: int) -> list:
    """What compiled header parsing looks like: two byte loads combined, compared, and a
    16-bit field compared (7 instructions, branches not taken)."""
    o = (i * 3) % 56
    return [
        Load(0, 2, 7, o, 1),
        Load(0, 3, 7, o + 1, 1),
        alu(AluOp.LSH, 3, Imm(8)),
        alu(AluOp.OR, 3, 2),
        Jump(0, Cond.EQ, True, 3, Imm(0x1234), 0),
        Load(0, 4, 7, o + 4, 2),
        Jump(0, Cond.GT, True, 4, Imm(0x7FFF0000), 0),
    ]


def _jump_unit(i: int) -> list:
    # Not taken (r2-r5 hold packet bytes < 256); offset 0: the next instruction either way.
    return [
        Jump(0, Cond.EQ, True, 2, Imm(0x1234), 0),
        Jump(0, Cond.GT, True, 3, Reg(4), 0),
        Jump(0, Cond.SGT, False, 4, Imm(0x4321), 0),
        Jump(0, Cond.NE, True, 5, Reg(5), 0),
    ]


def _goto_make(rig: Rig, n: int) -> str:
    """Blocks laid out pairwise swapped (1, 0, 3, 2, ...): each `r2 += 1; goto next` jumps
    over a live block."""
    a = _prologue(Asm())
    a.goto("b0")
    order = []
    for i in range(0, n, 2):
        order += [i + 1, i] if i + 1 < n else [i]
    for i in order:
        a.label(f"b{i}")
        a(add(2, Imm(1)))
        a.goto(f"b{i + 1}")
    a.label(f"b{n}")
    prog = f"goto_{n}"
    rig.prog(prog, _epilogue(a))
    return prog


def _call_make(rig: Rig, n: int) -> str:
    a = _prologue(Asm())
    for _ in range(n):
        a.call_local("sub")
    a.label("out")
    a(*ret_pass())
    if n:
        a.label("sub")
        a(mov(0, Imm(0)), Exit(0))
    prog = f"call_{n}"
    rig.prog(prog, a.build())
    return prog


def _loop_make(count: int) -> Callable[[Rig, int], str]:
    def make(rig: Rig, n: int) -> str:
        a = _prologue(Asm())
        for _ in range(n):
            a(mov(1, Imm(count)))
            a.func_addr(2, "cb")
            a(mov(3, Imm(0)), mov(4, Imm(0)), helper_call("loop"))
        a.label("out")
        a(*ret_pass())
        funcs = [(0, "main", "main")]
        if n:
            a.label("cb")
            a(mov(0, Imm(0)), Exit(0))
        insns = a.build()
        if n:
            funcs.append((len(insns) and sum(slots(i) for i in insns) - 2, "cb", "callback"))
        prog = f"loop{count}_{n}"
        rig.prog(prog, insns, funcs)
        return prog

    return make


def _helper_bench(
    entry: str, unit: list, extra: dict[str, float], setup=None, per_unit: float = 1.0, size: int = 16
) -> Bench:
    name = entry.split(".", 1)[1][:10]
    return Bench(entry, _straight(name, lambda i: unit, setup), size, per_unit, extra)


def _grow_shrink_bench(helper: str) -> Bench:
    """A packet-geometry helper (adjust_head/tail/meta): a unit moves the edge by -4 then
    +4, two calls, so the packet is the same after every unit."""
    unit = [mov(1, 6), mov(2, Imm(-4)), helper_call(helper), mov(1, 6), mov(2, Imm(4)), helper_call(helper)]
    return _helper_bench(f"helper.{helper}", unit, {"insn.alu": 4}, per_unit=2)


def _key_setup(key: bytes) -> Callable[[Rig, Asm], None]:
    """Write `key` at fp-16 (and a value at fp-32) before the units."""

    def setup(rig: Rig, a: Asm) -> None:
        for off in range(0, len(key), 4):
            word = int.from_bytes(key[off : off + 4].ljust(4, b"\0"), "little", signed=True)
            a(Store(0, 10, -16 + off, 4, Imm(word)))

    return setup


def _lookup_bench(map_name: str, type_name: str) -> Bench:
    key_size = LOOKUP_MAPS[type_name][0] if type_name in LOOKUP_MAPS else 16
    key = _lookup_key(type_name, key_size)
    unit = [ld_map(1, -1), mov(2, 10), add(2, Imm(-16)), helper_call("map_lookup_elem")]

    def make(rig: Rig, n: int) -> str:
        u = [ld_map(1, rig.maps[map_name])] + unit[1:]
        return _straight(f"lk_{map_name[-8:]}", lambda i: u, _key_setup(key))(rig, n)

    entry = {"cal_hash16": "lookup.hash16", "cal_lpm3": "variant.lpm_trie_3_prefixes"}.get(
        map_name, f"lookup.{type_name}"
    )
    return Bench(entry, make, 16, 1.0, {"insn.ld_imm64": 1, "insn.alu": 2})


#: Map types whose update from a program is calibrated (profile `update`): the lookup maps
#: but devmaps (a program cannot update them).
UPDATE_MAPS = tuple(t for t in LOOKUP_MAPS if not t.startswith("devmap"))


def _update_bench(type_name: str) -> Bench:
    """map_update_elem(BPF_ANY) of an existing entry (the lookup bench's key, in a map of
    its own): an overwrite (an LPM trie allocates a new node even so, as trie_update_elem
    does)."""
    key = _lookup_key(type_name, LOOKUP_MAPS[type_name][0])

    def make(rig: Rig, n: int) -> str:
        unit = _update_call(rig.maps[f"cal_up_{type_name}"])
        return _straight(f"up_{type_name[-9:]}", lambda i: unit, _key_setup(key))(rig, n)

    return Bench(f"update.{type_name}", make, 16, 1.0, {"insn.ld_imm64": 1, "insn.alu": 5})


def _miss_bench(type_name: str) -> Bench:
    """A lookup of a key the map does not hold (arrays: an index past max_entries; LPM: an
    address no prefix covers)."""
    key_size = LOOKUP_MAPS[type_name][0]
    key = (
        struct.pack("<I", 32) + bytes([192, 168, 0, 1])
        if type_name == "lpm_trie"
        else bytes([0xE8, 3] + [0] * (key_size - 2))
    )
    unit = [ld_map(1, -1), mov(2, 10), add(2, Imm(-16)), helper_call("map_lookup_elem")]

    def make(rig: Rig, n: int) -> str:
        u = [ld_map(1, rig.maps[f"cal_{type_name}"])] + unit[1:]
        return _straight(f"lm_{type_name[-9:]}", lambda i: u, _key_setup(key))(rig, n)

    return Bench(f"lookup_miss.{type_name}", make, 16, 1.0, {"insn.ld_imm64": 1, "insn.alu": 2})


#: Map types with inserts (arrays always hold every index) and how many entries their insert
#: map holds per run of a timing (None: a small map kept full, every insert evicts).
INSERT_MAPS = {"hash": 64, "percpu_hash": 64, "lru_hash": None, "lru_percpu_hash": None, "lpm_trie": 64}
#: Entries of the LRU insert maps (full after the first timing; see INSERT_MAPS).
LRU_INSERT_ENTRIES = 1024
#: Insert timings run the settings' repeat divided by this (the map must hold every insert).
INSERT_REPEAT_SHARE = 20


def _insert_entries(settings: Settings, type_name: str) -> int:
    per_run = INSERT_MAPS[type_name]
    if per_run is None:
        return LRU_INSERT_ENTRIES
    return per_run * max(1, settings.repeat // INSERT_REPEAT_SHARE) + 2 * per_run


def _insert_bench(type_name: str) -> Bench:
    """map_update_elem(BPF_ANY) of a key never used before: the key is a counter in an
    array map's value, incremented by each unit. Hash and LPM maps are emptied before each
    timing (an insert into a map with room, as trie_update_elem/htab_map_update_elem take
    it); LRU maps are kept full, so every insert evicts (a busy LRU map's steady state:
    prealloc_lru_pop shrinks the LRU lists)."""
    lpm = type_name == "lpm_trie"

    def make(rig: Rig, n: int) -> str:
        fd = rig.maps[f"cal_ins_{type_name}"]
        key_off = -12 if lpm else -16

        def setup(rig: Rig, a: Asm) -> None:
            _map_value(rig, a, "cal_counter")
            if lpm:
                a(Store(0, 10, -16, 4, Imm(32)))

        unit = [
            Load(0, 2, 9, 0, 4),
            add(2, Imm(1)),
            Store(0, 9, 0, 4, Reg(2)),
            Store(0, 10, key_off, 4, Reg(2)),
            *_update_call(fd),
        ]
        return _straight(f"in_{type_name[-9:]}", lambda i: unit, setup)(rig, n)

    extra = {"insn.load_map": 1, "insn.alu": 6, "insn.store_map": 1, "insn.store_stack": 1, "insn.ld_imm64": 1}
    reset = None if INSERT_MAPS[type_name] is None else f"cal_ins_{type_name}"
    return Bench(f"insert.{type_name}", make, 16, 1.0, extra, reset=reset, repeat_share=INSERT_REPEAT_SHARE)


def _update_call(fd: int) -> list:
    """map_update_elem(map `fd`, key at fp-16, value at fp-32, BPF_ANY)."""
    key, value = [mov(2, 10), add(2, Imm(-16))], [mov(3, 10), add(3, Imm(-32))]
    return [ld_map(1, fd), *key, *value, mov(4, Imm(0)), helper_call("map_update_elem")]


def _lookup_key(type_name: str, key_size: int) -> bytes:
    if type_name == "lpm_trie":
        return struct.pack("<I", 32) + bytes([10, 1, 2, 3])
    return bytes([1] + [0] * (key_size - 1))


def _tail_chain(kind: str) -> Callable[[Rig, int], str]:
    """Programs T_k (k = 0..33) where T_k tail-calls slot k+1 and slot 33 returns: entering
    at 33-n makes n tail calls."""

    def make(rig: Rig, n: int) -> str:
        return f"tc_{kind}_{33 - n}"

    return make


def _tail_miss(kind: str) -> Callable[[Rig, int], str]:
    def unit(rig: Rig) -> list:
        fd = rig.maps["cal_progs"]
        if kind == "constant":
            return [mov(1, 6), ld_map(2, fd), mov(3, Imm(EMPTY_SLOT)), helper_call("tail_call")]
        return [mov(1, 6), Load(0, 3, 6, 16, 4), add(3, Imm(EMPTY_SLOT)), ld_map(2, fd), helper_call("tail_call")]

    def make(rig: Rig, n: int) -> str:
        u = unit(rig)
        return _straight(f"tm_{kind[:3]}", lambda i: u)(rig, n)

    return make


def _setup_tail_chains(rig: Rig) -> None:
    fd_const = rig.map("cal_progs", "prog_array", 4, 4, TAIL_SLOTS)
    fd_var = rig.map("cal_progs_var", "prog_array", 4, 4, TAIL_SLOTS)
    for kind, fd, name in (("constant", fd_const, "cal_progs"), ("variable", fd_var, "cal_progs_var")):
        for k in range(34):
            if k == 33:
                insns = ret_pass()
            elif kind == "constant":
                insns = [ld_map(2, fd), mov(3, Imm(k + 1)), helper_call("tail_call")] + ret_pass()
            else:
                insns = [Load(0, 3, 1, 16, 4), add(3, Imm(k + 1)), ld_map(2, fd), helper_call("tail_call")] + ret_pass()
            prog_fd = rig.prog(f"tc_{kind}_{k}", insns)
            if k:
                rig.update(name, k.to_bytes(4, "little"), prog_fd.to_bytes(4, "little"))


def _setup_maps(rig: Rig, settings: Settings) -> None:
    rig.map("cal_value", "array", 4, 64, 1)
    for type_name, (ks, vs) in LOOKUP_MAPS.items():
        flags = BPF_F_NO_PREALLOC if type_name == "lpm_trie" else 0
        name = f"cal_{type_name}"
        rig.map(name, type_name, ks, vs, 16, flags)
        info = rig.runner.maps[name]
        if type_name in ("devmap", "devmap_hash"):
            value = (1).to_bytes(4, "little")  # the loopback device
        else:
            value = bytes(vs)
        if type_name == "lpm_trie":
            rig.update(name, struct.pack("<I", 24) + bytes([10, 1, 2, 0]), value)
            rig.map("cal_lpm3", "lpm_trie", ks, vs, 16, flags)
            for plen, addr in ((8, [10, 0, 0, 0]), (16, [10, 1, 0, 0]), (24, [10, 1, 2, 0])):
                rig.update("cal_lpm3", struct.pack("<I", plen) + bytes(addr), value)
            continue
        if info.percpu:
            value = (value + bytes(-len(value) % 8)) * kernel.possible_cpus()
        rig.update(name, _lookup_key(type_name, ks), value)
    for type_name in UPDATE_MAPS:  # their own maps: updates must not change what lookups find
        ks, vs = LOOKUP_MAPS[type_name]
        name = f"cal_up_{type_name}"
        rig.map(name, type_name, ks, vs, 16, BPF_F_NO_PREALLOC if type_name == "lpm_trie" else 0)
        value = bytes(vs)
        if rig.runner.maps[name].percpu:
            value = (value + bytes(-len(value) % 8)) * kernel.possible_cpus()
        rig.update(name, _lookup_key(type_name, ks), value)
    rig.map("cal_counter", "array", 4, 64, 1)
    for type_name in INSERT_MAPS:
        ks, vs = LOOKUP_MAPS[type_name]
        entries = _insert_entries(settings, type_name)
        rig.map(f"cal_ins_{type_name}", type_name, ks, vs, entries, BPF_F_NO_PREALLOC if type_name == "lpm_trie" else 0)
    rig.map("cal_hash16", "hash", 16, 8, 16)
    rig.update("cal_hash16", _lookup_key("hash", 16), bytes(8))
    rig.map("cal_upd", "hash", 4, 8, 16)
    rig.update("cal_upd", _lookup_key("hash", 4), bytes(8))
    _setup_tail_chains(rig)


def benches() -> list[Bench]:
    """Every micro-benchmark, in the order their prices are derived (what a bench
    subtracts is measured before it)."""
    out = [
        Bench("insn.alu", _straight("alu", _alu_unit("six"), _scalars), 200, 6),
        Bench("variant.alu_two_chains", _straight("alu2", _alu_unit("two")), 200, 6),
        Bench("variant.alu_dependent", _straight("alud", _alu_unit("dependent")), 200, 6),
        Bench("variant.parse", _straight("parse", _parse_unit), 100, 7),
        Bench("insn.mul", _straight("mul", lambda i: [alu(AluOp.MUL, r, Imm(3)) for r in FREE], _scalars), 100, 6),
        Bench("insn.div", _straight("div", lambda i: [alu(AluOp.DIV, 2, 3), alu(AluOp.MOD, 4, 3)]), 100, 2),
        Bench(
            "insn.ld_imm64",
            _straight(
                "ldimm", lambda i: [LoadImm64(0, r, 0x1122334455 + i * 6 + k) for k, r in enumerate(FREE)], _scalars
            ),
            100,
            6,
        ),
        Bench("insn.jump", _straight("jump", _jump_unit), 200, 4),
        Bench("insn.goto", _goto_make, 300, 1, {"insn.alu": 1}),
        Bench(
            "insn.load_pkt",
            _straight(
                "ldpkt",
                lambda i: [Load(0, r, 7, (6 * i + k) % 60, (1, 2, 4)[k % 3]) for k, r in enumerate(FREE)],
                _scalars,
            ),
            100,
            6,
        ),
        Bench(
            "insn.store_pkt",
            _straight(
                "stpkt",
                lambda i: [
                    Store(0, 7, (4 * i) % 60, 1, Reg(2)),
                    Store(0, 7, (4 * i + 1) % 60, 1, Reg(3)),
                    Store(0, 7, (4 * i + 2) % 60, 2, Reg(4)),
                    Store(0, 7, (4 * i + 4) % 60, 4, Reg(5)),
                ],
            ),
            200,
            4,
        ),
        Bench(
            "insn.load_stack",
            _straight(
                "ldstk", lambda i: [Load(0, r, 10, -8 * (1 + (i + k) % 8), 8) for k, r in enumerate(FREE)], _scalars
            ),
            100,
            6,
        ),
        Bench(
            "insn.store_stack",
            _straight("ststk", lambda i: [Store(0, 10, -8 * (1 + (i + k) % 8), 8, Reg(2 + k)) for k in range(4)]),
            200,
            4,
        ),
        Bench(
            "insn.load_map",
            _straight(
                "ldmap", lambda i: [Load(0, r, 9, 4 * ((i + k) % 16), 4) for k, r in enumerate(FREE[:5])], _map_value
            ),
            100,
            5,
        ),
        Bench(
            "insn.store_map",
            _straight(
                "stmap", lambda i: [Store(0, 9, 4 * ((i + k) % 16), 4, Reg(2 + k)) for k in range(4)], _map_value
            ),
            200,
            4,
        ),
        Bench("insn.load_ctx", _straight("ldctx", lambda i: [Load(0, 2, 6, 0, 4), Load(0, 3, 6, 4, 4)]), 200, 2),
        Bench("insn.load_ctx_dev", _straight("ldctxd", lambda i: [Load(0, 2, 6, 12, 4), Load(0, 3, 6, 16, 4)]), 100, 2),
        Bench(
            "insn.atomic",
            _straight("atomic", lambda i: [Atomic(0, AtomicOp.ADD, False, 8, 9, 8 * (i % 4), 2)], _map_value),
            100,
            1,
        ),
        Bench("call.bpf2bpf", _call_make, 50, 1, {"insn.alu": 1}),
    ]
    out += [
        _helper_bench("helper.ktime_get_ns", [helper_call("ktime_get_ns")], {}),
        _helper_bench("helper.ktime_get_boot_ns", [helper_call("ktime_get_boot_ns")], {}),
        _helper_bench("helper.ktime_get_tai_ns", [helper_call("ktime_get_tai_ns")], {}),
        _helper_bench("helper.get_prandom_u32", [helper_call("get_prandom_u32")], {}),
        _helper_bench("helper.get_smp_processor_id", [helper_call("get_smp_processor_id")], {}, size=64),
        _helper_bench(
            "helper.csum_diff",
            [
                mov(1, 10),
                add(1, Imm(-8)),
                mov(2, Imm(4)),
                mov(3, 10),
                add(3, Imm(-16)),
                mov(4, Imm(4)),
                mov(5, Imm(0)),
                helper_call("csum_diff"),
            ],
            {"insn.alu": 7},
        ),
        _helper_bench("helper.redirect", [mov(1, Imm(1)), mov(2, Imm(0)), helper_call("redirect")], {"insn.alu": 2}),
        Bench(
            "helper.redirect_map", _straight("redirmap", lambda i: [], None), 16, 1, {"insn.ld_imm64": 1, "insn.alu": 2}
        ),
        *(_grow_shrink_bench(name) for name in ("xdp_adjust_head", "xdp_adjust_tail", "xdp_adjust_meta")),
        _helper_bench("helper.xdp_get_buff_len", [mov(1, 6), helper_call("xdp_get_buff_len")], {"insn.alu": 1}),
        _helper_bench(
            "helper.xdp_load_bytes",
            [mov(1, 6), mov(2, Imm(0)), mov(3, 10), add(3, Imm(-16)), mov(4, Imm(4)), helper_call("xdp_load_bytes")],
            {"insn.alu": 5},
        ),
        _helper_bench(
            "helper.xdp_store_bytes",
            [mov(1, 6), mov(2, Imm(60)), mov(3, 10), add(3, Imm(-16)), mov(4, Imm(4)), helper_call("xdp_store_bytes")],
            {"insn.alu": 5},
        ),
        Bench("helper.map_update_elem", _straight("update", lambda i: []), 16, 1, {"insn.ld_imm64": 1, "insn.alu": 5}),
        Bench(
            "helper.map_delete_elem",
            _straight("delete", lambda i: []),
            16,
            1,
            {"insn.ld_imm64": 2, "insn.alu": 10, "helper.map_update_elem": 1},
        ),
        Bench("loop.1", _loop_make(1), 16, 1, {"insn.alu": 4, "insn.ld_imm64": 1}),
        Bench("loop.5", _loop_make(5), 16, 1, {"insn.alu": 8, "insn.ld_imm64": 1}),
    ]
    out += [_update_bench(t) for t in UPDATE_MAPS]
    out += [_insert_bench(t) for t in INSERT_MAPS]
    out += [_miss_bench(t) for t in LOOKUP_MAPS]
    out += [_lookup_bench(f"cal_{t}", t) for t in LOOKUP_MAPS] + [
        _lookup_bench("cal_hash16", "hash"),
        _lookup_bench("cal_lpm3", "lpm_trie"),
    ]
    out += [
        Bench("tail_call.constant", _tail_chain("constant"), 2, 1, {"insn.ld_imm64": 1, "insn.alu": 1}),
        Bench(
            "tail_call.variable",
            _tail_chain("variable"),
            2,
            1,
            {"insn.ld_imm64": 1, "insn.alu": 1, "insn.load_ctx_dev": 1},
        ),
        Bench("tail_call.constant_miss", _tail_miss("constant"), 16, 1, {"insn.ld_imm64": 1, "insn.alu": 2}),
        Bench(
            "tail_call.variable_miss",
            _tail_miss("variable"),
            16,
            1,
            {"insn.ld_imm64": 1, "insn.alu": 2, "insn.load_ctx_dev": 1},
        ),
    ]
    return out


def _finish_benches(rig: Rig, out: list[Bench]) -> None:
    """Benches whose units need map fds (known once the rig's maps exist)."""
    by = {b.entry: b for b in out}
    devmap = rig.maps["cal_devmap"]
    by["helper.redirect_map"].make = _straight(
        "redirmap", lambda i: [ld_map(1, devmap), mov(2, Imm(0)), mov(3, Imm(0)), helper_call("redirect_map")]
    )
    upd = rig.maps["cal_upd"]
    update = _update_call(upd)
    delete = [ld_map(1, upd), mov(2, 10), add(2, Imm(-16)), helper_call("map_delete_elem")]
    key = _key_setup(_lookup_key("hash", 4))
    by["helper.map_update_elem"].make = _straight("update", lambda i: update, key)
    by["helper.map_delete_elem"].make = _straight("delete", lambda i: update + delete, key)


# --------------------------------------------------------------------------- measuring


def _slope(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def calibrate(
    settings: Settings | None = None,
    progress: Callable[[str], None] | None = None,
    fit_objects: list[str] | None = None,
) -> Profile:
    """Measure everything (see the module doc) and return the profile; with `fit_objects`,
    time their paths and fit the instruction prices on them (analyzer/cost/fit.py). Raises
    kernel.KernelUnavailable without the privileges, CalibrationError when a micro-program
    is refused or the objects give too few timed paths to fit."""
    settings = settings or Settings()
    profile = measure_micro(settings, progress)
    if not fit_objects:
        return profile
    rows: list[dict] = []
    for i, path in enumerate(fit_objects, 1):
        if progress:
            progress(f"timing paths of {os.path.basename(path)} ({i}/{len(fit_objects)})")
        try:
            rows += time_object(path, profile, settings.fit_repeat, settings.fit_rounds)
        except (LiftError, kernel.KernelLoadError, ExplorationError) as err:
            rows.append({"object": str(path), "skip": str(err).splitlines()[0]})
    try:
        return fit_profile(profile, rows)
    except ValueError as err:
        raise CalibrationError(str(err)) from None


def measure_micro(settings: Settings, progress: Callable[[str], None] | None = None) -> Profile:
    """The micro-program part of `calibrate` (every price measured in isolation)."""
    with Rig() as rig:
        _setup_maps(rig, settings)
        all_benches = benches()
        _finish_benches(rig, all_benches)
        unmeasured: dict[str, str] = {}
        for b in all_benches:
            unit = (
                b.unit
                if b.entry in ("tail_call.constant", "tail_call.variable")
                else max(1, round(b.unit * settings.scale))
            )
            try:
                for n in (0, unit, 2 * unit):
                    b.programs[n] = b.make(rig, n)
            except HelperUnavailable as err:
                if not b.entry.startswith("helper.") or any(b.entry in o.extra for o in all_benches):
                    raise  # a price other benches are measured with: no profile without it
                unmeasured[b.entry] = str(err)
        all_benches = [b for b in all_benches if b.entry not in unmeasured]
        rig.prog("empty", ret_pass())
        raw: dict[str, list[float]] = {b.entry: [] for b in all_benches}
        empty: list[int] = []
        for r in range(settings.rounds):
            if progress:
                progress(f"round {r + 1}/{settings.rounds}")
            empty.append(rig.run("empty", settings.repeat))
            for b in all_benches:
                xs = sorted(b.programs)
                ys = []
                for n in xs:
                    if b.reset:
                        rig.runner.map_clear(b.reset)
                    ys.append(rig.run(b.programs[n], max(1, settings.repeat // b.repeat_share)))
                raw[b.entry].append(_slope(xs, ys) / b.per_unit)
        empty.append(rig.run("empty", settings.repeat))
    return _profile(all_benches, raw, empty, settings, unmeasured)


def _profile(
    all_benches: list[Bench],
    raw: dict[str, list[float]],
    empty: list[int],
    settings: Settings,
    unmeasured: dict[str, str] | None = None,
) -> Profile:
    """Subtract what each unit executes besides the measured thing, in bench order.
    `unmeasured`: helper prices left out (entry -> the kernel's refusal, HelperUnavailable):
    named in `method.unmeasured` and the notes; `cost` then says the price is missing."""
    values: dict[str, float] = {"insn.exit": 0.0, "insn.call_helper": 0.0}
    spread: dict[str, list[float]] = {}
    for b in all_benches:
        rounds = [r - sum(values.get(k, 0.0) * n for k, n in b.extra.items()) for r in raw[b.entry]]
        values[b.entry] = statistics.median(rounds)
        spread[b.entry] = [round(min(rounds), 4), round(max(rounds), 4)]
    # bpf_loop: a call with 1 and with 5 callback invocations.
    loop1, loop5 = values.pop("loop.1"), values.pop("loop.5")
    callback = (loop5 - loop1) / 4
    values["helper.loop"] = loop1 - callback
    values["call.callback"] = callback
    hash4, hash16 = values["lookup.hash"], values.pop("lookup.hash16")
    key_byte = (hash16 - hash4) / 12
    variants = {k.split(".", 1)[1]: round(values.pop(k), 4) for k in list(values) if k.startswith("variant.")}

    def clamp(v: float) -> float:  # noise can take a tiny price below 0
        return round(max(v, 0.0), 4)

    def section(prefix: str) -> dict[str, float]:
        return {k.split(".", 1)[1]: clamp(v) for k, v in values.items() if k.startswith(prefix + ".")}

    kernel_release = platform.release()
    return Profile(
        kernel=kernel_release,
        cpu=cpu_model(),
        machine=platform.machine(),
        created=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        overhead_ns=float(gross_time(empty)),
        insn=section("insn"),
        helper=section("helper"),
        lookup=section("lookup"),
        hash_key_byte=clamp(key_byte),
        tail_call=section("tail_call"),
        call=section("call"),
        update=section("update"),
        insert=section("insert"),
        lookup_miss=section("lookup_miss"),
        method={
            "repeat": settings.repeat,
            "rounds": settings.rounds,
            "scale": settings.scale,
            "fit_repeat": settings.fit_repeat,
            "fit_rounds": settings.fit_rounds,
            "packet_bytes": len(PACKET),
            "overhead_runs": empty,
            "variants": variants,
            "raw": {k: round(statistics.median(v), 4) for k, v in raw.items()},
            "unmeasured": dict(unmeasured or {}),
        },
        spread=spread,
        notes=[
            "instructions timed as throughput (six independent chains); see method.variants",
            "insn.exit and insn.call_helper are 0 by definition: the exit is in overhead_ns or "
            "call.bpf2bpf, the call instruction in the helper's price",
            "lookups hit an existing entry, 4-byte keys (lpm_trie: 8, one prefix); hash_key_byte per "
            "key byte beyond 4, from a 16-byte-key hash map",
            "helper.map_update_elem overwrites an existing hash entry; map_delete_elem from update+delete pairs",
            "lookup_miss: a key the map does not hold; insert: a key never used before (hash, LPM: a map with "
            "room; LRU: a full map, every insert evicts), timed with repeat/" + str(INSERT_REPEAT_SHARE) + " runs",
            f"overhead_ns: the empty program `r0 = XDP_PASS; exit`, {ESTIMATOR} over rounds as paths are timed "
            "(pathtiming.estimate; BPF_PROG_TEST_RUN reports whole ns)",
            *(f"{k} not measured: {why}" for k, why in sorted((unmeasured or {}).items())),
        ],
    )
