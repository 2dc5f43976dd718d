"""`xdp2tc cost`: per-path cost in ns, tail-call share and savings, and the tail-call graph
(the cost model is analyzer/cost/; the `--json` schema is documented in its report.py).

Exit codes: 0, 1 when the tail-call graph has a cycle or a chain deeper than the kernel's 33
tail calls (the report is still printed), 2 for bad input (one line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from analyzer.cost.count import count
from analyzer.cost.price import path_costs
from analyzer.cost.profile import ProfileError, foreign_profile, load_profile
from analyzer.cost.report import SCHEMA, cost_json, cost_text
from analyzer.cost.tailgraph import Mapping, Node, ProgramCost, TailGraph, parse_mapping
from analyzer.exploration import ExplorationError, Options
from lifter.errors import LiftError
from lifter.program import BpfObject, Program, load_object
from offload.commands import command_help
from offload.console import clear_progress, progress_printer, svg
from offload.options import exploration_flags, exploration_options
from offload.programs import device_programs, entry_programs

#: Exit code when the tail-call graph is unbounded (cycle) or deeper than the kernel allows.
EXIT_GRAPH = 1


def add_parser(sub) -> None:
    p = sub.add_parser("cost", help=command_help("cost"))
    p.add_argument("files", nargs="+", metavar="FILE.o")
    exploration_flags(p)
    p.add_argument("--profile", help="calibration profile from `xdp2tc calibrate` (default: the shipped one)")
    p.add_argument(
        "--prog-array",
        action="append",
        default=[],
        metavar="MAP=IDX:FILE:PROG",
        help="slot IDX of PROG_ARRAY MAP holds program PROG of FILE at run time (repeatable)",
    )
    p.add_argument("--json", action="store_true", help=f"machine-readable output (schema {SCHEMA})")
    p.add_argument("--graph", action="store_true", help="print the tail-call graph (graphviz dot) instead")
    p.add_argument("--svg", action="store_true", help="with --graph: SVG through graphviz's `dot`")


def run(args: argparse.Namespace) -> int:
    try:
        profile = load_profile(args.profile)
    except ProfileError as err:
        raise LiftError(str(err)) from None
    try:
        mappings = [parse_mapping(t) for t in args.prog_array]
    except ValueError as err:
        raise LiftError(str(err)) from None
    if args.svg and not args.graph:
        raise LiftError("--svg needs --graph")
    foreign = foreign_profile(profile)
    if foreign:
        print(
            f"xdp2tc: cost: warning: the profile is from another machine ({foreign}); "
            "run `xdp2tc calibrate -o PROFILE.json` here and pass --profile PROFILE.json",
            file=sys.stderr,
        )
    options = exploration_options(args)
    objects = [load_object(f) for f in args.files]
    programs: list[ProgramCost] = []
    for obj in objects:
        for prog, root in _programs(obj, args.program, objects):
            programs.append(_analyse(obj, prog, options, profile, root=root))
    extra: dict[str, BpfObject] = {}
    for m in mappings:
        _check_mapping(m, objects)
        if any(p.node.program == m.program and _same(p.node.file, m.file) for p in programs):
            continue
        obj = next((o for o in objects if _same(o.path, m.file)), None) or extra.get(m.file)
        if obj is None:
            obj = extra[m.file] = load_object(m.file)
        prog = obj.program(m.program)
        programs.append(_analyse(obj, prog, options, profile, root=False))
    graph = TailGraph(programs, mappings, profile)
    if args.graph:
        dot = graph.dot()
        if args.svg:
            dot = svg(dot, "--svg")
        sys.stdout.write(dot)
    elif args.json:
        print(json.dumps(cost_json(programs, graph, profile), indent=2))
    else:
        sys.stdout.write(cost_text(programs, graph, profile))
    for err in graph.errors:
        print(f"xdp2tc: cost: {err}", file=sys.stderr)
    return EXIT_GRAPH if graph.errors else 0


def _programs(obj: BpfObject, name: str | None, objects: list[BpfObject]) -> list[tuple[Program, bool]]:
    """(program, root) pairs to price in `obj`: the entry programs (offload/programs.py) as
    roots, and without `--program` the object's other XDP programs (tail-call targets,
    devmap/cpumap programs) as non-roots, so tail-call chains compose. With several
    objects, `--program` names a program of at least one of them."""
    if name and not any(p.name == name or f"{p.section}/{p.name}" == name for p in obj.programs):
        if not any(any(p.name == name or f"{p.section}/{p.name}" == name for p in o.programs) for o in objects):
            obj.program(name)  # raises the usual one-line error with the choices
        return []
    if name:
        return [(p, True) for p in device_programs(obj, name, per_program_output=True)]
    entries = entry_programs(obj)
    if not entries:
        device_programs(obj, None, per_program_output=True)  # the one-line error: none / no entry program
    return [(p, p in entries) for p in obj.programs if p.is_xdp]


def _check_mapping(m: Mapping, objects: list[BpfObject]) -> None:
    found = [o.map(m.map) for o in objects if o.map(m.map) is not None]
    if not found:
        raise LiftError(
            f"--prog-array {m.map}={m.index}:{m.file}:{m.program}: no map {m.map!r} in "
            + ", ".join(o.path for o in objects)
        )
    mdef = found[0]
    if mdef.type is None or mdef.type.name != "prog_array":
        raise LiftError(
            f"--prog-array: map {m.map} is a {mdef.type.name if mdef.type else 'map of unknown type'}, not a PROG_ARRAY"
        )
    if mdef.max_entries is not None and m.index >= mdef.max_entries:
        raise LiftError(f"--prog-array: slot {m.index} is past the end of {m.map} ({mdef.max_entries} entries)")


def _analyse(obj: BpfObject, prog: Program, options: Options, profile, root: bool) -> ProgramCost:
    try:
        counted = count(obj, prog, options, progress_printer(prog.name))
    except ExplorationError as err:
        raise LiftError(str(err), file=obj.path, program=prog.name) from err
    finally:
        clear_progress()
    return ProgramCost(Node(obj.path, prog.name), counted, path_costs(counted, profile), root)


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b
