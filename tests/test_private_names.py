"""No private reach-ins across product modules (TEAM.md: make a shared name public).

A module of lifter/, analyzer/, rules/ or offload/ may not import a `_name` from another module
(`from x import _y`) nor use an attribute `_y` that it does not define itself (`ex._end`,
`kernel._library`): a leading underscore means "only this module relies on it". The check
reads the source with `ast` (nothing is imported); `make lint` runs it as a script too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lifter", "analyzer", "rules", "offload")
#: Reach-ins known and owned by work in progress elsewhere: file -> the names, and why they stay.
KNOWN: dict[str, set[str]] = {}
#: Standard-library names documented as public that start with an underscore anyway.
DOCUMENTED = {"os._exit"}  # the way out of a forked child (rules/ahead.py) without unwinding


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_here(tree: ast.Module) -> set[str]:
    """Names a module defines: functions, classes, assigned names and attributes, fields."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            out.add(n.attr)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
    return out


def reach_ins(path: Path) -> list[tuple[int, str]]:
    """(line, what) for each private name `path` uses from another module."""
    tree = ast.parse(path.read_text(), str(path))
    own = _defined_here(tree)
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            found += [(n.lineno, f"from {n.module} import {a.name}") for a in n.names if _private(a.name)]
        elif isinstance(n, ast.Attribute) and _private(n.attr) and n.attr not in own:
            if ast.unparse(n) in DOCUMENTED:
                continue
            found.append((n.lineno, ast.unparse(n)))
    return found


def findings() -> list[str]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for line, what in reach_ins(path):
                if what.rsplit(".", 1)[-1].rsplit(" ", 1)[-1] not in KNOWN.get(rel, ()):
                    out.append(f"{rel}:{line}: private name from another module: {what}")
    return out


def test_no_private_reach_ins():
    assert findings() == []


def test_the_check_sees_a_reach_in(tmp_path):
    """The check itself can fail: both kinds of reach-in are found, a module's own are not."""
    src = tmp_path / "m.py"
    src.write_text(
        "from lifter.btf import _fail\nfrom . import kernel\n"
        "class A:\n    _x = 1\n\n    def _own(self):\n        return self._x\n"
        "def f(ex, a):\n    a._own()\n    os._exit(0)\n    return ex._end, kernel._library\n"
    )
    assert [w for _, w in reach_ins(src)] == ["from lifter.btf import _fail", "ex._end", "kernel._library"]


if __name__ == "__main__":
    problems = findings()
    print("\n".join(problems) or "no private reach-ins across modules")
    sys.exit(1 if problems else 0)
