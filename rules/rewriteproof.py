"""Which packets a rewriting action list handles as the program does: the `good` set of a
rewrite outcome, proved like drops.

For an Outcome whose tc actions rewrite the packet (pedit/csum, then pass, a redirect, or
XDP_TX's redirect to the ingress device), a packet is good when the program takes a path
with that verdict (same redirect target, no effect but counters) and the program's output
bytes equal the input with the tc actions applied by actionmodel.py (written from tc's
sources, not from the emitter). Compared are the bytes either side may change; a path that
moves the packet's start or end, or writes at a packet-dependent offset, is never good.

`pass` hands the rewritten packet to the host, where the XDP program runs again on it: a
rewrite ending in pass is good only where the program passes the rewritten packet
unchanged (a PASS path takes it and its writes, if any, leave it as it is). TTL decrement and pass
is therefore never offloaded (the program would decrement twice). The second run is read
with the same map contents and helper results as the first (the maps are control-plane by
the time a rule exists; a program whose pass depends on a helper is not offloaded anyway).
"""

from __future__ import annotations

import z3

from analyzer.symbolic import PACKET, PACKET_LEN, const_value

from .actionmodel import ActionError, apply, checksum_valid, ipv4_header_complete, parse_actions
from .rewrite import CHECKSUM_ASSUMPTION
from .tc import INGRESS_DEV


def _at(k: int) -> z3.BitVecRef:
    return z3.BitVecVal(k % (1 << 64), 64)


def is_rewrite(outcome) -> bool:
    """An outcome whose proof needs the packet bytes (rewrites, or XDP_TX's redirect)."""
    return outcome.action[0] in ("pedit", "csum", "vlan") or INGRESS_DEV in outcome.action


def output_equals(e, path, expected: z3.ArrayRef, changed: set[int], grows: int = 0) -> z3.BoolRef | None:
    """The path's output packet equals `expected` (indexed from its first byte; `grows`
    bytes longer than the input, pushed in front of the ethertype; negative: a tag popped). None: the path moves its
    start by another amount, moves its end, or writes at a packet-dependent offset. Compared
    are the bytes either side writes; behind them both are the input shifted by `grows`."""
    head = const_value(e.expand(path.head))
    if head is None or _signed(head) != -grows or not z3.simplify(e.expand(path.end)).eq(PACKET_LEN):
        return None
    head = -grows
    positions = set(changed)
    for w in path.writes:
        v = const_value(e.expand(w))
        if v is None:
            return None
        if _signed(v) >= head:  # a write in front of the new start is cut off with it
            positions.add(_signed(v) - head)
    if not positions:
        return z3.BoolVal(True)
    eqs = [e.expand(z3.Select(path.pkt, _at(head + k))) == z3.Select(expected, _at(k)) for k in sorted(positions)]
    return z3.And(z3.UGT(PACKET_LEN + grows, max(positions)), *eqs)


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def rewrite_good(synth, outcome) -> z3.BoolRef:
    """Packets the program handles exactly as `outcome`'s action list does (module doc)."""
    try:
        actions = parse_actions(outcome.action)
        if actions.tags and actions.verdict[0] != "mirred":
            return z3.BoolVal(False)  # a VLAN tag is metadata until a device sends it
        expected, ok = apply(actions, PACKET, PACKET_LEN)
    except ActionError:
        return z3.BoolVal(False)
    csum = any(x.kind == "csum_ip4h" for x in actions.edits)
    # the sum of the header words no edit changes: the same before and after, kept opaque
    # (z3 proves the one's-complement identities over it in about a second, and not in a
    # minute over the words themselves); unsat for every value is unsat for the real one
    rest = z3.BitVec("rewrite.rest_sum", 16) if csum else None
    if rest is not None:
        expected, ok = apply(actions, PACKET, PACKET_LEN, rest)
    changed = actions.positions()
    assumed = z3.BoolVal(True)
    if csum and CHECKSUM_ASSUMPTION in synth.assume:
        ipv4 = z3.And(z3.Select(PACKET, _at(12)) == 0x08, z3.Select(PACKET, _at(13)) == 0x00)
        whole = ipv4_header_complete(PACKET, PACKET_LEN)
        assumed = z3.Implies(ipv4, z3.And(whole, checksum_valid(PACKET, actions, rest)))
    parts = []
    for p in synth.e.paths:
        own = synth.outcomes[p.id]
        if p.verdict not in outcome.verdicts or not hasattr(own, "verdicts"):  # a Reason: not clean
            continue
        if outcome.ifindex is not None and own.ifindex != outcome.ifindex:
            continue
        eq = output_equals(synth.e, p, expected, changed, actions.grows)
        if eq is not None:
            parts.append(z3.And(synth.conds[p.id], z3.Implies(assumed, z3.And(ok, eq))))
    good = z3.Or(parts) if parts else z3.BoolVal(False)
    if "PASS" in outcome.verdicts:
        again = []
        for p in synth.e.paths:
            same = output_equals(synth.e, p, PACKET, set())  # the path leaves its input as it is
            if p.verdict == "PASS" and hasattr(synth.outcomes[p.id], "verdicts") and same is not None:
                again.append(z3.substitute(z3.And(synth.conds[p.id], same), (PACKET, expected)))
        good = z3.And(good, z3.Or(again) if again else z3.BoolVal(False))
    return good
