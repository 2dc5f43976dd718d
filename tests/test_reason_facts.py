"""Why a path stays in software, decided on z3 facts (rules/reasons.py `path_reason`): the
IP-options reason comes from `fixed_l4_reads` (IPv4 at a fixed place, an L4 protocol, a read
at a fixed L4 offset, a packet of the path with an IHL other than 5), not from whether the
decoded condition got as far as naming the read (the decoder stops at its query budget).

Oracles: the corpus programs' own headers (corpus/*.c, "What:"): or_direct_udp reads the
UDP ports "after a 20-byte header" with no IHL check; ipv4_options finds the UDP header at
ihl*4.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import z3
from conftest import corpus_object, explored_with_witnesses

import analyzer.fields as fields
import corpus
from analyzer.classify import classes
from analyzer.explore import explore
from analyzer.fields import FIXED_NOTE, Decoder
from lifter.program import load_object
from rules.reasons import fixed_l4_reads, forget, path_reason


def _explored(stem: str):
    obj = load_object(corpus_object(stem))
    return explore(obj, obj.programs[0])


def test_fixed_port_reads_are_ip_options_whatever_the_decoder_budget(monkeypatch):
    """or_direct_udp_k16's DROP paths read the UDP ports at fixed offsets: each is told
    IP options, and still is when the decoder may ask z3 nothing (its text then names no
    L4 field: the old choice, made on the text, would have said not-expressible)."""
    e = _explored("or_direct_udp_k16")
    maps = classes(e)[1]
    drops = [p for p in e.paths if p.verdict == "DROP"]
    assert drops
    for p in drops:
        assert fixed_l4_reads(e, p)
        assert path_reason(e, p, maps).code == "atypical-packets"
    monkeypatch.setattr(fields, "MAX_QUERIES", 0)
    forget()  # path_reason's memo: worked out again under the new budget
    for p in drops:
        assert not Decoder(e.environment()).render(e.condition(p)).endswith(FIXED_NOTE)
        reason = path_reason(e, p, maps)
        assert reason.code == "atypical-packets" and reason.detail.startswith("IP options")
        assert path_reason(e, p, maps, ("no-ip-options",)).code == "not-expressible"


@pytest.mark.parametrize("stem", ["ipv4_options", "ipv6_filter"])
def test_programs_that_honour_ihl_or_are_not_ipv4_are_not_ip_options(stem):
    """ipv4_options reads UDP at ihl*4 (no fixed L4 offset); ipv6_filter's L4 reads are
    after an IPv6 header: no path is told IP options."""
    e = _explored(stem)
    assert not any(fixed_l4_reads(e, p) for p in e.paths)


@pytest.mark.parametrize("path", ["external:xdpfilt_alw_ip", "or_direct_udp_k16", "ipv4_options", "vlan_tags"])
def test_the_witness_changes_no_answer_and_spares_queries(path, monkeypatch):
    """`fixed_l4_reads` with the path's witness (it refutes claims by evaluation) answers as
    without one (every claim asked of z3: the old way, the reference), on paths where the
    answer is yes (or_direct_udp) and no; on xdpfilt_alw_ip the witness spares z3 checks."""
    if path.startswith("external:"):
        e = explored_with_witnesses(corpus.EXTERNAL_DIR / "libxdp1" / f"{path.split(':')[1]}.o")
    else:
        e = explored_with_witnesses(Path(corpus_object(path)))
    checks = [0]
    check = z3.Solver.check

    def counted(self, *a):
        checks[0] += 1
        return check(self, *a)

    monkeypatch.setattr(z3.Solver, "check", counted)
    with_witness = [fixed_l4_reads(e, p) for p in e.paths]
    spared = checks[0]
    checks[0] = 0
    without = [fixed_l4_reads(e, dataclasses.replace(p, witness=None)) for p in e.paths]
    assert with_witness == without
    assert any(p.witness is not None for p in e.paths)
    if path == "or_direct_udp_k16":
        assert any(with_witness)
    if path == "external:xdpfilt_alw_ip":
        assert spared < checks[0]
