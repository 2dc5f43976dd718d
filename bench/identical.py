"""Byte-identical output check for refactors: run the commands a user reads on the corpus and diff.

    bench/identical.py record OUT_DIR [--tree DIR]   # outputs of the code in DIR (default: this checkout)
    bench/identical.py compare A_DIR B_DIR           # exit 1 and name each differing output

A refactor that claims "no behaviour change" records the outputs of the commit before it (e.g.
`git archive main | tar -x -C /tmp/main` then `record /tmp/before --tree /tmp/main`) and of its own
tree, then compares. Each output is the command's stdout, stderr and exit code for `analyze --json`,
`rules`, `check --format json` and `cost --json` on every object of every toolchain in
corpus/build/ (`TOOLCHAINS`: clang, clang-v4, gcc and nobtf; a toolchain not built is an error,
not a smaller check), the objects of this checkout, so both trees see the same bytecode. Commands run in-process through
`offload.cli.main` (one interpreter per tree): far quicker than one process per command.

In-process outputs can differ where a fresh process would not: the order of an Or/And that z3
simplified depends on z3's term ids, so on everything the process built before (the `fields`
rendering shows it). `compare` therefore re-runs each output that differs in a fresh process
for both trees, and only a difference that stays is reported. Run times ("seconds") and the
tree's own path are not outputs and are masked.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
COMMANDS = {
    "analyze": ["analyze", "--json"],
    "rules": ["rules", "--dev", "eth0"],
    "check": ["check", "--format", "json"],
    "cost": ["cost", "--json"],
}


#: The corpus's toolchains (corpus/Makefile), each of which must be built.
TOOLCHAINS = ("clang", "clang-v4", "gcc", "nobtf")


def objects(toolchains=TOOLCHAINS) -> list[Path]:
    """The corpus objects both trees are run on, in a stable order."""
    build = HERE / "corpus" / "build"
    missing = [t for t in toolchains if not any((build / t).glob("*.o"))]
    if missing:
        sys.exit(f"identical.py: no objects in corpus/build/{{{','.join(missing)}}}: run `make corpus` first")
    return sorted(p for t in toolchains for p in (build / t).glob("*.o"))


def record(out: Path, tree: Path, only: list[str], toolchains: list[str], resume: bool = False) -> int:
    """Record the outputs of `tree`'s code into `out` (`toolchains`: a part of the corpus, so
    that several processes can share one recording; `resume`: skip outputs already there)."""
    sys.path.insert(0, str(tree))
    for name in [m for m in sys.modules if m.split(".")[0] in ("lifter", "analyzer", "rules", "offload")]:
        del sys.modules[name]
    from offload import cli

    if not Path(cli.__file__).resolve().is_relative_to(tree.resolve()):
        sys.exit(f"identical.py: offload.cli came from {cli.__file__}, not from {tree}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "tree").write_text(str(tree.resolve()))
    for obj in objects(toolchains or TOOLCHAINS):
        for cmd, argv in COMMANDS.items():
            name = f"{obj.parent.name}__{obj.stem}__{cmd}.txt"
            if (only and cmd not in only) or (resume and (out / name).exists()):
                continue
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                try:
                    rc = cli.main([*argv, str(obj)])
                except Exception as err:  # a crash is an output too: both trees must agree on it
                    rc = f"exception {type(err).__name__}: {err}"
            (out / name).write_text(_output(rc, stdout.getvalue(), stderr.getvalue()))
        print(f"{obj.parent.name}/{obj.name}", file=sys.stderr)
    return 0


def _output(rc, stdout: str, stderr: str) -> str:
    return f"exit {rc}\n--- stdout\n{stdout}--- stderr\n{stderr}"


def _normal(text: str, tree: str) -> str:
    text = text.replace(tree, "<tree>")
    return re.sub(r'"seconds": [0-9.e+-]+', '"seconds": _', text)


def _fresh(tree: str, name: str) -> str:
    """One output again, in a new interpreter that imports the code of `tree`."""
    toolchain, stem, cmd = name.removesuffix(".txt").split("__")
    argv = [*COMMANDS[cmd], str(HERE / "corpus" / "build" / toolchain / f"{stem}.o")]
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from offload import cli; "
        "assert cli.__file__.startswith(sys.argv[1]), cli.__file__; sys.exit(cli.main(sys.argv[2:]))"
    )
    p = subprocess.run([sys.executable, "-c", code, tree, *argv], capture_output=True, text=True, cwd="/")
    return _normal(_output(p.returncode, p.stdout, p.stderr), tree)


def compare(a: Path, b: Path, jobs: int = 1) -> int:
    """Outputs both recordings hold; a difference is re-run fresh for both trees (module doc)."""
    ta, tb = (a / "tree").read_text(), (b / "tree").read_text()
    names = sorted({p.name for p in a.glob("*.txt")} & {p.name for p in b.glob("*.txt")})
    rerun = [n for n in names if _normal((a / n).read_text(), ta) != _normal((b / n).read_text(), tb)]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:  # each fresh run is its own process
        fresh_a, fresh_b = pool.map(lambda n: _fresh(ta, n), rerun), pool.map(lambda n: _fresh(tb, n), rerun)
        differ = [n for n, x, y in zip(rerun, list(fresh_a), list(fresh_b)) if x != y]
    for n in differ:
        print(f"differs: {n}")
    for toolchain in TOOLCHAINS:
        for cmd in COMMANDS:
            these = [n for n in names if n.startswith(f"{toolchain}__") and n.endswith(f"__{cmd}.txt")]
            if these:
                same = len([n for n in these if n not in differ])
                print(f"{toolchain} {cmd}: {same} of {len(these)} outputs identical")
    print(
        f"{len(names) - len(differ)} of {len(names)} outputs identical "
        f"({len(rerun)} differed in-process and were re-run in fresh processes)"
    )
    return 1 if differ else 0


def main() -> int:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--tree", type=Path, default=HERE)
    r.add_argument("--only", action="append", choices=list(COMMANDS), default=[])
    r.add_argument("--toolchain", action="append", choices=TOOLCHAINS, default=[])
    r.add_argument("--resume", action="store_true", help="keep the outputs already recorded in OUT_DIR")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--jobs", type=int, default=1, help="fresh re-runs at a time")
    args = top.parse_args()
    if args.mode == "record":
        return record(args.out, args.tree, args.only, args.toolchain, args.resume)
    return compare(args.a, args.b, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
