"""A z3 model of what cls_flower compares: the kernel's flow dissector run on packet bytes.

Input: the analyzer's packet symbols (analyzer/symbolic.py): `PACKET` (Array BV64 -> BV8,
offset 0 = first byte of the Ethernet header) and `PACKET_LEN` (BV64). `dissect()` gives,
per flower key, a bit-vector of the key's width holding the value flower compares, plus
`skb_protocol` (what tc compares the filter's `protocol` with) and `reaches_tc`.

What is modelled (Linux 6.18; function names are from the kernel sources):
- Before tc: eth_type_trans() sets skb->protocol (ethertypes < 0x600 become ETH_P_802_3 when
  the next two bytes are 0xffff, else ETH_P_802_2); frames under 14 bytes never get there.
  __netif_receive_skb_core() calls skb_vlan_untag() for an 802.1Q/802.1ad frame, which needs
  6 bytes after the Ethernet header (else the frame is dropped) and moves the outer tag into
  skb->vlan_tci, with vlan_set_encap_proto() translating the inner ethertype as above.
  ASSUMPTION: no hardware VLAN stripping (rx-vlan-offload off, so XDP sees the tag bytes
  flower sees as metadata), a plain Ethernet device (no DSA tagging), and no BPF flow
  dissector attached to the netns (it would replace everything below).
- Tags as flower sees them (__skb_flow_dissect, case ETH_P_8021Q/ETH_P_8021AD; the same in
  Linux 6.1, the flower VM's kernel, and 6.18): the walk starts at skb->vlan_proto when
  skb_vlan_tag_present(), else at skb->protocol. For the first tag with a tag present it
  reads nothing from the data: vlan_id/vlan_prio come from skb->vlan_tci, vlan_tpid is the
  protocol it started with and vlan_eth_type is skb->protocol; a second tag is read from the
  data (TCI at the network header, next ethertype after it) as cvlan; a third and later
  are skipped (PROTO_AGAIN without a key). A tag the hardware took out (hardware-accelerated
  RX, NETIF_F_HW_VLAN_CTAG_RX/STAG_RX) and one skb_vlan_untag() took out reach flower the
  same way, so the model has one case for both; what differs is XDP, which never sees a
  stripped tag's bytes (hence the assumption above: with stripping on, a tag rule would
  match frames the program saw untagged). An untagged frame: skb_protocol() is its
  ethertype, so a `protocol 802.1Q`/`802.1ad` filter (the only ones that may carry
  vlan_*/cvlan_* keys: fl_set_key reads them under a VLAN eth type only, f_flower.c refuses
  them elsewhere) never matches it; the vlan/cvlan keys stay 0 (fl_clear_masked_range).
  A single-tagged frame under `vlan_ethtype 802.1Q` gets no cvlan (the key stays 0, and
  cvlan_tpid 0 differs from the filter's, so it never matches).
- IPv6 extension headers (__skb_flow_dissect's ip_proto switch, Linux 6.1 and 6.18 alike):
  NEXTHDR_HOP, NEXTHDR_ROUTING and NEXTHDR_DEST (only under ETH_P_IPV6) read 2 bytes (next
  header, length) - OUT_BAD when they do not fit, leaving ip_proto at the header's type -
  and go on (IPPROTO_AGAIN) at +(len + 1) * 8; NEXTHDR_FRAGMENT reads 8 bytes (OUT_BAD if
  short), sets FLOW_DIS_IS_FRAGMENT (and FIRST_FRAG when the offset is 0), takes its next
  header as ip_proto and stops (OUT_GOOD: no PARSE_1ST_FRAG in flower), so no L4 key of any
  IPv6 fragment is read. Other next headers (ESP, AH, mobility, ...) end the walk: ip_proto
  is that value. The kernel stops after MAX_FLOW_DISSECT_HDRS (15) headers; the model walks
  MAX_EXT and leaves ip_proto and below fresh beyond. ICMPv6 type/code: the same 8-byte
  read as ICMP (skb_flow_get_icmp_tci).
- tcf_classify() skips a filter whose protocol is not skb_protocol(skb, false): the outer
  tag's TPID for a tagged frame, else skb->protocol.
- fl_classify() clears the key (fl_clear_masked_range), then skb_flow_dissect() with
  FLOW_DISSECTOR_F_STOP_BEFORE_ENCAP only (no PARSE_1ST_FRAG): a key the dissector does not
  reach stays 0. __skb_flow_dissect() is modelled case by case: VLAN tags (the first two
  recorded as vlan/cvlan with tpid and next ethertype; more skipped), IPv4 (truncated or
  ihl < 5: OUT_BAD; addresses, tos and ttl are read before the fragment check, fragments
  stop before L4), IPv6 (tclass as tos, hop limit as ttl, HOP/ROUTING/DEST/FRAGMENT
  extension headers), ARP (__skb_flow_dissect_arp: hrd 1, pro 0x0800, hln 6, pln 4, op 1 or
  2, 28 bytes, else no ARP key), TCP flags (__skb_flow_dissect_tcp: a whole 20-byte header
  with doff >= 5), ICMP/ICMPv6 type and code (skb_flow_get_icmp_tci: 8 bytes), ports
  (__skb_flow_dissect_ports / skb_flow_get_ports / proto_ports_offset: 4 bytes at offset 0
  for TCP, UDP, ESP, SCTP, at 4 for AH, nothing for other protocols and for any fragment),
  GRE/IPIP/IPv6-in-IP stop (STOP_BEFORE_ENCAP), MPLS-in-IP turns n_proto into ETH_P_MPLS_UC
  (so no `protocol ip` filter matches it). A header that does not fit in PACKET_LEN is not
  read. The tos/ttl-before-fragment order is 6.x's; 5.x read them after (0 on fragments).
- The model is the software path; a skip_sw rule runs in the NIC, whose driver is meant to
  mirror it (in software a skip_sw filter never matches at all).
- key.basic.n_proto is the last protocol the dissector saw; control.addr_type is
  FLOW_DISSECTOR_KEY_IPV4_ADDRS/_IPV6_ADDRS once an IP header was read, provided the
  filter's mask enables the address key (else 0, so an address key whose family's masks are
  all zero, `src_ip 0.0.0.0/0`, matches nothing: flower.py's module doc); the IPv4 and IPv6
  address keys share memory (a union in struct fl_flow_key), so src_ip of an IPv6 packet is
  the first word of its source address; addr_type keeps the families apart.

What is NOT modelled exactly is a fresh unconstrained variable (named `unknown.flower.<key>`),
never a guess: everything below the L2 header when more than MAX_TAGS VLAN tags precede it or
when the inner ethertype is PPPoE session, MPLS, batman-adv, HSR or PRP (the dissector goes on
into them); everything from ip_proto down after more than MAX_EXT IPv6 extension headers;
ports of DCCP and UDP-Lite (proto_ports_offset lists them, but both protocols are being
retired from the kernel). `unknown[key]` says when a key is such a variable. Flower can only
match ports under ip_proto tcp/udp/sctp, so the last one never matters to a rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import z3
from z3 import z3core

from analyzer.symbolic import PACKET, PACKET_LEN, mk_ite, truth

from .flower import FAMILIES, FLOWER_KEYS, PROTOCOLS, VLAN_TYPES, FlowerMatch, Range

MAX_TAGS = 4  # VLAN tags modelled (the one skb_vlan_untag takes + 3 read from the data)
MAX_EXT = 4  # IPv6 extension headers modelled

ETH_P_IP, ETH_P_IPV6, ETH_P_ARP, ETH_P_RARP = 0x0800, 0x86DD, 0x0806, 0x8035
ETH_P_802_3, ETH_P_802_2, ETH_P_MPLS_UC = 0x0001, 0x0004, 0x8847
#: Ethertypes __skb_flow_dissect() follows into another header (PPPoE session, MPLS unicast and
#: multicast, batman-adv, PRP, HSR): downstream keys are fresh.
FOLLOWED = (0x8864, 0x8847, 0x8848, 0x4305, 0x88FB, 0x892F)
#: enum flow_dissector_key_id values stored in key.control.addr_type
ADDR_TYPE_IPV4, ADDR_TYPE_IPV6 = 2, 3
#: addr_type per address family (FlowerKey.addr_struct): an address key matches only a packet
#: whose walk set it (fl_set_key; an IPv4 header with IHL < 5 stops the walk before it)
ADDR_TYPES = {"ipv4": ADDR_TYPE_IPV4, "ipv6": ADDR_TYPE_IPV6}
IPV6_EXT = (0, 43, 60)  # NEXTHDR_HOP, NEXTHDR_ROUTING, NEXTHDR_DEST
NEXTHDR_FRAGMENT, IPPROTO_MPLS = 44, 137
PORTS_AT_0 = (6, 17, 50, 132)  # proto_ports_offset() == 0 (TCP, UDP, ESP, SCTP); AH (51) is 4
#: DCCP and UDP-Lite: listed in proto_ports_offset() while those protocols lived in the kernel,
#: which is being retired from it; their ports are fresh rather than a version guess.
PORTS_UNSURE = (33, 136)

#: Every value a Dissection holds: the flower keys plus the key fields flower sets implicitly.
WIDTHS = {name: row.width for name, row in FLOWER_KEYS.items()} | {
    "n_proto": 16,
    "addr_type": 8,
    "vlan_tpid": 16,
    "cvlan_tpid": 16,
}
L2_KEYS = (
    "dst_mac",
    "src_mac",
    "vlan_id",
    "vlan_prio",
    "vlan_tpid",
    "vlan_ethtype",
    "cvlan_id",
    "cvlan_prio",
    "cvlan_tpid",
    "cvlan_ethtype",
)
L3_KEYS = tuple(k for k in WIDTHS if k not in L2_KEYS)  # set at or below the network header
L4_KEYS = ("src_port", "dst_port", "tcp_flags", "icmp_type", "icmp_code")

_FALSE = z3.BoolVal(False)
_TRUE = z3.BoolVal(True)
_UNASKED = object()  # `_ite`'s `known` when the caller did not ask truth(cond)


#: Bit-vector sorts by width, for `_bv` (a sort z3 hash-conses: the one it would make again).
_SORTS: dict[int, z3.BitVecSortRef] = {}


def _bv(value: int, bits: int) -> z3.BitVecRef:
    """z3.BitVecVal(value mod 2**bits, bits): the same C call, without its Python checks (the
    model makes ~1,900 of them)."""
    sort = _SORTS.get(bits)
    if sort is None:
        sort = _SORTS[bits] = z3.BitVecSort(bits)
    ctx = sort.ctx
    return z3.BitVecNumRef(z3core.Z3_mk_numeral(ctx.ref(), str(value % (1 << bits)), sort.ast), ctx)


def fresh(name: str) -> z3.BitVecRef:
    """The unconstrained stand-in for key `name` where the model stops."""
    return z3.BitVec(f"unknown.flower.{name}", WIDTHS[name])


# --- key sets -------------------------------------------------------------------------------


@dataclass
class _Part:
    """Values of some keys and, per key, when the value is a fresh variable."""

    values: dict[str, z3.BitVecRef] = field(default_factory=dict)
    unknown: dict[str, z3.BoolRef] = field(default_factory=dict)

    def get(self, name: str) -> z3.BitVecRef:
        v = self.values.get(name)
        return _bv(0, WIDTHS[name]) if v is None else v

    def unk(self, name: str) -> z3.BoolRef:
        return self.unknown.get(name, _FALSE)


def _fresh_part(names) -> _Part:
    return _Part({n: fresh(n) for n in names}, {n: _TRUE for n in names})


def _ite(cond: z3.BoolRef, a, b, known: bool | None = _UNASKED):
    """If(cond, a, b), simplified when a is b or cond is a constant (`known`: truth(cond)
    when the caller has it)."""
    if a.as_ast().value == b.as_ast().value:  # Z3_is_eq_ast: the same (hash-consed) term
        return a
    if known is _UNASKED:
        known = truth(cond)
    if known is not None:
        return a if known else b
    return mk_ite(cond, a, b)  # z3.If's term, without its sort coercions (same sorts here)


def _merge(cond: z3.BoolRef, a: _Part, b: _Part, names) -> _Part:
    """Per key in `names`: a's value where cond holds, else b's (a key a part lacks is 0 there)."""
    out = _Part()
    known = truth(cond)
    for n in names:
        out.values[n] = _ite(cond, a.get(n), b.get(n), known)
        ua, ub = a.unk(n), b.unk(n)
        if not (truth(ua) is False and truth(ub) is False):
            out.unknown[n] = _ite(cond, ua, ub, known)
    return out


def _union(*parts: _Part) -> _Part:
    """Keys of all parts; a later part's value wins."""
    out = _Part()
    for p in parts:
        out.values.update(p.values)
        out.unknown.update(p.unknown)
    return out


