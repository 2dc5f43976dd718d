"""A lifted BPF object: programs, their functions (bpf-to-bpf subprograms), maps, BTF and
line info. `load_object(path)` is the lifter's entry point.

Programs are found as libbpf finds them: every FUNC symbol in an executable section other
than `.text` is a program (a section without FUNC symbols is one program named after it);
functions in `.text` are subprograms, pulled into a program when it calls them or takes
their address (callbacks). Instruction indices stay section-relative, as llvm-objdump
prints them; a call's `callee` is (section, start slot) of the called function.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from .btf import Btf, parse_btf
from .btf_ext import BtfExt, LineInfo, parse_btf_ext
from .cfg import Cfg, build_cfg
from .decode import decode
from .elf import ElfImage, Relocation, Section, parse_elf, read_elf
from .errors import LiftError
from .insn import Call, ExternRef, FuncRef, Insn, LoadImm64, MapRef, slots
from .maps import MapDef, read_maps, relocation_map
from .opcodes import INSN_SIZE, MAX_PROG_INSNS, CallSrc, Reloc

if TYPE_CHECKING:
    import networkx as nx

#: Section-name prefixes and what loader attach type they mean (libbpf's SEC() names plus
#: the legacy names older loaders accepted).
XDP_SECTION_PREFIXES = ("xdp.frags/", "xdp.frags", "xdp/", "xdp_", "xdp")
#: Section prefixes libbpf gives to other program types (the analyzer refuses those).
NON_XDP_SECTION_PREFIXES = (
    "fentry",
    "fexit",
    "fmod_ret",
    "kprobe",
    "kretprobe",
    "uprobe",
    "uretprobe",
    "ksyscall",
    "tracepoint",
    "tp/",
    "tp_btf",
    "raw_tp",
    "raw_tracepoint",
    "tc",
    "classifier",
    "action",
    "socket",
    "sk_",
    "sockops",
    "cgroup",
    "lsm",
    "struct_ops",
    "perf_event",
    "iter",
    "syscall",
    "freplace",
    "lwt",
    "flow_dissector",
    "netfilter",
    "netkit",
    "usdt",
)

FunctionKey = tuple[str, int]  # (section, start slot)


@dataclass
class Function:
    """One BPF function: a program entry or a subprogram, slots [start, end) of `section`."""

    name: str
    section: str
    start: int
    end: int
    insns: list[Insn]
    is_program: bool
    cfg: Cfg | None = None

    @property
    def key(self) -> FunctionKey:
        return (self.section, self.start)

    @property
    def size(self) -> int:
        """Slots, i.e. what the kernel counts as instructions."""
        return self.end - self.start

    def callees(self) -> list[tuple[int, FunctionKey, str]]:
        """(pc, callee, kind) for every bpf-to-bpf call ("call") and function address
        taken ("callback")."""
        out = []
        for insn in self.insns:
            if isinstance(insn, Call) and insn.callee is not None:
                out.append((insn.pc, insn.callee, "call"))
            elif isinstance(insn, LoadImm64) and isinstance(insn.ref, FuncRef):
                out.append((insn.pc, (insn.ref.section, insn.ref.offset), "callback"))
        return out


@dataclass
class Program:
    """An entry point and every function it can reach."""

    name: str
    section: str
    entry: Function
    functions: list[Function]  # entry first
    #: (caller, callee, kind) of every call and callback reference, in the order found
    calls: list[tuple[FunctionKey, FunctionKey, str]]

    @cached_property
    def call_graph(self) -> nx.DiGraph:
        """The calls as a networkx graph (imported only when asked: renderers), each edge with
        its `kind`."""
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_node(self.entry.key)
        for caller, callee, kind in self.calls:
            graph.add_edge(caller, callee, kind=kind)
        return graph

    @property
    def attach(self) -> str:
        """`xdp`, `xdp.frags`, ... from the section name; `unknown` for other names."""
        for prefix in XDP_SECTION_PREFIXES:
            if self.section.startswith(prefix):
                return "xdp.frags" if prefix.startswith("xdp.frags") else "xdp"
        return "unknown"

    @property
    def is_xdp(self) -> bool:
        """XDP by section name, or an unknown legacy name (`prog`) that is not another
        program type's prefix: libbpf-less loaders attach those as XDP."""
        return self.attach != "unknown" or not self.section.startswith(NON_XDP_SECTION_PREFIXES)

    @property
    def insn_count(self) -> int:
        """Instructions the kernel would load: the entry plus every reachable subprogram."""
        return sum(f.size for f in self.functions)


