"""Accuracy of the cost model (analyzer/cost/) against the running kernel.

Part 1, every corpus path with a witness, timed on the kernel by analyzer/cost/pathtiming.py
(witness packet and map entries as `xdp2tc verify` builds them; paths the kernel cannot
repeat the same way are left out with the reason). The prediction is the profile's overhead
plus the price of the counters of the sub-path the witness takes. Then the held-back check
(`--hold-back`, default 0.3 of the source programs, every build of one source together):
the instruction prices are refitted (analyzer/cost/fit.py) on the other programs' paths and
judged on the held-back ones -- what a user gets after `calibrate` on programs the fit
never saw; run it with a micro-program-only profile of this machine
(`xdp2tc calibrate --no-fit -o micro.json`) so nothing in the prices saw those paths.

Part 2, tail calls in the corpus: corpus/tailcall_dispatch.c as compiled (clang merges its
three calls into one site with three constant indices: the kernel's indirect path), the
same dispatcher with one `bpf_tail_call_static` site per protocol (direct jumps), and with
the handlers inlined (merged, no tail call) -- bench/tailcall/*.c, compiled here with
clang -- timed on one packet per handler path; and corpus/tailcall_variable.c with its slot
filled at run time. Measured savings are compared with what `xdp2tc cost` estimates.

    .venv/bin/python bench/cost.py [--repeat 100000] [--rounds 5] [--filter SUBSTRING]
                                   [--profile P] [--hold-back 0.3] [--no-tailcalls]
                                   [--json bench/results/cost-<date>.json] [--speed RUNS]
                                   [--from bench/results/cost-<date>.json]
                                   [--estimator fastest_half] [--fit-profile OUT.json]

`--from FILE` reads the per-path timings a previous run saved (its `paths`; the JSON keeps
every round's reading) and computes the summaries and the held-back refits again without
timing anything: the fit can be iterated offline on one set of measurements. The
repeatability check (`summary.repeatability`) splits each path's rounds into the even
and the odd ones: two measurements of the same path made alternately under the same load.
How often one is within tolerance of the other is the ceiling any model can reach when
judged against one such measurement; it is given for every estimator of a path's time
(pathtiming.ESTIMATORS), and `--estimator` judges the models against another one than
pathtiming.ESTIMATOR (the rows keep every round). The held-back models also list, per
program, the path furthest from its measurement (`worst_by_program`). `--fit-profile OUT`
writes the `--profile`'s micro prices fitted on every timed path of the run: with a
profile from `xdp2tc calibrate --no-fit` on the same kernel, that is the profile
`calibrate` would make, fitted on the whole corpus (how analyzer/profiles/default.json
is made). The run's wall time and load are in `summary.timing`.

Part 3 (`--speed RUNS`, alone): CPU time of `xdp2tc cost` against `xdp2tc analyze` on the
xdp-filter objects (corpus/external), alternating, medians.
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
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import z3  # noqa: E402

import corpus  # noqa: E402
from analyzer import kernel  # noqa: E402
from analyzer.cost import fit, pathtiming  # noqa: E402
from analyzer.cost.count import count  # noqa: E402
from analyzer.cost.price import price, taken_tail_calls  # noqa: E402
from analyzer.cost.profile import load_profile  # noqa: E402
from lifter.program import load_object  # noqa: E402

BANDS = (0.10, 0.20, 0.30, 0.50)


# --------------------------------------------------------------------------- part 1


def bench_object(path: Path, profile, repeat: int, rounds: int) -> list[dict]:
    return pathtiming.time_object(path, profile, repeat, rounds, name=os.path.relpath(path, ROOT))


#: Paths this long or longer are reported apart (the straight-line code the chain is for).
LONG = 125
#: Paths whose measured time less the test run's overhead is this or more are reported apart.
NET_FLOOR = int(fit.NET_FLOOR)


def held_back(rows: list[dict], profile, fraction: float) -> dict:
    """Refit the instruction prices on the paths of the programs not held back (by a
    stable hash of the source name, every build together) and judge them on the held-back
    ones: what a user gets after `calibrate` on programs the fit never saw. Every model is
    fitted on the same timings (paired): the profile's micro prices alone; the fit without
    the dependency chain (the model before it); with it; each with rows weighted for the
    whole test run's relative error (`measured`) or the program's own (`net`). Each is
    judged with the test run's fixed overhead in the measured time (`gross`, as the kernel
    reports it) and without it (`net`: predicted and measured both minus overhead_ns), on
    all held-back paths and on those of LONG instructions or more."""
    profile = fit.micro_profile(profile)  # no instruction price that saw the held-back paths
    keep = [r for r in rows if "measured_ns" in r]
    train_rows = [r for r in keep if not _held_back(r, fraction)]
    test_rows = [r for r in keep if _held_back(r, fraction)]
    out = {"fraction": fraction, "train_paths": len(train_rows), "held_back_paths": len(test_rows), "models": {}}
    variants = {"micro_prices": None}
    for chain in (False, True):
        for weight in ("measured", "net"):
            variants[f"fit{'_chain' if chain else ''}_{weight}"] = (chain, weight)
    for name, how in variants.items():
        if how is None:
            test, prices = fit.samples(test_rows, profile), {}
        else:
            chain, weight = how
            train = fit.samples(train_rows, profile, with_chain=chain)
            test = fit.samples(test_rows, profile, with_chain=chain)
            prices = fit.solve(train, fit.fitted_classes(train), profile, weight)
        res: dict = {"prices": {k: round(v, 4) for k, v in prices.items()}}
        subsets = (
            ("all", test),
            (f"insns_{LONG}_or_more", [s for s in test if _insns(s) >= LONG]),
            # below ~10 ns the kernel's whole-ns figure alone is a 10 % error of the net time
            (f"net_{NET_FLOOR}ns_or_more", [s for s in test if s.net_ns >= NET_FLOOR]),
        )
        for label, subset in subsets:
            pred = [fit.predict_net(s, prices, profile) for s in subset]
            res[label] = {
                "gross": fit.summary(fit.gross_errors(pred, subset, profile)),
                # the previous sessions' net figure: ±20 % of measured minus the profile's overhead
                "net_profile_overhead": fit.summary(
                    [
                        (p + profile.overhead_ns - s.measured_ns) / (s.measured_ns - profile.overhead_ns)
                        for p, s in zip(pred, subset)
                        if s.measured_ns > profile.overhead_ns
                    ]
                ),
                "net": fit.net_summary(pred, subset),
            }
        res["worst_by_program"] = worst_by_program([fit.predict_net(s, prices, profile) for s in test], test)
        out["models"][name] = res
    return out


def worst_by_program(pred: list[float], data: list) -> dict:
    """Per program (object and entry program), its path whose net prediction is furthest
    from the net measurement (ns), and how many of its paths are within ±BAND or ±ABS_NS."""
    out: dict = {}
    for p, s in zip(pred, data):
        prog, path = s.name.rsplit(" #", 1)
        cur = out.setdefault(prog, {"paths": 0, "within_20pct_or_1ns": 0, "worst": None})
        cur["paths"] += 1
        cur["within_20pct_or_1ns"] += fit.within(p, s)
        err = p - s.net_ns
        if cur["worst"] is None or abs(err) > abs(cur["worst"]["error_ns"]):
            cur["worst"] = {
                "path": path,
                "insns": sum(n for c, n in s.insns.items() if c != fit.CHAIN),
                "net_ns": round(s.net_ns, 2),
                "predicted_net_ns": round(p, 2),
                "error_ns": round(err, 2),
                "error": round(err / s.net_ns, 3) if s.net_ns > 0 else None,
            }
    return dict(sorted(out.items(), key=lambda kv: -abs(kv[1]["worst"]["error_ns"])))


def halves(r: dict, how: str) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """A timed row's two half measurements (even rounds, odd rounds): (gross, net) each by
    the estimator `how` (pathtiming.estimate), the net one against the overhead timed in
    the same rounds; None with fewer than 4 rounds."""
    runs, base = r.get("runs") or [], r.get("overhead_runs") or []
    if len(runs) < 4:
        return None
    out = []
    for part in (slice(0, None, 2), slice(1, None, 2)):
        sub_base = base[part] if len(base) == len(runs) else []
        gross, _, net = pathtiming.estimate(runs[part], sub_base, r["overhead_ns"], how)
        out.append((gross, net))
    return out[0], out[1]


def repeatability(rows: list[dict], fraction: float) -> dict:
    """The noise ceiling, per estimator of a path's time (pathtiming.ESTIMATORS): how
    often the odd rounds' measurement of a path is within tolerance of its even rounds'
    (the same criteria as the model: gross ±BAND, net ±BAND or ±ABS_NS, ±2 ABS_NS), over
    all timed paths and over the held-back ones. Each half has half the rounds, so this
    is the ceiling of a measurement of rounds/2 rounds (a full one repeats at least as
    well)."""
    out: dict = {}
    for how in pathtiming.ESTIMATORS:
        out[how] = {}
        for label, subset in (("all", rows), ("held_back", [r for r in rows if _held_back(r, fraction)])):
            pairs = [h for r in subset if (h := halves(r, how)) is not None]
            if not pairs:
                out[how][label] = {"paths": 0}
                continue
            n = len(pairs)

            def close(a: float, b: float, abs_ns: float) -> bool:
                return abs(b - a) <= max(fit.BAND * a, abs_ns)

            out[how][label] = {
                "paths": n,
                "gross_within_20pct": round(sum(close(a[0], b[0], 0.0) for a, b in pairs) / n, 4),
                "net_within_20pct_or_1ns": round(sum(close(a[1], b[1], fit.ABS_NS) for a, b in pairs) / n, 4),
                "net_within_20pct_or_2ns": round(sum(close(a[1], b[1], 2 * fit.ABS_NS) for a, b in pairs) / n, 4),
                "median_abs_net_difference_ns": round(statistics.median(abs(b[1] - a[1]) for a, b in pairs), 3),
            }
    return out


def reestimate(rows: list[dict], how: str) -> None:
    """Every timed row's gross, overhead and net time again from its rounds, by the
    estimator `how` (rows saved by any version that kept `runs` and `overhead_runs`)."""
    for r in rows:
        if "measured_ns" not in r or not r.get("runs"):
            continue
        base = r.get("overhead_runs") or []
        over = r["overhead_ns"] if len(base) != len(r["runs"]) else 0.0
        gross, over, net = pathtiming.estimate(r["runs"], base, over, how)
        r.update(
            measured_ns=gross,
            overhead_ns=over,
            net_measured_ns=round(net, 3),
            estimator=how,
            error=round((r["predicted_ns"] - gross) / gross, 4),
            error_resolution=pathtiming.resolution_error(r["predicted_ns"], gross),
        )


def _held_back(r: dict, fraction: float) -> bool:
    """Is the row's source program among the held-back share (a stable hash of its name)?"""
    return zlib.crc32(fit.group_of(r["object"]).encode()) % 1000 < int(fraction * 1000)


