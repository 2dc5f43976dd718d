"""Bytes -> IR instructions, for the whole ISA (RFC 9669 incl. v4 and 6.15 atomics).

Reserved fields are checked as the kernel verifier checks them: an encoding the kernel would
refuse as malformed is a `LiftError` naming the instruction index, never a guess.
Semantic checks that need more than one instruction (div by zero, writes to r10) are left
to later stages.
"""

from __future__ import annotations

import struct

from .errors import LiftError
from .insn import (
    Alu,
    AluOp,
    Atomic,
    ByteOrder,
    Call,
    Cond,
    Endian,
    Exit,
    Goto,
    Imm,
    Insn,
    Jump,
    LegacyLoad,
    Load,
    LoadImm64,
    MovSx,
    Neg,
    Reg,
    Store,
)
from .opcodes import (
    ATOMIC_FETCH,
    INSN_SIZE,
    NUM_REGS,
    SIZE_BYTES,
    AluCode,
    AtomicOp,
    CallSrc,
    InsnClass,
    JmpCode,
    Mode,
    PseudoSrc,
    Size,
    Source,
)

_SLOT = struct.Struct("<BBhi")

#: ALU code (with the signed flag from `off`) -> IR op. NEG, END and MOVSX are handled apart.
ALU_OPS: dict[tuple[AluCode, bool], AluOp] = {
    (AluCode.ADD, False): AluOp.ADD,
    (AluCode.SUB, False): AluOp.SUB,
    (AluCode.MUL, False): AluOp.MUL,
    (AluCode.DIV, False): AluOp.DIV,
    (AluCode.DIV, True): AluOp.SDIV,
    (AluCode.MOD, False): AluOp.MOD,
    (AluCode.MOD, True): AluOp.SMOD,
    (AluCode.OR, False): AluOp.OR,
    (AluCode.AND, False): AluOp.AND,
    (AluCode.LSH, False): AluOp.LSH,
    (AluCode.RSH, False): AluOp.RSH,
    (AluCode.ARSH, False): AluOp.ARSH,
    (AluCode.XOR, False): AluOp.XOR,
    (AluCode.MOV, False): AluOp.MOV,
}

#: Conditional jump code -> IR condition.
JMP_CONDS: dict[JmpCode, Cond] = {
    JmpCode.JEQ: Cond.EQ,
    JmpCode.JNE: Cond.NE,
    JmpCode.JGT: Cond.GT,
    JmpCode.JGE: Cond.GE,
    JmpCode.JLT: Cond.LT,
    JmpCode.JLE: Cond.LE,
    JmpCode.JSGT: Cond.SGT,
    JmpCode.JSGE: Cond.SGE,
    JmpCode.JSLT: Cond.SLT,
    JmpCode.JSLE: Cond.SLE,
    JmpCode.JSET: Cond.SET,
}

#: Atomic imm values the ISA defines, with the sizes each accepts.
ATOMIC_IMMS: dict[int, tuple[AtomicOp, bool, frozenset[Size]]] = {}
for _op in (AtomicOp.ADD, AtomicOp.OR, AtomicOp.AND, AtomicOp.XOR):
    for _fetch in (False, True):
        ATOMIC_IMMS[_op | (ATOMIC_FETCH if _fetch else 0)] = (_op, _fetch, frozenset({Size.W, Size.DW}))
ATOMIC_IMMS[AtomicOp.XCHG | ATOMIC_FETCH] = (AtomicOp.XCHG, True, frozenset({Size.W, Size.DW}))
ATOMIC_IMMS[AtomicOp.CMPXCHG | ATOMIC_FETCH] = (AtomicOp.CMPXCHG, True, frozenset({Size.W, Size.DW}))
ATOMIC_IMMS[AtomicOp.LOAD_ACQ] = (AtomicOp.LOAD_ACQ, False, frozenset(Size))
ATOMIC_IMMS[AtomicOp.STORE_REL] = (AtomicOp.STORE_REL, False, frozenset(Size))


def _bad(pc: int, opcode: int, why: str) -> LiftError:
    return LiftError(f"invalid instruction (opcode 0x{opcode:02x}): {why}", insn=pc)


def _require_zero(pc: int, opcode: int, **fields: int) -> None:
    for name, value in fields.items():
        if value:
            raise _bad(pc, opcode, f"reserved field {name}={value} must be 0")


