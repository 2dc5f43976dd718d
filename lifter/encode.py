"""IR instruction -> bytes: the inverse of `decode`.

Built from the typed fields only (never from the bytes an instruction was decoded from), so
`encode(decode(b)) == b` checks that the IR loses nothing. Also turns the programs built with
asm.py (calibration's micro-programs, no compiler) into bytes.
"""

from __future__ import annotations

import struct

from .decode import ALU_OPS, JMP_CONDS
from .insn import (
    Alu,
    Atomic,
    ByteOrder,
    Call,
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
    BYTES_SIZE,
    AluCode,
    InsnClass,
    JmpCode,
    Mode,
    Source,
)

_SLOT = struct.Struct("<BBhi")
_ALU_CODES = {op: code for (code, _signed), op in ALU_OPS.items()}
_ALU_SIGNED = {op for (_code, signed), op in ALU_OPS.items() if signed}
_JMP_CODES = {cond: code for code, cond in JMP_CONDS.items()}


def _slot(opcode: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    imm = imm - (1 << 32) if imm >= 1 << 31 else imm
    return _SLOT.pack(opcode, (src << 4) | dst, off, imm)


def _source(operand: Reg | Imm) -> tuple[int, int, int]:
    """(source bit, src_reg, imm) for an operand."""
    if isinstance(operand, Reg):
        return Source.X, operand.n, 0
    return Source.K, 0, operand.value


def encode(insn: Insn) -> bytes:
    """Encode one instruction (16 bytes for ld_imm64, else 8)."""
    match insn:
        case Alu(op=op, wide=wide, dst=dst, src=operand):
            cls = InsnClass.ALU64 if wide else InsnClass.ALU
            source, src, imm = _source(operand)
            return _slot(cls | source | _ALU_CODES[op], dst, src, 1 if op in _ALU_SIGNED else 0, imm)
        case Neg(wide=wide, dst=dst):
            return _slot((InsnClass.ALU64 if wide else InsnClass.ALU) | AluCode.NEG, dst)
        case MovSx(wide=wide, dst=dst, src=src, bits=bits):
            cls = InsnClass.ALU64 if wide else InsnClass.ALU
            return _slot(cls | Source.X | AluCode.MOV, dst, src, bits)
        case Endian(dst=dst, bits=bits, order=order):
            if order is ByteOrder.SWAP:
                opcode = InsnClass.ALU64 | Source.K | AluCode.END
            else:
                opcode = InsnClass.ALU | (Source.X if order is ByteOrder.BE else Source.K) | AluCode.END
            return _slot(opcode, dst, imm=bits)
        case Load(dst=dst, base=base, off=off, size=size, signed=signed):
            mode = Mode.MEMSX if signed else Mode.MEM
            return _slot(InsnClass.LDX | mode | BYTES_SIZE[size], dst, base, off)
        case Store(base=base, off=off, size=size, src=Reg(n=src)):
            return _slot(InsnClass.STX | Mode.MEM | BYTES_SIZE[size], base, src, off)
        case Store(base=base, off=off, size=size, src=Imm(value=imm)):
            return _slot(InsnClass.ST | Mode.MEM | BYTES_SIZE[size], base, 0, off, imm)
        case Atomic(op=op, fetch=fetch, size=size, base=base, off=off, src=src):
            imm = op | (ATOMIC_FETCH if fetch else 0)
            return _slot(InsnClass.STX | Mode.ATOMIC | BYTES_SIZE[size], base, src, off, imm)
        case LoadImm64(dst=dst, value=value, pseudo=pseudo):
            lo, hi = value & 0xFFFFFFFF, value >> 32
            return _slot(InsnClass.LD | Mode.IMM | BYTES_SIZE[8], dst, pseudo, 0, lo) + _slot(0, imm=hi)
        case LegacyLoad(size=size, src=src, imm=imm):
            mode = Mode.ABS if src is None else Mode.IND
            return _slot(InsnClass.LD | mode | BYTES_SIZE[size], 0, src or 0, 0, imm)
        case Jump(cond=cond, wide=wide, dst=dst, src=operand, off=off):
            cls = InsnClass.JMP if wide else InsnClass.JMP32
            source, src, imm = _source(operand)
            return _slot(cls | source | _JMP_CODES[cond], dst, src, off, imm)
        case Goto(off=off, long=True):
            return _slot(InsnClass.JMP32 | JmpCode.JA, imm=off)
        case Goto(off=off):
            return _slot(InsnClass.JMP | JmpCode.JA, off=off)
        case Call(kind=kind, imm=imm, module=module):
            return _slot(InsnClass.JMP | JmpCode.CALL, 0, kind, module, imm)
        case Exit():
            return _slot(InsnClass.JMP | JmpCode.EXIT)
    raise TypeError(f"not an instruction: {insn!r}")


def encode_all(insns: list[Insn]) -> bytes:
    """Encode a sequence of instructions back to a code section."""
    return b"".join(encode(i) for i in insns)
