"""Calls, returns and helper semantics for the explorer.

`call` handles bpf-to-bpf calls (a new frame, r6-r9 preserved), kfuncs and unresolved calls
(unsupported), and helpers through the `model` column of helpers.py. `exit` returns from a
subprogram or a bpf_loop callback, or ends the path with the verdict in r0.

Kernel sources modelled (Linux 6.18): bpf_xdp_redirect / bpf_xdp_redirect_map and
__bpf_xdp_redirect_map (net/core/filter.c: flags must be 0 for redirect, else XDP_ABORTED;
a map miss returns the low bits of flags), bpf_loop (kernel/bpf/bpf_iter.c: stops at the
first non-zero callback result and returns the number of calls), bpf_xdp_adjust_head/tail/
meta (net/core/filter.c), bpf_tail_call (kernel/bpf/core.c: index >= max_entries, an empty
slot or more than MAX_TAIL_CALL_CNT calls make it fall through), bpf_csum_diff
(net/core/filter.c with x86-64's csum_partial: see "checksums" below; checked against the
kernel by tests/test_helpers.py). Helpers whose result is truly arbitrary (time, random
numbers, the CPU, routing) return fresh inputs, and `verify` accepts any value for bytes
that depend on them. bpf_l3/l4_csum_replace and bpf_csum_update are tc-only: the verifier
refuses them in XDP programs, so the table has no entry for them.
"""

from __future__ import annotations

from typing import Protocol

import z3

from lifter.insn import Call, Exit
from lifter.maps import MapDef
from lifter.opcodes import CallSrc
from lifter.program import BpfObject

from .exploration import UNKNOWN, Options
from .helpers import helper
from .state import Frame, LoopCall, MapWrite, State, TailCall
from .symbolic import PACKET_FRAGS, Fresh, Pointer, Region, RegionKind, Scalar, Value, bv, const_value, scalar
from .xdp import HEADROOM, INVALID, MAX_LINEAR_PACKET, MAX_META, MAX_TAIL_CALLS, VERDICTS

#: errno values returned by helpers.
EINVAL, ENOENT, E2BIG = 22, 2, 7


class Engine(Protocol):
    """What these semantics need of the engine that steps a path (explore.Explorer is one):
    its inputs and bounds, the path bookkeeping it keeps, and its memory, map and branching
    operations. Nothing else of the engine is used here."""

    obj: BpfObject
    options: Options
    maps: dict[str, MapDef]
    fresh: Fresh
    written_maps: set[str]
    read_maps: set[str]
    programs_seen: list[str]

    def where(self, s: State, pc: int | None = None) -> str: ...
    def end_path(
        self, s: State, verdict: str, retval: z3.BitVecRef | None, truncated: str | None = None, pc: int | None = None
    ) -> None: ...
    def fork_on(self, s: State, cond: z3.BoolRef, pc: int, kind: str) -> list[tuple[bool, State]]: ...
    def read_bytes(self, s: State, ptr: Value | None, off: int, size: int, pc: int) -> list | None: ...
    def write_bytes(self, s: State, ptr: Pointer, at: z3.BitVecRef, data: list, pc: int) -> None: ...
    def add_effect(self, s: State, kind: str, target: str, pc: int) -> None: ...
    def key_bits(self, name: str) -> int: ...
    def map_found(self, s: State, name: str, key: z3.BitVecRef) -> z3.BoolRef: ...
    def access(self, s: State, name: str, key: z3.BitVecRef) -> None: ...


def call(ex: Engine, s: State, insn: Call) -> list[State]:
    if insn.kind == CallSrc.HELPER:
        return _helper(ex, s, insn)
    if insn.kind == CallSrc.LOCAL and insn.callee is not None:
        callee = ex.obj.functions[insn.callee]
        saved = tuple(s.regs[6:10])
        s.frames.append(Frame(callee, insn.pc + 1, saved))
        s.stacks.append({})
        s.regs[10] = Pointer(Region(RegionKind.STACK, frame=s.depth), bv(0))
        s.pc = callee.start
        return [s]
    what = (
        f"kfunc {insn.symbol or insn.imm}"
        if insn.kind == CallSrc.KFUNC
        else f"call to undefined function {insn.symbol or '?'}"
    )
    ex.end_path(s, UNKNOWN, None, truncated=f"unsupported: {what} at {ex.where(s)}")
    return []


