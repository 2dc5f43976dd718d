"""`check --pcap FILE`: which share of a capture the NIC would handle.

Each packet of the capture (pcap or pcapng, Ethernet, read with dpkt) goes through

* the tc rules as the NIC runs them: filters of a chain in order, the first match acts,
  `goto chain N` continues in chain N, a chain without a match passes the packet on; each
  match evaluated with the flow dissector model (rules/dissector.py `evaluate`), so the
  NIC's share is what the proven filters take, per filter;
* the program's paths: the path whose condition the packet satisfies (conditions are
  evaluated on the bytes; a condition that still depends on a map's contents or a helper's
  result after that is "map/helper-dependent": the capture alone cannot tell).

What the NIC does not take goes to the host, attributed to the path the packet takes there,
so the report names the software paths that carry the most traffic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from analyzer.symbolic import PACKET, PACKET_FRAGS, PACKET_LEN
from lifter.errors import LiftError
from rules.dissector import evaluate
from rules.flower import render

#: Packets read from a capture at most (the first ones).
MAX_PACKETS = 100_000


def read_capture(path: str, limit: int = MAX_PACKETS) -> list[bytes]:
    """The frames of an Ethernet pcap/pcapng file (at most `limit`). Bad input: LiftError."""
    import dpkt

    try:
        with open(path, "rb") as f:
            reader = dpkt.pcap.UniversalReader(f)
            if reader.datalink() != dpkt.pcap.DLT_EN10MB:
                raise LiftError(f"--pcap {path}: link type {reader.datalink()} is not Ethernet")
            out = []
            for _, frame in reader:
                out.append(bytes(frame))
                if len(out) >= limit:
                    break
            return out
    except (OSError, ValueError, dpkt.dpkt.Error) as err:
        raise LiftError(f"--pcap {path}: cannot read it as pcap or pcapng ({err})".splitlines()[0]) from None


@dataclass
class Share:
    """Packets and bytes."""

    packets: int = 0
    bytes: int = 0

    def add(self, frame: bytes) -> None:
        self.packets += 1
        self.bytes += len(frame)

    def json(self, total: Share) -> dict:
        return {
            "packets": self.packets,
            "bytes": self.bytes,
            "packet_share": round(self.packets / total.packets, 4) if total.packets else 0.0,
            "byte_share": round(self.bytes / total.bytes, 4) if total.bytes else 0.0,
        }


@dataclass
class Traffic:
    """A capture run through one program's rules and paths."""

    total: Share = field(default_factory=Share)
    nic: Share = field(default_factory=Share)
    filters: dict[int, Share] = field(default_factory=dict)  # rule index -> packets it acted on
    host_paths: dict[int | None, Share] = field(default_factory=dict)  # None: map/helper-dependent


def nic_action(rules, frame: bytes) -> int | None:
    """The index of the filter that acts on `frame` with an action other than pass (the NIC
    handles it), or None (the packet goes on to the host)."""
    chain = 0
    while True:
        hit = next((i for i, r in enumerate(rules) if r.chain == chain and evaluate(r.match, frame)), None)
        if hit is None:
            return None
        action = rules[hit].action
        if action[0] == "goto":
            chain = int(action[2])
            continue
        return None if action == ("pass",) else hit


class PathMatcher:
    """Which path of an exploration a concrete packet takes."""

    def __init__(self, e):
        self.conds = [(p.id, z3.simplify(e.condition(p))) for p in e.paths]

    def path_of(self, frame: bytes) -> int | None:
        arr = z3.K(z3.BitVecSort(64), z3.BitVecVal(0, 8))
        for i, b in enumerate(frame):
            arr = z3.Store(arr, z3.BitVecVal(i, 64), z3.BitVecVal(b, 8))
        subst = [(PACKET, arr), (PACKET_LEN, z3.BitVecVal(len(frame), 64)), (PACKET_FRAGS, z3.BitVecVal(0, 64))]
        possible = []
        for pid, cond in self.conds:
            value = z3.simplify(z3.substitute(cond, *subst))
            if z3.is_true(value):
                return pid
            if not z3.is_false(value):
                possible.append(pid)
        return possible[0] if len(possible) == 1 else None


def run(e, rules, frames: list[bytes]) -> Traffic:
    t = Traffic()
    matcher = PathMatcher(e)
    for frame in frames:
        t.total.add(frame)
        hit = nic_action(rules, frame)
        if hit is not None:
            t.nic.add(frame)
            t.filters.setdefault(hit, Share()).add(frame)
            continue
        t.host_paths.setdefault(matcher.path_of(frame), Share()).add(frame)
    return t


def traffic_json(t: Traffic, rules, fates) -> dict:
    reason = {f.path: f.reason for f in fates}
    top = sorted(t.host_paths.items(), key=lambda kv: -kv[1].bytes)
    return {
        "total": {"packets": t.total.packets, "bytes": t.total.bytes},
        "nic": t.nic.json(t.total),
        "filters": [
            {
                "filter": i,
                "tc": " ".join([f"protocol {rules[i].match.protocol}"] + render(rules[i].match)),
                "action": list(rules[i].action),
                **s.json(t.total),
            }
            for i, s in sorted(t.filters.items())
        ],
        "host_paths": [
            {"path": pid, "code": reason[pid].code if pid is not None and reason.get(pid) else None, **s.json(t.total)}
            for pid, s in top
        ],
    }


def traffic_lines(doc: dict) -> list[str]:
    total = doc["total"]
    nic = doc["nic"]
    out = [
        f"traffic: {total['packets']} packets, {total['bytes']} bytes; the NIC handles "
        f"{100 * nic['packet_share']:.1f}% of packets, {100 * nic['byte_share']:.1f}% of bytes"
    ]
    for f in doc["filters"]:
        out.append(
            f"  filter {f['filter']} ({f['tc']} -> {' '.join(f['action'])}): {f['packets']} packets "
            f"({100 * f['packet_share']:.1f}%)"
        )
    for p in doc["host_paths"][:5]:
        what = f"path {p['path']} ({p['code']})" if p["path"] is not None else "map/helper-dependent path"
        out.append(
            f"  to the host: {what}: {p['packets']} packets ({100 * p['packet_share']:.1f}%), {p['bytes']} bytes"
        )
    return out
