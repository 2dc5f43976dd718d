"""rules/flower.py, rules/dissector.py and rules/tc.py against things we did not write.

(a) The dissector model on hand-built packets (struct.pack), each expectation derived by hand
    from the header layouts and the kernel functions named in rules/dissector.py.
(b) Every rendered key and value form through the real iproute2 parser (rules/tc.py's netns
    oracle), and deliberately wrong lines that it must refuse.
(c) z3: the compiled evaluator, the z3 formula and the whole-walk formula agree on random
    packets; hand-derived equivalences between matches and raw packet bytes are proved.
"""

from __future__ import annotations

import ipaddress
import random
import struct

import pytest
import z3
from conftest import require, require_tool

from analyzer.symbolic import PACKET, PACKET_LEN
from rules.dissector import dissect, dissect_concrete, evaluate, generic_formula, match_formula
from rules.flower import FLOWER_KEYS, Exact, FlowerMatch, Range, exact, prefix, protocol_name, protocol_number, render

# ----------------------------------------------------------------------------- packets

MAC_D = bytes.fromhex("0a0b0c0d0e0f")
MAC_S = bytes.fromhex("020000000002")


def eth(proto: int, payload: bytes) -> bytes:
    return MAC_D + MAC_S + struct.pack("!H", proto) + payload


def vlan(tci: int, proto: int, payload: bytes) -> bytes:
    return struct.pack("!HH", tci, proto) + payload


def addr4(s: str) -> bytes:
    return ipaddress.IPv4Address(s).packed


def ip4(
    proto: int, payload: bytes, src="10.0.0.1", dst="192.168.1.2", tos=0x10, ttl=64, frag=0, ihl=5, options=b""
) -> bytes:
    hdr = struct.pack(
        "!BBHHHBBH4s4s",
        0x40 | ihl,
        tos,
        20 + len(options) + len(payload),
        7,
        frag,
        ttl,
        proto,
        0,
        addr4(src),
        addr4(dst),
    )
    return hdr + options + payload


def ip6(nexthdr: int, payload: bytes, src="2001:db8::1", dst="2001:db8::2", tclass=0xB8, hlim=33) -> bytes:
    first = (6 << 28) | (tclass << 20) | 0x12345
    return (
        struct.pack("!IHBB", first, len(payload), nexthdr, hlim)
        + ipaddress.IPv6Address(src).packed
        + ipaddress.IPv6Address(dst).packed
        + payload
    )


def ext6(nexthdr: int, payload: bytes, units: int = 0) -> bytes:
    """A HOP/ROUTING/DEST header of (units + 1) * 8 bytes."""
    return struct.pack("!BB", nexthdr, units) + bytes(6 + 8 * units) + payload


def frag6(nexthdr: int, payload: bytes, offset: int = 0, more: bool = True) -> bytes:
    return struct.pack("!BBHI", nexthdr, 0, (offset << 3) | int(more), 0x1234) + payload


def tcp(dport: int, sport: int = 40000, flags: int = 0x02, doff: int = 5) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, doff << 4, flags, 65535, 0, 0) + bytes(4 * max(doff - 5, 0))


def udp(dport: int, sport: int = 5353) -> bytes:
    return struct.pack("!HHHH", sport, dport, 12, 0) + b"ping"


def icmp(type_: int, code: int) -> bytes:
    return struct.pack("!BBHI", type_, code, 0, 0x00010001)


def arp(
    op=1,
    hrd=1,
    pro=0x0800,
    hln=6,
    pln=4,
    sha="00:11:22:33:44:55",
    sip="10.0.0.1",
    tha="00:00:00:00:00:00",
    tip="10.0.0.9",
) -> bytes:
    mac = lambda s: bytes.fromhex(s.replace(":", ""))  # noqa: E731
    return struct.pack("!HHBBH", hrd, pro, hln, pln, op) + mac(sha) + addr4(sip) + mac(tha) + addr4(tip)


TCP4 = eth(0x0800, ip4(6, tcp(22, 1234, flags=0x12)))
UDP4 = eth(0x0800, ip4(17, udp(53)))


def d(packet: bytes) -> dict:
    return dissect_concrete(packet)


def has(packet: bytes, **expected) -> None:
    got = d(packet)
    wrong = {k: (got[k], v) for k, v in expected.items() if got[k] != v}
    assert not wrong, f"(got, expected): {wrong}"


# ----------------------------------------------------------------------------- (a) dissector


def test_plain_tcp4():
    has(
        TCP4,
        reaches_tc=1,
        skb_protocol=0x0800,
        n_proto=0x0800,
        addr_type=2,
        ip_proto=6,
        src_ip=0x0A000001,
        dst_ip=0xC0A80102,
        ip_tos=0x10,
        ip_ttl=64,
        ip_flags=0,
        src_port=1234,
        dst_port=22,
        tcp_flags=0x012,
        icmp_type=0,
        dst_mac=0x0A0B0C0D0E0F,
        src_mac=0x020000000002,
        vlan_id=0,
        vlan_tpid=0,
        arp_op=0,
    )


