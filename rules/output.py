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
    software  [{paths [ids], why, code, detail}]   paths no filter takes over, and why
              (code: rules/reasons.py REASONS)
    fates     [{path, verdict, offloaded, filters [indices into rules], code, detail}]
              every path exactly once
"""

from __future__ import annotations

from analyzer.classify import classes
from analyzer.exploration import Exploration
from analyzer.fields import Decoder

from .final import source_lines
from .flower import render
from .reasons import account, summary, summary_lines
from .ruleset import RuleSet
from .synthesis import ASSUMPTIONS
from .tc import qdisc_line

SCHEMA = "xdp2tc.rules/1"


def rules_json(e: Exploration, rs: RuleSet, dev: str, skip: str) -> dict:
    """The JSON document; its `tc` lines and `proven` labels are those of the proven
    printed script (final.py)."""
    block = rs.finish(dev, skip)
    lines = block[1::2]
    fates = account(e, rs, classes(e)[1])
    counts = summary(fates)
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
            "software_paths": sorted({p for ps, _ in rs.software for p in ps}),
            "verdicts": counts,
            "lines": summary_lines(counts),
        },
        "rules": [
            {
                "chain": r.chain,
                "prio": r.prio,
                "protocol": r.match.protocol,
                "keys": render(r.match),
                "action": list(r.action),
                "role": r.role,
                "paths": r.paths,
                "lines": source_lines(e, r.paths),
                "proven": r.proved,
                "tc": line,
            }
            for r, line in zip(rs.rules, lines)
        ],
        "software": [{"paths": ps, "why": str(why), "code": why.code, "detail": why.detail} for ps, why in rs.software],
        "fates": [
            {
                "path": f.path,
                "verdict": f.verdict,
                "offloaded": f.offloaded,
                "filters": f.filters,
                "code": f.reason.code if f.reason else None,
                "detail": f.reason.detail if f.reason else None,
            }
            for f in fates
        ],
    }


def tc_script(e: Exploration, rs: RuleSet, dev: str, skip: str) -> str:
    """The tc -batch script: header comments, the qdisc, then the proven filter block."""
    block = rs.finish(dev, skip)
    doc = rules_json(e, rs, dev, skip)
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
    for ps, why in rs.software:
        out.append(f"# software: paths {','.join(map(str, ps))}: {why}")
    decoder = Decoder(e.environment())
    for f in doc["fates"]:
        if not f["offloaded"] and f["code"] != "pass-to-host":
            path = e.paths[f["path"]]
            out.append(
                f"# path {f['path']} {f['verdict']} stays in software ({f['code']}: {f['detail']}) "
                f"when {decoder.render(e.condition(path))}"
            )
    # a comment is one line whatever its text holds (a decoded condition, a file name):
    # a line break inside one would hand tc -batch the rest as a command
    out = [" ".join(c.split()) for c in out]
    out.append(qdisc_line(dev))
    out += block
    return "\n".join(out) + "\n"
