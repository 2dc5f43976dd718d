"""The offload report (issue 11): scripts that run (one idempotent qdisc line, the teardown
script, the rule budget spent on whole verdicts), every path accounted for exactly once,
counterexample packets read back by an independent pcap reader, and suggestions checked by
running the suggested option.

Scripts are judged by the real iproute2 `tc` (in a network namespace) and by the independent
tc model tests/oracles/tcflower.py, never by the emitter's own parser.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid

import pytest
from conftest import require

import corpus
from offload.cli import main
from rules.tc import check_syntax
from tests.oracles import tcflower


def _obj(stem: str) -> str:
    path = corpus.BUILD_DIR / "clang" / f"{stem}.o"
    require(path.exists(), f"{path} is not built (run `make corpus`)")
    return str(path)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _rules_json(capsys, stem: str, *extra: str) -> dict:
    code, out, err = _run(capsys, "rules", _obj(stem), "--dev", "eth0", "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def _require_netns() -> tuple[str, str]:
    tc, ip = shutil.which("tc"), shutil.which("ip")
    require(bool(tc and ip), "needs iproute2's tc and ip")
    require(os.geteuid() == 0, "needs root for a network namespace")
    return tc, ip


# --- scripts that run ---------------------------------------------------------------------------


def test_qdisc_line_runs_twice_and_teardown_is_accepted_by_tc(capsys):
    """The script's one qdisc line, run by the real tc twice on one device, succeeds both
    times (clsact is created, then left); every teardown line passes tc's parser and names
    exactly the (chain, prio) pairs of the printed filters (read by the tc oracle)."""
    tc, ip = _require_netns()
    code, script, _ = _run(capsys, "rules", _obj("thesis_static_rules"), "--dev", "xt0")
    assert code == 0
    qdiscs = [ln for ln in script.splitlines() if ln.startswith("qdisc ")]
    assert qdiscs == ["qdisc replace dev xt0 clsact"]
    ns = f"xdp2tc-report-{uuid.uuid4().hex[:8]}"
    subprocess.run([ip, "netns", "add", ns], check=True)
    try:
        subprocess.run([ip, "-n", ns, "link", "add", "xt0", "type", "veth", "peer", "name", "xt1"], check=True)
        for _ in range(2):
            run = subprocess.run([tc, "-n", ns, "-batch", "-"], input=qdiscs[0] + "\n", capture_output=True, text=True)
            assert run.returncode == 0, run.stderr
        shown = subprocess.run([tc, "-n", ns, "qdisc", "show", "dev", "xt0"], capture_output=True, text=True).stdout
        assert "qdisc clsact" in shown
    finally:
        subprocess.run([ip, "netns", "delete", ns], capture_output=True)
    code, teardown, _ = _run(capsys, "rules", _obj("thesis_static_rules"), "--dev", "xt0", "--teardown")
    assert code == 0
    lines = [ln for ln in teardown.splitlines() if ln and not ln.startswith("#")]
    assert lines and all(ln.startswith("filter del dev xt0 ingress prio ") for ln in lines)
    assert all(r.accepted for r in check_syntax(lines)), [r.message for r in check_syntax(lines)]
    deleted = set()
    for ln in lines:
        w = ln.split()
        deleted.add((int(w[w.index("chain") + 1]) if "chain" in w else 0, int(w[w.index("prio") + 1])))
    assert deleted == {(x.chain, x.prio) for x in tcflower.parse(script)}


def test_teardown_refuses_json(capsys):
    code, out, err = _run(capsys, "rules", _obj("thesis_static_rules"), "--dev", "eth0", "--teardown", "-f", "json")
    assert code == 2 and out == "" and err.count("\n") == 1


@pytest.mark.parametrize("budget", [10, 15, 16])
def test_budget_keeps_whole_chains(capsys, budget):
    """or_flags_tcp_k4 under no-ip-options is one DROP laid out as 4 chains of 4 filters
    (16, counted by hand from its 4x4 values): a budget below 16 prints no filter at all
    (never a chain that ends in nothing) and says so per path; 16 prints all of it."""
    doc = _rules_json(capsys, "or_flags_tcp_k4", "--assume", "no-ip-options", "--max-rules", str(budget))
    lines = tcflower.parse("\n".join(r["tc"] for r in doc["rules"]))
    drops = [f for f in doc["fates"] if f["verdict"] == "DROP"]
    assert len(drops) == 2
    if budget < 16:
        assert lines == []
        assert all(not f["offloaded"] and f["code"] == "rule-budget" for f in drops)
        assert all(f"--max-rules {budget}: this drop needs 16 filters" in f["detail"] for f in drops)
    else:
        assert len(lines) == 16 and all(f["offloaded"] for f in drops)
        chains = {x.chain for x in lines}
        targets = {int(x.action[2]) for x in lines if x.action[0] == "goto"}
        assert targets == chains - {0} and any(x.action == ["drop"] for x in lines)


def test_budget_spends_on_the_verdict_that_fits(capsys):
    """thesis_static_rules: two DROP blocks of 2 filters each (shield + drop). With room for
    one, one is printed whole and the other's path is named under rule-budget."""
    doc = _rules_json(capsys, "thesis_static_rules", "--max-rules", "3")
    lines = tcflower.parse("\n".join(r["tc"] for r in doc["rules"]))
    assert len(lines) == 2 and [x.action for x in lines] == [["pass"], ["drop"]]
    budget = [f for f in doc["fates"] if f["code"] == "rule-budget"]
    assert len(budget) == 1 and budget[0]["verdict"] == "DROP"
    assert sum(f["offloaded"] for f in doc["fates"]) == 1