def test_plain_udp4():
    has(UDP4, ip_proto=17, src_port=5353, dst_port=53, tcp_flags=0)


def test_ipv4_options_move_l4():
    # ihl 7: the TCP header starts at 14 + 28; bytes 34..37 are the options (0x01 NOPs)
    pkt = eth(0x0800, ip4(6, tcp(443, 8080, flags=0x10), ihl=7, options=b"\x01" * 8))
    assert pkt[34:38] == b"\x01\x01\x01\x01"
    has(pkt, src_port=8080, dst_port=443, tcp_flags=0x010)


def test_ipv4_first_fragment_has_no_ports():
    pkt = eth(0x0800, ip4(6, tcp(22), frag=0x2000))  # MF, offset 0
    has(
        pkt,
        ip_flags=0b11,
        src_port=0,
        dst_port=0,
        tcp_flags=0,
        ip_proto=6,
        src_ip=0x0A000001,
        ip_tos=0x10,
        ip_ttl=64,
        n_proto=0x0800,
    )  # tos/ttl are read before the fragment check


def test_ipv4_later_fragment():
    pkt = eth(0x0800, ip4(6, tcp(22), frag=100))  # offset 800 bytes, no MF
    has(pkt, ip_flags=0b01, src_port=0, dst_port=0, tcp_flags=0, ip_proto=6)
    pkt = eth(0x0800, ip4(1, icmp(8, 0), frag=0x2000 | 3))
    has(pkt, ip_flags=0b01, icmp_type=0)


def test_df_is_not_a_fragment():
    has(eth(0x0800, ip4(6, tcp(22), frag=0x4000)), ip_flags=0, dst_port=22)


def test_truncated_tcp():
    full = eth(0x0800, ip4(6, tcp(22, 1234)))
    has(full[: 34 + 19], src_port=1234, dst_port=22, tcp_flags=0)  # 19 of 20 header bytes
    has(full[: 34 + 4], src_port=1234, dst_port=22, tcp_flags=0)
    has(full[: 34 + 3], src_port=0, dst_port=0, tcp_flags=0, ip_proto=6, addr_type=2)
    has(full[: 34 + 20], tcp_flags=0x002)


def test_tcp_doff_below_5_has_no_flags():
    has(eth(0x0800, ip4(6, tcp(22, flags=0x02, doff=4) + bytes(4))), tcp_flags=0, dst_port=22)


def test_ihl_below_5_is_bad():
    pkt = eth(0x0800, ip4(6, tcp(22), ihl=4))
    has(
        pkt,
        n_proto=0x0800,
        addr_type=0,
        ip_proto=0,
        src_ip=0,
        ip_tos=0,
        ip_ttl=0,
        dst_port=0,
        tcp_flags=0,
        skb_protocol=0x0800,
        reaches_tc=1,
    )


def test_truncated_ipv4_header_is_bad():
    has(TCP4[:33], addr_type=0, ip_proto=0, src_ip=0, n_proto=0x0800)
    has(TCP4[:34], addr_type=2, ip_proto=6, dst_port=0)


def test_ipv4_version_is_not_checked():
    pkt = bytearray(TCP4)
    pkt[14] = 0x65  # version 6, ihl 5, still under ethertype IPv4
    has(bytes(pkt), addr_type=2, dst_port=22)


def test_vlan():
    pkt = eth(0x8100, vlan((5 << 13) | 100, 0x0800, ip4(6, tcp(22))))
    has(
        pkt,
        skb_protocol=0x8100,
        vlan_id=100,
        vlan_prio=5,
        vlan_tpid=0x8100,
        vlan_ethtype=0x0800,
        n_proto=0x0800,
        cvlan_tpid=0,
        dst_port=22,
        ip_proto=6,
    )


def test_qinq():
    pkt = eth(0x88A8, vlan((1 << 13) | 10, 0x8100, vlan((7 << 13) | 20, 0x0800, ip4(17, udp(53)))))
    has(
        pkt,
        skb_protocol=0x88A8,
        vlan_id=10,
        vlan_prio=1,
        vlan_tpid=0x88A8,
        vlan_ethtype=0x8100,
        cvlan_id=20,
        cvlan_prio=7,
        cvlan_tpid=0x8100,
        cvlan_ethtype=0x0800,
        n_proto=0x0800,
        dst_port=53,
    )


def test_third_tag_is_skipped():
    inner = vlan(30, 0x0800, ip4(17, udp(53)))
    pkt = eth(0x8100, vlan(10, 0x8100, vlan(20, 0x8100, inner)))
    has(pkt, vlan_id=10, cvlan_id=20, cvlan_ethtype=0x8100, n_proto=0x0800, dst_port=53)


def test_vlan_frames_too_short_never_reach_tc():
    has(eth(0x8100, vlan(5, 0x0800, b"")), reaches_tc=0)  # 18 bytes: skb_vlan_untag needs 20
    has(eth(0x8100, vlan(5, 0x0800, b"\x45\x00")), reaches_tc=1, vlan_id=5, addr_type=0)


