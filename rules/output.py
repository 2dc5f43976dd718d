"""What `xdp2tc rules` prints: a `tc -batch` script or JSON (schema `xdp2tc.rules/1`).

JSON (one document per program; new fields may be added within a schema version):

    schema, file, program, dev, skip (skip_sw|skip_hw), assumptions [names],
    summary   {rules, proven, unproven, chains, software_paths,
               verdicts {VERDICT: {paths, offloaded, filters, software, reasons {label: n}}},
               lines [the same as sentences: "DROP paths 4: offloaded 2 (3 filters), software 2
               (map-dependent 1, IP options 1)"]}
    rules     [{chain, prio, protocol, keys [tc tokens], action [tc tokens], role:
                rule|shield|goto, paths [ids], lines ["file:line"], proven (bool|null for
                pass/goto filters), tc (the batch line)}]
    software  [{paths [ids], why, code, detail}]   paths no filter takes over, grouped by
              reason (code: rules/reasons.py REASONS); made from `fates`
    fates     [{path, verdict, offloaded, filters [indices into rules], code, detail,
               partly {code, detail} | null (offloaded only in part: why the rest stays),
               counterexample {kind: differs|witness, hex, length, fields, classes, takes_path,
               verdict, why, maps [{map, key (hex), value (hex) | null (absent)}]: the entries
               the frame's path looks up but stats-only maps', its verdict claimed with
               them; ctx {xdp_md field: value} and helpers [names]: the other inputs that
               path reads} | null
               (rules/counterexample.py; non-pass paths not taken whole),
               suggestion (an --assume NAME that makes the path offloadable) | null}]
              every path exactly once
    teardown  [tc -batch lines that delete the filters of this script (`rules --teardown`)]

The tc script says each path's fate once: `# paths ... - proven` comments above the filters
that take it, and one `# path N VERDICT ...` line per non-pass path the script does not take
whole (in software, or offloaded in part), both made from `fates`.
"""

from __future__ import annotations

from analyzer.classify import classes
from analyzer.exploration import Exploration
from analyzer.fields import decode

from .counterexample import examples
from .final import source_lines
from .flower import render
from .frametext import frame_inputs
from .reasons import account, summary, summary_lines
from .ruleset import RuleSet
from .synthesis import ASSUMPTIONS
from .tc import INGRESS_DEV, qdisc_line, teardown_lines

SCHEMA = "xdp2tc.rules/1"


def rules_json(e: Exploration, rs: RuleSet, dev: str, skip: str, explain: bool = True) -> dict:
    """The JSON document; its `tc` lines and `proven` labels are those of the proven
    printed script (final.py). `explain=False` leaves out the counterexamples and
    suggestions (their z3 queries cost more than the rules on big objects)."""
    block = rs.finish(dev, skip)
    lines = block[1::2]
    fates = account(e, rs, classes(e)[1])
    found = examples(rs, fates) if explain else {}
    counts = summary(fates)
    groups: dict = {}
    for f in fates:
        if not f.offloaded and f.reason.code != "pass-to-host":
            groups.setdefault(f.reason, []).append(f.path)
    return {
        "schema": SCHEMA,
        "file": str(e.obj.path),
        "program": e.program.name,
        "dev": dev,
        "skip": skip,
        "assumptions": list(rs.assumptions),
        "summary": {
            "rules": len(rs.rules),
            "proven": rs.proved,
            "unproven": rs.unproved,
            "chains": len({r.chain for r in rs.rules}),
            "software_paths": sorted(p for ps in groups.values() for p in ps),
            "verdicts": counts,
            "lines": summary_lines(counts),
        },
        "rules": [
            {
                "chain": r.chain,
                "prio": r.prio,
                "protocol": r.match.protocol,
                "keys": render(r.match),
                "action": [dev if t == INGRESS_DEV else t for t in r.action],  # XDP_TX: its own device
                "role": r.role,
                "paths": r.paths,
                "lines": source_lines(e, r.paths, rs.lines),
                "proven": r.proved,
                "tc": line,
            }
            for r, line in zip(rs.rules, lines)
        ],
        "software": [
            {"paths": ps, "why": str(why), "code": why.code, "detail": why.detail} for why, ps in groups.items()
        ],
        "fates": [
            {
                "path": f.path,
                "verdict": f.verdict,
                "offloaded": f.offloaded,
                "filters": f.filters,
                "code": f.reason.code if f.reason else None,
                "detail": f.reason.detail if f.reason else None,
                "partly": {"code": f.partly.code, "detail": f.partly.detail} if f.partly else None,
                "counterexample": found[f.path].json() if f.path in found else None,
                "suggestion": found[f.path].suggestion if f.path in found else None,
            }
            for f in fates
        ],
        "teardown": teardown_lines(rs.rules, dev),
    }


