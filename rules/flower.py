"""The tc flower facts xdp2tc relies on, each stated once, and the match value it emits.

`FLOWER_KEYS` is the one key table: tc token, width, value kind, what masks and ranges tc
accepts, what the key needs (protocol family, ip_proto) and where iproute2's parser
(tc/f_flower.c, flower_parse_opt) needs it in the argument list. A `FlowerMatch` is one
rule's match; building it checks it against the table (a match that tc or the kernel would
refuse, or silently ignore, is an error) and normalises it (keys in table order, values
masked), so equal matches compare equal. `render` turns it into tc tokens.

Zero masks (net/sched/cls_flower.c, Linux 6.18): fl_classify() dissects the packet with one
flow dissector per mask, built by fl_init_dissector(), which enables a dissector key only
when FL_KEY_IS_MASKED (some mask byte of that fl_flow_key member is non-zero). A key whose
mask is all zero therefore compares nothing (key & 0 == 0) - except the address keys:
fl_set_key() sets control.addr_type (FLOW_DISSECTOR_KEY_IPV4_ADDRS/_IPV6_ADDRS, mask ~0) as
soon as TCA_FLOWER_KEY_IPV4_SRC/_DST (or IPV6) is present, while __skb_flow_dissect() fills
the packet's addr_type only when the dissector uses the address key. So a filter whose
address keys (src and dst of one family, `addr_struct`) all have a zero mask, such as
`src_ip 0.0.0.0/0`, matches no packet at all. FlowerMatch keeps such keys (a parsed script
may hold them; dissector.py says they match nothing); xdp2tc never emits a zero mask
(`zero_mask_keys`).

Kernel facts behind the requirements (net/sched/cls_flower.c, fl_set_key): ip_proto,
ip_tos and ip_ttl are only set when the eth type is IPv4/IPv6; ports only under ip_proto
tcp/udp/sctp; tcp_flags only under ip_proto tcp; ICMP type/code only for ip + icmp or
ipv6 + icmpv6. A key given outside those conditions is dropped by the kernel without an
error, so xdp2tc refuses it here.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

# --- protocols ----------------------------------------------------------------------------

#: tc `protocol` names (iproute2 lib/ll_proto.c) and ethertypes xdp2tc emits.
PROTOCOLS = {"ip": 0x0800, "ipv6": 0x86DD, "arp": 0x0806, "802.1Q": 0x8100, "802.1ad": 0x88A8, "all": 0x0003}
#: Ethertypes the kernel treats as VLAN tags (eth_type_vlan).
VLAN_TYPES = frozenset({0x8100, 0x88A8})
#: Protocol family of a non-VLAN ethertype, as the key table's `family` column names it.
FAMILIES = {0x0800: "ip", 0x86DD: "ipv6", 0x0806: "arp"}

IPPROTO = {"icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58, "sctp": 132}
PORT_PROTOS = frozenset({6, 17, 132})  # cls_flower sets port keys only for these


def protocol_number(name: str) -> int:
    """The ethertype of a tc protocol name."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown tc protocol {name!r} (known: {', '.join(PROTOCOLS)})") from None


def protocol_name(number: int) -> str:
    """The tc protocol name of an ethertype xdp2tc emits."""
    for name, value in PROTOCOLS.items():
        if value == number:
            return name
    raise ValueError(f"no tc protocol name for ethertype 0x{number:04x}")


# --- the key table --------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowerKey:
    """One flower key. `mask`: "none" (exact only), "prefix" (address/len) or "any" (value/mask);
    `family`: what the protocol chain must resolve to ("vlan": protocol 802.1Q/802.1ad,
    "cvlan": vlan_ethtype a VLAN type, "inet": ip or ipv6, "ip", "ipv6", "arp", None: any);
    `ip_protos`: ip_proto values the key needs (ICMP: 1 under ip, 58 under ipv6);
    `after`: keys that f_flower.c needs earlier on the line when both are present."""

    name: str  # id used in FlowerMatch and Dissection.keys
    tc: str  # token on the tc line
    width: int
    kind: str  # mac | ipv4 | ipv6 | int | flags
    mask: str
    ranges: bool
    family: str | None
    ip_protos: frozenset[int] | None
    after: tuple[str, ...]
    order: int  # position on the rendered line
    #: the fl_flow_key member whose mask decides whether the dissector fills the packet's
    #: addr_type (see the module doc): "ipv4", "ipv6", or None for keys without addr_type
    addr_struct: str | None = None


