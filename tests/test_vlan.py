"""Issue 14 item 2: VLAN/QinQ keys, unions of flag masks, ip_flags, ICMPv6 and IPv6 prefixes.

The filters `rules` prints for the corpus programs that decide on tags, flags, fragments and
ICMPv6 are compared with filters derived by hand from the C sources; hand-built frames
(tagged, QinQ, three tags, IPv6 extension headers, fragments) are classified by the printed
script through the independent oracle (tests/oracles/tcflower.py) and by the program in the
kernel (BPF_PROG_TEST_RUN): a printed drop is always a kernel drop, and the hand-derived
action is what the script does. The dissector model (rules/dissector.py) and the oracle's own
dissector must read the same keys from those frames.
"""

from __future__ import annotations

import struct
from functools import cache

import pytest

import corpus
from analyzer import kernel
from analyzer.exploration import VERDICTS
from analyzer.explore import explore
from lifter.program import load_object
from rules import output, ruleset
from rules.dissector import dissect_concrete
from tests.conftest import require
from tests.oracles import tcflower
from tests.test_kernel_runner import kernel_ready

ASSUME = {"icmpv6_filter": ("no-ip-options", "no-ipv6-ext")}

#: Per program, the filters a reader of the C source expects (protocol, keys as tc prints
#: them, action), in any order; the script may add pass shields only where listed.
EXPECTED = {
    "vlan_tags": {
        ("802.1Q", "vlan_id 666", "drop"),
        ("802.1ad", "vlan_id 666", "drop"),
        *{
            (p, f"{chain} dst_ip 10.0.0.1", "drop")
            for p in ("802.1Q", "802.1ad")
            for chain in (
                "vlan_ethtype ip",
                "vlan_ethtype 802.1Q cvlan_ethtype ip",
                "vlan_ethtype 802.1ad cvlan_ethtype ip",
            )
        },
        ("ip", "dst_ip 10.0.0.1", "drop"),
    },
    "qinq_tags": {
        ("802.1Q", "vlan_prio 1 vlan_ethtype ipv6", "drop"),
        ("802.1ad", "vlan_id 100 vlan_ethtype 802.1Q cvlan_id 200 cvlan_prio 5", "drop"),
    },
    "tcp_flags": {("ip", "ip_proto tcp tcp_flags 0x3/0x3", "drop"), ("ip", "ip_proto tcp tcp_flags 0x29/0x29", "drop")},
    "ip_fragments": {("ip", "ip_flags frag", "drop")},
    "icmpv6_filter": {
        ("ipv6", "src_ip 2001:db8:bad::/48", "drop"),
        ("ipv6", "ip_proto icmpv6 type 128", "drop"),
        ("ipv6", "ip_proto icmpv6 type 1 code 4", "drop"),
    },
}


def _path(stem: str):
    path = corpus.BUILD_DIR / "clang" / f"{stem}.o"
    require(path.is_file(), f"{path} is not built")
    return path


@cache
def _script(stem: str) -> tuple[str, str]:
    """(program name, printed script) of the object's XDP program."""
    path = _path(stem)
    obj = load_object(path)
    (prog,) = [p for p in obj.programs if p.is_xdp]
    e = explore(obj, prog)
    rs = ruleset.build(e, ASSUME.get(stem, ("no-ip-options",)), dev="eth0")
    assert rs.unproved == 0
    return prog.name, output.tc_script(e, rs, "eth0", "skip_sw", explain=False)


def _filters(text: str) -> set[tuple[str, str, str]]:
    out = set()
    for line in text.splitlines():
        if line.startswith("filter add"):
            words = line.split()
            proto = words[words.index("protocol") + 1]
            keys = line.split(" skip_sw ", 1)[1].split(" action ")[0]
            out.add((proto, keys, line.split(" action ", 1)[1]))
    return out


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_filters_as_derived_by_hand(stem):
    """Exactly the hand-derived filters (no shield is needed for these programs)."""
    _, text = _script(stem)
    assert _filters(text) == EXPECTED[stem]


