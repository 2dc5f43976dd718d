"""The suggestions' shortcut (rules/counterexample.py `mac_twin`): a `protocol all` block
without keys, where a path's witness of another outcome keeps it whatever its MAC
addresses, is never proved under the assumption, so its shield loop is not run.

On xdp-filter (Debian's libxdp1) every block a suggestion tries is such a block, under
no-ip-options and no-fragments alike: there the shortcut must apply (else it saves nothing),
and the shield loop it skips, run anyway, must end unproved with shields on src_mac and
dst_mac only (the premise of mac_twin's argument). tests/data/mac_pass.c has a keyless
block that does prove under no-ip-options (a shield on one source MAC): the path that
passes that MAC satisfies the not-proved query with its own MACs, but not with others, so
it is no twin; a shortcut that only evaluated the witness (no question over the MAC bytes)
would drop the suggestion the report makes there. Where `keyless` says a path's block is
such a block without extracting it (no-fragments, which the build cannot share), extraction
must find that block.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import z3
from conftest import CLANG, explored_with_witnesses, require_tool

import corpus
from analyzer.classify import classes
from analyzer.fields import frame
from rules.counterexample import RULES_OUT, examples, keyless, mac_twin
from rules.reasons import account
from rules.ruleset import build
from rules.synthesis import ASSUMPTIONS, DEFAULT_ASSUMPTIONS, Block, Outcome

#: xdp-filter objects whose suggestion tries are keyless blocks (one under both assumptions).
STEMS = ("xdpfilt_alw_tcp", "xdpfilt_dny_ip")


def _tries(e, every: bool = False):
    """The build's rule set, the examples (with their suggestions) and, per assumption a
    suggestion tries for a path, (its synthesizer, the path, the path's block under it).
    `every`: each assumption not yet made, for each path a suggestion tries one for, whatever
    its frame's classes (which ones a suggestion tries depends on the frame)."""
    rs = build(e, ())
    rs.finish("eth0", "skip_sw")
    fates = account(e, rs, classes(e)[1])
    found = examples(rs, fates)
    codes = {f.path: f.reason.code for f in fates if f.reason is not None}
    free = [a for a in ASSUMPTIONS if a not in DEFAULT_ASSUMPTIONS]
    synths, tries = {}, []
    for pid, ex in sorted(found.items()):
        if ex.kind != "differs" or codes.get(pid) not in ("atypical-packets", "not-expressible"):
            continue
        wanted = free if every else [RULES_OUT.get(c) for c in frame(ex.frame).classes]
        for a in dict.fromkeys(wanted):
            if a not in free:
                continue
            s = synths.setdefault(a, rs.synth.with_assumption(a))
            outcome = s.outcomes[pid]
            block = s.extract(s.e.paths[pid], outcome, quiet=True) if isinstance(outcome, Outcome) else None
            if block is not None:
                tries.append((s, pid, block))
    return rs, found, tries


def _keyless_agrees(rs, tries) -> int:
    """For every try: where `keyless` says the path's block under the assumption is `protocol
    all` without keys (so `_suggest` does not extract it), extraction (done here) finds
    that block. Returns how many tries it said so of."""
    said = 0
    for s, pid, block in tries:
        if keyless(s, s.e.paths[pid], block.outcome, rs.synth.typical_models.get(pid)):
            said += 1
            assert (block.protocol, block.sets, block.masked, block.set_masks) == ("all", {}, {}, {}), (s.assume, pid)
    return said


def _copy(b: Block) -> Block:
    return Block(b.protocol, dict(b.sets), b.outcome, list(b.paths))


@pytest.mark.parametrize("stem", STEMS)
def test_xdp_filter_blocks_have_a_mac_twin_and_do_not_prove(stem):
    e = explored_with_witnesses(corpus.EXTERNAL_DIR / "libxdp1" / f"{stem}.o")
    # every assumption for every path a suggestion tries one for: the report's own frames
    # (their free bytes 0, analyzer/satmodel.py `plainest`) are classed `malformed` or `IP
    # options` only, so it tries no-ip-options alone; no-fragments' blocks are such blocks too
    rs, found, tries = _tries(e, every=True)
    assert not any(ex.suggestion for ex in found.values())
    # extraction skipped under no-fragments (not shared with the build's) for some paths
    assert _keyless_agrees(rs, tries) > 0
    assert tries and {s.assume[-1] for s, _, _ in tries} >= {"no-ip-options", "no-fragments"}
    proved_shapes = set()
    for s, pid, block in tries:
        assert block.protocol == "all" and not block.sets and not block.masked and not block.set_masks
        assert mac_twin(s, block), (s.assume, pid)
        shape = (s.assume, block.outcome)
        if shape in proved_shapes:
            continue
        proved_shapes.add(shape)
        b = _copy(block)
        s.prove(b, [])  # what the shortcut skips: never proved, shields on the MACs only
        assert not b.proved
        assert b.shields and all(m.protocol == "all" for m in b.shields)
        assert all(name in ("src_mac", "dst_mac") for m in b.shields for name, _ in m.keys), b.shields


def _compiled(tmp_path: Path, name: str) -> Path:
    obj = tmp_path / f"{name}.o"
    source = Path(__file__).resolve().parent / "data" / f"{name}.c"
    include = [f"-I{corpus.CORPUS_DIR / 'include'}", "-I/usr/include/x86_64-linux-gnu"]
    subprocess.run(
        [require_tool(CLANG), "-O2", "-g", "-target", "bpf", *include, "-c", str(source), "-o", str(obj)],
        check=True,
        capture_output=True,
    )
    return obj


def test_a_keyless_block_that_proves_has_no_mac_twin(tmp_path):
    e = explored_with_witnesses(_compiled(tmp_path, "mac_pass"))
    rs, found, tries = _tries(e)
    _keyless_agrees(rs, tries)
    suggested = {pid for pid, ex in found.items() if ex.suggestion == "no-ip-options"}
    assert suggested and suggested == {pid for s, pid, _ in tries if s.assume[-1] == "no-ip-options"}
    keyless = 0
    for s, pid, block in tries:
        b = _copy(block)
        s.prove(b, [])
        twin = mac_twin(s, block)
        assert not (twin and b.proved), (s.assume, pid)
        if s.assume[-1] != "no-ip-options" or block.protocol != "all" or block.sets or block.masked:
            continue  # (no-fragments: packets with options pass whatever their MACs)
        # the shape alone would take the shortcut: a keyless `protocol all` block that proves
        keyless += 1
        assert not twin and b.proved and any(name == "src_mac" for m in b.shields for name, _ in m.keys)
        # and a witness of another outcome holds the not-proved query with its own MACs:
        # only the question over every MAC address tells it is no twin
        bad = z3.And(*s.env, block.formula(s.d), z3.Not(s.good(block.outcome)))
        assert any(
            p.witness is not None
            and s.outcomes[p.id] != block.outcome
            and z3.is_true(p.witness.eval(bad, model_completion=True))
            for p in e.paths
        )
    assert keyless


def test_a_block_with_keys_is_not_taken_for_a_keyless_one(tmp_path):
    """tests/data/udp_drop.c: its UDP path's block under no-ip-options is `protocol ip` with
    ip_proto udp, and it proves (the suggestion); its condition reads no MAC, so only the
    protocol (IPv4, a family's) tells `keyless` it is not the keyless block. The other DROP
    paths' keyless block under no-fragments has a twin (a TTL-1 packet passes whatever its
    MACs). Every assumption is tried for every path (`every`): path 4's frame is only
    `malformed` (its bytes that no constraint needs are 0, analyzer/satmodel.py
    `plainest`), so the report itself tries no-ip-options alone there; z3's own frame had a
    fragment field set for nothing, and no-fragments was tried for it."""
    e = explored_with_witnesses(_compiled(tmp_path, "udp_drop"))
    rs, found, tries = _tries(e, every=True)
    suggested = {pid: ex.suggestion for pid, ex in found.items() if ex.suggestion}
    assert suggested == {2: "no-ip-options"}
    _keyless_agrees(rs, tries)
    (s, _, block), *_ = [x for x in tries if x[1] == 2 and x[0].assume[-1] == "no-ip-options"]
    assert block.protocol == "ip" and block.sets
    twins = 0
    for s, pid, block in tries:
        b = _copy(block)
        s.prove(b, [])
        twin = mac_twin(s, block)
        assert not (twin and b.proved), (s.assume, pid)
        twins += twin
    assert twins
