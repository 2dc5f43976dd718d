"""Exploration options from the command line, time budgets included (`--timeout`,
`--path-timeout`): one place that turns the shared exploration flags into `Options`, for
analyze, rules, check, cost and check-flower.

With a budget, what cannot be explored in time still gives a report: the paths cut are
UNKNOWN (so never offloaded), each names the instruction and source line it was cut at,
and `analyze` lists the functions explored and those not reached (analyzer/report.py).
"""

from __future__ import annotations

import argparse

from analyzer.exploration import Options
from offload.options import seconds


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="time budget of each program's exploration: past it the paths not finished are cut "
        "(UNKNOWN, kept in software) and the report says what was explored and where paths were cut",
    )
    p.add_argument(
        "--path-timeout",
        type=seconds,
        metavar="SECONDS",
        help="time budget of one path (counted over the branches it came from); past it the path is cut",
    )


def options(args: argparse.Namespace) -> Options:
    """The exploration options the shared flags ask for."""
    return Options(
        max_len=args.max_len,
        loop_bound=args.loop_bound,
        max_insns=args.max_insns,
        max_paths=args.max_paths,
        timeout=getattr(args, "timeout", None),
        path_timeout=getattr(args, "path_timeout", None),
    )
