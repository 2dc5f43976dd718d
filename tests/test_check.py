"""`xdp2tc check`, the CI gate: reasons checked by hand against the corpus sources, the SARIF
output validated against the official SARIF 2.1.0 schema (tests/data, see its README), the
baseline mode, exit codes and bad options.

Each check runs the whole pipeline (z3), so the tests share a few runs (module fixtures).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, corpus_object, require, require_kernel, run_cli

import corpus
from offload.cli import main
from offload.targets import TARGETS
from rules.reasons import REASONS

SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"


def _line_of(stem: str, pattern: str) -> int:
    """The 1-based line of the corpus source matching `pattern` (found by hand-written regex)."""
    lines = corpus.source_of(stem).read_text().splitlines()
    hits = [i + 1 for i, text in enumerate(lines) if re.search(pattern, text)]
    assert len(hits) == 1, hits
    return hits[0]


@pytest.fixture(scope="module")
def blacklist_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("check") / "blacklist.json"
    code = main(["check", corpus_object("thesis_ddos_blacklist"), "--format", "json", "-o", str(out)])
    return code, out


def test_blacklist_drops_are_map_dependent_on_blacklist(blacklist_json):
    code, out = blacklist_json
    doc = json.loads(out.read_text())
    assert code == 1  # --fail-on any (the default) and the two DROP paths stay in software
    assert doc["schema"] == "xdp2tc.check/1"
    drops = [f for f in doc["findings"] if f["verdict"] == "DROP"]
    assert len(drops) == 2  # thesis_ddos_blacklist.c has two `return XDP_DROP`
    assert all(f["code"] == "map-dependent" and f["rule"] == REASONS["map-dependent"].rule for f in drops)
    # the drop on the source blacklist: keyed by the IPv4 source address, located at its `if`
    first = next(f for f in drops if "port_blacklist" not in f["detail"])
    assert first["detail"] == "map blacklist keyed by ipv4.saddr"
    assert first["location"]["file"].endswith("thesis_ddos_blacklist.c")
    assert first["location"]["line"] == _line_of("thesis_ddos_blacklist", r"lookup_elem\(&blacklist")
    second = next(f for f in drops if "port_blacklist" in f["detail"])
    assert second["location"]["line"] == _line_of("thesis_ddos_blacklist", r"lookup_elem\(&port_blacklist")
    # every path once: 2 DROP in software, 5 PASS to the host (analyze counts 7 paths)
    prog = doc["programs"][0]
    assert prog["summary"]["lines"] == [
        "DROP paths 2: offloaded 0 (0 filters), software 2 (map-dependent 2)",
        "PASS paths 5: pass to host (the program runs anyway)",
    ]
    assert sorted(p["id"] for p in prog["paths"]) == list(range(7))


def test_blacklist_frames_name_the_entries_they_rest_on(blacklist_json, capsys):
    """The drop on `blacklist` (keyed by the source address: thesis_ddos_blacklist.c) shows
    a frame the program passes because its source is not in the map: the frame's entry is
    `blacklist[the frame's bytes 26..29]` absent (the key is iph->saddr as the packet holds
    it), in the JSON and in the text under the finding."""
    _, out = blacklist_json
    doc = json.loads(out.read_text())
    (first,) = [f for f in doc["findings"] if f["detail"] == "map blacklist keyed by ipv4.saddr"]
    ex = first["counterexample"]
    frame = bytes.fromhex(ex["hex"])
    assert ex["verdict"] == "PASS" and frame[12:14] == b"\x08\x00"
    assert {"map": "blacklist", "key": frame[26:30].hex(), "value": None} in ex["maps"]
    code, text, _ = run_cli(capsys, "check", corpus_object("thesis_ddos_blacklist"))
    assert code == 1
    assert (
        f"    with map entries (those it looks up, stats-only maps aside): blacklist[{frame[26:30].hex()}] absent"
        in text
    )


def _artifact_path(artifact: dict, base: Path) -> Path:
    """The file a SARIF artifactLocation names (SARIF 2.1.0 §3.4.3): its uri relative to the
    SRCROOT base when it has that uriBaseId, else an absolute file URI (a source outside the
    working directory, e.g. a build tree linked from elsewhere)."""
    uri = artifact["uri"]
    if artifact.get("uriBaseId") == "SRCROOT":
        return base / uri
    parsed = urllib.parse.urlparse(uri)
    assert parsed.scheme == "file", uri
    return Path(urllib.parse.unquote(parsed.path))


def test_sarif_validates_against_the_official_schema(capsys, tmp_path):
    out = tmp_path / "out.sarif"
    code, _, err = run_cli(
        capsys,
        "check",
        corpus_object("thesis_ddos_blacklist"),
        corpus_object("thesis_static_rules"),
        "--target",
        "generic,bnxt",
        "--format",
        "sarif",
        "-o",
        str(out),
    )
    assert code == 1, err
    doc = json.loads(out.read_text())
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator(schema).validate(doc)  # raises on any violation
    results = doc["runs"][0]["results"]
    assert results
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    base = Path(doc["runs"][0]["originalUriBaseIds"]["SRCROOT"]["uri"].removeprefix("file://"))
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        loc = r["locations"][0]["physicalLocation"]
        assert loc["region"]["startLine"] >= 1
        assert _artifact_path(loc["artifactLocation"], base).exists()  # code scanning finds the C file
    # bnxt has no `pass` action (bnxt_tc_parse_actions): the shielded drops of
    # thesis_static_rules are offloadable in software tc but not on bnxt
    bnxt = [
        r for r in results if r["properties"]["target"] == "bnxt" and r["properties"]["code"] == "target-unsupported"
    ]
    assert bnxt and all("action pass" in r["message"]["text"] for r in bnxt)
    generic = [r for r in results if r["properties"]["target"] == "generic"]
    assert not any(r["properties"]["code"] == "target-unsupported" for r in generic)


def test_baseline_passes_unchanged_and_fails_on_new(capsys, blacklist_json, tmp_path):
    _, previous = blacklist_json
    code, out, _ = run_cli(capsys, "check", corpus_object("thesis_ddos_blacklist"), "--baseline", str(previous))
    assert code == 0, out
    assert "2 findings (0 new)" in out
    # the same source built by another toolchain: the same fingerprints (no pc, no path id)
    code, out, _ = run_cli(
        capsys, "check", corpus_object("thesis_ddos_blacklist", "clang-v4"), "--baseline", str(previous)
    )
    assert code == 0, out
    # a baseline missing one finding: that finding is new and fails the gate
    doc = json.loads(previous.read_text())
    dropped = doc["findings"].pop()
    older = tmp_path / "older.json"
    older.write_text(json.dumps(doc))
    code, out, _ = run_cli(
        capsys, "check", corpus_object("thesis_ddos_blacklist"), "--baseline", str(older), "--format", "json"
    )
    assert code == 1
    new = [f for f in json.loads(out)["findings"] if f["new"]]
    assert [f["fingerprint"] for f in new] == [dropped["fingerprint"]]
    # a SARIF report works as a baseline too
    sarif = tmp_path / "prev.sarif"
    assert main(["check", corpus_object("thesis_ddos_blacklist"), "--format", "sarif", "-o", str(sarif)]) == 1
    capsys.readouterr()
    assert run_cli(capsys, "check", corpus_object("thesis_ddos_blacklist"), "--baseline", str(sarif))[0] == 0


def test_new_drop_in_changed_source_fails_the_baseline(capsys, tmp_path, blacklist_json):
    """The user's flow: edit the C program, rebuild, the gate reports only what is new."""
    clang = shutil.which("clang-19")
    require(clang is not None, "clang-19 is not installed (make setup installs it)")
    _, previous = blacklist_json
    src = corpus.source_of("thesis_ddos_blacklist").read_text()
    changed = src.replace(
        "\tsaddr = iph->saddr;\n",
        "\tsaddr = iph->saddr;\n"
        "\tif (iph->ttl == 1 && bpf_map_lookup_elem(&port_blacklist, &saddr)) // new\n"
        "\t\treturn XDP_DROP;\n",
    )
    assert changed != src
    work = tmp_path / "thesis_ddos_blacklist.c"
    work.write_text(changed)
    obj = tmp_path / "thesis_ddos_blacklist.o"
    subprocess.run(
        [
            clang,
            "-O2",
            "-g",
            "-target",
            "bpf",
            "-I/usr/include/x86_64-linux-gnu",
            "-I",
            str(corpus.INCLUDE_DIR),
            "-c",
            str(work),
            "-o",
            str(obj),
        ],
        check=True,
        capture_output=True,
    )
    code, out, _ = run_cli(capsys, "check", str(obj), "--baseline", str(previous), "--format", "json")
    doc = json.loads(out)
    new = [f for f in doc["findings"] if f["new"]]
    assert code == 1 and new
    assert all(f["location"]["file"].endswith("thesis_ddos_blacklist.c") for f in new)


