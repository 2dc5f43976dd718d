"""Lifting time per object: ELF + BTF + decode + relocations + CFGs (`load_object`).

Median of REPEAT runs per object, over the corpus (every toolchain) and Debian's objects,
in one process (interpreter start-up excluded, imports warmed by a first untimed run).
Target (issue 2): < 50 ms median per object.

    .venv/bin/python bench/lift.py [--repeat 5] [--json bench/results/lift.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import corpus  # noqa: E402
from lifter.program import load_object  # noqa: E402


def measure(path: Path, repeat: int) -> dict:
    load_object(path)  # warm-up: imports, page cache
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        obj = load_object(path)
        times.append(time.perf_counter() - start)
    insns = sum(f.size for f in obj.functions.values())
    return {
        "object": str(path.relative_to(ROOT)),
        "insns": insns,
        "bytes": path.stat().st_size,
        "median_ms": statistics.median(times) * 1e3,
        "min_ms": min(times) * 1e3,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "lift.json")
    args = ap.parse_args()
    objects = corpus.built_objects() + corpus.external_objects()
    if not objects:
        print("no objects: run `make corpus external` first", file=sys.stderr)
        return 2
    rows = [measure(p, args.repeat) for p in sorted(objects)]
    rows.sort(key=lambda r: r["median_ms"])
    for r in rows[-10:]:
        print(f"{r['median_ms']:8.2f} ms  {r['insns']:6d} insns  {r['object']}")
    medians = [r["median_ms"] for r in rows]
    per_insn = [r["median_ms"] * 1e3 / max(r["insns"], 1) for r in rows]
    summary = {
        "objects": len(rows),
        "repeat": args.repeat,
        "median_of_medians_ms": statistics.median(medians),
        "p90_ms": medians[int(0.9 * (len(medians) - 1))],
        "max_ms": max(medians),
        "max_object": rows[-1]["object"],
        "median_us_per_insn": statistics.median(per_insn),
        "target_ms": 50,
        "python": sys.version.split()[0],
    }
    print(json.dumps(summary, indent=2))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"summary": summary, "objects": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
