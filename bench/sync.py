"""`xdp2tc sync` latency (issue 12, Performance): map change -> tc batch written.

Set-up: corpus/thesis_ddos_blacklist.o's two maps are created by bpftool and pinned under a
fresh bpffs folder, `blacklist` with room for ENTRIES + CHANGES addresses and ENTRIES
addresses in it; `xdp2tc sync --dry-run --assume no-ip-options` runs as a separate process
(filled by the program's rule templates, offload/mapfill.py's TemplateFilling, as a user
runs it) with its stdout on a pipe. Then CHANGES changes, one at a time: add an address, or delete one (half
each, alternating). Latency = CLOCK_MONOTONIC when the daemon had written the batch (the
`mono=` of its `# batch N written` line, after the flush) minus CLOCK_MONOTONIC taken here
right before the update/delete syscall. For deletes the first batch is the one the watcher's
early (syscall-entry) event triggers: that is the window during which the stale drop is
still on the device in --dry-run terms (with --apply, add tc's own time). The daemon's own
`since_syscall_us` (from the kernel's timestamp at syscall entry) is reported alongside,
split where the tail comes from: `woke` (syscall entry to the daemon holding the event:
the ring buffer's wake-up and the scheduler), `work` (event to batch written) and `cpu`
(the daemon's CPU time within `work`; the rest of `work` is waiting for a CPU or the pipe).

Initial fill: the daemon's own reconcile time (its header: maps read in batches, filled,
planned), the time from starting the process to its reconcile batch written (Python, imports,
lifting, the exploration and the templates' proofs included), and its peak memory (VmHWM), for ENTRIES entries.

    .venv/bin/python bench/sync.py [--entries 10000] [--changes 1000] [--repeat 3] [--json FILE]

Root and `make corpus watcher` needed. Medians over --repeat runs of each run's p50/p99.

`--fill N [N ...]` measures the initial fill apart, for each N (no root needed), each in a
fresh process: `templates.fill` (aggregate=False, what sync fills) of N random `blacklist`
addresses in-process, median of --repeat runs after a warm-up, with the per-entry form
(rules/levelfill.per_entry) checked byte-identical (repr) where this tree has the batch
form; then `xdp2tc rules --maps-from json:` on the same entries as a user runs it: wall
time and peak RSS (the child's ru_maxrss), median of --repeat runs. The same file runs
against another tree's code: copy it into that tree's bench/.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from results import load_note, write_json

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer import kernel  # noqa: E402

OBJ = ROOT / "corpus/build/clang/thesis_ddos_blacklist.o"
DAEMON = "import sys; from offload import cli; sys.exit(cli.main(sys.argv[1:]))"
#: The daemon's own split of a watched batch's latency (offload/sync.py SyncDaemon._write).
SPLIT = ("since_syscall_us", "woke_us", "work_us", "cpu_us")


def bpftool(*args: str) -> None:
    subprocess.run(["bpftool", *args], check=True, capture_output=True)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def address(i: int) -> bytes:
    return (0x0A000000 + i).to_bytes(4, "big")  # 10.x.y.z


def create_maps(folder: Path, capacity: int) -> None:
    for name, key in (("blacklist", "4"), ("port_blacklist", "2")):
        bpftool(
            "map", "create", str(folder / name), "type", "hash", "key", key, "value", "4",
            "entries", str(capacity), "name", name,
        )  # fmt: skip


class Reader(threading.Thread):
    """The daemon's stdout, line by line: `# batch N written ... mono=NS [since_syscall_us=X
    ...]` lines go to a queue as (mono_ns, the daemon's split or None, whether the batch's
    header holds one entry-time event alone: planned before its exit event was read)."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.written: queue.Queue = queue.Queue()
        self.lines = 0
        self.fill_ms = 0.0  # the daemon's own reconcile time (maps read, filled, planned)

    def run(self) -> None:
        early_alone = False
        for line in self.stream:
            self.lines += 1
            if line.startswith("# batch 1 at ") and " reconcile: " in line:
                self.fill_ms = float(line.split(" wanted in ")[1].split()[0])
            if line.startswith("# batch ") and " changes: " in line:
                changes = line.split(" changes: ", 1)[1]
                early_alone = changes.rstrip().endswith("(at syscall entry)") and "; " not in changes
            if line.startswith("# batch ") and " written: " in line:
                fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
                parts = {k: float(fields[k]) for k in SPLIT if k in fields}
                self.written.put((int(fields["mono"]), parts or None, early_alone))
                early_alone = False


def run_once(entries: int, changes: int, interval: float) -> dict:
    folder = Path("/sys/fs/bpf") / f"xdp2tc-bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    proc = None
    try:
        create_maps(folder, entries + changes + 16)
        live = kernel.open_pinned_map(str(folder / "blacklist"))
        for i in range(entries):
            kernel.map_update(live, address(i), bytes(4))
        argv = [sys.executable, "-c", DAEMON, "sync", str(OBJ), "--dev", "bench0", "--assume", "no-ip-options"]
        argv += ["--maps-from", f"pinned:{folder}", "--dry-run", "--interval", str(interval)]
        start = time.monotonic_ns()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, bufsize=1)
        reader = Reader(proc.stdout)
        reader.start()
        filled, _, _ = reader.written.get(timeout=120)
        hwm = 0
        with open(f"/proc/{proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
        time.sleep(0.2)  # the watcher attaches right after the reconcile batch
        adds, deletes = [], []
        lags: dict[str, list[float]] = {k: [] for k in SPLIT}
        syscall_us: list[float] = []  # the update/delete syscall itself, as this process sees it
        early_alone = before_return = (
            0  # deletes: batch from the entry event alone; written before the syscall returned
        )
        present = list(range(entries))
        fresh = entries
        for n in range(changes):
            if n % 2 == 0:
                key, op = address(fresh), "add"
                fresh += 1
            else:
                key, op = address(present.pop(n % len(present))), "delete"
            t0 = time.monotonic_ns()
            if op == "add":
                kernel.map_update(live, key, bytes(4))
            else:
                kernel.map_delete(live, key)
            t1 = time.monotonic_ns()
            mono, parts, alone = reader.written.get(timeout=30)
            (adds if op == "add" else deletes).append((mono - t0) / 1e3)
            syscall_us.append((t1 - t0) / 1e3)
            if op == "delete":
                early_alone += alone
                before_return += mono < t1
            for k, v in (parts or {}).items():
                lags[k].append(v)
            time.sleep(0.002)
            while not reader.written.empty():  # a delete's exit event may add a (no-op) batch
                reader.written.get_nowait()
        live.close()
        both = adds + deletes
        return {
            "entries": entries,
            "changes": changes,
            "initial_fill_ms": reader.fill_ms,
            "start_to_first_batch_ms": (filled - start) / 1e6,
            "daemon_peak_rss_kib": hwm,
            "p50_us": percentile(both, 50),
            "p99_us": percentile(both, 99),
            "max_us": max(both),
            "add_p50_us": percentile(adds, 50),
            "add_p99_us": percentile(adds, 99),
            "delete_p50_us": percentile(deletes, 50),
            "delete_p99_us": percentile(deletes, 99),
            **{
                f"daemon_{k.removesuffix('_us')}_p{p}_us": percentile(v, p) if v else None
                for k, v in lags.items()
                for p in (50, 99)
            },
            "watched_batches": len(lags["since_syscall_us"]),
            "syscall_p50_us": percentile(syscall_us, 50),
            "syscall_p99_us": percentile(syscall_us, 99),
            "deletes_planned_from_the_entry_event_alone": early_alone,
            "deletes_written_before_the_syscall_returned": before_return,
        }
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def fill_child(n: int, repeat: int) -> dict:
    """In this process: thesis_ddos_blacklist's templates, then `fill` of n random addresses."""
    import gc
    import random

    from analyzer.explore import explore
    from lifter.program import load_object
    from rules.mapcontents import MapContents, MapEntries
    from rules.synthesis import Synthesizer
    from rules.templates import fill, find_templates

    obj = load_object(OBJ)
    e = explore(obj, obj.programs[0])
    ts, _ = find_templates(Synthesizer(e, ("no-ip-options",), {}))
    m = next(m for m in obj.maps if m.name == "blacklist")
    keys = [k.to_bytes(4, "big") for k in random.Random(n).sample(range(1 << 32), n)]
    entries = {k: (bytes(4),) for k in keys}
    contents = MapContents({m.name: MapEntries(m.name, m.type.id, m.key_size, m.value_size, entries)})
    fill(ts, contents, aggregate=False)  # warm-up: the shapes' proofs are cached on the templates
    runs = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        got = fill(ts, contents, aggregate=False)
        runs.append(time.perf_counter() - t)
    import resource

    out = {"entries": n, "fill_s": statistics.median(runs), "fill_runs_s": runs, "filters": len(got.filters)}
    out["fill_process_peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        from rules.levelfill import fill_level, per_entry
    except ImportError:  # a tree without the batch form
        return out
    levels = [(t, i) for t in ts for i, lv in enumerate(t.levels) if lv.map == m.name]
    out["identical_to_per_entry"] = all(
        repr(fill_level(t, i, entries)) == repr(per_entry(t, i, entries)) for t, i in levels
    )
    return out


def rules_maps_from(n: int, repeat: int, folder: Path) -> dict:
    """`xdp2tc rules OBJ --maps-from json:` with n random blacklist addresses: wall, peak RSS."""
    import json
    import random

    keys = [k.to_bytes(4, "big") for k in random.Random(n).sample(range(1 << 32), n)]
    dump = [{"key": [f"0x{b:02x}" for b in k], "value": ["0x00"] * 4} for k in keys]
    path = folder / f"blacklist-{n}.json"
    path.write_text(json.dumps(dump))
    argv = [sys.executable, "-c", DAEMON, "rules", str(OBJ), "--assume", "no-ip-options", "--dev", "eth0"]
    argv += ["--maps-from", f"json:blacklist={path}"]
    walls, rss = [], []
    for _ in range(repeat):
        with open(folder / "out", "w+") as out:
            t = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
            walls.append(time.perf_counter() - t)
            out.seek(0)
            text = out.read()
        assert os.waitstatus_to_exitcode(status) in (0, 1), text[-2000:]
        rss.append(usage.ru_maxrss)
    lines = sum(1 for x in text.splitlines() if " flower " in x)
    return {
        "entries": n,
        "rules_wall_s": statistics.median(walls),
        "rules_runs_s": walls,
        "peak_rss_kib": max(rss),
        "lines": lines,
    }


def fill_main(sizes: list[int], repeat: int) -> dict:
    import json
    import tempfile

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            child = [sys.executable, __file__, "--fill-child", str(n), "--repeat", str(repeat)]
            proc = subprocess.run(child, capture_output=True, text=True, check=True)
            res = json.loads(proc.stdout.splitlines()[-1])
            res.update(rules_maps_from(n, repeat, Path(tmp)))
            print(
                f"fill {n} entries: templates.fill median {res['fill_s']:.3f} s "
                f"(runs {', '.join(f'{x:.3f}' for x in res['fill_runs_s'])}), identical to per entry: "
                f"{res.get('identical_to_per_entry', 'n/a')}; rules --maps-from json: median "
                f"{res['rules_wall_s']:.2f} s (runs {', '.join(f'{x:.2f}' for x in res['rules_runs_s'])}), "
                f"peak RSS {res['peak_rss_kib'] / 1024:.0f} MiB (the in-process fill's: "
                f"{res['fill_process_peak_rss_kib'] / 1024:.0f} MiB)",
                flush=True,
            )
            out.append(res)
    return {"fill": out}


def _us(res: dict, what: str, p: int) -> str:
    v = res[f"daemon_{what}_p{p}_us"]
    return "-" if v is None else f"{v:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--interval", type=float, default=5.0, help="the daemon's poll interval (s)")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--fill", type=int, nargs="+", metavar="N", help="the initial fill apart (module doc)")
    ap.add_argument("--fill-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fill_child:
        import json

        print(json.dumps(fill_child(args.fill_child, args.repeat)))
        return 0
    if args.fill:
        doc = fill_main(args.fill, args.repeat)
        load, note = load_note()
        print(note)
        write_json(args.json, {"load_average": load, **doc})
        return 0
    runs = []
    for r in range(args.repeat):
        res = run_once(args.entries, args.changes, args.interval)
        runs.append(res)
        print(
            f"run {r + 1}: fill {res['entries']} entries {res['initial_fill_ms']:.0f} ms "
            f"({res['start_to_first_batch_ms']:.0f} ms from process start) "
            f"(peak RSS {res['daemon_peak_rss_kib'] / 1024:.0f} MiB); {res['changes']} changes: "
            f"p50 {res['p50_us']:.0f} us, p99 {res['p99_us']:.0f} us, max {res['max_us']:.0f} us "
            f"(add p50/p99 {res['add_p50_us']:.0f}/{res['add_p99_us']:.0f}, delete "
            f"{res['delete_p50_us']:.0f}/{res['delete_p99_us']:.0f}); the daemon's split p50/p99 (us): "
            + ", ".join(f"{k} {_us(res, k, 50)}/{_us(res, k, 99)}" for k in ("since_syscall", "woke", "work", "cpu"))
            + f"; the syscall itself {res['syscall_p50_us']:.0f}/{res['syscall_p99_us']:.0f} us; of "
            f"{res['changes'] // 2} deletes, {res['deletes_planned_from_the_entry_event_alone']} planned from the "
            f"entry event alone, {res['deletes_written_before_the_syscall_returned']} written before it returned"
        )
    summary = {k: statistics.median(r[k] for r in runs) for k in ("initial_fill_ms", "p50_us", "p99_us", "max_us")}
    print(
        f"median of {args.repeat} runs: p50 {summary['p50_us']:.0f} us, p99 {summary['p99_us']:.0f} us "
        f"(targets: p50 < 1000 us, p99 < 5000 us); initial fill {summary['initial_fill_ms']:.0f} ms"
    )
    load, note = load_note()
    print(note)
    write_json(args.json, {"load_average": load, "runs": runs, "median": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
