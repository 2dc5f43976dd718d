"""What a long computation or a key's packet-dependent offset is read from (`Decoder._inputs`),
walked through z3's C API and once per term (`fields._input_nodes`), and the path reasons'
shared `symbols` cache (rules/reasons.py `_names`).

* `_walk_inputs` yields what the walk of Python terms it replaced met, in the same order, as
  the same terms (kinds, offsets, terms `eq` and of the same class): checked on every term the
  renderings of xdpfilt_alw_all's keys ask about (both kinds of reads, the length and map
  lookups occur), and on a hash over a summary, a ctx field, the length, a map value and a
  read at a computed offset;
* the texts are the ones that Python walk gives, and a term is walked once however many
  renderings ask about it;
* the reasons are the ones a fresh `symbols` walk per path gives.
"""

from __future__ import annotations

import pytest
import z3
from conftest import decoded_texts, explored_with_witnesses

import analyzer.fields as fields
import corpus
import rules.reasons as reasons
from analyzer.fields import Decoder
from analyzer.symbolic import PACKET, PACKET_LEN

OBJECTS = [corpus.EXTERNAL_DIR / "libxdp1" / "xdpfilt_alw_all.o"]


def _python_walk(t, definitions):
    """The walk `_inputs` made before, on z3's Python terms (one ExprRef per node)."""
    seen: set[int] = set()
    todo = [t, *definitions]
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_select(x) and x.arg(0).eq(PACKET):
            if z3.is_bv_value(x.arg(1)):
                yield "at", x.arg(1).as_long()
            else:
                yield "read", x.arg(1)
            continue
        if x.eq(PACKET_LEN):
            yield "len", None
            continue
        if z3.is_const(x) and not z3.is_bv_value(x):
            yield "const", x
            continue
        if z3.is_app(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED and x.decl().name().startswith("map."):
            yield "map", x
            continue
        if z3.is_app(x):
            todo.extend(reversed(x.children()))


@pytest.fixture(scope="module", params=OBJECTS, ids=lambda p: p.stem)
def explored(request):
    return request.param.stem, explored_with_witnesses(request.param)


#: the C-API walk itself (the `asked` fixture records its calls)
_WALK = fields._walk_inputs


@pytest.fixture
def asked(monkeypatch) -> list[tuple]:
    """The (term, definitions) of every `_walk_inputs` call the test makes."""
    calls: list[tuple] = []

    def recording(t, definitions):
        calls.append((t, definitions))
        return _WALK(t, definitions)

    monkeypatch.setattr(fields, "_walk_inputs", recording)
    return calls


def test_the_c_walk_meets_what_the_python_walk_met(explored, asked):
    stem, e = explored
    walk = _WALK
    decoded_texts(e)
    assert asked, "no term asked about: the check bites nothing"
    kinds = set()
    for t, definitions in asked:
        mine, theirs = list(walk(t, definitions)), list(_python_walk(t, definitions))
        assert [k for k, _ in mine] == [k for k, _ in theirs]
        for (kind, a), (_, b) in zip(mine, theirs):
            kinds.add(kind)
            if isinstance(b, z3.ExprRef):
                assert a.eq(b) and type(a) is type(b), (kind, b)
            else:
                assert a == b
    assert {"at", "read", "len", "map"} <= kinds


def _byte(i):
    return PACKET[i if isinstance(i, z3.ExprRef) else z3.BitVecVal(i, 64)]


def _mix(acc, *words):
    for w in words:
        acc = acc ^ w
        acc = (acc ^ z3.LShR(acc, 7)) * 0x9E3779B1 + 0x7F4A7C15
    return acc


def _hashed():
    """A hash of a summary (defined over UDP ports), a ctx field, the length, a map value and
    a byte at an IHL-relative offset, with the definitions the Decoder is given."""
    port = z3.ZeroExt(24, _byte(34))
    summary = z3.BitVec("summary.7", 32)
    ihl = z3.ZeroExt(60, z3.Extract(3, 0, _byte(14)))
    value = z3.Function("map.seen.value", z3.BitVecSort(32), z3.BitVecSort(32))(port)
    words = (summary, z3.BitVec("ctx.ingress_ifindex", 32), z3.Extract(31, 0, PACKET_LEN), value)
    h = _mix(z3.BitVecVal(0, 32), *words, z3.ZeroExt(24, _byte(14 + ihl * 4)), z3.BitVecVal(7, 32))
    udp = z3.And(_byte(12) == 8, _byte(13) == 0, _byte(23) == 17)
    return z3.And(udp, z3.URem(h, 60) == 3), {"summary.7": (_mix(port << 16, port), "xdp:12")}


def test_the_c_walk_meets_every_kind_of_input_of_a_hash(asked, monkeypatch):
    cond, summaries = _hashed()
    walk = _WALK
    fields.forget()
    text = Decoder(summaries=summaries).render(cond)
    assert "hash(" in text and "len" in text and "ctx.ingress_ifindex" in text and "seen[" in text, text
    assert asked and any(d for _, d in asked)  # the summary's definition walked too
    for t, definitions in asked:
        mine, theirs = list(walk(t, definitions)), list(_python_walk(t, definitions))
        assert [k for k, _ in mine] == [k for k, _ in theirs]
        assert {"at", "read", "len", "const", "map"} <= {k for k, _ in mine}
        for (_, a), (_, b) in zip(mine, theirs):
            assert a.eq(b) and type(a) is type(b) if isinstance(b, z3.ExprRef) else a == b
    monkeypatch.setattr(fields, "_input_nodes", lambda t, definitions: list(_python_walk(t, definitions)))
    fields.forget()
    assert Decoder(summaries=summaries).render(cond) == text


def test_texts_are_the_python_walks_and_a_term_is_walked_once(explored, monkeypatch):
    _, e = explored
    monkeypatch.setattr(fields, "_input_nodes", lambda t, definitions: list(_python_walk(t, definitions)))
    reference = decoded_texts(e)
    monkeypatch.undo()
    walked: list[int] = []
    walk = fields._walk_inputs

    def counting(t, definitions):
        walked.append(t.get_id())
        return walk(t, definitions)

    monkeypatch.setattr(fields, "_walk_inputs", counting)
    fields._INPUT_NODES.clear()
    kept = fields.forget

    def keeping_walks():  # every rendering from scratch but for the walks (`_texts`)
        nodes = dict(fields._INPUT_NODES)
        kept()
        fields._INPUT_NODES.update(nodes)

    monkeypatch.setattr(fields, "forget", keeping_walks)
    assert decoded_texts(e) == reference
    assert walked and len(walked) == len(set(walked))


def test_reasons_with_the_shared_symbols_cache_are_a_fresh_walks(explored, monkeypatch):
    _, e = explored
    classes = {}

    def reasons_now():
        reasons.forget()
        return [str(reasons.path_reason(e, p, classes)) for p in e.paths]

    shared = reasons_now()
    assert reasons._names(e)  # the cache was filled
    monkeypatch.setattr(reasons, "_names", lambda e: {})
    assert reasons_now() == shared
