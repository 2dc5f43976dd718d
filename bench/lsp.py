"""The language server's latency and memory (issue 15): diagnostics after save, idle RSS.

A bare JSON-RPC client (this file; no pygls) starts `xdp2tc lsp` on stdio, opens a corpus
source copied into a temporary workspace with a compile_commands.json (corpus/Makefile's
clang command), and times, from the `didSave` notification to the `publishDiagnostics` that
follows it:
  - `changed`: a save after a real edit (a blank line added at the top: the rebuilt object
    differs, so the whole analysis runs: clang, lift, explore, rules, check, cost);
  - `decision`: a save after an edit that changes what a decision returns (the first
    `return XDP_DROP;` becomes `return XDP_ABORTED;`, the next such save turns it back; a
    blank line is added too, so the object never repeats and the cache cannot answer);
  - `unchanged`: a save with no edit (clang rebuilds, the object's digest hits the cache).
REPEAT saves each, the median (p50) and max kept; the next save waits until the server says
hover and inlay hints are ready (its `workspace/inlayHint/refresh` request), also timed.
Idle memory: the server's VmRSS after `initialize` (nothing analysed) and after the saves, once it is idle again.
Targets (issue): diagnostics after save < 1 s p50 including the clang rebuild; idle < 150 MB.

    .venv/bin/python bench/lsp.py [--repeat 5] [--stem thesis_ddos_blacklist ...]
                                  [--json bench/results/lsp-<date>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import load_note, write_json

ROOT = Path(__file__).resolve().parent.parent
STEMS = ("thesis_static_rules", "thesis_ddos_blacklist", "tcp_flags", "ipv4_options")
CLANG = ["clang-19", "-O2", "-target", "bpf", "-Wall", "-Werror", "-I/usr/include/x86_64-linux-gnu", "-Iinclude", "-g"]


class Client:
    """JSON-RPC 2.0 over the server's stdin/stdout with LSP's Content-Length framing."""

    def __init__(self, argv: list[str], cwd: Path):
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def send(self, method: str, params, request: bool = False) -> int | None:
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            msg["id"] = self.next_id
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
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

    def rss_mb(self, pid: int | None = None) -> float:
        for line in Path(f"/proc/{pid or self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def children_rss_mb(self) -> float:
        """The server's child processes (the warm analysis spare) together."""
        pids = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            pids += [int(x) for x in (task / "children").read_text().split()]
        return sum(self.rss_mb(p) for p in pids)


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def hints_ready(m: dict) -> bool:
    """The server's inlay-hint refresh request: hover and hints are ready."""
    return m.get("method") == "workspace/inlayHint/refresh"


def diagnostics_for(uri: str):
    return lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri


def flip_decision(text: str) -> str:
    """The first `return XDP_DROP;` as `return XDP_ABORTED;`, or back (a verdict changes)."""
    if "return XDP_ABORTED; /* bench */" in text:
        return text.replace("return XDP_ABORTED; /* bench */", "return XDP_DROP;", 1)
    if "return XDP_DROP;" not in text:
        raise SystemExit("bench/lsp.py: the source has no `return XDP_DROP;` to change")
    return text.replace("return XDP_DROP;", "return XDP_ABORTED; /* bench */", 1)