# ---------------------------------------------------------------- frames


def _eth(tags: list[tuple[int, int]], ethertype: int, payload: bytes) -> bytes:
    """dst, src, then (tpid, tci) per tag, the ethertype and the payload, padded to 60."""
    head = bytes.fromhex("020000000002020000000001")
    for tpid, tci in tags:
        head += struct.pack("!HH", tpid, tci)
    return (head + struct.pack("!H", ethertype) + payload).ljust(60, b"\0")


def _ip4(dst: int, proto: int = 17, frag: int = 0, l4: bytes = b"\0" * 8) -> bytes:
    return (
        struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, frag, 64, proto, 0, bytes(4), dst.to_bytes(4, "big"))
        + l4
    )


def _tcp(flags: int, doff: int = 5) -> bytes:
    return struct.pack("!HHIIBBHHH", 1000, 80, 0, 0, doff << 4, flags, 1024, 0, 0)


def _ip6(nexthdr: int, payload: bytes, src: str = "2001:db8::2") -> bytes:
    import ipaddress

    s = ipaddress.IPv6Address(src).packed
    d = ipaddress.IPv6Address("2001:db8::1").packed
    return struct.pack("!IHBB", 6 << 28, len(payload), nexthdr, 64) + s + d + payload


def _ext(nexthdr: int, body: bytes = b"\0" * 6) -> bytes:
    """A hop-by-hop/routing/destination options header of 8 bytes."""
    return struct.pack("!BB", nexthdr, 0) + body


Q, AD = 0x8100, 0x88A8
DST = 0x0A000001
#: (program, frame, what the printed script does by hand)
FRAMES = [
    ("vlan_tags", _eth([(Q, 666)], 0x0800, _ip4(0x0A000002)), "drop"),
    ("vlan_tags", _eth([(AD, 666), (Q, 5)], 0x0800, _ip4(0x0A000002)), "drop"),
    ("vlan_tags", _eth([(AD, 7), (Q, 666)], 0x0800, _ip4(0x0A000002)), "pass"),  # 666 is the inner tag
    ("vlan_tags", _eth([(Q, 7)], 0x0800, _ip4(DST)), "drop"),
    ("vlan_tags", _eth([(AD, 7), (AD, 8)], 0x0800, _ip4(DST)), "drop"),
    ("vlan_tags", _eth([(Q, 7), (Q, 8), (Q, 9)], 0x0800, _ip4(DST)), "pass"),  # three tags: the program passes
    ("vlan_tags", _eth([], 0x0800, _ip4(DST)), "drop"),
    ("vlan_tags", _eth([(Q, 7 | 5 << 13)], 0x86DD, _ip6(17, b"\0" * 8)), "pass"),
    ("qinq_tags", _eth([(AD, 100), (Q, 200 | 5 << 13)], 0x0800, _ip4(DST)), "drop"),
    ("qinq_tags", _eth([(AD, 100), (Q, 200 | 4 << 13)], 0x0800, _ip4(DST)), "pass"),
    ("qinq_tags", _eth([(AD, 100), (AD, 200 | 5 << 13)], 0x0800, _ip4(DST)), "pass"),  # inner TPID 802.1ad
    ("qinq_tags", _eth([(Q, 100), (Q, 200 | 5 << 13)], 0x0800, _ip4(DST)), "pass"),  # outer 802.1Q
    ("qinq_tags", _eth([(Q, 1 << 13 | 9)], 0x86DD, _ip6(17, b"\0" * 8)), "drop"),
    ("qinq_tags", _eth([(Q, 2 << 13 | 9)], 0x86DD, _ip6(17, b"\0" * 8)), "pass"),
    ("tcp_flags", _eth([], 0x0800, _ip4(DST, 6, l4=_tcp(0x03))), "drop"),
    ("tcp_flags", _eth([], 0x0800, _ip4(DST, 6, l4=_tcp(0x39))), "drop"),
    ("tcp_flags", _eth([], 0x0800, _ip4(DST, 6, l4=_tcp(0x00))), "pass"),  # NULL scan: left to software
    ("tcp_flags", _eth([], 0x0800, _ip4(DST, 6, l4=_tcp(0x12))), "pass"),
    ("tcp_flags", _eth([], 0x0800, _ip4(DST, 6, l4=_tcp(0x03, doff=4))), "pass"),  # flower reads flags 0
    ("ip_fragments", _eth([], 0x0800, _ip4(DST, frag=0x2000)), "drop"),
    ("ip_fragments", _eth([], 0x0800, _ip4(DST, frag=0x0010)), "drop"),
    ("ip_fragments", _eth([], 0x0800, _ip4(DST, frag=0x4000)), "pass"),  # DF only
    ("ip_fragments", _eth([(Q, 3)], 0x0800, _ip4(DST, frag=0x2000)), "pass"),  # tagged: protocol ip misses it
    ("icmpv6_filter", _eth([], 0x86DD, _ip6(58, bytes([128, 0]) + bytes(6))), "drop"),
    ("icmpv6_filter", _eth([], 0x86DD, _ip6(58, bytes([1, 4]) + bytes(6))), "drop"),
    ("icmpv6_filter", _eth([], 0x86DD, _ip6(58, bytes([1, 3]) + bytes(6))), "pass"),
    ("icmpv6_filter", _eth([], 0x86DD, _ip6(17, bytes(8), src="2001:db8:bad:1::9")), "drop"),
    ("icmpv6_filter", _eth([], 0x86DD, _ip6(17, bytes(8), src="2001:db8:bae::9")), "pass"),
    # behind a destination options header flower finds the ICMPv6 echo request, the program does not:
    # the filter drops what the program passes - the case --assume no-ipv6-ext rules out
    ("icmpv6_filter", _eth([], 0x86DD, _ip6(60, _ext(58) + bytes([128, 0]) + bytes(6))), "drop"),
]
#: Frames where the script's drop is not the program's (only under an assumption it made).
ASSUMED_AWAY = {len(FRAMES) - 1}