def misses_priced_as_hits(rows: list[dict], profile) -> dict:
    """Paths whose lookups miss, at the profile's prices (no fit): with the miss prices,
    and as before misses were priced (at the hit's price) -- the same timings, paired."""
    out = {"with_miss_prices": {"gross": [], "net": []}, "as_hits": {"gross": [], "net": []}}
    for r in rows:
        misses = {k.split(".", 1)[1]: n for k, n in r.get("counts", {}).items() if k.startswith("lookup_miss.")}
        if "measured_ns" not in r or not misses:
            continue
        extra = sum(n * (profile.lookup_price(t) - profile.lookup_price(t, hit=False)) for t, n in misses.items())
        m, net = r["measured_ns"], r["net_measured_ns"]
        for name, pred in (("with_miss_prices", r["predicted_ns"]), ("as_hits", r["predicted_ns"] + extra)):
            out[name]["gross"].append((pred - m) / m)
            if net > 0:
                out[name]["net"].append((pred - m) / net)
    return {k: {g: fit.summary(e) for g, e in v.items()} for k, v in out.items()}


def _insns(s) -> int:
    return sum(n for c, n in s.insns.items() if c != fit.CHAIN)


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
    from analyzer.symbolic import PACKET, PACKET_FRAGS, PACKET_LEN, ctx_field

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