@dataclass
class BpfObject:
    """Everything lifted from one ELF object."""

    path: str
    image: ElfImage
    license: str | None
    programs: list[Program]
    functions: dict[FunctionKey, Function]
    maps: list[MapDef]
    btf: Btf | None
    btf_ext: BtfExt | None
    kernel_version: int | None = None
    _lines: dict[str, list[LineInfo]] = field(default_factory=dict, repr=False)

    def program(self, name: str | None = None) -> Program:
        """The program called `name` (or the only one). LiftError lists the choices."""
        if name is None:
            if len(self.programs) == 1:
                return self.programs[0]
            raise LiftError(
                f"{len(self.programs)} programs; choose one with --program: "
                + ", ".join(p.name for p in self.programs),
                file=self.path,
            )
        for prog in self.programs:
            if name in (prog.name, f"{prog.section}/{prog.name}"):
                return prog
        raise LiftError(
            f"no program named {name!r}; programs: " + ", ".join(p.name for p in self.programs) or "none",
            file=self.path,
        )

    def map(self, name: str) -> MapDef | None:
        return next((m for m in self.maps if m.name == name), None)

    def line_at(self, section: str, pc: int) -> LineInfo | None:
        """The source line of slot `pc`: the last line-info record at or before it, within
        the same function."""
        records = self._lines.get(section)
        if not records:
            return None
        index = bisect.bisect_right(records, pc, key=lambda rec: rec.insn) - 1
        if index < 0:
            return None
        func = self.function_at(section, pc)
        best = records[index]
        return best if func is None or best.insn >= func.start else None

    def function_at(self, section: str, pc: int) -> Function | None:
        for func in self.functions.values():
            if func.section == section and func.start <= pc < func.end:
                return func
        return None

    @property
    def source_files(self) -> list[str]:
        return sorted({r.file_name for recs in self._lines.values() for r in recs})


def load_object(path: str | Path) -> BpfObject:
    """Lift the object at `path`. Raises LiftError (one line, names the place) on bad input."""
    image = read_elf(path)
    try:
        return _lift(image)
    except LiftError as err:
        raise err.located(file=image.path) from None


def load_bytes(raw: bytes, name: str = "<bytes>") -> BpfObject:
    """Lift an in-memory object (same checks as `load_object`)."""
    image = parse_elf(raw, name)
    try:
        return _lift(image)
    except LiftError as err:
        raise err.located(file=image.path) from None


def _lift(image: ElfImage) -> BpfObject:
    btf = btf_ext = None
    btf_sec = image.section(".BTF")
    if btf_sec is not None:
        try:
            btf = parse_btf(btf_sec.data)
            ext_sec = image.section(".BTF.ext")
            if ext_sec is not None:
                btf_ext = parse_btf_ext(ext_sec.data, btf)
        except LiftError as err:
            raise err.located(section=".BTF.ext" if btf is not None else ".BTF") from None
    maps = read_maps(image, btf)

    functions: dict[FunctionKey, Function] = {}
    for section in image.sections:
        if section.is_code:
            for func in _section_functions(image, section, maps):
                functions[func.key] = func
    for func in functions.values():
        _check_callees(func, functions)
        try:
            func.cfg = build_cfg(func.name, func.insns, func.start, func.end)
        except LiftError as err:
            raise err.located(section=func.section, program=func.name) from None

    programs = [_program(func, functions) for func in functions.values() if func.is_program]
    license_sec = image.section("license")
    license_text = license_sec.data.split(b"\0", 1)[0].decode("ascii", "replace") if license_sec else None
    version_sec = image.section("version")
    version = int.from_bytes(version_sec.data[:4], "little") if version_sec and version_sec.size >= 4 else None
    lines = {sec: sorted(recs, key=lambda r: r.insn) for sec, recs in (btf_ext.line_info.items() if btf_ext else ())}
    return BpfObject(image.path, image, license_text, programs, functions, maps, btf, btf_ext, version, lines)