def decode(data: bytes) -> list[Insn]:
    """Decode a whole code section. Raises LiftError with `insn` = the bad slot's index."""
    if len(data) % INSN_SIZE:
        raise LiftError(f"code size {len(data)} is not a multiple of {INSN_SIZE}")
    count = len(data) // INSN_SIZE
    out: list[Insn] = []
    pc = 0
    while pc < count:
        insn = decode_one(data, pc)
        out.append(insn)
        pc += 2 if isinstance(insn, LoadImm64) else 1
    return out


def decode_one(data: bytes, pc: int) -> Insn:
    """Decode the instruction starting at slot `pc` of `data`."""
    opcode, regs, off, imm = _SLOT.unpack_from(data, pc * INSN_SIZE)
    dst, src = regs & 0x0F, regs >> 4
    if dst >= NUM_REGS or src >= NUM_REGS:
        raise _bad(pc, opcode, f"register r{max(dst, src)} does not exist")
    cls = InsnClass(opcode & 0x07)
    if cls in (InsnClass.ALU, InsnClass.ALU64):
        return _decode_alu(pc, opcode, cls, dst, src, off, imm)
    if cls in (InsnClass.JMP, InsnClass.JMP32):
        return _decode_jmp(pc, opcode, cls, dst, src, off, imm)
    return _decode_mem(data, pc, opcode, cls, dst, src, off, imm)


def _decode_alu(pc: int, opcode: int, cls: InsnClass, dst: int, src: int, off: int, imm: int) -> Insn:
    wide = cls is InsnClass.ALU64
    source = Source(opcode & 0x08)
    try:
        code = AluCode(opcode & 0xF0)
    except ValueError:
        raise _bad(pc, opcode, "unknown ALU operation") from None
    if code is AluCode.END:
        _require_zero(pc, opcode, src_reg=src, off=off)
        if imm not in (16, 32, 64):
            raise _bad(pc, opcode, f"byte swap width {imm} is not 16, 32 or 64")
        if wide:
            if source is Source.X:
                raise _bad(pc, opcode, "bswap has no register-source form")
            order = ByteOrder.SWAP
        else:
            order = ByteOrder.BE if source is Source.X else ByteOrder.LE
        return Endian(pc, dst, imm, order)
    if code is AluCode.NEG:
        if source is Source.X:
            raise _bad(pc, opcode, "neg has no register-source form")
        _require_zero(pc, opcode, src_reg=src, off=off, imm=imm)
        return Neg(pc, wide, dst)
    if code is AluCode.MOV and off:
        if source is Source.K or off not in ((8, 16, 32) if wide else (8, 16)):
            raise _bad(pc, opcode, f"movsx offset {off} is not valid")
        _require_zero(pc, opcode, imm=imm)
        return MovSx(pc, wide, dst, src, off)
    signed = False
    if code in (AluCode.DIV, AluCode.MOD) and off == 1:
        signed = True
    elif off:
        raise _bad(pc, opcode, f"reserved field off={off} must be 0")
    if source is Source.X:
        _require_zero(pc, opcode, imm=imm)
        operand: Reg | Imm = Reg(src)
    else:
        _require_zero(pc, opcode, src_reg=src)
        operand = Imm(imm)
    return Alu(pc, ALU_OPS[(code, signed)], wide, dst, operand)


