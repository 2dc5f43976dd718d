"""The `cost` report: JSON (schema below) and text, rendered from the priced programs.

JSON schema `xdp2tc.cost/1` (`xdp2tc cost --json`; fields are stable within a schema version,
new fields may be added):

    schema
    profile     {source, kernel, cpu, created, overhead_ns, path_ns,
                 fit {paths, folds, within_20pct, median_abs_error,
                      within_20pct_or_1ns_net (without the test run's overhead: within
                      ±20 % or ±1 ns, fit.py ABS_NS)} | null   (null: micro-program prices),
                 foreign: what differs from this machine | null}   (overhead: per test run, not in any path)
    programs    [{file, program, section, root (false: a tail-call target, a devmap/cpumap program
                  or reached only through --prog-array; offload/programs.py's entry programs are roots),
                  summary {paths, ns {min, max}, worst_path, worst_ns, worst_tail_share,
                           saving_merge_ns, saving_const_ns},
                  sites [{program, pc, kind: constant|variable, why}],
                  paths [{id, verdict, programs, truncated, insns {min, max},
                          ns {min, median, max} | null, subpaths, exact,
                          counts {insn {class: n}, helper {name: n}, lookup {type: n} (hits),
                                  lookup_miss {type: n}, update {type: n} (overwrites),
                                  insert {type: n} (new keys), pkt {read_bytes, write_bytes},
                                  callbacks, chain (cycles of the longest dependency chain)}
                                  (of the dearest sub-path)
                          tail_calls [{caller, pc, map, index, target, kind, ns}], tail_misses,
                          chain_depth, tail_share, saving_merge_ns, saving_const_ns,
                          uncalibrated [counter names], continues {targets, ns {min, max} | null,
                          chain_depth} | null,
                          ratio_to_cheapest (max ns / the program's cheapest path's min ns)}]}]
    graph       {nodes [{id, file, program, root}], edges [{from, to, map, index, kind,
                 source: static|prog-array, ns, paths, sites}]}
    errors      [one line each: tail-call cycles, chains deeper than 33]
"""

from __future__ import annotations

from ..report import counted
from .count import Site
from .price import PathCost, grouped
from .profile import foreign_profile
from .tailgraph import ProgramCost, TailGraph

SCHEMA = "xdp2tc.cost/1"


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def path_json(p: ProgramCost, pc: PathCost, graph: TailGraph) -> dict:
    path = pc.path
    worst = pc.worst
    counts = pc.vectors[worst] if worst >= 0 else {}
    price = pc.prices[worst] if worst >= 0 else None
    ns = pc.ns()
    lo, hi = pc.insns()
    tails = []
    for t in path.tail_calls:
        site = Site(t.caller, t.pc)
        kind = p.counted.site_kind(site)
        tails.append(
            {
                "caller": t.caller,
                "pc": t.pc,
                "map": t.map,
                "index": t.index,
                "target": t.target,
                "kind": kind,
                "ns": _r(graph.profile.tail_call[kind]),
            }
        )
    attempts = sum(n for k, n in counts.items() if k.startswith("tail."))
    g = grouped(counts)
    cont = graph.continuation(p, pc)
    return {
        "id": path.id,
        "verdict": path.verdict,
        "programs": list(path.programs),
        "truncated": path.truncated,
        "insns": {"min": lo, "max": hi},
        "ns": None if ns is None else {"min": _r(ns[0]), "median": _r(ns[1]), "max": _r(ns[2])},
        "subpaths": len(pc.vectors),
        "exact": pc.exact,
        "counts": {
            "insn": g.get("insn", {}),
            "helper": g.get("helper", {}),
            "lookup": g.get("lookup", {}),
            "lookup_miss": g.get("lookup_miss", {}),
            "update": g.get("update", {}),
            "insert": g.get("insert", {}),
            "pkt": g.get("pkt", {}),
            "callbacks": counts.get("callback", 0),
            "chain": counts.get("chain", 0),
        },
        "tail_calls": tails,
        "tail_misses": max(attempts - len(path.tail_calls), 0),
        "chain_depth": len(path.tail_calls),
        "tail_share": _r(price.parts["tail_calls"] / price.ns) if price and price.ns else 0.0,
        "saving_merge_ns": _r(price.saving_merge) if price else 0.0,
        "saving_const_ns": _r(price.saving_const) if price else 0.0,
        "uncalibrated": sorted(price.uncalibrated) if price else [],
        "continues": None
        if cont is None
        else {
            "targets": [str(n) for n in cont.targets],
            "ns": None if cont.ns is None else {"min": _r(cont.ns[0]), "max": _r(cont.ns[1])},
            "chain_depth": cont.depth,
        },
    }