def _section_functions(image: ElfImage, section: Section, maps: list[MapDef]) -> list[Function]:
    """Split a code section into functions by its FUNC symbols, decode and relocate them."""
    if section.size // INSN_SIZE > MAX_PROG_INSNS:
        raise LiftError(
            f"{section.size // INSN_SIZE} instructions; the kernel loads at most {MAX_PROG_INSNS} in a program",
            section=section.name,
            program=_func_symbol_at(image, section.name, 0),
        )
    try:
        insns = decode(section.data)
    except LiftError as err:
        func_sym = _func_symbol_at(image, section.name, err.insn or 0)
        raise err.located(section=section.name, program=func_sym) from None
    insns = _relocate(image, section, insns, maps)
    count = section.size // INSN_SIZE
    is_program_section = section.name != ".text"

    symbols = [s for s in image.symbols_in(section.name, ("FUNC",))]
    bounds: list[tuple[str, int, bool]] = []  # (name, start, is_program)
    for sym in symbols:
        if sym.value % INSN_SIZE:
            raise LiftError(
                f"function {sym.name} starts at byte {sym.value}, not on an instruction", section=section.name
            )
        bounds.append((sym.name, sym.value // INSN_SIZE, is_program_section))
    if not bounds or bounds[0][1] != 0:
        # Code before the first FUNC symbol (or no symbols at all): one function named after
        # the section, as loaders of symbol-less objects treat it.
        bounds.insert(0, (section.name, 0, is_program_section))

    funcs = []
    for index, (name, start, is_program) in enumerate(bounds):
        end = bounds[index + 1][1] if index + 1 < len(bounds) else count
        if end <= start:
            raise LiftError(f"function {name} overlaps the next one", section=section.name)
        body = [i for i in insns if start <= i.pc < end]
        if not body or body[0].pc != start or body[-1].pc + slots(body[-1]) > end:
            raise LiftError(f"function {name} does not start or end on an instruction boundary", section=section.name)
        funcs.append(Function(name, section.name, start, end, body, is_program))
    return funcs


def _func_symbol_at(image: ElfImage, section: str, pc: int) -> str | None:
    best = None
    for sym in image.symbols_in(section, ("FUNC",)):
        if sym.value // INSN_SIZE <= pc:
            best = sym.name
    return best


def _relocate(image: ElfImage, section: Section, insns: list[Insn], maps: list[MapDef]) -> list[Insn]:
    """Attach each relocation's meaning to its instruction and resolve local call targets."""
    by_pc = {i.pc: n for n, i in enumerate(insns)}
    out = list(insns)
    relocated: set[int] = set()
    for rel in image.relocations.get(section.name, []):
        pc, rest = divmod(rel.offset, INSN_SIZE)
        where = {"section": section.name, "insn": pc, "program": _func_symbol_at(image, section.name, pc)}
        if rest or pc not in by_pc:
            raise LiftError(f"relocation at byte 0x{rel.offset:x} is not at the start of an instruction", **where)
        index = by_pc[pc]
        try:
            out[index] = _apply_relocation(image, out[index], rel, maps)
        except LiftError as err:
            raise err.located(**where) from None
        relocated.add(pc)
    for index, insn in enumerate(out):
        if isinstance(insn, Call) and insn.kind is CallSrc.LOCAL and insn.pc not in relocated:
            out[index] = dataclasses.replace(insn, callee=(section.name, insn.pc + 1 + insn.imm))
    return out


def _apply_relocation(image: ElfImage, insn: Insn, rel: Relocation, maps: list[MapDef]) -> Insn:
    sym = rel.symbol
    if rel.type == Reloc.R_BPF_64_64:
        if not isinstance(insn, LoadImm64):
            raise LiftError(f"R_BPF_64_64 against {sym.name} on an instruction that is not ld_imm64")
        if sym.section is None:
            return dataclasses.replace(insn, ref=ExternRef(sym.name))
        target = image.section(sym.section)
        if target is not None and target.is_code:
            byte = sym.value + _s32(insn.value & 0xFFFFFFFF)
            if byte % INSN_SIZE:
                raise LiftError(f"function address {sym.name}+{byte} is not on an instruction")
            return dataclasses.replace(insn, ref=FuncRef(sym.section, byte // INSN_SIZE))
        found = relocation_map(maps, rel)
        if found is None:
            raise LiftError(f"R_BPF_64_64 against {sym.name} in section {sym.section}, which is neither a map nor code")
        mdef, base = found
        if base is None:
            return dataclasses.replace(insn, ref=MapRef(mdef.name))
        # REL semantics, as libbpf applies them: symbol value + the imm already in the insn.
        offset = base + _s32(insn.value & 0xFFFFFFFF)
        if not 0 <= offset <= (mdef.value_size or 0):
            raise LiftError(
                f"R_BPF_64_64 against {sym.name} points at byte {offset} of {mdef.name}, which has {mdef.value_size}"
            )
        return dataclasses.replace(insn, ref=MapRef(mdef.name, offset))
    if rel.type == Reloc.R_BPF_64_32:
        if not isinstance(insn, Call) or insn.kind is CallSrc.HELPER:
            raise LiftError(f"R_BPF_64_32 against {sym.name} on an instruction that is not a bpf-to-bpf or kfunc call")
        if sym.section is None:  # kfunc (extern)
            return dataclasses.replace(insn, symbol=sym.name)
        if insn.kind is CallSrc.KFUNC:
            raise LiftError(f"kfunc call against defined symbol {sym.name}")
        target = image.section(sym.section)
        if target is None or not target.is_code:
            raise LiftError(f"call relocation against {sym.name}, which is not in a code section")
        if sym.value % INSN_SIZE:
            raise LiftError(f"call target {sym.name} is not on an instruction")
        return dataclasses.replace(insn, callee=(sym.section, sym.value // INSN_SIZE + insn.imm + 1), symbol=sym.name)
    raise LiftError(f"relocation type {rel.type} ({_reloc_name(rel.type)}) against {sym.name} is not valid in code")


def _reloc_name(type_id: int) -> str:
    try:
        return Reloc(type_id).name
    except ValueError:
        return "unknown"


def _s32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def _check_callees(func: Function, functions: dict[FunctionKey, Function]) -> None:
    for pc, callee, kind in func.callees():
        if callee not in functions:
            section, start = callee
            inside = next((f for f in functions.values() if f.section == section and f.start < start < f.end), None)
            what = f"the middle of function {inside.name}" if inside else "no function"
            raise LiftError(
                f"{kind} target {section}+{start} is {what}", section=func.section, program=func.name, insn=pc
            )


def _program(entry: Function, functions: dict[FunctionKey, Function]) -> Program:
    calls = []
    order = [entry]
    seen = {entry.key}
    todo = [entry]
    while todo:
        func = todo.pop()
        for _pc, callee, kind in func.callees():
            calls.append((func.key, callee, kind))
            if callee not in seen:
                seen.add(callee)
                order.append(functions[callee])
                todo.append(functions[callee])
    return Program(entry.name, entry.section, entry, order, calls)