def test_second_tag_truncated():
    has(eth(0x8100, vlan(5, 0x8100, b"\x00\x07")), cvlan_tpid=0, cvlan_id=0, n_proto=0x8100)


def test_short_frames():
    has(TCP4[:13], reaches_tc=0)
    has(TCP4[:14], reaches_tc=1, n_proto=0x0800, addr_type=0)


def test_length_field_frames():
    has(eth(0x0040, b"\xff\xff" + bytes(40)), skb_protocol=0x0001, n_proto=0x0001)  # 802.3 raw
    has(eth(0x0040, b"\xaa\xaa" + bytes(40)), skb_protocol=0x0004, n_proto=0x0004)  # 802.2 LLC
    # after skb_vlan_untag(), vlan_set_encap_proto() translates the inner field the same way
    has(eth(0x8100, vlan(5, 0x0040, b"\xff\xff" + bytes(40))), skb_protocol=0x8100, vlan_ethtype=0x0001, n_proto=0x0001)


def test_arp():
    has(
        eth(0x0806, arp()),
        n_proto=0x0806,
        arp_op=1,
        arp_sip=0x0A000001,
        arp_tip=0x0A000009,
        arp_sha=0x001122334455,
        arp_tha=0,
        addr_type=0,
    )
    has(eth(0x0806, arp(op=2)), arp_op=2)


@pytest.mark.parametrize("bad", [dict(hrd=6), dict(pro=0x86DD), dict(hln=8), dict(pln=16), dict(op=3), dict(op=0x0101)])
def test_arp_invalid(bad):
    has(eth(0x0806, arp(**bad)), n_proto=0x0806, arp_op=0, arp_sip=0, arp_sha=0)


def test_arp_truncated():
    has(eth(0x0806, arp())[: 14 + 27], arp_op=0, arp_sip=0, n_proto=0x0806)


def test_ipv6_tcp():
    pkt = eth(0x86DD, ip6(6, tcp(80, 5000, flags=0x18)))
    has(
        pkt,
        n_proto=0x86DD,
        addr_type=3,
        ip_proto=6,
        ip_tos=0xB8,
        ip_ttl=33,
        src_ip6=0x20010DB8000000000000000000000001,
        dst_ip6=0x20010DB8000000000000000000000002,
        src_port=5000,
        dst_port=80,
        tcp_flags=0x018,
        ip_flags=0,
    )


def test_ipv6_extension_headers():
    pkt = eth(0x86DD, ip6(0, ext6(60, ext6(17, udp(53), units=1))))  # HOP(8) + DEST(16) + UDP
    has(pkt, ip_proto=17, dst_port=53, src_port=5353)
    has(pkt[: 14 + 40 + 8 + 16 + 3], ip_proto=17, dst_port=0)
    has(pkt[: 14 + 40 + 8 + 1], ip_proto=60, dst_port=0)  # DEST header does not fit: OUT_BAD


def test_ipv6_fragments():
    first = eth(0x86DD, ip6(44, frag6(6, tcp(22))))
    has(first, ip_flags=0b11, ip_proto=6, dst_port=0, tcp_flags=0, n_proto=0x86DD)
    later = eth(0x86DD, ip6(0, ext6(44, frag6(17, udp(53), offset=10, more=False))))
    has(later, ip_flags=0b01, ip_proto=17, dst_port=0)


def test_icmp():
    has(eth(0x0800, ip4(1, icmp(8, 0))), icmp_type=8, icmp_code=0, src_port=0, ip_proto=1)
    has(eth(0x0800, ip4(1, icmp(3, 13))), icmp_type=3, icmp_code=13)
    has(eth(0x0800, ip4(1, icmp(8, 5)))[: 34 + 7], icmp_type=0, icmp_code=0)
    has(eth(0x86DD, ip6(58, icmp(128, 0))), icmp_type=128, icmp_code=0, ip_proto=58)


def test_encapsulation_stops():
    for proto in (4, 41, 47):
        has(eth(0x0800, ip4(proto, ip4(6, tcp(22)))), ip_proto=proto, n_proto=0x0800, dst_port=0, tcp_flags=0)


def test_mpls_in_ip_changes_n_proto():
    has(eth(0x0800, ip4(137, bytes(8))), n_proto=0x8847, ip_proto=137)
    has(eth(0x0800, ip4(137, bytes(8), frag=0x2000)), n_proto=0x0800)


def test_ah_and_esp_ports_are_spi_halves():
    has(eth(0x0800, ip4(50, struct.pack("!II", 0x11112222, 1))), src_port=0x1111, dst_port=0x2222)
    has(eth(0x0800, ip4(51, struct.pack("!II", 0x33000000, 0x44445555))), src_port=0x4444, dst_port=0x5555)


