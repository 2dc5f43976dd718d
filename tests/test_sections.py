"""Program discovery on section layouts the corpus's C cannot produce: a numbered section
without FUNC symbols (old samples' `2/16`), a legacy `xdp_prog` name, a `.text` subprogram
called through a relocation, and a callback address taken with ld_imm64."""

from __future__ import annotations

from conftest import assemble, objdump

from lifter.insn import Call, FuncRef, LoadImm64
from lifter.printer import objdump_text
from lifter.program import load_object

ASM = """
    .text
    .globl helper_fn
    .type helper_fn,@function
helper_fn:
    r0 = r1
    r0 += 1
    exit
    .size helper_fn, 24

    .section "2/16","ax"
    r1 = 7
    call helper_fn
    if r0 == 8 goto +1
    r0 = 1
    exit

    .section xdp_prog,"ax"
    .globl legacy_prog
    .type legacy_prog,@function
legacy_prog:
    r2 = helper_fn ll
    r0 = 2
    exit
    .size legacy_prog, 32
"""


def test_programs_in_numbered_and_legacy_sections(tmp_path):
    path = assemble(ASM, tmp_path, "sections")
    obj = load_object(path)
    progs = {(p.name, p.section): p for p in obj.programs}
    assert set(progs) == {("2/16", "2/16"), ("legacy_prog", "xdp_prog")}
    numbered = progs[("2/16", "2/16")]
    assert [f.name for f in numbered.functions] == ["2/16", "helper_fn"]
    assert numbered.attach == "unknown" and progs[("legacy_prog", "xdp_prog")].attach == "xdp"
    call = next(i for i in numbered.entry.insns if isinstance(i, Call))
    assert call.callee == (".text", 0) and call.symbol == "helper_fn"
    assert numbered.insn_count == 5 + 3
    ld = next(i for i in progs[("legacy_prog", "xdp_prog")].entry.insns if isinstance(i, LoadImm64))
    assert ld.ref == FuncRef(".text", 0)
    assert [f.name for f in progs[("legacy_prog", "xdp_prog")].functions] == ["legacy_prog", "helper_fn"]
    # Slots 0 r1 = 7, 1 call, 2 if r0 == 8 goto 4, 3 r0 = 1, 4 exit.
    cfg = numbered.entry.cfg
    assert sorted(cfg.blocks) == [0, 3, 4] and cfg.exits == [4]


def test_disassembly_of_symbol_less_section_equals_objdump(tmp_path):
    path = assemble(ASM, tmp_path, "sections")
    obj = load_object(path)
    order = [s.name for s in obj.image.sections]
    funcs = sorted(obj.functions.values(), key=lambda f: (order.index(f.section), f.start))
    assert objdump_text(obj, funcs).splitlines() == objdump(path).splitlines()
