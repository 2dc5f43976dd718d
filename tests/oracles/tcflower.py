"""Test oracle: tc flower batch scripts read and run on concrete packets, written from
iproute2's and the kernel's documentation and sources, sharing nothing with rules/.

`parse(text)` reads `filter add ... flower ...` lines into `Line`s (chain, prio,
protocol, keys as (value, mask) or (lo, hi) ranges, action words). `run(lines, frame)`
classifies one Ethernet frame the way tc does: chain 0 first, prios ascending, first
match acts, `goto chain N` continues in chain N, `pass` or no match ends it (the frame
goes to the host). Matching reads the frame with a small flow dissector of its own
(Ethernet, up to two 802.1Q/802.1ad tags recorded as vlan_* and cvlan_* (up to four
walked), IPv4 with options and fragments, IPv6 with hop-by-hop, routing, destination
options and fragment headers, TCP/UDP/SCTP ports, TCP flags, ICMP/ICMPv6 type/code) and applies
cls_flower's rule that address keys whose masks are all zero match nothing.

Only what xdp2tc's scripts use is read; anything else raises ValueError, so a test never
passes on a silently ignored key.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field

ETHERTYPES = {"ip": 0x0800, "ipv6": 0x86DD, "arp": 0x0806, "802.1Q": 0x8100, "802.1ad": 0x88A8, "all": None}
L4_NAMES = {"tcp": 6, "udp": 17, "sctp": 132, "icmp": 1, "icmpv6": 58}
WIDTH = {
    "ip_proto": 8,
    "ip_tos": 8,
    "ip_ttl": 8,
    "src_port": 16,
    "dst_port": 16,
    "tcp_flags": 12,
    "type": 8,
    "code": 8,
    "vlan_id": 12,
    "vlan_prio": 3,
    "vlan_ethtype": 16,
    "cvlan_id": 12,
    "cvlan_prio": 3,
    "cvlan_ethtype": 16,
    "dst_mac": 48,
    "src_mac": 48,
}
ADDRESS_KEYS = ("src_ip", "dst_ip")


@dataclass
class Line:
    lineno: int
    chain: int
    prio: int
    protocol: str
    keys: dict[str, tuple[int, int]] = field(default_factory=dict)  # (value, mask) or (lo, hi) for ranges
    ranges: set[str] = field(default_factory=set)
    action: list[str] = field(default_factory=list)


def parse(text: str) -> list[Line]:
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        w = raw.split("#", 1)[0].split()
        if not w or w[0] == "qdisc":
            continue
        if w[:2] != ["filter", "add"]:
            raise ValueError(f"line {n}: {raw!r}")
        line = Line(n, 0, 0, "")
        i = 2
        while w[i] != "flower":
            if w[i] in ("dev", "protocol", "prio", "chain", "handle"):
                if w[i] == "protocol":
                    line.protocol = w[i + 1]
                elif w[i] == "prio":
                    line.prio = int(w[i + 1])
                elif w[i] == "chain":
                    line.chain = int(w[i + 1])
                i += 2
            elif w[i] == "ingress":
                i += 1
            else:
                raise ValueError(f"line {n}: {w[i]!r}")
        i += 1
        while w[i] != "action":
            if w[i] in ("skip_sw", "skip_hw"):
                i += 1
                continue
            name, text_value = w[i], w[i + 1]
            _key(line, name, text_value, n)
            i += 2
        line.action = w[i + 1 :]
        if line.protocol not in ETHERTYPES or not line.prio:
            raise ValueError(f"line {n}: protocol/prio")
        out.append(line)
    return out


def _num(text: str, base: int = 10) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text, base)


def _key(line: Line, name: str, text: str, n: int) -> None:
    if name in ADDRESS_KEYS:
        net = ipaddress.ip_network(text, strict=False)
        if net.version == 6:
            name += "6"
        line.keys[name] = (int(net.network_address), int(net.netmask))
        return
    if name == "ip_flags":  # frag / nofrag / firstfrag / nofirstfrag, joined by '/'
        v = m = 0
        for word in text.split("/"):
            bit = {"frag": 1, "firstfrag": 2}[word[2:] if word.startswith("no") else word]
            m |= bit
            v |= 0 if word.startswith("no") else bit
        line.keys[name] = (v, m)
        return
    if name not in WIDTH:
        raise ValueError(f"line {n}: key {name} not known to the oracle")
    full = (1 << WIDTH[name]) - 1
    if name == "ip_proto":
        line.keys[name] = (L4_NAMES[text] if text in L4_NAMES else int(text, 16), full)
        return
    if name in ("vlan_ethtype", "cvlan_ethtype"):
        line.keys[name] = (ETHERTYPES[text] if text in ETHERTYPES else int(text, 16), full)
        return
    if name.endswith("_mac"):
        v, _, m = text.partition("/")
        line.keys[name] = (int(v.replace(":", ""), 16), int(m.replace(":", ""), 16) if m else full)
        return
    if name in ("src_port", "dst_port") and "-" in text:
        lo, hi = text.split("-")
        line.keys[name] = (int(lo), int(hi))
        line.ranges.add(name)
        return
    v, _, m = text.partition("/")
    base = 16 if name == "tcp_flags" else 10
    mask = full if not m else (int(m) if name in ("type", "code") else int(m, 16))
    line.keys[name] = (_num(v, base) & mask, mask)


# --- the frame --------------------------------------------------------------------------


def fields(frame: bytes) -> dict:
    """What the kernel's dissector gives flower for this frame (only the keys above)."""
    f: dict = {}
    if len(frame) < 14:
        return {"reaches": False}
    f["reaches"] = True
    f["dst_mac"] = int.from_bytes(frame[0:6], "big")
    f["src_mac"] = int.from_bytes(frame[6:12], "big")
    eth = struct.unpack("!H", frame[12:14])[0]
    off = 14
    f["tc_protocol"] = eth
    if eth in (0x8100, 0x88A8) and len(frame) < 20:
        return {"reaches": False}  # the untagging needs the tag and the 2 bytes after it
    tags = 0
    while eth in (0x8100, 0x88A8):  # tags: the first two are recorded, later ones skipped
        if len(frame) < off + 4:
            f["n_proto"] = eth
            return f
        tci, inner = struct.unpack("!HH", frame[off : off + 4])
        if tags < 2:
            pre = ("vlan_", "cvlan_")[tags]
            f[pre + "id"], f[pre + "prio"], f[pre + "ethtype"], f[pre + "tpid"] = tci & 0xFFF, tci >> 13, inner, eth
        tags += 1
        eth, off = inner, off + 4
        if tags > 4:
            raise ValueError("more than four VLAN tags: not read by this oracle")
    f["n_proto"] = eth
    if eth == 0x0800 and len(frame) >= off + 20 and frame[off] & 15 >= 5:  # no version check
        ihl = (frame[off] & 15) * 4
        f["addr"] = 4
        f["ip_tos"], f["ip_ttl"], f["ip_proto"] = frame[off + 1], frame[off + 8], frame[off + 9]
        f["src_ip"] = int.from_bytes(frame[off + 12 : off + 16], "big")
        f["dst_ip"] = int.from_bytes(frame[off + 16 : off + 20], "big")
        frag = struct.unpack("!H", frame[off + 6 : off + 8])[0] & 0x3FFF
        f["ip_flags"] = (1 if frag else 0) | (2 if frag and not frag & 0x1FFF else 0)
        if not frag:
            _l4(f, frame, off + ihl)
    elif eth == 0x86DD and len(frame) >= off + 40:
        f["addr"] = 6
        f["ip_tos"] = (struct.unpack("!H", frame[off : off + 2])[0] >> 4) & 0xFF
        f["ip_proto"], f["ip_ttl"] = frame[off + 6], frame[off + 7]
        f["src_ip6"] = int.from_bytes(frame[off + 8 : off + 24], "big")
        f["dst_ip6"] = int.from_bytes(frame[off + 24 : off + 40], "big")
        at, f["ip_flags"] = off + 40, 0
        for _ in range(15):  # extension headers (RFC 8200 section 4), as the kernel walks them
            if f["ip_proto"] in (0, 43, 60):  # hop-by-hop, routing, destination options
                if len(frame) < at + 2:
                    return f  # cut short: ip_proto stays the header's type
                f["ip_proto"], at = frame[at], at + (frame[at + 1] + 1) * 8
            elif f["ip_proto"] == 44:  # fragment: its next header, then no L4 keys
                if len(frame) >= at + 8:
                    first = not struct.unpack("!H", frame[at + 2 : at + 4])[0] & 0xFFF8
                    f["ip_flags"], f["ip_proto"] = 1 | (2 if first else 0), frame[at]
                return f
            else:
                break
        _l4(f, frame, at)
    return f


