"""`xdp2tc lsp`: the language server for editors (offload/lsp.py; pygls is imported only there).

The server needs none of the analysis in its own process (the analysis runs in the
processes offload/editor.py forks), so `run` replaces this process by a fresh interpreter
running offload/lsp.py: same pid, same stdin/stdout, nothing the CLI imported.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from lifter.errors import LiftError
from offload.commands import command_help


def add_parser(sub) -> None:
    sub.add_parser("lsp", help=command_help("lsp"))


def run(args: argparse.Namespace) -> int:
    missing = [m for m in ("pygls", "lsprotocol") if importlib.util.find_spec(m) is None]
    if missing:
        raise LiftError(f"lsp needs pygls and lsprotocol (pip install 'xdp2tc[lsp]'): {', '.join(missing)} missing")
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "offload.lsp"])
    return 0  # not reached