def fate_line(f: dict, condition: str) -> str | None:
    """The script's one line on a path's fate (`f`: a JSON fate), None when the filter
    comments say it all (offloaded whole) or it passes to the host."""
    if f["offloaded"]:
        if not f["partly"]:
            return None
        return (
            f"# path {f['path']} {f['verdict']} offloaded in part (the filters whose `# paths` name it); "
            f"its other packets stay in software ({f['partly']['code']}: {f['partly']['detail']})"
        )
    if f["code"] == "pass-to-host":
        return None
    when = f" when {condition}" if condition else ""
    return f"# path {f['path']} {f['verdict']} stays in software ({f['code']}: {f['detail']}){when}"


def example_lines(f: dict) -> list[str]:
    """A JSON fate's counterexample (hex, decoded) and suggestion as script comments."""
    ex = f["counterexample"]
    if ex is None:
        return []
    n = f["path"]
    out = [
        f"# path {n} {ex['kind']} packet ({ex['length']} bytes): {ex['hex']}",
        f"# path {n} {ex['kind']} packet: {ex['fields']}: {ex['why']}",
    ]
    out += [f"# path {n} {ex['kind']} packet {text}" for text in frame_inputs(ex)]
    if f["suggestion"]:
        out.append(f"# path {n} offloadable with --assume {f['suggestion']}")
    return out


def teardown_script(e: Exploration, rs: RuleSet, dev: str, skip: str) -> str:
    """The tc -batch script that deletes what tc_script adds (its filters, by chain and
    prio); the clsact qdisc stays (other tools may hang filters off it)."""
    doc = rules_json(e, rs, dev, skip)
    out = [
        f"# xdp2tc teardown for {e.obj.path} program {e.program.name}: deletes the "
        f"{doc['summary']['rules']} filters of its rules script",
        "# usage: tc -batch THIS_FILE (the clsact qdisc stays: tc qdisc del dev "
        f"{dev} clsact removes it with every filter on it)",
    ]
    out = [" ".join(c.split()) for c in out]
    return "\n".join(out + doc["teardown"]) + "\n"


def tc_script(e: Exploration, rs: RuleSet, dev: str, skip: str, explain: bool = True) -> str:
    """The tc -batch script: header comments, the qdisc (`qdisc replace ... clsact`: runs
    again without error, and the filters go to clsact's ingress hook), then the proven
    filter block."""
    block = rs.finish(dev, skip)
    doc = rules_json(e, rs, dev, skip, explain)
    s = doc["summary"]
    out = [
        f"# xdp2tc rules for {e.obj.path} program {e.program.name}: {s['rules']} filters, "
        f"{s['proven']} proven (z3, on this script as printed), {s['unproven']} unproven left out",
        "# usage: tc -batch THIS_FILE",
    ]
    out += [f"# {line}" for line in s["lines"]]
    for a in rs.assumptions:
        out.append(f"# ASSUMED: {ASSUMPTIONS[a]} (--assume {a})")
    out.append(f"# packets up to {e.options.max_len} bytes (--max-len)")
    for f in doc["fates"]:
        path = e.paths[f["path"]]  # a path a time budget cut: its detail says where (no `when`)
        software = not f["offloaded"] and f["code"] != "pass-to-host" and not e.cut_by_budget(path)
        line = fate_line(f, decode(e, path) if software else "")
        if line:
            out += [line] + example_lines(f)
    # a comment is one line whatever its text holds (a decoded condition, a file name):
    # a line break inside one would hand tc -batch the rest as a command
    out = [" ".join(c.split()) for c in out]
    out.append(qdisc_line(dev))
    out += block
    return "\n".join(out) + "\n"