def bench_stem(stem: str, repeat: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="xdp2tc-bench-lsp-") as tmp:
        ws = Path(tmp)
        shutil.copytree(ROOT / "corpus" / "include", ws / "include")
        source = ws / f"{stem}.c"
        shutil.copy(ROOT / "corpus" / f"{stem}.c", source)
        argv = [*CLANG, "-c", source.name, "-o", f"{stem}.o"]
        (ws / "compile_commands.json").write_text(
            json.dumps([{"directory": tmp, "file": source.name, "arguments": argv}])
        )
        client = Client([sys.executable, "-m", "offload.cli", "lsp"], ws)
        try:
            caps = {"workspace": {"inlayHint": {"refreshSupport": True}}}
            params = {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": caps}
            rid = client.send("initialize", params, True)
            client.until(lambda m: m.get("id") == rid)
            client.send("initialized", {})
            time.sleep(1.0)
            rss_start = client.rss_mb()
            uri = source.as_uri()
            t = time.perf_counter()
            client.send(
                "textDocument/didOpen",
                {"textDocument": {"uri": uri, "languageId": "c", "version": 1, "text": source.read_text()}},
            )
            first = client.until(diagnostics_for(uri))
            open_s = time.perf_counter() - t
            client.until(hints_ready)
            times: dict[str, list[float]] = {"changed": [], "decision": [], "unchanged": [], "hints": []}
            for _ in range(repeat):
                for kind in ("changed", "decision", "unchanged"):
                    if kind == "changed":
                        source.write_text("\n" + source.read_text())
                    if kind == "decision":
                        source.write_text("\n" + flip_decision(source.read_text()))
                    t = time.perf_counter()
                    client.send("textDocument/didSave", {"textDocument": {"uri": uri}})
                    client.until(diagnostics_for(uri))
                    times[kind].append(time.perf_counter() - t)
                    client.until(hints_ready)  # the next save comes once hover and hints are ready
                    if kind == "changed":
                        times["hints"].append(time.perf_counter() - t)
            time.sleep(2.0)
            rss_idle = client.rss_mb()
            rss_spare = client.children_rss_mb()
            rid = client.send("shutdown", None, True)
            client.until(lambda m: m.get("id") == rid)
            client.send("exit", None)
            client.proc.wait(timeout=10)
        finally:
            if client.proc.poll() is None:
                client.proc.kill()
    return {
        "stem": stem,
        "diagnostics": len(first["params"]["diagnostics"]),
        "open_s": round(open_s, 3),
        "save_changed_s": {
            "p50": round(statistics.median(times["changed"]), 3),
            "max": round(max(times["changed"]), 3),
        },
        "save_changed_hints_s": {"p50": round(statistics.median(times["hints"]), 3)},
        "save_decision_s": {
            "p50": round(statistics.median(times["decision"]), 3),
            "max": round(max(times["decision"]), 3),
        },
        "save_unchanged_s": {
            "p50": round(statistics.median(times["unchanged"]), 3),
            "max": round(max(times["unchanged"]), 3),
        },
        "rss_after_initialize_mb": round(rss_start, 1),
        "rss_idle_after_saves_mb": round(rss_idle, 1),
        "rss_idle_spare_process_mb": round(rss_spare, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--stem", action="append", help=f"corpus sources (default: {', '.join(STEMS)})")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    rows = []
    for stem in args.stem or STEMS:
        row = bench_stem(stem, args.repeat)
        rows.append(row)
        print(
            f"{stem:<24} open {row['open_s']:.2f}s  save(changed) p50 {row['save_changed_s']['p50']:.2f}s "
            f"max {row['save_changed_s']['max']:.2f}s hints {row['save_changed_hints_s']['p50']:.2f}s  "
            f"save(decision) p50 {row['save_decision_s']['p50']:.2f}s  "
            f"save(unchanged) p50 {row['save_unchanged_s']['p50']:.2f}s  "
            f"RSS init {row['rss_after_initialize_mb']:.0f} MB idle {row['rss_idle_after_saves_mb']:.0f} MB "
            f"(+ warm spare process {row['rss_idle_spare_process_mb']:.0f} MB)",
            flush=True,
        )
    load, note = load_note()
    print(note)
    changed = statistics.median(r["save_changed_s"]["p50"] for r in rows)
    decision = statistics.median(r["save_decision_s"]["p50"] for r in rows)
    idle = max(r["rss_idle_after_saves_mb"] for r in rows)
    print(
        f"\nsave->diagnostics p50 (changed source, median over programs): {changed:.2f}s (target < 1 s): "
        f"{'met' if changed < 1 else 'MISSED'}; idle RSS max {idle:.0f} MB (target < 150 MB): "
        f"{'met' if idle < 150 else 'MISSED'}; a save that changes a decision: {decision:.2f}s"
    )
    write_json(args.json, {"load_average": load, "programs": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