_ETH = ("vlan_ethtype", "cvlan_ethtype")  # they change the eth type later keys are parsed with
_L4 = ("ip_proto",)  # ports and ICMP keys are parsed with the ip_proto seen so far

_ROWS = [
    # name, tc, width, kind, mask, ranges, family, ip_protos, after
    ("dst_mac", "dst_mac", 48, "mac", "any", False, None, None, ()),
    ("src_mac", "src_mac", 48, "mac", "any", False, None, None, ()),
    ("vlan_id", "vlan_id", 12, "int", "none", False, "vlan", None, ()),
    ("vlan_prio", "vlan_prio", 3, "int", "none", False, "vlan", None, ()),
    ("vlan_ethtype", "vlan_ethtype", 16, "int", "none", False, "vlan", None, ()),
    ("cvlan_id", "cvlan_id", 12, "int", "none", False, "cvlan", None, ("vlan_ethtype",)),
    ("cvlan_prio", "cvlan_prio", 3, "int", "none", False, "cvlan", None, ("vlan_ethtype",)),
    ("cvlan_ethtype", "cvlan_ethtype", 16, "int", "none", False, "cvlan", None, ("vlan_ethtype",)),
    ("ip_proto", "ip_proto", 8, "int", "none", False, "inet", None, _ETH),
    ("src_ip", "src_ip", 32, "ipv4", "prefix", False, "ip", None, _ETH),
    ("dst_ip", "dst_ip", 32, "ipv4", "prefix", False, "ip", None, _ETH),
    ("src_ip6", "src_ip", 128, "ipv6", "prefix", False, "ipv6", None, _ETH),
    ("dst_ip6", "dst_ip", 128, "ipv6", "prefix", False, "ipv6", None, _ETH),
    ("ip_tos", "ip_tos", 8, "int", "any", False, "inet", None, ()),
    ("ip_ttl", "ip_ttl", 8, "int", "any", False, "inet", None, ()),
    ("ip_flags", "ip_flags", 2, "flags", "any", False, "inet", None, ()),
    ("src_port", "src_port", 16, "int", "any", True, "inet", PORT_PROTOS, _L4),
    ("dst_port", "dst_port", 16, "int", "any", True, "inet", PORT_PROTOS, _L4),
    ("tcp_flags", "tcp_flags", 12, "flags", "any", False, "inet", frozenset({6}), ()),
    ("icmp_type", "type", 8, "int", "any", False, "inet", frozenset({1, 58}), _ETH + _L4),
    ("icmp_code", "code", 8, "int", "any", False, "inet", frozenset({1, 58}), _ETH + _L4),
    ("arp_sip", "arp_sip", 32, "ipv4", "prefix", False, "arp", None, _ETH),
    ("arp_tip", "arp_tip", 32, "ipv4", "prefix", False, "arp", None, _ETH),
    ("arp_op", "arp_op", 8, "int", "any", False, "arp", None, _ETH),
    ("arp_sha", "arp_sha", 48, "mac", "any", False, "arp", None, ()),
    ("arp_tha", "arp_tha", 48, "mac", "any", False, "arp", None, ()),
]

_ADDR_STRUCT = {"src_ip": "ipv4", "dst_ip": "ipv4", "src_ip6": "ipv6", "dst_ip6": "ipv6"}

FLOWER_KEYS: dict[str, FlowerKey] = {
    row[0]: FlowerKey(*row, order=i, addr_struct=_ADDR_STRUCT.get(row[0])) for i, row in enumerate(_ROWS)
}

#: ip_flags bits (TCA_FLOWER_KEY_FLAGS_IS_FRAGMENT / _FRAG_IS_FIRST = FLOW_DIS_IS_FRAGMENT /
#: FLOW_DIS_FIRST_FRAG) and their tc words.
IP_FLAG_FRAG, IP_FLAG_FIRSTFRAG = 1, 2
_IP_FLAG_WORDS = ((IP_FLAG_FRAG, "frag"), (IP_FLAG_FIRSTFRAG, "firstfrag"))
ARP_OPS = {1: "request", 2: "reply"}


def key(name: str) -> FlowerKey:
    try:
        return FLOWER_KEYS[name]
    except KeyError:
        raise ValueError(f"unknown flower key {name!r}") from None


# --- values and matches ---------------------------------------------------------------------


@dataclass(frozen=True)
class Exact:
    """The key equals `value` on the bits of `mask` (flower compares key & mask)."""

    value: int
    mask: int


