"""Which programs of an object a command acts on: every XDP program (`xdp_programs`: `analyze`,
`verify`) or the programs attached to a device (`device_programs`: `rules`, `check`, `sync`).

A device runs one XDP program, so a script for one device must come from one program
(issue 20). The *entry programs* of an object are the XDP programs a loader attaches to a
device: not subprograms (the lifter never makes them programs), not the programs the object's
own PROG_ARRAYs name in their static `.values` (they run only when the dispatcher tail-calls
them), and not devmap/cpumap programs (they run on a map entry's egress, not at a device's
ingress).
"""

from __future__ import annotations

from lifter.errors import LiftError
from lifter.program import BpfObject, Program

#: Sections whose programs run from a devmap/cpumap entry, not attached to a device (the
#: kernel cannot test-run them either).
EGRESS_SECTIONS = ("xdp/devmap", "xdp/cpumap", "xdp.frags/devmap", "xdp.frags/cpumap")


def tail_call_targets(obj: BpfObject) -> set[str]:
    """Names of the programs the object's PROG_ARRAYs hold from their static `.values`."""
    return {
        name for m in obj.maps if m.type is not None and m.type.holds == "program" for name in m.static_values.values()
    }


def entry_programs(obj: BpfObject) -> list[Program]:
    """The object's XDP programs that are attached to a device (see the module docstring)."""
    targets = tail_call_targets(obj)
    return [p for p in obj.programs if p.is_xdp and p.name not in targets and not p.section.startswith(EGRESS_SECTIONS)]


def device_programs(obj: BpfObject, name: str | None, per_program_output: bool) -> list[Program]:
    """The programs a per-device command handles.

    `name` (from `--program`) picks one XDP program. Without it: the only entry program; or,
    when the user asked for one output per program (`--out-dir`), every entry program.
    Several entry programs and neither option is bad usage (LiftError, exit 2), never one
    script for one device that merges several programs' decisions.
    """
    if name:
        prog = obj.program(name)
        if not prog.is_xdp:
            raise LiftError(f"program {prog.name} (section {prog.section}) is not an XDP program", file=obj.path)
        return [prog]
    entries = entry_programs(obj)
    if len(entries) == 1 or (entries and per_program_output):
        return entries
    if entries:
        raise LiftError(
            f"{len(entries)} entry programs and a device runs one: choose one with "
            f"--program, or write one output per program with --out-dir DIR: " + ", ".join(p.name for p in entries),
            file=obj.path,
        )
    xdp = [p for p in obj.programs if p.is_xdp]
    if xdp:
        raise LiftError(
            "no entry program (every XDP program is a tail-call target or a "
            "devmap/cpumap program); name one with --program: " + ", ".join(p.name for p in xdp),
            file=obj.path,
        )
    raise _no_xdp_program(obj)


def xdp_programs(obj: BpfObject, name: str | None) -> list[Program]:
    """The program asked for, or every XDP program of the object (legacy sections such as
    `prog` count as XDP); a clear error when there is none."""
    if name:
        return [obj.program(name)]
    progs = [p for p in obj.programs if p.is_xdp]
    if not progs:
        raise _no_xdp_program(obj)
    return progs


def _no_xdp_program(obj: BpfObject) -> LiftError:
    sections = ", ".join(sorted({p.section for p in obj.programs})) or "none"
    return LiftError(f"no XDP program (sections: {sections})", file=obj.path)
