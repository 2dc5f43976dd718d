"""Map-decided paths (rules/synthesis.py `map_decided`) and prove's early exit on them.

A non-pass path is map-decided when every packet of it gets another outcome with the maps
as a freshly loaded program has them (hash maps empty, arrays zeroed, global data as
written in the object). Expectations are derived by hand from the corpus sources; the
claim is checked on packets by the kernel (a freshly loaded program is in exactly that
state); prove's early exit is compared with the full shield loop it cuts short, and
extraction's shortcut with the maps as loaded with the plain enumeration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import z3

import corpus
from analyzer.symbolic import PACKET, PACKET_LEN
from tests.conftest import corpus_object, explored_with_witnesses, need_object

#: stem -> whether its DROP paths are map-decided, read off the source:
#: - thesis_ddos_blacklist drops on an entry in `blacklist` or `port_blacklist`: with both
#:   maps empty every packet passes;
#: - config_array drops only while config[0].enabled != 0: a zeroed slot passes everything;
#: - hash_counter drops UDP whatever its counter map holds;
#: - globals drops UDP to `blocked_port` while `drop_enabled` (.data, initially 1) is set:
#:   as loaded it still drops.
EXPECTED = {
    "thesis_ddos_blacklist": True,
    "config_array": True,
    "hash_counter": False,
    "globals": False,
}


def _synthesizer(path):
    from rules.synthesis import Synthesizer

    return Synthesizer(explored_with_witnesses(Path(path)), (), {})


def _drop_paths(s):
    return [p for p in s.e.paths if p.verdict == "DROP"]


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_map_decided_drop_paths_are_the_hand_derived_ones(stem):
    s = _synthesizer(corpus_object(stem))
    drops = _drop_paths(s)
    assert drops, stem
    assert {p.id: s.map_decided(p) for p in drops} == {p.id: EXPECTED[stem] for p in drops}


def _packets(s, p, n: int) -> list[bytes]:
    """Up to `n` different frames of path `p` (z3 models of its condition, any map contents)."""
    sv = z3.Solver()
    sv.add(*s.env, s.conds[p.id])
    out = []
    while len(out) < n and sv.check() == z3.sat:
        m = sv.model()
        length = m.eval(PACKET_LEN, model_completion=True).as_long()
        data = bytes(m.eval(PACKET[z3.BitVecVal(i, 64)], model_completion=True).as_long() for i in range(length))
        out.append(data)
        sv.add(z3.Or(PACKET_LEN != length, *[PACKET[z3.BitVecVal(i, 64)] != b for i, b in enumerate(data)]))
    return out


@pytest.mark.parametrize("stem", [s for s, decided in sorted(EXPECTED.items()) if decided])
def test_kernel_gives_packets_of_map_decided_paths_another_verdict_as_loaded(stem):
    """Frames of each map-decided DROP path, run by BPF_PROG_TEST_RUN on the object freshly
    loaded (its maps as `map_decided` assumes them), are not dropped."""
    from analyzer import kernel
    from analyzer.xdp import VERDICTS
    from tests.test_kernel_runner import kernel_ready

    kernel_ready()
    path = corpus_object(stem)
    s = _synthesizer(path)
    checked = 0
    with kernel.load(path) as loaded:
        for p in _drop_paths(s):
            assert s.map_decided(p)
            for frame in _packets(s, p, 4):
                got = VERDICTS.get(loaded.run(s.e.program.name, frame).retval)
                assert got not in ("DROP", "ABORTED"), (stem, p.id, frame.hex(), got)
                checked += 1
    assert checked >= 4


#: test_prove_gives_up_map_decided_blocks_as_the_whole_shield_loop_does's work, in a fresh
#: process (the shields a counterexample leads to are read off models of the main z3
#: context, so the rounds a block takes may depend on the tests before, not in `rules`).
_SAME_OUTCOME = """
import json, sys
from pathlib import Path
import rules.synthesis as synthesis
from tests.conftest import explored_with_witnesses

e = explored_with_witnesses(Path(sys.argv[1]))