def test_readme_documents_every_reason_code_and_target():
    readme = (ROOT / "README.md").read_text()
    for r in REASONS.values():
        assert f"| `{r.code}` | {r.rule} | {r.level} |" in readme
    for name in TARGETS:
        assert f"| `{name}` |" in readme


def test_targets_table_rows_cite_their_source():
    from rules.flower import FLOWER_KEYS

    for t in TARGETS.values():
        assert t.source and t.kind in ("flower", "ebpf")
        assert t.keys <= set(FLOWER_KEYS) and t.prefix_only <= t.keys  # names from the one key table
    assert set(TARGETS) == {"generic", "mlx5", "nfp-flower", "bnxt", "ice", "nfp-bpf"}


def test_nfp_bpf_refuses_tail_calls_and_redirect_maps(capsys):
    code, out, _ = run_cli(
        capsys, "check", corpus_object("tailcall_dispatch"), "--target", "nfp-bpf", "--format", "json"
    )
    findings = json.loads(out)["findings"]
    assert any(f["detail"] == "tail calls (bpf_tail_call)" and f["location"] for f in findings)
    assert any("of type prog_array" in f["detail"] for f in findings)
    code, out, _ = run_cli(capsys, "check", corpus_object("redirect_devmap"), "--target", "nfp-bpf", "--format", "json")
    details = [f["detail"] for f in json.loads(out)["findings"]]
    assert "redirect (bpf_redirect_map)" in details and any("devmap" in d for d in details)


