"""BPF instruction semantics over z3 bit-vectors: ALU operations and jump conditions (RFC 9669).

Pure functions of their operands, shared by every step of the explorer (explore.py) and
tested directly against the RFC's rules (tests/test_analyzer.py).
"""

from __future__ import annotations

import z3

from lifter.insn import AluOp, Cond

from .exploration import ExplorationError


def alu(op: AluOp, wide: bool, a: z3.BitVecRef, b: z3.BitVecRef) -> z3.BitVecRef:
    """dst OP src with BPF semantics (RFC 9669 4.1): 32-bit ops zero the upper half, shifts
    use the low 5/6 bits of the count, division by zero gives 0, modulo by zero keeps dst."""
    if not wide:
        a, b = z3.Extract(31, 0, a), z3.Extract(31, 0, b)
    width = 64 if wide else 32
    zero = z3.BitVecVal(0, width)
    if op == AluOp.ADD:
        r = a + b
    elif op == AluOp.SUB:
        r = a - b
    elif op == AluOp.MUL:
        r = a * b
    elif op == AluOp.DIV:
        r = z3.If(b == zero, zero, z3.UDiv(a, b))
    elif op == AluOp.SDIV:
        r = z3.If(b == zero, zero, a / b)
    elif op == AluOp.MOD:
        r = z3.If(b == zero, a, z3.URem(a, b))
    elif op == AluOp.SMOD:
        r = z3.If(b == zero, a, z3.SRem(a, b))
    elif op == AluOp.OR:
        r = a | b
    elif op == AluOp.AND:
        r = a & b
    elif op == AluOp.XOR:
        r = a ^ b
    elif op == AluOp.LSH:
        r = a << (b & (width - 1))
    elif op == AluOp.RSH:
        r = z3.LShR(a, b & (width - 1))
    elif op == AluOp.ARSH:
        r = a >> (b & (width - 1))
    elif op == AluOp.MOV:
        r = b
    else:  # pragma: no cover
        raise ExplorationError(f"unknown ALU op {op}")
    return z3.simplify(r if wide else z3.ZeroExt(32, r))


def compare(cond: Cond, wide: bool, a: z3.BitVecRef, b: z3.BitVecRef, pointers: bool = False) -> z3.BoolRef:
    """The jump condition `a COND b`. Pointer offsets in one region compare as signed
    numbers: the addresses are base + offset with base far from both ends."""
    if not wide:
        a, b = z3.Extract(31, 0, a), z3.Extract(31, 0, b)
    unsigned = {Cond.GT: z3.UGT, Cond.GE: z3.UGE, Cond.LT: z3.ULT, Cond.LE: z3.ULE}
    signed = {
        Cond.SGT: lambda x, y: x > y,
        Cond.SGE: lambda x, y: x >= y,
        Cond.SLT: lambda x, y: x < y,
        Cond.SLE: lambda x, y: x <= y,
    }
    if pointers and cond in unsigned:
        cond = Cond("s" + cond.value)
    if cond == Cond.EQ:
        return a == b
    if cond == Cond.NE:
        return a != b
    if cond == Cond.SET:
        return (a & b) != 0
    if cond in unsigned:
        return unsigned[cond](a, b)
    return signed[cond](a, b)
