"""Read a BPF ELF relocatable object into plain sections, symbols and relocations.

This is the only module that touches pyelftools. Everything it returns is a plain dataclass,
so later stages never see a parser object, and every way pyelftools can fail on a damaged file
becomes one `LiftError` naming the file and, where known, the section.
"""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError, ELFParseError, ELFRelocationError
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from .errors import LiftError
from .opcodes import EM_BPF

SHF_EXECINSTR = 0x4
SHT_NOBITS = 8

#: Exceptions pyelftools (and the construct library under it) raise on malformed input.
_PARSE_ERRORS = (
    ELFError,
    ELFParseError,
    ELFRelocationError,
    struct.error,
    ValueError,
    KeyError,
    IndexError,
    UnicodeDecodeError,
    OverflowError,
    AttributeError,
    TypeError,
    AssertionError,
    zlib.error,  # a section flagged SHF_COMPRESSED whose bytes are not zlib
)


@dataclass(frozen=True)
class Symbol:
    """An ELF symbol. `section` is the name of the section it is defined in (None: undefined
    or absolute)."""

    index: int
    name: str
    value: int
    size: int
    type: str  # FUNC, OBJECT, SECTION, NOTYPE, FILE
    bind: str  # GLOBAL, LOCAL, WEAK
    section: str | None


@dataclass(frozen=True)
class Relocation:
    """A REL entry: patch at byte `offset` of the target section, against `symbol`."""

    offset: int
    type: int
    symbol: Symbol


@dataclass
class Section:
    """A section's header fields and bytes (zeros for NOBITS such as .bss)."""

    index: int
    name: str
    type: str
    flags: int
    size: int
    data: bytes

    @property
    def is_code(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR) and self.size > 0


@dataclass
class ElfImage:
    """Everything the lifter needs from an ELF file, already read."""

    path: str
    sections: list[Section]
    symbols: list[Symbol]
    relocations: dict[str, list[Relocation]] = field(default_factory=dict)  # target section -> rels

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def symbols_in(self, section: str, types: tuple[str, ...] | None = None) -> list[Symbol]:
        """Symbols defined in `section`, by address, optionally only of the given types."""
        found = [s for s in self.symbols if s.section == section and (types is None or s.type in types)]
        return sorted(found, key=lambda s: (s.value, s.name))


def read_elf(path: str | Path) -> ElfImage:
    """Read `path`; raise LiftError for anything that is not a readable little-endian BPF object."""
    name = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise LiftError(f"cannot read file: {exc.strerror or exc}", file=name) from None
    return parse_elf(raw, name)


def parse_elf(raw: bytes, name: str = "<bytes>") -> ElfImage:
    """Parse an in-memory ELF image (see `read_elf`)."""
    if raw[:4] != b"\x7fELF":
        raise LiftError("not an ELF file (bad magic)", file=name)
    current = None
    try:
        elf = ELFFile(io.BytesIO(raw))
        if elf.elfclass != 64:
            raise LiftError("not a BPF object: ELF class is 32-bit", file=name)
        if elf["e_machine"] not in ("EM_BPF", EM_BPF):
            raise LiftError(f"not a BPF object: machine is {elf['e_machine']}", file=name)
        if not elf.little_endian:
            raise LiftError("big-endian BPF objects (bpfeb) are not supported", file=name)
        sections: list[Section] = []
        for index, sec in enumerate(elf.iter_sections()):
            current = sec.name or f"#{index}"
            sections.append(_read_section(index, sec, len(raw)))
        current = ".symtab"
        symbols = _read_symbols(elf, sections)
        relocations: dict[str, list[Relocation]] = {}
        for sec in elf.iter_sections():
            if not isinstance(sec, RelocationSection):
                continue
            current = sec.name
            target_index = sec["sh_info"]
            if not 0 < target_index < len(sections):
                raise LiftError(f"relocation section targets section index {target_index}", file=name, section=current)
            rels = relocations.setdefault(sections[target_index].name, [])
            for rel in sec.iter_relocations():
                sym_index = rel["r_info_sym"]
                if sym_index >= len(symbols):
                    raise LiftError(
                        f"relocation at 0x{rel['r_offset']:x} names symbol {sym_index}, but there are {len(symbols)}",
                        file=name,
                        section=current,
                    )
                rels.append(Relocation(rel["r_offset"], rel["r_info_type"], symbols[sym_index]))
    except LiftError as err:
        raise err.located(file=name) from None
    except _PARSE_ERRORS as exc:
        where = f" (in {current})" if current else ""
        raise LiftError(f"malformed ELF{where}: {exc.__class__.__name__}: {exc}", file=name) from None
    return ElfImage(name, sections, symbols, relocations)


def _read_section(index: int, sec, file_size: int) -> Section:
    size = sec["sh_size"]
    if sec["sh_type"] == "SHT_NOBITS":
        data = bytes(size) if size < (1 << 28) else b""
    else:
        if sec["sh_offset"] + size > file_size:
            raise LiftError(
                f"section {sec.name or index} extends past the end of the file "
                f"(offset {sec['sh_offset']} + size {size} > {file_size})"
            )
        data = sec.data()
    return Section(index, sec.name, sec["sh_type"], sec["sh_flags"], size, data)


def _read_symbols(elf: ELFFile, sections: list[Section]) -> list[Symbol]:
    table = elf.get_section_by_name(".symtab")
    if not isinstance(table, SymbolTableSection):
        return []
    out: list[Symbol] = []
    for index, sym in enumerate(table.iter_symbols()):
        shndx = sym["st_shndx"]
        section = sections[shndx].name if isinstance(shndx, int) and 0 < shndx < len(sections) else None
        if isinstance(shndx, int) and shndx >= len(sections):
            raise LiftError(f"symbol {sym.name or index} is in section index {shndx}, but there are {len(sections)}")
        name = sym.name
        if sym["st_info"]["type"] == "STT_SECTION" and not name and section:
            name = section
        out.append(
            Symbol(
                index,
                name,
                sym["st_value"],
                sym["st_size"],
                sym["st_info"]["type"].removeprefix("STT_"),
                sym["st_info"]["bind"].removeprefix("STB_"),
                section,
            )
        )
    return out