def _in(x: z3.BitVecRef, values) -> z3.BoolRef:
    """z3.Or([x == v for v in values]): the same C calls in the same order (a numeral, its
    equality, ...; then the Or), without the Python API's coercions."""
    ctx, bits = x.ctx, x.size()
    eqs = [z3.BoolRef(z3core.Z3_mk_eq(ctx.ref(), x.as_ast(), _bv(v, bits).as_ast()), ctx) for v in values]
    arr = (z3.Ast * len(eqs))(*[e.as_ast() for e in eqs])
    return z3.BoolRef(z3core.Z3_mk_or(ctx.ref(), len(eqs), arr), ctx)


# --- the model ------------------------------------------------------------------------------


class _Model:
    """Builds the dissector's terms over one (pkt, length), each header layer once."""

    def __init__(self, pkt: z3.ArrayRef, length: z3.BitVecRef):
        self.pkt, self.length = pkt, length
        self._layers: dict = {}

    # packet access: __skb_header_pointer() reads `n` bytes at `off` only if they fit
    def off(self, o) -> z3.BitVecRef:
        return _bv(o, 64) if isinstance(o, int) else o

    def byte(self, o) -> z3.BitVecRef:
        at, ctx = self.off(o), self.pkt.ctx  # z3.Select's C call, without its sort coercions
        return z3.BitVecRef(z3core.Z3_mk_select(ctx.ref(), self.pkt.as_ast(), at.as_ast()), ctx)

    def be(self, o, n: int) -> z3.BitVecRef:
        if n == 1:
            return self.byte(o)
        if isinstance(o, int):
            return z3.Concat([self.byte(o + i) for i in range(n)])
        return z3.Concat([self.byte(o + i if i else o) for i in range(n)])

    def fits(self, o, n: int) -> z3.BoolRef:
        if isinstance(o, int):
            return z3.ULE(_bv(o + n, 64), self.length)
        return z3.ULE(o + n, self.length)

    def _cached(self, key, build, term=None):
        """Memo per layer; `term` (kept in the table) is the z3 term whose id is in the key, so
        z3 cannot hand that id to another term while the entry lives."""
        hit = self._layers.get(key)
        if hit is None:
            hit = self._layers[key] = (term, build())
        return hit[1]

    # L2: eth_type_trans, skb_vlan_untag, the VLAN case of __skb_flow_dissect
    def translate(self, eth: z3.BitVecRef, at: int) -> z3.BitVecRef:
        """eth_type_trans()/vlan_set_encap_proto(): an 802.3 length field becomes 802_3/802_2."""
        raw = z3.And(self.fits(at, 2), self.be(at, 2) == 0xFFFF)
        return _ite(z3.UGE(eth, 0x600), eth, _ite(raw, _bv(ETH_P_802_3, 16), _bv(ETH_P_802_2, 16)))

    @property
    def outer(self) -> z3.BitVecRef:
        return self.be(12, 2)

    @property
    def outer_vlan(self) -> z3.BoolRef:
        return _in(self.outer, VLAN_TYPES)

    def reaches_tc(self) -> z3.BoolRef:
        return z3.And(self.fits(0, 14), z3.Implies(self.outer_vlan, self.fits(0, 20)))

    def skb_protocol(self) -> z3.BitVecRef:
        return _ite(self.outer_vlan, self.outer, self.translate(self.outer, 14))

    def macs(self) -> _Part:
        return self._cached("macs", lambda: _Part({"dst_mac": self.be(0, 6), "src_mac": self.be(6, 6)}))

    def tag(self, which: str, o: int, tpid: z3.BitVecRef, next_proto: z3.BitVecRef) -> _Part:
        """A recorded tag: id and priority from the TCI at `o`, the TPID it was found with and the
        ethertype after it (key_vlan fields)."""
        tci = self.be(o, 2)
        return _Part(
            {
                f"{which}_id": z3.Extract(11, 0, tci),
                f"{which}_prio": z3.Extract(15, 13, tci),
                f"{which}_tpid": tpid,
                f"{which}_ethtype": next_proto,
            }
        )

    def proto1(self) -> z3.BitVecRef:
        """skb->protocol after skb_vlan_untag(): the ethertype after the outer tag."""
        return self.translate(self.be(16, 2), 18)

    # L3 layers at a fixed offset
    def l3(self, o: int, family: str) -> _Part:
        build = {"ip": self._ipv4, "ipv6": self._ipv6, "arp": lambda o: self._arp(o, _bv(ETH_P_ARP, 16))}
        return self._cached(("l3", o, family), lambda: build[family](o))

    def l3_any(self, o: int, proto: z3.BitVecRef) -> _Part:
        """The proto switch of __skb_flow_dissect at offset `o`."""

        def build():
            part = _merge(_in(proto, FOLLOWED), _fresh_part(L3_KEYS), _Part({"n_proto": proto}), L3_KEYS)
            part = _merge(_in(proto, (ETH_P_ARP, ETH_P_RARP)), self._arp(o, proto), part, L3_KEYS)
            part = _merge(proto == ETH_P_IPV6, self.l3(o, "ipv6"), part, L3_KEYS)
            return _merge(proto == ETH_P_IP, self.l3(o, "ip"), part, L3_KEYS)

        return self._cached(("any", o, proto.get_id()), build, proto)

    def _ipv4(self, o: int) -> _Part:
        ihl = z3.Extract(3, 0, self.byte(o))
        ok = z3.And(self.fits(o, 20), z3.UGE(ihl, 5))
        frag_off = self.be(o + 6, 2)
        is_frag = (frag_off & 0x3FFF) != 0  # ip_is_fragment(): MF or an offset
        first = z3.And(is_frag, (frag_off & 0x1FFF) == 0)
        proto = self.byte(o + 9)
        src, dst = self.be(o + 12, 4), self.be(o + 16, 4)
        thoff = self.off(o) + z3.ZeroExt(60, ihl) * 4
        l4 = self.l4(proto, thoff)
        on = z3.And(ok, z3.Not(is_frag))
        part = _Part(
            {
                "n_proto": _ite(z3.And(on, proto == IPPROTO_MPLS), _bv(ETH_P_MPLS_UC, 16), _bv(ETH_P_IP, 16)),
                "addr_type": _ite(ok, _bv(ADDR_TYPE_IPV4, 8), _bv(0, 8)),
                "src_ip": _ite(ok, src, _bv(0, 32)),
                "dst_ip": _ite(ok, dst, _bv(0, 32)),
                "src_ip6": _ite(ok, z3.Concat(src, dst, _bv(0, 64)), _bv(0, 128)),  # the union's view
                "ip_proto": _ite(ok, proto, _bv(0, 8)),
                "ip_tos": _ite(ok, self.byte(o + 1), _bv(0, 8)),
                "ip_ttl": _ite(ok, self.byte(o + 8), _bv(0, 8)),
                "ip_flags": _ite(
                    ok, z3.Concat(_ite(first, _bv(1, 1), _bv(0, 1)), _ite(is_frag, _bv(1, 1), _bv(0, 1))), _bv(0, 2)
                ),
            }
        )
        for n in L4_KEYS:
            part.values[n] = _ite(on, l4.get(n), _bv(0, WIDTHS[n]))
            if n in l4.unknown:
                part.unknown[n] = z3.And(on, l4.unknown[n])
        return part

    def _ipv6(self, o: int) -> _Part:
        ok = self.fits(o, 40)
        src, dst = self.be(o + 8, 16), self.be(o + 24, 16)
        nh = self.byte(o + 6)
        off = self.off(o + 40)
        done, frag, first = _FALSE, _FALSE, _FALSE
        for _ in range(MAX_EXT):  # the ip_proto_again loop
            opt = z3.And(z3.Not(done), _in(nh, IPV6_EXT))
            frh = z3.And(z3.Not(done), nh == NEXTHDR_FRAGMENT)
            opt_ok, fr_ok = z3.And(opt, self.fits(off, 2)), z3.And(frh, self.fits(off, 8))
            fr_first = (self.be(off + 2, 2) & 0xFFF8) == 0  # no IP6_OFFSET
            step = off + (z3.ZeroExt(56, self.byte(off + 1)) + 1) * 8
            new_nh = _ite(z3.Or(opt_ok, fr_ok), self.byte(off), nh)
            off = _ite(opt_ok, step, _ite(fr_ok, off + 8, off))
            frag = z3.Or(frag, fr_ok)
            first = z3.Or(first, z3.And(fr_ok, fr_first))
            # a fragment header ends the walk (OUT_GOOD), a header that does not fit too (OUT_BAD)
            done = z3.Or(done, z3.Not(_in(nh, IPV6_EXT + (NEXTHDR_FRAGMENT,))), frh, z3.And(opt, z3.Not(opt_ok)))
            nh = new_nh
        overflow = z3.And(ok, z3.Not(done), _in(nh, IPV6_EXT + (NEXTHDR_FRAGMENT,)))
        l4 = self.l4(nh, off)
        on = z3.And(ok, z3.Not(frag))
        flags = z3.Concat(_ite(first, _bv(1, 1), _bv(0, 1)), _ite(frag, _bv(1, 1), _bv(0, 1)))
        part = _Part(
            {
                "n_proto": _ite(z3.And(on, nh == IPPROTO_MPLS), _bv(ETH_P_MPLS_UC, 16), _bv(ETH_P_IPV6, 16)),
                "addr_type": _ite(ok, _bv(ADDR_TYPE_IPV6, 8), _bv(0, 8)),
                "src_ip6": _ite(ok, src, _bv(0, 128)),
                "dst_ip6": _ite(ok, dst, _bv(0, 128)),
                "src_ip": _ite(ok, z3.Extract(127, 96, src), _bv(0, 32)),  # the union's view
                "dst_ip": _ite(ok, z3.Extract(95, 64, src), _bv(0, 32)),
                "ip_proto": _ite(ok, nh, _bv(0, 8)),
                "ip_tos": _ite(ok, z3.Extract(11, 4, self.be(o, 2)), _bv(0, 8)),  # ipv6_get_dsfield()
                "ip_ttl": _ite(ok, self.byte(o + 7), _bv(0, 8)),
                "ip_flags": _ite(ok, flags, _bv(0, 2)),
            }
        )
        for n in L4_KEYS:
            part.values[n] = _ite(on, l4.get(n), _bv(0, WIDTHS[n]))
            if n in l4.unknown:
                part.unknown[n] = z3.And(on, l4.unknown[n])
        if not z3.is_false(overflow):  # more headers than modelled: ip_proto and below unknown
            names = ("n_proto", "ip_proto", "ip_flags") + L4_KEYS
            part = _merge(overflow, _union(part, _fresh_part(names)), part, L3_KEYS)
        return part

    def l4(self, proto: z3.BitVecRef, t: z3.BitVecRef) -> _Part:
        """The ip_proto switch after the last header, and the ports read after it."""
        b12 = self.byte(t + 12)
        tcp_ok = z3.And(proto == 6, self.fits(t, 20), z3.UGE(z3.Extract(7, 4, b12), 5))
        icmp_ok = z3.And(_in(proto, (1, 58)), self.fits(t, 8))
        p0 = z3.And(_in(proto, PORTS_AT_0), self.fits(t, 4))
        p4 = z3.And(proto == 51, self.fits(t + 4, 4))
        zero16 = _bv(0, 16)
        part = _Part(
            {
                "tcp_flags": _ite(tcp_ok, z3.Concat(z3.Extract(3, 0, b12), self.byte(t + 13)), _bv(0, 12)),
                "icmp_type": _ite(icmp_ok, self.byte(t), _bv(0, 8)),
                "icmp_code": _ite(icmp_ok, self.byte(t + 1), _bv(0, 8)),
                "src_port": _ite(p0, self.be(t, 2), _ite(p4, self.be(t + 4, 2), zero16)),
                "dst_port": _ite(p0, self.be(t + 2, 2), _ite(p4, self.be(t + 6, 2), zero16)),
            }
        )
        unsure = _in(proto, PORTS_UNSURE)
        return _merge(unsure, _union(part, _fresh_part(("src_port", "dst_port"))), part, L4_KEYS)

    def _arp(self, o: int, proto: z3.BitVecRef) -> _Part:
        op = self.be(o + 6, 2)
        valid = z3.And(
            self.fits(o, 8),
            self.be(o, 2) == 1,
            self.be(o + 2, 2) == ETH_P_IP,
            self.byte(o + 4) == 6,
            self.byte(o + 5) == 4,
            _in(op, (1, 2)),
            self.fits(o + 8, 20),
        )
        part = _Part({"n_proto": proto})
        for name, at, n in (
            ("arp_sha", 8, 6),
            ("arp_sip", 14, 4),
            ("arp_tha", 18, 6),
            ("arp_tip", 24, 4),
            ("arp_op", 7, 1),
        ):
            part.values[name] = _ite(valid, self.be(o + at, n), _bv(0, WIDTHS[name]))
        return part

    # the whole walk: every L2 case
    def general(self) -> _Part:
        return self._cached("general", self._general)

    def _general(self) -> _Part:
        untagged = self.l3_any(14, self.skb_protocol())
        tagged = self._tags(1, self.proto1(), 18, self.tag("vlan", 14, self.outer, self.proto1()))
        return _union(_merge(self.outer_vlan, tagged, untagged, tuple(WIDTHS)), self.macs())

    def _tags(self, count: int, proto: z3.BitVecRef, o: int, l2: _Part) -> _Part:
        """After `count` tags, at offset `o` with ethertype `proto` (PROTO_AGAIN on a VLAN type)."""
        names = tuple(WIDTHS)
        rest = _union(self.l3_any(o, proto), l2)
        if count == MAX_TAGS:
            deeper = _union(_fresh_part(L3_KEYS), l2)
        else:
            inner = self.be(o + 2, 2)
            more = _union(l2, self.tag("cvlan", o, proto, inner)) if count == 1 else l2
            deeper = self._tags(count + 1, inner, o + 4, more)  # count 1: cvlan is the last recorded
            bad = _union(l2, _Part({"n_proto": proto}))  # OUT_BAD: the tag does not fit
            deeper = _merge(self.fits(o, 4), deeper, bad, names)
        return _merge(_in(proto, VLAN_TYPES), deeper, rest, names)