@dataclass(frozen=True)
class Range:
    """lo <= key <= hi (ports only; cls_flower fl_range_port_*_cmp)."""

    lo: int
    hi: int


Value = Exact | Range


def exact(name: str, value: int) -> Exact:
    """A full-width exact value for key `name`."""
    return Exact(value, (1 << key(name).width) - 1)


def prefix_mask(length: int, width: int) -> int:
    """The network mask of a /length prefix of a width-bit address."""
    return ((1 << length) - 1) << (width - length)


def prefix(name: str, value: int, length: int) -> Exact:
    """An address prefix value/len for key `name`."""
    width = key(name).width
    if not 0 <= length <= width:
        raise ValueError(f"{name}: prefix length {length} outside 0..{width}")
    mask = prefix_mask(length, width)
    return Exact(value & mask, mask)


def prefix_len(mask: int, width: int) -> int | None:
    """The prefix length of a mask, or None when it is not a prefix."""
    inv = ~mask & ((1 << width) - 1)
    if inv & (inv + 1):
        return None
    return width - inv.bit_length()


@dataclass(frozen=True)
class FlowerMatch:
    """One flower match: the filter's `protocol` and its keys. Construction validates against
    FLOWER_KEYS and normalises (table order, value & mask, one-port ranges -> exact, zero
    masks dropped where they compare nothing; kept on address keys, where they make the
    filter match nothing: see the module doc)."""

    protocol: str
    keys: tuple[tuple[str, Value], ...] = ()

    def __post_init__(self):
        protocol_number(self.protocol)
        object.__setattr__(self, "keys", _normalise(self.protocol, self.keys))

    def get(self, name: str) -> Value | None:
        for k, v in self.keys:
            if k == name:
                return v
        return None

    @property
    def ethertype(self) -> int:
        return PROTOCOLS[self.protocol]

    @property
    def family(self) -> str | None:
        """What the protocol chain (protocol, vlan_ethtype, cvlan_ethtype) resolves to."""
        return chain_family(self.protocol, dict(self.keys))

    def mask_shape(self) -> tuple:
        """What "one mask per prio" compares: the protocol (one protocol per prio in tc) and,
        per key, its mask or "range". Two matches may share a prio only if equal here."""
        return (self.protocol,) + tuple((k, "range" if isinstance(v, Range) else v.mask) for k, v in self.keys)

    def zero_mask_keys(self) -> list[str]:
        """Keys given with an all-zero mask (only address keys survive normalisation)."""
        return [k for k, v in self.keys if isinstance(v, Exact) and v.mask == 0]

    def __str__(self) -> str:
        return f"protocol {self.protocol} flower {' '.join(render(self))}".rstrip()


def chain_family(protocol: str, keys: dict) -> str | None:
    """What the protocol chain of `protocol` and the keys (name -> Exact) vlan_ethtype and
    cvlan_ethtype resolves to: a FAMILIES value, or None (no L3 keys are allowed)."""
    eth = PROTOCOLS[protocol]
    if eth in VLAN_TYPES:
        v = keys.get("vlan_ethtype")
        if v is None:
            return None
        eth = v.value
        if eth in VLAN_TYPES:
            c = keys.get("cvlan_ethtype")
            if c is None:
                return None
            eth = c.value
    return FAMILIES.get(eth)


def allowed(name: str, protocol: str, keys: dict) -> bool:
    """Does the protocol chain (`protocol` and the keys' vlan_ethtype/cvlan_ethtype, name ->
    Exact) allow key `name` (its `family` column)? ip_proto needs are checked apart."""
    need = FLOWER_KEYS[name].family
    return need is None or _has(chain_family(protocol, keys), need, protocol, keys)


def _has(family: str | None, need: str, protocol: str, keys: dict) -> bool:
    if need == "vlan":
        return PROTOCOLS[protocol] in VLAN_TYPES
    if need == "cvlan":
        v = keys.get("vlan_ethtype")
        return PROTOCOLS[protocol] in VLAN_TYPES and v is not None and v.value in VLAN_TYPES
    if need == "inet":
        return family in ("ip", "ipv6")
    return family == need