def exit(ex: Engine, s: State, insn: Exit) -> list[State]:
    frame = s.frames[-1]
    if frame.loop is not None:
        return _loop_callback_returned(ex, s, frame)
    if len(s.frames) > 1:
        s.frames.pop()
        s.stacks.pop()
        s.regs[6:10] = list(frame.saved)
        for r in range(1, 6):
            s.regs[r] = None
        s.regs[10] = Pointer(Region(RegionKind.STACK, frame=s.depth), bv(0))
        s.pc = frame.ret_pc
        return [s]
    r0 = s.regs[0]
    if not isinstance(r0, Scalar):
        s.note(f"program returns a pointer at {ex.where(s)}")
        ex.end_path(s, UNKNOWN, None, pc=insn.pc)
        return []
    action = z3.simplify(z3.Extract(31, 0, r0.bv))
    value = const_value(action)
    if value is not None:
        ex.end_path(s, VERDICTS.get(value, INVALID), r0.bv, pc=insn.pc)
        return []
    # A computed verdict (from a map value, redirect_map's fallback...): one path per value.
    rest = [s]
    for v, name in list(VERDICTS.items()) + [(None, INVALID)]:
        if not rest:
            break
        cond = action == v if v is not None else z3.UGT(action, 4)
        sides = ex.fork_on(rest[0], cond, insn.pc, "verdict")
        rest = []
        for taken, t in sides:
            if taken:
                ex.end_path(t, name, r0.bv, pc=insn.pc)
            else:
                rest = [t]
    return []


def _helper(ex: Engine, s: State, insn: Call) -> list[State]:
    h = helper(insn.imm)
    model = h.model if h else "havoc"
    name = h.name if h else f"helper_{insn.imm}"
    if h is None:
        s.note(f"unsupported: helper {insn.imm} at {ex.where(s)}")
    for effect in h.effects if h else ():
        if effect in ("output", "lock", "map_delete", "map_write"):
            target = name
            arg = s.regs[1] if effect.startswith("map") or model in ("output",) else None
            if isinstance(arg, Pointer) and arg.region.kind == RegionKind.MAP:
                target = arg.region.name
            ex.add_effect(s, effect, target, insn.pc)
    program, depth = s.program, s.depth
    s.pc = insn.pc + 1
    outs = _MODELS[model](ex, s, insn, name)
    for o in outs:
        if o.program is program and o.depth == depth and o.pc == insn.pc + 1:
            for r in range(1, 6):  # helpers clobber r1-r5
                o.regs[r] = None
    return [o for o in outs if o.frames]


def _zero_or_einval(ex: Engine, s: State, ok: z3.BoolRef, pc: int, apply) -> list[State]:
    """The usual helper contract: on success `apply` the effect and return 0, else -EINVAL."""

    def good(t):
        apply(t)
        t.regs[0] = scalar(bv(0))

    def bad(t):
        t.regs[0] = scalar(bv(-EINVAL))

    return _either(ex, s, ok, pc, good, bad)


def _either(ex: Engine, s: State, cond: z3.BoolRef, pc: int, good, bad) -> list[State]:
    """Fork on a helper-internal condition (success/failure...) and apply `good`/`bad`."""
    out = []
    for ok, t in ex.fork_on(s, cond, pc, "helper"):
        (good if ok else bad)(t)
        out.append(t)
    return out


def _arg_map(ex: Engine, s: State, reg: int):
    v = s.regs[reg]
    if isinstance(v, Pointer) and v.region.kind == RegionKind.MAP:
        return ex.maps[v.region.name]
    return None