def test_fresh_where_not_modelled():
    five = ip6(0, ext6(0, ext6(0, ext6(0, ext6(0, ext6(6, tcp(22)))))))
    has(eth(0x86DD, five), ip_proto=None, dst_port=None, addr_type=3, ip_ttl=33)
    four = ip6(0, ext6(0, ext6(0, ext6(6, tcp(22)))))
    has(eth(0x86DD, four), ip_proto=6, dst_port=22)
    pppoe = eth(0x8100, vlan(5, 0x8864, bytes.fromhex("1100000100080021") + ip4(6, tcp(22))))
    has(pppoe, vlan_id=5, vlan_ethtype=0x8864, ip_proto=None, n_proto=None, src_ip=None)
    deep = eth(
        0x8100, vlan(1, 0x8100, vlan(2, 0x8100, vlan(3, 0x8100, vlan(4, 0x8100, vlan(5, 0x0800, ip4(6, tcp(22)))))))
    )
    has(deep, vlan_id=1, cvlan_id=2, ip_proto=None)
    has(eth(0x0800, ip4(33, udp(53))), src_port=None, dst_port=None, ip_proto=33)
    has(eth(0x0800, ip4(136, udp(53))), src_port=None, ip_proto=136)


def test_zero_fields_of_an_absent_layer():
    got = d(eth(0x0806, arp()))
    assert all(got[k] == 0 for k in ("ip_proto", "src_port", "tcp_flags", "ip_flags", "vlan_id"))


# ----------------------------------------------------------------------------- flower table & render


def M(protocol: str, **keys) -> FlowerMatch:
    return FlowerMatch(protocol, tuple(keys.items()))


def X(name: str, value: int) -> Exact:
    return exact(name, value)


def test_protocol_names():
    assert protocol_number("802.1ad") == 0x88A8 and protocol_name(0x86DD) == "ipv6"
    with pytest.raises(ValueError, match="unknown tc protocol"):
        protocol_number("ipx")


def test_render_forms():
    tcp22 = M("ip", ip_proto=X("ip_proto", 6), dst_port=X("dst_port", 22))
    assert render(tcp22) == ["ip_proto", "tcp", "dst_port", "22"]
    m = M(
        "ip",
        tcp_flags=Exact(0x12, 0x3F),
        dst_port=Range(1000, 2000),
        ip_proto=X("ip_proto", 6),
        src_ip=prefix("src_ip", 0x0A010203, 8),
        ip_tos=Exact(0x10, 0xFC),
        ip_flags=Exact(1, 3),
    )
    assert render(m) == [
        "ip_proto",
        "tcp",
        "src_ip",
        "10.0.0.0/8",
        "ip_tos",
        "0x10/0xfc",
        "ip_flags",
        "frag/nofirstfrag",
        "dst_port",
        "1000-2000",
        "tcp_flags",
        "0x12/0x3f",
    ]
    ports = M("ip", ip_proto=X("ip_proto", 17), src_port=Exact(0, 0xFFFF), dst_port=Exact(0x1600, 0xFF00))
    assert render(ports)[2:] == ["src_port", "0/0xffff", "dst_port", "5632/0xff00"]


def test_match_normalises():
    a = M("ip", dst_port=Range(7, 7), ip_proto=X("ip_proto", 6), ip_ttl=Exact(5, 0))
    assert a.keys == (("ip_proto", Exact(6, 0xFF)), ("dst_port", Exact(7, 0xFFFF)))
    assert M("ip", src_ip=Exact(0x0A0000FF, 0xFFFFFF00)).get("src_ip") == Exact(0x0A000000, 0xFFFFFF00)
    assert M("ip", src_ip=Exact(0, 0)).keys  # kept: src_ip /0 makes the filter match nothing


def test_mask_shape():
    a = M("ip", ip_proto=X("ip_proto", 6), dst_port=X("dst_port", 22))
    b = M("ip", ip_proto=X("ip_proto", 17), dst_port=X("dst_port", 53))
    c = M("ip", ip_proto=X("ip_proto", 6), dst_port=Range(1, 5))
    assert a.mask_shape() == b.mask_shape() != c.mask_shape()
    assert a.mask_shape() != M("ipv6", ip_proto=X("ip_proto", 6), dst_port=X("dst_port", 22)).mask_shape()