def _l4(f: dict, frame: bytes, at: int) -> None:
    proto = f["ip_proto"]
    if proto in (6, 17, 132) and len(frame) >= at + 4:
        f["src_port"], f["dst_port"] = struct.unpack("!HH", frame[at : at + 4])
    if proto == 6 and len(frame) >= at + 20 and frame[at + 12] >> 4 >= 5:
        f["tcp_flags"] = struct.unpack("!H", frame[at + 12 : at + 14])[0] & 0xFFF
    if proto in (1, 58) and len(frame) >= at + 8:
        f["type"], f["code"] = frame[at], frame[at + 1]


def matches(line: Line, f: dict) -> bool:
    if not f["reaches"]:
        return False
    want = ETHERTYPES[line.protocol]
    if want is not None and f["tc_protocol"] != want:
        return False
    if "vlan_ethtype" in line.keys and f.get("vlan_ethtype") != line.keys["vlan_ethtype"][0]:
        return False
    if "cvlan_ethtype" in line.keys and f.get("cvlan_ethtype") != line.keys["cvlan_ethtype"][0]:
        return False
    if "vlan_ethtype" in line.keys and line.keys["vlan_ethtype"][0] in (0x8100, 0x88A8):
        if f.get("cvlan_tpid") != line.keys["vlan_ethtype"][0]:
            return False  # the inner tag's TPID is the outer tag's ethertype
        if "cvlan_ethtype" in line.keys and f["n_proto"] != line.keys["cvlan_ethtype"][0]:
            return False
    elif "vlan_ethtype" in line.keys and f["n_proto"] != line.keys["vlan_ethtype"][0]:
        return False
    if line.protocol in ("ip", "ipv6") and f["n_proto"] != want:
        return False
    fams = {4 if k in ADDRESS_KEYS else 6 for k in line.keys if k.rstrip("6") in ADDRESS_KEYS}
    for fam in fams:  # control.addr_type: filled only when some address mask bit is set
        masks = [m for k, (_, m) in line.keys.items() if k.rstrip("6") in ADDRESS_KEYS]
        if not any(masks) or f.get("addr") != fam:
            return False
    for k, (a, b) in line.keys.items():
        if k in ("vlan_ethtype", "cvlan_ethtype"):
            continue
        x = f.get(k, 0)
        if k in line.ranges:
            if not a <= x <= b:
                return False
        elif x & b != a:
            return False
    return True