# --- public API -----------------------------------------------------------------------------


@dataclass
class Dissection:
    """What flower sees of one packet. `keys[name]`: the value compared for each flower key
    (FLOWER_KEYS names) and for the implicit fields n_proto, addr_type, vlan_tpid and
    cvlan_tpid; `unknown[name]`: when that value is a fresh variable; `exact`: no key is."""

    pkt: z3.ArrayRef
    length: z3.BitVecRef
    reaches_tc: z3.BoolRef
    skb_protocol: z3.BitVecRef
    _model: _Model = field(repr=False)
    #: match_formula's memo for this packet (a FlowerMatch -> its formula): layout,
    #: minimisation and the printed script's proof ask for the same filters' formulas
    _formulas: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def keys(self) -> dict[str, z3.BitVecRef]:
        return self._model.general().values

    @property
    def unknown(self) -> dict[str, z3.BoolRef]:
        part = self._model.general()
        return {n: part.unk(n) for n in WIDTHS}

    @property
    def exact(self) -> z3.BoolRef:
        return z3.Not(z3.Or([u for u in self._model.general().unknown.values()] or [_FALSE]))


def dissect(pkt: z3.ArrayRef = PACKET, length: z3.BitVecRef = PACKET_LEN) -> Dissection:
    """The flow dissector's view of the packet `pkt` of `length` bytes (see the module doc)."""
    if pkt is PACKET and length is PACKET_LEN:
        return _default_dissection()
    return _new_dissection(pkt, length)


