"""eBPF opcode fields (RFC 9669, "BPF Instruction Set Architecture").

One instruction slot is 8 bytes, little-endian on the hosts we target::

    bits  0-7    8-11     12-15    16-31          32-63
        +------+--------+--------+--------------+---------------------+
        |opcode| dst_reg| src_reg| offset (s16) | imm (s32)           |
        +------+--------+--------+--------------+---------------------+

`ld_imm64` takes two slots; the second slot's imm holds the upper 32 bits and its other
fields must be zero.

The opcode byte itself is split by class::

    ALU / ALU64 / JMP / JMP32:      LD / LDX / ST / STX:
      7     4  3   2   0             7   5  4  3  2   0
    +--------+---+-----+           +-----+-----+-----+
    |  code  | s |class|           |mode | size|class|
    +--------+---+-----+           +-----+-----+-----+
    s = source: 0 = K (imm), 1 = X (src_reg)

Kernel-version notes: signed div/mod, movsx, sign-extending loads, bswap and 32-bit-offset
`gotol` are ISA v4 (Linux 6.6). 32-bit atomics with fetch, xchg and cmpxchg need v3 (5.12).
Load-acquire/store-release (atomic imm 0x100/0x110) are Linux 6.15 and not in RFC 9669.
"""

from __future__ import annotations

from enum import IntEnum

#: Bytes in one instruction slot.
INSN_SIZE = 8

#: BPF_COMPLEXITY_LIMIT_INSNS: the most instructions the kernel loads in one program
#: (privileged; 4096 unprivileged). Larger code is refused before decoding.
MAX_PROG_INSNS = 1_000_000

#: Registers: r0..r9 general, r10 the read-only frame pointer.
NUM_REGS = 11
FRAME_POINTER = 10


class InsnClass(IntEnum):
    """opcode & 0x07."""

    LD = 0x00
    LDX = 0x01
    ST = 0x02
    STX = 0x03
    ALU = 0x04  # 32-bit
    JMP = 0x05
    JMP32 = 0x06
    ALU64 = 0x07


class Source(IntEnum):
    """opcode & 0x08 for ALU and JMP classes."""

    K = 0x00  # use imm
    X = 0x08  # use src_reg


class AluCode(IntEnum):
    """opcode & 0xf0 for ALU/ALU64. DIV/MOD with offset 1 are signed; MOV with offset 8/16/32
    is MOVSX; END in class ALU is le/be by `Source`, in class ALU64 it is bswap."""

    ADD = 0x00
    SUB = 0x10
    MUL = 0x20
    DIV = 0x30
    OR = 0x40
    AND = 0x50
    LSH = 0x60
    RSH = 0x70
    NEG = 0x80
    MOD = 0x90
    XOR = 0xA0
    MOV = 0xB0
    ARSH = 0xC0
    END = 0xD0


class JmpCode(IntEnum):
    """opcode & 0xf0 for JMP/JMP32. JA in class JMP32 is `gotol` (offset in imm)."""

    JA = 0x00
    JEQ = 0x10
    JGT = 0x20
    JGE = 0x30
    JSET = 0x40
    JNE = 0x50
    JSGT = 0x60
    JSGE = 0x70
    CALL = 0x80
    EXIT = 0x90
    JLT = 0xA0
    JLE = 0xB0
    JSLT = 0xC0
    JSLE = 0xD0


class Size(IntEnum):
    """opcode & 0x18 for load/store classes."""

    W = 0x00  # 4 bytes
    H = 0x08  # 2 bytes
    B = 0x10  # 1 byte
    DW = 0x18  # 8 bytes


#: Size field -> bytes.
SIZE_BYTES = {Size.W: 4, Size.H: 2, Size.B: 1, Size.DW: 8}
#: Bytes -> size field.
BYTES_SIZE = {v: k for k, v in SIZE_BYTES.items()}


class Mode(IntEnum):
    """opcode & 0xe0 for load/store classes. ABS/IND are the legacy packet loads (socket
    filters only; the XDP verifier rejects them)."""

    IMM = 0x00
    ABS = 0x20
    IND = 0x40
    MEM = 0x60
    MEMSX = 0x80
    ATOMIC = 0xC0


class AtomicOp(IntEnum):
    """imm of an STX|ATOMIC instruction (FETCH = 0x01 may be or-ed into ADD/OR/AND/XOR)."""

    ADD = 0x00
    OR = 0x40
    AND = 0x50
    XOR = 0xA0
    XCHG = 0xE0  # always with FETCH
    CMPXCHG = 0xF0  # always with FETCH
    LOAD_ACQ = 0x100  # Linux 6.15
    STORE_REL = 0x110  # Linux 6.15


#: Or-ed into an AtomicOp imm: the old value is returned in src_reg (r0 for cmpxchg).
ATOMIC_FETCH = 0x01


class PseudoSrc(IntEnum):
    """src_reg of ld_imm64: how the loader interprets imm. Objects from clang carry 0 and a
    relocation; the loader (libbpf) rewrites them to these values."""

    IMM = 0
    MAP_FD = 1
    MAP_VALUE = 2
    BTF_ID = 3
    FUNC = 4
    MAP_IDX = 5
    MAP_IDX_VALUE = 6


class CallSrc(IntEnum):
    """src_reg of a call instruction."""

    HELPER = 0  # imm = helper id
    LOCAL = 1  # imm = pc-relative target of a bpf-to-bpf call
    KFUNC = 2  # imm = BTF id of a kernel function


class Reloc(IntEnum):
    """ELF relocation types of EM_BPF (LLVM's BPF backend)."""

    NONE = 0
    R_BPF_64_64 = 1  # ld_imm64 against a map, global data or function
    R_BPF_64_ABS64 = 2  # 64-bit data word (.maps .values, BTF, DWARF)
    R_BPF_64_ABS32 = 3  # 32-bit data word (BTF.ext, DWARF)
    R_BPF_64_NODYLD32 = 4  # 32-bit data word, not resolved at load (BTF.ext)
    R_BPF_64_32 = 10  # call instruction against a function
    # GNU binutils (gcc-bpf objects) number data relocations its own way; code relocations
    # (1 and 10) agree with LLVM's.
    R_BPF_GNU_DATA_32 = 11
    R_BPF_GNU_DATA_64 = 12


#: Relocation types that store a 64-bit address in data (LLVM's and GNU's spelling).
DATA64_RELOCS = frozenset({Reloc.R_BPF_64_ABS64, Reloc.R_BPF_GNU_DATA_64})


#: ELF e_machine of BPF objects.
EM_BPF = 247
