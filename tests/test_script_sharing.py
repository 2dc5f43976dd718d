"""What the script phase of `rules` shares instead of asking z3 again (rules/synthesis.py,
rules/reasons.py), checked against the work done afresh.

- A synthesizer under one more assumption (a suggestion's) takes the build's `path_block`
  findings (`fixed_keys`) where `with_assumption` shares the extractions (z3 proved typical
  packets satisfy the assumption): each must be what a synthesizer under that assumption finds on its own.
- The packet offsets a condition reads at constant indices (`constant_reads`, on symbolic's
  table of z3's C functions): a term built by hand, in z3's main context and in another.
"""

from __future__ import annotations

import z3
from conftest import corpus_object

from analyzer.explore import explore
from analyzer.symbolic import PACKET
from lifter.program import load_object
from rules.reasons import constant_reads
from rules.ruleset import build
from rules.synthesis import Synthesizer


def test_shared_path_blocks_are_what_the_assumption_finds():
    """ipv4_options: every path's fixed keys as the build's synthesizer found them are the
    ones a fresh synthesizer under no-ip-options finds (typical packets have no options);
    under no-fragments (IPv6 fragment headers are typical) nothing is shared."""
    obj = load_object(corpus_object("ipv4_options"))
    e = explore(obj, obj.programs[0])
    base = build(e, ()).synth
    for p in e.paths:
        base.fixed_keys.setdefault(p.id, base._fixed_keys(p))
    shared = base.with_assumption("no-ip-options")
    assert shared.fixed_keys is base.fixed_keys
    fresh = Synthesizer(e, base.assume + ("no-ip-options",), base.ifnames)  # shares nothing
    assert fresh.fixed_keys == {}
    found = {p.id: fresh._fixed_keys(p) for p in e.paths}
    assert found == base.fixed_keys
    assert any(v is not None and v[1] for v in found.values())  # some path fixes keys
    assert base.with_assumption("no-fragments").fixed_keys is not base.fixed_keys


def _byte(o) -> z3.BitVecRef:
    return PACKET[z3.BitVecVal(o, 64) if isinstance(o, int) else o]


def test_constant_reads_by_hand():
    """Reads at 23, 5, 36 and 37 (a 16-bit field); a read at a computed index and a read of
    another array at a constant index are not constant packet reads."""
    i = z3.BitVec("i", 64)
    other = z3.Array("other", z3.BitVecSort(64), z3.BitVecSort(8))
    t = z3.And(
        _byte(23) == 6,
        z3.ULT(_byte(5) + _byte(i), 3),
        z3.Concat(_byte(36), _byte(37)) == 80,
        other[z3.BitVecVal(99, 64)] == 1,
        _byte(i + 2) == _byte(23),
    )
    assert constant_reads(t) == {5, 23, 36, 37}
    assert constant_reads(t.translate(z3.Context())) == {5, 23, 36, 37}
    assert constant_reads(z3.BoolVal(True)) == set()