@pytest.mark.parametrize(
    "protocol, keys, error",
    [
        ("ip", dict(dst_port=X("dst_port", 22)), "needs ip_proto"),
        ("ip", dict(ip_proto=X("ip_proto", 1), dst_port=X("dst_port", 22)), "needs ip_proto"),
        ("ip", dict(ip_proto=X("ip_proto", 17), tcp_flags=X("tcp_flags", 2)), "needs ip_proto 6"),
        ("ipv6", dict(ip_proto=X("ip_proto", 1), icmp_type=X("icmp_type", 8)), "needs ip_proto 58"),
        ("ip", dict(vlan_id=X("vlan_id", 5)), "needs protocol 802.1Q"),
        ("ipv6", dict(src_ip=X("src_ip", 1)), "needs an ip protocol chain"),
        ("arp", dict(ip_tos=X("ip_tos", 1)), "needs an ip or ipv6"),
        ("802.1Q", dict(ip_proto=X("ip_proto", 6)), "needs an ip or ipv6"),
        ("802.1Q", dict(cvlan_id=X("cvlan_id", 6)), "needs vlan_ethtype"),
        (
            "802.1Q",
            dict(vlan_ethtype=X("vlan_ethtype", 0x8100), cvlan_ethtype=X("cvlan_ethtype", 0x8100)),
            "must not be a VLAN",
        ),
        ("ip", dict(src_ip=Exact(0x0A000000, 0xFF00FF00)), "not a prefix"),
        ("ip", dict(ip_proto=Exact(6, 0x0F)), "takes no mask"),
        ("ip", dict(ip_proto=X("ip_proto", 6), dst_port=Range(0, 10)), "starts at 0"),
        ("ip", dict(ip_proto=X("ip_proto", 6), dst_port=Range(9, 3)), "not within"),
        ("ip", dict(ip_proto=X("ip_proto", 6), src_port=X("src_port", 1), dst_port=Range(1, 3)), "cannot share"),
        ("ip", dict(ip_ttl=Range(1, 3)), "no MIN-MAX"),
        ("arp", dict(arp_op=X("arp_op", 3)), "arp_op 3"),
        ("ip", dict(tcp_flagz=X("ip_ttl", 1)), "unknown flower key"),
        ("all", dict(ip_flags=Exact(1, 1)), "needs an ip or ipv6"),
    ],
)
def test_invalid_matches(protocol, keys, error):
    with pytest.raises(ValueError, match=error):
        M(protocol, **keys)


def matches_for_every_form() -> list[FlowerMatch]:
    """Every key, every value form (exact, masked, prefix, range, named and numeric words)."""
    return [
        M("ip", ip_proto=X("ip_proto", 6), dst_port=X("dst_port", 22)),
        M(
            "ip",
            ip_proto=X("ip_proto", 6),
            src_port=Exact(0x0400, 0xFC00),
            dst_port=Exact(0, 0xFFFF),
            tcp_flags=Exact(0x02, 0x12),
        ),
        M("ip", ip_proto=X("ip_proto", 17), src_port=Range(1, 1023), ip_ttl=Exact(64, 0xFF)),
        M("ip", ip_proto=X("ip_proto", 132), dst_port=Range(100, 65535)),
        M("ip", ip_proto=X("ip_proto", 6), tcp_flags=X("tcp_flags", 0x010)),
        M(
            "ip",
            src_ip=prefix("src_ip", 0x0A000000, 8),
            dst_ip=X("dst_ip", 0xC0A80102),
            ip_tos=Exact(0x28, 0xFC),
            ip_ttl=Exact(1, 0x0F),
        ),
        M("ip", src_ip=prefix("src_ip", 0, 1)),  # 0.0.0.0/1 (a /0 is never emitted)
        M("ip", ip_flags=Exact(1, 1)),
        M("ip", ip_flags=Exact(0, 1)),
        M("ip", ip_flags=Exact(3, 3)),
        M("ip", ip_flags=Exact(1, 3)),
        M("ip", ip_flags=Exact(0, 2)),
        M("ip", ip_proto=X("ip_proto", 1), icmp_type=X("icmp_type", 8), icmp_code=Exact(0, 0xF0)),
        M("ip", ip_proto=X("ip_proto", 47)),
        M("ip", ip_proto=X("ip_proto", 58)),
        M("ip"),
        M("ipv6", ip_proto=X("ip_proto", 58), icmp_type=X("icmp_type", 128), icmp_code=X("icmp_code", 0)),
        M(
            "ipv6",
            src_ip6=prefix("src_ip6", 0x20010DB8 << 96, 32),
            dst_ip6=X("dst_ip6", 0x20010DB8000000000000000000000002),
            ip_tos=X("ip_tos", 0xB8),
        ),
        M("ipv6", ip_proto=X("ip_proto", 6), dst_port=X("dst_port", 80), ip_flags=Exact(0, 1)),
        M("ipv6", ip_proto=X("ip_proto", 1)),
        M("arp", arp_op=X("arp_op", 1), arp_sip=prefix("arp_sip", 0x0A000000, 8), arp_tip=X("arp_tip", 0x0A000009)),
        M("arp", arp_op=Exact(2, 0x02), arp_sha=Exact(0x001122000000, 0xFFFFFF000000), arp_tha=X("arp_tha", 0)),
        M("arp", arp_op=X("arp_op", 0)),
        M("802.1Q", vlan_id=X("vlan_id", 5)),
        M(
            "802.1Q",
            vlan_prio=X("vlan_prio", 3),
            vlan_ethtype=X("vlan_ethtype", 0x0800),
            ip_proto=X("ip_proto", 17),
            dst_port=X("dst_port", 53),
        ),
        M("802.1Q", vlan_ethtype=X("vlan_ethtype", 0x86DD), dst_ip6=prefix("dst_ip6", 1 << 127, 1)),
        M("802.1Q", vlan_ethtype=X("vlan_ethtype", 0x0806), arp_tip=X("arp_tip", 0x0A000009)),
        M(
            "802.1ad",
            vlan_id=X("vlan_id", 10),
            vlan_ethtype=X("vlan_ethtype", 0x8100),
            cvlan_id=X("cvlan_id", 20),
            cvlan_prio=X("cvlan_prio", 7),
        ),
        M(
            "802.1ad",
            vlan_ethtype=X("vlan_ethtype", 0x8100),
            cvlan_ethtype=X("cvlan_ethtype", 0x0800),
            ip_proto=X("ip_proto", 6),
            tcp_flags=Exact(2, 2),
        ),
        M(
            "802.1ad",
            vlan_ethtype=X("vlan_ethtype", 0x88A8),
            cvlan_ethtype=X("cvlan_ethtype", 0x86DD),
            ip_proto=X("ip_proto", 58),
            icmp_type=X("icmp_type", 135),
        ),
        M("all", dst_mac=X("dst_mac", 0x0A0B0C0D0E0F), src_mac=Exact(0x020000000000, 0xFFFFFF000000)),
        M("all"),
        M("ip", dst_mac=Exact(0x010000000000, 0x010000000000), ip_proto=X("ip_proto", 6), tcp_flags=Exact(0, 0x4)),
    ]


