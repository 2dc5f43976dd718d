"""The language server's latency and memory (issue 15): save -> first and final publish, idle RSS.

A bare JSON-RPC client (this file; no pygls) starts `xdp2tc lsp` on stdio, opens a corpus
source copied into a temporary workspace with a compile_commands.json (corpus/Makefile's
clang command) and saves it again and again. The server publishes twice per analysis
(offload/lsp.py): first what exploration settles (clang, lift, explore, analyze, cost, the
findings synthesis cannot change), then the final `check` findings once the rules are
synthesized and proved; each publish is followed by its log message (`first publish` /
`final publish`, with the analysis' seconds per stage). Timed from the `didSave`:
  - `edit` saves: the source changed, so the object differs and the cache cannot answer.
    Every other one adds a blank line at the top; the others also flip the first
    `return XDP_DROP;` to `return XDP_ABORTED;` and back (a decision changes);
  - `unchanged` saves: no edit (clang rebuilds, the object's digest hits the cache: one
    publish, the final one).
Each save waits for its final publish before the next. p50/p90 over all saves of a kind, per
program and over all programs together; the stages' medians from the server's log.
Idle memory: the server's VmRSS after `initialize` and after the saves, once idle again;
its descendants' (the fork server, multiprocessing's resource tracker) VmRSS together, and
the PSS of the whole tree (shared pages counted once).
`--phases N`: also the per-phase split in this process (clang, lift, explore, settled (the
first publish's findings), analyze, cost, rules (synthesis + proofs), counterexamples,
witnesses), medians of N runs.
Targets (issue): diagnostics after save < 1 s p50 including the clang rebuild; idle < 150 MB.

    .venv/bin/python bench/lsp.py [--saves 20] [--stem flag_counter ...] [--phases 3]
                                  [--json bench/results/lsp-<date>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import load_note, write_json

ROOT = Path(__file__).resolve().parent.parent
STEMS = ("redirect_devmap", "flag_counter", "ipv4_options", "thesis_ddos_blacklist")
CLANG = ["clang-19", "-O2", "-target", "bpf", "-Wall", "-Werror", "-I/usr/include/x86_64-linux-gnu", "-Iinclude", "-g"]
LOGGED = re.compile(r"xdp2tc: (?P<file>[^:]+): (?P<stage>first|final) publish")


class Client:
    """JSON-RPC 2.0 over the server's stdin/stdout with LSP's Content-Length framing."""

    def __init__(self, argv: list[str], cwd: Path, env: dict | None = None, legacy: bool = False):
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.next_id = 0
        self.legacy = legacy

    def send(self, method: str, params, request: bool = False) -> int | None:
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            msg["id"] = self.next_id
        self.proc.stdin.write(_frame(msg))
        self.proc.stdin.flush()
        return msg.get("id")

    def read(self) -> dict:
        length = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return json.loads(self.proc.stdout.read(length))

    def until(self, pred) -> dict:
        while True:
            msg = self.read()
            if "id" in msg and "method" in msg:  # a request from the server: answer it
                self.proc.stdin.write(_frame({"jsonrpc": "2.0", "id": msg["id"], "result": None}))
                self.proc.stdin.flush()
            if pred(msg):
                return msg

    def publishes(self, name: str, start: float) -> dict:
        """Until the final publish for file `name`: seconds from `start` to each stage's log
        message, and the final one's stage timings. A server without staged publishes (a
        baseline, `--server-root`): its one publishDiagnostics is first and final, and the
        inlay-hint refresh after it says its analysis is over."""
        if self.legacy:
            self.until(lambda m: m.get("method") == "textDocument/publishDiagnostics")
            t = time.perf_counter() - start
            self.until(lambda m: m.get("method") == "workspace/inlayHint/refresh")
            return {"first": t, "final": t, "stages": {}}
        out: dict = {}
        while True:
            msg = self.until(lambda m: m.get("method") == "window/logMessage")
            m = LOGGED.match(msg["params"]["message"])
            if not m or m["file"] != name:
                continue
            out[m["stage"]] = time.perf_counter() - start
            if m["stage"] == "final":
                out["stages"] = stage_times(msg["params"]["message"])
                out.setdefault("first", out["final"])  # one publish (a cache hit): first is final
                return out

    def rss_mb(self, pid: int | None = None) -> float:
        for line in Path(f"/proc/{pid or self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def descendants(self) -> list[int]:
        """The server's child processes and theirs (the fork server, multiprocessing's
        resource tracker, an analysis still running)."""
        out, todo = [], [self.proc.pid]
        while todo:
            for task in Path(f"/proc/{todo.pop()}/task").iterdir():
                kids = [int(x) for x in (task / "children").read_text().split()]
                out += kids
                todo += kids
        return out

    def children_rss_mb(self) -> float:
        return sum(self.rss_mb(p) for p in self.descendants())

    def tree_pss_mb(self) -> float:
        """Proportional set size of the server and its descendants: shared pages (the
        interpreter, libz3) counted once over the processes sharing them."""
        total = 0.0
        for pid in [self.proc.pid, *self.descendants()]:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) / 1024
        return total


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def stage_times(message: str) -> dict[str, float]:
    """`(build 0.10 s, lift+explore 0.05 s, ...)` at the end of a publish's log message."""
    inside = message[message.rfind("(") + 1 : message.rfind(")")]
    return {m[1].strip(): float(m[2]) for m in re.finditer(r"([\w+ ]+?) ([0-9.]+) s", inside)}


