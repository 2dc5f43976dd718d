"""The `xdp2tc` command: one subcommand per pipeline view.

Each subcommand is a module of offload/commands/ (`add_parser(sub)`, `run(args)`), except
`check`, the CI gate, whose options and runner are in offload/check.py with the gate itself;
offload/commands/__init__.py lists them. Only the module of the command being run is
imported (each pulls in its part of the pipeline: z3, the analysis, the rules); `--help`
and `--version` import none. Options several commands share are in offload/options.py,
program selection in offload/programs.py, progress and graphviz output in offload/console.py.

Exit codes (documented in the README):
  0  success
  1  the command ran and found a problem the user asked it to gate on (`check`, `verify`, ...)
  2  bad input or usage: unreadable/invalid object, unknown program, bad option
Errors are one line on stderr, `xdp2tc: <file>: <section>: ...: <what>`; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from types import ModuleType

from lifter.errors import EXIT_BAD_INPUT, LiftError
from offload.commands import COMMANDS
from offload.options import OneLineParser


class Version(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked (importing
    importlib.metadata and reading the package's metadata cost every run ~40 ms)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib import metadata

        print(f"xdp2tc {metadata.version('xdp2tc')}")
        parser.exit()


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with `only` (a command's name, or "" for none) a parser whose
    other commands have their name and help but no options: what parsing a command line of
    `only` needs, since argparse reads the options of the chosen command alone."""
    top = OneLineParser(prog="xdp2tc", description=__doc__.split("\n")[0])
    top.add_argument(
        "--version", action=Version, nargs=0, default=argparse.SUPPRESS, help="show program's version number and exit"
    )
    sub = top.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in COMMANDS.items():
        if only is None or name == only:
            command_module(name).add_parser(sub)
        else:
            sub.add_parser(name, help=help_text)
    return top


def command_module(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS[name][0])


def runner(name: str) -> Callable[[argparse.Namespace], int]:
    run = command_module(name).run
    if name != "rules":
        return run

    def rules(args: argparse.Namespace) -> int:
        if not getattr(args, "check_flower", False):  # the VM and verifier are imported only for it
            return run(args)
        from offload import flowercheck  # --check-flower: check the printed script

        return flowercheck.with_check(run)(args)

    return rules


def chosen(argv: list[str]) -> str | None:
    """The command of a command line: its first word that is not an option (the top-level
    options, --help and --version, take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser(chosen(argv) or "").parse_args(argv)  # no command (--help, --version): none set up
    except SystemExit as done:  # usage errors (one line, 2), --help and --version (0)
        return done.code if isinstance(done.code, int) else 0
    try:
        return runner(args.command)(args)
    except LiftError as err:
        print(f"xdp2tc: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
