"""Path conditions in header fields (analyzer/fields.py).

Expectations are written by hand from the header layouts (RFC 791, 8200, 793, 768, 792,
IEEE 802.1Q) and the corpus sources, not produced by the decoder: synthetic z3 conditions
over `pkt` at offsets worked out by hand, and corpus paths whose meaning the C source says.
"""

from __future__ import annotations

import time

import pytest
import z3
from conftest import require

import corpus
from analyzer.explore import explore
from analyzer.fields import NOT_DECODED, Decoder, decode
from analyzer.symbolic import PACKET, PACKET_LEN
from lifter.program import load_object


def b(o) -> z3.BitVecRef:
    return PACKET[o if isinstance(o, z3.BitVecRef) else z3.BitVecVal(o, 64)]


def be(o, n: int) -> z3.BitVecRef:
    """A network-order read of n bytes (what a byte-swapped load gives)."""
    if isinstance(o, int):
        return z3.Concat(*[b(o + i) for i in range(n)])
    return z3.Concat(*[b(o + i) for i in range(n)])


def le(o: int, n: int) -> z3.BitVecRef:
    """A plain little-endian load of n bytes."""
    return z3.Concat(*[b(o + i) for i in reversed(range(n))])


IPV4 = z3.And(b(12) == 0x08, b(13) == 0x00)
IHL_TCP = z3.BitVecVal(14, 64) + z3.ZeroExt(56, b(14) & 0x0F) * 4  # TCP after a variable IPv4 header


def render(cond) -> str:
    return Decoder().render(cond)


def test_ipv4_tcp_fields_with_ihl_relative_port():
    # saddr 192.168.1.21 at 26..29 in network order; protocol at 23; dport 2 bytes after
    # the IHL-sized IPv4 header.
    cond = z3.And(IPV4, be(26, 4) == 0xC0A80115, b(23) == 6, be(IHL_TCP + 2, 2) != 22)
    text = render(cond)
    assert "eth.proto == ipv4" in text
    assert "ipv4.saddr == 192.168.1.21" in text
    assert "ipv4.proto == tcp" in text
    assert "tcp.dport != 22" in text
    assert "fixed offsets" not in text  # read where the IHL says: no caveat


def test_little_endian_load_is_swapped_back():
    # `eth->h_proto == bpf_htons(ETH_P_IP)` on a little-endian machine: the u16 load of
    # bytes 12..13 compared with 0x0008.
    assert render(le(12, 2) == 0x0008) == "eth.proto == ipv4"
    # saddr loaded as a u32 and compared with the constant as the thesis writes it
    text = render(z3.And(IPV4, le(26, 4) == 0x1501A8C0))
    assert "ipv4.saddr == 192.168.1.21" in text


def test_fixed_offset_l4_reads_are_named_with_the_caveat():
    # dport read at 36 (14 + 20 + 2): TCP's dport only when the IPv4 header has no options
    text = render(z3.And(IPV4, b(23) == 6, be(36, 2) == 22))
    assert "tcp.dport == 22" in text
    assert "without IPv4 options" in text


def test_vlan_tag_and_inner_ipv4():
    # 802.1Q tag: TPID at 12, TCI at 14 (VID in the low 12 bits), inner ethertype at 16;
    # the IPv4 header then starts at 18 (saddr at 30, daddr at 34).
    cond = z3.And(be(12, 2) == 0x8100, be(14, 2) & 0x0FFF == 100, be(16, 2) == 0x0800, be(34, 4) == 0x0A000001)
    text = render(cond)
    assert "eth.proto == 802.1q" in text
    assert "vlan.vid == 100" in text
    assert "vlan.proto == ipv4" in text
    assert "ipv4.daddr == 10.0.0.1" in text


def test_qinq_8021ad_outer_tag():
    # 802.1ad outer tag (0x88a8), 802.1Q inner tag: inner TCI at 18, ethertype at 20.
    cond = z3.And(be(12, 2) == 0x88A8, be(16, 2) == 0x8100, be(18, 2) & 0x0FFF == 7, be(20, 2) == 0x86DD)
    text = render(cond)
    assert "eth.proto == 802.1ad" in text and "vlan.proto == 802.1q" in text
    assert "vlan2.vid == 7" in text and "vlan2.proto == ipv6" in text


