"""Does a speed change keep `analyze --json`? Record its output for one tree, compare two records.

    bench/analyze_same.py record OUT.json [--tree DIR] [--jobs 2]   # outputs of the code in DIR
    bench/analyze_same.py compare A.json B.json                     # exit 1 naming each difference

Objects: corpus/build/clang/*.o and Debian's (corpus/external), those of this checkout, so both
trees read the same bytecode. Each object is analysed by `python -m offload.cli analyze --json`
in a fresh process run in DIR (its code first on sys.path) with PYTHONHASHSEED=0, so z3's term
ids, and with them the order of simplified terms, do not depend on anything else the process
did. Recorded: exit code, stderr, the document. Compared: every field but free text meant for
people: `summary.seconds` (a run time), the object's path (`file`), and each path's `fields`
(the condition in header fields, fields.py: "for people, not for parsing"; how many differ is
still counted and printed). Map `why`, notes and truncation reasons are compared.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402


def objects() -> list[Path]:
    return sorted((corpus.BUILD_DIR / "clang").glob("*.o")) + sorted(corpus.external_objects())


def run(tree: Path, obj: Path, timeout: float) -> dict:
    env = dict(os.environ, PYTHONHASHSEED="0")
    cmd = [sys.executable, "-m", "offload.cli", "analyze", "--json", str(obj.resolve())]
    try:
        p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"exit": None, "stderr": f"timeout after {timeout:g} s", "doc": None}
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        doc = {"unparsed": p.stdout}
    return {"exit": p.returncode, "stderr": p.stderr, "doc": doc}


def programs(doc) -> list[dict]:
    if not isinstance(doc, dict):
        return []
    return doc["programs"] if "programs" in doc else [doc]


def masked(doc):
    """`doc` without the free text (see the module docstring); (doc, decoded fields by path)."""
    fields = {}
    for prog in programs(doc):
        prog.pop("file", None)
        prog.get("summary", {}).pop("seconds", None)
        for p in prog.get("paths", []):
            fields[(prog["program"], p["id"])] = p.pop("fields", None)
    return doc, fields


def record(args) -> int:
    tree = Path(args.tree).resolve()
    objs = objects()
    out = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(run, tree, o, args.timeout): o for o in objs}
        for i, f in enumerate(concurrent.futures.as_completed(futures), 1):
            rel = os.path.relpath(futures[f], HERE)
            out[rel] = f.result()
            print(f"[{i}/{len(objs)}] {rel}: exit {out[rel]['exit']}", file=sys.stderr, flush=True)
    Path(args.out).write_text(json.dumps({"tree": str(tree), "outputs": out}, indent=1, sort_keys=True))
    return 0


def compare(args) -> int:
    a, b = (json.loads(Path(x).read_text())["outputs"] for x in (args.a, args.b))
    differ, fields_differ, fields_total = [], 0, 0
    for rel in sorted(set(a) | set(b)):
        if rel not in a or rel not in b:
            differ.append(f"{rel}: only in {'B' if rel not in a else 'A'}")
            continue
        x, y = a[rel], b[rel]
        if x["exit"] != y["exit"] or x["stderr"] != y["stderr"]:
            differ.append(
                f"{rel}: exit {x['exit']} vs {y['exit']}, stderr {x['stderr'][-200:]!r} vs {y['stderr'][-200:]!r}"
            )
            continue
        dx, fx = masked(x["doc"])
        dy, fy = masked(y["doc"])
        fields_total += len(fx)
        fields_differ += sum(1 for k in fx if fx[k] != fy.get(k))
        if dx != dy:
            where = [
                f"{px['program']}.{key}"
                for px, py in zip(programs(dx), programs(dy))
                for key in sorted(set(px) | set(py))
                if px.get(key) != py.get(key)
            ]
            differ.append(f"{rel}: differs in {', '.join(where) or 'programs'}")
    for line in differ:
        print(line)
    print(
        f"{len(set(a) | set(b))} objects, {len(differ)} differ (free text masked); "
        f"decoded fields (free text) differ on {fields_differ} of {fields_total} paths"
    )
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("--tree", default=str(HERE))
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--timeout", type=float, default=600.0, help="seconds per object")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = ap.parse_args()
    return record(args) if args.cmd == "record" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
