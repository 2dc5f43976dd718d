"""Accuracy of the cost model (analyzer/cost.py) against the running kernel.

Part 1, every corpus path with a witness: the object is loaded (analyzer/kernel.py), each
path's witness packet and map entries are built as `xdp2tc verify` builds them
(analyzer/verify.py), the packet is run once and must give the predicted verdict and
output, then it is timed with BPF_PROG_TEST_RUN (`--repeat` runs, maps reset before each
of `--rounds` rounds, median kept) and must still give the prediction afterwards. The
prediction is the profile's overhead plus the price of the counters of the sub-path the
witness takes. Paths are left out of the distribution, with the reason, when the kernel
cannot run them the same way every repetition: helper results (time, random numbers),
a packet the program rewrites into one that takes another path, or map state that moves
the path (checked: the run after the timing must still match the prediction).

Part 2, tail calls in the corpus: corpus/tailcall_dispatch.c as compiled (clang merges its
three calls into one site with three constant indices: the kernel's indirect path), the
same dispatcher with one `bpf_tail_call_static` site per protocol (direct jumps), and with
the handlers inlined (merged, no tail call) -- bench/tailcall/*.c, compiled here with
clang -- timed on one packet per handler path; and corpus/tailcall_variable.c with its slot
filled at run time. Measured savings are compared with what `xdp2tc cost` estimates.

    .venv/bin/python bench/cost.py [--repeat 100000] [--rounds 5] [--filter SUBSTRING]
                                   [--profile P] [--json bench/results/cost-<date>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import z3  # noqa: E402

import corpus  # noqa: E402
from analyzer import kernel  # noqa: E402
from analyzer.cost import count, load_profile, price, taken_tail_calls  # noqa: E402
from analyzer.exploration import UNKNOWN  # noqa: E402
from analyzer.symbolic import PACKET, symbols  # noqa: E402
from analyzer.verify import Verifier  # noqa: E402
from lifter.insn import Call  # noqa: E402
from lifter.program import load_object  # noqa: E402

#: Sections the kernel cannot test-run.
NO_TEST_RUN = ("xdp/devmap", "xdp/cpumap", "xdp.frags/devmap", "xdp.frags/cpumap")
BANDS = (0.10, 0.20, 0.30, 0.50)


# --------------------------------------------------------------------------- part 1


def time_run(loaded, prog: str, packet: bytes, ctx, repeat: int, rounds: int, reset) -> list[int]:
    out = []
    for _ in range(rounds):
        reset()
        out.append(loaded.run(prog, packet, repeat=repeat, ctx=ctx).duration_ns)
    return out


def bench_object(path: Path, profile, repeat: int, rounds: int) -> list[dict]:
    rows = []
    obj = load_object(path)
    rel = os.path.relpath(path, ROOT)
    for prog in obj.programs:
        if not prog.is_xdp:
            continue
        base = {"object": rel, "program": prog.name}
        if prog.section.startswith(NO_TEST_RUN):
            rows.append(base | {"skip": "devmap/cpumap egress programs cannot be test-run"})
            continue
        counted = count(obj, prog)
        e = counted.exploration
        try:
            loaded = kernel.load(path, programs=[prog.name])
        except kernel.KernelLoadError as err:
            rows.append(base | {"skip": f"load failed: {str(err).splitlines()[0]}"})
            continue
        with loaded:
            v = Verifier(e, loaded)
            for p, cond in zip(e.paths, v.conditions):
                rows.append(base | bench_path(counted, v, loaded, prog.name, p, cond, profile, repeat, rounds))
    return rows


def bench_path(counted, v: Verifier, loaded, prog: str, path, cond, profile, repeat: int, rounds: int) -> dict:
    row: dict = {"path": path.id, "verdict": path.verdict}
    if path.verdict == UNKNOWN:
        return row | {"skip": f"outcome unknown to xdp2tc ({path.truncated or 'unsupported'})"}
    why = v._unfillable(path)
    if why:
        return row | {"skip": why}
    model = v._model(cond)
    if model is None:
        return row | {"skip": "no witness under test-run conditions"}
    counts = counted.counts_at(path, model)
    pr = price(counts, taken_tail_calls(path), counted, profile)
    row.update(
        insns=counts.get("insns", 0),
        predicted_ns=round(pr.ns + profile.overhead_ns, 3),
        predicted_net_ns=round(pr.ns, 3),
        uncalibrated=sorted(pr.uncalibrated),
        tail_calls=len(path.tail_calls),
        parts={k: round(x, 3) for k, x in pr.parts.items() if x},
    )
    ev = lambda x: model.eval(x, model_completion=True)  # noqa: E731
    packet = v._packet(ev)
    ctx = kernel.XdpCtx(ev(z3.BitVec("ctx.ingress_ifindex", 32)).as_long(), 0)

    def reset():
        v._set_maps(path, ev)

    try:
        reset()
    except kernel.KernelRunError as err:
        return row | {"skip": f"map entry rejected: {err}"}
    expected = v._prediction(path, ev)
    first = loaded.run(prog, packet, ctx=ctx)
    if (first.retval, first.packet_out) != expected:
        return row | {
            "skip": "helper-dependent path: the kernel took another one"
            if v.nondeterministic[path.id]
            else "kernel result differs from the prediction (see xdp2tc verify)"
        }
    if v.nondeterministic[path.id]:
        return row | {"skip": "depends on helper results (time, random): repetitions take other paths"}
    if self_moving(counted.exploration.obj, path, cond):
        return row | {"skip": "writes map state its own condition reads: repetitions take other paths"}
    if path.writes and first.packet_out != packet:
        again = loaded.run(prog, first.packet_out, ctx=ctx)
        holds = z3.is_true(model.eval(z3.substitute(cond, (PACKET, _array(first.packet_out))), model_completion=True))
        if not holds or again.retval != first.retval:
            return row | {"skip": "rewrites the packet into one that takes another path on repetition"}
    runs = time_run(loaded, prog, packet, ctx, repeat, rounds, reset)
    last = loaded.run(prog, packet, ctx=ctx)
    if last.retval != expected[0]:
        return row | {"skip": "map state written by the program moves the path under repetition"}
    measured = statistics.median(runs)
    row.update(
        measured_ns=measured,
        runs=runs,
        error=round((row["predicted_ns"] - measured) / measured, 4),
        error_resolution=resolution_error(row["predicted_ns"], measured),
        net_measured_ns=round(measured - profile.overhead_ns, 3),
    )
    return row


def resolution_error(predicted: float, measured: float) -> float:
    """The kernel reports whole ns (the mean per run, truncated): a measurement of k ns means
    a true mean in [k, k+1). 0 when the prediction is in there, else the distance to the
    interval relative to its middle."""
    lo, hi = measured, measured + 1
    if lo <= predicted < hi:
        return 0.0
    return round((predicted - (lo if predicted < lo else hi)) / (measured + 0.5), 4)


def self_moving(obj, path, cond) -> bool:
    """Does the path change map state its own condition reads? Inserting or deleting
    entries (helpers) moves conditions on `found` and values; storing into a value moves
    conditions on values."""
    names = symbols(cond)
    for eff in path.effects:
        if eff.kind not in ("map_write", "map_delete"):
            continue
        func = obj.function_at(eff.section, eff.pc)
        insn = next((i for i in func.insns if i.pc == eff.pc), None) if func else None
        by_helper = isinstance(insn, Call)
        if f"map.{eff.target}.val" in names or (by_helper and f"map.{eff.target}.found" in names):
            return True
    return False


def _array(packet: bytes):
    arr = z3.K(z3.BitVecSort(64), z3.BitVecVal(0, 8))
    for i, b in enumerate(packet):
        arr = z3.Store(arr, z3.BitVecVal(i, 64), z3.BitVecVal(b, 8))
    return arr


def distribution(rows: list[dict], key: str = "error") -> dict:
    errs = [r[key] for r in rows if key in r]
    if not errs:
        return {"paths": 0}
    out = {"paths": len(errs)}
    for band in BANDS:
        out[f"within_{int(band * 100)}pct"] = round(sum(1 for x in errs if abs(x) <= band) / len(errs), 4)
    out["median_error"] = round(statistics.median(errs), 4)
    out["median_abs_error"] = round(statistics.median(abs(x) for x in errs), 4)
    out["over"] = sum(1 for x in errs if x > 0.2)
    out["under"] = sum(1 for x in errs if x < -0.2)
    return out


# --------------------------------------------------------------------------- part 2


MAC = bytes.fromhex("020000000001020000000002")


def ip4(proto: int, payload: bytes) -> bytes:
    hdr = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0, 64, proto, 0, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    )
    return MAC + b"\x08\x00" + hdr + payload


PACKETS = {
    "tcp dport 23 (drop)": ip4(6, struct.pack("!HHIIBBHHH", 40000, 23, 1, 0, 0x50, 2, 65535, 0, 0)),
    "tcp dport 80 (pass)": ip4(6, struct.pack("!HHIIBBHHH", 40000, 80, 1, 0, 0x50, 2, 65535, 0, 0)),
    "udp dport 19 (drop)": ip4(17, struct.pack("!HHHH", 40000, 19, 12, 0) + b"ping"),
    "udp dport 53 (pass)": ip4(17, struct.pack("!HHHH", 40000, 53, 12, 0) + b"ping"),
    "icmp echo (drop)": ip4(1, struct.pack("!BBHI", 8, 0, 0, 1)),
    "icmp reply (pass)": ip4(1, struct.pack("!BBHI", 0, 0, 0, 1)),
}


def compile_variant(src: Path, out_dir: Path) -> Path:
    out = out_dir / (src.stem + ".o")
    clang = os.environ.get("CLANG", "clang-19")
    subprocess.run(
        [
            clang,
            "-O2",
            "-g",
            "-target",
            "bpf",
            "-Wall",
            "-I/usr/include/x86_64-linux-gnu",
            f"-I{corpus.INCLUDE_DIR}",
            "-c",
            str(src),
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


def timed(path: Path, prog: str, packets: dict, repeat: int, rounds: int, fill=None) -> dict:
    with kernel.load(path) as loaded:
        if fill:
            fill(loaded)
        out = {}
        for name, pkt in packets.items():
            res = loaded.run(prog, pkt)
            runs = [loaded.run(prog, pkt, repeat=repeat).duration_ns for _ in range(rounds)]
            out[name] = {"retval": res.retval, "ns": statistics.median(runs), "runs": runs}
        return out


def predicted(path: Path, prog_name: str, packets: dict, profile, mappings=()) -> dict:
    """Per packet: the price of the path the packet takes (its counters evaluated on the
    concrete packet), with the savings the model estimates."""
    from analyzer.symbolic import PACKET_FRAGS, PACKET_LEN, ctx_field

    obj = load_object(path)
    counted = count(obj, obj.program(prog_name))
    e = counted.exploration
    out = {}
    for name, pkt in packets.items():
        s = z3.Solver()
        s.add(
            *e.base_constraints(),
            PACKET_LEN == len(pkt),
            PACKET_FRAGS == 0,
            ctx_field("ingress_ifindex") == 1,
            ctx_field("rx_queue_index") == 0,
            *[z3.Select(PACKET, i) == b for i, b in enumerate(pkt)],
        )
        for p in e.paths:
            s.push()
            s.add(e.condition(p))
            if s.check() == z3.sat:
                m = s.model()
                counts = counted.counts_at(p, m)
                pr = price(counts, taken_tail_calls(p), counted, profile)
                out[name] = {
                    "path": p.id,
                    "verdict": p.verdict,
                    "insns": counts.get("insns", 0),
                    "ns": round(pr.ns + profile.overhead_ns, 3),
                    "net_ns": round(pr.ns, 3),
                    "tail_ns": round(pr.parts["tail_calls"], 3),
                    "saving_merge_ns": round(pr.saving_merge, 3),
                    "saving_const_ns": round(pr.saving_const, 3),
                }
                s.pop()
                break
            s.pop()
    return out


def tail_calls(profile, repeat: int, rounds: int) -> dict:
    build = corpus.BUILD_DIR / "clang"
    here = ROOT / "bench" / "tailcall"
    with tempfile.TemporaryDirectory() as tmp:
        static = compile_variant(here / "dispatch_static.c", Path(tmp))
        merged = compile_variant(here / "dispatch_merged.c", Path(tmp))
        dispatch = build / "tailcall_dispatch.o"
        m_var = timed(dispatch, "xdp_dispatch", PACKETS, repeat, rounds)
        m_static = timed(static, "xdp_dispatch", PACKETS, repeat, rounds)
        m_merged = timed(merged, "xdp_dispatch", PACKETS, repeat, rounds)
        p_var = predicted(dispatch, "xdp_dispatch", PACKETS, profile)
        p_static = predicted(static, "xdp_dispatch", PACKETS, profile)
        p_merged = predicted(merged, "xdp_dispatch", PACKETS, profile)
    rows = {}
    for name in PACKETS:
        r = {
            "measured_ns": {
                "variable": m_var[name]["ns"],
                "static": m_static[name]["ns"],
                "merged": m_merged[name]["ns"],
            },
            "predicted_ns": {
                "variable": p_var[name]["ns"],
                "static": p_static[name]["ns"],
                "merged": p_merged[name]["ns"],
            },
            "retval": [m_var[name]["retval"], m_static[name]["retval"], m_merged[name]["retval"]],
        }
        mv, ms, mm = (r["measured_ns"][k] for k in ("variable", "static", "merged"))
        r["measured_saving_ns"] = {"variable_to_constant": mv - ms, "merge": mv - mm, "merge_from_constant": ms - mm}
        r["estimated_saving_ns"] = {
            "variable_to_constant": p_var[name]["saving_const_ns"],
            "merge": p_var[name]["saving_merge_ns"],
            "merge_from_constant": p_static[name]["saving_merge_ns"],
        }
        r["tail_share_predicted"] = (
            round(p_var[name]["tail_ns"] / p_var[name]["net_ns"], 3) if p_var[name]["net_ns"] else 0.0
        )
        rows[name] = r
    # tailcall_variable: DSCP 0 -> slot 0, filled at run time with the TCP handler.
    handler_obj = build / "tailcall_dispatch.o"
    var_obj = build / "tailcall_variable.o"
    pkt = {
        "tcp dport 23, dscp 0 -> slot 0 (drop)": PACKETS["tcp dport 23 (drop)"],
        "udp dport 53, dscp 0 -> slot 0 (pass)": PACKETS["udp dport 53 (pass)"],
    }
    with kernel.load(handler_obj, programs=["xdp_handle_tcp"]) as handlers:
        fd = handlers.programs["xdp_handle_tcp"]

        def fill(loaded):
            loaded.map_update("dscp_progs", (0).to_bytes(4, "little"), fd.to_bytes(4, "little"))

        m_dscp = timed(var_obj, "xdp_tailcall_variable", pkt, repeat, rounds, fill)
        m_handler = timed(handler_obj, "xdp_handle_tcp", pkt, repeat, rounds)
    cmd = [
        sys.executable,
        "-m",
        "offload.cli",
        "cost",
        "--json",
        str(var_obj),
        "--prog-array",
        f"dscp_progs=0:{handler_obj}:xdp_handle_tcp",
    ]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT).stdout)
    variable = {
        "measured": {
            k: {"chain_ns": m_dscp[k]["ns"], "handler_alone_ns": m_handler[k]["ns"], "retval": m_dscp[k]["retval"]}
            for k in pkt
        },
        "cost_report": [
            {"path": p["id"], "ns": p["ns"], "continues": p["continues"]}
            for prog in doc["programs"]
            if prog["program"] == "xdp_tailcall_variable"
            for p in prog["paths"]
        ],
    }
    return {"dispatch": rows, "variable": variable, "profile_tail_call": profile.tail_call}


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--filter", metavar="SUBSTRING")
    ap.add_argument("--profile", help="profile (default: the shipped one)")
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / f"cost-{time.strftime('%Y-%m-%d')}.json")
    ap.add_argument("--no-tailcalls", action="store_true")
    args = ap.parse_args()
    try:
        kernel.check_kernel()
    except kernel.KernelUnavailable as err:
        print(f"bench/cost.py: {err}", file=sys.stderr)
        return 2
    profile = load_profile(args.profile)
    objects = [p for p in sorted(corpus.built_objects()) if not args.filter or args.filter in str(p)]
    rows = []
    for i, path in enumerate(objects, 1):
        try:
            got = bench_object(path, profile, args.repeat, args.rounds)
        except Exception as exc:  # noqa: BLE001 - reported per object
            got = [{"object": os.path.relpath(path, ROOT), "failure": f"{type(exc).__name__}: {exc}"}]
        rows += got
        done = [r for r in got if "measured_ns" in r]
        print(
            f"[{i}/{len(objects)}] {os.path.relpath(path, ROOT)}: {len(done)} paths timed", file=sys.stderr, flush=True
        )
    timed_rows = [r for r in rows if "measured_ns" in r]
    for r in timed_rows:
        r["net_error"] = (
            round((r["predicted_net_ns"] - r["net_measured_ns"]) / r["net_measured_ns"], 4)
            if r["net_measured_ns"] > 0
            else None
        )
    by_toolchain = {}
    for tc in corpus.TOOLCHAINS:
        by_toolchain[tc] = distribution([r for r in timed_rows if f"/build/{tc}/" in f"/{r['object']}"])
    skipped: dict[str, int] = {}
    for r in rows:
        if "skip" in r:
            reason = r["skip"].split(" (")[0] if r["skip"].startswith("outcome unknown") else r["skip"]
            skipped[reason] = skipped.get(reason, 0) + 1
    summary = {
        "profile": {
            "source": profile.source,
            "kernel": profile.kernel,
            "cpu": profile.cpu,
            "overhead_ns": profile.overhead_ns,
        },
        "repeat": args.repeat,
        "rounds": args.rounds,
        "paths": len([r for r in rows if "path" in r]),
        "timed": len(timed_rows),
        "total": distribution(timed_rows),
        "total_resolution_aware": distribution(timed_rows, "error_resolution"),
        "net": distribution([r for r in timed_rows if r.get("net_error") is not None], "net_error"),
        "by_toolchain": by_toolchain,
        "skipped": skipped,
        "failures": [r for r in rows if "failure" in r],
        "target_total_within_20pct_for_90pct": None,
    }
    tot = summary["total"]
    summary["target_total_within_20pct_for_90pct"] = tot.get("within_20pct", 0) >= 0.9 if tot["paths"] else None
    res = summary["total_resolution_aware"]
    summary["target_resolution_aware_within_20pct_for_90pct"] = (
        res.get("within_20pct", 0) >= 0.9 if res["paths"] else None
    )
    worst = sorted(timed_rows, key=lambda r: -abs(r["error"]))[:20]
    result = {"summary": summary, "worst": worst, "paths": rows}
    if not args.no_tailcalls and not args.filter:
        result["tail_calls"] = tail_calls(profile, args.repeat, args.rounds)
    print(json.dumps(summary, indent=2))
    for r in worst[:10]:
        print(
            f"  {r['error']:+.0%} predicted {r['predicted_ns']:.1f} measured {r['measured_ns']} ns "
            f"{r['object']} {r['program']} #{r['path']} ({r['insns']} insns, {r['parts']})"
        )
    if "tail_calls" in result:
        print(json.dumps(result["tail_calls"]["dispatch"], indent=1))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"written {os.path.relpath(args.json, ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