def test_every_key_is_covered():
    used = {k for m in matches_for_every_form() for k, _ in m.keys}
    assert used == set(FLOWER_KEYS)


def test_render_respects_parser_order():
    for m in matches_for_every_form():
        names = [k for k, _ in m.keys]
        for i, name in enumerate(names):
            assert not set(FLOWER_KEYS[name].after) & set(names[i + 1 :]), (m, name)


# ----------------------------------------------------------------------------- (b) real tc parser


def _oracle():
    from rules import tc

    require_tool("tc")
    require_tool("ip")
    import os

    require(os.geteuid() == 0, "the tc syntax oracle needs root (it creates a network namespace)")
    return tc


@pytest.mark.kernel
def test_rendered_lines_are_accepted_by_tc():
    tc = _oracle()
    lines = []
    for i, m in enumerate(matches_for_every_form()):
        lines.append(tc.filter_line("eth0", m, ["drop"], prio=i + 1))
    m = matches_for_every_form()[0]
    lines += [
        tc.filter_line("eth0", m, ["pass"], 1, chain=3, handle=7, skip="skip_hw"),
        tc.filter_line("eth0", m, ["goto", "chain", "4"], 2, chain=0, skip=None),
        tc.filter_line("eth0", m, ["mirred", "egress", "redirect", "dev", "eth1"], 3),
    ]
    results = tc.check_syntax(lines)
    refused = [(r.line, r.message) for r in results if not r.accepted]
    assert not refused
    assert all("error talking to the kernel" in r.message or r.exit_code == 0 for r in results)


WRONG = [
    # f_flower.c needs ip_proto before ports and ICMP keys
    ("dst_port before ip_proto", "protocol ip prio 1 flower dst_port 22 ip_proto tcp"),
    ("type before ip_proto", "protocol ip prio 1 flower type 8 ip_proto icmp"),
    # ... and vlan_ethtype before the keys parsed with the eth type it sets
    ("ip_proto before vlan_ethtype", "protocol 802.1Q prio 1 flower ip_proto tcp vlan_ethtype ip"),
    ("src_ip before vlan_ethtype", "protocol 802.1Q prio 1 flower src_ip 10.0.0.1 vlan_ethtype ip"),
    ("cvlan_id before vlan_ethtype", "protocol 802.1ad prio 1 flower cvlan_id 5 vlan_ethtype 802.1Q"),
    ("arp_op before vlan_ethtype", "protocol 802.1Q prio 1 flower arp_op request vlan_ethtype arp"),
    ("vlan_id without a VLAN protocol", "protocol ip prio 1 flower vlan_id 5"),
    ("port 0", "protocol ip prio 1 flower ip_proto tcp dst_port 0"),
    ("range from 0", "protocol ip prio 1 flower ip_proto tcp dst_port 0-10"),
    ("empty range", "protocol ip prio 1 flower ip_proto tcp dst_port 10-10"),
    ("ports for icmp", "protocol ip prio 1 flower ip_proto icmp dst_port 10"),
    ("tos mask in decimal", "protocol ip prio 1 flower ip_tos 0x10/252"),
    ("13-bit tcp_flags", "protocol ip prio 1 flower ip_proto tcp tcp_flags 0x1000"),
    ("non-prefix address mask", "protocol ip prio 1 flower src_ip 10.0.0.0/255.0.255.0"),
    ("ipv6 address under ip", "protocol ip prio 1 flower src_ip 2001:db8::1"),
    ("icmp under ipv6", "protocol ipv6 prio 1 flower ip_proto icmp"),
    ("bad ip_flags word", "protocol ip prio 1 flower ip_flags fragment"),
    ("arp_op 3", "protocol arp prio 1 flower arp_op 3"),
]


@pytest.mark.kernel
def test_wrong_lines_are_refused_by_tc():
    tc = _oracle()
    lines = [f"filter add dev eth0 ingress {body} action drop" for _, body in WRONG]
    results = tc.check_syntax(lines)
    accepted = [name for (name, _), r in zip(WRONG, results) if r.accepted]
    assert not accepted
    assert all(r.message for r in results)


