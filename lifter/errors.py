"""Errors the lifter raises on bad input.

Every error names where it happened (file, section, program, instruction index) so the
CLI can print it as one line and exit with a documented code, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Exit code for input xdp2tc cannot read (bad ELF, bad encoding, bad relocation, ...).
EXIT_BAD_INPUT = 2


@dataclass
class LiftError(Exception):
    """An object file that cannot be lifted exactly.

    `where` parts are optional; `str()` joins those that are set, e.g.
    ``prog.o: section xdp: program xdp_main: insn 12: unknown opcode 0xff``.
    """

    message: str
    file: str | None = None
    section: str | None = None
    program: str | None = None
    insn: int | None = None

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file)
        if self.section:
            parts.append(f"section {self.section}")
        if self.program:
            parts.append(f"program {self.program}")
        if self.insn is not None:
            parts.append(f"insn {self.insn}")
        parts.append(self.message)
        return ": ".join(parts)

    def located(self, **where: object) -> LiftError:
        """Return a copy with missing location parts filled in (callers add context)."""
        fields = {k: getattr(self, k) for k in ("file", "section", "program", "insn")}
        for key, value in where.items():
            if fields.get(key) is None:
                fields[key] = value
        return LiftError(self.message, **fields)
