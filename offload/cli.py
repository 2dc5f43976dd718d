"""The `xdp2tc` command: one subcommand per pipeline view.

Each subcommand is a module of offload/commands/ (`add_parser(sub)`, `run(args)`), except
`check`, the CI gate, whose options and runner are in offload/check.py with the gate itself.
Options several commands share are in offload/options.py, program selection in
offload/programs.py, progress and graphviz output in offload/console.py.

Exit codes (documented in the README):
  0  success
  1  the command ran and found a problem the user asked it to gate on (`check`, `verify`, ...)
  2  bad input or usage: unreadable/invalid object, unknown program, bad option
Errors are one line on stderr, `xdp2tc: <file>: <section>: ...: <what>`; never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib import metadata

from lifter.errors import EXIT_BAD_INPUT, LiftError
from offload import check, flowercheck
from offload.commands import analyze, calibrate, cfg, cost, disasm, info, lsp, rules, sync, verify
from offload.options import OneLineParser, exploration_flags


def parser() -> argparse.ArgumentParser:
    top = OneLineParser(prog="xdp2tc", description=__doc__.split("\n")[0])
    top.add_argument("--version", action="version", version=f"xdp2tc {metadata.version('xdp2tc')}")
    sub = top.add_subparsers(dest="command", required=True)
    for command in (info, disasm, cfg, analyze, verify, rules, sync, cost, calibrate):
        command.add_parser(sub)
    check.add_parser(sub, exploration_flags)
    lsp.add_parser(sub)
    return top


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "info": info.run,
    "disasm": disasm.run,
    "cfg": cfg.run,
    "analyze": analyze.run,
    "verify": verify.run,
    "rules": flowercheck.with_check(rules.run),
    "sync": sync.run,
    "cost": cost.run,
    "calibrate": calibrate.run,
    "lsp": lsp.run,
}
COMMANDS.update(check.COMMANDS)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as done:  # usage errors (one line, 2), --help and --version (0)
        return done.code if isinstance(done.code, int) else 0
    try:
        return COMMANDS[args.command](args)
    except LiftError as err:
        print(f"xdp2tc: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