@pytest.mark.kernel
def test_oracle_cleans_up():
    tc = _oracle()
    import subprocess

    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    tc.check_syntax(["filter add dev eth0 ingress protocol ip prio 1 flower action drop"])
    after = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert before == after


def test_filter_line_shape():
    from rules.tc import filter_line

    m = M("ip", ip_proto=X("ip_proto", 6), dst_port=X("dst_port", 22))
    assert filter_line("eth0", m, ["drop"], 5) == (
        "filter add dev eth0 ingress protocol ip prio 5 flower skip_sw ip_proto tcp dst_port 22 action drop"
    )
    assert filter_line("eth0", m, ["action", "pass"], 1, chain=2, handle=16, skip="skip_hw") == (
        "filter add dev eth0 ingress protocol ip prio 1 chain 2 handle 0x10 flower skip_hw "
        "ip_proto tcp dst_port 22 action pass"
    )
    with pytest.raises(ValueError, match="prio"):
        filter_line("eth0", m, ["drop"], 0)
    with pytest.raises(ValueError, match="blank"):
        filter_line("eth 0", m, ["drop"], 1)


# ----------------------------------------------------------------------------- (c) z3

TEMPLATES = [
    TCP4,
    UDP4,
    eth(0x0800, ip4(6, tcp(443, 8080, flags=0x10), ihl=7, options=b"\x01" * 8)),
    eth(0x0800, ip4(6, tcp(22), frag=0x2000)),
    eth(0x0800, ip4(1, icmp(8, 0))),
    eth(0x0800, ip4(47, bytes(24))),
    eth(0x86DD, ip6(6, tcp(80))),
    eth(0x86DD, ip6(58, icmp(128, 0))),
    eth(0x86DD, ip6(0, ext6(44, frag6(17, udp(53))))),
    eth(0x86DD, ip6(0, ext6(6, tcp(80)))),
    eth(0x0806, arp()),
    eth(0x0806, arp(op=2, sha="00:11:22:aa:bb:cc")),
    eth(0x8100, vlan((3 << 13) | 5, 0x0800, ip4(17, udp(53)))),
    eth(0x8100, vlan(5, 0x86DD, ip6(6, tcp(22)))),
    eth(0x8100, vlan(5, 0x0806, arp())),
    eth(0x88A8, vlan(10, 0x8100, vlan((7 << 13) | 20, 0x0800, ip4(6, tcp(22, flags=2))))),
    eth(0x88A8, vlan(10, 0x88A8, vlan(20, 0x86DD, ip6(58, icmp(135, 0))))),
    eth(0x0800, ip4(6, tcp(22), ihl=4)),
]


def mutate(rng: random.Random, pkt: bytes) -> bytes:
    b = bytearray(pkt)
    for _ in range(rng.randrange(4)):
        i = rng.randrange(len(b))
        b[i] = rng.choice([0, 1, 2, 0x40, 0x45, 0x81, 0xFF, rng.randrange(256)])
    if rng.random() < 0.3:
        b = b[: rng.randrange(10, len(b) + 1)]
    return bytes(b)