def flip_decision(text: str) -> str:
    """The first `return XDP_DROP;` as `return XDP_ABORTED;`, or back (a verdict changes)."""
    if "return XDP_ABORTED; /* bench */" in text:
        return text.replace("return XDP_ABORTED; /* bench */", "return XDP_DROP;", 1)
    if "return XDP_DROP;" not in text:
        return text
    return text.replace("return XDP_DROP;", "return XDP_ABORTED; /* bench */", 1)


def percentiles(values: list[float]) -> dict:
    """p50 and p90 (nearest rank) of at least one value."""
    xs = sorted(values)
    return {
        "n": len(xs),
        "p50": round(statistics.median(xs), 3),
        "p90": round(xs[min(len(xs) - 1, int(0.9 * len(xs) + 0.5) - 1)], 3),
    }


def workspace(tmp: str, stem: str) -> Path:
    ws = Path(tmp)
    shutil.copytree(ROOT / "corpus" / "include", ws / "include")
    source = ws / f"{stem}.c"
    shutil.copy(ROOT / "corpus" / f"{stem}.c", source)
    argv = [*CLANG, "-c", source.name, "-o", f"{stem}.o"]
    (ws / "compile_commands.json").write_text(json.dumps([{"directory": tmp, "file": source.name, "arguments": argv}]))
    return source


def bench_stem(stem: str, saves: int, server_root: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="xdp2tc-bench-lsp-") as tmp:
        source = workspace(tmp, stem)
        env = {**os.environ, "PYTHONPATH": server_root} if server_root else None
        client = Client([sys.executable, "-m", "offload.cli", "lsp"], Path(tmp), env, legacy=bool(server_root))
        try:
            caps = {"workspace": {"inlayHint": {"refreshSupport": True}}}
            params = {"processId": os.getpid(), "rootUri": Path(tmp).as_uri(), "capabilities": caps}
            rid = client.send("initialize", params, True)
            client.until(lambda m: m.get("id") == rid)
            client.send("initialized", {})
            time.sleep(2.0)
            rss_start = client.rss_mb()
            uri = source.as_uri()
            t = time.perf_counter()
            client.send(
                "textDocument/didOpen",
                {"textDocument": {"uri": uri, "languageId": "c", "version": 1, "text": source.read_text()}},
            )
            opened = client.publishes(source.name, t)
            runs: dict[str, list[dict]] = {"edit": [], "unchanged": []}
            for n in range(saves):
                text = source.read_text()
                source.write_text("\n" + (flip_decision(text) if n % 2 else text))
                for kind in ("edit", "unchanged"):
                    t = time.perf_counter()
                    client.send("textDocument/didSave", {"textDocument": {"uri": uri}})
                    runs[kind].append(client.publishes(source.name, t))
            time.sleep(2.0)
            rss_idle = client.rss_mb()
            rss_spare = client.children_rss_mb()
            pss_tree = client.tree_pss_mb()
            rid = client.send("shutdown", None, True)
            client.until(lambda m: m.get("id") == rid)
            client.send("exit", None)
            client.proc.wait(timeout=10)
        finally:
            if client.proc.poll() is None:
                client.proc.kill()
    stages = list(dict.fromkeys(k for r in runs["edit"] for k in r["stages"]))
    return {
        "stem": stem,
        "open_s": {"first": round(opened["first"], 3), "final": round(opened["final"], 3)},
        "edit_first_s": percentiles([r["first"] for r in runs["edit"]]),
        "edit_final_s": percentiles([r["final"] for r in runs["edit"]]),
        "unchanged_s": percentiles([r["final"] for r in runs["unchanged"]]),
        "edit_stages_median_s": {
            s: round(statistics.median(r["stages"].get(s, 0.0) for r in runs["edit"]), 3) for s in stages
        },
        "raw": {kind: [{k: v for k, v in r.items() if k != "stages"} for r in rs] for kind, rs in runs.items()},
        "rss_after_initialize_mb": round(rss_start, 1),
        "rss_idle_after_saves_mb": round(rss_idle, 1),
        "rss_idle_children_mb": round(rss_spare, 1),
        "pss_idle_tree_mb": round(pss_tree, 1),
    }


