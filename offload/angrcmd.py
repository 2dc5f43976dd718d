"""`xdp2tc analyze --engine angr` and `xdp2tc analyze --cross-check`.

angr is imported here only inside the commands, so the other commands never pay its import
time. `--cross-check` exits 1 when the engines disagree on some input (each disagreement is
printed with the packet, the map entries, both engines' answers and the kernel's). It prints
which mode ran (`--cross-check-mode`, analyzer/crosscheck.py; why, when auto chose sharded),
in mode sharded one line per shard (angr paths finished and compared, and what cut the rest,
where), and, when angr's
exploration was cut by its budget, a PARTIAL line with how many angr paths were compared.
"""

from __future__ import annotations

import argparse
import json
import sys

from analyzer import kernel
from analyzer.report import SCHEMA, angr_analysis_json, render_text
from lifter.errors import LiftError
from lifter.program import load_object
from offload.options import at_least, exploration_options, seconds
from offload.programs import EGRESS_SECTIONS, xdp_programs


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=("z3", "angr"),
        default="z3",
        help="symbolic engine: z3 (default) or angr (needs the 'angr' extra)",
    )
    p.add_argument(
        "--cross-check",
        action="store_true",
        help="run both engines and compare them on every path's model; exit 1 on a disagreement",
    )
    p.add_argument(
        "--cross-check-mode",
        choices=("auto", "symbolic", "replay", "sharded"),
        default="auto",
        help="with --cross-check: symbolic (both engines' paths against each other), replay (every z3 "
        "witness run concretely by angr, plus the angr paths finished within its budget), sharded (angr "
        "explores the input space in shards that fix the bytes moving packet offsets: ethertype, VLAN tags, "
        "IPv4 IHL, IPv6 extension headers; both directions per shard, z3 witnesses in cut parts replayed), "
        "or auto (default: symbolic when angr finishes in one piece; sharded when it reads the packet at "
        "offsets taken from the packet and does not finish within a tenth of its budget after that; else replay)",
    )
    p.add_argument(
        "--angr-max-states",
        type=at_least(1),
        default=512,
        metavar="N",
        help="angr engine: open states at once before the latest are cut (UNKNOWN; the report is PARTIAL)",
    )
    p.add_argument(
        "--angr-max-seconds",
        type=seconds,
        default=600.0,
        metavar="SECONDS",
        help="angr engine: wall time of one exploration when --timeout gives none (default 600; in "
        "--cross-check-mode sharded: CPU seconds, shared by the shards)",
    )
    p.add_argument(
        "--angr-max-rss",
        type=at_least(16),
        metavar="MIB",
        help="angr engine: memory growth before every open state is cut "
        "(default: half the available memory, at most 4096 MiB)",
    )


def wanted(args: argparse.Namespace) -> bool:
    return args.engine == "angr" or args.cross_check


def limits(args: argparse.Namespace, engine):
    """The angr engine's Limits the command line asks for."""
    return engine.Limits(
        max_active=args.angr_max_states, max_rss_mib=args.angr_max_rss, max_seconds=args.angr_max_seconds
    )


def _angr_module(path: str):
    try:
        from analyzer import angr_engine
    except ImportError as err:
        raise LiftError(f"the angr engine needs angr (pip install 'xdp2tc[angr]'): {err}", file=path) from err
    return angr_engine


def analyze(args: argparse.Namespace) -> int:
    """Run the angr engine (or both, with --cross-check) on each program of `args.file`."""
    obj = load_object(args.file)
    engine = _angr_module(obj.path)
    if args.cross_check:
        return _cross_check(
            obj,
            xdp_programs(obj, args.program),
            exploration_options(args),
            engine,
            limits(args, engine),
            args.cross_check_mode,
        )
    docs = []
    for prog in xdp_programs(obj, args.program):
        try:
            a = engine.explore_angr(obj, prog, exploration_options(args), limits=limits(args, engine))
        except engine.AngrEngineError as err:
            raise LiftError(str(err), file=obj.path, program=prog.name) from err
        doc = angr_analysis_json(a, conditions=args.json)
        if args.json:
            docs.append(doc)
        else:
            sys.stdout.write(render_text(doc))
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else {"schema": SCHEMA + "+list", "programs": docs}, indent=2))
    return 0


def _cross_check(obj, programs, options, engine, angr_limits, mode: str = "auto") -> int:
    from analyzer.crosscheck import cross_check

    disagreements = 0
    for prog in programs:
        try:
            check = cross_check(
                obj,
                prog,
                options,
                test_run=not prog.section.startswith(EGRESS_SECTIONS),
                limits=angr_limits,
                mode=mode,
            )
        except engine.AngrEngineError as err:
            raise LiftError(str(err), file=obj.path, program=prog.name) from err
        r = check.report
        if r.disagreements:
            confirm(check, obj, prog)
        print(
            f"{obj.path}: program {prog.name}: z3 {r.z3_paths} paths ({r.z3_seconds:.2f} s), angr "
            f"{r.angr_paths}{' merged' if r.angr_merged else ''} paths ({r.angr_seconds:.2f} s); "
            f"compared {r.z3_compared} z3 witnesses and "
            f"{r.angr_compared} angr models: {len(r.disagreements)} disagreements"
        )
        if r.mode == "replay":
            print(f"  mode replay: {r.z3_replayed} z3 witnesses run concretely by angr ({r.replay_seconds:.2f} s CPU)")
        elif r.mode == "sharded":
            if r.chosen:
                print(f"  auto mode chose {r.chosen}")
            finished = sum(s.finished for s in r.shards)
            print(
                f"  mode sharded: {len(r.shards)} shards, {finished} of {r.angr_paths} angr paths finished; "
                f"{r.z3_replayed} z3 witnesses in cut parts run concretely by angr ({r.replay_seconds:.2f} s CPU)"
            )
            for s in r.shards:
                print(f"    {s}")
        else:
            print("  mode symbolic: both engines' paths checked against each other")
        if not r.angr_complete:
            print(
                f"  PARTIAL: angr's exploration was cut ({r.angr_budget}): {r.angr_compared} of "
                f"{r.angr_paths} angr paths compared with z3"
            )
        grouped: dict[tuple[str, str], list[int]] = {}
        for eng, path, why in r.skipped:  # paths set aside for one reason: one line
            grouped.setdefault((eng, why), []).append(path)
        for (eng, why), paths in grouped.items():
            ids = ", ".join(f"#{p}" for p in paths)
            print(f"  {eng} path{'s' if len(paths) > 1 else ''} {ids} not compared: {why}")
        for d in r.disagreements:
            print(f"  DISAGREE {d}")
        disagreements += len(r.disagreements)
    return 1 if disagreements else 0


def confirm(check, obj, prog) -> None:
    """Ask the kernel about every disagreement (recorded as not run when it cannot)."""
    why = None
    if prog.section.startswith(EGRESS_SECTIONS):
        why = "BPF_PROG_TEST_RUN cannot run devmap/cpumap programs"
    else:
        try:
            kernel.check_kernel()
            with kernel.load(obj.path, programs=[prog.name]) as loaded:
                check.confirm(loaded)
            return
        except (kernel.KernelUnavailable, kernel.KernelLoadError) as err:
            why = str(err).splitlines()[0]
    for d in check.report.disagreements:
        d.kernel_error = why