def run(lines: list[Line], frame: bytes) -> tuple[str, ...]:
    """tc's verdict: ("drop",), ("pass",) (also for no match) or the mirred words."""
    f = fields(frame)
    chain, hops = 0, 0
    while True:
        here = sorted((x for x in lines if x.chain == chain), key=lambda x: (x.prio, x.lineno))
        hit = next((x for x in here if matches(x, f)), None)
        if hit is None:
            return ("pass",)
        if hit.action[:2] == ["goto", "chain"]:
            chain, hops = int(hit.action[2]), hops + 1
            if hops > 32:
                raise ValueError("goto loop")
            continue
        return tuple(hit.action)


# --- actions on the frame (pedit, csum, mirred) ----------------------------------------------
# Written from tc-pedit(8), tc-csum(8) and net/sched/act_pedit.c / act_csum.c: pedit `ex munge`
# eth fields are offsets from the MAC header (dst 0, src 6), ip fields from the network header
# (tos 1, ttl 8), which is byte 14 of an untagged frame; `decrement` is ttl - 1 (mod 256); csum
# ip4h writes ~(one's-complement sum of the header's 16-bit words, check field taken as 0); vlan
# push id V priority P protocol T puts the tag T, P << 13 | V after the MACs (as the egress sends it),
# pop removes the outer tag (bytes 12..15), modify sets the outer tag's TPID to T (default 802.1Q),
# its VID to V and, when given, its priority to P, keeping DEI (act_vlan.c, TCA_VLAN_ACT_MODIFY).
# An action ends the list unless its control is `pipe`.

