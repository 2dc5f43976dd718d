"""`xdp2tc disasm`: disassembly in llvm-objdump -dr layout."""

from __future__ import annotations

import argparse
import sys

from lifter.printer import objdump_text
from lifter.program import load_object
from offload.commands import command_help


def add_parser(sub) -> None:
    p = sub.add_parser("disasm", help=command_help("disasm"))
    p.add_argument("file")
    p.add_argument("--program", "-p", help="only this program and its subprograms")
    p.add_argument("--lines", "-l", action="store_true", help="interleave source file:line:col")


def run(args: argparse.Namespace) -> int:
    obj = load_object(args.file)
    if args.program:
        functions = obj.program(args.program).functions
    else:
        order = [s.name for s in obj.image.sections]
        functions = sorted(obj.functions.values(), key=lambda f: (order.index(f.section), f.start))
    sys.stdout.write(objdump_text(obj, functions, lines=args.lines))
    return 0
