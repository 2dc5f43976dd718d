"""Reach per object: instructions, paths, unknown paths and why, time (issue 14 items 1 and 5).

For every entry program of the corpus (clang build), Debian's objects and the programs built
by tests/public (`tests/public/build.py`: the public ones, and our own 20k-instruction
`tailcall_stages`), one fresh subprocess runs `load_object` + `explore` with the given
`--timeout` (seconds per object, shared by its entry programs as the CLI shares it) and
prints one row: instructions (every program of the object, tail-call targets included),
paths, unknown paths (truncated or carrying a note), how many of those were cut by term size
("values too large"), by the time budget, the wall time and the subprocess's peak RSS.
Tail-call targets are explored through the entry programs that call them. The table is what
the issue asks to record per object; `--json FILE` keeps it.

    .venv/bin/python bench/reach.py [--filter SUBSTRING] [--timeout 60] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import corpus  # noqa: E402


def run_one(path: Path, timeout: float) -> dict:
    from analyzer.exploration import UNKNOWN, Options
    from analyzer.explore import explore
    from lifter.program import load_object
    from offload.programs import entry_programs

    start = time.perf_counter()
    obj = load_object(path)
    row = {"object": os.path.relpath(path, ROOT), "insns": 0, "paths": 0, "unknown": 0, "term_size": 0}
    row.update(budget=0, programs=0, insns=sum(p.insn_count for p in obj.programs if p.is_xdp))
    for prog in entry_programs(obj) or [p for p in obj.programs if p.is_xdp]:
        row["programs"] += 1
        e = explore(obj, prog, Options(timeout=timeout, started=start))
        row["paths"] += len(e.paths)
        for p in e.paths:
            if p.truncated or p.notes or p.verdict == UNKNOWN:
                row["unknown"] += 1
            if any(n.startswith("values too large") for n in p.notes):
                row["term_size"] += 1
            if p.truncated and "time budget" in p.truncated:
                row["budget"] += 1
    row["seconds"] = round(time.perf_counter() - start, 3)
    row["rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return row


def objects(substring: str | None) -> list[Path]:
    found = [p for p in corpus.built_objects() if p.parent.name == "clang"] + corpus.external_objects()
    public = ROOT / "build" / "public"
    found += sorted(public.glob("*.o")) if public.is_dir() else []
    return [p for p in found if not substring or substring in str(p)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--filter", metavar="SUBSTRING")
    ap.add_argument("--timeout", type=float, default=60.0, help="explorer budget per program, seconds")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.timeout)))
        return 0
    rows = []
    print(f"{'insns':>6} {'paths':>6} {'unkn':>5} {'term':>5} {'budget':>6} {'time s':>7} {'RSS MiB':>7}  object")
    for path in objects(args.filter):
        cmd = [sys.executable, __file__, "--one", str(path), "--timeout", str(args.timeout)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3 * args.timeout + 60, cwd=ROOT)
            row = json.loads(proc.stdout.strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError) as exc:
            row = {"object": os.path.relpath(path, ROOT), "error": type(exc).__name__}
        rows.append(row)
        if "error" in row:
            print(
                f"{'':>6} {'':>6} {'':>5} {'':>5} {'':>6} {'':>7} {'':>7}  {row['object']}: {row['error']}", flush=True
            )
            continue
        print(
            f"{row['insns']:6d} {row['paths']:6d} {row['unknown']:5d} {row['term_size']:5d} {row['budget']:6d} "
            f"{row['seconds']:7.2f} {row['rss_mib']:7.1f}  {row['object']}",
            flush=True,
        )
    total = {k: sum(r.get(k, 0) for r in rows) for k in ("paths", "unknown", "term_size", "budget")}
    print(f"total: {len(rows)} objects, {json.dumps(total)}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "total": total}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