@pytest.mark.parametrize("i", range(len(FRAMES)), ids=[f"{s}-{n}" for n, (s, _, _) in enumerate(FRAMES)])
def test_frames(i):
    """The oracle runs the printed script on the frame: the hand-derived action; where it
    drops, the kernel runs the program on the frame: XDP_DROP (but for ASSUMED_AWAY)."""
    stem, frame, want = FRAMES[i]
    name, text = _script(stem)
    got = tcflower.run(tcflower.parse(text), frame)
    assert got == (want,)
    if want == "drop":
        kernel_ready()
        with kernel.load(_path(stem), programs=[name]) as loaded:
            verdict = VERDICTS.get(loaded.run(name, frame).retval, "INVALID")
        assert (verdict == "DROP") != (i in ASSUMED_AWAY), verdict


#: Keys both dissectors name the same way.
SHARED = ("vlan_id", "vlan_prio", "vlan_ethtype", "cvlan_id", "cvlan_prio", "cvlan_ethtype", "ip_proto", "ip_flags")


@pytest.mark.parametrize("i", range(len(FRAMES)), ids=[f"{s}-{n}" for n, (s, _, _) in enumerate(FRAMES)])
def test_model_and_oracle_read_the_same_keys(i):
    """rules/dissector.py and the oracle's dissector, written apart, agree on the tag,
    protocol, fragment and ICMP keys of every frame above."""
    frame = FRAMES[i][1]
    model, oracle = dissect_concrete(frame), tcflower.fields(frame)
    for k in SHARED:
        assert model[k] == oracle.get(k, 0), k
    for k in ("type", "code"):
        assert model[f"icmp_{k}"] == oracle.get(k, 0), k