def test_ipv6_udp_and_icmpv6():
    # IPv6 at 14: next header at 20, daddr at 38..53; UDP after the fixed 40 bytes at 54.
    cond = z3.And(be(12, 2) == 0x86DD, b(20) == 17, be(56, 2) == 53, be(38, 16) == (0x20010DB8 << 96) | 1)
    text = render(cond)
    assert "ipv6.nexthdr == udp" in text and "udp.dport == 53" in text
    assert "ipv6.daddr == 2001:db8::1" in text
    text = render(z3.And(be(12, 2) == 0x86DD, b(20) == 58, b(54) == 128))
    assert "ipv6.nexthdr == icmpv6" in text and "icmp6.type == 128" in text


def test_ipv4_icmp_and_tcp_flags():
    assert "icmp.type == 8" in render(z3.And(IPV4, b(23) == 1, b(14) == 0x45, b(34) == 8))
    # SYN set, ACK clear: flags byte at TCP offset 13 = 34 + 13 = 47 with a 20-byte header
    text = render(z3.And(IPV4, b(23) == 6, b(14) == 0x45, b(47) & 0x12 == 0x02))
    assert "tcp.flags & syn|ack == syn" in text


def test_ihl_and_length_and_fallback():
    # lengths compare as the explorer builds them (signed; both sides non-negative)
    text = render(z3.And(IPV4, z3.Extract(3, 0, b(14)) != 5, PACKET_LEN >= 34))
    assert "ipv4.ihl != 5" in text and "len >= 34" in text
    # bytes no header of the path holds: raw offsets
    assert render(b(70) == 0x12) == "pkt[70:71] == 0x12"
    assert "pkt[70:71] == 0x12" in render(be(70, 2) != 0x1234)


def _paths(stem: str):
    path = corpus.BUILD_DIR / "clang" / f"{stem}.o"
    require(path.exists(), f"{path} is not built (run `make corpus`)")
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    return e, {p.id: decode(e, p) for p in e.paths}


def test_corpus_blacklist_drop_is_keyed_by_saddr():
    # thesis_ddos_blacklist.c: `if (bpf_map_lookup_elem(&blacklist, &saddr)) return XDP_DROP;`
    # after checking for IPv4: one DROP path says exactly that.
    e, text = _paths("thesis_ddos_blacklist")
    drops = [text[p.id] for p in e.paths if p.verdict == "DROP"]
    assert any(
        "eth.proto == ipv4" in t and "blacklist[ipv4.saddr] exists" in t and "¬" not in t.split("blacklist")[0]
        for t in drops
    ), drops


def test_corpus_static_rules_paths():
    # thesis_static_rules.c: DROP when saddr is 192.168.1.21 and not (TCP to port 22), or
    # when daddr is 192.168.6.21; PASS for TCP port 22 from 192.168.1.21.
    e, text = _paths("thesis_static_rules")
    joined = "\n".join(text[p.id] for p in e.paths)
    assert "ipv4.saddr == 192.168.1.21" in joined
    assert "ipv4.daddr == 192.168.6.21" in joined
    passes = [text[p.id] for p in e.paths if p.verdict == "PASS"]
    assert any(
        "ipv4.saddr == 192.168.1.21" in t and "ipv4.proto == tcp" in t and "tcp.dport == 22" in t for t in passes
    ), passes


@pytest.mark.parametrize("stem", ["ipv6_filter", "vlan_tags", "icmp_filter"])
def test_corpus_decodes_without_raw_smt(stem):
    e, text = _paths(stem)
    for t in text.values():
        assert "select" not in t and "(_ bv" not in t, t


def test_deadline_past_gives_the_budget_text_and_a_later_one_decodes():
    # a rendering that starts past the command's deadline is not decoded, and says why
    cond = z3.And(IPV4, be(26, 4) == 0xC0A80115)
    assert Decoder(deadline=time.perf_counter() - 1).render(cond) == NOT_DECODED
    assert "budget" in NOT_DECODED
    # a deadline not yet reached changes nothing
    text = Decoder(deadline=time.perf_counter() + 3600).render(cond)
    assert text == render(cond) and "ipv4.saddr == 192.168.1.21" in text