def _normalise(protocol: str, keys) -> tuple:
    where = f"flower match (protocol {protocol})"
    seen: dict[str, Value] = {}
    for item in keys:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise ValueError(f"{where}: keys must be (name, Exact|Range) pairs, got {item!r}")
        name, value = item
        row = key(name)
        if name in seen:
            raise ValueError(f"{where}: key {name} given twice")
        seen[name] = _check_value(row, value, where)
    family = chain_family(protocol, seen)
    for name in seen:
        row = FLOWER_KEYS[name]
        if row.family and not _has(family, row.family, protocol, seen):
            raise ValueError(f"{where}: {name} needs {_NEEDS[row.family]}")
    for name in ("vlan_ethtype", "cvlan_ethtype"):
        v = seen.get(name)
        if v is not None and v.value not in FAMILIES and v.value not in VLAN_TYPES:
            raise ValueError(f"{where}: {name} 0x{v.value:04x} is not ip, ipv6, arp, 802.1Q or 802.1ad")
    c = seen.get("cvlan_ethtype")
    if c is not None and c.value in VLAN_TYPES:
        raise ValueError(f"{where}: cvlan_ethtype must not be a VLAN type (flower matches two tags)")
    _check_ip_proto(seen, family, where)
    op = seen.get("arp_op")
    if op is not None and op.value not in (0, 1, 2):
        raise ValueError(f"{where}: arp_op {op.value} is not 0, 1 (request) or 2 (reply)")
    ranged = {isinstance(seen[p], Range) for p in ("src_port", "dst_port") if p in seen}
    if len(ranged) == 2:
        # __skb_flow_dissect_ports fills only one of FLOW_DISSECTOR_KEY_PORTS/_PORTS_RANGE, so
        # in software the range side is compared with a zero port and never matches.
        raise ValueError(f"{where}: a port range and an exact/masked port cannot share a rule")
    # zero masks compare nothing, except on address keys (module doc: they match nothing)
    kept = {n: v for n, v in seen.items() if isinstance(v, Range) or v.mask or FLOWER_KEYS[n].addr_struct}
    return tuple(sorted(kept.items(), key=lambda kv: FLOWER_KEYS[kv[0]].order))


_NEEDS = {
    "vlan": "protocol 802.1Q or 802.1ad",
    "cvlan": "vlan_ethtype 802.1Q or 802.1ad",
    "inet": "an ip or ipv6 protocol chain",
    "ip": "an ip protocol chain",
    "ipv6": "an ipv6 protocol chain (src_ip/dst_ip are IPv4: use src_ip6/dst_ip6)",
    "arp": "an arp protocol chain",
}


def _check_value(row: FlowerKey, value, where: str) -> Value:
    top = (1 << row.width) - 1
    if isinstance(value, Range):
        if not row.ranges:
            raise ValueError(f"{where}: {row.name} takes no MIN-MAX range")
        if not 0 <= value.lo <= value.hi <= top:
            raise ValueError(f"{where}: {row.name} range {value.lo}-{value.hi} is not within 0..{top}")
        if value.lo == value.hi:
            return Exact(value.lo, top)
        if value.lo == 0:
            raise ValueError(
                f"{where}: {row.name} range {value.lo}-{value.hi} starts at 0, which tc "
                f"cannot express (MIN must be >= 1); split off port 0"
            )
        return value
    if not isinstance(value, Exact):
        raise ValueError(f"{where}: {row.name} value must be Exact or Range, got {value!r}")
    if not (0 <= value.value <= top and 0 <= value.mask <= top):
        raise ValueError(f"{where}: {row.name} value/mask wider than {row.width} bits")
    if row.mask == "none" and value.mask != top:
        raise ValueError(f"{where}: {row.name} takes no mask")
    if row.mask == "prefix" and prefix_len(value.mask, row.width) is None:
        raise ValueError(f"{where}: {row.name} mask 0x{value.mask:x} is not a prefix (tc takes ADDR/LEN only)")
    return Exact(value.value & value.mask, value.mask)


def _check_ip_proto(seen: dict, family: str | None, where: str) -> None:
    proto = seen.get("ip_proto")
    for name in seen:
        need = FLOWER_KEYS[name].ip_protos
        if need is None:
            continue
        if name.startswith("icmp_"):
            need = frozenset({1 if family == "ip" else 58})
        if proto is None or proto.value not in need:
            want = "/".join(str(p) for p in sorted(need))
            raise ValueError(f"{where}: {name} needs ip_proto {want}")


#: Keys whose values another key's check reads (the protocol chain, ip_proto's needs, arp_op).
_VALUE_READ = frozenset({"ip_proto", "vlan_ethtype", "cvlan_ethtype", "arp_op"})


