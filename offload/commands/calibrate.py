"""`xdp2tc calibrate`: measure the cost model's prices on this kernel (analyzer/cost/calibrate.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys

import corpus
from analyzer import kernel
from analyzer.cost.calibrate import CalibrationError, Settings, calibrate
from lifter.errors import LiftError
from offload.commands import command_help
from offload.options import at_least


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help=command_help("calibrate"))
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


def run(args: argparse.Namespace) -> int:
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
                + (
                    f" ({100 * net['within_20pct_or_1ns']:.0f}% within ±20% or ±1 ns without the test run's overhead)"
                    if (net := profile.fit.get("cross_validation_net") or {}).get("within_20pct_or_1ns") is not None
                    else ""
                )
                if cv
                else ""
            )
        )
        for entry, why in sorted(profile.method.get("unmeasured", {}).items()):
            print(f"{args.out}: {entry} not measured ({why}); `cost` names it as a missing price")
    else:
        sys.stdout.write(text)
    return 0


def default_fit_objects() -> list[str]:
    """The corpus's clang builds (hand-written XDP programs covering the instruction
    classes, helpers and map types), when built."""
    build = corpus.BUILD_DIR / "clang"
    return [str(p) for p in sorted(build.glob("*.o"))] if build.is_dir() else []