def packets(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = list(TEMPLATES)
    while len(out) < n:
        out.append(mutate(rng, rng.choice(TEMPLATES)))
    return out


def z3_value(term, pkt: bytes):
    """Evaluate a term on a concrete packet with z3 alone: bytes past the end are an
    unconstrained array, so a term that read them would not simplify to a constant."""
    junk = z3.Array("junk", z3.BitVecSort(64), z3.BitVecSort(8))
    arr = junk
    for i, b in enumerate(pkt):
        arr = z3.Store(arr, z3.BitVecVal(i, 64), z3.BitVecVal(b, 8))
    return z3.simplify(z3.substitute(term, (PACKET, arr), (PACKET_LEN, z3.BitVecVal(len(pkt), 64))))


def test_evaluator_agrees_with_z3_and_the_whole_walk():
    matches = matches_for_every_form()
    pkts = packets(60, seed=4)
    hits = 0
    for m in matches:
        formula, generic = match_formula(m), generic_formula(m)
        for pkt in pkts:
            got = evaluate(m, pkt)
            hits += got
            for term in (formula, generic):
                v = z3_value(term, pkt)
                assert z3.is_true(v) or z3.is_false(v), (str(m), pkt.hex(), v)
                assert z3.is_true(v) == got, (str(m), pkt.hex())
    assert hits > 40  # the packets do exercise the matches


def test_dissect_concrete_agrees_with_z3():
    dd = dissect()
    for pkt in packets(30, seed=9):
        got = dissect_concrete(pkt)
        if not got["reaches_tc"]:
            continue
        for name, value in got.items():
            if value is None or name == "reaches_tc":
                continue
            term = dd.skb_protocol if name == "skb_protocol" else dd.keys[name]
            v = z3_value(term, pkt)
            assert z3.is_bv_value(v) and v.as_long() == value, (name, pkt.hex())


def test_match_formula_equals_whole_walk():
    """The per-protocol view match_formula uses is the whole walk restricted to that case."""
    for m in matches_for_every_form():
        s = z3.Solver()
        s.set("timeout", 60000)
        s.add(match_formula(m) != generic_formula(m))
        assert s.check() == z3.unsat, str(m)


def test_fresh_values_evaluate_as_may_match():
    five = eth(0x86DD, ip6(0, ext6(0, ext6(0, ext6(0, ext6(0, ext6(6, tcp(22))))))))
    assert evaluate(M("ipv6", ip_proto=X("ip_proto", 6), dst_port=X("dst_port", 9)), five)
    assert not evaluate(M("ipv6", src_ip6=X("src_ip6", 5)), five)  # addresses stay exact


def be16(off):
    return z3.Concat(z3.Select(PACKET, off), z3.Select(PACKET, off + 1))


def byte(off):
    return z3.Select(PACKET, off)


def prove(claim) -> None:
    s = z3.Solver()
    s.add(z3.Not(claim))
    assert s.check() == z3.unsat, s.model()


def ihl():
    return z3.ZeroExt(60, z3.Extract(3, 0, byte(z3.BitVecVal(14, 64))))


def test_dst_port_22_means_raw_bytes():
    """ip_proto tcp dst_port 22 <=> untagged IPv4 header of ihl >= 5, not a fragment, protocol 6,
    and the 16 bits at 14 + ihl*4 + 2 are 22 with the 4 port bytes inside the packet."""
    m = M("ip", ip_proto=X("ip_proto", 6), dst_port=X("dst_port", 22))
    t = 14 + ihl() * 4
    raw = z3.And(
        z3.UGE(PACKET_LEN, 34),
        be16(12) == 0x0800,
        z3.UGE(ihl(), 5),
        be16(20) & 0x3FFF == 0,
        byte(23) == 6,
        z3.ULE(t + 4, PACKET_LEN),
        be16(t + 2) == 22,
    )
    prove(match_formula(m) == raw)


def mpls_in_ip():
    """A whole, unfragmented IPv4 header with protocol 137: the dissector goes on into MPLS and
    n_proto ends as ETH_P_MPLS_UC, so no `protocol ip` filter matches it."""
    return z3.And(z3.UGE(PACKET_LEN, 34), z3.UGE(ihl(), 5), be16(20) & 0x3FFF == 0, byte(23) == 137)


def test_src_prefix_means_raw_bytes():
    m = M("ip", src_ip=prefix("src_ip", 0x0A000000, 8))
    raw = z3.And(z3.UGE(PACKET_LEN, 34), be16(12) == 0x0800, z3.UGE(ihl(), 5), byte(26) == 10, z3.Not(mpls_in_ip()))
    prove(match_formula(m) == raw)


def test_nofrag_matches_a_broken_ipv4_header():
    """ip_flags nofrag only needs the fragment bits clear, and a header that is not read has
    them clear: a truncated IPv4 frame matches (n_proto stays IPv4)."""
    m = M("ip", ip_flags=Exact(0, 1))
    bad = z3.Or(z3.ULT(PACKET_LEN, 34), z3.ULT(ihl(), 5))
    raw = z3.And(z3.UGE(PACKET_LEN, 14), be16(12) == 0x0800, z3.Or(bad, be16(20) & 0x3FFF == 0), z3.Not(mpls_in_ip()))
    prove(match_formula(m) == raw)
    assert evaluate(m, TCP4[:30])


def test_bare_protocol_ip_excludes_mpls_in_ip():
    prove(match_formula(M("ip")) == z3.And(z3.UGE(PACKET_LEN, 14), be16(12) == 0x0800, z3.Not(mpls_in_ip())))


def test_vlan_id_means_raw_bytes():
    m = M("802.1Q", vlan_id=X("vlan_id", 5))
    prove(match_formula(m) == z3.And(z3.UGE(PACKET_LEN, 20), be16(12) == 0x8100, be16(14) & 0xFFF == 5))


def test_template_with_a_symbolic_key():
    """A map-keyed rule `src_ip {key}`: one formula for every key value."""
    k = z3.BitVec("map.blacklist.key", 32)
    m = M("ip", src_ip=X("src_ip", 0))
    f = match_formula(m, symbolic={"src_ip": k})
    prove(
        f
        == z3.And(
            z3.UGE(PACKET_LEN, 34),
            be16(12) == 0x0800,
            z3.UGE(ihl(), 5),
            z3.Not(mpls_in_ip()),
            z3.Concat(byte(26), byte(27), byte(28), byte(29)) == k,
        )
    )
    with pytest.raises(ValueError, match="32-bit term"):
        match_formula(m, symbolic={"src_ip": z3.BitVec("k16", 16)})


def test_syn_without_ack_reads_the_flags_byte():
    m = M("ip", ip_proto=X("ip_proto", 6), tcp_flags=Exact(0x002, 0x012))
    t = 14 + ihl() * 4
    prove(
        z3.Implies(
            match_formula(m),
            z3.And(byte(t + 13) & 0x12 == 0x02, z3.ULE(t + 20, PACKET_LEN), z3.UGE(z3.Extract(7, 4, byte(t + 12)), 5)),
        )
    )
