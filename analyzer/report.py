"""What `xdp2tc analyze` prints: the exploration as text or as JSON.

JSON schema `xdp2tc.analyze/1` (one document per program; fields are stable within a
schema version, new fields may be added):

    schema, file, program, section, attach
    options      {max_len, loop_bound, max_insns, max_paths, merge (false with --no-merge),
                  timeout, path_timeout}
    budget       null, or with --timeout/--path-timeout {timeout, path_timeout, ran_out,
                  functions_explored, functions_not_reached ["program:function"],
                  cut [{path, where}], limit (what ran out when not the time: the angr
                  engine's state/memory budgets, else null),
                  report_cut (what the report left out because the budget ran out after the
                  exploration, null when nothing: {maps_not_proved [names]: their map-use
                  proofs were stopped, so they are neither preserved nor fateless (their
                  `why` says so); paths_not_decoded [ids]: `fields` is fields.NOT_DECODED;
                  conditions_not_printed [ids]: `condition` is null})}: a partial report
                  when ran_out or report_cut (exit code 0 all the same: a partial report is
                  a report)
    summary      {paths, verdicts: {VERDICT: n}, truncated, unsupported, branches,
                  classes: {CLASS: n}, insns_executed, seconds, programs: [entry, tail-called...],
                  engine: "angr" (only with --engine angr; see angr_analysis_json)}
    maps         [{name, type, class: control-plane|data-plane|stats-only|unused,
                   read, written, why (for a written map a decision reads: what z3 proved,
                   or what stopped the proof; else null)}]
    branches     [{section, pc, function, program, file, line, kind: jump|verdict|helper|
                   tail_call|callback, class, detail: [names], direction: taken|not-taken|null,
                   visits, both_ways}]
    paths        [{id, verdict, retval (int|null), redirect ({ifindex}|{map, key}|null),
                   insns {min, max}, effects [{kind, target, section, pc, line}],
                   tail_calls [{caller, map, index, target, pc}], rewrites [offsets in the output packet],
                   notes [...], truncated (reason|null), programs [...],
                   lines ["file:line" of branches decided on the path],
                   summarised [{name, made_at}: long computations (hashes, checksums) kept
                   as any value, which the path's decisions read],
                   condition (SMT-LIB 2 over the inputs of analyzer/symbolic.py; null when
                   the time budget ran out before it was printed),
                   fields (the condition in header fields, fields.py: `ipv4.saddr == 10.0.0.1
                   ∧ tcp.dport != 22`; for people, not for parsing)}]
"""

from __future__ import annotations

import time
from collections import Counter

import z3

from .classify import CLASSES, BranchClass, classes, classify_sites, map_classes
from .exploration import UNKNOWN, Exploration, Path
from .fields import NOT_DECODED, Decoder, decode_deadline
from .mapuse import MapUse, map_uses
from .symbolic import Z3_C, const_value

_AST_KIND, _AST_ID, _NUM_ARGS, _ARG = Z3_C.ast_kind, Z3_C.ast_id, Z3_C.num_args, Z3_C.arg
_DECL, _DECL_KIND, _NUMERAL = Z3_C.decl, Z3_C.decl_kind, Z3_C.numeral

SCHEMA = "xdp2tc.analyze/1"


def insn_range(steps, memo: dict | None = None) -> tuple[int, int]:
    """(min, max) instructions over the sub-paths of a (merged) path: `steps` is an int or
    sums of if-then-else trees over ints. `memo` may be shared by the paths of one
    exploration (their trees share nodes: hundreds of merged paths cost one walk)."""
    if isinstance(steps, int):
        return steps, steps
    values = _values(steps, memo)
    return (min(values), max(values)) if values else (0, 0)


