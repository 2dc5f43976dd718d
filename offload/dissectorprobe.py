"""rules/dissector.py checked against the real flow dissector with single-key probe filters.

One probe group = one flower key under one protocol chain (`protocol ip flower ip_ttl V`,
`protocol 802.1Q flower vlan_id V`, ...): a filter per value, each exact on the whole key, so
a packet can match at most one of them (`action pass`: the first match ends classification).
The values are the ones the model computes for the probe packets, plus one value no packet
has. Per packet the VM's counters say which filter (so which value) the real cls_flower saw;
the model says which filters `rules.dissector.evaluate` matches. A packet where the two
differ is a disagreement. Filter lines are rendered by rules/tc.py, as `rules` prints them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rules.dissector import dissect_concrete, evaluate
from rules.flower import FlowerMatch, exact, prefix, render
from rules.tc import filter_line, qdisc_line

from . import flowervm
from .flowercheck import Probe

DEV = "probe0"
MAX_VALUES = 6

#: (group name, protocol, fixed keys, probed key). Ports, TCP flags and ICMP need their ip_proto.
GROUPS = [
    ("ip/ip_proto", "ip", (), "ip_proto"),
    ("ip/src_ip", "ip", (), "src_ip"),
    ("ip/dst_ip", "ip", (), "dst_ip"),
    ("ip/ip_tos", "ip", (), "ip_tos"),
    ("ip/ip_ttl", "ip", (), "ip_ttl"),
    ("ip/ip_flags", "ip", (), "ip_flags"),
    ("ip/tcp/src_port", "ip", (("ip_proto", 6),), "src_port"),
    ("ip/tcp/dst_port", "ip", (("ip_proto", 6),), "dst_port"),
    ("ip/udp/dst_port", "ip", (("ip_proto", 17),), "dst_port"),
    ("ip/tcp/tcp_flags", "ip", (("ip_proto", 6),), "tcp_flags"),
    ("ip/icmp/icmp_type", "ip", (("ip_proto", 1),), "icmp_type"),
    ("ipv6/ip_proto", "ipv6", (), "ip_proto"),
    ("ipv6/src_ip6", "ipv6", (), "src_ip6"),
    ("ipv6/ip_flags", "ipv6", (), "ip_flags"),
    ("ipv6/tcp/dst_port", "ipv6", (("ip_proto", 6),), "dst_port"),
    ("802.1Q/vlan_id", "802.1Q", (), "vlan_id"),
    ("802.1Q/vlan_ethtype", "802.1Q", (), "vlan_ethtype"),
    ("802.1Q/ip/dst_port", "802.1Q", (("vlan_ethtype", 0x0800), ("ip_proto", 6)), "dst_port"),
    ("802.1ad/cvlan_id", "802.1ad", (("vlan_ethtype", 0x8100),), "cvlan_id"),
    ("802.1ad/ip/ip_ttl", "802.1ad", (("vlan_ethtype", 0x8100), ("cvlan_ethtype", 0x0800)), "ip_ttl"),
    ("802.1Q/vlan_prio", "802.1Q", (), "vlan_prio"),
    ("802.1ad/vlan_id", "802.1ad", (), "vlan_id"),
    ("802.1ad/cvlan_prio", "802.1ad", (("vlan_ethtype", 0x8100),), "cvlan_prio"),
    ("802.1ad/cvlan_ethtype", "802.1ad", (("vlan_ethtype", 0x8100),), "cvlan_ethtype"),
    ("802.1Q/ip/dst_ip", "802.1Q", (("vlan_ethtype", 0x0800),), "dst_ip"),
    ("802.1Q/ip/ip_flags", "802.1Q", (("vlan_ethtype", 0x0800),), "ip_flags"),
    ("802.1ad/ip/dst_ip", "802.1ad", (("vlan_ethtype", 0x8100), ("cvlan_ethtype", 0x0800)), "dst_ip"),
    ("ipv6/dst_ip6", "ipv6", (), "dst_ip6"),
    ("ipv6/icmpv6/icmp_type", "ipv6", (("ip_proto", 58),), "icmp_type"),
    ("ipv6/icmpv6/icmp_code", "ipv6", (("ip_proto", 58),), "icmp_code"),
    ("ipv6/tcp/tcp_flags", "ipv6", (("ip_proto", 6),), "tcp_flags"),
]
#: All-zero address masks (issue 21): in Linux such a filter matches nothing, and so must the
#: model. The product never emits them (rules/tc.filter_line refuses), so their lines are
#: written here from the key's tokens.
ZERO_MASK = [
    ("ip/src_ip/0", FlowerMatch("ip", (("src_ip", prefix("src_ip", 0, 0)),))),
    ("ip/dst_ip/0", FlowerMatch("ip", (("dst_ip", prefix("dst_ip", 0, 0)),))),
]


def _zero_mask_line(m: FlowerMatch, prio: int) -> str:
    """A probe filter with an all-zero mask, which filter_line refuses to print."""
    keys = " ".join(render(m))
    return f"filter add dev {DEV} ingress protocol {m.protocol} prio {prio} flower skip_hw {keys} action pass"


@dataclass
class Disagreement:
    """A probe packet where the model and the real classifier chose different filters."""

    group: str
    probe: Probe
    model: list[str]  # filters the model matches (rendered keys)
    real: str | None  # the filter the real classifier took


@dataclass
class Group:
    """One probe group: its filters (one value each), its VM job, and what it found."""

    name: str
    matches: list[FlowerMatch]
    job: flowervm.Job | None = None
    sent: Counter = field(default_factory=Counter)
    disagreements: list[Disagreement] = field(default_factory=list)


def _values(key: str, probes: list[Probe]) -> list[int]:
    seen = Counter()
    for p in probes:
        v = dissect_concrete(p.frame).get(key)
        if v is not None:
            seen[v] += 1
    values = [v for v, _ in seen.most_common(MAX_VALUES)]
    unused = next(v for v in range(1, 1 << 12) if v not in seen)  # a value no packet has
    return values + [unused]


def groups(probes: list[Probe]) -> list[Group]:
    out = []
    for name, protocol, fixed, key in GROUPS:
        base = tuple((k, exact(k, v)) for k, v in fixed)
        matches = []
        for v in _values(key, probes):
            try:
                matches.append(FlowerMatch(protocol, base + ((key, exact(key, v)),)))
            except ValueError:
                continue  # a value the key cannot take in tc (e.g. an ethertype flower refuses)
        out.append(Group(name, matches))
    zero = {name for name, _ in ZERO_MASK}
    out += [Group(name, [m]) for name, m in ZERO_MASK]
    for g in out:
        lines = [qdisc_line(DEV)] + [
            _zero_mask_line(m, i + 1) if g.name in zero else filter_line(DEV, m, ("pass",), prio=i + 1, skip="skip_hw")
            for i, m in enumerate(g.matches)
        ]
        g.job = flowervm.Job(g.name, DEV, lines, [p.frame for p in probes])
    return out


def compare(g: Group, probes: list[Probe], result: flowervm.JobResult) -> None:
    if result.apply_error:
        raise flowervm.VmError(f"probe group {g.name}: tc refused a probe filter: {result.apply_error}")
    by_prio = {i + 1: m for i, m in enumerate(g.matches)}
    for p, sent, hits in zip(probes, result.sent, result.hits):
        if sent < 0:  # AF_PACKET refused it (under 14 bytes)
            continue
        g.sent[p.kind] += 1
        real = by_prio[hits[0].prio] if hits else None
        model = [m for m in g.matches if evaluate(m, p.frame)]
        if model[:1] != ([real] if real else []):
            g.disagreements.append(Disagreement(g.name, p, [str(m) for m in model], str(real) if real else None))


def run(probes: list[Probe], img: flowervm.Image | None = None) -> tuple[list[Group], flowervm.BatchResult]:
    """Every group in one boot; the groups with their disagreements."""
    gs = groups(probes)
    batch = flowervm.run_jobs([g.job for g in gs], img)
    for g, r in zip(gs, batch.jobs):
        compare(g, probes, r)
    return gs, batch