def _new_dissection(pkt, length) -> Dissection:
    m = _Model(pkt, length)
    return Dissection(pkt, length, m.reaches_tc(), m.skb_protocol(), m)


@lru_cache(maxsize=1)
def _default_dissection() -> Dissection:
    return _new_dissection(PACKET, PACKET_LEN)


# --- matching -------------------------------------------------------------------------------


def _view(match: FlowerMatch, d: Dissection) -> tuple[z3.BoolRef, _Part]:
    """The L2 case a match's protocol chain selects (it fixes the tags and where L3 starts), with
    that case's key values: the same layers `keys` is built from, without the other cases."""
    m = d._model
    eth = PROTOCOLS[match.protocol]
    general = None
    part = _Part(dict(m.macs().values))
    if eth in FAMILIES:  # untagged: skb->protocol is the frame's ethertype
        cond = d.skb_protocol == eth
        part.values.update(m.l3(14, FAMILIES[eth]).values)
        part.unknown.update(m.l3(14, FAMILIES[eth]).unknown)
        return cond, part
    if eth not in VLAN_TYPES:  # all: whatever the walk finds
        return _TRUE, m.general()
    cond = d.skb_protocol == eth
    p1 = m.proto1()
    part.values.update(m.tag("vlan", 14, m.outer, p1).values)
    v = match.get("vlan_ethtype")
    if v is None:
        general = m.general()
    elif v.value in FAMILIES:
        cond = z3.And(cond, p1 == v.value)
        layer = m.l3(18, FAMILIES[v.value])
        part.values.update(layer.values)
        part.unknown.update(layer.unknown)
    else:
        cond = z3.And(cond, p1 == v.value)
        ok = m.fits(18, 4)
        p2 = m.be(20, 2)
        for n, val in m.tag("cvlan", 18, p1, p2).values.items():
            part.values[n] = _ite(ok, val, _bv(0, WIDTHS[n]))
        c = match.get("cvlan_ethtype")
        if c is None:
            general = m.general()
        else:
            cond = z3.And(cond, ok, p2 == c.value)
            layer = m.l3(22, FAMILIES[c.value])
            part.values.update(layer.values)
            part.unknown.update(layer.unknown)
    if general is not None:  # keys the match cannot name: take them from the whole walk
        for n in WIDTHS:
            if n not in part.values:
                part.values[n] = general.get(n)
                if n in general.unknown:
                    part.unknown[n] = general.unknown[n]
    return cond, part


