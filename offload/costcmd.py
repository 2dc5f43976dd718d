"""`xdp2tc cost` and `xdp2tc calibrate` (the cost model, analyzer/cost.py).

JSON schema `xdp2tc.cost/1` (`cost --json`; fields are stable within a schema version,
new fields may be added):

    schema
    profile     {source, kernel, cpu, created, overhead_ns, path_ns,
                 fit {paths, folds, within_20pct, median_abs_error} | null   (null: micro-program prices),
                 foreign: what differs from this machine | null}   (overhead: per test run, not in any path)
    programs    [{file, program, section, root (false: a tail-call target, a devmap/cpumap program
                  or reached only through --prog-array; offload/programs.py's entry programs are roots),
                  summary {paths, ns {min, max}, worst_path, worst_ns, worst_tail_share,
                           saving_merge_ns, saving_const_ns},
                  sites [{program, pc, kind: constant|variable, why}],
                  paths [{id, verdict, programs, truncated, insns {min, max},
                          ns {min, median, max} | null, subpaths, exact,
                          counts {insn {class: n}, helper {name: n}, lookup {type: n},
                                  pkt {read_bytes, write_bytes}, callbacks}   (of the dearest sub-path)
                          tail_calls [{caller, pc, map, index, target, kind, ns}], tail_misses,
                          chain_depth, tail_share, saving_merge_ns, saving_const_ns,
                          uncalibrated [counter names], continues {targets, ns {min, max} | null,
                          chain_depth} | null,
                          ratio_to_cheapest (max ns / the program's cheapest path's min ns)}]}]
    graph       {nodes [{id, file, program, root}], edges [{from, to, map, index, kind,
                 source: static|prog-array, ns, paths, sites}]}
    errors      [one line each: tail-call cycles, chains deeper than 33]

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
from analyzer.calibrate import CalibrationError, Settings, calibrate
from analyzer.cost import (
    SCHEMA,
    PathCost,
    ProfileError,
    Site,
    count,
    foreign_profile,
    grouped,
    load_profile,
    path_costs,
)
from analyzer.exploration import ExplorationError, Options
from analyzer.tailgraph import Mapping, Node, ProgramCost, TailGraph, parse_mapping
from lifter.errors import LiftError
from lifter.program import BpfObject, Program, load_object
from offload import budget
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
    options = budget.options(args)
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


# --------------------------------------------------------------------------- reports


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def path_json(p: ProgramCost, pc: PathCost, graph: TailGraph) -> dict:
    path = pc.path
    worst = pc.worst
    counts = pc.vectors[worst] if worst >= 0 else {}
    price = pc.prices[worst] if worst >= 0 else None
    ns = pc.ns()
    lo, hi = pc.insns()
    tails = []
    for t in path.tail_calls:
        site = Site(t.caller, t.pc)
        kind = p.counted.site_kind(site)
        tails.append(
            {
                "caller": t.caller,
                "pc": t.pc,
                "map": t.map,
                "index": t.index,
                "target": t.target,
                "kind": kind,
                "ns": _r(graph.profile.tail_call[kind]),
            }
        )
    attempts = sum(n for k, n in counts.items() if k.startswith("tail."))
    g = grouped(counts)
    cont = graph.continuation(p, pc)
    return {
        "id": path.id,
        "verdict": path.verdict,
        "programs": list(path.programs),
        "truncated": path.truncated,
        "insns": {"min": lo, "max": hi},
        "ns": None if ns is None else {"min": _r(ns[0]), "median": _r(ns[1]), "max": _r(ns[2])},
        "subpaths": len(pc.vectors),
        "exact": pc.exact,
        "counts": {
            "insn": g.get("insn", {}),
            "helper": g.get("helper", {}),
            "lookup": g.get("lookup", {}),
            "pkt": g.get("pkt", {}),
            "callbacks": counts.get("callback", 0),
        },
        "tail_calls": tails,
        "tail_misses": max(attempts - len(path.tail_calls), 0),
        "chain_depth": len(path.tail_calls),
        "tail_share": _r(price.parts["tail_calls"] / price.ns) if price and price.ns else 0.0,
        "saving_merge_ns": _r(price.saving_merge) if price else 0.0,
        "saving_const_ns": _r(price.saving_const) if price else 0.0,
        "uncalibrated": sorted(price.uncalibrated) if price else [],
        "continues": None
        if cont is None
        else {
            "targets": [str(n) for n in cont.targets],
            "ns": None if cont.ns is None else {"min": _r(cont.ns[0]), "max": _r(cont.ns[1])},
            "chain_depth": cont.depth,
        },
    }


def program_json(p: ProgramCost, graph: TailGraph) -> dict:
    paths = [path_json(p, pc, graph) for pc in p.paths]
    priced = [(pc, pc.ns()) for pc in p.paths if pc.ns() is not None]
    cheapest = min((x[1][0] for x in priced), default=None)
    for row in paths:  # how many times the program's cheapest path each costs (profile-independent-ish)
        row["ratio_to_cheapest"] = _r(row["ns"]["max"] / cheapest) if row["ns"] and cheapest else None
    worst = max(priced, key=lambda x: x[1][2]) if priced else None
    wp = worst[0].prices[worst[0].worst] if worst else None
    sites = sorted(
        {Site(t.caller, t.pc) for pc in p.paths for t in pc.path.tail_calls}
        | set(s for s in p.counted.site_keys if p.counted.site_keys[s]),
        key=lambda s: (s.program, s.pc),
    )
    return {
        "file": p.node.file,
        "program": p.node.program,
        "section": p.counted.exploration.program.section,
        "root": p.root,
        "summary": {
            "paths": len(p.paths),
            "ns": None
            if not priced
            else {"min": _r(min(x[1][0] for x in priced)), "max": _r(max(x[1][2] for x in priced))},
            "worst_path": worst[0].path.id if worst else None,
            "worst_ns": _r(worst[1][2]) if worst else None,
            "worst_tail_share": _r(wp.parts["tail_calls"] / wp.ns) if wp and wp.ns else 0.0,
            "saving_merge_ns": _r(max((x["saving_merge_ns"] for x in paths), default=0.0)),
            "saving_const_ns": _r(max((x["saving_const_ns"] for x in paths), default=0.0)),
        },
        "sites": [
            {"program": s.program, "pc": s.pc, "kind": p.counted.site_kind(s), "why": p.site_reason(s)} for s in sites
        ],
        "paths": paths,
    }


def cost_json(programs: list[ProgramCost], graph: TailGraph, profile) -> dict:
    return {
        "schema": SCHEMA,
        "profile": {
            "source": profile.source,
            "kernel": profile.kernel,
            "cpu": profile.cpu,
            "created": profile.created,
            "overhead_ns": profile.overhead_ns,
            "path_ns": profile.path_ns,
            "fit": _fit_summary(profile),
            "foreign": foreign_profile(profile),
        },
        "programs": [program_json(p, graph) for p in programs],
        "graph": graph.to_json(),
        "errors": graph.errors,
    }


def _fit_summary(profile) -> dict | None:
    """The fit's cross-validated error (None: instruction prices from micro-programs only)."""
    cv = profile.fit.get("cross_validation") if profile.fit else None
    if not cv:
        return None
    return {k: cv.get(k) for k in ("paths", "folds", "within_20pct", "median_abs_error")}