def program_json(p: ProgramCost, graph: TailGraph) -> dict:
    paths = [path_json(p, pc, graph) for pc in p.paths]
    priced = [(pc, pc.ns()) for pc in p.paths if pc.ns() is not None]
    cheapest = min((x[1][0] for x in priced), default=None)
    for row in paths:  # how many times the program's cheapest path each costs (profile-independent-ish)
        row["ratio_to_cheapest"] = _r(row["ns"]["max"] / cheapest) if row["ns"] and cheapest else None
    worst = max(priced, key=lambda x: x[1][2]) if priced else None
    wp = worst[0].prices[worst[0].worst] if worst else None
    sites = sorted(
        {Site(t.caller, t.pc) for pc in p.paths for t in pc.path.tail_calls}
        | set(s for s in p.counted.site_keys if p.counted.site_keys[s]),
        key=lambda s: (s.program, s.pc),
    )
    return {
        "file": p.node.file,
        "program": p.node.program,
        "section": p.counted.exploration.program.section,
        "root": p.root,
        "summary": {
            "paths": len(p.paths),
            "ns": None
            if not priced
            else {"min": _r(min(x[1][0] for x in priced)), "max": _r(max(x[1][2] for x in priced))},
            "worst_path": worst[0].path.id if worst else None,
            "worst_ns": _r(worst[1][2]) if worst else None,
            "worst_tail_share": _r(wp.parts["tail_calls"] / wp.ns) if wp and wp.ns else 0.0,
            "saving_merge_ns": _r(max((x["saving_merge_ns"] for x in paths), default=0.0)),
            "saving_const_ns": _r(max((x["saving_const_ns"] for x in paths), default=0.0)),
        },
        "sites": [
            {"program": s.program, "pc": s.pc, "kind": p.counted.site_kind(s), "why": p.site_reason(s)} for s in sites
        ],
        "paths": paths,
    }


def cost_json(programs: list[ProgramCost], graph: TailGraph, profile) -> dict:
    return {
        "schema": SCHEMA,
        "profile": {
            "source": profile.source,
            "kernel": profile.kernel,
            "cpu": profile.cpu,
            "created": profile.created,
            "overhead_ns": profile.overhead_ns,
            "path_ns": profile.path_ns,
            "fit": _fit_summary(profile),
            "foreign": foreign_profile(profile),
        },
        "programs": [program_json(p, graph) for p in programs],
        "graph": graph.to_json(),
        "errors": graph.errors,
    }


def _fit_summary(profile) -> dict | None:
    """The fit's cross-validated error (None: instruction prices from micro-programs only)."""
    cv = profile.fit.get("cross_validation") if profile.fit else None
    if not cv:
        return None
    out = {k: cv.get(k) for k in ("paths", "folds", "within_20pct", "median_abs_error")}
    net = profile.fit.get("cross_validation_net") or {}
    out["within_20pct_or_1ns_net"] = net.get("within_20pct_or_1ns")  # without the test run's fixed overhead
    return out


def _span(ns: dict | None) -> str:
    if ns is None:
        return "?"
    if ns.get("median") is None:
        return f"{ns['min']:.1f}-{ns['max']:.1f}" if ns["min"] != ns["max"] else f"{ns['min']:.1f}"
    if ns["min"] == ns["max"]:
        return f"{ns['min']:.1f}"
    return f"{ns['min']:.1f}/{ns['median']:.1f}/{ns['max']:.1f}"


