"""Shards of the input space for angr's symbolic exploration (the cross-check's mode "sharded").

Why: on programs that walk headers (Debian's xdp-filter: up to 4 VLAN tags, the IPv4 IHL, an
IPv6 extension-header chain), packet offsets depend on packet bytes; angr then reads at
symbolic addresses (a selection over every byte the offset can reach) and its exploration
finishes almost nothing within minutes. Within a shard the few bytes that move offsets are
fixed, so reads are at concrete addresses again, and each shard is a small exploration.

Where the split bytes come from: a fixed table of the protocol walk (`WALK`, below: the
ethertype and VLAN tags, the IPv4 version/IHL byte, the IPv6 next-header chain with each
extension header's length byte), not from the program. The table is the one the
Linux/xdp-tools parsers follow (`parsing_helpers.h`: VLAN_MAX_DEPTH 4, IPV6_EXT_MAX_CHAIN 6;
RFC 8200 4.x for the header lengths); a program that walks differently is still explored
exactly in every shard (the shards only split the input space), it just gains less.

A shard is a conjunction of `Atom`s, each "the big-endian field of `size` bytes at `off`
is (or is not) one of `values`". `split` builds them as a tree, each split with its own
"other" branch (every value not listed), so the leaves are a partition of all packets
(packet bytes as symbols, any length: an atom on a byte past the end of a packet constrains
a byte the program cannot read). `prove_partition` checks that with z3: the disjunction of
the shards is valid and no two overlap. A positive one-value atom fixes its bytes: the angr
engine stores them as constants (`Shard.fixed`); the others are constraints on the initial
state (`Shard.claripy`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import z3


@dataclass(frozen=True)
class Atom:
    """The big-endian field of `size` bytes at packet offset `off` is one of `values`
    (`inside`), or none of them."""

    off: int
    size: int
    values: tuple[int, ...]
    inside: bool = True

    def __str__(self) -> str:
        vals = "|".join(f"{v:#0{2 + 2 * self.size}x}" for v in self.values)
        return f"pkt[{self.off}:{self.off + self.size}] {'in' if self.inside else 'not in'} {{{vals}}}"

    def holds(self, packet: bytes) -> bool:
        """On a concrete packet (bytes past its end read as zero)."""
        data = packet[self.off : self.off + self.size]
        v = int.from_bytes(data + bytes(self.size - len(data)), "big")
        return (v in self.values) == self.inside


@dataclass(frozen=True)
class Shard:
    """One part of the input space: a name (the protocol path, e.g. `vlan1/ipv6/frag/no-ext`)
    and the atoms that define it. `concrete`: every offset of the walk (`WALK`) is fixed in
    it; the others (an extension header of a length the shard leaves free, a longer chain,
    more VLAN tags) are explored last, with what the concrete ones left of the budget.
    `deep`: a concrete shard carved out of what would otherwise be open (`split`: sampled
    header lengths, a third extension header, a third VLAN tag): explored after the other
    concrete shards, before the open ones."""

    name: str
    atoms: tuple[Atom, ...]
    concrete: bool = True  # the walk's offsets are constants in it (else a length byte stays free)
    deep: bool = False  # carved out of an open shard: a sampled length, a third level (explored later)

    @property
    def fixed(self) -> dict[int, int]:
        """Packet offset -> byte value that every packet of the shard has there."""
        out = {}
        for a in self.atoms:
            if a.inside and len(a.values) == 1:
                out.update({a.off + i: b for i, b in enumerate(a.values[0].to_bytes(a.size, "big"))})
        return out

    def holds(self, packet: bytes) -> bool:
        return all(a.holds(packet) for a in self.atoms)

    def claripy(self, packet: list) -> list:
        """The atoms the fixed bytes do not express, as claripy constraints on `packet` (the
        list of byte values of the angr engine's initial state)."""
        from angr import claripy

        out = []
        for a in self.atoms:
            if a.inside and len(a.values) == 1:
                continue
            field = claripy.Concat(*packet[a.off : a.off + a.size]) if a.size > 1 else packet[a.off]
            cond = claripy.Or(*[field == v for v in a.values])
            out.append(cond if a.inside else claripy.Not(cond))
        return out

    def z3(self, byte) -> z3.BoolRef:
        """The shard as a z3 formula over `byte(i)` (an 8-bit term per packet offset)."""
        parts = []
        for a in self.atoms:
            field = z3.Concat(*[byte(a.off + i) for i in range(a.size)]) if a.size > 1 else byte(a.off)
            cond = z3.Or(*[field == v for v in a.values])
            parts.append(cond if a.inside else z3.Not(cond))
        return z3.And(*parts) if parts else z3.BoolVal(True)

    def __str__(self) -> str:
        return f"{self.name}: " + (" ∧ ".join(map(str, self.atoms)) or "every packet")


#: The protocol walk (the one table of it): where a header's type sits and which values move
#: the next header's offset by how much. VLAN_MAX_DEPTH and IPV6_EXT_MAX_CHAIN are
#: xdp-tools' parsing_helpers.h; the extension headers' lengths are RFC 8200 4.3-4.6
#: ((hdrlen + 1) * 8 bytes; fragment 8 bytes) and RFC 4302 (AH: (hdrlen + 2) * 4).
WALK = {
    "ethertype_at": 12,
    "vlan_tpids": (0x8100, 0x88A8),
    "vlan_tag": 4,
    "vlan_max_depth": 4,
    "ipv4": 0x0800,
    "ipv4_plain": 0x45,  # version 4, IHL 5: the transport header 20 bytes in
    "ipv6": 0x86DD,
    "ipv6_header": 40,
    "ipv6_nexthdr_at": 6,
    "ipv6_ext_by_len8": (0, 43, 60, 135),  # hop-by-hop, routing, destination options, mobility
    "ipv6_fragment": 44,  # 8 bytes, no length byte
    "ipv6_ah": 51,
}
#: Extension headers the shards follow (deeper chains stay symbolic in their shard). Past the
#: first level only the 8-byte ones (length byte 0, fragment) are followed.
EXT_SHARD_DEPTH = 3
#: VLAN tags the shards follow in full; one more tag is followed to IPv4 and to IPv6 without
#: extension headers (deep shards), and more tags stay symbolic in their shard.
VLAN_SHARD_DEPTH = 2
#: Length bytes of a first extension header the shards fix besides 0 (sampled: one shard
#: each, deep): hop-by-hop/routing/destination options of 16 bytes ((1 + 1) * 8), and AH of
#: 24 bytes ((4 + 2) * 4: RFC 4302's header with a 96-bit ICV, as HMAC-SHA1-96 gives). The
#: other lengths stay free in one open shard each.
SAMPLED_EXT_LENGTHS = (1,)
SAMPLED_AH_LENGTHS = (4,)


def split() -> list[Shard]:
    """The shards of the protocol walk (`WALK`): by ethertype and VLAN tags (0..
    VLAN_SHARD_DEPTH, and one more tag to plain IPv4/IPv6), IPv4 with IHL 5 or not, and IPv6
    by next header: none of the extension headers; one with length byte 0, a sampled length
    (SAMPLED_EXT_LENGTHS), a fragment header or a sampled AH (SAMPLED_AH_LENGTHS), each then
    followed; one with another length, another AH; past the first header only 8-byte
    ones are followed, to EXT_SHARD_DEPTH. Each split has its "other" shard. Order: the
    concrete shards of the walk's first levels, then the deep ones, then the open ones."""
    w = WALK
    out: list[Shard] = []
    by_len = w["ipv6_ext_by_len8"]
    exts = by_len + (w["ipv6_fragment"], w["ipv6_ah"])

    def ipv4(off: int, atoms: tuple, name: str, deep: bool) -> None:
        plain = (Atom(off, 2, (w["ipv4"],)),)
        out.append(Shard(f"{name}ipv4", atoms + plain + (Atom(off + 2, 1, (w["ipv4_plain"],)),), deep=deep))
        out.append(
            Shard(f"{name}ipv4-options", atoms + plain + (Atom(off + 2, 1, (w["ipv4_plain"],), False),), deep=deep)
        )

    def l2(off: int, depth: int, atoms: tuple, name: str) -> None:
        tags = depth <= VLAN_SHARD_DEPTH  # a further tag is followed from here; else this level is deep
        ipv4(off, atoms, name, not tags)
        v6 = atoms + (Atom(off, 2, (w["ipv6"],)),)
        l3 = off + 2
        if not tags:  # IPv6 without extension headers; with them, open
            nh = l3 + w["ipv6_nexthdr_at"]
            out.append(Shard(f"{name}ipv6/no-ext", v6 + (Atom(nh, 1, exts, False),), deep=True))
            out.append(Shard(f"{name}ipv6/ext", v6 + (Atom(nh, 1, exts),), concrete=False))
        else:
            ipv6(l3 + w["ipv6_nexthdr_at"], l3 + w["ipv6_header"], 0, v6, f"{name}ipv6", False)
        if tags:
            l2(off + w["vlan_tag"], depth + 1, atoms + (Atom(off, 2, w["vlan_tpids"]),), f"{name}vlan{depth + 1}/")
        known = [w["ipv4"], w["ipv6"]] + (list(w["vlan_tpids"]) if tags else [])
        # past the tags followed in full the other ethertypes are a deep shard (they were
        # open while a further tag was among them)
        out.append(
            Shard(
                f"{name}other",
                atoms + (Atom(off, 2, tuple(known), False),),
                concrete=tags,
                deep=tags and depth == VLAN_SHARD_DEPTH,
            )
        )

    def ipv6(nh: int, hdr: int, depth: int, atoms: tuple, name: str, deep: bool, follow: bool = True) -> None:
        if depth >= EXT_SHARD_DEPTH - 1 or not follow:  # the last level: no further header, or a chain
            out.append(Shard(f"{name}/no-ext", atoms + (Atom(nh, 1, exts, False),), deep=deep))
            out.append(Shard(f"{name}/chain", atoms + (Atom(nh, 1, exts),), concrete=False))
            return
        first = depth == 0
        lengths = (0, *SAMPLED_EXT_LENGTHS) if first else (0,)
        ext = atoms + (Atom(nh, 1, by_len),)
        for n in lengths:  # a sampled length is followed to its next header only
            size = (n + 1) * 8
            sub = ext + (Atom(hdr + 1, 1, (n,)),)
            ipv6(hdr, hdr + size, depth + 1, sub, f"{name}/ext{size}", deep or n != 0 or not first, n == 0)
        frag = atoms + (Atom(nh, 1, (w["ipv6_fragment"],)),)
        ipv6(hdr, hdr + 8, depth + 1, frag, f"{name}/frag", deep or not first)
        ah = atoms + (Atom(nh, 1, (w["ipv6_ah"],)),)
        ah_lengths = SAMPLED_AH_LENGTHS if first else ()
        for n in ah_lengths:
            size = (n + 2) * 4
            ipv6(hdr, hdr + size, depth + 1, ah + (Atom(hdr + 1, 1, (n,)),), f"{name}/ah{size}", True, False)
        out.append(Shard(f"{name}/ext-long", ext + (Atom(hdr + 1, 1, lengths, False),), concrete=False))
        out.append(
            Shard(f"{name}/ah", ah + ((Atom(hdr + 1, 1, ah_lengths, False),) if ah_lengths else ()), concrete=False)
        )
        out.append(Shard(f"{name}/no-ext", atoms + (Atom(nh, 1, exts, False),), deep=deep))

    l2(w["ethertype_at"], 0, (), "")
    return sorted(out, key=lambda s: (not s.concrete, s.deep))  # stable: the walk's order within each


@functools.cache
def proven_split() -> tuple[Shard, ...]:
    """`split()`, proved a partition (`prove_partition`) once per process."""
    shards = split()
    prove_partition(shards)
    return tuple(shards)


def shard_of(shards, packet: bytes) -> Shard | None:
    """The shard of `shards` a concrete packet falls in (bytes past its end read as zero;
    the program cannot read them, so any shard that agrees on the packet's own bytes would
    do); None when none of them holds it (a subset of the partition)."""
    hits = [s for s in shards if s.holds(packet)]
    assert len(hits) <= 1, (packet.hex(), [s.name for s in hits])
    return hits[0] if hits else None


def prove_partition(shards: list[Shard]) -> None:
    """Prove with z3 that `shards` cover every packet (their disjunction is valid) and are
    pairwise disjoint; raise AssertionError naming the gap or the overlap."""
    pkt = z3.Array("pkt", z3.BitVecSort(32), z3.BitVecSort(8))

    def byte(i: int):
        return z3.Select(pkt, i)

    forms = [s.z3(byte) for s in shards]
    solver = z3.Solver()
    solver.add(z3.Not(z3.Or(*forms)))
    if solver.check() != z3.unsat:
        raise AssertionError(f"the shards miss a packet: {solver.model()}")
    # pairwise disjoint: no packet is in two of them (one query; a model names two)
    solver = z3.Solver()
    solver.add(z3.Not(z3.AtMost(*forms, 1)))
    if solver.check() != z3.unsat:
        model = solver.model()
        both = [s.name for s, f in zip(shards, forms) if z3.is_true(model.eval(f, model_completion=True))][:2]
        raise AssertionError(f"shards {both[0]} and {both[1]} overlap")
