"""`xdp2tc check --check-flower` (issue 13 item 4): the CI gate replays each program's printed
filters in the real cls_flower (Debian's kernel under QEMU) and a filter that takes a packet
the program disagrees with is a flower-unsound finding, in text, JSON and SARIF, with the
packet, and the gate fails.

Oracles: Linux 6.1's cls_flower (per-filter counters), BPF_PROG_TEST_RUN on the host, and the
deliberate mutation of tests/test_flowervm.py (the thesis_static_rules shield's port 22 edited
to 23, so the drop below it takes TCP port 22 packets from 192.168.1.21, which the program
passes). One boot. Needs root, qemu and `make flowervm`.
"""

from __future__ import annotations

import json
import re
import struct

from conftest import corpus_object, run_cli
from test_flowervm import _need_vm

from offload import check, flowercheck
from rules import output as rules_output

STATIC, GOTO = "thesis_static_rules", "thesis_goto"


def _edit(printed: str) -> str:
    """The wrong filter (test_flowervm._wrong_port), where the script has that shield."""
    return re.sub(r"(flower skip_sw ip_proto tcp src_ip \S+ dst_port) 22 (action pass)", r"\1 23 \2", printed)


def _pcap_frames(data: bytes) -> list[bytes]:
    magic, major, minor, _, _, _, linktype = struct.unpack_from("<IHHiIII", data)
    assert (magic, major, minor, linktype) == (0xA1B2C3D4, 2, 4, 1)
    off, out = 24, []
    while off < len(data):
        _, _, caplen, _ = struct.unpack_from("<IIII", data, off)
        out.append(data[off + 16 : off + 16 + caplen])
        off += 16 + caplen
    return out


def test_check_flower_fails_on_a_wrong_filter_and_passes_a_clean_program(monkeypatch, tmp_path, capsys):
    """One `check --check-flower --format json` over the mutated thesis_static_rules and the
    clean thesis_goto (one boot): exit 1, flower-unsound findings only on the mutated program,
    each carrying a packet the program passes that the edited shield exposed (TCP port 22 from
    192.168.1.21), written to --pcap-out; the same report's SARIF and text name them; the
    clean program's findings alone pass the gate."""
    img = _need_vm()
    static, goto = corpus_object(STATIC), corpus_object(GOTO)
    printer = rules_output.tc_script
    monkeypatch.setattr(rules_output, "tc_script", lambda *a: _edit(printer(*a)))
    reports = []
    replay = check.check_in_flower

    def keep(report):
        reports.append(report)
        replay(report)

    monkeypatch.setattr(check, "check_in_flower", keep)
    pcap = tmp_path / "found.pcap"
    fail_on = ["unknown"]
    code, out, err = run_cli(
        capsys,
        *("check", static, goto, "--assume", "no-ip-options", "--check-flower", "--fail-on", fail_on[0]),
        *("--format", "json", "--pcap-out", str(pcap)),
    )
    assert code == 1, err
    doc = json.loads(out)
    unsound = [f for f in doc["findings"] if f["code"] == "flower-unsound"]
    assert unsound and doc["failed"]
    for f in unsound:
        where = (f["program"], f["rule"], f["level"], f["target"])
        assert where == ("xdp_static_rules", "XT012", "error", "cls_flower-vm")
        assert f["verdict"] == "PASS" and "(drop) took a" in f["detail"]
        p = flowercheck.parse_frame(bytes.fromhex(f["counterexample"]["hex"]))
        assert p.src4 == bytes([192, 168, 1, 21]) and p.proto == 6 and p.l4[2:4] == b"\x00\x16"
    assert {bytes.fromhex(f["counterexample"]["hex"]) for f in unsound} <= set(_pcap_frames(pcap.read_bytes()))
    flower = {p["program"]: p["flower"] for p in doc["programs"]}
    assert flower["xdp_goto"]["checked"] and flower["xdp_goto"]["unsound"] == 0 and flower["xdp_goto"]["taken"] > 0
    assert flower["xdp_static_rules"]["unsound"] == len(unsound)
    assert flower["xdp_goto"]["kernel"] == img.kernel_release
    print("\n".join(f"{name}: {entry['line']}" for name, entry in flower.items()))
    # the same report in SARIF and text
    (report,) = reports
    results = [r for r in check.sarif(report)["runs"][0]["results"] if r["ruleId"] == "XT012"]
    assert len(results) == len(unsound) and all(r["level"] == "error" for r in results)
    text = check.text(report, True, fail_on)
    assert text.count("error XT012 flower-unsound [cls_flower-vm] program xdp_static_rules") == len(unsound)
    assert "real cls_flower: Linux " in text and "FAIL" in text
    # the clean program: its findings alone do not fail the gate
    clean = check.Report(report.targets, [], [f for f in report.findings if f.program == "xdp_goto"])
    assert not check.settle(clean, None, fail_on)