class MatchShape:
    """Many FlowerMatches that differ only in the values of some `open` keys (a template
    level's filters, one per map entry): the match is validated and put in table order once,
    with a placeholder per open key; `match(values)` checks each value as construction does
    and makes a match equal to FlowerMatch(protocol, fixed + values) without normalising it
    again. Construction raises ValueError as FlowerMatch does, or when an open key is one
    whose value another key's check reads (ip_proto, the VLAN ethtypes, arp_op)."""

    def __init__(self, protocol: str, fixed: tuple, open_keys: tuple[str, ...]):
        if _VALUE_READ & set(open_keys):
            raise ValueError(f"flower match: {', '.join(sorted(_VALUE_READ & set(open_keys)))} cannot be open")
        proto = FlowerMatch(protocol, fixed + tuple((n, Exact(0, (1 << key(n).width) - 1)) for n in open_keys))
        self.protocol = protocol
        self.fixed = fixed
        self.keys = proto.keys
        self.at = {n: i for i, (n, _) in enumerate(proto.keys) if n in open_keys}
        self.where = f"flower match (protocol {protocol})"

    def match(self, values: dict[str, Value]) -> FlowerMatch:
        """The match with these values of the open keys (every open key, nothing else)."""
        keys = list(self.keys)
        for n, v in values.items():
            row = FLOWER_KEYS[n]
            if not isinstance(v, Exact) or not (v.mask or row.addr_struct):  # normalised otherwise
                return FlowerMatch(self.protocol, self.fixed + tuple(values.items()))
            keys[self.at[n]] = (n, _check_value(row, v, self.where))
        m = object.__new__(FlowerMatch)
        object.__setattr__(m, "protocol", self.protocol)
        object.__setattr__(m, "keys", tuple(keys))
        return m


# --- rendering ----------------------------------------------------------------------------


def render(match: FlowerMatch) -> list[str]:
    """The tc tokens after `flower` (and after skip_sw/skip_hw), in an order f_flower.c accepts."""
    out: list[str] = []
    family = match.family
    for name, value in match.keys:
        row = FLOWER_KEYS[name]
        out += [row.tc, _render_value(row, value, family)]
    return out


def _render_value(row: FlowerKey, value: Value, family: str | None) -> str:
    if isinstance(value, Range):
        return f"{value.lo}-{value.hi}"
    v, m = value.value, value.mask
    full = m == (1 << row.width) - 1
    name = row.name
    if row.kind == "mac":
        return _mac(v) if full else f"{_mac(v)}/{_mac(m)}"
    if row.kind == "ipv4":  # as str(ipaddress.IPv4Address(v)), without the object (one per filter)
        addr = f"{v >> 24}.{v >> 16 & 255}.{v >> 8 & 255}.{v & 255}"
        return addr if full else f"{addr}/{prefix_len(m, row.width)}"
    if row.kind == "ipv6":
        addr = ipaddress.IPv6Address(v)
        plen = prefix_len(m, row.width)
        return str(addr) if full else f"{addr}/{plen}"
    if name in ("vlan_ethtype", "cvlan_ethtype"):
        return protocol_name(v)
    if name == "ip_proto":
        for word, number in IPPROTO.items():
            if number == v and (word != "icmp" or family == "ip") and (word != "icmpv6" or family == "ipv6"):
                return word
        return f"0x{v:x}"  # parsed base 16; a bare word could prefix-match tcp/udp/... names
    if name in ("ip_tos", "ip_ttl"):
        # f_flower.c flower_parse_ip_tos_ttl: value decimal-or-hex, mask always base 16
        return f"0x{v:x}" if full else f"0x{v:x}/0x{m:x}"
    if name in ("src_port", "dst_port"):
        # parse_range: a bare 0 is refused, so port 0 goes through the masked form
        return str(v) if full and v else f"{v}/0x{m:x}"
    if name == "tcp_flags":
        return f"0x{v:x}" if full else f"0x{v:x}/0x{m:x}"
    if name == "ip_flags":
        return "/".join(("" if v & bit else "no") + word for bit, word in _IP_FLAG_WORDS if m & bit)
    if name == "arp_op":
        word = ARP_OPS.get(v, str(v))
        return word if full else f"{word}/{m}"
    if name in ("icmp_type", "icmp_code"):
        return str(v) if full else f"{v}/{m}"  # flower_parse_u8: both parts base 10
    return str(v)  # vlan_id, vlan_prio, cvlan_id, cvlan_prio: decimal, no mask


def _mac(v: int) -> str:
    return ":".join(f"{b:02x}" for b in v.to_bytes(6, "big"))
