"""The end every bench script shares: the machine's load beside the numbers (wall times
stretch with it) and the results written as JSON for an issue's note."""

from __future__ import annotations

import json
import os
from pathlib import Path


def load_note() -> tuple[float, str]:
    """The 1-minute load average now, and the line that says it."""
    load = os.getloadavg()[0]
    return load, f"(machine load average {load:.1f} on {os.cpu_count()} CPUs: wall times stretch with it)"


def write_json(path: str | None, doc: dict) -> None:
    """`doc` as indented JSON at `path` (its folder made), when a path is given."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(doc, indent=2) + "\n")
