"""The IR: one closed set of typed eBPF instructions.

Every decoded slot becomes exactly one of the classes in `Insn` (ld_imm64 covers two slots).
`pc` is the slot index inside the ELF section, as llvm-objdump numbers it. Decoding is in
`decode.py`, encoding back to bytes in `encode.py`, printing in `printer.py`; nothing else
constructs or prints instructions by hand.

Register operands are plain ints 0..10; an immediate operand is `Imm`. `wide=False` means the
32-bit variant (class ALU / JMP32): the upper half of dst is zeroed for ALU, only the low
32 bits are compared for jumps.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .opcodes import AtomicOp, CallSrc, PseudoSrc


@dataclass(frozen=True)
class Reg:
    """A register operand (r0..r10)."""

    n: int


@dataclass(frozen=True)
class Imm:
    """A 32-bit signed immediate operand, sign-extended to 64 bits where the ISA says so."""

    value: int


Operand = Reg | Imm


class AluOp(StrEnum):
    """Binary ALU operations (NEG, MOVSX and byte swaps have their own classes)."""

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    SDIV = "sdiv"
    MOD = "mod"
    SMOD = "smod"
    OR = "or"
    AND = "and"
    LSH = "lsh"
    RSH = "rsh"
    ARSH = "arsh"
    XOR = "xor"
    MOV = "mov"


class Cond(StrEnum):
    """Conditions of conditional jumps; `s*` compare signed, `set` tests `dst & src != 0`."""

    EQ = "eq"
    NE = "ne"
    GT = "gt"
    GE = "ge"
    LT = "lt"
    LE = "le"
    SGT = "sgt"
    SGE = "sge"
    SLT = "slt"
    SLE = "sle"
    SET = "set"


class ByteOrder(StrEnum):
    """Byte-swap flavours: to little/big endian (class ALU), unconditional swap (ALU64, v4)."""

    LE = "le"
    BE = "be"
    SWAP = "swap"


@dataclass(frozen=True)
class MapRef:
    """What a relocated ld_imm64 points at: a map (offset None) or a byte in a map's value
    (global data sections are array maps with one value)."""

    map: str
    offset: int | None = None


@dataclass(frozen=True)
class FuncRef:
    """A function address loaded by ld_imm64 (callbacks for bpf_loop, timers, ...)."""

    section: str
    offset: int  # slot index inside `section`


@dataclass(frozen=True)
class ExternRef:
    """An undefined symbol the loader resolves (`extern` kconfig values, ksyms)."""

    name: str


@dataclass(frozen=True)
class Alu:
    """dst = dst OP src (or dst = src for MOV)."""

    pc: int
    op: AluOp
    wide: bool
    dst: int
    src: Operand


@dataclass(frozen=True)
class Neg:
    """dst = -dst."""

    pc: int
    wide: bool
    dst: int


@dataclass(frozen=True)
class MovSx:
    """dst = sign-extend(low `bits` of src) (ISA v4)."""

    pc: int
    wide: bool
    dst: int
    src: int
    bits: int  # 8, 16 or 32 (32 only when wide)


@dataclass(frozen=True)
class Endian:
    """dst = byte-swap of the low `bits` of dst, zero-extended."""

    pc: int
    dst: int
    bits: int  # 16, 32 or 64
    order: ByteOrder


@dataclass(frozen=True)
class Load:
    """dst = *(size *)(base + off), zero- or (v4) sign-extended."""

    pc: int
    dst: int
    base: int
    off: int
    size: int  # bytes: 1, 2, 4, 8
    signed: bool = False


@dataclass(frozen=True)
class Store:
    """*(size *)(base + off) = src (a register for STX, an immediate for ST)."""

    pc: int
    base: int
    off: int
    size: int
    src: Operand


@dataclass(frozen=True)
class Atomic:
    """An atomic read-modify-write on *(size *)(base + off) with register `src`.

    `fetch` returns the old value in src (in r0 for CMPXCHG, which compares with r0)."""

    pc: int
    op: AtomicOp
    fetch: bool
    size: int  # 4 or 8 (1..8 for LOAD_ACQ/STORE_REL)
    base: int
    off: int
    src: int


@dataclass(frozen=True)
class LoadImm64:
    """dst = 64-bit immediate (two slots). `pseudo` tells how a loader reads `value`; `ref`
    is filled in from the ELF relocation on this instruction, if any."""

    pc: int
    dst: int
    value: int  # unsigned 64-bit
    pseudo: PseudoSrc = PseudoSrc.IMM
    ref: MapRef | FuncRef | ExternRef | None = None


@dataclass(frozen=True)
class LegacyLoad:
    """r0 = packet[imm] (ABS) or packet[src + imm] (IND), in network byte order.

    Socket-filter era; decoded for completeness, rejected by the XDP verifier."""

    pc: int
    size: int
    src: int | None  # None for ABS
    imm: int


@dataclass(frozen=True)
class Jump:
    """if (dst COND src) goto pc + 1 + off."""

    pc: int
    cond: Cond
    wide: bool
    dst: int
    src: Operand
    off: int

    @property
    def target(self) -> int:
        return self.pc + 1 + self.off


@dataclass(frozen=True)
class Goto:
    """goto pc + 1 + off. `long` is v4's `gotol`, whose offset is the 32-bit imm."""

    pc: int
    off: int
    long: bool = False

    @property
    def target(self) -> int:
        return self.pc + 1 + self.off


@dataclass(frozen=True)
class Call:
    """A helper call (imm = helper id), a bpf-to-bpf call (imm = pc-relative offset, or a
    relocation), or a kfunc call (imm = BTF id). `callee` is resolved by the ELF loader for
    bpf-to-bpf calls: (section, slot index of the called function)."""

    pc: int
    kind: CallSrc
    imm: int
    callee: tuple[str, int] | None = None
    symbol: str | None = None  # relocation symbol: the kfunc or function named in the ELF
    module: int = 0  # kfunc only: fd_array index of the module BTF (the `off` field)


@dataclass(frozen=True)
class Exit:
    """return r0."""

    pc: int


#: The closed set of instruction types.
Insn = Alu | Neg | MovSx | Endian | Load | Store | Atomic | LoadImm64 | LegacyLoad | Jump | Goto | Call | Exit

INSN_TYPES = (Alu, Neg, MovSx, Endian, Load, Store, Atomic, LoadImm64, LegacyLoad, Jump, Goto, Call, Exit)


def slots(insn: Insn) -> int:
    """Number of 8-byte slots the instruction occupies."""
    return 2 if isinstance(insn, LoadImm64) else 1


def is_branch(insn: Insn) -> bool:
    """True for instructions that end a basic block by jumping."""
    return isinstance(insn, (Jump, Goto))


def ends_block(insn: Insn) -> bool:
    """True for instructions after which control does not simply fall through."""
    return isinstance(insn, (Jump, Goto, Exit))
