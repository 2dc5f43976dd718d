"""A tiny hand-written Filling for corpus/thesis_ddos_blacklist.c (seed 000 §6.6): an address
in `blacklist` is `src_ip ADDR drop`; a port in `port_blacklist` is `ip_proto tcp dst_port P
drop` and `ip_proto udp dst_port P drop` (the thesis' expected rules, derived by hand from the
C). Kept as the independent oracle the real template filling (offload/mapfill.py) is checked
against, and as a filling that costs no analysis for the daemon's machinery tests."""

from __future__ import annotations

from offload.tcsync import SyncFilter
from rules.flower import FlowerMatch, exact, prefix
from rules.mapcontents import MapContents

BLACKLIST_PRIO = 10
PORT_PRIOS = {"tcp": 20, "udp": 21}


class DdosBlacklistFilling:
    """The Filling sync drives (offload/sync.py), for thesis_ddos_blacklist only."""

    maps = frozenset({"blacklist", "port_blacklist"})
    counter_maps = frozenset()

    def entry(self, contents: MapContents, map_name: str, key: bytes) -> list[SyncFilter]:
        m = contents.get(map_name)
        if m is None or m.value(key) is None:
            return []
        origin = (map_name, key)
        if map_name == "blacklist":  # the key is iph->saddr as the packet holds it
            match = FlowerMatch("ip", (("src_ip", prefix("src_ip", int.from_bytes(key, "big"), 32)),))
            return [SyncFilter(match, ("drop",), BLACKLIST_PRIO, origin=origin)]
        port = int.from_bytes(key, "little")  # bpf_ntohs(dest) stored in host order
        return [
            SyncFilter(
                FlowerMatch("ip", (("ip_proto", exact("ip_proto", proto)), ("dst_port", exact("dst_port", port)))),
                ("drop",),
                PORT_PRIOS[name],
                origin=origin,
            )
            for name, proto in (("tcp", 6), ("udp", 17))
        ]

    def fill(self, contents: MapContents) -> list[SyncFilter]:
        out = []
        for name in sorted(self.maps):
            m = contents.get(name)
            for key in m.entries if m else ():
                out += DdosBlacklistFilling.entry(self, contents, name, key)
        return out


def factory(obj, prog, assume=()):
    """A FILLINGS entry: the filling for xdp_ddos_blacklist, None for anything else."""
    return DdosBlacklistFilling() if prog.name == "xdp_ddos_blacklist" else None