def chain_keys(match: FlowerMatch, d: Dissection) -> dict[str, z3.BitVecRef]:
    """Every key's value for packets of the protocol chain `match` names (its protocol,
    vlan_ethtype and cvlan_ethtype; other keys ignored): equal to `d.keys` on those packets,
    built from that chain's layers only (smaller terms for z3)."""
    _, part = _view(FlowerMatch(match.protocol, tuple((n, v) for n, v in match.keys if n.endswith("ethtype"))), d)
    return {n: part.get(n) for n in WIDTHS}


def chain_exact(match: FlowerMatch, d: Dissection) -> z3.BoolRef:
    """When none of chain_keys' values for the protocol chain `match` names is a fresh
    variable (`unknown.flower.<key>`, where the model stops: the module doc): the chain's
    layers only, as chain_keys builds them (d.exact walks every case)."""
    _, part = _view(FlowerMatch(match.protocol, tuple((n, v) for n, v in match.keys if n.endswith("ethtype"))), d)
    return z3.Not(z3.Or([u for u in part.unknown.values()] or [_FALSE]))


def _conditions(match: FlowerMatch, values, symbolic=None) -> tuple[list[z3.BoolRef], list[str]]:
    """What fl_set_key turns the match into, over key values: the implicit fields (n_proto from
    the eth type chain, vlan/cvlan tpid and next ethertype, addr_type) and every key, masked or
    ranged; a key in `symbolic` is compared with that term instead of its Exact value. Returns
    the conditions and the names of the values they read."""
    symbolic = symbolic or {}
    conds: list[z3.BoolRef] = []
    used: list[str] = []

    def eq(name: str, value: int) -> None:
        conds.append(values(name) == value)
        used.append(name)

    eth = PROTOCOLS[match.protocol]
    if eth in FAMILIES:
        eq("n_proto", eth)
    elif eth in VLAN_TYPES:
        eq("vlan_tpid", eth)
        v = match.get("vlan_ethtype")
        if v is not None and v.value in VLAN_TYPES:
            eq("cvlan_tpid", v.value)
            c = match.get("cvlan_ethtype")
            if c is not None:
                eq("n_proto", c.value)
        elif v is not None:
            eq("n_proto", v.value)
    # control.addr_type (fl_set_key): set by any address key of a family; the packet's value
    # is filled only when the dissector uses that family's address key, i.e. when some mask
    # bit of the family's fl_flow_key member is set (fl_init_dissector, FL_KEY_IS_MASKED;
    # Linux 6.18 net/sched/cls_flower.c). With all masks zero it stays 0: no match.
    families: dict[str, bool] = {}
    for name, value in match.keys:
        fam = FLOWER_KEYS[name].addr_struct
        if fam:
            families[fam] = families.get(fam, False) or bool(value.mask)
    for fam, masked in families.items():
        if masked:
            eq("addr_type", ADDR_TYPES[fam])
        else:
            conds.append(_FALSE)
    for name, value in match.keys:
        x = values(name)
        used.append(name)
        if name in symbolic:
            if isinstance(value, Range) or symbolic[name].size() != WIDTHS[name]:
                raise ValueError(f"symbolic {name}: needs an Exact placeholder and a {WIDTHS[name]}-bit term")
            conds.append(x & value.mask == symbolic[name] & value.mask)
        elif isinstance(value, Range):
            conds.append(z3.And(z3.ULE(value.lo, x), z3.ULE(x, value.hi)))
        elif value.mask == (1 << WIDTHS[name]) - 1:
            conds.append(x == value.value)
        elif value.mask:
            conds.append(x & value.mask == value.value)
    return conds, used


