"""`xdp2tc verify`: every path's prediction checked against the running kernel."""

from __future__ import annotations

import argparse
import sys

from analyzer import kernel
from analyzer.explore import explore
from analyzer.report import counted
from analyzer.verify import verify
from lifter.errors import EXIT_BAD_INPUT, LiftError
from lifter.program import load_object
from offload.commands import command_help
from offload.console import progress_printer
from offload.options import at_least, exploration_flags, exploration_options
from offload.programs import EGRESS_SECTIONS, xdp_programs


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help=command_help("verify"))
    p.add_argument("file")
    exploration_flags(p)
    p.add_argument("--random", type=at_least(0), default=1000, help="random packets after the witnesses (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def run(args: argparse.Namespace) -> int:
    obj = load_object(args.file)
    programs = [p for p in xdp_programs(obj, args.program) if not p.section.startswith(EGRESS_SECTIONS)]
    if not programs:
        raise LiftError(
            "no program that BPF_PROG_TEST_RUN can run (devmap/cpumap egress programs cannot be test-run)",
            file=obj.path,
        )
    try:
        kernel.check_kernel()
    except kernel.KernelUnavailable as err:
        print(f"xdp2tc: {obj.path}: {err}", file=sys.stderr)
        return kernel.EXIT_UNAVAILABLE
    failed = False
    for prog in programs:
        e = explore(obj, prog, exploration_options(args), progress_printer(prog.name))
        try:
            with kernel.load(obj.path, programs=[prog.name]) as loaded:
                report = verify(e, loaded, args.random, args.seed)
        except kernel.KernelLoadError as err:
            print(f"xdp2tc: {err}".splitlines()[0], file=sys.stderr)
            return EXIT_BAD_INPUT
        print(
            f"{obj.path}: program {prog.name}: {counted(len(e.paths), 'path')}, {report.packets} packets "
            f"({report.witnesses} witnesses, {report.random} random), {len(report.mismatches)} mismatches"
            + (f", {report.consistent} allowed by helper-dependent paths" if report.consistent else "")
        )
        for path_id, why in report.unwitnessable:
            print(f"  path #{path_id} not run: {why}")
        for m in report.mismatches:
            print(f"  MISMATCH {m}")
        failed |= bool(report.mismatches)
    return 1 if failed else 0
