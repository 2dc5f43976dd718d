"""The one printer of IR instructions.

The syntax is llvm-objdump's (LLVM 19, `--mcpu=v4`, i.e. with 32-bit sub-registers shown
as `w`), so `xdp2tc disasm` output can be compared line by line with
`llvm-objdump -d --mcpu=v4`. Known differences, all on encodings LLVM 19 cannot decode:
load-acquire/store-release (LLVM prints `<unknown>`) and `callx` (we reject it, as the kernel
does).
"""

from __future__ import annotations

from collections.abc import Callable

from .btf import Array, Btf
from .btf_ext import CoreRelo
from .encode import encode
from .insn import (
    Alu,
    AluOp,
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
from .maps import type_str
from .opcodes import AtomicOp, PseudoSrc, Reloc

#: Compound-assignment spelling of each binary ALU op.
ALU_SYNTAX = {
    AluOp.ADD: "+=",
    AluOp.SUB: "-=",
    AluOp.MUL: "*=",
    AluOp.DIV: "/=",
    AluOp.SDIV: "s/=",
    AluOp.MOD: "%=",
    AluOp.SMOD: "s%=",
    AluOp.OR: "|=",
    AluOp.AND: "&=",
    AluOp.LSH: "<<=",
    AluOp.RSH: ">>=",
    AluOp.ARSH: "s>>=",
    AluOp.XOR: "^=",
    AluOp.MOV: "=",
}

#: Comparison spelling of each jump condition.
COND_SYNTAX = {
    "eq": "==",
    "ne": "!=",
    "gt": ">",
    "ge": ">=",
    "lt": "<",
    "le": "<=",
    "sgt": "s>",
    "sge": "s>=",
    "slt": "s<",
    "sle": "s<=",
    "set": "&",
}

_ATOMIC_SYNTAX = {AtomicOp.ADD: "+=", AtomicOp.OR: "|=", AtomicOp.AND: "&=", AtomicOp.XOR: "^="}


def hexnum(value: int) -> str:
    """Signed hex as llvm-objdump prints immediates: 0x1f, -0x4."""
    return f"-0x{-value:x}" if value < 0 else f"0x{value:x}"


def _reg(n: int, wide: bool = True) -> str:
    return f"{'r' if wide else 'w'}{n}"


def _operand(op: Reg | Imm, wide: bool) -> str:
    return _reg(op.n, wide) if isinstance(op, Reg) else hexnum(op.value)


def _mem(base: int, off: int) -> str:
    sign = "-" if off < 0 else "+"
    return f"(r{base} {sign} 0x{abs(off):x})"


def format_insn(insn: Insn, label: Callable[[int], str] | None = None) -> str:
    """Text of one instruction. `label(target_pc)` may add ` <sym+0x..>` after jumps."""
    match insn:
        case Alu(op=op, wide=wide, dst=dst, src=src):
            return f"{_reg(dst, wide)} {ALU_SYNTAX[op]} {_operand(src, wide)}"
        case Neg(wide=wide, dst=dst):
            return f"{_reg(dst, wide)} = -{_reg(dst, wide)}"
        case MovSx(wide=wide, dst=dst, src=src, bits=bits):
            return f"{_reg(dst, wide)} = (s{bits}){_reg(src, wide)}"
        case Endian(dst=dst, bits=bits, order=order):
            name = "bswap" if order is ByteOrder.SWAP else order.value
            return f"r{dst} = {name}{bits} r{dst}"
        case Load(dst=dst, base=base, off=off, size=size, signed=signed):
            wide = signed or size == 8
            return f"{_reg(dst, wide)} = *({'s' if signed else 'u'}{size * 8} *){_mem(base, off)}"
        case Store(base=base, off=off, size=size, src=src):
            return f"*(u{size * 8} *){_mem(base, off)} = {_operand(src, size == 8)}"
        case Atomic():
            return _format_atomic(insn)
        case LoadImm64(dst=dst, value=value, pseudo=pseudo):
            if pseudo is PseudoSrc.IMM:
                signed = value - (1 << 64) if value >> 63 else value
                return f"r{dst} = {hexnum(signed)} ll"
            return f"ld_pseudo\tr{dst}, 0x{int(pseudo):x}, 0x{value & 0xFFFFFFFF:x}"
        case LegacyLoad(size=size, src=src, imm=imm):
            where = hexnum(imm) if src is None else f"r{src}"
            return f"r0 = *(u{size * 8} *)skb[{where}]"
        case Jump(cond=cond, wide=wide, dst=dst, src=src, off=off):
            text = f"if {_reg(dst, wide)} {COND_SYNTAX[cond]} {_operand(src, wide)} goto {off:+#x}"
            return _with_label(text, insn.target, label)
        case Goto(off=off, long=long):
            return _with_label(f"{'gotol' if long else 'goto'} {off:+#x}", insn.target, label)
        case Call(imm=imm):
            return f"call {hexnum(imm)}"
        case Exit():
            return "exit"
    raise TypeError(f"not an instruction: {insn!r}")


def _with_label(text: str, target: int, label: Callable[[int], str] | None) -> str:
    return f"{text} <{label(target)}>" if label else text


def _format_atomic(insn: Atomic) -> str:
    wide = insn.size == 8
    ptr = f"(u{insn.size * 8} *){_mem(insn.base, insn.off)}"
    src = _reg(insn.src, wide)
    bare = _mem(insn.base, insn.off)[1:-1]
    match insn.op:
        case AtomicOp.XCHG:
            return f"{src} = xchg{'' if wide else '32'}_{insn.size * 8}({bare}, {src})"
        case AtomicOp.CMPXCHG:
            return f"{_reg(0, wide)} = cmpxchg{'' if wide else '32'}_{insn.size * 8}({bare}, {_reg(0, wide)}, {src})"
        case AtomicOp.LOAD_ACQ:
            return f"{src} = load_acquire({ptr})"
        case AtomicOp.STORE_REL:
            return f"store_release({ptr}, {src})"
    if insn.fetch:
        return f"{src} = atomic_fetch_{insn.op.name.lower()}({ptr}, {src})"
    return f"lock *{ptr} {_ATOMIC_SYNTAX[insn.op]} {src}"


def objdump_text(obj, functions, lines: bool = False) -> str:
    """Disassembly of `functions` (lifter Function objects of `obj`) in llvm-objdump's
    `-d -r` layout: section headers, function labels, pc, bytes, text, relocation lines.
    With `lines`, a `; file:line:col  source` comment precedes each change of source line."""
    rels = {}
    for section, entries in obj.image.relocations.items():
        for rel in entries:
            rels.setdefault((section, rel.offset // 8), []).append(rel)
    for section, relos in obj.btf_ext.core_relos.items() if obj.btf_ext else ():
        for relo in relos:
            rels.setdefault((section, relo.insn), []).append(relo)
    out = ["", f"{obj.path}:\tfile format elf64-bpf", ""]
    current_section = None
    for func in functions:
        if func.section != current_section:
            if current_section is not None:
                out.append("")
            current_section = func.section
            out += [f"Disassembly of section {func.section}:", ""]
        else:
            out.append("")
        out.append(f"{func.start * 8:016x} <{func.name}>:")
        label = _labeler(obj, func.section)
        last_line = None
        local_labels = {
            sym.value // 8: sym.name
            for sym in obj.image.symbols_in(func.section, ("NOTYPE",))
            if sym.name and sym.value // 8 != func.start
        }
        for insn in func.insns:
            if insn.pc in local_labels:  # llvm-objdump starts a new block at every label
                out += ["", f"{insn.pc * 8:016x} <{local_labels[insn.pc]}>:"]
            if lines:
                info = obj.line_at(func.section, insn.pc)
                if info is not None and (info.file_name, info.line, info.col) != last_line:
                    last_line = (info.file_name, info.line, info.col)
                    out.append(f"; {info.file_name}:{info.line}:{info.col}  {info.line_text.strip()}")
            hexbytes = " ".join(f"{b:02x}" for b in encode(insn))
            out.append(f"{insn.pc:8d}:\t{hexbytes}\t{format_insn(insn, label)}")
            for rel in rels.get((func.section, insn.pc), []):
                if isinstance(rel, CoreRelo):
                    out.append(f"\t\t{insn.pc * 8:016x}:  CO-RE {core_relo_text(obj.btf, rel)}")
                else:
                    out.append(f"\t\t{rel.offset:016x}:  {_reloc_type(rel.type)}\t{rel.symbol.name}")
    return "\n".join(out) + "\n"


#: llvm-objdump's names of CO-RE relocation kinds (libbpf's enum bpf_core_relo_kind order).
CORE_KIND_SYNTAX = (
    "byte_off",
    "byte_sz",
    "field_exists",
    "signed",
    "lshift_u64",
    "rshift_u64",
    "local_type_id",
    "target_type_id",
    "type_exists",
    "type_size",
    "enumval_exists",
    "enumval_value",
    "type_matches",
)


def core_relo_text(btf: Btf, relo: CoreRelo) -> str:
    """`<byte_off> [17] struct xdp_buff::data (0:0)`: kind, type, what is accessed."""
    kind = CORE_KIND_SYNTAX[relo.kind] if relo.kind < len(CORE_KIND_SYNTAX) else f"kind{relo.kind}"
    text = f"<{kind}> [{relo.type_id}] {type_str(btf, relo.type_id)}"
    indices = [int(part) for part in relo.access_str.split(":") if part]
    if kind.startswith("enumval"):
        enum = btf.types[btf.resolve(relo.type_id)]
        value = enum.values[indices[0]]
        return f"{text}::{value.name} = {value.value}"
    if relo.kind >= len(CORE_KIND_SYNTAX) or kind in CORE_KIND_SYNTAX[6:10] + ("type_matches",):
        return text
    path = f"[{indices[0]}]" if indices and indices[0] else ""
    type_id = relo.type_id
    for step, index in enumerate(indices[1:]):
        t = btf.types[btf.resolve(type_id)]
        if isinstance(t, Array):
            path += f"[{index}]"
            type_id = t.type_id
        else:
            member = t.members[index]
            path += ("" if step == 0 and not path else ".") + member.name
            type_id = member.type_id
    return f"{text}::{path} ({relo.access_str})"


def _reloc_type(type_id: int) -> str:
    try:
        return Reloc(type_id).name
    except ValueError:
        return f"R_BPF_{type_id}"


def _labeler(obj, section: str) -> Callable[[int], str]:
    """`<name+0xbytes>` for a jump target, as llvm-objdump labels it: the nearest named
    symbol at or before the target (functions, and the `LBB*` labels some objects keep)."""
    starts = sorted(
        (sym.value // 8, sym.type != "FUNC", sym.name)
        for sym in obj.image.symbols_in(section, ("FUNC", "NOTYPE"))
        if sym.name
    )

    def label(target: int) -> str:
        name, base = section, 0
        for start, _not_func, sym_name in starts:
            if start > target:
                break
            name, base = sym_name, start
        delta = (target - base) * 8
        return f"{name}+0x{delta:x}" if delta else name

    return label