#: Formulas kept per Dissection by match_formula (the default one lives as long as the process).
MAX_FORMULAS = 4096


def match_formula(
    match: FlowerMatch, d: Dissection | None = None, symbolic: dict[str, z3.BitVecRef] | None = None
) -> z3.BoolRef:
    """True iff the filter `protocol P ... flower KEYS` matches the packet of `d` (tc's protocol
    check, then cls_flower's masked compare and port ranges). For a rule template (a map key
    that becomes the value), `symbolic` maps key names to terms of the key's width; those keys
    stay in `match` with a placeholder Exact whose mask is the template's."""
    d = d or dissect()
    if symbolic is not None:
        return _match(match, d, symbolic, unknown=False)[0]
    if match not in d._formulas:
        if len(d._formulas) >= MAX_FORMULAS:  # a long-lived process (sync, lsp) starts over
            d._formulas.clear()
        d._formulas[match] = _match(match, d, unknown=False)[0]
    return d._formulas[match]


def _match(match: FlowerMatch, d: Dissection, symbolic=None, unknown: bool = True) -> tuple[z3.BoolRef, z3.BoolRef]:
    """(formula, when it may read a fresh variable; None unless `unknown` is asked)."""
    cond, part = _view(match, d)
    conds, used = _conditions(match, part.get, symbolic)
    maybe = None
    if unknown:
        unk = [part.unk(n) for n in dict.fromkeys(used)]
        maybe = z3.Or([u for u in unk if not z3.is_false(u)] or [_FALSE])
    return z3.And([d.reaches_tc, cond] + conds), maybe