def _key(ex: Engine, s: State, name: str, reg: int, pc: int) -> z3.BitVecRef:
    size = ex.maps[name].key_size or 4
    data = ex.read_bytes(s, s.regs[reg], 0, size, pc)
    if data is None or any(not isinstance(b, z3.BitVecRef) for b in data):
        s.note(f"map key for {name} not modelled at {ex.where(s)}")
        return (
            z3.Extract(8 * size - 1, 0, z3.Concat(*[ex.fresh.unknown("key") for _ in range((size + 7) // 8)]))
            if size > 8
            else z3.Extract(8 * size - 1, 0, ex.fresh.unknown("key"))
        )
    return z3.simplify(z3.Concat(*reversed(data)) if size > 1 else data[0])


def _fresh(ex, s, insn, name, bits=64):
    v = ex.fresh.helper(name)
    s.regs[0] = scalar(v if bits == 64 else z3.ZeroExt(32, z3.Extract(31, 0, v)))
    return [s]


def _m_fresh64(ex, s, insn, name):
    return _fresh(ex, s, insn, name)


def _m_fresh32(ex, s, insn, name):
    return _fresh(ex, s, insn, name, 32)


def _m_havoc(ex, s, insn, name):
    return _fresh(ex, s, insn, name)


def _m_effect(ex, s, insn, name):
    s.regs[0] = None
    return [s]


_m_output = _m_fresh64


def _m_havoc_mem(ex, s, insn, name):
    """The helper writes memory it is given (fib_lookup params...): those bytes become
    unknown; r0 is the helper's result."""
    ptr, size = s.regs[2 if name == "fib_lookup" else 1], s.regs[3 if name == "fib_lookup" else 2]
    n = const_value(size.bv) if isinstance(size, Scalar) else None
    if isinstance(ptr, Pointer) and n is not None and n <= 512:
        at = z3.simplify(ptr.off)
        ex.write_bytes(s, ptr, at, [z3.Extract(7, 0, ex.fresh.helper(name)) for _ in range(n)], insn.pc)
    else:
        s.note(f"memory written by bpf_{name} not modelled at {ex.where(s)}")
    return _fresh(ex, s, insn, name)


def _m_map_lookup(ex, s, insn, name):
    mdef = _arg_map(ex, s, 1)
    if mdef is None:
        s.note(f"bpf_map_lookup_elem on something that is not a map at {ex.where(s)}")
        return _fresh(ex, s, insn, name)
    if mdef.type is not None and mdef.type.holds == "map":
        ex.end_path(s, UNKNOWN, None, truncated=f"unsupported: map-in-map lookup in {mdef.name} at {ex.where(s)}")
        return []
    key = _key(ex, s, mdef.name, 2, insn.pc)
    ex.access(s, mdef.name, key)
    found = ex.map_found(s, mdef.name, key)
    s.regs[0] = Pointer(Region(RegionKind.MAP_VALUE, mdef.name, key), bv(0), z3.simplify(z3.Not(found)))
    return [s]


def _m_map_update(ex, s, insn, name):
    mdef = _arg_map(ex, s, 1)
    if mdef is None:
        s.note(f"bpf_map_update_elem on something that is not a map at {ex.where(s)}")
        return _fresh(ex, s, insn, name)
    key = _key(ex, s, mdef.name, 2, insn.pc)
    size = mdef.value_size or 0
    data = ex.read_bytes(s, s.regs[3], 0, size, insn.pc)
    if data is None or any(not isinstance(b, z3.BitVecRef) for b in data):
        data = [z3.Extract(7, 0, ex.fresh.unknown("value")) for _ in range(size)]
    ex.written_maps.add(mdef.name)
    ex.access(s, mdef.name, key)
    s.maps[mdef.name] = s.maps.get(mdef.name, ()) + (MapWrite("put", key, None, tuple(data)),)
    # The result depends on the map's fill level and flags (-E2BIG, -EEXIST...): unknown.
    return _fresh(ex, s, insn, name)


def _m_map_delete(ex, s, insn, name):
    mdef = _arg_map(ex, s, 1)
    if mdef is None:
        return _fresh(ex, s, insn, name)
    key = _key(ex, s, mdef.name, 2, insn.pc)
    ex.written_maps.add(mdef.name)
    s.maps[mdef.name] = s.maps.get(mdef.name, ()) + (MapWrite("delete", key),)
    return _fresh(ex, s, insn, name)


def _m_redirect(ex, s, insn, name):
    ifindex, flags = s.regs[1], s.regs[2]
    if not isinstance(ifindex, Scalar) or not isinstance(flags, Scalar):
        s.note(f"bpf_redirect arguments not modelled at {ex.where(s)}")
        return _fresh(ex, s, insn, name)
    target = z3.simplify(z3.Extract(31, 0, ifindex.bv))

    def ok(t):
        t.redirect = ("ifindex", target)
        t.regs[0] = scalar(bv(4))

    def bad(t):
        t.regs[0] = scalar(bv(0))

    return _either(ex, s, flags.bv == 0, insn.pc, ok, bad)


def _m_redirect_map(ex, s, insn, name):
    mdef = _arg_map(ex, s, 1)
    key_v, flags = s.regs[2], s.regs[3]
    if mdef is None or not isinstance(key_v, Scalar) or not isinstance(flags, Scalar):
        s.note(f"bpf_redirect_map arguments not modelled at {ex.where(s)}")
        return _fresh(ex, s, insn, name)
    bits = ex.key_bits(mdef.name)
    key = z3.simplify(z3.Extract(bits - 1, 0, key_v.bv)) if bits <= 64 else None
    if key is None:
        return _fresh(ex, s, insn, name)
    ex.access(s, mdef.name, key)
    found = ex.map_found(s, mdef.name, key)
    # __bpf_xdp_redirect_map: a miss returns flags' low bits (the fallback action).
    fallback = z3.simplify(flags.bv & 3)
    s.regs[0] = scalar(z3.simplify(z3.If(found, bv(4), fallback)))
    s.redirect = ("map", mdef.name, key)
    return [s]


def _m_tail_call(ex, s, insn, name):
    mdef = _arg_map(ex, s, 2)
    idx_v = s.regs[3]
    if mdef is None or not isinstance(idx_v, Scalar):
        s.note(f"bpf_tail_call arguments not modelled at {ex.where(s)}")
        return _fresh(ex, s, insn, name)
    idx = z3.simplify(z3.Extract(31, 0, idx_v.bv))
    const = const_value(idx)
    chain_full = len(s.tail_calls) >= MAX_TAIL_CALLS
    ex.read_maps.add(mdef.name)
    outs: list[State] = []
    rest: list[State] = [s]
    # Slots the object fills statically (libbpf writes `.values` at load) are followed.
    targets = {slot: _program_named(ex, name) for slot, name in mdef.static_values.items()}
    targets = {slot: prog for slot, prog in sorted(targets.items()) if prog is not None}
    for slot, prog in [] if chain_full else targets.items():
        if not rest:
            break
        sides = ex.fork_on(rest[0], idx == slot, insn.pc, "tail_call")
        rest = []
        for hit, t in sides:
            if hit:
                t.tail_calls = t.tail_calls + (TailCall(t.program.name, mdef.name, const, prog.name, insn.pc),)
                _enter_program(ex, t, prog)
                outs.append(t)
            else:
                rest = [t]
    if not rest:
        return outs
    t = rest[0]
    # Any other slot: filled by the control plane (unknown program) or empty (falls through).
    others = z3.And(z3.ULT(idx, bv(mdef.max_entries or 0, 32)), *[idx != slot for slot in targets])
    ex.access(t, mdef.name, idx)
    filled = z3.BoolVal(False) if chain_full else z3.And(others, ex.map_found(t, mdef.name, idx))
    for hit, u in ex.fork_on(t, filled, insn.pc, "tail_call"):
        if hit:
            u.tail_calls = u.tail_calls + (TailCall(u.program.name, mdef.name, const, None, insn.pc),)
            ex.end_path(
                u,
                UNKNOWN,
                None,
                truncated=f"tail call into an unknown program ({mdef.name}"
                f"[{const if const is not None else 'variable index'}]) at {ex.where(u, insn.pc)}",
            )
        else:
            # The helper returns a negative error (the JITs leave r0 alone): unknown.
            u.regs[0] = scalar(ex.fresh.helper("tail_call"))
            outs.append(u)
    return outs


def _program_named(ex, name: str):
    for prog in ex.obj.programs:
        if prog.name == name or prog.entry.name == name:
            return prog
    return None


def _enter_program(ex: Engine, t: State, prog) -> None:
    ctx = Pointer(Region(RegionKind.CTX), bv(0))
    t.program = prog
    t.frames = [Frame(prog.entry)]
    t.stacks = [{}]
    t.regs = [None] * 11
    t.regs[1] = ctx
    t.regs[10] = Pointer(Region(RegionKind.STACK, frame=0), bv(0))
    t.pc = prog.entry.start
    t.loops = {}
    if prog.name not in ex.programs_seen:
        ex.programs_seen.append(prog.name)


def _m_loop(ex, s, insn, name):
    nr, cb, ctx = s.regs[1], s.regs[2], s.regs[3]
    count = const_value(nr.bv) if isinstance(nr, Scalar) else None
    if not (isinstance(cb, Pointer) and cb.region.kind == RegionKind.FUNC) or count is None:
        ex.end_path(s, UNKNOWN, None, truncated=f"unsupported: bpf_loop with a variable count at {ex.where(s)}")
        return []
    count &= 0xFFFFFFFF
    if count > ex.options.loop_bound:
        ex.end_path(
            s,
            UNKNOWN,
            None,
            truncated=f"bpf_loop of {count} iterations at {ex.where(s)} is over --loop-bound {ex.options.loop_bound}",
        )
        return []
    if count == 0:
        s.regs[0] = scalar(bv(0))
        return [s]
    section, start = cb.region.name.rsplit(":", 1)
    key = (section, int(start))
    s.pc = insn.pc + 1
    _call_callback(ex, s, LoopCall(key, 0, count, ctx), insn.pc + 1)
    return [s]


def _call_callback(ex: Engine, s: State, loop: LoopCall, ret_pc: int) -> None:
    callee = ex.obj.functions[loop.callback]
    saved = tuple(s.regs[6:10])
    s.frames.append(Frame(callee, ret_pc, saved, loop))
    s.stacks.append({})
    s.regs[1] = scalar(bv(loop.index))
    s.regs[2] = loop.ctx
    s.regs[3] = s.regs[4] = s.regs[5] = None
    s.regs[10] = Pointer(Region(RegionKind.STACK, frame=s.depth), bv(0))
    s.pc = callee.start


def _loop_callback_returned(ex: Engine, s: State, frame: Frame) -> list[State]:
    loop = frame.loop
    r0 = s.regs[0]
    ret = r0.bv if isinstance(r0, Scalar) else ex.fresh.unknown("callback")
    s.frames.pop()
    s.stacks.pop()
    s.regs[6:10] = list(frame.saved)
    s.regs[10] = Pointer(Region(RegionKind.STACK, frame=s.depth), bv(0))

    def stop(t):
        t.regs[0] = scalar(bv(loop.index + 1))
        t.pc = frame.ret_pc

    def go_on(t):
        if loop.index + 1 >= loop.count:
            t.regs[0] = scalar(bv(loop.count))
            t.pc = frame.ret_pc
        else:
            _call_callback(ex, t, LoopCall(loop.callback, loop.index + 1, loop.count, loop.ctx), frame.ret_pc)

    out = []
    for stopped, t in ex.fork_on(s, z3.Extract(31, 0, ret) != 0, frame.ret_pc - 1, "callback"):
        (stop if stopped else go_on)(t)
        out.append(t)
    return out


def _m_adjust_head(ex, s, insn, name):
    delta = s.regs[2]
    if not isinstance(delta, Scalar):
        return _fresh(ex, s, insn, name)
    d = z3.SignExt(32, z3.Extract(31, 0, delta.bv))
    new_head = z3.simplify(s.head + d)
    # bpf_xdp_adjust_head: data must stay after the xdp_frame (+ metadata) and leave
    # at least ETH_HLEN bytes before data_end.
    ok = z3.And(new_head - s.meta >= -HEADROOM, new_head <= s.end - 14)

    def apply(t):
        t.head = new_head

    return _zero_or_einval(ex, s, ok, insn.pc, apply)


def _m_adjust_meta(ex, s, insn, name):
    delta = s.regs[2]
    if not isinstance(delta, Scalar):
        return _fresh(ex, s, insn, name)
    d = z3.SignExt(32, z3.Extract(31, 0, delta.bv))
    new_meta = z3.simplify(s.meta - d)
    ok = z3.And(new_meta >= 0, new_meta <= MAX_META, (new_meta & 3) == 0, s.head - new_meta >= -HEADROOM)

    def apply(t):
        t.meta = new_meta

    return _zero_or_einval(ex, s, ok, insn.pc, apply)


def _m_adjust_tail(ex, s, insn, name):
    delta = s.regs[2]
    if not isinstance(delta, Scalar):
        return _fresh(ex, s, insn, name)
    d = z3.SignExt(32, z3.Extract(31, 0, delta.bv))
    new_end = z3.simplify(s.end + d)
    ok = z3.And(new_end - s.head >= 14, new_end <= MAX_LINEAR_PACKET)

    def apply(t):
        t.end = new_end

    return _zero_or_einval(ex, s, ok, insn.pc, apply)


def _m_buff_len(ex, s, insn, name):
    s.regs[0] = scalar(z3.simplify(s.end - s.head + PACKET_FRAGS))
    return [s]


def _m_load_bytes(ex, s, insn, name):
    off, buf, size = s.regs[2], s.regs[3], s.regs[4]
    n = const_value(size.bv) if isinstance(size, Scalar) else None
    if not isinstance(off, Scalar) or not isinstance(buf, Pointer) or n is None:
        return _m_havoc_mem(ex, s, insn, name)
    src = Pointer(Region(RegionKind.PACKET), z3.simplify(s.head + z3.ZeroExt(32, z3.Extract(31, 0, off.bv))))
    data = ex.read_bytes(s, src, 0, n, insn.pc)
    ok = z3.ULE(z3.ZeroExt(32, z3.Extract(31, 0, off.bv)) + n, s.end - s.head)

    def apply(t):
        ex.write_bytes(t, buf, z3.simplify(buf.off), data, insn.pc)

    return _zero_or_einval(ex, s, ok, insn.pc, apply)


def _m_store_bytes(ex, s, insn, name):
    off, buf, size = s.regs[2], s.regs[3], s.regs[4]
    n = const_value(size.bv) if isinstance(size, Scalar) else None
    if not isinstance(off, Scalar) or not isinstance(buf, Pointer) or n is None:
        s.note(f"bpf_xdp_store_bytes arguments not modelled at {ex.where(s)}")
        return _fresh(ex, s, insn, name)
    data = ex.read_bytes(s, buf, 0, n, insn.pc)
    at = z3.simplify(s.head + z3.ZeroExt(32, z3.Extract(31, 0, off.bv)))
    ok = z3.ULE(z3.ZeroExt(32, z3.Extract(31, 0, off.bv)) + n, s.end - s.head)

    def apply(t):
        ex.write_bytes(t, Pointer(Region(RegionKind.PACKET), bv(0)), at, data, insn.pc)

    return _zero_or_einval(ex, s, ok, insn.pc, apply)


# --- checksums --------------------------------------------------------------------------
# bpf_csum_diff as Linux >= 6.13 computes it (net/core/filter.c, since commit "bpf:
# bpf_csum_diff: optimize and homogenize for all archs"; before it the result was not folded
# to 16 bits and depended on the architecture):
#
#     ret = seed;
#     if (from_size && to_size) ret = csum_sub(csum_partial(to, to_size, ret),
#                                              csum_partial(from, from_size, 0));
#     else if (to_size)         ret = csum_partial(to, to_size, ret);
#     else if (from_size)       ret = ~csum_partial(from, from_size, ~ret);
#     return csum_from32to16(ret);
#
# with x86-64's csum_partial (arch/x86/lib/csum-partial_64.c, Linux >= 6.8, which dropped
# the byte-swapped path for odd addresses): 64-bit little-endian words (the tail
# zero-padded) added to the seed with end-around carry, folded to 32 bits. Every step is an
# end-around-carry sum, so the result is 0 only when every addend is 0, else the value in
# [1, 2^32 - 1] of the sum modulo 2^32 - 1 -- what `_ones32` computes, whatever the word
# order. Which of 0 and 0xffff comes out matters: `~csum_partial(zeros, n, ~0)` is 0.


def _ones32(total: z3.BitVecRef) -> z3.BitVecRef:
    """A 64-bit sum folded to 32 bits with end-around carry (from64to32)."""
    total = (total & 0xFFFFFFFF) + z3.LShR(total, 32)
    total = (total & 0xFFFFFFFF) + z3.LShR(total, 32)
    return z3.Extract(31, 0, total)


def csum_from32to16(x: z3.BitVecRef) -> z3.BitVecRef:
    """include/net/checksum.h csum_from32to16: 32 bits folded to 16 with end-around carry."""
    x = z3.ZeroExt(1, x)
    x = (x & 0xFFFF) + z3.LShR(x, 16)
    x = (x & 0xFFFF) + z3.LShR(x, 16)
    return z3.Extract(15, 0, x)


def csum_add(a: z3.BitVecRef, b: z3.BitVecRef) -> z3.BitVecRef:
    """include/net/checksum.h csum_add: 32-bit add with end-around carry."""
    r = a + b
    return r + z3.If(z3.ULT(r, b), z3.BitVecVal(1, 32), z3.BitVecVal(0, 32))


def csum_partial(data: list[z3.BitVecRef], seed: z3.BitVecRef) -> z3.BitVecRef:
    """x86-64 csum_partial of the bytes `data` (at least one) with a 32-bit `seed`."""
    padded = list(data) + [z3.BitVecVal(0, 8)] * (-len(data) % 4)
    total = z3.ZeroExt(32, seed)
    for i in range(0, len(padded), 4):
        total = total + z3.ZeroExt(32, z3.Concat(*reversed(padded[i : i + 4])))
    return _ones32(total)


def csum_diff(frm: list[z3.BitVecRef], to: list[z3.BitVecRef], seed: z3.BitVecRef) -> z3.BitVecRef:
    """bpf_csum_diff's 64-bit result for the bytes `frm` and `to` (empty: size 0)."""
    if frm and to:
        ret = csum_add(csum_partial(to, seed), ~csum_partial(frm, z3.BitVecVal(0, 32)))
    elif to:
        ret = csum_partial(to, seed)
    elif frm:
        ret = ~csum_partial(frm, ~seed)
    else:
        ret = seed
    return z3.simplify(z3.ZeroExt(48, csum_from32to16(ret)))


def _m_csum_diff(ex, s, insn, name):
    sizes = [s.regs[r] for r in (2, 4)]
    seed = s.regs[5]
    ns = [const_value(v.bv) if isinstance(v, Scalar) else None for v in sizes]
    if None in ns or not isinstance(seed, Scalar):
        s.note(f"bpf_csum_diff with a size or seed that is not a number at {ex.where(s)}")
        return _fresh(ex, s, insn, name)
    bufs = []
    for reg, n in zip((1, 3), ns):
        n &= 0xFFFFFFFF
        data = ex.read_bytes(s, s.regs[reg], 0, n, insn.pc) if 0 < n <= 512 else [] if n == 0 else None
        if data is None or any(not isinstance(b, z3.BitVecRef) for b in data):
            s.note(f"bpf_csum_diff input (r{reg}, {n} bytes) not modelled at {ex.where(s)}")
            return _fresh(ex, s, insn, name)
        bufs.append(data)
    s.regs[0] = scalar(csum_diff(bufs[0], bufs[1], z3.Extract(31, 0, seed.bv)))
    return [s]


def _m_ringbuf_reserve(ex, s, insn, name):
    got = ex.fresh.condition("helper.ringbuf_reserve")
    s.regs[0] = Pointer(Region(RegionKind.MEM, "ringbuf"), bv(0), z3.Not(got))
    return [s]


_MODELS = {
    "fresh64": _m_fresh64,
    "fresh32": _m_fresh32,
    "havoc": _m_havoc,
    "effect": _m_effect,
    "output": _m_output,
    "havoc_mem": _m_havoc_mem,
    "map_lookup": _m_map_lookup,
    "map_update": _m_map_update,
    "map_delete": _m_map_delete,
    "redirect": _m_redirect,
    "redirect_map": _m_redirect_map,
    "tail_call": _m_tail_call,
    "loop": _m_loop,
    "adjust_head": _m_adjust_head,
    "adjust_meta": _m_adjust_meta,
    "adjust_tail": _m_adjust_tail,
    "buff_len": _m_buff_len,
    "load_bytes": _m_load_bytes,
    "store_bytes": _m_store_bytes,
    "ringbuf_reserve": _m_ringbuf_reserve,
    "csum_diff": _m_csum_diff,
}