def test_layout_is_proven_beside_reads_at_computed_offsets():
    # an IPv6 extension-header walk: the byte after a hop-by-hop header (next header at 54,
    # length at 55: the next header starts at 54 + (len + 1) * 8, RFC 8200 4.3) decides;
    # the ethertype at 12 and the next header at 20 (IPv6 at 14) are read at fixed offsets.
    walk = z3.BitVecVal(54, 64) + (z3.ZeroExt(56, b(55)) + 1) * 8
    cond = z3.And(be(12, 2) == 0x86DD, b(20) == 0, b(54) == 17, b(walk) == 7)
    text = render(cond)
    assert "eth.proto == ipv6" in text and "ipv6.nexthdr == 0" in text
    # a branch of an Or names what it implies, and nothing the other branch says
    text = render(z3.Or(z3.And(be(12, 2) == 0x0800, b(23) == 6), z3.And(be(12, 2) == 0x86DD, b(20) == 17)))
    assert "ipv4.proto == tcp" in text and "ipv6.nexthdr == udp" in text
    assert "ipv4.proto == udp" not in text and "ipv6.nexthdr == tcp" not in text


def test_a_claim_a_model_refutes_is_not_stated():
    # two ethertypes possible: the path implies neither, so neither header is laid out
    text = render(z3.And(z3.Or(be(12, 2) == 0x0800, be(12, 2) == 0x86DD), b(23) == 6))
    assert "ipv4.proto" not in text and "pkt[23:24] == 6" in text


# --- long computations (hashes, checksums) print as the fields they read (issue 14) ------------

UDP_FIXED = z3.And(IPV4, b(14) == 0x45, b(23) == 17)  # IPv4 without options (IHL 5), UDP at 34


def mix(acc, *words):
    """The step of corpus/large/tailcall_stages.c (acc ^ acc >> 7) * 0x9E3779B1 + 0x7F4A7C15,
    with each word xored in first, on 32 bits."""
    for w in words:
        acc = acc ^ w
        acc = (acc ^ z3.LShR(acc, 7)) * 0x9E3779B1 + 0x7F4A7C15
    return acc


SPORT, DPORT = z3.ZeroExt(16, be(34, 2)), z3.ZeroExt(16, be(36, 2))


def test_a_hash_prints_as_the_fields_it_reads_with_the_remainder_around_it():
    h = mix(SPORT << 16, DPORT, DPORT, SPORT)
    text = render(z3.And(UDP_FIXED, z3.URem(h, 60) == 3))
    assert text.endswith("∧ (hash(udp.sport, udp.dport) % 60) == 3"), text
    assert "ipv4.proto == udp" in text and not any(op in text for op in ("*", "^", "let", "0x9e3779b1"))


def test_distinct_hashes_get_distinct_names_and_the_same_one_one_name():
    h1 = mix(SPORT << 16, DPORT, DPORT, SPORT)
    h2 = mix(DPORT << 16, SPORT, SPORT, DPORT)
    two = render(z3.And(UDP_FIXED, z3.URem(h1, 60) == 3, z3.URem(h2, 60) == 4))
    assert "(hash1(udp.sport, udp.dport) % 60) == 3" in two and "(hash2(udp.sport, udp.dport) % 60) == 4" in two
    one = render(z3.And(UDP_FIXED, z3.URem(h1, 60) == 3, z3.URem(h1, 61) == 5))
    assert "(hash(udp.sport, udp.dport) % 60) == 3" in one and "(hash(udp.sport, udp.dport) % 61) == 5" in one


def test_a_hash_over_a_summary_names_what_the_summary_reads():
    """A summary (explore.py: a long computation kept as any value, its definition aside)
    stands for the fields its definition reads when the Decoder has the definitions."""
    s = z3.BitVec("summary.7", 32)
    h = mix(s, s, s)  # three more steps on the summary
    cond = z3.And(UDP_FIXED, z3.URem(h, 60) == 3)
    summaries = {"summary.7": (mix(SPORT << 16, DPORT), "xdp:12")}
    assert render(cond).endswith("(hash(summary.7) % 60) == 3")
    assert Decoder(summaries=summaries).render(cond).endswith("(hash(udp.sport, udp.dport) % 60) == 3")


