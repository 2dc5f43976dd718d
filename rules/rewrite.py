"""The tc actions that redo a path's header rewrites: derived from the program's output bytes.

For a path that returns PASS, TX or REDIRECT (to a named device) after writing the packet,
each written byte is classified with z3 over the path's packets: unchanged, a constant, the
input minus one (TTL), or computed from the packet. Constant MACs, TOS and TTL become
`pedit ex munge` keys, a TTL decrement `ip ttl decrement`, a written IPv4 header checksum
`csum ip4h`; a path that grew the packet by 4 bytes, moved the MACs up and wrote a
constant tag becomes `vlan push`; one that moved its start 4 bytes in over a tag (the MACs
moved down) `vlan pop`; a tagged frame whose outer TPID/TCI was rewritten in place `vlan
modify` (each before a redirect only: at ingress a tag is skb metadata until a device sends
it); XDP_TX becomes `mirred egress redirect` to the device the filter sits on
(written INGRESS_DEV here, tc.filter_line puts the device in). What cannot be written that
way gets a `rewrite` reason naming the byte and why. The derived actions are a proposal:
rewriteproof.py proves them against the program (with the separate action model), and the
printed script is proved again (proof.py).

Decided here: a MAC swap (XDP_TX's reflector) copies the packet's own addresses, which pedit
can set only as constants. It is expressible only where the filter pins both MACs (then
two constant pedits), which would take one filter per address pair known only at run time:
xdp2tc emits none and says so.
"""

from __future__ import annotations

import z3

from analyzer.symbolic import PACKET, PACKET_LEN, const_value

from .flower import VLAN_TYPES
from .reasons import Reason
from .tc import INGRESS_DEV

#: Frame offsets xdp2tc writes pedit keys for (untagged Ethernet + IPv4), and the words.
ETH_FIELDS = {0: "dst", 6: "src"}
IP_TOS, IP_TTL, IP_CHECK = 15, 22, (24, 25)
#: What the other bytes of the first 34 are, for the reasons.
BYTE_NAMES = [(0, 6, "destination MAC"), (6, 12, "source MAC"), (12, 14, "ethertype")] + [
    (14, 15, "IPv4 version/ihl"),
    (16, 18, "IPv4 total length"),
    (18, 20, "IPv4 id"),
    (20, 22, "IPv4 flags/fragment offset"),
    (23, 24, "IPv4 protocol"),
    (26, 30, "IPv4 source address"),
    (30, 34, "IPv4 destination address"),
]
#: The assumption a written IPv4 checksum needs (synthesis.ASSUMPTIONS).
CHECKSUM_ASSUMPTION = "valid-ip-checksum"


def _rewrite(detail: str) -> Reason:
    return Reason("rewrite", detail)


def byte_name(o: int) -> str:
    for lo, hi, name in BYTE_NAMES:
        if lo <= o < hi:
            return f"frame byte {o} ({name})"
    return f"frame byte {o} (beyond the Ethernet and IPv4 headers: payload or L4)"


def _typical_model(synth, p):
    """(a typical packet's model of path `p`, `always(f)`: f holds on every packet of the
    path), or the Reason no typical packet takes it."""
    from .synthesis import maybe_sat, solver  # synthesis imports this module

    base = [synth.conds[p.id], *synth.env]
    s = solver(*base, synth.typical)
    if s.check() != z3.sat:
        return Reason("atypical-packets", "only atypical packets take this rewriting path")

    def always(f) -> bool:
        return not maybe_sat(*base, z3.Not(f))

    return s.model(), always


