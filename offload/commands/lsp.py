"""`xdp2tc lsp`: the language server for editors (offload/lsp.py; pygls is imported only here)."""

from __future__ import annotations

import argparse

from lifter.errors import LiftError


def add_parser(sub) -> None:
    sub.add_parser("lsp", help="the language server for editors (stdio; offload/lsp.py)")


def run(args: argparse.Namespace) -> int:
    try:
        from offload import lsp
    except ImportError as err:
        raise LiftError(f"lsp needs pygls and lsprotocol (pip install 'xdp2tc[lsp]'): {err}") from None
    return lsp.run()