def outcome(fired):
    s = synthesis.Synthesizer(e, (), {})
    syn = s.run()
    fired += [b.paths for b in s.failed.values() if b.why is synthesis.MAP_DECIDED]
    kept = [repr((b.protocol, sorted(b.sets.items()), b.outcome, b.paths)) for b in syn.blocks]
    return kept, sorted(p for paths, _ in syn.software for p in paths), sorted(s.failed)

early, late = [], []
new = outcome(early)
synthesis.MAP_DECIDED_ROUND = synthesis.MAX_SHIELDS  # never reached
synthesis.EARLY_DECIDED_RLIMIT = 0  # not asked before the first round either
old = outcome(late)
print(json.dumps({"early": early, "late": late, "new": new, "old": old}))
"""


def _fresh(code: str, path: Path) -> dict:
    """The JSON `code` prints, run in a fresh process on object `path` (as `rules` runs)."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_prove_gives_up_map_decided_blocks_as_the_whole_shield_loop_does():
    """On xdp-filter's alw_ip (Debian's libxdp1), whose IPv4 and IPv6 address blocks are
    map-decided, the early exit fires and the outcome is what the full loop of MAX_SHIELDS
    rounds gives: the same blocks proved (none), the same paths given up."""
    got = _fresh(_SAME_OUTCOME, need_object(corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_ip.o"))
    assert got["early"], "the early exit did not fire: nothing compared"
    assert not got["late"]
    assert got["new"] == got["old"]


#: The start of the two scripts below: prove's z3 queries (isolated calls that are not
#: map_decided's own) counted in `asked` by the block they were asked for.
_COUNTING = """
import collections, json, sys
from pathlib import Path
import rules.synthesis as synthesis
from tests.conftest import explored_with_witnesses

isolated, prove, decided = synthesis.isolated, synthesis.Synthesizer.prove, synthesis.Synthesizer.map_decided
proving, asked, deciding = [], collections.Counter(), []

def counted(*args, **kw):
    if proving and not deciding:
        asked[repr(proving[-1])] += 1
    return isolated(*args, **kw)

def proved(self, b, earlier):
    proving.append(b.paths)
    try:
        return prove(self, b, earlier)
    finally:
        proving.pop()

def decides(self, *args):
    deciding.append(1)
    try:
        return decided(self, *args)
    finally:
        deciding.pop()

synthesis.isolated, synthesis.Synthesizer.prove, synthesis.Synthesizer.map_decided = counted, proved, decides
e = explored_with_witnesses(Path(sys.argv[1]))
"""

#: test_prove_skips_the_last_query_of_a_map_decided_block's work, in a fresh process (as
#: _SAME_OUTCOME).
_SKIPPED = (
    _COUNTING
    + """
synthesis.EARLY_DECIDED_RLIMIT = 0  # the question asked at round MAP_DECIDED_ROUND only

def outcome():
    asked.clear()
    s = synthesis.Synthesizer(e, (), {})
    syn = s.run()
    failed = {
        repr(b.paths): [b.why.code, str(b.why), [repr(m) for m in b.shields], b.why is synthesis.MAP_DECIDED]
        for b in s.failed.values()
    }
    kept = [repr((b.protocol, sorted(b.sets.items()), b.outcome, b.paths, b.shields)) for b in syn.blocks]
    return {"failed": failed, "kept": kept, "asked": dict(asked)}

new = outcome()
synthesis.Synthesizer._decided_left = lambda self, *args: False  # the round's query always asked
old = outcome()
print(json.dumps({"new": new, "old": old}))
"""
)


def test_prove_skips_the_last_query_of_a_map_decided_block():
    """On alw_ip, whose IPv4 and IPv6 address blocks are map-decided, prove gives them up
    (where the question is not asked before the first round: EARLY_DECIDED_RLIMIT 0)
    at round MAP_DECIDED_ROUND without asking that round's proof query (`_decided_left`
    knows it has a counterexample), with what asking it gives: the same blocks given up,
    for the same reason, with the same shields (the frames printed for them are asked
    past those), the same blocks kept; one query fewer per such block."""
    got = _fresh(_SKIPPED, need_object(corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_ip.o"))
    new, old = got["new"], got["old"]
    assert (new["failed"], new["kept"]) == (old["failed"], old["kept"])
    decided = [paths for paths, (_, _, _, is_decided) in new["failed"].items() if is_decided]
    assert decided, "no block given up as map-decided: nothing compared"
    for paths in decided:
        assert new["asked"][paths] == old["asked"][paths] - 1, paths
    assert {k: v for k, v in new["asked"].items() if k not in decided} == {
        k: v for k, v in old["asked"].items() if k not in decided
    }


#: test_key_values_with_the_maps_as_loaded_extracts_the_same_blocks's work, run in a fresh
#: process: which model extraction starts from, and so whether the shortcut applies, depends
#: on the z3 terms made before (other tests), as in `rules` it depends on nothing.
_SAME_BLOCKS = """
import json, sys
from pathlib import Path
import z3
import rules.synthesis as synthesis
from tests.conftest import explored_with_witnesses

e = explored_with_witnesses(Path(sys.argv[1]))
around, answered = synthesis._around, []

def counted(s, model, term, maps=None):
    claim = around(s, model, term, maps)
    if maps is not None and claim is not None and claim is not False:
        answered.append(synthesis.solver(z3.Not(claim), rlimit=synthesis.SHORTCUT_RLIMIT).check() == z3.unsat)
    return claim

def blocks(s):
    out = {}
    for p in s.e.paths:
        o = s.outcomes[p.id]
        if isinstance(o, synthesis.Outcome) and not o.is_pass:
            out[p.id] = repr([(b.protocol, b.sets, b.masked, b.set_masks) for b in s.extract_all(p, o)])
    return out

synthesis._around = counted
new = blocks(synthesis.Synthesizer(e, (), {}))
plain = synthesis._key_values
synthesis._key_values = lambda s, model, term, limit, loaded=(), top=0: plain(s, model, term, limit, (), top)
old = blocks(synthesis.Synthesizer(e, (), {}))
print(json.dumps({"answered": any(answered), "new": new, "old": old}))
"""


@pytest.mark.parametrize("stem", ["xdpfilt_dny_all", "xdpfilt_alw_all"])
def test_key_values_with_the_maps_as_loaded_extracts_the_same_blocks(stem):
    """xdp-filter's _all variants look their MAC list up by src_mac: around a model whose
    map holds that address the key has one value, with the map as loaded every value (in
    allow mode with the other maps as the model has them: an IPv6 or port lookup must still
    hit). The blocks extracted with that shortcut are the ones the plain enumeration (65 z3
    checks a key) gives, and the shortcut did answer for some key (in a fresh process, as
    `rules` runs)."""
    got = _fresh(_SAME_BLOCKS, need_object(corpus.EXTERNAL_DIR / "libxdp1" / f"{stem}.o"))
    assert got["answered"], "the maps-as-loaded shortcut never answered: nothing compared"
    assert got["new"] == got["old"]


#: test_prove_gives_up_cheaply_decided_blocks_before_any_shield_round's work, in a fresh
#: process (as _SAME_OUTCOME): per block given up, why, its shields and the proof queries
#: asked for it (_COUNTING).
_EARLY = (
    _COUNTING
    + """
s = synthesis.Synthesizer(e, (), {})
s.run()
print(json.dumps({
    repr(b.paths): [b.why.code, len(b.shields), asked[repr(b.paths)], b.why is synthesis.MAP_DECIDED]
    for b in s.failed.values()
}))
"""
)


def test_prove_gives_up_cheaply_decided_blocks_before_any_shield_round():
    """On alw_ip, z3 proves each drop path of the IPv4 and IPv6 address blocks map-decided
    within EARLY_DECIDED_RLIMIT (test_map_decided_drop_paths_are_the_hand_derived_ones and the
    kernel check above say what map-decided is): those blocks are given up before their first
    shield round - no shield, no proof query - where the whole loop gave each two shields."""
    got = _fresh(_EARLY, need_object(corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_ip.o"))
    decided = {paths: v for paths, v in got.items() if v[3]}
    assert len(decided) == 2, got
    assert all(
        code == "not-expressible" and shields == 0 and queries == 0 for code, shields, queries, _ in decided.values()
    ), decided