def test_fail_on_categories(capsys):
    obj = corpus_object("thesis_ddos_blacklist")
    assert run_cli(capsys, "check", obj, "--fail-on", "software-drop")[0] == 1
    assert run_cli(capsys, "check", obj, "--fail-on", "unknown")[0] == 0
    assert run_cli(capsys, "check", obj, "--fail-on", "target-unsupported")[0] == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--target", "nosuchnic"],
        ["--target", "generic,"],
        ["--fail-on", "everything"],
        ["--baseline", "/nonexistent/prev.json"],
        ["--max-rules", "0"],
        ["--max-len", "-1"],
    ],
)
def test_bad_options_exit_2_with_one_line(capsys, argv):
    code, out, err = run_cli(capsys, "check", corpus_object("thesis_ddos_blacklist"), *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("xdp2tc: "), err


def test_bad_baseline_and_missing_object_exit_2(capsys, tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    code, _, err = run_cli(capsys, "check", corpus_object("thesis_ddos_blacklist"), "--baseline", str(junk))
    assert code == 2 and len(err.strip().splitlines()) == 1
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "xdp2tc.rules/1"}))
    assert run_cli(capsys, "check", corpus_object("thesis_ddos_blacklist"), "--baseline", str(other))[0] == 2
    code, _, err = run_cli(capsys, "check", str(tmp_path / "missing.o"))
    assert code == 2 and len(err.strip().splitlines()) == 1


def _frame(src: str, dst: str, proto: int, dport: int) -> bytes:
    """An Ethernet + IPv4 (no options) + TCP/UDP frame built by hand, padded to 60 bytes."""
    import ipaddress
    import struct

    l4 = (
        struct.pack("!HHIIBBHHH", 40000, dport, 0, 0, 0x50, 0x02, 1024, 0, 0)
        if proto == 6
        else struct.pack("!HHHH", 40000, dport, 8, 0)
    )
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(l4),
        1,
        0,
        64,
        proto,
        0,
        ipaddress.IPv4Address(src).packed,
        ipaddress.IPv4Address(dst).packed,
    )
    frame = b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02" + b"\x08\x00" + ip + l4
    return frame + b"\x00" * (60 - len(frame))


