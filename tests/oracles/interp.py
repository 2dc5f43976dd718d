"""A concrete interpreter of the lifter's IR: one input, one run, every instruction counted.

The independent count the cost model is checked against (tests/test_cost.py). It shares
nothing with analyzer/: no z3, no symbolic values, no helper table -- helpers are
interpreted here by their ids from include/uapi/linux/bpf.h and the kernel's semantics
(net/core/filter.c, kernel/bpf/helpers.c). It takes the lifted object (lifter/) and concrete
inputs: the packet, the xdp_md fields, the initial map contents (a function of map name and
key bytes) and the results of helpers whose value is not a function of the input (time,
random numbers: a function of the helper's name).

It records: instructions executed (one per IR instruction, ld_imm64 included, across
bpf-to-bpf calls, bpf_loop callbacks and tail calls), the return value, and counters of
what ran -- instruction kinds by the memory they touched, helper calls by id, lookups by
map, packet bytes read and written, tail calls taken, callback invocations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from lifter.insn import (
    Alu,
    AluOp,
    Atomic,
    ByteOrder,
    Call,
    Cond,
    Endian,
    Exit,
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
from lifter.opcodes import AtomicOp, CallSrc

M64 = (1 << 64) - 1
HEADROOM = 256
MAX_TAIL = 33
EINVAL = 22


class Unsupported(Exception):
    """The run needs something this interpreter does not model (message says what)."""


class BadAccess(Exception):
    """The run read or wrote outside the packet, the stack or a map value: the kernel's
    verifier would not allow it, so the input (a witness) or the program model is wrong."""


@dataclass(frozen=True)
class Ptr:
    """A pointer: `region` (a key into Machine.memory) and a byte offset."""

    region: tuple
    off: int


@dataclass(frozen=True)
class MapHandle:
    name: str


@dataclass(frozen=True)
class FuncAddr:
    key: tuple


@dataclass
class Result:
    retval: int
    steps: int
    counts: Counter = field(default_factory=Counter)
    helpers: Counter = field(default_factory=Counter)  # by helper id
    lookups: Counter = field(default_factory=Counter)  # by map name
    updates: Counter = field(default_factory=Counter)  # map_update_elem calls by map name
    misses: Counter = field(default_factory=Counter)  # lookups that found no entry, by map name
    inserts: Counter = field(default_factory=Counter)  # updates of a key not in the map, by map name
    tail_calls: list = field(default_factory=list)  # (caller, map, index, target)
    sites: set = field(default_factory=set)  # (section, pc) of conditional jumps executed


def _s64(v: int) -> int:
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


class Machine:
    def __init__(
        self,
        obj,
        program,
        packet: bytes,
        *,
        ingress_ifindex: int = 1,
        rx_queue_index: int = 0,
        map_value: Callable[[str, bytes], bytes | None],
        helper_value: Callable[[str], int],
        max_steps: int = 5_000_000,
    ):
        self.obj = obj
        self.program = program
        self.maps = {m.name: m for m in obj.maps}
        self.map_value = map_value
        self.helper_value = helper_value
        self.max_steps = max_steps
        buf = bytearray(HEADROOM) + bytearray(packet) + bytearray(4096)
        self.memory: dict[tuple, bytearray] = {("pkt",): buf}
        self.head = HEADROOM
        self.end = HEADROOM + len(packet)
        self.meta = HEADROOM
        self.ctx_fields = {12: ingress_ifindex, 16: rx_queue_index, 20: 0}
        self.result = Result(0, 0)
        self.insn_at: dict[tuple, dict[int, object]] = {}

    # -- memory

    def _buf(self, region: tuple) -> bytearray:
        buf = self.memory.get(region)
        if buf is None:
            if region[0] == "map":
                _, name, key = region
                mdef = self.maps[name]
                init = self.map_value(name, key)
                buf = bytearray(init if init is not None else bytes(mdef.value_size))
                self.memory[region] = buf
            else:
                raise Unsupported(f"memory region {region}")
        return buf

    def load(self, ptr, off: int, size: int, count: str) -> int | Ptr:
        if not isinstance(ptr, Ptr):
            raise Unsupported("load through a non-pointer")
        kind = ptr.region[0]
        at = ptr.off + off
        if kind == "ctx":
            self.result.counts["load_ctx" if at in (0, 4, 8) else "load_ctx_dev"] += 1
            if at == 0:
                return Ptr(("pkt",), self.head)
            if at == 4:
                return Ptr(("pkt",), self.end)
            if at == 8:
                return Ptr(("pkt",), self.meta)
            return self.ctx_fields[at]
        self.result.counts[f"load_{kind}"] += 1
        if kind == "pkt":
            if not (self.meta <= at and at + size <= self.end):
                raise BadAccess(f"packet read at {at - self.head} outside the packet")
            self.result.counts["pkt_read_bytes"] += size
        if kind == "stack":
            slots_ = self.memory.setdefault(("ptrs",) + ptr.region, {})
            if size == 8 and at in slots_:
                return slots_[at]
        buf = self._buf(ptr.region)
        if at < 0 or at + size > len(buf):
            raise BadAccess(f"{kind} read out of bounds")
        return int.from_bytes(buf[at : at + size], "little")

    def store(self, ptr, off: int, size: int, value, count: bool = True) -> None:
        if not isinstance(ptr, Ptr):
            raise Unsupported("store through a non-pointer")
        kind = ptr.region[0]
        at = ptr.off + off
        if count:
            self.result.counts[f"store_{kind}"] += 1
        if kind == "pkt":
            self.result.counts["pkt_write_bytes"] += size
        if kind == "stack":
            slots_ = self.memory.setdefault(("ptrs",) + ptr.region, {})
            for o in list(slots_):
                if o < at + size and at < o + 8:
                    del slots_[o]
            if isinstance(value, (Ptr, MapHandle, FuncAddr)):
                if size != 8:
                    raise Unsupported("partial pointer spill")
                slots_[at] = value
                return
        if not isinstance(value, int):
            raise Unsupported(f"pointer stored to {kind} memory")
        buf = self._buf(ptr.region)
        if at < 0 or at + size > len(buf):
            raise BadAccess(f"{kind} write out of bounds")
        buf[at : at + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")

    def read_bytes(self, ptr, n: int) -> bytes:
        if isinstance(ptr, Ptr) and ptr.region[0] == "stack":
            self.memory.setdefault(("ptrs",) + ptr.region, {})
        buf = self._buf(ptr.region)
        return bytes(buf[ptr.off : ptr.off + n])

    # -- running

    def insn(self, func, pc: int):
        table = self.insn_at.get(func.key)
        if table is None:
            table = self.insn_at[func.key] = {i.pc: i for i in func.insns}
        return table[pc]

    def run(self) -> Result:
        self.frames = []
        self.depth_id = 0
        self.enter_program(self.program)
        while True:
            out = self.step()
            if out is not None:
                self.result.retval = out
                return self.result

    def enter_program(self, prog) -> None:
        self.prog = prog
        self.regs = [0] * 11
        self.regs[1] = Ptr(("ctx",), 0)
        self.frames = [{"func": prog.entry, "ret": None, "saved": None, "loop": None}]
        self._new_stack()
        self.pc = prog.entry.start

    def _new_stack(self) -> None:
        self.depth_id += 1
        region = ("stack", self.depth_id)
        self.memory[region] = bytearray(512)
        self.regs[10] = Ptr(region, 512)

    def step(self) -> int | None:
        frame = self.frames[-1]
        insn = self.insn(frame["func"], self.pc)
        self.result.steps += 1
        if self.result.steps > self.max_steps:
            raise Unsupported("step budget exceeded")
        r = self.regs
        nxt = self.pc + slots(insn)
        if isinstance(insn, Alu):
            self.result.counts[
                "mul"
                if insn.op == AluOp.MUL
                else "div"
                if insn.op in (AluOp.DIV, AluOp.SDIV, AluOp.MOD, AluOp.SMOD)
                else "alu"
            ] += 1
            src = insn.src.value if isinstance(insn.src, Imm) else r[insn.src.n]
            r[insn.dst] = self.alu(insn, r[insn.dst], src)
        elif isinstance(insn, Neg):
            self.result.counts["alu"] += 1
            v = r[insn.dst]
            r[insn.dst] = (-v) & M64 if insn.wide else (-v) & 0xFFFFFFFF
        elif isinstance(insn, MovSx):
            self.result.counts["alu"] += 1
            v = r[insn.src] & ((1 << insn.bits) - 1)
            if v >> (insn.bits - 1):
                v -= 1 << insn.bits
            r[insn.dst] = v & (M64 if insn.wide else 0xFFFFFFFF)
        elif isinstance(insn, Endian):
            self.result.counts["alu"] += 1
            nbytes = insn.bits // 8
            v = r[insn.dst] & ((1 << insn.bits) - 1)
            if insn.order != ByteOrder.LE:
                v = int.from_bytes(v.to_bytes(nbytes, "little"), "big")
            r[insn.dst] = v
        elif isinstance(insn, Load):
            v = self.load(r[insn.base], insn.off, insn.size, "load")
            if insn.signed and isinstance(v, int) and v >> (8 * insn.size - 1):
                v = (v - (1 << (8 * insn.size))) & M64
            r[insn.dst] = v
        elif isinstance(insn, Store):
            value = insn.src.value & M64 if isinstance(insn.src, Imm) else r[insn.src.n]
            self.store(r[insn.base], insn.off, insn.size, value)
        elif isinstance(insn, Atomic):
            self.result.counts["atomic"] += 1
            self.atomic(insn)
        elif isinstance(insn, LoadImm64):
            self.result.counts["ld_imm64"] += 1
            r[insn.dst] = self.imm64(insn)
        elif isinstance(insn, LegacyLoad):
            raise Unsupported("legacy packet load")
        elif isinstance(insn, Jump):
            self.result.counts["jump"] += 1
            self.result.sites.add((frame["func"].section, insn.pc))
            src = insn.src.value & M64 if isinstance(insn.src, Imm) else r[insn.src.n]
            if self.cond(insn, r[insn.dst], src):
                nxt = insn.target
        elif isinstance(insn, Goto):
            self.result.counts["goto"] += 1
            nxt = insn.target
        elif isinstance(insn, Call):
            return self.call(insn)
        elif isinstance(insn, Exit):
            self.result.counts["exit"] += 1
            return self.exit()
        else:
            raise Unsupported(f"instruction {insn!r}")
        self.pc = nxt
        return None

    # -- ALU and jumps

    def alu(self, insn: Alu, a, b):
        if insn.op == AluOp.MOV:
            if isinstance(b, int):
                return b & (M64 if insn.wide else 0xFFFFFFFF)
            if not insn.wide:
                raise Unsupported("32-bit move of a pointer")
            return b
        if isinstance(a, Ptr) or isinstance(b, Ptr):
            if insn.wide and insn.op == AluOp.ADD and isinstance(a, Ptr) and isinstance(b, int):
                return Ptr(a.region, a.off + _s64(b))
            if insn.wide and insn.op == AluOp.ADD and isinstance(b, Ptr) and isinstance(a, int):
                return Ptr(b.region, b.off + _s64(a))
            if insn.wide and insn.op == AluOp.SUB and isinstance(a, Ptr) and isinstance(b, int):
                return Ptr(a.region, a.off - _s64(b))
            if (
                insn.wide
                and insn.op == AluOp.SUB
                and isinstance(a, Ptr)
                and isinstance(b, Ptr)
                and a.region == b.region
            ):
                return (a.off - b.off) & M64
            raise Unsupported("pointer arithmetic")
        if not isinstance(a, int) or not isinstance(b, int):
            raise Unsupported("ALU on a map or function reference")
        bits = 64 if insn.wide else 32
        mask = (1 << bits) - 1
        a, b = a & mask, b & mask
        sa = a - (1 << bits) if a >> (bits - 1) else a
        sb = b - (1 << bits) if b >> (bits - 1) else b
        op = insn.op
        if op == AluOp.ADD:
            v = a + b
        elif op == AluOp.SUB:
            v = a - b
        elif op == AluOp.MUL:
            v = a * b
        elif op == AluOp.DIV:
            v = 0 if b == 0 else a // b
        elif op == AluOp.SDIV:
            q = abs(sa) // abs(sb) if sb else 0
            v = q if (sa < 0) == (sb < 0) else -q
        elif op == AluOp.MOD:
            v = a if b == 0 else a % b
        elif op == AluOp.SMOD:
            if sb == 0:
                v = a
            else:
                m = abs(sa) % abs(sb)
                v = -m if sa < 0 else m
        elif op == AluOp.OR:
            v = a | b
        elif op == AluOp.AND:
            v = a & b
        elif op == AluOp.XOR:
            v = a ^ b
        elif op == AluOp.LSH:
            v = a << (b & (bits - 1))
        elif op == AluOp.RSH:
            v = a >> (b & (bits - 1))
        elif op == AluOp.ARSH:
            v = sa >> (b & (bits - 1))
        else:
            raise Unsupported(f"ALU op {op}")
        return v & mask

    def cond(self, insn: Jump, a, b) -> bool:
        if isinstance(a, Ptr) or isinstance(b, Ptr):
            if isinstance(a, Ptr) and isinstance(b, Ptr) and a.region == b.region:
                a, b = a.off, b.off
                signed = True
            elif insn.cond in (Cond.EQ, Cond.NE) and (a == 0 or b == 0):
                return insn.cond == Cond.NE  # a valid pointer is never NULL
            else:
                raise Unsupported("pointer comparison")
            bits = 64
            ua, ub = a, b
        else:
            if not isinstance(a, int) or not isinstance(b, int):
                raise Unsupported("comparison of a reference")
            signed = False
            bits = 64 if insn.wide else 32
            mask = (1 << bits) - 1
            ua, ub = a & mask, b & mask
        sa = ua - (1 << bits) if not signed and ua >> (bits - 1) else ua
        sb = ub - (1 << bits) if not signed and ub >> (bits - 1) else ub
        c = insn.cond
        if signed and c in (Cond.GT, Cond.GE, Cond.LT, Cond.LE):
            c = Cond("s" + c.value)
        return {
            Cond.EQ: ua == ub,
            Cond.NE: ua != ub,
            Cond.SET: (ua & ub) != 0,
            Cond.GT: ua > ub,
            Cond.GE: ua >= ub,
            Cond.LT: ua < ub,
            Cond.LE: ua <= ub,
            Cond.SGT: sa > sb,
            Cond.SGE: sa >= sb,
            Cond.SLT: sa < sb,
            Cond.SLE: sa <= sb,
        }[c]

    def atomic(self, insn: Atomic) -> None:
        base = self.regs[insn.base]
        if insn.op == AtomicOp.LOAD_ACQ:
            self.regs[insn.src] = self.load(base, insn.off, insn.size, "load")
            self.result.counts[f"load_{base.region[0]}"] -= 1
            return
        if insn.op == AtomicOp.STORE_REL:
            self.store(base, insn.off, insn.size, self.regs[insn.src], count=False)
            return
        old = self.load(base, insn.off, insn.size, "load")
        self.result.counts[f"load_{base.region[0]}"] -= 1
        mask = (1 << (8 * insn.size)) - 1
        v = self.regs[insn.src] & mask
        if insn.op == AtomicOp.CMPXCHG:
            new = v if old == self.regs[0] & mask else old
        else:
            new = {
                AtomicOp.ADD: old + v,
                AtomicOp.OR: old | v,
                AtomicOp.AND: old & v,
                AtomicOp.XOR: old ^ v,
                AtomicOp.XCHG: v,
            }[insn.op] & mask
        self.store(base, insn.off, insn.size, new, count=False)
        if insn.fetch:
            self.regs[0 if insn.op == AtomicOp.CMPXCHG else insn.src] = old

    def imm64(self, insn: LoadImm64):
        ref = insn.ref
        if isinstance(ref, MapRef):
            if ref.offset is None:
                return MapHandle(ref.map)
            mdef = self.maps[ref.map]
            return Ptr(("map", ref.map, bytes(mdef.key_size or 4)), ref.offset)
        if isinstance(ref, FuncRef):
            return FuncAddr((ref.section, ref.offset))
        if ref is not None:
            raise Unsupported(f"ld_imm64 of {ref}")
        return insn.value & M64

    # -- calls

    def exit(self) -> int | None:
        frame = self.frames.pop()
        if frame["loop"] is not None:
            return self._loop_returned(frame)
        if not self.frames:
            r0 = self.regs[0]
            if not isinstance(r0, int):
                raise Unsupported("program returns a pointer")
            return r0
        self.regs[6:10] = frame["saved"]
        self.regs[10] = frame["fp"]
        self.pc = frame["ret"]
        return None

    def call(self, insn: Call) -> int | None:
        if insn.kind == CallSrc.LOCAL and insn.callee is not None:
            self.result.counts["call_local"] += 1
            callee = self.obj.functions[insn.callee]
            self.frames.append(
                {"func": callee, "ret": insn.pc + 1, "saved": list(self.regs[6:10]), "loop": None, "fp": self.regs[10]}
            )
            self._new_stack()
            self.pc = callee.start
            return None
        if insn.kind != CallSrc.HELPER:
            raise Unsupported("kfunc call")
        self.result.counts["call_helper"] += 1
        self.result.helpers[insn.imm] += 1
        r = self.regs
        self.pc = insn.pc + 1
        h = insn.imm
        if h == 1:  # map_lookup_elem
            name = self._map(r[1])
            self.result.lookups[name] += 1
            key = self.read_bytes(r[2], self.maps[name].key_size or 4)
            found = self._exists(name, key)
            self.result.misses[name] += not found
            r[0] = Ptr(("map", name, key), 0) if found else 0
        elif h == 2:  # map_update_elem
            name = self._map(r[1])
            self.result.updates[name] += 1
            mdef = self.maps[name]
            key = self.read_bytes(r[2], mdef.key_size or 4)
            self.result.inserts[name] += not self._exists(name, key)
            self.memory[("map", name, key)] = bytearray(self.read_bytes(r[3], mdef.value_size))
            self.memory.setdefault(("exists",), {})[(name, key)] = True
            r[0] = self.helper_value("map_update_elem") & M64
        elif h == 3:  # map_delete_elem
            name = self._map(r[1])
            key = self.read_bytes(r[2], self.maps[name].key_size or 4)
            self.memory.setdefault(("exists",), {})[(name, key)] = False
            self.memory.pop(("map", name, key), None)
            r[0] = self.helper_value("map_delete_elem") & M64
        elif h in (5, 125, 208):
            r[0] = self.helper_value({5: "ktime_get_ns", 125: "ktime_get_boot_ns", 208: "ktime_get_tai_ns"}[h]) & M64
        elif h in (7, 8):
            r[0] = self.helper_value("get_prandom_u32" if h == 7 else "get_smp_processor_id") & 0xFFFFFFFF
        elif h == 28:  # csum_diff: an opaque 32-bit result here
            r[0] = self.helper_value("csum_diff") & 0xFFFFFFFF
        elif h == 12:
            return self._tail_call()
        elif h == 23:  # redirect
            r[0] = 4 if r[2] & M64 == 0 else 0
        elif h == 51:  # redirect_map
            name = self._map(r[1])
            key = (r[2] & ((1 << (8 * (self.maps[name].key_size or 4))) - 1)).to_bytes(
                self.maps[name].key_size or 4, "little"
            )
            self.result.counts["redirect_map_lookups"] += 1
            r[0] = 4 if self._exists(name, key) else r[3] & 3
        elif h == 44:  # xdp_adjust_head: data stays after struct xdp_frame (40 bytes) + metadata
            new = self.head + _s32(r[2])
            metalen = self.head - self.meta
            ok = 40 + metalen <= new <= self.end - 14
            if ok:
                self.meta += new - self.head
                self.head = new
            r[0] = 0 if ok else (-EINVAL) & M64
        elif h == 65:  # xdp_adjust_tail
            new = self.end + _s32(r[2])
            ok = new - self.head >= 14 and new <= HEADROOM + 4096 - 256 - 320
            if ok:
                self.end = new
            r[0] = 0 if ok else (-EINVAL) & M64
        elif h == 188:  # xdp_get_buff_len
            r[0] = self.end - self.head
        elif h in (189, 190):  # xdp_load_bytes / xdp_store_bytes
            off, buf, n = r[2] & 0xFFFFFFFF, r[3], r[4]
            ok = off + n <= self.end - self.head
            if ok:
                if h == 189:
                    data = bytes(self.memory[("pkt",)][self.head + off : self.head + off + n])
                    self._write_raw(buf, data)
                    self.result.counts["pkt_read_bytes"] += n
                else:
                    data = self.read_bytes(buf, n)
                    self.memory[("pkt",)][self.head + off : self.head + off + n] = data
                    self.result.counts["pkt_write_bytes"] += n
            r[0] = 0 if ok else (-EINVAL) & M64
        elif h == 181:
            return self._loop()
        elif h in (93, 94):  # spin_lock/unlock: nothing to interpret
            r[0] = 0
        else:
            raise Unsupported(f"helper {h}")
        for i in range(1, 6):
            r[i] = None
        return None

    def _write_raw(self, ptr: Ptr, data: bytes) -> None:
        buf = self._buf(ptr.region)
        buf[ptr.off : ptr.off + len(data)] = data
        if ptr.region[0] == "stack":
            slots_ = self.memory.setdefault(("ptrs",) + ptr.region, {})
            for o in list(slots_):
                if o < ptr.off + len(data) and ptr.off < o + 8:
                    del slots_[o]

    def _map(self, handle) -> str:
        if not isinstance(handle, MapHandle):
            raise Unsupported("helper map argument is not a map")
        mdef = self.maps[handle.name]
        if mdef.type is not None and mdef.type.holds == "map":
            raise Unsupported("map in map")
        return handle.name

    def _exists(self, name: str, key: bytes) -> bool:
        state = self.memory.get(("exists",), {}).get((name, key))
        if state is not None:
            return state
        mdef = self.maps[name]
        if mdef.type is not None and mdef.type.name in ("array", "percpu_array"):
            return int.from_bytes(key, "little") < (mdef.max_entries or 0)
        if mdef.type is None and mdef.origin == "global":
            return True
        return self.map_value(name, key) is not None

    def _tail_call(self) -> int | None:
        r = self.regs
        name = self._map(r[2])
        index = r[3] & 0xFFFFFFFF
        mdef = self.maps[name]
        target = mdef.static_values.get(index) if len(self.result.tail_calls) < MAX_TAIL else None
        prog = next((p for p in self.obj.programs if target in (p.name, p.entry.name)), None) if target else None
        if prog is None:
            if index < (mdef.max_entries or 0) and self.map_value(name, index.to_bytes(4, "little")) is not None:
                raise Unsupported("tail call into a slot filled at run time")
            r[0] = self.helper_value("tail_call") & M64
            for i in range(1, 6):
                r[i] = None
            return None
        self.result.tail_calls.append((self.prog.name, name, index, prog.name))
        self.enter_program(prog)
        return None

    def _loop(self) -> int | None:
        r = self.regs
        count, cb, ctx = r[1] & 0xFFFFFFFF, r[2], r[3]
        if not isinstance(cb, FuncAddr):
            raise Unsupported("bpf_loop without a callback")
        if count == 0:
            r[0] = 0
            for i in range(1, 6):
                r[i] = None
            return None
        self._call_callback(cb.key, 0, count, ctx, self.pc)
        return None

    def _call_callback(self, key: tuple, index: int, count: int, ctx, ret: int) -> None:
        callee = self.obj.functions[key]
        self.frames.append(
            {
                "func": callee,
                "ret": ret,
                "saved": list(self.regs[6:10]),
                "fp": self.regs[10],
                "loop": (key, index, count, ctx),
            }
        )
        self.regs[1], self.regs[2] = index, ctx
        self.regs[3] = self.regs[4] = self.regs[5] = None
        self._new_stack()
        self.result.counts["callback"] += 1
        self.pc = callee.start

    def _loop_returned(self, frame: dict) -> None:
        key, index, count, ctx = frame["loop"]
        ret = self.regs[0] if isinstance(self.regs[0], int) else 1
        self.regs[6:10] = frame["saved"]
        self.regs[10] = frame["fp"]
        if ret & 0xFFFFFFFF or index + 1 >= count:
            self.regs[0] = index + 1 if ret & 0xFFFFFFFF else count
            for i in range(1, 6):
                self.regs[i] = None
            self.pc = frame["ret"]
            return None
        self._call_callback(key, index + 1, count, ctx, frame["ret"])
        return None


def run(obj, program, packet: bytes, **inputs) -> Result:
    """Run `program` of `obj` once on `packet` (see Machine for the inputs)."""
    return Machine(obj, program, packet, **inputs).run()
