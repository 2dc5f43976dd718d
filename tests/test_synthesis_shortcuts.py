"""Synthesis shortcuts that must not change what it finds (rules/synthesis.py, issue 14):

- the split into VLAN protocol chains starts with the chain extraction looks at first
  (`_first_tagged`) and stops there when its blocks decide nothing beyond the chain: the
  blocks must equal those of the full enumeration (`_first_tagged` off: every chain
  enumerated first, as before);
- `_tagged` answers "does the path take another protocol?" by evaluating the witness with
  a VLAN tag inserted: whenever it says yes, z3 must find such a packet;
- `_good_check` asks for a packet of the block the program gives its outcome path by path:
  its answer must be z3's on the whole query (the OR of the paths' conditions);
- once a split into VLAN chains is given up, the one chain extraction goes on with is read
  from the skb protocols `_first_tagged` found (`_no_split`): it must be the one
  `_one_chain` asks z3 for.
"""

from __future__ import annotations

import pytest
import z3

import corpus
from analyzer.exploration import Options
from analyzer.explore import explore
from lifter.program import load_object
from rules.flower import FAMILIES
from rules.isolation import isolated
from rules.synthesis import Outcome, Synthesizer, solver
from tests.conftest import need_object
from tests.test_synthesis_keys import extracted_blocks


def _path(stem: str):
    if stem.startswith("xdpfilt_"):
        return need_object(corpus.EXTERNAL_DIR / "libxdp1" / f"{stem}.o")
    return need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o")


def _exploration(stem: str):
    obj = load_object(_path(stem))
    return explore(obj, obj.programs[0], Options(witnesses=True))


@pytest.mark.parametrize("stem", ["vlan_tags", "qinq_tags", "xdpfilt_dny_udp"])
def test_lazy_split_same_blocks(stem, monkeypatch):
    e = _exploration(stem)
    asked = []
    real = Synthesizer._first_tagged

    def first(self, s, model, memo):
        found = real(self, s, model, memo)
        asked.append(found)
        return found

    monkeypatch.setattr(Synthesizer, "_first_tagged", first)
    lazy = extracted_blocks(e)
    assert any(lazy.values()), "the program has target paths with blocks"
    assert any(c is not None for c in asked), "some path splits into VLAN chains"
    monkeypatch.setattr(Synthesizer, "_first_tagged", lambda self, s, model, memo: None)
    assert lazy == extracted_blocks(_exploration(stem))


@pytest.mark.parametrize("stem", ["vlan_tags", "thesis_static_rules", "xdpfilt_alw_tcp"])
def test_tagged_witness_is_a_packet_of_the_path(stem):
    e = _exploration(stem)
    s = Synthesizer(e, (), {})
    said = []
    for p in e.paths:
        # a typical packet of the path asked in a context of its own: the same model
        # whatever the process asked before (exploration's witnesses depend on that)
        r, m = isolated(s.conds[p.id], *s.env, s.typical, rlimit=50_000_000)
        if r != z3.sat:
            continue
        eth = m.eval(s.d.skb_protocol, model_completion=True).as_long()
        if eth not in FAMILIES:
            continue
        yes = s._tagged(p, m, eth)
        said.append(yes)
        if yes:
            q = solver(s.conds[p.id], *s.env, s.typical, s.d.skb_protocol != eth)
            assert q.check() == z3.sat, f"path {p.id}"
    if stem == "xdpfilt_alw_tcp":  # xdp-filter walks VLAN tags: its paths take tagged frames too
        assert any(said)


@pytest.mark.parametrize("stem", ["thesis_static_rules", "or_stress_k2", "vlan_tags"])
def test_good_check_is_the_whole_query(stem):
    e = _exploration(stem)
    s = Synthesizer(e, ("no-ip-options",), {})
    blocks = [
        b for p in e.paths if isinstance(o := s.outcomes[p.id], Outcome) and not o.is_pass for b in s.extract_all(p, o)
    ]
    assert blocks
    answers = set()
    for b in blocks:
        good = s.good(b.outcome)
        for extra in ([s.typical], [z3.Not(s.typical)], [s.typical, s.d.skb_protocol == 0x8100]):
            whole = solver(b.formula(s.d), good, *s.env, *extra).check()
            query = [z3.And(b.formula(s.d), good, *s.env), *extra]
            assert s._good_check(b, query, extra) == whole
            answers.add(str(whole))
    assert answers == {"sat", "unsat"}, "both answers are tested"


@pytest.mark.parametrize("stem", ["xdpfilt_dny_udp", "xdpfilt_alw_tcp"])
def test_given_up_split_chain_is_one_chain(stem, monkeypatch):
    e = _exploration(stem)
    real = Synthesizer._no_split
    compared = []

    def no_split(self, s, model, memo):
        found = real(self, s, model, memo)
        if self.chain_budget == 0:  # extraction gave the split up: the question it no longer asks
            compared.append((found, self._one_chain(s, model)))
        return found

    monkeypatch.setattr(Synthesizer, "_no_split", no_split)
    assert any(extracted_blocks(e).values())
    assert compared, "a path's split into VLAN chains is given up"
    for found, asked in compared:
        assert found == asked
    assert ("all", {}) in [f for f, _ in compared], "xdp-filter's paths take several protocols"
