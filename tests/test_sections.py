"""Program discovery on section layouts the corpus's C cannot produce: a numbered section
without FUNC symbols (old samples' `2/16`), a legacy `xdp_prog` name, a `.text` subprogram
called through a relocation, and a callback address taken with ld_imm64."""

from __future__ import annotations

from conftest import assemble, objdump

from analyzer.explore import explore
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


IRREDUCIBLE = """
    .section xdp,"ax"
    .globl twoway
    .type twoway,@function
twoway:
    r0 = 2
    if r1 == 0 goto +2
    r0 = 1
    r2 = 0
    if r2 == 0 goto -3
    exit
    .size twoway, 48
"""


def test_irreducible_loop_is_reported_not_a_crash(tmp_path):
    """A cycle entered at two places (slot 2 from the fall-through, slot 4 from the jump at
    slot 1): neither block dominates the other, so the retreating edge is irreducible. The
    dominator walk reaches the entry, which networkx >= 3.5 leaves out of its map; found by
    the lifter fuzz test as a KeyError."""
    path = assemble(IRREDUCIBLE, tmp_path, "irreducible")
    cfg = load_object(path).programs[0].entry.cfg
    # Slot 1 jumps to 4 (1 + 1 + 2) and slot 4 back to 2 (4 + 1 - 3): blocks 0-1, 2-3, 4, 5.
    assert sorted(cfg.blocks) == [0, 2, 4, 5]
    assert cfg.irreducible and not cfg.loops
    # The explorer bounds the irreducible cycle like a natural loop (before, only the
    # 2,000,000-instruction budget stopped it, after minutes).
    obj = load_object(path)
    result = explore(obj, obj.programs[0])
    assert [p.truncated for p in result.paths] == ["loop at xdp:2 cut after 64 iterations (--loop-bound)"]
