"""Map keys in header fields (analyzer/fields.py `Decoder._key`, `_key_parts`): a key of
several parts prints its parts in memory order, and a key read at an offset the path's
layouts do not fix prints a short description, not the offset's whole if-then-else chain.

Expected texts are worked out by hand from the C structs and the packet layouts (RFC 791
IPv4 header: saddr at 12..15, protocol at 9; Ethernet: ethertype at 12, an 802.1Q tag 4
bytes); the key's bit-vector is the little-endian load of its bytes (explore.py), so the
first byte in memory is the lowest one of the term.
"""

from __future__ import annotations

import z3
from conftest import require

import corpus
from analyzer.explore import explore
from analyzer.fields import KEY_RAW, Decoder, decode
from analyzer.symbolic import PACKET
from lifter.program import load_object


def b(o) -> z3.BitVecRef:
    return PACKET[o if isinstance(o, z3.BitVecRef) else z3.BitVecVal(o, 64)]


IPV4 = z3.And(b(12) == 0x08, b(13) == 0x00)
TCP_NO_OPTIONS = z3.And(IPV4, b(14) == 0x45, b(23) == 6)


def found(name: str, key: z3.BitVecRef) -> z3.BoolRef:
    return z3.Function(f"map.{name}.found", key.sort(), z3.BoolSort())(key)


def test_lpm_key_prints_prefixlen_then_address():
    # allow_block.c's `struct lpm_v4_key { __u32 prefixlen; __u32 addr; }` with prefixlen 32
    # and addr = iph->saddr: memory bytes 0..3 are 32 little-endian (20 00 00 00), bytes 4..7
    # are packet bytes 26..29 in order. As a little-endian load: pkt[29] is the top byte.
    key = z3.Concat(b(29), b(28), b(27), b(26), z3.BitVecVal(32, 32))
    assert Decoder().key_fields(key, IPV4) == "{32, ipv4.saddr}"
    text = Decoder().render(z3.And(IPV4, found("blocklist", key)))
    assert "blocklist[{32, ipv4.saddr}] exists" in text, text


def test_constant_then_port_in_memory_order():
    # struct { __u16 tag = 0x1234; __be16 port = tcp->dest; }: memory 34 12, pkt[36], pkt[37]
    # (IHL 5: TCP at 34, dport at 36..37).
    key = z3.Concat(b(37), b(36), z3.BitVecVal(0x1234, 16))
    assert Decoder().key_fields(key, TCP_NO_OPTIONS) == "{0x1234, tcp.dport}"


def test_single_field_keys_are_unchanged():
    # a __u32 saddr key (memory = packet bytes 26..29) and a zero-extended port
    assert Decoder().key_fields(z3.Concat(b(29), b(28), b(27), b(26)), IPV4) == "ipv4.saddr"
    key = z3.Concat(z3.BitVecVal(0, 16), b(37), b(36))
    assert Decoder().key_fields(key, TCP_NO_OPTIONS) == "tcp.dport"


def test_key_at_an_offset_no_layout_fixes_is_short():
    # A port read after an optional 802.1Q tag and a variable IHL: L3 at 14 or 18, TCP at
    # L3 + IHL*4. The condition allows both layouts, so no one header layout places the read;
    # the key is 2 bytes (memory: dport bytes, then two zero bytes, left out as a zero
    # extension) and is printed as such, with the start of its offset.
    tagged = z3.And(b(12) == 0x81, b(13) == 0x00)
    l3 = z3.If(tagged, z3.BitVecVal(18, 64), z3.BitVecVal(14, 64))
    l4 = l3 + z3.ZeroExt(56, b(l3) & 0x0F) * 4
    cond = z3.Or(
        z3.And(IPV4, b(23) == 6),
        z3.And(tagged, b(16) == 0x08, b(17) == 0x00, b(27) == 6),
    )
    key = z3.Concat(z3.BitVecVal(0, 16), b(l4 + 3), b(l4 + 2))
    text = Decoder().key_fields(key, cond)
    assert text.startswith("2 bytes at a packet-dependent offset (from eth.proto"), text
    assert len(text) <= len("2 bytes at a packet-dependent offset ()") + KEY_RAW, text
    # both layouts are packets of the condition: the offset is not one constant
    s = z3.Solver()
    s.add(cond, z3.Not(tagged))
    assert s.check() == z3.sat
    s = z3.Solver()
    s.add(cond, tagged)
    assert s.check() == z3.sat


def _clang(stem: str):
    path = corpus.BUILD_DIR / "clang" / f"{stem}.o"
    require(path.exists(), f"{path} is not built (run `make corpus`)")
    obj = load_object(path)
    return explore(obj, obj.programs[0])


def test_corpus_allow_block_blocklist_key():
    e = _clang("allow_block")
    texts = [decode(e, p) for p in e.paths if p.verdict == "DROP"]
    assert texts and all("blocklist[{32, ipv4.saddr}] exists" in t for t in texts), texts


def test_xdp_filter_port_key_is_short_and_truly_packet_dependent():
    # xdp-filter's filter_ports is looked up with the TCP destination port at an offset that
    # depends on the VLAN tags it walks and on the IPv4 IHL / IPv6 extension headers. Paths
    # 17-24 (DROP on a port-map hit) allow several layouts: the printed key is the short
    # form, and z3 confirms the read's offset takes two values under the path's condition.
    objs = [p for p in corpus.external_objects() if p.name == "xdpfilt_alw_tcp.o"]
    require(bool(objs), "xdpfilt_alw_tcp.o is missing (run `make external`)")
    path = objs[0]
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    env = e.environment()
    checked = 0
    for p in e.paths:
        keys = [a.key for a in p.accesses if a.map == "filter_ports" and a.key is not None]
        if p.verdict != "DROP" or not keys:
            continue
        cond = z3.simplify(e.condition(p))
        # over inputs, as rules/reasons.py gives it: the merged offset's branch literals
        # expanded, so the text names header fields, never an internal `b!<n>`
        text = Decoder(env, None, e.summaries).key_fields(e.expand(keys[0]), cond)
        assert text.startswith("2 bytes at a packet-dependent offset (from "), (p.id, text)
        assert "b!" not in text and "proto" in text, (p.id, text)
        assert len(text) <= 100, (p.id, text)
        low = keys[0].children()[-1]  # the first byte in memory: pkt[offset]
        assert z3.is_select(low)
        s = z3.Solver()
        s.set("rlimit", 50_000_000)
        s.add(*env, cond)
        assert s.check() == z3.sat
        first = s.model().eval(low.arg(1), model_completion=True)
        s.add(low.arg(1) != first)
        assert s.check() == z3.sat, p.id
        checked += 1
    assert checked >= 4, checked
