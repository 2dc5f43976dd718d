"""What a tc action list does to a packet: the model the proofs of rewrite filters run on.

It reads the action words of a printed filter (everything after the first `action`), the
way iproute2 (tc/m_pedit.c, p_eth.c, p_ip.c; m_csum.c; m_mirred.c; m_gact.c) parses them,
and gives the packet the kernel leaves (net/sched/act_pedit.c tcf_pedit_act, act_csum.c
tcf_csum_ipv4) as a z3 array over the input packet. It shares nothing with the emitter
(rules/rewrite.py, which derives actions from the program's output bytes): the field table
below is written from the iproute2 sources, not from the emitter's.

What is modelled, at tc ingress of a plain Ethernet device (dissector.py's assumptions):
- `pedit ex munge eth dst|src set MAC`: 6 bytes from the MAC header (skb_mac_offset).
- `pedit ex munge ip tos|dsfield set V [retain R]`, `ip ttl set V`, `ip ttl add V`,
  `ip ttl decrement` (iproute2 sends add 0xff): one byte from the network header, which
  at ingress is frame offset 14 for an untagged frame (a tagged frame was untagged by
  skb_vlan_untag before tc, so its offsets are not the frame's: not modelled, `ok` false).
  tcf_pedit_act adds 32-bit words in host order with the other bytes masked off: on a
  little-endian host a one-byte add is that byte plus V modulo 256 (the carry leaves the
  field and is masked away).
- `csum ip4h`: when the frame's ethertype is IPv4, the header checksum is recomputed
  (ip_send_check: the one's-complement sum of ihl 16-bit words with the check field 0);
  `ok` asks ihl >= 5 and the whole header inside the frame (else ip_fast_csum reads past it).
- `vlan push id VID [priority PCP] [protocol 802.1Q|802.1ad]` (m_vlan.c; act_vlan.c
  tcf_vlan_act -> skb_vlan_push), modelled as the frame the egress device sends: the tag
  (TPID, PCP << 13 | VID) between the MACs and the ethertype, 4 bytes longer. `vlan pop`
  (skb_vlan_pop): the frame without its outer tag, 4 bytes shorter. `vlan modify id VID
  [priority PCP] [protocol P]` (TCA_VLAN_ACT_MODIFY): the outer tag's TPID becomes P
  (default 802.1Q), its VID VID, its priority PCP when given (tcfv_push_prio_exists, Linux
  5.14 on), DEI kept. At ingress a tag is metadata until transmission, so the model holds
  only for a list that ends in a mirred redirect, pushes onto an untagged frame or pops or
  modifies a tagged one, with no other edit (`ok`, ActionError).
- controls: an action's result ends the list unless it is `pipe`; defaults are iproute2's
  (pedit and csum: pass; vlan: pipe). The verdict is the stopping action's: pass, drop,
  `mirred egress redirect dev X` or `goto chain N`.
Anything else raises ActionError naming the words: such a filter is never proved.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

#: Frame offset of the network header at ingress (untagged Ethernet).
NETWORK = 14
ETH_P_IP = 0x0800
VLAN_TPIDS = (0x8100, 0x88A8)

#: iproute2's pedit fields this model knows: (header, field) -> (offset in the header, bytes).
#: eth: p_eth.c (dst 0, src 6); ip: p_ip.c (tos/dsfield 1, ttl 8).
FIELDS = {
    ("eth", "dst"): (0, 6),
    ("eth", "src"): (6, 6),
    ("ip", "tos"): (1, 1),
    ("ip", "dsfield"): (1, 1),
    ("ip", "ttl"): (8, 1),
}
HEADER_BASE = {"eth": 0, "ip": NETWORK}
CONTROLS = ("pipe", "pass", "ok", "drop", "shot", "continue", "reclassify")
#: iproute2's default control per action kind (parse_action_control_dflt).
DEFAULT_CONTROL = {"pedit": "pass", "csum": "pass", "vlan": "pipe"}
VLAN_PROTOCOLS = {"802.1Q": 0x8100, "802.1q": 0x8100, "802.1ad": 0x88A8, "802.1AD": 0x88A8}


class ActionError(ValueError):
    """Action words this model does not read (the message names them)."""


@dataclass(frozen=True)
class Edit:
    """One change: `kind` set (bytes `value` under `mask` at frame offset `at`), add (one
    byte plus `value` modulo 256), csum_ip4h, or vlan_push (`value`: the 4 tag bytes)."""

    kind: str
    at: int = 0
    value: bytes = b""
    mask: bytes = b""


@dataclass(frozen=True)
class ActionList:
    """The edits the list makes before it stops, and the verdict it stops with."""

    edits: tuple[Edit, ...]
    verdict: tuple[str, ...]

    @property
    def rewrites(self) -> bool:
        return bool(self.edits)

    @property
    def grows(self) -> int:
        """Bytes the list adds in front of the ethertype (vlan push: 4, pop: -4)."""
        return sum(4 if e.kind == "vlan_push" else -4 for e in self.edits if e.kind in ("vlan_push", "vlan_pop"))

    @property
    def tags(self) -> bool:
        """The list pushes, pops or modifies a VLAN tag (skb metadata at ingress)."""
        return any(e.kind.startswith("vlan_") for e in self.edits)

    def positions(self) -> set[int]:
        """Offsets of the output frame an edit may change (a push: the MACs and the tag; a
        pop: the MACs, moved down over the tag; a modify: the tag)."""
        out: set[int] = set()
        for e in self.edits:
            if e.kind == "vlan_push":
                out |= set(range(16))
            elif e.kind == "vlan_pop":
                out |= set(range(12))
            elif e.kind == "vlan_modify":
                out |= set(range(12, 16))
            elif e.kind == "csum_ip4h":
                out |= {NETWORK + 10, NETWORK + 11}
            else:
                out |= set(range(e.at, e.at + max(1, len(e.value))))
        return out


def split_actions(words) -> list[list[str]]:
    """The words after the first `action`, one list per action."""
    out: list[list[str]] = [[]]
    for w in words:
        if w == "action":
            out.append([])
        else:
            out[-1].append(w)
    if any(not a for a in out):
        raise ActionError(f"empty action in {' '.join(words)!r}")
    return out


def parse_actions(words) -> ActionList:
    """The model of an action list (tokens as printed, without the first `action`)."""
    actions = _parse_actions(words)
    if actions.tags and len(actions.edits) != 1:
        raise ActionError(f"{' '.join(words)!r}: a vlan action together with other edits is not modelled")
    return actions


def _parse_actions(words) -> ActionList:
    edits: list[Edit] = []
    for part in split_actions(list(words)):
        kind = part[0]
        if kind in ("pass", "ok", "drop", "shot") and len(part) == 1:
            return ActionList(tuple(edits), ("drop",) if kind in ("drop", "shot") else ("pass",))
        if kind == "goto" and len(part) == 3 and part[1] == "chain" and part[2].isdigit():
            return ActionList(tuple(edits), ("goto", "chain", part[2]))
        if kind == "mirred" and part[:4] == ["mirred", "egress", "redirect", "dev"] and len(part) == 5:
            return ActionList(tuple(edits), tuple(part))
        if kind == "pedit":
            new, control = _pedit(part)
        elif kind == "csum":
            new, control = _csum(part)
        elif kind == "vlan":
            new, control = _vlan(part)
        else:
            raise ActionError(f"action {' '.join(part)!r} is not modelled")
        edits += new
        if control != "pipe":
            if control in ("pass", "ok"):
                return ActionList(tuple(edits), ("pass",))
            if control in ("drop", "shot"):
                return ActionList(tuple(edits), ("drop",))
            raise ActionError(f"control {control!r} after {kind} is not modelled")
    raise ActionError(f"action list {' '.join(words)!r} ends in pipe (tc would pass it on: say which verdict)")


def _control(part: list[str], i: int) -> str:
    rest = part[i:]
    if not rest:
        return DEFAULT_CONTROL[part[0]]
    if len(rest) == 1 and rest[0] in CONTROLS:
        return rest[0]
    raise ActionError(f"unexpected {' '.join(rest)!r} in {' '.join(part)!r}")


def _pedit(part: list[str]) -> tuple[list[Edit], str]:
    if part[1:2] != ["ex"]:
        raise ActionError(f"{' '.join(part)!r}: only `pedit ex munge` is modelled")
    i, edits = 2, []
    while i < len(part) and part[i] == "munge":
        if i + 3 >= len(part):
            raise ActionError(f"{' '.join(part)!r}: munge without field and command")
        hdr, name, cmd = part[i + 1], part[i + 2], part[i + 3]
        if (hdr, name) not in FIELDS:
            raise ActionError(f"pedit field {hdr} {name} is not modelled")
        off, size = FIELDS[(hdr, name)]
        at = HEADER_BASE[hdr] + off
        if cmd == "decrement":
            if (hdr, name) != ("ip", "ttl"):
                raise ActionError("pedit decrement is for ip ttl only (iproute2)")
            edits.append(Edit("add", at, b"\xff"))
            i += 4
            continue
        if i + 4 >= len(part):
            raise ActionError(f"{' '.join(part)!r}: {cmd} without a value")
        value = _value(part[i + 4], size)
        i += 5
        mask = b"\xff" * size
        if i + 1 < len(part) and part[i] == "retain":
            mask = _value(part[i + 1], size)
            i += 2
        if cmd == "set":
            edits.append(Edit("set", at, bytes(v & m for v, m in zip(value, mask)), mask))
        elif cmd == "add" and size == 1 and mask == b"\xff":
            edits.append(Edit("add", at, value))
        else:
            raise ActionError(f"pedit {hdr} {name} {cmd} is not modelled")
    if not edits:
        raise ActionError(f"{' '.join(part)!r}: no munge")
    return edits, _control(part, i)


def _value(text: str, size: int) -> bytes:
    try:
        if size == 6:
            parts = text.split(":")
            if len(parts) != 6:
                raise ValueError
            return bytes(int(p, 16) for p in parts)
        v = int(text, 0)
    except ValueError:
        raise ActionError(f"pedit value {text!r}") from None
    if not 0 <= v < 1 << (8 * size):
        raise ActionError(f"pedit value {text!r} wider than the field")
    return v.to_bytes(size, "big")


def _vlan(part: list[str]) -> tuple[list[Edit], str]:
    if part[1:2] == ["pop"]:
        return [Edit("vlan_pop", 12)], _control(part, 2)
    if part[1:2] not in (["push"], ["modify"]) or part[2:3] != ["id"] or len(part) < 4:
        raise ActionError(f"{' '.join(part)!r}: only `vlan pop`, `vlan push|modify id VID ...` are modelled")
    vid, prio, tpid, i = _int(part[3], 4094), None, 0x8100, 4  # act_vlan refuses VID 4095 (-ERANGE)
    while i + 1 < len(part) and part[i] in ("priority", "protocol"):
        if part[i] == "priority":
            prio = _int(part[i + 1], 7)
        elif part[i + 1] in VLAN_PROTOCOLS:
            tpid = VLAN_PROTOCOLS[part[i + 1]]
        else:
            raise ActionError(f"vlan protocol {part[i + 1]!r}")
        i += 2
    tag = tpid.to_bytes(2, "big") + ((prio or 0) << 13 | vid).to_bytes(2, "big")
    if part[1] == "push":
        return [Edit("vlan_push", 12, tag)], _control(part, i)
    # modify: the TCI bits it replaces (the VID, and the priority when given; never DEI)
    mask = 0x0FFF | (0xE000 if prio is not None else 0)
    return [Edit("vlan_modify", 12, tag, mask.to_bytes(2, "big"))], _control(part, i)


def _int(text: str, top: int) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise ActionError(f"{text!r} is not a number") from None
    if not 0 <= v <= top:
        raise ActionError(f"{text} is outside 0..{top}")
    return v


def _csum(part: list[str]) -> tuple[list[Edit], str]:
    if part[1:2] != ["ip4h"]:
        raise ActionError(f"{' '.join(part)!r}: only `csum ip4h` is modelled")
    return [Edit("csum_ip4h")], _control(part, 2)


# --- z3 ------------------------------------------------------------------------------------


def _sel(pkt: z3.ArrayRef, o) -> z3.BitVecRef:
    return z3.Select(pkt, z3.BitVecVal(o, 64) if isinstance(o, int) else o)


def _be16(pkt: z3.ArrayRef, o: int) -> z3.BitVecRef:
    return z3.Concat(_sel(pkt, o), _sel(pkt, o + 1))


def ones_add(a: z3.BitVecRef, b: z3.BitVecRef) -> z3.BitVecRef:
    """16-bit one's-complement addition (end-around carry)."""
    t = z3.ZeroExt(16, a) + z3.ZeroExt(16, b)
    return z3.Extract(15, 0, (t & 0xFFFF) + z3.LShR(t, 16))


