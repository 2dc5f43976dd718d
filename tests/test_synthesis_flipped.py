"""path_block's fixed keys with a second value found by evaluation (rules/synthesis.py
`_flipped`): the model the key-value solver starts from, with the last byte the key reads
at a fixed offset changed, is another model of the solver's constraints where they still
hold, and then the key is not fixed without asking z3.

By hand on a few packet constraints; on xdpfilt_alw_ip (Debian's libxdp1), whose IPv4
address path took z3 ~0.1-0.17 s to give another source MAC: the fixed keys of every path
are the ones asking z3 gives, with fewer questions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import z3

import corpus
from analyzer.symbolic import PACKET
from rules.synthesis import _flipped
from tests.conftest import need_object


def _byte(i: int) -> z3.BitVecRef:
    return PACKET[z3.BitVecVal(i, 64)]


def _src_mac() -> z3.BitVecRef:
    return z3.Concat(*[_byte(i) for i in range(6, 12)])


def _model(*constraints) -> z3.ModelRef:
    s = z3.Solver()
    s.add(*constraints)
    assert s.check() == z3.sat
    return s.model()


def test_a_byte_the_constraints_do_not_read_gives_a_second_value():
    constraints = [_byte(12) == 8, _byte(13) == 0]
    m = _model(*constraints, _src_mac() == 0)
    assert _flipped(m, _src_mac(), 0, constraints)
    assert m.eval(_src_mac(), model_completion=True).as_long() == 0  # the model itself is kept


def test_a_byte_the_constraints_fix_gives_none():
    constraints = [_byte(11) == 0x10]
    m = _model(*constraints)
    assert not _flipped(m, _src_mac(), m.eval(_src_mac(), model_completion=True).as_long(), constraints)


def test_a_byte_read_at_a_computed_offset_counts():
    """The constraints read byte 11 through a symbolic index that the model makes 11: the
    flipped model breaks them, so no second value is claimed."""
    i = z3.BitVec("i", 64)
    constraints = [z3.ULE(i, 11), z3.UGE(i, 11), PACKET[i] == 0x20]
    m = _model(*constraints)
    assert not _flipped(m, _src_mac(), m.eval(_src_mac(), model_completion=True).as_long(), constraints)


def test_a_term_without_fixed_reads_is_left_to_z3():
    i = z3.BitVec("i", 64)
    m = _model(PACKET[i] == 1)
    assert not _flipped(m, z3.ZeroExt(56, PACKET[i]), 1, [])


#: test_alw_ip_fixed_keys_are_the_asked_ones's work, in a fresh process (as `rules` runs:
#: which models extraction starts from depends on the z3 terms made before).
_SAME_KEYS = """
import json, sys
from pathlib import Path
import rules.synthesis as synthesis
from tests.conftest import explored_with_witnesses

e = explored_with_witnesses(Path(sys.argv[1]))
values, asked = synthesis._values, []

def counted(s, term, limit, known=(), more=None):
    if limit == 2:
        asked.append(1)
    return values(s, term, limit, known, more)

synthesis._values = counted

def keys():
    asked.clear()
    s = synthesis.Synthesizer(e, (), {})
    return {p.id: repr(s._fixed_keys(p)) for p in e.paths}, len(asked)

new, new_asked = keys()
synthesis._flipped = lambda *args: False
old, old_asked = keys()
print(json.dumps({"new": new, "old": old, "new_asked": new_asked, "old_asked": old_asked}))
"""


def test_alw_ip_fixed_keys_are_the_asked_ones():
    root = Path(__file__).resolve().parent.parent
    path = need_object(corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_ip.o")
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.run(
        [sys.executable, "-c", _SAME_KEYS, str(path)], cwd=root, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["new"] == got["old"]
    assert got["new_asked"] < got["old_asked"], "no second value found by evaluation: nothing compared"
