"""path_reason works a path's reason out once (rules/reasons.py `_REASONS`): `rules
--pcap-out`, `check --check-flower` and the editor server account for the same paths twice.

Oracles: thesis_ddos_blacklist's source (corpus, "What:") drops on `blacklist` keyed by the
IPv4 source address; or_direct_udp_k16 reads the UDP ports "after a 20-byte header" with no
IHL check (IP options unless --assume no-ip-options rules them out).
"""

from __future__ import annotations

from conftest import corpus_object

import analyzer.fields as fields
from analyzer.classify import classes
from analyzer.explore import explore
from lifter.program import load_object
from rules import reasons
from rules.reasons import account, forget, path_reason
from rules.ruleset import build


def _explored(stem: str):
    obj = load_object(corpus_object(stem))
    return explore(obj, obj.programs[0])


def _counting(monkeypatch) -> dict[str, int]:
    """Counts of the work a reason costs: key renderings and the IP-options z3 facts."""
    calls = {"key_fields": 0, "fixed_l4_reads": 0}
    key_fields, fixed = fields.Decoder.key_fields, reasons.fixed_l4_reads

    def counted_key(self, *a, **k):
        calls["key_fields"] += 1
        return key_fields(self, *a, **k)

    def counted_fixed(*a, **k):
        calls["fixed_l4_reads"] += 1
        return fixed(*a, **k)

    monkeypatch.setattr(fields.Decoder, "key_fields", counted_key)
    monkeypatch.setattr(reasons, "fixed_l4_reads", counted_fixed)
    return calls


def test_a_second_account_renders_no_key_again(monkeypatch):
    """The map-dependent drop is told by its key the first time; the second account gives
    the same fates without rendering the key again."""
    e = _explored("thesis_ddos_blacklist")
    rs = build(e, ())
    calls = _counting(monkeypatch)
    first = account(e, rs, classes(e)[1])
    assert any(f.reason is not None and f.reason.detail == "map blacklist keyed by ipv4.saddr" for f in first)
    assert calls["key_fields"] >= 1
    seen = dict(calls)
    assert account(e, rs, classes(e)[1]) == first
    assert calls == seen


def test_the_memo_keeps_assumption_sets_apart(monkeypatch):
    """Per assumption set a reason of its own: IP options without
    no-ip-options, not-expressible with it, whichever is asked first; and the same answers
    as worked out afresh."""
    e = _explored("or_direct_udp_k16")
    maps = classes(e)[1]
    drops = [p for p in e.paths if p.verdict == "DROP"]
    assert drops
    calls = _counting(monkeypatch)
    for p in drops:
        assert path_reason(e, p, maps, ("no-ip-options",)).code == "not-expressible"
        assert path_reason(e, p, maps).code == "atypical-packets"
        assert path_reason(e, p, maps, ("no-ip-options",)).code == "not-expressible"
    assert calls["fixed_l4_reads"] == len(drops)  # once per path without the assumption
    before = [path_reason(e, p, maps) for p in drops]
    forget()
    assert [path_reason(e, p, maps) for p in drops] == before
    assert calls["fixed_l4_reads"] == 2 * len(drops)
