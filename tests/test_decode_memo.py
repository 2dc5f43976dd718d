"""fields.decode's memo on the exploration (shared by `rules`' reasons, its printed script
and `check`): a hit for the same path and environment, a fresh rendering for a new path
object or a changed environment (each compared with a Decoder of its own)."""

from __future__ import annotations

import dataclasses

import z3
from conftest import require

import corpus
from analyzer.explore import explore
from analyzer.fields import Decoder, decode
from analyzer.symbolic import PACKET, PACKET_LEN
from lifter.program import load_object


def test_decode_memo_is_invalidated_by_a_new_path_or_environment():
    path = corpus.BUILD_DIR / "clang" / "thesis_static_rules.o"
    require(path.is_file(), f"{path} is not built")
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    p = e.paths[0]
    first = decode(e, p)
    assert first == Decoder(e.environment()).render(e.condition(p))
    assert decode(e, p) is first  # the memo answers
    e.decoded[p.id] = (p, e.environment(), "stale")
    assert decode(e, p) == "stale"  # same path, same environment: the memo is used
    e.paths[0] = q = dataclasses.replace(p)
    assert decode(e, q) == first  # a new path object: rendered again
    e.decoded[q.id] = (q, e.environment(), "stale")
    # a new environment fact (an IPv4 ethertype on every packet): rendered again, under it
    e.solver.add(z3.And(z3.UGE(PACKET_LEN, 14), z3.Select(PACKET, 12) == 8, z3.Select(PACKET, 13) == 0))
    again = decode(e, q)
    assert again != "stale"
    assert again == Decoder(e.environment()).render(e.condition(q))
