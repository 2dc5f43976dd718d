"""Re-reading a printed `tc -batch` script: the parser the final proof runs on.

The emitter (flower.render, tc.filter_line) writes the script; this module reads the
text back without using either, so what is proved is what the user receives (issue 17).
It knows tc's syntax from iproute2 (tc/tc_filter.c for the line, tc/f_flower.c
flower_parse_opt for the keys, tc/m_gact.c and m_mirred.c for the actions) and takes
the key facts (names, widths, masks) from the one key table, flower.FLOWER_KEYS.

A parsed script is a list of `Filter`s; `# paths 1,2 ...` comment lines right before a
filter are read as the paths that filter claims to take over (the completeness check
holds the script to them).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from .actionmodel import ActionError, parse_actions
from .flower import FLOWER_KEYS, IPPROTO, PROTOCOLS, Exact, FlowerMatch, Range

#: tc's words after `action` that xdp2tc's proof understands (pedit, csum, vlan: rewrites,
#: read by actionmodel.py).
ACTIONS = ("drop", "pass", "goto", "mirred", "pedit", "csum", "vlan")


class ScriptError(ValueError):
    """A line the parser cannot read; the message names the line."""


@dataclass(frozen=True)
class Filter:
    """One `filter add` line: where it sits (chain, prio, line number), what it matches and
    its action tokens normalised (`drop`, `pass`, `goto chain N`, `mirred egress redirect
    dev X`); `claims`: the paths its `# paths` comment says it takes over."""

    lineno: int
    chain: int
    prio: int
    match: FlowerMatch
    action: tuple[str, ...]
    claims: tuple[int, ...] = ()
    dev: str = ""  # the device the filter is on (XDP_TX redirects back out of it)

    @property
    def goto(self) -> int | None:
        return int(self.action[2]) if self.action[0] == "goto" else None

    def semantics(self) -> tuple:
        """What the proof depends on (not the line number or device name)."""
        return (self.chain, self.prio, self.match, self.action, self.claims)


def parse_script(text: str) -> list[Filter]:
    """Every filter of a `tc -batch` script, in file order."""
    out: list[Filter] = []
    claims: tuple[int, ...] = ()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            words = line[1:].split()
            if len(words) >= 2 and words[0] == "paths":
                claims = tuple(int(x) for x in words[1].split(",") if x.isdigit())
            continue
        words = line.split()
        if words[:2] in (["qdisc", "add"], ["qdisc", "replace"]):
            continue
        if words[:2] != ["filter", "add"]:
            raise ScriptError(f"line {n}: not a qdisc or filter line: {line[:60]!r}")
        out.append(_filter(n, words[2:], claims))
        claims = ()
    return out


def _filter(n: int, words: list[str], claims) -> Filter:
    where = f"line {n}"
    chain, prio, protocol, dev = 0, None, None, ""
    i = 0
    while i < len(words) and words[i] != "flower":
        w = words[i]
        if w in ("dev", "protocol", "prio", "pref", "chain", "handle", "block"):
            if i + 1 >= len(words):
                raise ScriptError(f"{where}: {w} without a value")
            v = words[i + 1]
            if w == "protocol":
                protocol = v
            elif w == "dev":
                dev = v
            elif w in ("prio", "pref"):
                prio = _int(v, where, 10)
            elif w == "chain":
                chain = _int(v, where, 10)
            i += 2
        elif w in ("ingress", "egress", "root"):
            i += 1
        else:
            raise ScriptError(f"{where}: unexpected {w!r} before `flower`")
    if i == len(words):
        raise ScriptError(f"{where}: not a flower filter")
    if prio is None:
        raise ScriptError(f"{where}: no prio (tc would pick one: the order is then unknown)")
    if protocol not in PROTOCOLS:
        raise ScriptError(f"{where}: protocol {protocol!r} is not one xdp2tc reads")
    i += 1
    keys: list = []
    tokens = {}
    for name, row in FLOWER_KEYS.items():
        tokens.setdefault(row.tc, []).append(name)
    while i < len(words) and words[i] != "action":
        w = words[i]
        if w in ("skip_sw", "skip_hw", "verbose"):
            i += 1
            continue
        if w not in tokens or i + 1 >= len(words):
            raise ScriptError(f"{where}: unknown flower key or missing value at {w!r}")
        v = words[i + 1]
        name = tokens[w][0]
        if len(tokens[w]) > 1:  # src_ip/dst_ip: IPv4 or IPv6 by the address
            name = next(k for k in tokens[w] if (FLOWER_KEYS[k].kind == "ipv6") == (":" in v))
        keys.append((name, _value(name, v, where)))
        i += 2
    action = _action(words[i + 1 :], where)
    try:
        match = FlowerMatch(protocol, tuple(keys))
    except ValueError as err:
        raise ScriptError(f"{where}: {err}") from None
    return Filter(n, chain, prio, match, action, tuple(claims), dev)


def _int(text: str, where: str, base: int = 0) -> int:
    try:
        return int(text, 16 if text.lower().startswith("0x") else base)
    except ValueError:
        raise ScriptError(f"{where}: {text!r} is not a number") from None


def _value(name: str, text: str, where: str):
    row = FLOWER_KEYS[name]
    top = (1 << row.width) - 1
    value, _, mask = text.partition("/")
    if row.ranges and "-" in value and not mask:
        lo, _, hi = value.partition("-")
        return Range(_int(lo, where, 10), _int(hi, where, 10))
    if row.kind in ("ipv4", "ipv6"):
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ScriptError(f"{where}: {name} {text!r} is not ADDR[/LEN]") from None
        return Exact(int(net.network_address), int(net.netmask))
    if row.kind == "mac":
        v = _mac(value, where)
        if not mask:
            return Exact(v, top)
        m = _mac(mask, where) if ":" in mask else (top << (48 - _int(mask, where, 10))) & top
        return Exact(v & m, m)
    if name == "ip_proto":
        v = IPPROTO.get(value)
        return Exact(_int(value, where, 16) if v is None else v, top)
    if name in ("vlan_ethtype", "cvlan_ethtype"):
        v = PROTOCOLS.get(value)
        return Exact(_int(value, where, 16) if v is None else v, top)
    if name == "ip_flags":
        v = m = 0
        for word in value.split("/") + ([mask] if mask else []):
            bit = {"frag": 1, "firstfrag": 2}.get(word.removeprefix("no"))
            if bit is None:
                raise ScriptError(f"{where}: ip_flags word {word!r}")
            m |= bit
            v |= 0 if word.startswith("no") else bit
        return Exact(v, m)
    if name == "arp_op":
        v = {"request": 1, "reply": 2}.get(value)
        v = _int(value, where, 10) if v is None else v
        return Exact(v, _int(mask, where, 10) if mask else top)
    base = {"ip_tos": 0, "ip_ttl": 0, "tcp_flags": 16}.get(name, 10)
    v = _int(value, where, base)
    # f_flower.c: tos/ttl/tcp_flags/port masks are read base 16, ICMP masks base 10
    m = top if not mask else _int(mask, where, 10 if name.startswith("icmp_") else 16)
    return Exact(v & m, m)


def _mac(text: str, where: str) -> int:
    parts = text.split(":")
    if len(parts) != 6:
        raise ScriptError(f"{where}: {text!r} is not a MAC address")
    return int.from_bytes(bytes(_int(p, where, 16) for p in parts), "big")


def _action(words: list[str], where: str) -> tuple[str, ...]:
    if not words or words[0] not in ACTIONS:
        raise ScriptError(
            f"{where}: action {' '.join(words[:3])!r} is not drop, pass, goto chain N or mirred egress redirect dev X"
        )
    if words[0] in ("drop", "pass") and len(words) == 1:
        return (words[0],)
    if words[0] == "goto" and len(words) == 3 and words[1] == "chain":
        return ("goto", "chain", str(_int(words[2], where, 10)))
    if words[:4] == ["mirred", "egress", "redirect", "dev"] and len(words) == 5:
        return tuple(words)
    if words[0] in ("pedit", "csum", "vlan"):  # a rewrite, then the verdict (actionmodel reads it)
        try:
            parse_actions(words)
        except ActionError as err:
            raise ScriptError(f"{where}: {err}") from None
        return tuple(words)
    raise ScriptError(f"{where}: action {' '.join(words)!r} has trailing or missing words")