def phases(stem: str, repeat: int) -> dict[str, float]:
    """The editor's analysis split finer than the server's log, in this process: medians
    of `repeat` runs (the first run's imports and z3 start-up are not counted)."""
    sys.path.insert(0, str(ROOT))
    from analyzer.classify import classes
    from analyzer.cost.count import count
    from analyzer.explore import Options
    from analyzer.verify import witness_packet
    from lifter.program import load_object
    from offload import editorwork
    from offload.programs import device_programs
    from rules import ruleset
    from rules.counterexample import examples
    from rules.reasons import account

    runs: list[dict[str, float]] = []
    for _ in range(repeat + 1):
        times: dict[str, float] = {}
        with tempfile.TemporaryDirectory(prefix="xdp2tc-bench-lsp-") as tmp:
            source = workspace(tmp, stem)
            clock = editorwork.Clock()
            subprocess.run([*CLANG, "-c", source.name, "-o", "x.o"], cwd=tmp, check=True)
            clock.tick("clang")
            obj = load_object(str(Path(tmp) / "x.o"))
            clock.tick("lift")
            for prog in device_programs(obj, None, per_program_output=True):
                counted = count(obj, prog, Options())
                clock.tick("explore+count")
                e = counted.exploration
                editorwork.explored_check([counted], editorwork.Config())
                clock.tick("settled (first publish)")
                early = editorwork.documented(editorwork.located(counted), counted, None)
                clock.tick("analyze")
                editorwork.documented(early, counted, editorwork.load_profile())
                clock.tick("analyze+cost")
                rs = ruleset.build(e, (), {}, 512)
                clock.tick("rules (synthesis+proofs)")
                examples(rs, account(e, rs, classes(e)[1]))
                clock.tick("counterexamples")
                [witness_packet(e, p) for p in e.paths]
                clock.tick("witnesses")
                del early
            times = dict(clock.times)
        runs.append(times)
    return {k: round(statistics.median(r[k] for r in runs[1:]), 3) for k in runs[1]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--saves", type=int, default=20, help="edit saves per program (each followed by an unchanged one)")
    ap.add_argument("--stem", action="append", help=f"corpus sources (default: {', '.join(STEMS)})")
    ap.add_argument("--phases", type=int, default=0, metavar="N", help="also the per-phase split, N runs")
    ap.add_argument(
        "--server-root",
        metavar="DIR",
        help="run the server from this source tree instead (a baseline: `git archive main | tar -x -C DIR`)",
    )
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    load_start = os.getloadavg()[0]
    rows = []
    for stem in args.stem or STEMS:
        row = bench_stem(stem, args.saves, args.server_root)
        rows.append(row)
        print(
            f"{stem:<22} save->first p50 {row['edit_first_s']['p50']:.2f}s p90 {row['edit_first_s']['p90']:.2f}s  "
            f"save->final p50 {row['edit_final_s']['p50']:.2f}s p90 {row['edit_final_s']['p90']:.2f}s  "
            f"unchanged p50 {row['unchanged_s']['p50']:.2f}s  (n={row['edit_first_s']['n']})  "
            f"RSS init {row['rss_after_initialize_mb']:.0f} MB idle {row['rss_idle_after_saves_mb']:.0f} MB "
            f"(+ children {row['rss_idle_children_mb']:.0f} MB; tree PSS {row['pss_idle_tree_mb']:.0f} MB)\n"
            f"{'':<22} server stages (median): "
            + ", ".join(f"{k} {v:.2f}s" for k, v in row["edit_stages_median_s"].items()),
            flush=True,
        )
    split = {}
    for stem in (args.stem or STEMS) if args.phases else ():
        split[stem] = phases(stem, args.phases)
        print(
            f"{stem:<22} phases (median of {args.phases}): "
            + ", ".join(f"{k} {v:.2f}s" for k, v in split[stem].items())
        )
    load, note = load_note()
    print(f"load average at start {load_start:.1f}, at end {note}")
    first = percentiles([x["first"] for r in rows for x in r["raw"]["edit"]])
    final = percentiles([x["final"] for r in rows for x in r["raw"]["edit"]])
    idle = max(r["rss_idle_after_saves_mb"] for r in rows)
    print(
        f"\nall programs, {first['n']} edit saves: save->first publish p50 {first['p50']:.2f}s p90 {first['p90']:.2f}s "
        f"(target < 1 s p50: {'met' if first['p50'] < 1 else 'MISSED'}); save->final publish p50 {final['p50']:.2f}s "
        f"p90 {final['p90']:.2f}s; server idle RSS max {idle:.0f} MB "
        f"(target < 150 MB: {'met' if idle < 150 else 'MISSED'})"
    )
    write_json(
        args.json,
        {
            "load_average": {"start": load_start, "end": load},
            "server_root": args.server_root,
            "first": first,
            "final": final,
            "programs": rows,
            "phases": split,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
