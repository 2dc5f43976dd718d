"""LPM aggregation (rules/lpmagg.py): hand-derived small cases, a brute-force longest match
written here as the definition, z3's equality proof (and that it catches wrong answers), and
the kernel as the oracle: lpm_src_block with the same trie entries, run on frames from in and
around every prefix, drops exactly what the printed aggregated script drops (tests/oracles/tcflower)."""

from __future__ import annotations

import dataclasses
import itertools
import random
import socket
import struct
from functools import cache

import pytest

import corpus
from analyzer import kernel
from analyzer.explore import Options, explore
from analyzer.xdp import VERDICTS
from lifter.program import load_object
from rules import ruleset
from rules.filled import finish_filled
from rules.lpmagg import FALLTHROUGH, aggregate, proven_equal
from rules.mapcontents import MapContents, MapEntries
from rules.templates import fill, find_templates
from tests.conftest import need_object
from tests.oracles import tcflower
from tests.test_kernel_runner import kernel_ready


def a(text: str) -> int:
    return int.from_bytes(socket.inet_aton(text), "big")


def longest(rules: dict[tuple[int, int], str], addr: int, width: int):
    """The definition: among the prefixes covering addr, the longest one's label."""
    best = None
    for (value, plen), label in rules.items():
        mask = ((1 << plen) - 1) << (width - plen)
        if addr & mask == value and (best is None or plen > best[0]):
            best = (plen, label)
    return FALLTHROUGH if best is None else best[1]


HAND = [
    # two halves of a /24, same decision: one /24
    ({(a("10.0.0.0"), 25): "drop", (a("10.0.0.128"), 25): "drop"}, [(a("10.0.0.0"), 24, "drop")]),
    # a longer prefix with the same decision inside a shorter one adds nothing
    ({(a("10.0.0.0"), 16): "drop", (a("10.0.7.0"), 24): "drop"}, [(a("10.0.0.0"), 16, "drop")]),
    # a /24 pass inside a /16 drop stays a longer prefix (2 rules, not the 8 of a split)
    (
        {(a("10.0.0.0"), 16): "drop", (a("10.0.1.0"), 24): "pass"},
        [(a("10.0.0.0"), 16, "drop"), (a("10.0.1.0"), 24, "pass")],
    ),
    # /24 pass over a /25 drop and a /26 drop: three quarters drop -> /24 drop, the last quarter pass
    (
        {(a("10.0.0.0"), 24): "pass", (a("10.0.0.0"), 25): "drop", (a("10.0.0.128"), 26): "drop"},
        [(a("10.0.0.0"), 24, "drop"), (a("10.0.0.192"), 26, "pass")],
    ),
    # three quarters drop with nothing in the last: no rule can say "fall through", so 2 stay
    (
        {(a("10.0.0.0"), 25): "drop", (a("10.0.0.128"), 26): "drop"},
        [(a("10.0.0.0"), 25, "drop"), (a("10.0.0.128"), 26, "drop")],
    ),
    ({}, []),
]


@pytest.mark.parametrize("rules, expected", HAND)
def test_hand_derived(rules, expected):
    got = aggregate(rules, 32)
    assert got == expected
    assert proven_equal(rules, got, 32)


def test_proof_catches_wrong_answers():
    rules, good = HAND[2]
    assert not proven_equal(rules, good[:1], 32)  # the hole left out
    assert not proven_equal(rules, [(a("10.0.0.0"), 16, "drop"), (a("10.0.1.0"), 24, "drop")], 32)
    assert not proven_equal(rules, [(a("10.0.0.0"), 15, "drop"), (a("10.0.1.0"), 24, "pass")], 32)


def test_proof_of_a_large_sparse_set_still_sees_one_difference():
    """Regions both sides hold alike skip the query: a difference deep in a large sparse set
    (one /32 left out, one relabelled, one /31 for a /32) is still found."""
    rng = random.Random(7)
    rules = {(x, 32): "drop" for x in rng.sample(range(1 << 32), 2000)}
    got = aggregate(rules, 32)
    assert proven_equal(rules, got, 32)
    mid = sorted(got)[1000]
    assert not proven_equal(rules, [r for r in got if r != mid], 32)
    assert not proven_equal(rules, [r if r != mid else (r[0], r[1], "pass") for r in got], 32)
    wider = (mid[0] & ~1, 31, "drop")
    assert (mid[0] ^ 1, 32) not in rules  # so the /31 covers one more address
    assert not proven_equal(rules, [r if r != mid else wider for r in got], 32)