def cost_text(programs: list[ProgramCost], graph: TailGraph, profile) -> str:
    doc = cost_json(programs, graph, profile)
    prof = doc["profile"]
    fit = prof["fit"]
    out = [
        f"profile: kernel {prof['kernel']}, {prof['cpu']} ({prof['source']}); prices exclude the "
        f"{prof['overhead_ns']:g} ns a test run adds per packet",
        "  instruction prices "
        + (
            f"fitted on {fit['paths']} real paths: {100 * fit['within_20pct']:.0f}% within ±20% on held-back "
            f"programs ({fit['folds']}-fold cross-validation)"
            + (
                f", {100 * fit['within_20pct_or_1ns_net']:.0f}% within ±20% or ±1 ns without the test run's overhead"
                if fit.get("within_20pct_or_1ns_net") is not None
                else ""
            )
            if fit
            else "from micro-programs only (not fitted on real paths)"
        )
        + ("; MEASURED ON ANOTHER MACHINE (" + prof["foreign"] + ")" if prof["foreign"] else ""),
    ]
    for prog in doc["programs"]:
        s = prog["summary"]
        how = "" if prog["root"] else " (not an entry program: reached by a tail call or a devmap/cpumap)"
        out.append(
            f"\n{prog['file']}: program {prog['program']} ({prog['section']}){how}: {counted(s['paths'], 'path')}"
        )
        out.append(f"  {'path':<5} {'verdict':<9} {'insns':>7} {'ns min/med/max':>16} {'xmin':>5}  calls")
        for p in prog["paths"]:
            n = (
                str(p["insns"]["min"])
                if p["insns"]["min"] == p["insns"]["max"]
                else f"{p['insns']['min']}-{p['insns']['max']}"
            )
            what = []
            if p["counts"]["helper"]:
                what.append(
                    ", ".join(
                        f"{k}" + (f" x{v}" if v > 1 else "")
                        for k, v in p["counts"]["helper"].items()
                        if k not in ("map_lookup_elem", "tail_call")
                    )
                )
            for key, label in (("lookup", "lookup"), ("lookup_miss", "lookup miss"), ("insert", "insert")):
                if p["counts"][key]:
                    what.append(
                        f"{label} "
                        + ", ".join(f"{k}" + (f" x{v}" if v > 1 else "") for k, v in p["counts"][key].items())
                    )
            if p["tail_calls"]:
                what.append("tail " + " -> ".join(f"{t['target'] or '?'} ({t['kind']})" for t in p["tail_calls"]))
            if p["continues"]:
                c = p["continues"]
                what.append(
                    "continues in "
                    + (", ".join(c["targets"]) if c["targets"] else "an unknown program")
                    + (f": {_span(c['ns'])} ns end to end" if c["ns"] else "")
                )
            if p["uncalibrated"]:
                what.append("no price for " + ", ".join(p["uncalibrated"]) + " (lower bound)")
            flag = "~" if not p["exact"] else " "
            ratio = "" if p["ratio_to_cheapest"] is None else f"{p['ratio_to_cheapest']:.1f}"
            out.append(
                f"  #{p['id']:<4} {p['verdict']:<9} {n:>7} {_span(p['ns']):>16}{flag}{ratio:>5}  "
                + "; ".join(w for w in what if w)
            )
        if s["worst_path"] is not None:
            out.append(
                f"  worst: path #{s['worst_path']}, {s['worst_ns']:.1f} ns"
                + (f", {100 * s['worst_tail_share']:.0f}% of it in tail calls" if s["worst_tail_share"] else "")
            )
        if s["saving_merge_ns"] or s["saving_const_ns"]:
            out.append(
                f"  per packet: merging the tail-called programs saves up to {s['saving_merge_ns']:.1f} ns"
                + (
                    f"; constant instead of variable indices up to {s['saving_const_ns']:.1f} ns"
                    if s["saving_const_ns"]
                    else ""
                )
            )
        for site in prog["sites"]:
            out.append(
                f"  tail-call site {site['program']}:{site['pc']}: {site['kind']} index in the kernel ({site['why']})"
            )
    if doc["graph"]["edges"]:
        out.append("\ntail-call graph:")
        for e in doc["graph"]["edges"]:
            idx = "?" if e["index"] is None else e["index"]
            out.append(f"  {e['from']} -> {e['to']}  {e['map']}[{idx}] {e['kind']} {e['source']}: {e['ns']:.1f} ns")
    return "\n".join(out) + "\n"
