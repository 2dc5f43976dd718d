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

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import corpus
from rules import synthesis
from tests.conftest import explored_with_witnesses, need_object
from tests.test_synthesis_keys import extracted_blocks


def _exploration(stem: str):
    folder = corpus.EXTERNAL_DIR / "libxdp1" if stem.startswith("xdpfilt_") else corpus.BUILD_DIR / "clang"
    return explored_with_witnesses(folder / f"{stem}.o")


def _without_near(s, model, term, limit, known, top=0, assertions=None):
    return list(known)


@pytest.mark.parametrize("stem", ["xdpfilt_alw_ip", "xdpfilt_alw_all", "allow_block"])
def test_near_values_same_blocks(stem, monkeypatch):
    e = _exploration(stem)
    near = extracted_blocks(e)
    assert any(near.values()), "the program has target paths with blocks"
    monkeypatch.setattr(synthesis, "_near_values", _without_near)
    assert near == extracted_blocks(_exploration(stem))


#: test_near_values_are_values_of_the_path's work, run in a fresh process: which model
#: extraction starts from, and so which keys the query is asked about, depends on the z3
#: terms made before (other tests), as in `rules` it depends on nothing.
_VALUES = """
import json, sys
from pathlib import Path
import z3
from rules import synthesis
from tests.conftest import explored_with_witnesses
from tests.test_synthesis_keys import extracted_blocks

found, real = [], synthesis._near_values

def near(s, model, term, limit, known, top=0, assertions=None):
    out = real(s, model, term, limit, known, top, assertions)
    if len(out) > synthesis.MAX_VALUES:
        new = out[len(known) :]
        width = term.size()
        ok = []
        for v in new:
            s.push()
            s.add(term == v)
            ok.append(s.check() == z3.sat)
            s.pop()
        found.append({
            "top": top,
            "kept": out[: len(known)] == list(known),
            "distinct": len(set(out)) == len(out),
            "prefixes": len({v >> (width - top) for v in new}) if top else 0,
            "new": len(new),
            "values": all(ok),
        })
    return out

synthesis._near_values = near
extracted_blocks(explored_with_witnesses(Path(sys.argv[1])))
print(json.dumps(found))
"""


def test_near_values_are_values_of_the_path():
    """On xdpfilt_alw_ip the query fires (an address looked up in a map, ip_proto through
    IPv6 extension headers: 65 values from the 2 the path's solver found) and each value it
    finds is one the key takes on the path (z3 finds a packet of the path with it); an
    address's values differ in their /8 prefix (`_prefix_set` asks no prefix again)."""
    path = need_object(corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_ip.o")
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, "-c", _VALUES, str(path)], cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert any(f["top"] == 0 for f in found), "a key without prefixes takes more than MAX_VALUES values"
    assert any(f["top"] > 0 for f in found), "an address takes more than MAX_VALUES values"
    for f in found:
        assert f["kept"] and f["distinct"] and f["values"], f
        if f["top"]:
            assert f["prefixes"] == f["new"], f