def test_pcap_traffic_share(capsys, tmp_path):
    """thesis_static_rules drops everything from 192.168.1.21 except TCP to port 22, and
    everything to 192.168.6.21. Its proven filters take the UDP from .21 and the packets to
    .6.21 in the NIC; TCP from .21 is shielded (flower cannot see the port under IP options),
    so its drops stay on the host. By hand: 5 of 10 packets in the NIC."""
    import dpkt

    frames = (
        [_frame("192.168.1.21", "10.0.0.1", 17, 53)] * 3
        + [_frame("10.0.0.9", "192.168.6.21", 6, 80)] * 2
        + [_frame("192.168.1.21", "10.0.0.1", 6, 80), _frame("192.168.1.21", "10.0.0.1", 6, 22)]
        + [_frame("10.0.0.9", "10.0.0.1", 17, 53)] * 3
    )
    pcap = tmp_path / "cap.pcap"
    with open(pcap, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i, fr in enumerate(frames):
            w.writepkt(fr, ts=i)
    code, out, err = run_cli(
        capsys, "check", corpus_object("thesis_static_rules"), "--pcap", str(pcap), "--format", "json"
    )
    traffic = json.loads(out)["programs"][0]["traffic"]
    assert traffic["total"] == {"packets": 10, "bytes": 600}
    assert traffic["nic"]["packets"] == 5 and traffic["nic"]["packet_share"] == 0.5
    by_filter = {tuple(f["tc"].split()[-2:]): f["packets"] for f in traffic["filters"]}
    assert by_filter == {("src_ip", "192.168.1.21"): 3, ("dst_ip", "192.168.6.21"): 2}
    host = {p["path"]: p for p in traffic["host_paths"]}
    assert sum(p["packets"] for p in host.values()) == 5
    # the TCP drop from .21 to port 80 stays on the host, on a DROP path in software
    drops = [p for p in host.values() if p["code"] not in (None, "pass-to-host")]
    assert [p["packets"] for p in drops] == [1]
    code, _, err = run_cli(capsys, "check", corpus_object("thesis_static_rules"), "--pcap", str(tmp_path / "none.pcap"))
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_fixed_offset_port_drop_suggests_no_ip_options(capsys):
    """two_progs_one_section.c drops TCP port 23 and UDP port 161, reading the port at
    14 + 20 + 2 whatever the IHL: with IPv4 options flower's port is elsewhere, so the drop
    is only provable without options; with --assume no-ip-options it is offloaded."""
    obj = corpus_object("two_progs_one_section")
    code, out, _ = run_cli(capsys, "check", obj, "--format", "json")
    drops = [f for f in json.loads(out)["findings"] if f["verdict"] == "DROP"]
    assert code == 1 and len(drops) == 2
    assert all(f["code"] == "atypical-packets" and "--assume no-ip-options" in f["detail"] for f in drops)
    assert {f["fields"].split(" [")[0].rsplit(" ∧ ", 1)[-1] for f in drops} == {"tcp.dport == 23", "udp.dport == 161"}
    code, out, _ = run_cli(capsys, "check", obj, "--assume", "no-ip-options")
    assert code == 0 and "0 findings" in out


def test_kernel_verify_reports_the_verifier_beside_ours(capsys):
    """The kernel is the oracle: a corpus program it loads, and one it refuses (GCC 12's
    bpf_loop callback without func_info, corpus.expected_load_failures)."""
    require_kernel()
    code, out, _ = run_cli(
        capsys, "check", corpus_object("thesis_ddos_blacklist"), "--kernel-verify", "--format", "json"
    )
    assert json.loads(out)["programs"][0]["kernel"]["loads"] is True
    stem = "bpf_loop_cb"
    assert "gcc" in corpus.expected_load_failures(stem)
    code, out, _ = run_cli(capsys, "check", corpus_object(stem, "gcc"), "--kernel-verify", "--format", "json")
    verdict = json.loads(out)["programs"][0]["kernel"]
    assert verdict["loads"] is False and "load failed" in verdict["message"]