def _values(e: z3.ExprRef, memo: dict | None = None, limit: int = 256) -> set[int]:
    """Possible values of a sum of if-then-else trees over constants (memoised per node by
    AST id; past `limit` values only the extremes are kept, so min/max stay exact). Walked
    through z3's C API (symbolic.Z3_C), children before parents."""
    memo = {} if memo is None else memo
    key = e.get_id()
    if key in memo:
        return memo[key]
    ctx, root = Z3_C.handles(e)
    stack: list = [(root, None)]
    while stack:
        a, kids = stack.pop()
        if kids is not None:  # its children are done
            op, ids = kids
            if op == z3.Z3_OP_ITE:
                out = memo[ids[1]] | memo[ids[2]]
            else:  # a sum
                out = {0}
                for i in ids:
                    out = {(x + y) % (1 << 64) for x in out for y in memo[i]}
                    if len(out) > limit:
                        out = {min(out), max(out)}
            memo[_AST_ID(ctx, a)] = {min(out), max(out)} if len(out) > limit else out
            continue
        aid = _AST_ID(ctx, a)
        if aid in memo:
            continue
        kind = _AST_KIND(ctx, a)
        if kind == z3.Z3_NUMERAL_AST:
            memo[aid] = {int(_NUMERAL(ctx, a))}
            continue
        op = _DECL_KIND(ctx, _DECL(ctx, a)) if kind == z3.Z3_APP_AST else None
        if op not in (z3.Z3_OP_ITE, z3.Z3_OP_BADD):
            memo[aid] = set()
            continue
        args = [_ARG(ctx, a, i) for i in range(_NUM_ARGS(ctx, a))]
        ids = [_AST_ID(ctx, c) for c in args]
        stack.append((a, (op, ids)))
        stack.extend((c, None) for c, cid in zip(args, ids) if cid not in memo)
    return memo[key]


def _line(e: Exploration, section: str, pc: int) -> str | None:
    li = e.obj.line_at(section, pc)
    return f"{li.file_name}:{li.line}" if li else None


def _redirect(path: Path):
    if path.redirect is None or path.verdict != "REDIRECT":
        return None
    if path.redirect[0] == "ifindex":
        return {"ifindex": const_value(path.redirect[1])}
    return {"map": path.redirect[1], "key": const_value(path.redirect[2])}


def path_json(
    e: Exploration, path: Path, condition: bool = True, decoder: Decoder | None = None, deadline: float | None = None
) -> dict:
    """One path's document. Past `deadline` (a time.perf_counter() value: the command's time
    budget) its condition is neither printed (`condition` null) nor decoded (NOT_DECODED)."""
    late = deadline is not None and time.perf_counter() >= deadline
    lo, hi = insn_range(path.steps, e.step_values)
    doc = {
        "id": path.id,
        "verdict": path.verdict,
        "retval": None if path.retval is None else const_value(z3.Extract(31, 0, path.retval)),
        "redirect": _redirect(path),
        "insns": {"min": lo, "max": hi},
        "effects": [
            {"kind": x.kind, "target": x.target, "section": x.section, "pc": x.pc, "line": _line(e, x.section, x.pc)}
            for x in path.effects
        ],
        "tail_calls": [
            {"caller": t.caller, "map": t.map, "index": t.index, "target": t.target, "pc": t.pc}
            for t in path.tail_calls
        ],
        "rewrites": sorted({v for v in (const_value(w - path.head) for w in path.writes) if v is not None}),
        "notes": list(path.notes),
        "truncated": path.truncated,
        "programs": list(path.programs),
        "lines": sorted({ln for ln in (_line(e, s, pc) for s, pc in path.sites) if ln}),
        "summarised": [{"name": n, "made_at": e.summaries[n][1]} for n in e.summarised(path)],
    }
    if condition:
        doc["condition"] = None if late else e.condition(path).sexpr()
    # a path a time budget cut has no decoded fields: its `truncated` says where it stopped
    if e.cut_by_budget(path):
        doc["fields"] = None
    elif late or (deadline is not None and time.perf_counter() >= deadline):
        doc["fields"] = NOT_DECODED
    else:
        doc["fields"] = (decoder or Decoder(e.environment(), deadline, e.summaries)).render(e.condition(path))
    return doc


