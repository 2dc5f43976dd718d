"""Byte-identical output check for refactors: run the commands a user reads on the corpus and diff.

    bench/identical.py record OUT_DIR [--tree DIR]   # outputs of the code in DIR (default: this checkout)
    bench/identical.py compare A_DIR B_DIR           # exit 1 and name each differing output

A refactor that claims "no behaviour change" records the outputs of the commit before it (e.g.
`git archive main | tar -x -C /tmp/main` then `record /tmp/before --tree /tmp/main`) and of its own
tree, then compares. Each output is the command's stdout, stderr and exit code for `analyze --json`,
`rules`, `check --format json` and `cost --json` on every object in corpus/build/ (the objects of
this checkout, so both trees see the same bytecode). Commands run in-process through
`offload.cli.main` (one interpreter per tree), so the whole corpus takes minutes, not an hour.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
COMMANDS = {
    "analyze": ["analyze", "--json"],
    "rules": ["rules"],
    "check": ["check", "--format", "json"],
    "cost": ["cost", "--json"],
}


def objects() -> list[Path]:
    """The corpus objects both trees are run on, in a stable order."""
    return sorted((HERE / "corpus" / "build").glob("*/*.o"))


def record(out: Path, tree: Path, only: list[str]) -> int:
    sys.path.insert(0, str(tree))
    for name in [m for m in sys.modules if m.split(".")[0] in ("lifter", "analyzer", "rules", "offload")]:
        del sys.modules[name]
    from offload import cli

    if not Path(cli.__file__).resolve().is_relative_to(tree.resolve()):
        sys.exit(f"identical.py: offload.cli came from {cli.__file__}, not from {tree}")
    out.mkdir(parents=True, exist_ok=True)
    for obj in objects():
        for cmd, argv in COMMANDS.items():
            if only and cmd not in only:
                continue
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                try:
                    rc = cli.main([*argv, str(obj)])
                except Exception as err:  # a crash is an output too: both trees must agree on it
                    rc = f"exception {type(err).__name__}: {err}"
            name = f"{obj.parent.name}__{obj.stem}__{cmd}.txt"
            (out / name).write_text(f"exit {rc}\n--- stdout\n{stdout.getvalue()}--- stderr\n{stderr.getvalue()}")
        print(f"{obj.parent.name}/{obj.name}", file=sys.stderr)
    return 0


def compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.glob("*.txt")} | {p.name for p in b.glob("*.txt")})
    differ = [
        n
        for n in names
        if not (a / n).is_file() or not (b / n).is_file() or (a / n).read_bytes() != (b / n).read_bytes()
    ]
    for n in differ:
        print(f"differs: {n}")
    print(f"{len(names) - len(differ)} of {len(names)} outputs byte-identical")
    return 1 if differ else 0


def main() -> int:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--tree", type=Path, default=HERE)
    r.add_argument("--only", action="append", choices=list(COMMANDS), default=[])
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = top.parse_args()
    if args.mode == "record":
        return record(args.out, args.tree, args.only)
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