def derive(synth, p, terminal: tuple[str, ...], verdicts: tuple[str, ...], ifindex=None):
    """The Outcome redoing path `p`'s rewrites then `terminal`, or the Reason it cannot."""
    from .synthesis import Outcome  # synthesis imports this module

    e = synth.e
    head, end = const_value(e.expand(p.head)), z3.simplify(e.expand(p.end))
    if head == (-4) % (1 << 64) and end.eq(PACKET_LEN):
        return _vlan_push(synth, p, terminal, verdicts, ifindex)
    if head == 4 and end.eq(PACKET_LEN):
        return _vlan_pop(synth, p, terminal, verdicts, ifindex)
    if head != 0 or not end.eq(PACKET_LEN):
        return _rewrite(
            "bpf_xdp_adjust_head/adjust_tail moves the packet's start or end other than by a 4-byte "
            "VLAN push or pop (encapsulation, decapsulation, trimming): tc has no action that adds or cuts other bytes"
        )
    found = _typical_model(synth, p)
    if isinstance(found, Reason):
        return found
    model, always = found

    offsets = set()
    for w in p.writes:
        w = e.expand(w)
        v = model.eval(w, model_completion=True).as_long()
        if not always(w == v):
            return _rewrite(
                "writes the packet at an offset that depends on the packet (a field after a "
                "variable-length header): pedit offsets are constant"
            )
        offsets.add(v - (1 << 64) if v >= 1 << 63 else v)
    changes: dict[int, tuple] = {}
    for o in sorted(offsets):
        out, inp = e.expand(z3.Select(p.pkt, z3.BitVecVal(o % (1 << 64), 64))), PACKET[z3.BitVecVal(o, 64)]
        if always(out == inp):
            continue
        c = model.eval(out, model_completion=True).as_long()
        if always(out == c):
            changes[o] = ("set", c)
        elif o == IP_TTL and always(out == inp - 1):
            changes[o] = ("decrement",)
        elif 0 <= o < 12 and always(out == PACKET[z3.BitVecVal((o + 6) % 12, 64)]):
            return _rewrite(
                "swaps the MAC addresses (a reflector): the new addresses are the packet's own, "
                "which pedit writes only as constants; that needs one filter per address pair "
                "(src_mac and dst_mac pinned), known only at run time: none is emitted"
            )
        else:
            changes[o] = ("computed",)
    if any(12 <= o < 16 for o in changes) and always(_tagged()):
        return _vlan_modify(p, e, model, always, changes, terminal, verdicts, ifindex)
    words: list[str] = []
    csum = False
    for o, what in changes.items():
        if o in IP_CHECK:
            csum = True
            continue
        if what[0] == "computed":
            return _rewrite(f"writes {byte_name(o)} with a value computed from the packet: pedit writes constants")
    for at, name in ETH_FIELDS.items():
        mine = [changes.get(o) for o in range(at, at + 6)]
        if not any(mine):
            continue
        if not all(mine):
            return _rewrite(f"changes part of the {name} MAC address ({byte_name(at)}): not derived as a pedit key")
        words += ["munge", "eth", name, "set", ":".join(f"{c[1]:02x}" for c in mine)]
    ip = [o for o in changes if o >= 14]
    if ip and not always(z3.Concat(PACKET[z3.BitVecVal(12, 64)], PACKET[z3.BitVecVal(13, 64)]) == 0x0800):
        return _rewrite("rewrites bytes after the Ethernet header of a frame that is not always untagged IPv4")
    for o in ip:
        if o in IP_CHECK:
            continue
        what = changes[o]
        if o == IP_TOS and what[0] == "set":
            words += ["munge", "ip", "tos", "set", f"0x{what[1]:02x}"]
        elif o == IP_TTL and what[0] == "set":
            words += ["munge", "ip", "ttl", "set", str(what[1])]
        elif o == IP_TTL:
            words += ["munge", "ip", "ttl", "decrement"]
        else:
            return _rewrite(f"sets {byte_name(o)}: pedit keys are derived for MACs, TOS and TTL only")
    if any(o < 12 for o in changes) and any(12 <= o < 14 for o in changes):
        return _rewrite(f"rewrites the {byte_name(12)}")
    if csum and CHECKSUM_ASSUMPTION not in synth.assume:
        return _rewrite(
            "updates the IPv4 header checksum itself; tc's `csum ip4h` recomputes it, which "
            "differs on packets that arrive with a wrong checksum (try --assume valid-ip-checksum)"
        )
    tokens: list[str] = []
    if words:
        tokens += ["pedit", "ex", *words, "pipe"]
    if csum:
        tokens += (["action"] if tokens else []) + ["csum", "ip4h", "pipe"]
    tokens += (["action"] if tokens else []) + list(terminal)
    return Outcome(tuple(tokens), verdicts, ifindex)


