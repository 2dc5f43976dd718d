"""Each class of atypical frames a suggestion is made from (rules/counterexample.py RULES_OUT)
is ruled out by the assumption it names: a frame of that class, built here by hand, does not
satisfy the assumption's constraints (rules/synthesis.py `assumption_constraints`, asked with
z3 on the frame's bytes), and a plain frame does. `malformed` (IPv4 IHL < 5) is ruled out by
no-ip-options (IHL = 5) as a frame with options is: which of the two z3 returns for a frame
without a 20-byte IPv4 header must not decide whether no-ip-options is tried.
"""

from __future__ import annotations

import pytest
import z3

from analyzer.fields import frame
from analyzer.symbolic import PACKET, PACKET_LEN
from rules.counterexample import RULES_OUT
from rules.synthesis import assumption_constraints

ETH = bytes(12)


def _ipv4(ver_ihl: int, frag: int = 0) -> bytes:
    # version/IHL, TOS, total length, id, flags + fragment offset, TTL, protocol 17 (UDP)
    header = bytes([ver_ihl, 0, 0, 60, 0, 1]) + frag.to_bytes(2, "big") + bytes([64, 17, 0, 0])
    return (ETH + b"\x08\x00" + header + bytes([10, 0, 0, 1, 10, 0, 0, 2])).ljust(64, b"\0")


def _ipv6(nexthdr: int) -> bytes:
    header = bytes([0x60, 0, 0, 0, 0, 8, nexthdr, 64]) + bytes(32)
    return (ETH + b"\x86\xdd" + header).ljust(80, b"\0")


#: class -> a frame of it (by hand: the IHL nibble, the fragment field, IPv6's next header)
FRAMES = {
    "IP options": _ipv4(0x46),
    "malformed": _ipv4(0x44),
    "fragments": _ipv4(0x45, 0x2000),  # MF set
    "IPv6 extension headers": _ipv6(0),  # hop-by-hop options
}


def _holds(assumption: str, data: bytes) -> bool:
    s = z3.Solver()
    s.add(PACKET_LEN == len(data), *[PACKET[z3.BitVecVal(i, 64)] == b for i, b in enumerate(data)])
    s.add(*assumption_constraints([assumption]))
    return s.check() == z3.sat


@pytest.mark.parametrize("cls", sorted(RULES_OUT))
def test_each_class_is_ruled_out_by_its_assumption(cls):
    data = FRAMES[cls]
    assert cls in frame(data).classes
    assert not _holds(RULES_OUT[cls], data)
    plain = _ipv6(17) if "IPv6" in cls else _ipv4(0x45)
    assert frame(plain).classes == [] and _holds(RULES_OUT[cls], plain)


def test_malformed_is_ruled_out_by_no_ip_options():
    assert RULES_OUT["malformed"] == "no-ip-options"