def test_a_checksum_prints_as_a_function_of_the_header():
    """The one's-complement sum of the IPv4 header's ten 16-bit words (RFC 1071), folded
    twice, complemented: additions and shifts, no mixing, so `f`; it reads every field of the
    20-byte header (RFC 791)."""
    total = sum(z3.ZeroExt(48, be(14 + 2 * i, 2)) for i in range(10))
    for _ in range(2):
        total = (total & 0xFFFF) + z3.LShR(total, 16)
    text = render(z3.And(IPV4, b(14) == 0x45, ~total & 0xFFFF != 0))
    fields = ("ver_ihl", "tos", "tot_len", "id", "frag", "ttl", "proto", "check", "saddr", "daddr")
    assert f"f({', '.join('ipv4.' + f for f in fields)}) != 0" in text, text


def test_short_arithmetic_and_merged_offsets_stay_written_out():
    """An offset (a few operations) and an if-then-else over merged paths are not collapsed."""
    assert "(22 + (4 * (ipv4.ver_ihl & 0xf))) <= len" in render(z3.And(IPV4, z3.ULE(IHL_TCP + 8, PACKET_LEN)))
    tagged = z3.If(b(12) == 0x81, z3.BitVecVal(18, 64), z3.BitVecVal(14, 64))
    text = render(z3.ULE(tagged + 20, PACKET_LEN))
    assert "?" in text and "f(" not in text and "hash" not in text, text


def test_signed_comparisons_show_negative_constants_and_masks_stay():
    """The sign test clang makes of a hash's top bit (`(acc << 32) >>a 32 <=s -1`) reads as
    such; a compared value keeps the mask it is taken under."""
    h = z3.ZeroExt(32, mix(SPORT << 16, DPORT, DPORT, SPORT))
    text = render(z3.And(UDP_FIXED, z3.Not((h << 32) >> 32 <= -1)))
    assert text.endswith("∧ hash(udp.sport, udp.dport) >s -1"), text
    from analyzer.fields import Layout

    r = z3.BitVec("helper.get_prandom_u32.1", 64)
    masked = Decoder()._compare("<=", r & 0x50, z3.BitVecVal(16, 64), Layout(), z3.BoolVal(True))
    assert masked == "(get_prandom_u32() & 80) <= 16", masked  # small constants in decimal, as elsewhere


def _flags_of(c1, c2, width=8):
    one, zero = z3.BitVecVal(1, width), z3.BitVecVal(0, width)
    return z3.If(c1, one, zero), z3.If(c2, one, zero)


def test_or_of_comparisons_reads_as_a_disjunction():
    """C's `eth.proto == 802.1Q || eth.proto == 802.1ad` compiled as bitwise operations on 0/1
    values (`((p == 0x8100 ? 1 : 0) | (p == 0x88a8 ? 1 : 0)) != 1`, as xdp-filter's VLAN walk
    is) prints as the disjunction it tests; the texts are hand-written, and z3 proves each
    reading equal to the bit-vector comparison it replaces."""
    q = z3.And(b(12) == 0x81, b(13) == 0x00)
    ad = z3.And(b(12) == 0x88, b(13) == 0xA8)
    f1, f2 = _flags_of(q, ad)
    either = "(eth.proto == 802.1q ∨ eth.proto == 802.1ad)"
    cases = [
        ((f1 | f2) == 1, z3.Or(q, ad), either),
        ((f1 | f2) != 1, z3.Not(z3.Or(q, ad)), f"¬{either}"),
        ((f1 | f2) == 0, z3.Not(z3.Or(q, ad)), f"¬{either}"),
        ((f1 ^ f2) == 1, z3.Xor(q, ad), "(eth.proto == 802.1q ⊕ eth.proto == 802.1ad)"),
        (
            (z3.If(q, z3.BitVecVal(0, 8), z3.BitVecVal(1, 8)) | f2) == 1,
            z3.Or(z3.Not(q), ad),
            "(eth.proto != 802.1q ∨ eth.proto == 802.1ad)",
        ),
    ]
    for cond, meaning, text in cases:
        s = z3.Solver()
        s.add(cond != meaning)
        assert s.check() == z3.unsat, cond  # the hand-written reading is the condition
        assert render(cond) == text, (render(cond), text)


def test_values_other_than_flags_keep_their_arithmetic():
    """A flag or-ed with a packet byte is no 0/1 value: printed as written."""
    q = z3.And(b(12) == 0x81, b(13) == 0x00)
    f1, _ = _flags_of(q, q)
    text = render((f1 | b(20)) == 1)
    assert "? 1 : 0" in text and "pkt[20" in text, text