# --------------------------------------------------------------------------- part 3


def speed(objects: list[Path], runs: int) -> dict:
    """`cost` against `analyze` on the same objects: CPU seconds (user + sys) of each
    command as a child process, run alternately `runs` times, medians (issue 14: `cost`
    no slower than `analyze` plus pricing)."""
    out = {}
    for path in objects:
        times: dict[str, list[float]] = {"analyze": [], "cost": []}
        for _ in range(runs):
            for cmd in times:
                before = os.times()
                subprocess.run(
                    [sys.executable, "-m", "offload.cli", cmd, "--json", str(path)], capture_output=True, cwd=ROOT
                )
                after = os.times()
                times[cmd].append(
                    round(
                        after.children_user + after.children_system - before.children_user - before.children_system, 3
                    )
                )
        med = {k: statistics.median(v) for k, v in times.items()}
        out[os.path.relpath(path, ROOT)] = {
            "cpu_s": times,
            "median_s": med,
            "ratio": round(med["cost"] / med["analyze"], 3),
        }
        print(
            f"  {path.name}: analyze {med['analyze']:.2f} s, cost {med['cost']:.2f} s CPU (medians of {runs})",
            file=sys.stderr,
        )
    return out


# --------------------------------------------------------------------------- main


def measure(profile, args) -> list[dict]:
    """Part 1's timings: a row per path of every built corpus object (pathtiming.py)."""
    objects = [p for p in sorted(corpus.built_objects()) if not args.filter or args.filter in str(p)]
    rows = []
    loads = [os.getloadavg()[0]]
    started = time.time()
    for i, path in enumerate(objects, 1):
        try:
            got = bench_object(path, profile, args.repeat, args.rounds)
        except Exception as exc:  # noqa: BLE001 - reported per object
            got = [{"object": os.path.relpath(path, ROOT), "failure": f"{type(exc).__name__}: {exc}"}]
        rows += got
        done = [r for r in got if "measured_ns" in r]
        loads.append(os.getloadavg()[0])
        print(
            f"[{i}/{len(objects)}] {os.path.relpath(path, ROOT)}: {len(done)} paths timed (load {loads[-1]:.1f})",
            file=sys.stderr,
            flush=True,
        )
    timing = {
        "wall_s": round(time.time() - started, 1),
        "load_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
        "cpus": os.cpu_count(),
        "repeat": args.repeat,
        "rounds": args.rounds,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"timing": timing, "paths": rows}))  # kept should the summaries fail
    return timing, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--filter", metavar="SUBSTRING")
    ap.add_argument("--profile", help="profile (default: the shipped one)")
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / f"cost-{time.strftime('%Y-%m-%d')}.json")
    ap.add_argument("--no-tailcalls", action="store_true")
    ap.add_argument(
        "--hold-back", type=float, default=0.3, help="share of source programs held back from the refit (default 0.3)"
    )
    ap.add_argument(
        "--speed",
        type=int,
        metavar="RUNS",
        help="only time `cost` against `analyze` on the xdp-filter objects (corpus/external), RUNS times each",
    )
    ap.add_argument(
        "--estimator",
        choices=sorted(pathtiming.ESTIMATORS),
        default=pathtiming.ESTIMATOR,
        help=f"how a path's time is made from its rounds (default {pathtiming.ESTIMATOR}; pathtiming.py)",
    )
    ap.add_argument(
        "--fit-profile",
        type=Path,
        metavar="OUT",
        help="write the --profile's micro prices fitted on every timed path of this run (what `calibrate` "
        "fits, on the whole corpus): how the shipped profile is made from `calibrate --no-fit` and a bench run",
    )
    ap.add_argument(
        "--from",
        dest="source",
        type=Path,
        metavar="FILE",
        help="recompute the summaries and refits from the per-path timings a previous run saved (no timing)",
    )
    args = ap.parse_args()
    if args.speed:
        objs = [p for p in corpus.external_objects() if p.name.startswith("xdpfilt_")]
        objs = [p for p in objs if not args.filter or args.filter in str(p)]
        result = {"load": os.getloadavg(), "speed": speed(objs, args.speed)}
        print(json.dumps(result, indent=1))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
        return 0
    profile = load_profile(args.profile)
    if args.source:
        saved = json.loads(args.source.read_text())
        rows = saved["paths"]
        rows = [r for r in rows if not args.filter or args.filter in r["object"]]
        timing = saved.get("timing") or saved.get("summary", {}).get("timing") or {}
        args.repeat, args.rounds = timing.get("repeat", args.repeat), timing.get("rounds", args.rounds)
    else:
        try:
            kernel.check_kernel()
        except kernel.KernelUnavailable as err:
            print(f"bench/cost.py: {err}", file=sys.stderr)
            return 2
        timing, rows = measure(profile, args)
    reestimate(rows, args.estimator)
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
        "estimator": args.estimator,
        "timing": timing,
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
    summary["lookup_misses"] = misses_priced_as_hits(rows, profile)
    if args.hold_back > 0:
        summary["refit"] = held_back(rows, profile, args.hold_back)
    if args.fit_profile:
        fitted = fit.fit_profile(fit.micro_profile(profile), rows)
        fitted.method["fit_repeat"], fitted.method["fit_rounds"] = args.repeat, args.rounds
        fitted.notes.append(f"fitted by bench/cost.py --fit-profile on {summary['timed']} corpus paths")
        fitted.save(args.fit_profile)
        print(f"written {args.fit_profile}", file=sys.stderr)
    for name, m in summary.get("refit", {}).get("models", {}).items():
        cells = [
            f"{sub} gross {m[sub]['gross'].get('within_20pct', 0):.1%}"
            f" net(old: 20%, profile overhead) {m[sub]['net_profile_overhead'].get('within_20pct', 0):.1%}"
            f" net(20% or 1 ns) {m[sub]['net'].get('within_20pct_or_1ns', 0):.1%}"
            f" (20% or 2 ns) {m[sub]['net'].get('within_20pct_or_2ns', 0):.1%} ({m[sub]['gross']['paths']})"
            for sub in m
            if sub not in ("prices", "worst_by_program")
        ]
        print(f"  held back, {name}: " + "; ".join(cells))
    worst = sorted(timed_rows, key=lambda r: -abs(r["error"]))[:20]
    result = {"summary": summary, "worst": worst, "paths": rows}
    summary["repeatability"] = repeatability(timed_rows, args.hold_back)
    if not args.no_tailcalls and not args.filter and not args.source:
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