def generic_formula(match: FlowerMatch, d: Dissection | None = None) -> z3.BoolRef:
    """match_formula over the whole walk (`d.keys`) instead of the protocol's case; the two are
    equivalent (tests prove it), this one is slower for z3."""
    d = d or dissect()
    eth = PROTOCOLS[match.protocol]
    conds, _ = _conditions(match, lambda n: d.keys[n])
    proto = _TRUE if eth == PROTOCOLS["all"] else d.skb_protocol == eth
    return z3.And([d.reaches_tc, proto] + conds)


# --- concrete evaluation ----------------------------------------------------------------------


class _Compiled:
    """Terms over (pkt, length) compiled to one Python function: straight-line integer code,
    one statement per term node, so a concrete packet evaluates the very formula z3 reasons
    about. Fresh variables read as 0; callers check the `maybe fresh` term first."""

    def __init__(self, outputs: list[z3.ExprRef], pkt: z3.ArrayRef, length: z3.BitVecRef):
        self._terms: list[z3.ExprRef] = []  # keep every term alive: z3 reuses ids of freed ones
        names: dict[int, str] = {}
        lines: list[str] = []
        pkt_id, len_id = pkt.get_id(), length.get_id()
        for root in outputs:
            stack = [(root, False)]
            while stack:
                e, ready = stack.pop()
                eid = e.get_id()
                if eid in names:
                    continue
                kids = e.children() if not z3.is_const(e) else []
                if not ready:
                    stack.append((e, True))
                    stack.extend((k, False) for k in kids if k.get_id() not in names)
                    continue
                var = f"v{len(names)}"
                code = self._code(e, [names[k.get_id()] for k in kids], pkt_id, len_id)
                lines.append(f"    {var} = {code}")
                names[eid] = var
                self._terms.append(e)
        ret = ", ".join(names[o.get_id()] for o in outputs)
        src = "def f(P, L):\n    n = len(P)\n" + "\n".join(lines) + f"\n    return ({ret},)\n"
        scope: dict = {}
        exec(compile(src, "<flower-formula>", "exec"), scope)
        self.fn = scope["f"]

    @staticmethod
    def _code(e: z3.ExprRef, a: list[str], pkt_id: int, len_id: int) -> str:
        k = e.decl().kind()
        if z3.is_bv_value(e):
            return str(e.as_long())
        if z3.is_true(e):
            return "True"
        if z3.is_false(e):
            return "False"
        if k == z3.Z3_OP_UNINTERPRETED and not e.children():
            if e.get_id() == len_id:
                return "L"
            if e.get_id() == pkt_id:
                return "None"
            if e.decl().name().startswith("unknown.flower."):
                return "0"
            raise ValueError(f"flower formula: unexpected free symbol {e.decl().name()}")
        mask = (1 << e.size()) - 1 if z3.is_bv(e) else 0
        if k == z3.Z3_OP_SELECT:
            return f"(P[{a[1]}] if {a[1]} < n else 0)"
        if k == z3.Z3_OP_BADD:
            return f"({' + '.join(a)}) & {mask}"
        if k == z3.Z3_OP_BMUL:
            return f"({' * '.join(a)}) & {mask}"
        if k == z3.Z3_OP_BAND:
            return " & ".join(a)
        if k == z3.Z3_OP_BOR:
            return " | ".join(a)
        if k == z3.Z3_OP_CONCAT:
            expr, shift = [], 0
            for child, name in reversed(list(zip(e.children(), a))):
                expr.append(f"({name} << {shift})" if shift else name)
                shift += child.size()
            return " | ".join(expr)
        if k == z3.Z3_OP_EXTRACT:
            hi, lo = e.params()
            return f"({a[0]} >> {lo}) & {(1 << (hi - lo + 1)) - 1}"
        if k == z3.Z3_OP_ZERO_EXT:
            return a[0]
        if k == z3.Z3_OP_ITE:
            return f"({a[1]} if {a[0]} else {a[2]})"
        if k == z3.Z3_OP_EQ:
            return f"{a[0]} == {a[1]}"
        if k == z3.Z3_OP_DISTINCT:
            return f"{a[0]} != {a[1]}"
        if k == z3.Z3_OP_ULEQ:
            return f"{a[0]} <= {a[1]}"
        if k == z3.Z3_OP_UGEQ:
            return f"{a[0]} >= {a[1]}"
        if k == z3.Z3_OP_ULT:
            return f"{a[0]} < {a[1]}"
        if k == z3.Z3_OP_UGT:
            return f"{a[0]} > {a[1]}"
        if k == z3.Z3_OP_AND:
            return "(" + " and ".join(a) + ")" if a else "True"
        if k == z3.Z3_OP_OR:
            return "(" + " or ".join(a) + ")" if a else "False"
        if k == z3.Z3_OP_NOT:
            return f"not {a[0]}"
        if k == z3.Z3_OP_IMPLIES:
            return f"(not {a[0]} or {a[1]})"
        raise ValueError(f"flower formula: cannot evaluate operator {e.decl().name()}")