def _be16(o: int) -> z3.BitVecRef:
    return z3.Concat(PACKET[z3.BitVecVal(o, 64)], PACKET[z3.BitVecVal(o + 1, 64)])


def _tagged() -> z3.BoolRef:
    """The input frame carries a VLAN tag after its MACs (802.1Q or 802.1ad)."""
    return z3.Or([_be16(12) == t for t in VLAN_TYPES])


def _tag_terminal(what: str, terminal) -> Reason | None:
    """A VLAN action is offloaded before a redirect (or XDP_TX) only."""
    if terminal[0] == "mirred":
        return None
    return _rewrite(
        f"{what} and passes the packet: at tc ingress a VLAN tag is skb metadata (skb_vlan_untag "
        "ran before tc), not the bytes the program hands the host; offloaded only with a redirect or XDP_TX"
    )


def _tag_model(what: str, synth, p, terminal):
    """_typical_model for a path that changes the VLAN tag, or the Reason it stays in
    software (not before a redirect, or no typical packet takes it)."""
    if (why := _tag_terminal(what, terminal)) is not None:
        return why
    return _typical_model(synth, p)


def _vlan_push(synth, p, terminal, verdicts, ifindex):
    """A path that grew the packet by 4 bytes in front: a VLAN tag pushed after the MACs?"""
    from .synthesis import Outcome

    e = synth.e
    found = _tag_model("pushes a VLAN tag", synth, p, terminal)
    if isinstance(found, Reason):
        return found
    model, always = found

    def out(k: int) -> z3.BitVecRef:
        return e.expand(z3.Select(p.pkt, z3.BitVecVal((k - 4) % (1 << 64), 64)))

    for w in p.writes:
        v = const_value(e.expand(w))
        if v is None or not (v >= (-4) % (1 << 64) or v < 12):
            return _rewrite("grows the packet by 4 bytes and writes beyond the MACs and a tag: not a VLAN push")
    if not all(always(out(k) == PACKET[z3.BitVecVal(k, 64)]) for k in range(12)):
        return _rewrite("grows the packet by 4 bytes without moving the MACs up: not a VLAN push")
    tag = [model.eval(out(k), model_completion=True).as_long() for k in range(12, 16)]
    if not all(always(out(12 + k) == tag[k]) for k in range(4)):
        return _rewrite(
            "pushes a VLAN tag whose TPID or TCI is computed from the packet: tc's vlan push takes constants"
        )
    tpid, tci = tag[0] << 8 | tag[1], tag[2] << 8 | tag[3]
    if tpid not in VLAN_TYPES or tci & 0x1000 or tci & 0xFFF == 0xFFF:
        return _rewrite(
            f"pushes TPID 0x{tpid:04x} TCI 0x{tci:04x}: vlan push takes 802.1Q/802.1ad, no DEI bit, VID below 4095"
        )
    words = ["vlan", "push", "id", str(tci & 0xFFF), "priority", str(tci >> 13), "protocol", _protocol(tpid), "pipe"]
    return Outcome(tuple(words + ["action", *terminal]), verdicts, ifindex)


def _protocol(tpid: int) -> str:
    return "802.1Q" if tpid == 0x8100 else "802.1ad"


