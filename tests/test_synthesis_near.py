"""Key extraction's `_near_values` (rules/synthesis.py, issue 14): where the path's solver
finds a key takes more values than those known, more are looked for in a small query (the
model's packet with the key's bytes free, the maps' contents free, all else pinned) before
the path's solver is asked for the rest.

Every value it finds must be one the key takes on the path (z3 finds a packet of the path
with it), and the blocks extracted must equal those found without it (the path's solver
alone enumerating): xdp-filter's allow-mode programs look addresses and MACs up in maps
(around one model only the value the model's map holds) and read the IPv6 protocol through
extension headers, so 65 values were asked of the path's whole condition there.
"""

from __future__ import annotations

import pytest
import z3

import corpus
from analyzer.exploration import Options
from analyzer.explore import explore
from lifter.program import load_object
from rules import synthesis
from tests.conftest import need_object
from tests.test_synthesis_keys import extracted_blocks


def _exploration(stem: str):
    if stem.startswith("xdpfilt_"):
        path = need_object(corpus.EXTERNAL_DIR / "libxdp1" / f"{stem}.o")
    else:
        path = need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o")
    obj = load_object(path)
    return explore(obj, obj.programs[0], Options(witnesses=True))


def _without_near(s, model, term, limit, known, top=0):
    return list(known)


@pytest.mark.parametrize("stem", ["xdpfilt_alw_ip", "xdpfilt_alw_all", "allow_block"])
def test_near_values_same_blocks(stem, monkeypatch):
    e = _exploration(stem)
    near = extracted_blocks(e)
    assert any(near.values()), "the program has target paths with blocks"
    monkeypatch.setattr(synthesis, "_near_values", _without_near)
    assert near == extracted_blocks(_exploration(stem))


def test_near_values_are_values_of_the_path(monkeypatch):
    """On xdpfilt_alw_ip the query fires (an address looked up in a map, ip_proto through
    IPv6 extension headers: 65 values from the 2 the path's solver found) and each value it
    finds is one the key takes on the path."""
    found = []
    real = synthesis._near_values

    def near(s, model, term, limit, known, top=0):
        out = real(s, model, term, limit, known, top)
        found.append((s, term, list(known), out, top))
        return out

    monkeypatch.setattr(synthesis, "_near_values", near)
    extracted_blocks(_exploration("xdpfilt_alw_ip"))
    full = [f for f in found if len(f[3]) > synthesis.MAX_VALUES]
    assert any(f[4] == 0 for f in full), "a key without prefixes takes more than MAX_VALUES values"
    assert any(f[4] > 0 for f in full), "an address takes more than MAX_VALUES values"
    for s, term, known, out, top in full:
        assert out[: len(known)] == known and len(set(out)) == len(out)
        if top:  # the values differ in their shortest prefix first: no prefix asked again
            width = term.size()
            assert len({v >> (width - top) for v in out}) >= len(out) - len(known)
        for v in out[len(known) :]:
            s.push()
            s.add(term == v)
            assert s.check() == z3.sat, (term.size(), v)
            s.pop()