def test_random_tries_equal_and_minimal():
    """Width 8 (every address checked against the definition) and width 3 (every smaller
    rule set searched: none gives the same answers, so the result is minimal)."""
    rng = random.Random(5)
    for width, trials in ((8, 300), (3, 120)):
        space = [(v << (width - p), p) for p in range(width + 1) for v in range(1 << p)]
        for _ in range(trials):
            rules = {rng.choice(space): rng.choice("ab") for _ in range(rng.randint(0, 6))}
            got = aggregate(rules, width)
            as_dict = {(v, p): lab for v, p, lab in got}
            assert len(as_dict) == len(got) and all(lab != FALLTHROUGH for lab in as_dict.values())
            answers = [longest(rules, x, width) for x in range(1 << width)]
            assert [longest(as_dict, x, width) for x in range(1 << width)] == answers
            assert proven_equal(rules, got, width)
            if width == 3:
                for k in range(len(got)):
                    for ps in itertools.combinations(space, k):
                        for labels in itertools.product("ab", repeat=k):
                            smaller = dict(zip(ps, labels))
                            assert [longest(smaller, x, width) for x in range(8)] != answers, (rules, smaller)


# --- the template level and the kernel --------------------------------------------------------

ENTRIES = [("10.1.2.0", 25), ("10.1.2.128", 25), ("10.1.3.0", 24), ("10.9.0.0", 16), ("10.9.5.0", 24)]


@cache
def _built():
    path = need_object(corpus.BUILD_DIR / "clang" / "lpm_src_block.o")
    obj = load_object(path)
    e = explore(obj, obj.programs[0], Options())
    rs = ruleset.build(e, ())
    templates, _ = find_templates(rs.synth, 1, 1)
    return path, e, rs, templates


def _keys():
    return [struct.pack("<I", plen) + socket.inet_aton(addr) for addr, plen in ENTRIES]


def _script(aggregate_: bool):
    path, e, rs, templates = _built()
    m = next(m for m in e.obj.maps if m.name == "blocked_prefixes")
    contents = MapContents(
        {m.name: MapEntries(m.name, m.type.id, m.key_size, m.value_size, {k: (b"\1",) for k in _keys()})}
    )
    filled = fill(templates, contents, aggregate_)
    static = rs.finish("eth0", "skip_sw")
    got = finish_filled(static, rs.synth, filled, contents, "eth0", "skip_sw", 512)
    return filled, got, "\n".join(static + got.lines)


def _frame(src: int) -> bytes:
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 28, 1, 0, 64, 17, 0, src.to_bytes(4, "big"), socket.inet_aton("10.0.0.1")
    )
    udp = struct.pack("!HHHH", 1000, 53, 8, 0)
    return (bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + udp).ljust(60, b"\0")


def test_lpm_level_aggregated_and_kernel_agrees():
    """Five trie entries -> 10.1.2.0/23 and 10.9.0.0/16 (hand: the /25 halves and the next /24
    make a /23; 10.9.5.0/24 lies inside 10.9.0.0/16 with the same decision); the printed
    script proves with the contents; the kernel, with the same five entries in the trie,
    drops exactly the frames the printed script drops."""
    exact, _, _ = _script(False)
    assert len(exact.filters) == 5
    filled, got, text = _script(True)
    lines = [x.split(" skip_sw ", 1)[1] for x in text.splitlines() if x.startswith("filter ")]
    assert lines == ["src_ip 10.1.2.0/23 action drop", "src_ip 10.9.0.0/16 action drop"]
    assert filled.aggregated["blocked_prefixes"] == (5, 2, True)
    assert got.proved is True
    assert {s for f in got.filters for s in f.sources} == {("blocked_prefixes", k) for k in _keys()}
    oracle = tcflower.parse(text)
    rng = random.Random(3)
    srcs = []
    for addr, plen in ENTRIES + [("10.1.4.0", 24), ("10.8.255.0", 24), ("10.10.0.0", 16)]:
        base, size = a(addr), 1 << (32 - plen)
        srcs += [base, base + size - 1, base - 1, base + size] + [base + rng.randrange(size) for _ in range(6)]
    frames = [_frame(s) for s in srcs]
    want = ["DROP" if tcflower.run(oracle, f) == ("drop",) else "PASS" for f in frames]
    assert want.count("DROP") > 20 and want.count("PASS") > 10
    kernel_ready()
    path, e, _, _ = _built()
    with kernel.load(path, programs=[e.program.name]) as loaded:
        for k in _keys():
            loaded.map_update("blocked_prefixes", k, b"\1")
        got_k = [VERDICTS.get(loaded.run(e.program.name, f).retval) for f in frames]
    assert got_k == want