def _span(ns: dict | None) -> str:
    if ns is None:
        return "?"
    if ns.get("median") is None:
        return f"{ns['min']:.1f}-{ns['max']:.1f}" if ns["min"] != ns["max"] else f"{ns['min']:.1f}"
    if ns["min"] == ns["max"]:
        return f"{ns['min']:.1f}"
    return f"{ns['min']:.1f}/{ns['median']:.1f}/{ns['max']:.1f}"


def cost_text(programs: list[ProgramCost], graph: TailGraph, profile) -> str:
    doc = cost_json(programs, graph, profile)
    prof = doc["profile"]
    fit = prof["fit"]
    out = [
        f"profile: kernel {prof['kernel']}, {prof['cpu']} ({prof['source']}); prices exclude the "
        f"{prof['overhead_ns']:g} ns a test run adds per packet",
        "  instruction prices "
        + (
            f"fitted on {fit['paths']} real paths: {100 * fit['within_20pct']:.0f}% within ±20% on held-back "
            f"programs ({fit['folds']}-fold cross-validation)"
            if fit
            else "from micro-programs only (not fitted on real paths)"
        )
        + ("; MEASURED ON ANOTHER MACHINE (" + prof["foreign"] + ")" if prof["foreign"] else ""),
    ]
    for prog in doc["programs"]:
        s = prog["summary"]
        how = "" if prog["root"] else " (not an entry program: reached by a tail call or a devmap/cpumap)"
        out.append(f"\n{prog['file']}: program {prog['program']} ({prog['section']}){how}: {s['paths']} paths")
        out.append(f"  {'path':<5} {'verdict':<9} {'insns':>7} {'ns min/med/max':>16} {'xmin':>5}  calls")
        for p in prog["paths"]:
            n = (
                str(p["insns"]["min"])
                if p["insns"]["min"] == p["insns"]["max"]
                else f"{p['insns']['min']}-{p['insns']['max']}"
            )
            what = []
            if p["counts"]["helper"]:
                what.append(
                    ", ".join(
                        f"{k}" + (f" x{v}" if v > 1 else "")
                        for k, v in p["counts"]["helper"].items()
                        if k not in ("map_lookup_elem", "tail_call")
                    )
                )
            if p["counts"]["lookup"]:
                what.append(
                    "lookup "
                    + ", ".join(f"{k}" + (f" x{v}" if v > 1 else "") for k, v in p["counts"]["lookup"].items())
                )
            if p["tail_calls"]:
                what.append("tail " + " -> ".join(f"{t['target'] or '?'} ({t['kind']})" for t in p["tail_calls"]))
            if p["continues"]:
                c = p["continues"]
                what.append(
                    "continues in "
                    + (", ".join(c["targets"]) if c["targets"] else "an unknown program")
                    + (f": {_span(c['ns'])} ns end to end" if c["ns"] else "")
                )
            if p["uncalibrated"]:
                what.append("no price for " + ", ".join(p["uncalibrated"]) + " (lower bound)")
            flag = "~" if not p["exact"] else " "
            ratio = "" if p["ratio_to_cheapest"] is None else f"{p['ratio_to_cheapest']:.1f}"
            out.append(
                f"  #{p['id']:<4} {p['verdict']:<9} {n:>7} {_span(p['ns']):>16}{flag}{ratio:>5}  "
                + "; ".join(w for w in what if w)
            )
        if s["worst_path"] is not None:
            out.append(
                f"  worst: path #{s['worst_path']}, {s['worst_ns']:.1f} ns"
                + (f", {100 * s['worst_tail_share']:.0f}% of it in tail calls" if s["worst_tail_share"] else "")
            )
        if s["saving_merge_ns"] or s["saving_const_ns"]:
            out.append(
                f"  per packet: merging the tail-called programs saves up to {s['saving_merge_ns']:.1f} ns"
                + (
                    f"; constant instead of variable indices up to {s['saving_const_ns']:.1f} ns"
                    if s["saving_const_ns"]
                    else ""
                )
            )
        for site in prog["sites"]:
            out.append(
                f"  tail-call site {site['program']}:{site['pc']}: {site['kind']} index in the kernel ({site['why']})"
            )
    if doc["graph"]["edges"]:
        out.append("\ntail-call graph:")
        for e in doc["graph"]["edges"]:
            idx = "?" if e["index"] is None else e["index"]
            out.append(f"  {e['from']} -> {e['to']}  {e['map']}[{idx}] {e['kind']} {e['source']}: {e['ns']:.1f} ns")
    return "\n".join(out) + "\n"


COMMANDS = {"cost": run_cost, "calibrate": run_calibrate}
