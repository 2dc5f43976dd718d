"""A synthesizer made by `with_assumption` starts extraction from the typical packets the
build's synthesizer found (`seeds`, rules/synthesis.py), where they satisfy the assumption
too: what it extracts must be what a synthesizer under that assumption extracts on its own.

On xdp-filter (Debian's libxdp1), under no-fragments (which `with_assumption` cannot share
wholesale: typical packets include IPv6 ones with a Fragment header), several paths'
exploration witnesses are not typical or are such IPv6 fragments, and the build's models
of them are not: there the seeded synthesizer asks no check of the path's whole condition.
Each path's blocks and fixed keys (`path_block`'s findings) are compared with a synthesizer
given no seeds; the test also checks that a seed was used (it is not vacuous). The models
are kept in a z3 context of their own (the second test): kept in the main one, they changed
xdpfilt_alw_ip's report (bench/rules_outputs.py compare), as term ids then differ.
"""

from __future__ import annotations

import pytest
import z3
from conftest import explored_with_witnesses

import corpus
from rules.ruleset import build
from rules.synthesis import Outcome, Synthesizer

#: The objects (their paths' witnesses and build models differ in which satisfy no-fragments).
STEMS = ("xdpfilt_alw_tcp", "xdpfilt_dny_udp")


def _found(s: Synthesizer, e) -> dict[int, tuple]:
    """Per path with a rule outcome: its unsplit blocks' keys and its fixed keys under `s`."""
    out = {}
    for p in e.paths:
        o = s.outcomes[p.id]
        if not isinstance(o, Outcome) or o.is_pass:
            continue
        blocks = [repr((b.protocol, b.sets, b.masked, b.set_masks)) for b in s.extract_all(p, o, quiet=True)]
        out[p.id] = (blocks, s._fixed_keys(p))
    return out


@pytest.mark.parametrize("stem", STEMS)
def test_seeded_extraction_is_what_the_assumption_finds(stem):
    e = explored_with_witnesses(corpus.EXTERNAL_DIR / "libxdp1" / f"{stem}.o")
    base = build(e, ()).synth
    seeded = base.with_assumption("no-fragments")
    assert seeded.extracted is not base.extracted  # extracted afresh, from the seeds
    fresh = Synthesizer(e, base.assume + ("no-fragments",), base.ifnames)
    assert fresh.seeds == {}
    # not vacuous: some path's exploration witness does not do under the assumption while
    # the build's model of it does, and the seeded synthesizer starts from that model
    used = [
        p.id
        for p in e.paths
        if fresh._witness(p, fresh.typical) is None
        and p.id in seeded.seeds
        and seeded._witness(p, seeded.typical) is seeded.seeds[p.id]
    ]
    assert used, "no path starts from a seed"
    got = _found(seeded, e)
    assert any(pid in got for pid in used)
    assert got == _found(fresh, e)


def test_kept_models_live_in_their_own_context():
    """The build's models are kept outside z3's main context: kept there, they would keep
    their terms alive and change the ids later terms get, and with them the models later
    queries return (xdpfilt_alw_ip's report changed); seeds come home when used."""
    e = explored_with_witnesses(corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_ip.o")
    base = build(e, ()).synth
    assert base.typical_models
    assert all(m.ctx is not z3.main_ctx() for m in base.typical_models.values())
    seeded = base.with_assumption("no-fragments")
    assert seeded.seeds
    for pid in list(seeded.seeds):
        seeded._witness(e.paths[pid])
        assert seeded.seeds[pid].ctx is z3.main_ctx()