def _vlan_pop(synth, p, terminal, verdicts, ifindex):
    """A path that moved the packet's start 4 bytes in: the outer VLAN tag popped (the MACs
    moved down over it)?"""
    from .synthesis import Outcome

    e = synth.e
    found = _tag_model("pops a VLAN tag", synth, p, terminal)
    if isinstance(found, Reason):
        return found
    _, always = found
    if not always(_tagged()):
        return _rewrite(
            "cuts 4 bytes after the MACs of a frame that is not always VLAN-tagged: tc's vlan pop cuts only a tag"
        )

    def out(k: int) -> z3.BitVecRef:  # byte k of the output frame
        return e.expand(z3.Select(p.pkt, z3.BitVecVal(k + 4, 64)))

    for w in p.writes:  # behind the MACs, a write may only put back what was there (the ethertype)
        v = const_value(e.expand(w))
        if v is None:
            return _rewrite("moves the packet's start by 4 bytes and writes at a packet-dependent offset")
        if v >= 16 and not always(out(v - 4) == PACKET[z3.BitVecVal(v, 64)]):
            return _rewrite(f"pops 4 bytes and changes {byte_name(v)}: not a VLAN pop alone")
    for k in range(12):
        if not always(out(k) == PACKET[z3.BitVecVal(k, 64)]):
            return _rewrite("moves the packet's start by 4 bytes without moving the MACs down: not a VLAN pop")
    return Outcome(("vlan", "pop", "pipe", "action", *terminal), verdicts, ifindex)


def _vlan_modify(p, e, model, always, changes, terminal, verdicts, ifindex):
    """A path that rewrote the outer tag of a tagged frame in place: `vlan modify`? It sets
    the TPID and the VID, the priority when given, and keeps the DEI bit (act_vlan.c
    tcf_vlan_act, TCA_VLAN_ACT_MODIFY); `priority` is printed only when the program does not
    keep the input's (an explicit `priority 0` sets 0 since Linux 5.14's
    tcfv_push_prio_exists; older kernels keep the priority then)."""
    from .synthesis import Outcome

    if any(not 12 <= o < 16 for o in changes):
        return _rewrite("rewrites the VLAN tag together with other bytes: a tag rewrite is derived alone")

    def out16(o: int) -> z3.BitVecRef:
        return z3.Concat(*[e.expand(z3.Select(p.pkt, z3.BitVecVal(k, 64))) for k in (o, o + 1)])

    tpid, tci, old = out16(12), out16(14), _be16(14)

    def constant(term) -> int | None:
        v = model.eval(term, model_completion=True).as_long()
        return v if always(term == v) else None

    t, vid = constant(tpid), constant(tci & 0x0FFF)
    if t not in VLAN_TYPES:
        return _rewrite("rewrites the VLAN TPID to a value other than a constant 802.1Q/802.1ad: not a vlan modify")
    if vid is None or vid == 0xFFF:
        return _rewrite("sets a VLAN ID computed from the packet or 4095: tc's vlan modify takes a constant below 4095")
    if not always(tci & 0x1000 == old & 0x1000):
        return _rewrite("changes the VLAN tag's DEI bit: tc's vlan modify keeps the one the frame has")
    words = ["vlan", "modify", "id", str(vid)]
    if not always(z3.LShR(tci, 13) == z3.LShR(old, 13)):
        pcp = constant(z3.LShR(tci, 13))
        if pcp is None:
            return _rewrite("sets a VLAN priority computed from the packet: tc's vlan modify takes a constant")
        words += ["priority", str(pcp)]
    if (why := _tag_terminal("rewrites the VLAN tag", terminal)) is not None:
        return why
    words += ["protocol", _protocol(t), "pipe"]
    return Outcome((*words, "action", *terminal), verdicts, ifindex)


def tx_terminal() -> tuple[str, ...]:
    """XDP_TX: out of the device the packet came in on."""
    return ("mirred", "egress", "redirect", "dev", INGRESS_DEV)