_MATCHES: dict[FlowerMatch, tuple[z3.BoolRef, _Compiled]] = {}


def _compiled_match(match: FlowerMatch) -> tuple[z3.BoolRef, _Compiled]:
    hit = _MATCHES.get(match)
    if hit is None:
        formula, maybe = _match(match, dissect())
        hit = _MATCHES[match] = (formula, _Compiled([formula, maybe], PACKET, PACKET_LEN))
    return hit


def evaluate(match: FlowerMatch, packet: bytes) -> bool:
    """Does the filter match this packet? Evaluates match_formula on the bytes. Where the
    answer depends on a value the model leaves fresh, asks z3 whether some value of it matches
    (so True means "may match": the safe side for a soundness check)."""
    formula, code = _compiled_match(match)
    result, maybe = code.fn(packet, len(packet))
    if not maybe:
        return bool(result)
    s = z3.Solver()
    s.add(_concrete(formula, packet))
    return s.check() == z3.sat


def _concrete(term: z3.ExprRef, packet: bytes) -> z3.ExprRef:
    arr = z3.K(z3.BitVecSort(64), _bv(0, 8))
    for i, b in enumerate(packet):
        arr = z3.Store(arr, _bv(i, 64), _bv(b, 8))
    return z3.substitute(term, (PACKET, arr), (PACKET_LEN, _bv(len(packet), 64)))


_CONCRETE_NAMES = ("reaches_tc", "skb_protocol") + tuple(WIDTHS)


@lru_cache(maxsize=1)
def _compiled_dissection() -> _Compiled:
    d = dissect()
    unknown = d.unknown
    return _Compiled(
        [d.reaches_tc, d.skb_protocol] + [d.keys[n] for n in WIDTHS] + [unknown[n] for n in WIDTHS], PACKET, PACKET_LEN
    )


def dissect_concrete(packet: bytes) -> dict[str, int | None]:
    """Every value of `dissect()` for concrete bytes: reaches_tc (0/1), skb_protocol and each key;
    None where the model leaves the key fresh."""
    out = _compiled_dissection().fn(packet, len(packet))
    k = len(_CONCRETE_NAMES)
    values = dict(zip(_CONCRETE_NAMES, out[:k]))
    for name, unk in zip(WIDTHS, out[k:]):
        if unk:
            values[name] = None
    values["reaches_tc"] = int(values["reaches_tc"])
    return values