# --- the path-compressed trie against the full one ----------------------------------------------


@dataclasses.dataclass
class _FullNode:
    label: object = FALLTHROUGH
    has_entry: bool = False
    down: object = FALLTHROUGH
    kids: list = dataclasses.field(default_factory=lambda: [None, None])
    cand: frozenset = frozenset()


def full_trie_aggregate(rules, width):
    """ORTC on the full binary trie, one node per prefix bit: rules/lpmagg.py's algorithm before
    it was path-compressed (commit c9df0d8), kept here as the reference its output must equal."""
    root = _FullNode()
    for (value, plen), label in rules.items():
        node = root
        for depth in range(plen):
            bit = value >> (width - 1 - depth) & 1
            if node.kids[bit] is None:
                node.kids[bit] = _FullNode()
            node = node.kids[bit]
        node.label, node.has_entry = label, True

    def candidates(node, inherited):
        node.down = node.label if node.has_entry else inherited
        sets = []
        for kid in node.kids:
            if kid is None:
                sets.append(frozenset((node.down,)))
            else:
                candidates(kid, node.down)
                sets.append(kid.cand)
        if FALLTHROUGH in sets[0] | sets[1]:
            node.cand = frozenset((FALLTHROUGH,))
        else:
            node.cand = (sets[0] & sets[1]) or (sets[0] | sets[1])

    def choose(node, inherited, value, depth):
        if inherited in node.cand:
            here = inherited
        else:
            here = min(node.cand, key=repr)
            out.append((value, depth, here))
        if depth == width:
            return
        for bit, kid in enumerate(node.kids):
            at = value | bit << (width - 1 - depth)
            if kid is not None:
                choose(kid, here, at, depth + 1)
            elif node.down != here and node.kids != [None, None]:
                out.append((at, depth + 1, node.down))

    out = []
    candidates(root, FALLTHROUGH)
    choose(root, FALLTHROUGH, 0, 0)
    out.sort(key=lambda r: (r[1], r[0]))
    return out


def _random_rules(rng, width):
    """Prefixes clustered so they nest and neighbour: a few random bases, each with prefixes of
    random lengths at and around it (siblings, holes of another label, chains of one-kid
    nodes), labels from two or three actions."""
    rules = {}
    labels = ("drop", "pass", "redirect")[: rng.choice((1, 2, 3))]
    for _ in range(rng.randint(1, 4)):
        base = rng.getrandbits(width)
        lo = rng.randint(0, width)
        for _ in range(rng.randint(0, 30)):
            plen = rng.randint(lo, width)
            v = (base ^ rng.getrandbits(max(0, plen - lo)) << (width - plen)) & ~((1 << (width - plen)) - 1)
            rules[(v & ((1 << width) - 1), plen)] = rng.choice(labels)
    return rules


@pytest.mark.parametrize("width", [8, 32, 128])
def test_path_compressed_equals_full_trie(width):
    """Several hundred random sets per width (IPv4, IPv6 and a small space): the same prefixes in
    the same order as the full trie's ORTC; width 8 also against the brute-force definition."""
    rng = random.Random(width)
    for _ in range(300 if width < 128 else 150):
        rules = _random_rules(rng, width)
        got = aggregate(rules, width)
        assert got == full_trie_aggregate(rules, width), rules
        if width == 8:
            as_dict = {(v, p): lab for v, p, lab in got}
            assert all(longest(as_dict, x, 8) == longest(rules, x, 8) for x in range(256))
