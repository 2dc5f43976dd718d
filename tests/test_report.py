"""The offload report (issue 11): scripts that run (one idempotent qdisc line, the teardown
script, the rule budget spent on whole verdicts), every path accounted for exactly once,
counterexample packets read back by an independent pcap reader, and suggestions checked by
running the suggested option.

Scripts are judged by the real iproute2 `tc` (in a network namespace) and by the independent
tc model tests/oracles/tcflower.py, never by the emitter's own parser.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import uuid

import pytest
from conftest import corpus_object, require, run_cli

from offload.cli import main
from rules.tc import check_syntax
from tests.oracles import tcflower


def _rules_json(capsys, stem: str, *extra: str) -> dict:
    code, out, err = run_cli(capsys, "rules", corpus_object(stem), "--dev", "eth0", "--format", "json", *extra)
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
    code, script, _ = run_cli(capsys, "rules", corpus_object("thesis_static_rules"), "--dev", "xt0")
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
    code, teardown, _ = run_cli(capsys, "rules", corpus_object("thesis_static_rules"), "--dev", "xt0", "--teardown")
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
    code, out, err = run_cli(
        capsys, "rules", corpus_object("thesis_static_rules"), "--dev", "eth0", "--teardown", "-f", "json"
    )
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


# --- counterexamples, --pcap-out, suggestions ----------------------------------------------------


@pytest.fixture(scope="module")
def ipv6_run(tmp_path_factory):
    """rules on ipv6_filter (its two DROP paths read the L4 header right after a fixed
    40-byte IPv6 header, flower walks extension headers): JSON and a --pcap-out file."""
    pcap = tmp_path_factory.mktemp("report") / "ipv6.pcap"
    argv = ["rules", corpus_object("ipv6_filter"), "--dev", "eth0", "--format", "json", "--pcap-out", str(pcap)]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue()), pcap


def test_ipv6_drops_suggest_no_ipv6_ext(ipv6_run, capsys):
    """Both drops (ipv6_filter.c: TCP port 23, UDP to 2001:db8::1) stay in software with a
    counterexample carrying an extension header and the suggestion no-ipv6-ext; with it,
    both are offloaded."""
    doc, _ = ipv6_run
    drops = [f for f in doc["fates"] if f["verdict"] == "DROP"]
    assert len(drops) == 2 and not any(f["offloaded"] for f in drops)
    for f in drops:
        ex = f["counterexample"]
        assert ex["kind"] == "differs" and "IPv6 extension headers" in ex["classes"], ex
        assert ex["verdict"] == "PASS" and f["suggestion"] == "no-ipv6-ext"
    again = _rules_json(capsys, "ipv6_filter", "--assume", "no-ipv6-ext")
    assert all(f["offloaded"] for f in again["fates"] if f["verdict"] == "DROP")


def test_pcap_out_is_read_by_an_independent_reader(ipv6_run):
    """dpkt (and tcpdump where installed) reads the file: one frame per counterexample, the
    same bytes as the JSON's hex, and dpkt's own IPv6 decoding agrees with the decoded
    fields (destination address, an extension header as next header)."""
    import dpkt

    doc, pcap = ipv6_run
    wanted = [f["counterexample"] for f in doc["fates"] if f["counterexample"]]
    with open(pcap, "rb") as fh:
        got = [buf for _, buf in dpkt.pcap.Reader(fh)]
    assert [g.hex() for g in got] == [w["hex"] for w in wanted]
    for buf, w in zip(got, wanted):
        eth = dpkt.ethernet.Ethernet(buf)
        assert eth.type == dpkt.ethernet.ETH_TYPE_IP6
        # the fixed IPv6 header by RFC 8200's layout (dpkt refuses an extension header that
        # runs past the frame, which z3's frames may have)
        nxt, dst = buf[14 + 6], ipaddress.IPv6Address(buf[14 + 24 : 14 + 40])
        assert f"ipv6.daddr={dst}" in w["fields"]
        assert nxt in (0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254)  # IANA's extension headers
    tcpdump = shutil.which("tcpdump")
    if tcpdump:
        run = subprocess.run([tcpdump, "-nn", "-r", str(pcap)], capture_output=True, text=True)
        assert run.returncode == 0 and len(run.stdout.splitlines()) == len(wanted), run.stderr


def test_counterexample_verdict_is_the_kernels(ipv6_run):
    """The running kernel (BPF_PROG_TEST_RUN) gives each `differs` frame the verdict the
    report says the program gives it."""
    from analyzer import kernel
    from analyzer.xdp import VERDICTS
    from tests.test_kernel_runner import kernel_ready

    doc, _ = ipv6_run
    kernel_ready()
    with kernel.load(corpus_object("ipv6_filter")) as loaded:
        for f in doc["fates"]:
            ex = f["counterexample"]
            if ex and ex["kind"] == "differs":
                got = VERDICTS.get(loaded.run(doc["program"], bytes.fromhex(ex["hex"])).retval)
                assert got == ex["verdict"], (f["path"], got, ex)


def test_ip_options_program_suggests_no_ip_options(capsys):
    """ipv4_options.c drops UDP port 5353 reading the port after the real IHL; flower cannot
    tell a frame with options apart: the counterexample has IP options, the suggestion is
    no-ip-options (checked by the whole pipeline under it), and check prints it too."""
    doc = _rules_json(capsys, "ipv4_options")
    (f,) = [f for f in doc["fates"] if f["verdict"] == "DROP" and f["counterexample"]["kind"] == "differs"]
    assert "IP options" in f["counterexample"]["classes"] and f["suggestion"] == "no-ip-options"
    code, out, _ = run_cli(capsys, "check", corpus_object("ipv4_options"))
    assert code == 1 and "offloadable with --assume no-ip-options" in out


def test_blacklist_counterexample_is_map_dependent(capsys):
    """thesis_ddos_blacklist: the drop on `blacklist` keyed by ipv4.saddr; its frame is an
    IPv4 packet the program passes when the map holds no entry for it."""
    doc = _rules_json(capsys, "thesis_ddos_blacklist")
    (f,) = [f for f in doc["fates"] if f["detail"] == "map blacklist keyed by ipv4.saddr"]
    ex = f["counterexample"]
    assert f["code"] == "map-dependent" and ex["kind"] == "differs" and ex["verdict"] == "PASS"
    assert "eth.proto=ipv4" in ex["fields"] and f["suggestion"] is None


# --- the report keeps the time budget (--timeout) ---------------------------------------------


@pytest.mark.parametrize("stem", ["flag_counter", "hash_counter"])
def test_report_past_the_budget_claims_no_map_proof_and_says_what_it_left_out(stem):
    """With the budget spent when the report starts, the map-use proofs are not made: a written
    map the decisions read is neither control-plane nor stats-only by proof (the source's
    `expect-map`, the hand-derived oracle, says what the proofs give without a budget: the test
    fails if the unbudgeted report does not reach them), its `why` says the budget stopped
    them, no path is decoded or printed, and `budget.report_cut` lists all of it."""
    import time

    import corpus
    from analyzer.explore import Options, explore
    from analyzer.fields import NOT_DECODED
    from analyzer.mapuse import BUDGET_WHY
    from analyzer.report import analysis_json, render_text
    from lifter.program import load_object

    obj = load_object(corpus_object(stem))
    (prog,) = [p for p in obj.programs if p.is_xdp]
    expected = corpus.map_expectations(stem)
    proved = [n for n, c in expected.items() if c != "data-plane"]
    assert proved  # each object has a written map whose class only a proof gives
    full = analysis_json(explore(obj, prog, Options()))
    assert {m["name"]: m["class"] for m in full["maps"]} == expected

    e = explore(obj, prog, Options(timeout=3600.0))
    assert e.budget is not None and not e.budget.ran_out
    e.options.started = time.perf_counter() - 3600.0  # the whole budget is spent: the report starts late
    doc = analysis_json(e)
    written = sorted(m["name"] for m in doc["maps"] if m["written"])
    assert doc["budget"]["report_cut"] == {
        "maps_not_proved": written,
        "paths_not_decoded": [p["id"] for p in doc["paths"]],
        "conditions_not_printed": [p["id"] for p in doc["paths"]],
    }
    for m in doc["maps"]:
        if m["written"]:
            assert m["class"] == "data-plane" and m["why"] == BUDGET_WHY, m
    for b in doc["branches"]:
        if set(b["detail"]) & set(proved):
            assert b["class"] == "data-plane-state", b
    assert all(p["fields"] == NOT_DECODED and p["condition"] is None for p in doc["paths"])
    # what was explored is whole: the same paths and verdicts as without a budget
    assert [(p["id"], p["verdict"]) for p in doc["paths"]] == [(p["id"], p["verdict"]) for p in full["paths"]]
    text = render_text(doc)
    assert "PARTIAL: the time budget ran out in the report; not done: map proofs of " + ", ".join(written) in text


def test_analyze_with_a_tiny_budget_exits_0_with_a_partial_report(capsys):
    """`analyze --timeout 0.001` (JSON and text): the budget runs out in the exploration, the
    report still comes out with exit code 0 (the documented code of a partial report), every
    path cut (UNKNOWN, no fields), nothing proved about a map."""
    code, out, err = run_cli(capsys, "analyze", corpus_object("flag_counter"), "--json", "--timeout", "0.001")
    assert code == 0 and err == "", err
    doc = json.loads(out)
    assert doc["budget"]["ran_out"] and doc["budget"]["cut"]
    assert all(p["verdict"] == "UNKNOWN" and p["fields"] is None for p in doc["paths"])
    assert all(m["why"] is None and m["class"] != "stats-only" for m in doc["maps"])
    code, out, err = run_cli(capsys, "analyze", corpus_object("flag_counter"), "--timeout", "0.001")
    assert code == 0 and "PARTIAL: the time budget (0.001 s) ran out" in out
