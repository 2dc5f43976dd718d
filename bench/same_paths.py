"""Does a change of the explorer keep what `analyze --json` says? Record it for two trees, compare.

    bench/same_paths.py record OUT_DIR [--tree DIR] [--filter SUBSTRING]
    bench/same_paths.py compare A_DIR B_DIR

`record` runs `analyze --json` on every object of corpus/build/*/*.o and corpus/external (the
objects of this checkout, so both trees see the same bytecode) with the code of DIR, in one
interpreter (PYTHONHASHSEED as the caller set it), and keeps per object and program what
the explorer decides: per path its verdict, return value, cut reason (`truncated`),
instruction range, effects, tail calls, rewrites, notes, lines and summaries, per branch its
class, direction and visits, the map classes and the summary counts; the free text
(decoded conditions, run times) is left out. `compare` prints every
path and branch that differs, and, apart from those, the paths that were cut or unknown in
A and are finished in B (the change's gains); exit 1 when anything else differs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
#: What a path's JSON says that the explorer decides (free text and timings are not kept).
PATH_KEYS = (
    "verdict",
    "retval",
    "truncated",
    "unsupported",
    "insns",
    "effects",
    "tail_calls",
    "rewrites",
    "redirect",
    "notes",
    "map_writes",
    "programs",
    "lines",
    "summarised",
)
BRANCH_KEYS = (
    "section",
    "pc",
    "function",
    "program",
    "line",
    "kind",
    "class",
    "detail",
    "direction",
    "visits",
    "both_ways",
)


def objects(substring: str | None) -> list[Path]:
    found = sorted((HERE / "corpus" / "build").glob("*/*.o")) + sorted((HERE / "corpus" / "external").rglob("*.o"))
    return [p for p in found if not substring or substring in str(p)]


def _kept(doc: dict) -> dict:
    paths = [{k: p.get(k) for k in PATH_KEYS if k in p} for p in doc.get("paths", [])]
    branches = [{k: b.get(k) for k in BRANCH_KEYS if k in b} for b in doc.get("branches", [])]
    summary = {k: v for k, v in doc.get("summary", {}).items() if k != "seconds"}
    return {
        "program": doc.get("program"),
        "paths": paths,
        "branches": branches,
        "maps": doc.get("maps"),
        "summary": summary,
    }


def record(out: Path, tree: Path, substring: str | None) -> int:
    sys.path.insert(0, str(tree))
    from offload import cli

    if not Path(cli.__file__).resolve().is_relative_to(tree.resolve()):
        sys.exit(f"same_paths.py: offload.cli came from {cli.__file__}, not from {tree}")
    out.mkdir(parents=True, exist_ok=True)
    for obj in objects(substring):
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                rc = cli.main(["analyze", "--json", str(obj)])
            except Exception as err:  # a crash is an output too: both trees must agree on it
                rc = f"exception {type(err).__name__}: {err}"
        try:
            doc = json.loads(stdout.getvalue())
            docs = doc["programs"] if "programs" in doc else [doc]
            kept = {"exit": rc, "programs": [_kept(d) for d in docs]}
        except (json.JSONDecodeError, KeyError, TypeError):
            kept = {"exit": rc, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()[-2000:]}
        name = str(obj.relative_to(HERE / "corpus")).replace("/", "__")
        (out / f"{name}.json").write_text(json.dumps(kept, indent=1, sort_keys=True))
        print(name, file=sys.stderr, flush=True)
    return 0


def _finished(before: dict, after: dict) -> bool:
    """A path cut or unknown before and finished now."""
    return (before.get("truncated") or before.get("verdict") == "UNKNOWN") and not (
        after.get("truncated") or after.get("verdict") == "UNKNOWN"
    )


def compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.glob("*.json")} & {p.name for p in b.glob("*.json")})
    differ, gains = 0, []
    for n in names:
        x, y = json.loads((a / n).read_text()), json.loads((b / n).read_text())
        if x == y:
            continue
        if x.keys() != y.keys() or x.get("exit") != y.get("exit") or "programs" not in x:
            print(f"differs: {n}: exit/output")
            differ += 1
            continue
        for px, py in zip(x["programs"], y["programs"], strict=False):
            if px["maps"] != py["maps"]:
                print(f"differs: {n} {px['program']}: maps")
                differ += 1
            if px["branches"] != py["branches"]:
                print(f"differs: {n} {px['program']}: branches")
                differ += 1
            if len(px["paths"]) != len(py["paths"]):
                print(f"differs: {n} {px['program']}: {len(px['paths'])} -> {len(py['paths'])} paths")
                differ += 1
                continue
            for i, (p, q) in enumerate(zip(px["paths"], py["paths"])):
                if p == q:
                    continue
                if _finished(p, q):
                    gains.append(f"{n} {px['program']} path {i}: {p.get('truncated')} -> {q.get('verdict')}")
                else:
                    print(f"differs: {n} {px['program']} path {i}: {p} -> {q}")
                    differ += 1
        if len(x["programs"]) != len(y["programs"]):
            print(f"differs: {n}: programs")
            differ += 1
    for g in gains:
        print(f"finished now: {g}")
    print(f"{len(names)} objects compared: {differ} differences, {len(gains)} paths finished that were cut/unknown")
    return 1 if differ else 0


def main() -> int:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--tree", type=Path, default=HERE)
    r.add_argument("--filter", metavar="SUBSTRING")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = top.parse_args()
    if args.mode == "record":
        return record(args.out, args.tree, args.filter)
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
