"""Why a path stays in software, shown on a packet: z3 counterexamples and suggestions.

For a non-pass path that no filter takes whole, `examples` asks z3 for a frame that shows
the problem:

* `differs`: the frame has the flower keys this path's packets have (its extracted block,
  synthesis.py, past the pass shields synthesis tried before giving it up) but the program
  gives it another verdict: a filter on those keys would be wrong for it. An atypical
  frame's class (IP options, fragments, IPv6 extension headers) is what separates flower
  from the program there.
* `witness`: a frame that takes the path, where no such frame exists (a filter on the
  path's keys would be right, but the script could not keep it: budget, shields, earlier
  filters) or the path has no flower keys (only atypical packets, a rewrite, a redirect).

A path whose reason is atypical packets gets an atypical frame first, the others a typical
one first (the plainest frame that shows the difference).

Frames are the shortest z3 finds (64, then 128 bytes, then --max-len). A suggestion
(`offloadable with --assume no-ip-options`) is made when the frame is of the class the
assumption rules out (IP options, fragments, IPv6 extension headers) and the whole pipeline,
run again under that assumption, offloads the path.

`pcap(frames)` writes them as a classic pcap file (LINKTYPE_ETHERNET) any reader opens.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import z3

from analyzer.fields import frame
from analyzer.symbolic import PACKET, PACKET_LEN

from .dissector import match_formula
from .reasons import account
from .ruleset import build
from .synthesis import ASSUMPTIONS, DEFAULT_ASSUMPTIONS, Outcome, solver

#: Frame lengths tried, shortest first (None: up to --max-len).
LENGTHS = (64, 128, None)
#: Counterexamples worked out per program; further paths say "not computed".
MAX_EXAMPLES = 64


@dataclass
class Example:
    """A frame for one software path: `kind` differs|witness, the path the frame takes
    (`other`, its verdict) and the assumption that would make the path offloadable."""

    path: int
    kind: str
    frame: bytes
    other: int | None
    other_verdict: str | None
    suggestion: str | None = None

    def decoded(self) -> str:
        return frame(self.frame).text()

    def sentence(self) -> str:
        if self.kind == "witness":
            return "a packet of this path"
        return f"flower sees this path's keys, the program returns {self.other_verdict}" + (
            f" (path {self.other})" if self.other is not None else ""
        )

    def json(self) -> dict:
        return {
            "kind": self.kind,
            "hex": self.frame.hex(),
            "length": len(self.frame),
            "fields": self.decoded(),
            "classes": frame(self.frame).classes,
            "takes_path": self.other,
            "verdict": self.other_verdict,
            "why": self.sentence(),
        }


def examples(rs, fates) -> dict[int, Example]:
    """Per non-pass path in software (or offloaded only in part): its Example. Cached on
    the rule set (rs.examples)."""
    if rs.examples is not None:
        return rs.examples
    s = rs.synth
    out: dict[int, Example] = {}
    wanted = [f for f in fates if (not f.offloaded and f.reason.code != "pass-to-host") or f.partly]
    for f in wanted[:MAX_EXAMPLES]:
        atypical = not f.offloaded and f.reason.code == "atypical-packets"
        ex = _example(s, s.e.paths[f.path], atypical)
        if ex is not None:
            out[f.path] = ex
    _suggest(rs, out)
    rs.examples = out
    return out


#: The assumption that rules out each class of atypical frames (analyzer.fields.Frame).
RULES_OUT = {"IP options": "no-ip-options", "fragments": "no-fragments", "IPv6 extension headers": "no-ipv6-ext"}


def _example(s, p, atypical_first: bool) -> Example | None:
    outcome = s.outcomes[p.id]
    block = s.failed.get(p.id) or s.block_for(p) if isinstance(outcome, Outcome) else None
    if block is not None:
        bad = [*s.env, *_region(s, block), z3.Not(s.good(outcome))]
        order = (z3.Not(s.typical), s.typical) if atypical_first else (s.typical, z3.BoolVal(True))
        model = _shortest(*bad, order[0]) or _shortest(*bad, order[1])
        if model is not None:
            other = _taken(s, model)
            verdict = s.e.paths[other].verdict if other is not None else None
            return Example(p.id, "differs", _bytes(model), other, verdict)
    model = _shortest(*s.env, s.conds[p.id])
    if model is None:
        return None
    return Example(p.id, "witness", _bytes(model), p.id, p.verdict)


def _suggest(rs, out: dict[int, Example]) -> None:
    """Suggest the assumption ruling out a `differs` frame's class when the rules built
    again with it offload the path (one rebuild per assumption)."""
    free = [a for a in ASSUMPTIONS if a not in DEFAULT_ASSUMPTIONS and a not in rs.assumptions]
    candidates: dict[str, list[int]] = {}
    for pid, ex in out.items():
        if ex.kind == "differs":
            for c in frame(ex.frame).classes:
                if RULES_OUT.get(c) in free:
                    candidates.setdefault(RULES_OUT[c], []).append(pid)
    for a, pids in candidates.items():
        offloaded = _offloaded_under(rs, rs.assumptions + (a,))
        for pid in pids:
            if pid in offloaded and out[pid].suggestion is None:
                out[pid].suggestion = a


def _offloaded_under(rs, assume: tuple[str, ...]) -> set[int]:
    s = rs.synth
    again = build(s.e, tuple(a for a in assume if a not in DEFAULT_ASSUMPTIONS), s.ifnames, rs.max_rules)
    return {f.path for f in account(s.e, again, s.maps) if f.offloaded and f.partly is None}


def _region(s, block) -> list[z3.BoolRef]:
    """Packets the block's filter takes: its keys, past the pass shields synthesis tried."""
    return [block.formula(s.d)] + [z3.Not(match_formula(m, s.d)) for m in block.shields]


def _shortest(*constraints) -> z3.ModelRef | None:
    sv = solver(*constraints)
    for limit in LENGTHS:
        sv.push()
        if limit is not None:
            sv.add(z3.ULE(PACKET_LEN, limit))
        if sv.check() == z3.sat:
            return sv.model()
        sv.pop()
    return None


def _taken(s, model: z3.ModelRef) -> int | None:
    for p in s.e.paths:
        if z3.is_true(model.eval(s.conds[p.id], model_completion=True)):
            return p.id
    return None


def _bytes(model: z3.ModelRef) -> bytes:
    n = model.eval(PACKET_LEN, model_completion=True).as_long()
    return bytes(model.eval(PACKET[z3.BitVecVal(i, 64)], model_completion=True).as_long() for i in range(n))


#: Classic pcap: magic, version 2.4, GMT offset, accuracy, snaplen, LINKTYPE_ETHERNET (1).
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)


def pcap(frames: list[bytes]) -> bytes:
    """A pcap file holding `frames` in order, one second apart (from the epoch)."""
    out = [PCAP_HEADER]
    for i, data in enumerate(frames):
        out.append(struct.pack("<IIII", i, 0, len(data), len(data)) + data)
    return b"".join(out)