def analysis_json(e: Exploration, conditions: bool = True) -> dict:
    """The `analyze --json` document of exploration `e` (schema above). Its every phase keeps
    the command's time budget (fields.decode_deadline): map-use proofs (mapuse.py), decoding,
    printing conditions; what the budget left out is listed in `budget.report_cut`."""
    branches, maps = classes(e)
    uses = map_uses(e)
    deadline = decode_deadline(e)
    decoder = Decoder(e.environment(), deadline, e.summaries)
    paths = [path_json(e, p, conditions, decoder, deadline) for p in e.paths]
    return {
        "schema": SCHEMA,
        "file": e.obj.path,
        "program": e.program.name,
        "section": e.program.section,
        "attach": e.program.attach,
        "options": {
            "max_len": e.options.max_len,
            "loop_bound": e.options.loop_bound,
            "max_insns": e.options.max_insns,
            "max_paths": e.options.max_paths,
            "merge": e.options.merge,
            "timeout": e.options.timeout,
            "path_timeout": e.options.path_timeout,
        },
        "summary": _summary(e, branches),
        "budget": None if e.budget is None else budget_json(e, report_cut(uses, paths)),
        "maps": [_map_json(e, m, maps[m.name], uses.get(m.name)) for m in e.obj.maps],
        "branches": [_branch_json(b) for b in branches],
        "paths": paths,
    }


def report_cut(uses: dict[str, MapUse], paths: list[dict]) -> dict | None:
    """What the report left out because the time budget ran out (None: nothing): maps whose
    proofs it stopped, paths not decoded, conditions not printed (see the schema)."""
    cut = {
        "maps_not_proved": sorted(n for n, u in uses.items() if u.cut),
        "paths_not_decoded": [p["id"] for p in paths if p["fields"] == NOT_DECODED],
        "conditions_not_printed": [p["id"] for p in paths if "condition" in p and p["condition"] is None],
    }
    return cut if any(cut.values()) else None


def budget_json(e: Exploration, cut: dict | None = None) -> dict:
    """What the time budget left out: a partial report when `ran_out` (the cut paths are
    UNKNOWN, each with the instruction and source line it was cut at) or when the report
    itself was cut (`cut`: report_cut's)."""
    b = e.budget
    return {
        "timeout": b.timeout,
        "path_timeout": b.path_timeout,
        "ran_out": b.ran_out,
        "functions_explored": b.functions_explored,
        "functions_not_reached": b.functions_not_reached,
        "cut": [{"path": i, "where": e.paths[i].truncated} for i in b.cut],
        "limit": b.limit,
        "report_cut": cut,
    }


def _summary(e, branches: list[BranchClass]) -> dict:
    """The summary of an exploration by either engine (same attribute names)."""
    verdicts = Counter(p.verdict for p in e.paths)
    return {
        "paths": len(e.paths),
        "verdicts": dict(sorted(verdicts.items())),
        "truncated": sum(1 for p in e.paths if p.truncated),
        "unsupported": sum(1 for p in e.paths if p.notes or p.verdict == UNKNOWN),
        "branches": len(branches),
        "classes": {c: n for c in CLASSES if (n := sum(1 for b in branches if b.cls == c))},
        "insns_executed": e.insns_executed,
        "seconds": round(e.seconds, 3),
        "programs": e.programs,
    }


def _map_json(e: Exploration, m, cls: str, use: MapUse | None) -> dict:
    why = None
    if use is not None and use.decided:
        why = (
            "z3: the program's writes never change a decision on it"
            if use.preserved
            else "z3: no verdict, output or redirect depends on it"
            if use.fateless
            else use.why
        )
    return {
        "name": m.name,
        "type": m.type.name if m.type else None,
        "class": cls,
        "read": m.name in e.read_maps,
        "written": m.name in e.written_maps,
        "why": why,
    }


