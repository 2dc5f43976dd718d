"""What commands print besides their documents: progress on a terminal, and graphviz
rendering of the dot graphs (`cfg --format svg`, `cost --graph --svg`)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from lifter.errors import LiftError


def progress_printer(name: str):
    """An exploration's progress callback printing on stderr, or None when stderr is not a
    terminal (end it with `clear_progress`)."""
    if not sys.stderr.isatty():
        return None

    def show(paths: int, queued: int, insns: int) -> None:
        print(
            f"\r{name}: {paths} paths, {queued} states queued, {insns} instructions",
            end="",
            file=sys.stderr,
            flush=True,
        )

    return show


def clear_progress() -> None:
    """Erase the progress line (on a terminal only)."""
    if sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr)


def svg(dot: str, option: str) -> str:
    """Graphviz text rendered as SVG by `dot`; `option` names what asked for it in the error."""
    if shutil.which("dot") is None:
        raise LiftError(f"{option} needs graphviz's `dot` (apt-get install graphviz)")
    return subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, check=True).stdout
