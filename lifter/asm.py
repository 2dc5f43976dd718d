"""Building BPF programs without a compiler: a small assembler with labels, a few
instruction shorthands, and the minimal BTF the verifier needs for bpf_loop callbacks.

Instructions are lifter/insn.py's IR (pc left 0 where `Asm.build` does not set it);
`encode.encode_all` turns the built list into bytes. Calibration's micro-programs
(analyzer/cost/calibrate.py) and the ISA tests are built with it.
"""

from __future__ import annotations

import struct

from . import btf
from .insn import Alu, AluOp, Call, Cond, Goto, Imm, Jump, LoadImm64, Reg, slots
from .opcodes import CallSrc, PseudoSrc

#: BTF type id of the first FUNC record `func_btf` writes (after its six fixed types).
FIRST_FUNC_TYPE = 7


class Asm:
    """A tiny assembler: instructions and labels; jumps and calls name labels."""

    def __init__(self):
        self.items: list = []

    def __call__(self, *insns) -> Asm:
        self.items.extend(insns)
        return self

    def label(self, name: str) -> Asm:
        self.items.append(("label", name))
        return self

    def jump(self, cond: Cond, dst: int, src: int | Imm, target: str) -> Asm:
        self.items.append(("jump", cond, dst, src if isinstance(src, Imm) else Reg(src), target))
        return self

    def goto(self, target: str) -> Asm:
        self.items.append(("goto", target))
        return self

    def call_local(self, target: str) -> Asm:
        self.items.append(("call", target))
        return self

    def func_addr(self, dst: int, target: str) -> Asm:
        self.items.append(("func", dst, target))
        return self

    def build(self) -> list:
        pcs, pc = {}, 0
        for it in self.items:
            if isinstance(it, tuple) and it[0] == "label":
                pcs[it[1]] = pc
            elif isinstance(it, tuple):
                pc += 2 if it[0] == "func" else 1
            else:
                pc += slots(it)
        out, pc = [], 0
        for it in self.items:
            if isinstance(it, tuple):
                kind = it[0]
                if kind == "label":
                    continue
                if kind == "jump":
                    out.append(Jump(pc, it[1], True, it[2], it[3], pcs[it[4]] - pc - 1))
                elif kind == "goto":
                    out.append(Goto(pc, pcs[it[1]] - pc - 1))
                elif kind == "call":
                    out.append(Call(pc, CallSrc.LOCAL, pcs[it[1]] - pc - 1))
                elif kind == "func":
                    out.append(LoadImm64(pc, it[1], (pcs[it[2]] - pc - 1) % (1 << 64), PseudoSrc.FUNC))
                pc += 2 if kind == "func" else 1
            else:
                out.append(it)
                pc += slots(it)
        return out


def func_btf(funcs: list[tuple[str, str]]) -> bytes:
    """A minimal BTF blob for `bpf_loop` programs (the verifier wants func_info for
    callbacks): `funcs` = (name, "main" | "callback"), in func_info order. Types:
    1 int, 2 struct xdp_md, 3 xdp_md *, 4 void *, 5 int(struct xdp_md *),
    6 int(int, void *), then one FUNC per entry."""
    strings = bytearray(b"\0")

    def name(text: str) -> int:
        off = len(strings)
        strings.extend(text.encode() + b"\0")
        return off

    def head(name_off: int, kind: int, vlen: int, size_or_type: int) -> bytes:
        return struct.pack("<III", name_off, (kind << 24) | vlen, size_or_type)

    types = bytearray()
    types += head(name("int"), btf.KIND_INT, 0, 4) + struct.pack("<I", (btf.INT_SIGNED << 24) | 32)
    types += head(name("xdp_md"), btf.KIND_STRUCT, 0, 24)  # without members
    types += head(0, btf.KIND_PTR, 0, 2) + head(0, btf.KIND_PTR, 0, 0)  # xdp_md *, void *
    types += head(0, btf.KIND_FUNC_PROTO, 1, 1) + struct.pack("<II", name("ctx"), 3)  # main
    types += head(0, btf.KIND_FUNC_PROTO, 2, 1) + struct.pack("<IIII", name("index"), 1, name("data"), 4)
    for fname, kind in funcs:
        types += head(name(fname), btf.KIND_FUNC, 1 if kind == "main" else 0, 5 if kind == "main" else 6)
    hdr = struct.pack(
        "<HBBIIIII", btf.BTF_MAGIC, btf.BTF_VERSION, 0, btf.HEADER_MIN_LEN, 0, len(types), len(types), len(strings)
    )
    return hdr + bytes(types) + bytes(strings)


def alu(op: AluOp, dst: int, src: int | Imm) -> Alu:
    """64-bit `dst op= src` (`src` a register number or an Imm)."""
    return Alu(0, op, True, dst, src if isinstance(src, Imm) else Reg(src))


def mov(dst: int, src: int | Imm) -> Alu:
    return alu(AluOp.MOV, dst, src)


def add(dst: int, src: int | Imm) -> Alu:
    return alu(AluOp.ADD, dst, src)


def ld_map(dst: int, fd: int) -> LoadImm64:
    """`dst = map fd` (ld_imm64 with BPF_PSEUDO_MAP_FD)."""
    return LoadImm64(0, dst, fd, PseudoSrc.MAP_FD)
