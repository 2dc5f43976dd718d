"""IPv4-options twins: a proof that no pass shield can save a block, asked before its shield loop runs on.

A program that reads L4 fields at fixed offsets (`pkt[34:36]` as the source port) and
flower, which reads them after the real IPv4 header, disagree on packets with options. The
shield loop (synthesis.py, `prove`) answers each such counterexample with a pass rule, but
flower cannot see the IHL: when every packet the block is for has an options twin that
flower sees the same and the program treats otherwise, no set of shields separates them,
and the loop runs its MAX_SHIELDS rounds (the 48-OR stress programs: 12 rounds, ~2 s of a
4 s `rules`, issue 14) to say so. This module proves it in one query instead.

The twin of a packet x whose IPv4 header (at `l3`) has IHL h: the same bytes with IHL h+1
(h-1 when h is 15), its options replaced by NOPs (type 1) and everything after them moved by
the 4 bytes (a packet at the maximum length loses its last 4 instead); total length
adjusted, the header checksum left as it is (the flow dissector does not read it, and a
packet with a wrong checksum is still one the NIC may receive):

    x:  | eth .. | ver/ihl=h | tos | totlen | ... 20 bytes ... | options (4h-20) | L4 ...
    y:  | eth .. | ver/ihl=h'| tos | totlen'| ... 20 bytes ... | NOP x (4h'-20)  | L4 ...

The question (z3, one query in a context of its own): is there an input x - a packet of
the block's own paths that reaches the block (`region`, past the `taken` ones), with any
other inputs (maps, helper results, ctx, values kept as any value such as hashes) - whose
twin y, with the same other inputs, is not all of: a packet of the environment, dissected
exactly (no key left to a fresh variable) into the very flower view of x, that the program
does not give the block's outcome (`good`)? The block's proof asks of every value of the
other inputs, so such a y is a counterexample to it, whatever the shields.
Unsat means: every such x has a twin in the same view with another outcome. Shields and
earlier filters are functions of the view, so any shield set that makes the block's proof
go through (no packet of the region outside the shields but without the outcome) takes
every view of the block's own packets: the proof would be vacuous, "taken by a pass shield".
So the loop can end no other way than without a filter, and `prove` stops there.

Sound whichever way it answers: sat or unknown (no answer within TWIN_RLIMIT) only means
the loop runs as before; an unsat gives up a block that could not have been offloaded.
"""

from __future__ import annotations

import functools

import z3

from analyzer.symbolic import PACKET, PACKET_LEN

from .dissector import WIDTHS, chain_exact, chain_keys, dissect, match_formula
from .flower import FlowerMatch
from .isolation import isolated

#: z3's deterministic resource limit of the twin query (not a time: the same block always
#: gets the same answer). Past it the answer is unknown and the shield loop runs as before.
TWIN_RLIMIT = 20_000_000
#: IPv4's NOP option (RFC 791): the twin's options, one byte each.
IPV4_NOP = 1


def twin_packet(l3: int, max_len: int) -> tuple[z3.ArrayRef, z3.BitVecRef]:
    """The twin (module doc) of PACKET whose IPv4 header starts at `l3`: its bytes and
    length, as terms over PACKET and PACKET_LEN."""
    x, n = PACKET, PACKET_LEN
    ver_ihl = x[z3.BitVecVal(l3, 64)]
    h = z3.ZeroExt(56, ver_ihl & 0x0F)
    grow = z3.ULT(h, 15)
    shift = z3.If(grow, z3.BitVecVal(4, 64), z3.BitVecVal(-4, 64))
    ihl = z3.Extract(7, 0, h + z3.If(grow, z3.BitVecVal(1, 64), z3.BitVecVal(-1, 64)))
    total = z3.Concat(x[z3.BitVecVal(l3 + 2, 64)], x[z3.BitVecVal(l3 + 3, 64)]) + z3.Extract(15, 0, shift)
    payload = z3.BitVecVal(l3, 64) + 4 * h + shift  # where the twin's L4 header starts
    i = z3.BitVec("twin.i", 64)
    byte = z3.If(
        i == l3,
        (ver_ihl & 0xF0) | ihl,
        z3.If(
            i == l3 + 2,
            z3.Extract(15, 8, total),
            z3.If(
                i == l3 + 3,
                z3.Extract(7, 0, total),
                z3.If(z3.ULT(i, l3 + 20), x[i], z3.If(z3.ULT(i, payload), z3.BitVecVal(IPV4_NOP, 8), x[i - shift])),
            ),
        ),
    )
    length = z3.If(grow, z3.If(z3.ULE(n + 4, max_len), n + 4, n), n - 4)
    return z3.Lambda([i], byte), length


@functools.lru_cache(maxsize=8)
def _twin_view(chain: FlowerMatch, l3: int, max_len: int) -> tuple[list, list[z3.BoolRef]]:
    """The substitution PACKET, PACKET_LEN -> the twin's, and "both are packets of the
    protocol chain `chain`, dissected exactly into the same flower view": per chain, once a
    process. Built from the chain's layers (dissector.chain_keys: on the chain they are the
    keys of the whole walk), which z3 reads several times faster than the whole walk."""
    y, length = twin_packet(l3, max_len)
    dx, dy = dissect(), dissect(y, length)
    kx, ky = chain_keys(chain, dx), chain_keys(chain, dy)
    same = [match_formula(chain, dx), match_formula(chain, dy), chain_exact(chain, dx), chain_exact(chain, dy)]
    return [(PACKET, y), (PACKET_LEN, length)], same + [kx[k] == ky[k] for k in WIDTHS]


def no_shield_helps(
    env: list[z3.BoolRef],
    taken: z3.BoolRef,
    region: z3.BoolRef,
    own: z3.BoolRef,
    good: z3.BoolRef,
    chain: FlowerMatch,
    l3: int,
    max_len: int,
) -> bool:
    """Whether z3 proves (module doc) that every packet of the block (`region`, its own
    paths' `own`, past `taken`, under `env`) has an options twin in the same flower view
    that the program does not give the outcome `good`: then no pass shield can make the
    block's proof go through without taking all of its packets. `chain`: the block's
    protocol chain (its protocol and ethertype keys), whose IPv4 header starts at `l3`."""
    sub, same_view = _twin_view(chain, l3, max_len)
    bad_twin = z3.And(*[z3.substitute(c, *sub) for c in env], *same_view, z3.Not(z3.substitute(good, *sub)))
    # the twin packet is a lambda: translated, never parsed (isolation.own_solver's `text`)
    r, _ = isolated(env, taken, region, own, z3.Not(bad_twin), rlimit=TWIN_RLIMIT, text=False)
    return r == z3.unsat
