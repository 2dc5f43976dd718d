"""`xdp2tc analyze`: every path of each XDP program, its verdict, effects and decision classes
(`--engine angr` and `--cross-check` in offload/angrcmd.py).

With `--timeout`, every phase keeps the budget: the exploration (80 % of it), then the map-use
proofs, the decoding and the printing of path conditions (analyzer/report.py): what it cut is
listed (`PARTIAL:` lines; JSON `budget.cut` and `budget.report_cut`) and a map whose proofs
it stopped is not claimed control-plane or stats-only. A partial report exits 0 like a whole
one; exit 2 is bad input or usage (README, Exit codes)."""

from __future__ import annotations

import argparse
import json
import sys

from analyzer.exploration import ExplorationError
from analyzer.explore import explore
from analyzer.report import SCHEMA, analysis_json, analysis_text
from lifter.errors import LiftError
from lifter.program import load_object
from offload import angrcmd
from offload.commands import command_help
from offload.console import clear_progress, progress_printer
from offload.options import exploration_flags, exploration_options
from offload.programs import xdp_programs


def add_parser(sub) -> None:
    p = sub.add_parser("analyze", help=command_help("analyze"))
    p.add_argument("file")
    exploration_flags(p)
    p.add_argument("--json", action="store_true", help=f"machine-readable output (schema {SCHEMA})")
    angrcmd.add_flags(p)


def run(args: argparse.Namespace) -> int:
    if angrcmd.wanted(args):
        return angrcmd.analyze(args)
    obj = load_object(args.file)
    docs = []
    for prog in xdp_programs(obj, args.program):
        progress = progress_printer(prog.name)
        try:
            e = explore(obj, prog, exploration_options(args), progress)
        except ExplorationError as err:
            raise LiftError(str(err), file=obj.path, program=prog.name) from err
        finally:
            clear_progress()
        if args.json:
            docs.append(analysis_json(e))
        else:
            sys.stdout.write(analysis_text(e))
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else {"schema": SCHEMA + "+list", "programs": docs}, indent=2))
    return 0