def header_words(pkt: z3.ArrayRef, words, start: z3.BitVecRef | None = None) -> z3.BitVecRef:
    """The one's-complement sum of IPv4 header words `words` (indices from the header at
    frame offset NETWORK; a word at or past ihl*2 counts 0), added to `start`. The order of
    the words does not change the sum (nor, apart from an all-zero header, its representation)."""
    ihl = _sel(pkt, NETWORK) & 0x0F
    total = start if start is not None else z3.BitVecVal(0, 16)
    for k in words:
        word = _be16(pkt, NETWORK + 2 * k)
        if k >= 10:
            word = z3.If(z3.ULT(z3.BitVecVal(k, 8), 2 * ihl), word, z3.BitVecVal(0, 16))
        total = ones_add(total, word)
    return total


def changed_words(actions: ActionList) -> list[int]:
    """IPv4 header words (not the check word 5) the pedit edits may change."""
    return sorted({(o - NETWORK) // 2 for o in actions.positions() if NETWORK <= o < NETWORK + 60} - {5})


def rest_words(actions: ActionList) -> list[int]:
    """The other header words (what a csum reads unchanged from the input)."""
    return [k for k in range(30) if k != 5 and k not in changed_words(actions)]


def checksum_valid(pkt: z3.ArrayRef, actions: ActionList, rest_sum: z3.BitVecRef | None = None) -> z3.BoolRef:
    """The input's IPv4 header checksum is right: all its words sum to 0xffff and the check
    field is not 0xffff (the words
    no edit changes summed as `rest_sum`, when given, as `apply` sums them)."""
    rest = rest_sum if rest_sum is not None else header_words(pkt, rest_words(actions))
    check = _be16(pkt, NETWORK + 10)
    # a sender's ~sum is never 0xffff (RFC 1624 section 3): that one passes a receiver's
    # check but csum would write 0x0000 for it while an incremental update keeps it
    return z3.And(header_words(pkt, changed_words(actions) + [5], rest) == 0xFFFF, check != 0xFFFF)


def ipv4_header_complete(pkt: z3.ArrayRef, length: z3.BitVecRef, at: int = NETWORK) -> z3.BoolRef:
    """ihl >= 5 and the ihl*4-byte header lies inside the frame."""
    ihl = z3.ZeroExt(56, _sel(pkt, at) & 0x0F)
    return z3.And(z3.UGE(ihl, 5), z3.ULE(at + 4 * ihl, length))


def apply(
    actions: ActionList, pkt: z3.ArrayRef, length: z3.BitVecRef, rest_sum: z3.BitVecRef | None = None
) -> tuple[z3.ArrayRef, z3.BoolRef]:
    """(the packet after the edits, indexed from its first byte; where the model holds). A
    vlan push makes it `actions.grows` bytes longer. Where `ok` is false the model
    says nothing (a tagged frame under an ip edit, a header csum cannot read). `rest_sum`:
    a term standing for the sum of the header words no edit changes (`rest_words`), which
    a proof may keep opaque (it is the same before and after the edits)."""
    out, ok = pkt, []
    tagged = z3.Or([_be16(pkt, 12) == t for t in VLAN_TPIDS])
    if actions.tags:  # alone (parse_actions)
        return _vlan_apply(actions.edits[0], pkt, length, tagged)
    for e in actions.edits:
        if e.kind == "csum_ip4h":
            ok.append(z3.Not(tagged))
            is_ip = _be16(out, 12) == ETH_P_IP
            ok.append(z3.Implies(is_ip, ipv4_header_complete(out, length)))
            rest = rest_sum if rest_sum is not None else header_words(out, rest_words(actions))
            check = ~header_words(out, changed_words(actions), rest)
            hi, lo = z3.Extract(15, 8, check), z3.Extract(7, 0, check)
            at = NETWORK + 10
            out = z3.If(is_ip, z3.Store(z3.Store(out, _bv(at), hi), _bv(at + 1), lo), out)
            continue
        if e.at >= NETWORK:
            ok.append(z3.Not(tagged))
        ok.append(z3.UGE(length, e.at + max(1, len(e.value))))
        if e.kind == "add":
            out = z3.Store(out, _bv(e.at), _sel(out, e.at) + e.value[0])
        else:
            for i, (v, m) in enumerate(zip(e.value, e.mask)):
                old = _sel(out, e.at + i)
                out = z3.Store(out, _bv(e.at + i), v if m == 0xFF else (old & (~m & 0xFF)) | v)
    return out, z3.And(ok) if ok else z3.BoolVal(True)


def _vlan_apply(e: Edit, pkt: z3.ArrayRef, length: z3.BitVecRef, tagged: z3.BoolRef) -> tuple[z3.ArrayRef, z3.BoolRef]:
    """One vlan action on the frame a device sends after it. push (skb_vlan_push): on an
    untagged frame, the tag between the MACs and the ethertype. pop (skb_vlan_pop): the outer
    tag (untagged into skb metadata before tc) cleared; a second tag, if any, moves to the
    metadata and is sent where it was: the frame without bytes 12..15. modify: the outer
    tag's TPID := the action's protocol, TCI := the old one with the VID (and the priority,
    if given) replaced. pop and modify hold on a tagged frame of at least 18 bytes (shorter
    ones never reach tc: skb_vlan_untag drops them); on an untagged frame they do nothing,
    which is left out (`ok` false)."""
    i = z3.BitVec("i", 64)
    if e.kind == "vlan_push":
        moved = z3.Select(pkt, i - 4)
        for k in range(4):
            moved = z3.If(i == 12 + k, z3.BitVecVal(e.value[k], 8), moved)
        return z3.Lambda([i], z3.If(z3.ULT(i, 12), z3.Select(pkt, i), moved)), z3.Not(tagged)
    ok = z3.And(tagged, z3.UGE(length, 18))
    if e.kind == "vlan_pop":
        return z3.Lambda([i], z3.If(z3.ULT(i, 12), z3.Select(pkt, i), z3.Select(pkt, i + 4))), ok
    old = _be16(pkt, 14)
    mask = int.from_bytes(e.mask, "big")
    tci = (old & (~mask & 0xFFFF)) | (int.from_bytes(e.value[2:], "big") & mask)
    out = z3.Store(z3.Store(pkt, _bv(12), e.value[0]), _bv(13), e.value[1])
    out = z3.Store(z3.Store(out, _bv(14), z3.Extract(15, 8, tci)), _bv(15), z3.Extract(7, 0, tci))
    return out, ok


def _bv(o: int) -> z3.BitVecRef:
    return z3.BitVecVal(o, 64)