_PEDIT = {
    ("eth", "dst"): (0, 6),
    ("eth", "src"): (6, 6),
    ("ip", "tos"): (15, 1),
    ("ip", "dsfield"): (15, 1),
    ("ip", "ttl"): (22, 1),
}


def ipv4_checksum(header: bytes) -> int:
    """RFC 1071: the checksum a sender writes for `header` (its check field counted as 0)."""
    h = header[:10] + b"\0\0" + header[12:]
    total = sum(struct.unpack(f"!{len(h) // 2}H", h))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def act(words: list[str], frame: bytes) -> tuple[tuple[str, ...], bytes]:
    """(verdict words, frame after) for the action words of a line (after its first `action`)."""
    out = bytearray(frame)
    parts: list[list[str]] = [[]]
    for w in words:
        if w == "action":
            parts.append([])
        else:
            parts[-1].append(w)
    for part in parts:
        kind = part[0]
        if kind in ("pass", "drop", "mirred", "goto"):
            return tuple(part), bytes(out)
        if kind == "pedit":
            assert part[1] == "ex", part
            i = 2
            while i < len(part) and part[i] == "munge":
                at, size = _PEDIT[(part[i + 1], part[i + 2])]
                if part[i + 3] == "decrement":
                    out[at] = (out[at] - 1) % 256
                    i += 4
                    continue
                assert part[i + 3] == "set", part
                text = part[i + 4]
                value = bytes.fromhex(text.replace(":", "")) if size == 6 else _num(text, 10).to_bytes(1, "big")
                out[at : at + size] = value
                i += 5
            control = part[i] if i < len(part) else "pass"
        elif kind == "vlan" and part[1] == "pop":  # the outer tag gone from the frame sent
            assert out[12:14] in (b"\x81\x00", b"\x88\xa8"), "vlan pop of an untagged frame"
            del out[12:16]
            control = part[2] if len(part) > 2 else "pipe"
        elif kind == "vlan":  # push: the tag the egress device sends, after the MACs; modify: that tag changed
            assert part[1] in ("push", "modify") and part[2] == "id", part
            opts = dict(zip(part[4::2], part[5::2]))
            tpid = {"802.1Q": 0x8100, "802.1ad": 0x88A8}[opts.get("protocol", "802.1Q")]
            if part[1] == "push":
                tci = int(opts.get("priority", "0")) << 13 | int(part[3])
                out[12:12] = struct.pack("!HH", tpid, tci)
            else:  # act_vlan TCA_VLAN_ACT_MODIFY: VID replaced, priority if given, DEI kept
                assert out[12:14] in (b"\x81\x00", b"\x88\xa8"), "vlan modify of an untagged frame"
                tci = struct.unpack("!H", out[14:16])[0] & ~0xFFF | int(part[3])
                if "priority" in opts:
                    tci = tci & 0x1FFF | int(opts["priority"]) << 13
                out[12:16] = struct.pack("!HH", tpid, tci)
            control = part[-1] if len(part) % 2 == 1 else "pipe"
        elif kind == "csum":
            assert part[1] == "ip4h", part
            if out[12:14] == b"\x08\x00":
                ihl = (out[14] & 15) * 4
                out[24:26] = ipv4_checksum(bytes(out[14 : 14 + ihl])).to_bytes(2, "big")
            control = part[2] if len(part) > 2 else "pass"
        else:
            raise ValueError(f"action {kind!r} not known to the oracle")
        if control != "pipe":
            return (control,), bytes(out)
    raise ValueError("action list ends in pipe")