def _branch_json(b: BranchClass) -> dict:
    s = b.site
    return {
        "section": s.section,
        "pc": s.pc,
        "function": s.function,
        "program": s.program,
        "file": b.file,
        "line": b.line,
        "kind": s.kind,
        "class": b.cls,
        "detail": b.detail,
        "direction": None if b.direction is None else ("taken" if b.direction else "not-taken"),
        "visits": s.visits,
        "both_ways": s.both,
    }


def analysis_text(e: Exploration) -> str:
    return render_text(analysis_json(e, conditions=False))


def angr_analysis_json(a, conditions: bool = True) -> dict:
    """The same document for an exploration by the angr engine (analyzer/angr_engine.py):
    `summary.engine` is "angr", map classes come without the z3 proofs of mapuse.py (`why`
    is null), and a path's `condition` is claripy's printing of its constraints."""
    branches = classify_sites(a.obj, a.sites, {})
    maps = map_classes(a, branches, uses={})

    def concrete(x):
        return None if x is None or x.symbolic else x.concrete_value

    def path_doc(p) -> dict:
        redirect = None
        if p.redirect is not None and p.verdict == "REDIRECT":
            redirect = (
                {"ifindex": concrete(p.redirect[1])}
                if p.redirect[0] == "ifindex"
                else {"map": p.redirect[1], "key": concrete(p.redirect[2])}
            )
        doc = {
            "id": p.id,
            "verdict": p.verdict,
            "retval": None if p.retval is None else concrete(p.retval[31:0]),
            "redirect": redirect,
            "insns": {"min": p.min_steps, "max": p.steps},
            "effects": [
                {"kind": k, "target": t, "section": s, "pc": pc, "line": _line(a, s, pc)} for k, t, pc, s in p.effects
            ],
            "tail_calls": [
                {"caller": c, "map": m, "index": i, "target": t, "pc": pc} for c, m, i, t, pc in p.tail_calls
            ],
            "rewrites": sorted({v for v in (concrete(w) for w in p.writes) if v is not None}),
            "notes": list(p.notes),
            "truncated": p.truncated,
            "programs": list(p.programs),
            "lines": sorted({ln for ln in (_line(a, s, pc) for s, pc in p.sites) if ln}),
            "summarised": [],  # the angr engine summarises nothing (its deep values become unknowns)
        }
        if conditions:
            doc["condition"] = " && ".join(str(c) for c in p.state.solver.constraints) or "true"
        doc["fields"] = None  # header fields are decoded from z3 terms (fields.py), not claripy's
        return doc

    return {
        "schema": SCHEMA,
        "file": a.obj.path,
        "program": a.program.name,
        "section": a.program.section,
        "attach": a.program.attach,
        "options": {
            "max_len": a.options.max_len,
            "loop_bound": a.options.loop_bound,
            "max_insns": a.options.max_insns,
            "max_paths": a.options.max_paths,
            "merge": a.options.merge,
            "timeout": a.options.timeout,
            "path_timeout": a.options.path_timeout,
        },
        "summary": {"engine": "angr", **_summary(a, branches)},
        "budget": None if a.budget is None else budget_json(a),
        "maps": [_map_json(a, m, maps[m.name], None) for m in a.obj.maps],
        "branches": [_branch_json(b) for b in branches],
        "paths": [path_doc(p) for p in a.paths],
    }