def _decode_jmp(pc: int, opcode: int, cls: InsnClass, dst: int, src: int, off: int, imm: int) -> Insn:
    source = Source(opcode & 0x08)
    try:
        code = JmpCode(opcode & 0xF0)
    except ValueError:
        raise _bad(pc, opcode, "unknown jump operation") from None
    if code is JmpCode.JA:
        if source is Source.X:
            raise _bad(pc, opcode, "goto has no register-source form")
        if cls is InsnClass.JMP32:
            _require_zero(pc, opcode, dst_reg=dst, src_reg=src, off=off)
            return Goto(pc, imm, long=True)
        _require_zero(pc, opcode, dst_reg=dst, src_reg=src, imm=imm)
        return Goto(pc, off)
    if code in (JmpCode.CALL, JmpCode.EXIT):
        if cls is InsnClass.JMP32 or source is Source.X:
            raise _bad(pc, opcode, f"{code.name.lower()} exists only as JMP|K")
        if code is JmpCode.EXIT:
            _require_zero(pc, opcode, dst_reg=dst, src_reg=src, off=off, imm=imm)
            return Exit(pc)
        try:
            kind = CallSrc(src)
        except ValueError:
            raise _bad(pc, opcode, f"call src_reg={src} is not helper/local/kfunc") from None
        # A kfunc call may carry an fd_array index for module BTF in `off`.
        _require_zero(pc, opcode, dst_reg=dst, **({} if kind is CallSrc.KFUNC else {"off": off}))
        return Call(pc, kind, imm, module=off)
    cond = JMP_CONDS[code]
    wide = cls is InsnClass.JMP
    if source is Source.X:
        _require_zero(pc, opcode, imm=imm)
        return Jump(pc, cond, wide, dst, Reg(src), off)
    _require_zero(pc, opcode, src_reg=src)
    return Jump(pc, cond, wide, dst, Imm(imm), off)


def _decode_mem(data: bytes, pc: int, opcode: int, cls: InsnClass, dst: int, src: int, off: int, imm: int) -> Insn:
    size = Size(opcode & 0x18)
    nbytes = SIZE_BYTES[size]
    try:
        mode = Mode(opcode & 0xE0)
    except ValueError:
        raise _bad(pc, opcode, "unknown load/store mode") from None
    if cls is InsnClass.LD:
        if mode is Mode.IMM and size is Size.DW:
            return _decode_ld_imm64(data, pc, opcode, dst, src, off, imm)
        if mode in (Mode.ABS, Mode.IND) and size is not Size.DW:
            _require_zero(pc, opcode, dst_reg=dst, off=off)
            if mode is Mode.ABS:
                _require_zero(pc, opcode, src_reg=src)
                return LegacyLoad(pc, nbytes, None, imm)
            return LegacyLoad(pc, nbytes, src, imm)
        raise _bad(pc, opcode, f"LD with mode {mode.name} size {size.name} does not exist")
    if cls is InsnClass.LDX:
        if mode is Mode.MEM or (mode is Mode.MEMSX and size is not Size.DW):
            _require_zero(pc, opcode, imm=imm)
            return Load(pc, dst, src, off, nbytes, signed=mode is Mode.MEMSX)
        raise _bad(pc, opcode, f"LDX with mode {mode.name} size {size.name} does not exist")
    if cls is InsnClass.ST:
        if mode is Mode.MEM:
            _require_zero(pc, opcode, src_reg=src)
            return Store(pc, dst, off, nbytes, Imm(imm))
        raise _bad(pc, opcode, f"ST with mode {mode.name} does not exist")
    # STX
    if mode is Mode.MEM:
        _require_zero(pc, opcode, imm=imm)
        return Store(pc, dst, off, nbytes, Reg(src))
    if mode is Mode.ATOMIC:
        spec = ATOMIC_IMMS.get(imm)
        if spec is None:
            raise _bad(pc, opcode, f"atomic operation 0x{imm & 0xFFFFFFFF:x} does not exist")
        op, fetch, sizes = spec
        if size not in sizes:
            raise _bad(pc, opcode, f"atomic {op.name.lower()} has no {nbytes}-byte form")
        return Atomic(pc, op, fetch, nbytes, dst, off, src)
    raise _bad(pc, opcode, f"STX with mode {mode.name} does not exist")


def _decode_ld_imm64(data: bytes, pc: int, opcode: int, dst: int, src: int, off: int, imm: int) -> LoadImm64:
    if (pc + 2) * INSN_SIZE > len(data):
        raise _bad(pc, opcode, "ld_imm64 is missing its second slot")
    _require_zero(pc, opcode, off=off)
    try:
        pseudo = PseudoSrc(src)
    except ValueError:
        raise _bad(pc, opcode, f"ld_imm64 src_reg={src} is not a known pseudo source") from None
    op2, regs2, off2, imm2 = _SLOT.unpack_from(data, (pc + 1) * INSN_SIZE)
    if op2 or regs2 or off2:
        raise _bad(pc, opcode, "ld_imm64 second slot has non-zero opcode/registers/offset")
    value = ((imm2 & 0xFFFFFFFF) << 32) | (imm & 0xFFFFFFFF)
    return LoadImm64(pc, dst, value, pseudo)
