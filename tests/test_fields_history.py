"""The decoded text of a condition (fields.Decoder.render: `when ...` in `rules`, `fields` in
`analyze --json`) is a function of the condition, not of the terms the process made before.

z3 numbers terms (AST ids) in the order a process creates them, and its simplifier orders the
arguments of and/or/+ by id: simplified in the process's context, the same condition printed
its disjuncts in another order, and the decoder's bounded questions (which header is where)
came in another order and proved other layouts (seen on vlan_tags: `vlan.proto != 802.1ad`
in one tree, `¬(pkt[16:17] == 0x88 ∧ pkt[17:18] == 0xa8)` in another, only because other code
made its terms in another order). Here the conditions of corpus paths are written as SMT-LIB
text and rendered in fresh processes, one of them after making thousands of unrelated terms
and parsing the conditions in reverse order: the texts must be equal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import z3
from conftest import corpus_object

from analyzer.explore import explore
from lifter.program import load_object

ROOT = Path(__file__).resolve().parent.parent
#: vlan_tags, qinq_tags and ipv6_filter: each had a path whose text changed with the history
OBJECTS = ("vlan_tags", "qinq_tags", "ipv6_filter")

#: Renders every condition of a dump; argv: dump file, junk terms to make first (0: none;
#: otherwise the conditions are also parsed in reverse order), and optionally the index of
#: the one condition to render (the others are parsed, not rendered). Prints one JSON
#: document: the texts, and the AST id of the first condition (to show that the ids differ).
WORKER = r"""
import json, random, sys
import z3
from analyzer.fields import Decoder
from analyzer.symbolic import PACKET, PACKET_LEN

docs = json.load(open(sys.argv[1]))
junk = int(sys.argv[2])
keep = []
rnd = random.Random(7)
for _ in range(junk):
    o, v = rnd.randrange(80), rnd.randrange(256)
    b = PACKET[z3.BitVecVal(o, 64)]
    keep.append(z3.Not(z3.And(b == v, PACKET[z3.BitVecVal(rnd.randrange(80), 64)] == v)))
    keep.append(z3.Or(z3.Concat(b, PACKET[z3.BitVecVal(o + 1, 64)]) == v, z3.UGE(PACKET_LEN, v)))
order = list(reversed(range(len(docs)))) if junk else list(range(len(docs)))
parsed = {i: list(z3.parse_smt2_string(docs[i]["smt2"])) for i in order}
texts = []
only = int(sys.argv[3]) if len(sys.argv) > 3 else None
for i, d in enumerate(docs):
    fs = parsed[i]
    if only is None or i == only:
        texts.append(Decoder(fs[: d["n_env"]]).render(fs[d["n_env"]]))
print(json.dumps({"texts": texts, "first_id": parsed[0][docs[0]["n_env"]].get_id()}))
"""


def _render(dump: Path, junk: int, only: int | None = None) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(dump), str(junk), *([] if only is None else [str(only)])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def _dump(tmp_path: Path, objects) -> tuple[Path, list[dict]]:
    docs = []
    for name in objects:
        obj = load_object(corpus_object(name))
        e = explore(obj, obj.programs[0])
        env = e.environment()
        for p in e.paths:
            s = z3.Solver()
            s.add(*env)
            s.add(e.condition(p))
            docs.append({"path": f"{name} {p.id}", "n_env": len(env), "smt2": s.sexpr()})
    dump = tmp_path / "conditions.json"
    dump.write_text(json.dumps(docs))
    return dump, docs


def test_rendering_does_not_depend_on_term_history(tmp_path):
    dump, docs = _dump(tmp_path, OBJECTS)
    plain, shuffled = _render(dump, 0), _render(dump, 20_000)
    assert plain["first_id"] != shuffled["first_id"], "the histories must give the terms other ids"
    differ = [(d["path"], a, b) for d, a, b in zip(docs, plain["texts"], shuffled["texts"], strict=True) if a != b]
    assert not differ, differ
    # the decoder did name headers (the texts are not all byte offsets)
    assert any("vlan.proto" in t for t in plain["texts"]) and any("ipv6." in t for t in plain["texts"])


def test_rendering_does_not_depend_on_the_renderings_before(tmp_path):
    # vlan_tags' path 1 rendered alone named other fields than after path 0: z3's models of
    # the same query, each in a fresh context, differed (it iterates some tables in the
    # order of memory addresses), and models answer questions for free, so the question
    # budget ended elsewhere. Each condition alone in a fresh process must read as in a run
    # that rendered the others before it.
    dump, docs = _dump(tmp_path, ("vlan_tags",))
    together = _render(dump, 0)["texts"]
    alone = [_render(dump, 0, i)["texts"][0] for i in range(len(docs))]
    differ = [(d["path"], a, b) for d, a, b in zip(docs, together, alone, strict=True) if a != b]
    assert not differ, differ