def counted(n: int, noun: str) -> str:
    """`n` and the noun, plural unless n is 1 ("1 path", "3 paths")."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def render_text(doc: dict) -> str:
    """The text report of an analysis document (either engine)."""
    s = doc["summary"]
    engine = f" [engine {s['engine']}]" if "engine" in s else ""
    out = [
        f"{doc['file']}: program {doc['program']} ({doc['section']}, {doc['attach']}){engine}",
        f"  {counted(s['paths'], 'path')} ({', '.join(f'{k} {v}' for k, v in s['verdicts'].items())}), "
        f"{s['branches']} decisions, {s['insns_executed']} instructions explored in {s['seconds']} s"
        + (f", {s['truncated']} truncated" if s["truncated"] else ""),
    ]
    if len(s["programs"]) > 1:
        out.append(f"  tail calls reach: {', '.join(s['programs'][1:])}")
    b = doc.get("budget")
    if b and (b["ran_out"] or b["cut"]):
        if b.get("limit"):
            limit = b["limit"]
        else:
            limit = "the time budget (" + (
                f"{b['timeout']:g} s)" if b["ran_out"] else f"{b['path_timeout']:g} s per path)"
            )
        out.append(f"  PARTIAL: {limit} ran out; {counted(len(b['cut']), 'path')} cut (UNKNOWN, never offloaded)")
        out.append(f"    functions explored: {', '.join(b['functions_explored']) or 'none'}")
        if b["functions_not_reached"]:
            out.append(f"    functions not reached: {', '.join(b['functions_not_reached'])}")
    if b and b.get("report_cut"):
        r, left = b["report_cut"], []
        if r["maps_not_proved"]:
            left.append(f"map proofs of {', '.join(r['maps_not_proved'])} (not proved: not control-plane)")
        if r["paths_not_decoded"]:
            left.append(f"fields of {counted(len(r['paths_not_decoded']), 'path')}")
        if r["conditions_not_printed"]:
            left.append(f"conditions of {counted(len(r['conditions_not_printed']), 'path')}")
        out.append(f"  PARTIAL: the time budget ran out in the report; not done: {'; '.join(left)}")
    if doc["maps"]:
        out.append("\nmaps:")
        for m in doc["maps"]:
            why = f"  ({m['why']})" if m["why"] else ""
            out.append(f"  {m['name']:<24} {m['type'] or '?':<16} {m['class']}{why}")
    out.append("\ndecisions:")
    for b in doc["branches"]:
        where = f"{b['file']}:{b['line']}" if b["file"] else f"{b['section']}:{b['pc']}"
        detail = f" ({', '.join(b['detail'])})" if b["detail"] else ""
        way = f", always {b['direction']}" if b["direction"] else ""
        kind = "" if b["kind"] == "jump" else f" [{b['kind']}]"
        out.append(f"  {where:<44} pc {b['pc']:<5} {b['class']}{detail}{way}{kind}")
    out.append("\npaths:")
    for p in doc["paths"]:
        insns = p["insns"]
        n = str(insns["min"]) if insns["min"] == insns["max"] else f"{insns['min']}-{insns['max']}"
        extra = []
        if p["redirect"]:
            extra.append("to " + ", ".join(f"{k} {v}" for k, v in p["redirect"].items()))
        if p["effects"]:
            extra.append("effects: " + ", ".join(sorted({f"{x['kind']} {x['target']}" for x in p["effects"]})))
        if p["rewrites"]:
            extra.append(f"rewrites bytes {p['rewrites'][:8]}{'...' if len(p['rewrites']) > 8 else ''}")
        if p["tail_calls"]:
            extra.append("tail calls: " + " -> ".join(t["target"] or "?" for t in p["tail_calls"]))
        out.append(f"  #{p['id']:<3} {p['verdict']:<9} {n:>7} insns  {'; '.join(extra)}")
        if p["fields"] is not None:  # the angr engine's paths carry no decoded fields
            out.append(f"        when {p['fields']}")
        for why in ([p["truncated"]] if p["truncated"] else []) + p["notes"]:
            out.append(f"        ! {why}")
        for m in p.get("summarised", ()):
            out.append(f"        ~ decides on {m['name']}, a long computation made at {m['made_at']} (any value)")
    return "\n".join(out) + "\n"
