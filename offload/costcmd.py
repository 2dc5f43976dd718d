"""`xdp2tc cost` and `xdp2tc calibrate`: the front-ends of the cost model (analyzer/cost/).

The `cost --json` schema is documented where the report is rendered, analyzer/cost/report.py.

Exit codes: 0, 1 when the tail-call graph has a cycle or a chain deeper than the kernel's 33
tail calls (the report is still printed), 2 for bad input (one line).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

import corpus
from analyzer import kernel
from analyzer.cost.calibrate import CalibrationError, Settings, calibrate
from analyzer.cost.count import count
from analyzer.cost.price import path_costs
from analyzer.cost.profile import ProfileError, foreign_profile, load_profile
from analyzer.cost.report import SCHEMA, cost_json, cost_text
from analyzer.cost.tailgraph import Mapping, Node, ProgramCost, TailGraph, parse_mapping
from analyzer.exploration import ExplorationError, Options
from lifter.errors import LiftError
from lifter.program import BpfObject, Program, load_object
from offload.options import at_least
from offload.programs import device_programs, entry_programs

#: Exit code when the tail-call graph is unbounded (cycle) or deeper than the kernel allows.
EXIT_GRAPH = 1


def add_parsers(sub, exploration_flags) -> None:
    p = sub.add_parser("cost", help="per-path cost in ns, tail-call share and savings, tail-call graph")
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
    p = sub.add_parser("calibrate", help="measure the cost model's prices on this kernel")
    p.add_argument("--out", "-o", metavar="PROFILE.json", help="write the profile here (default: stdout)")
    d = Settings()
    p.add_argument("--repeat", type=at_least(1), default=d.repeat, help=f"runs per timing (default {d.repeat})")
    p.add_argument("--rounds", type=at_least(1), default=d.rounds, help=f"rounds, median kept (default {d.rounds})")
    p.add_argument("--scale", type=float, default=d.scale, help=argparse.SUPPRESS)
    p.add_argument(
        "--fit",
        action="append",
        default=[],
        metavar="FILE.o",
        help="fit the instruction prices on the paths of these XDP objects (repeatable; "
        "default: the corpus's clang builds when they are built)",
    )
    p.add_argument("--no-fit", action="store_true", help="micro-program prices only (no fit on real paths)")
    p.add_argument("--fit-repeat", type=at_least(1), default=d.fit_repeat, help=argparse.SUPPRESS)
    p.add_argument("--fit-rounds", type=at_least(1), default=d.fit_rounds, help=argparse.SUPPRESS)


# --------------------------------------------------------------------------- calibrate


def run_calibrate(args: argparse.Namespace) -> int:
    if not 0 < args.scale <= 10:  # --repeat and --rounds are range-checked by the parser
        raise LiftError("--scale must be in (0, 10]")
    progress = None
    if sys.stderr.isatty():

        def progress(msg: str) -> None:
            print(f"\rcalibrating: {msg}", end="", file=sys.stderr, flush=True)

    if args.no_fit and args.fit:
        raise LiftError("--fit and --no-fit contradict each other")
    for f in args.fit:
        if not os.path.isfile(f):
            raise LiftError("no such file", file=f)
    fit_objects = [] if args.no_fit else (args.fit or default_fit_objects())
    if not fit_objects and not args.no_fit:
        print(
            "xdp2tc: calibrate: no objects to fit instruction prices on (build the corpus or pass --fit FILE.o); "
            "micro-program prices only",
            file=sys.stderr,
        )
    settings = Settings(args.repeat, args.rounds, args.scale, args.fit_repeat, args.fit_rounds)
    try:
        profile = calibrate(settings, progress, fit_objects)
    except kernel.KernelUnavailable as err:
        print(f"xdp2tc: calibrate: {err}", file=sys.stderr)
        return kernel.EXIT_UNAVAILABLE
    except CalibrationError as err:
        raise LiftError(f"calibrate: {err}") from None
    finally:
        if progress:
            print("\r\033[K", end="", file=sys.stderr)
    text = json.dumps(profile.to_json(), indent=2) + "\n"
    if args.out:
        try:
            with open(args.out, "w") as fh:
                fh.write(text)
        except OSError as err:
            raise LiftError(f"cannot write the profile: {err.strerror}", file=args.out) from None
        cv = profile.fit.get("cross_validation") if profile.fit else None
        print(
            f"{args.out}: profile for kernel {profile.kernel} on {profile.cpu}: overhead "
            f"{profile.overhead_ns:g} ns per test run; tail call {profile.tail_call['constant']:.1f} ns "
            f"(constant index) / {profile.tail_call['variable']:.1f} ns (variable index)"
            + (
                f"; instruction prices fitted on {cv['paths']} paths, {100 * cv['within_20pct']:.0f}% "
                f"within ±20% on held-back programs"
                if cv
                else ""
            )
        )
    else:
        sys.stdout.write(text)
    return 0


def default_fit_objects() -> list[str]:
    """The corpus's clang builds (hand-written XDP programs covering the instruction
    classes, helpers and map types), when built."""
    build = corpus.BUILD_DIR / "clang"
    return [str(p) for p in sorted(build.glob("*.o"))] if build.is_dir() else []


# --------------------------------------------------------------------------- cost


def run_cost(args: argparse.Namespace) -> int:
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
    options = Options(
        max_len=args.max_len, loop_bound=args.loop_bound, max_insns=args.max_insns, max_paths=args.max_paths
    )
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
            if shutil.which("dot") is None:
                raise LiftError("--svg needs graphviz's `dot` (apt-get install graphviz)")
            dot = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, check=True).stdout
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
        counted = count(obj, prog, options, _progress(prog.name))
    except ExplorationError as err:
        raise LiftError(str(err), file=obj.path, program=prog.name) from err
    finally:
        if sys.stderr.isatty():
            print("\r\033[K", end="", file=sys.stderr)
    return ProgramCost(Node(obj.path, prog.name), counted, path_costs(counted, profile), root)


def _progress(name: str):
    if not sys.stderr.isatty():
        return None

    def show(paths: int, queued: int, insns: int) -> None:
        print(f"\r{name}: {paths} paths, {queued} states queued", end="", file=sys.stderr, flush=True)

    return show


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b


COMMANDS = {"cost": run_cost, "calibrate": run_calibrate}
