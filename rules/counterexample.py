"""Why a path stays in software, shown on a packet: z3 counterexamples and suggestions.

For a non-pass path left in software, `examples` asks z3 for a frame that shows
the problem:

* `differs`: the frame has the flower keys this path's packets have (its extracted block,
  synthesis.py: the block synthesis gave up past the pass shields it tried, else the kept
  block the path is in, else the path's own) but the program
  gives it another verdict: a filter on those keys would be wrong for it. An atypical
  frame's class (IP options, fragments, IPv6 extension headers) is what separates flower
  from the program there.
* `witness`: a frame that takes the path, where no such frame exists (a filter on the
  path's keys would be right, but the script could not keep it: budget, shields, earlier
  filters) or the path has no flower keys (only atypical packets, a rewrite, a redirect).

A path whose reason is atypical packets gets an atypical frame first, the others a typical
one first (the plainest frame that shows the difference).

Frames are the shortest z3 finds (64, then 128 bytes, then --max-len), with every byte their
query leaves free set to 0 (analyzer/satmodel.py `plainest`): a field z3 filled for nothing
would give the frame a class (a fragment offset: xdp-filter's frames were [IP options,
fragments]) and have a suggestion tried for it (no-fragments, one with_assumption's extraction
and proof more on xdp-filter's tcp and udp objects). A suggestion
(`offloadable with --assume no-ip-options`) is made for a path left to software for
atypical packets or flower's view when the frame is of the class the assumption rules out
(IP options or an IHL below 5, fragments, IPv6 extension headers) and the path's own filter - its block with
the pass shields synthesis adds - proves under that assumption (the tests check by hand
that the whole pipeline then offloads it). A block that no shield can make prove is not
proved at all (`mac_twin`: a `protocol all` block without keys, where some packet of another
outcome keeps it whatever its MAC addresses: xdp-filter's every suggestion try), and a path
whose block is provably such a block (`keyless`) is not even extracted.

`pcap(frames)` writes them as a classic pcap file (LINKTYPE_ETHERNET) any reader opens.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import z3

from analyzer.entries import MapEntry, OtherInputs, looked_up, other_inputs
from analyzer.fields import frame
from analyzer.satmodel import check
from analyzer.symbolic import PACKET, PACKET_LEN

from .dissector import match_formula
from .flower import FAMILIES
from .isolation import home, isolated, own_solver, plain, sibling
from .synthesis import (
    ASSUMPTIONS,
    DEFAULT_ASSUMPTIONS,
    Block,
    Outcome,
    Synthesizer,
    assumption_constraints,
    maybe_sat,
)

#: Frame lengths tried, shortest first (None: up to --max-len).
LENGTHS = (64, 128, None)
#: Counterexamples worked out per program; further paths get none (JSON null).
MAX_EXAMPLES = 64
#: z3's deterministic resource limit per counterexample query (not a time: the same object
#: always gets the same report). A query past it finds nothing, and the next is tried.
QUERY_RLIMIT = 3_000_000
#: z3's deterministic resource limit of `mac_twin`'s question where a witness's verdict does
#: not simplify to true by itself (xdp-filter's all do). Past it no shortcut is taken: the
#: block is proved as before, so the limit bounds the cost, never an answer.
TWIN_RLIMIT = 200_000
#: The bytes of a frame flower's src_mac and dst_mac keys are read from (dissector.py: `macs`).
MAC_BYTES = 12
#: z3's deterministic resource limit of `_Asker.empty`'s question (whether a block has no
#: packet of another verdict at all). It only spares queries: past it (unknown), or sat, the
#: frames are asked for as before. xdp-filter's empty ones take 2 units.
EMPTY_RLIMIT = 20_000


@dataclass
class Example:
    """A frame for one software path: `kind` differs|witness, the path the frame takes
    (`other`, its verdict), the map entries that path looks up in the frame's model but
    stats-only maps' and the other inputs it reads (the verdict is claimed for the frame
    with these entries and inputs: analyzer/entries.py), and the assumption that would make
    the path offloadable."""

    path: int
    kind: str
    frame: bytes
    other: int | None
    other_verdict: str | None
    entries: tuple[MapEntry, ...] = ()
    inputs: OtherInputs = OtherInputs()
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
            "maps": [m.json() for m in self.entries],
            "ctx": dict(self.inputs.ctx),
            "helpers": list(self.inputs.helpers),
        }


def examples(rs, fates) -> dict[int, Example]:
    """Per non-pass path in software: its Example. Cached on the rule set (rs.examples)."""
    if rs.examples is not None:
        return rs.examples
    s = rs.synth
    ask = _Asker(rs)
    out: dict[int, Example] = {}
    wanted = [f for f in fates if not f.offloaded and f.reason.code != "pass-to-host"]
    wanted = [f for f in wanted if not s.e.cut_by_budget(s.e.paths[f.path])]  # where cut says it
    for f in wanted[:MAX_EXAMPLES]:
        if s.out_of_time() is not None:  # examples illustrate; the time budget comes first
            break
        ex = _example(rs, ask, s.e.paths[f.path], f.reason.code)
        if ex is not None:
            out[f.path] = ex
    _suggest(rs, ask, out, fates)
    rs.examples = out
    return out


class _Asker:
    """The z3 questions of one program's examples and suggestions, each asked once: paths
    whose blocks and outcomes are the same ask the same question (xdp-filter's map-decided
    paths all have the block `protocol all`), and get the same frame."""

    def __init__(self, rs):
        self.free = [a for a in ASSUMPTIONS if a not in DEFAULT_ASSUMPTIONS and a not in rs.assumptions]
        self.holds = {a: z3.And(assumption_constraints([a])) for a in self.free}
        #: query (its terms' ids) -> (its terms, kept alive so no id is reused; the answer)
        self.frames: dict[tuple[int, ...], tuple[tuple, z3.ModelRef | None]] = {}
        #: id of a model held in `frames` -> its frame's bytes (read once: ~60 array reads)
        self.read: dict[int, bytes] = {}
        #: a `symbols` cache for the inputs of every frame (entries.py: keys and conditions
        #: of the same paths, expanded and walked once)
        self.terms: dict = {}
        #: query (its terms' ids) -> (its terms, kept alive; whether z3 proved it unsatisfiable)
        self.unsat: dict[tuple[int, ...], tuple[tuple, bool]] = {}

    def shortest(self, *constraints, empty: bool = False) -> z3.ModelRef | None:
        """_shortest, once per set of constraints (z3 terms are hash-consed: equal terms,
        equal ids); None without asking where the caller knows them `empty` (some of them
        unsatisfiable: `empty`). Kept either way, the constraints with it: the terms the
        process holds, and so the main context's later term ids, are what asking made them."""
        key = tuple(sorted(c.get_id() for c in constraints))
        if key not in self.frames:
            self.frames[key] = (constraints, None if empty else _shortest(*constraints))
        return self.frames[key][1]

    def empty(self, *constraints) -> bool:
        """Whether z3 proves the constraints unsatisfiable (EMPTY_RLIMIT, a context of its
        own), once per set of constraints. Then `shortest` of them and anything more is None
        without asking: it returns only a model in which every constraint holds (satmodel's
        check), and there is none. Sat or unknown: False, nothing is concluded (the answer
        decides no output, only which queries are asked: the constraints are translated,
        not parsed from their text)."""
        key = tuple(sorted(c.get_id() for c in constraints))
        if key not in self.unsat:
            sv = own_solver(*constraints, rlimit=EMPTY_RLIMIT, text=False)
            self.unsat[key] = (constraints, sv.check() == z3.unsat)
        return self.unsat[key][1]

    def bytes(self, model: z3.ModelRef) -> bytes:
        """The frame of a model `shortest` returned, read once."""
        if id(model) not in self.read:
            self.read[id(model)] = _bytes(model)
        return self.read[id(model)]


#: The assumption that rules out each class of atypical frames (analyzer.fields.Frame). A
#: `malformed` frame (an IPv4 header with IHL < 5) is ruled out by no-ip-options (IHL = 5) as
#: one with options is: z3 may answer the query for a frame without a 20-byte IPv4 header
#: with either, and the assumption tried must not depend on which.
RULES_OUT = {
    "IP options": "no-ip-options",
    "malformed": "no-ip-options",
    "fragments": "no-fragments",
    "IPv6 extension headers": "no-ipv6-ext",
}


def _blocks(rs, p):
    """The blocks to look for a frame in, lazily (extracting a block costs many queries):
    the one synthesis gave up, the kept one the path is in, the path's own."""
    s = rs.synth
    yield s.failed.get(p.id)
    yield next((b for b in rs.blocks if p.id in b.paths), None)
    yield s.block_for(p)


def _example(rs, ask: _Asker, p, code: str) -> Example | None:
    """The path's `differs` frame, else a `witness`. Where a suggestion may follow (reason
    atypical-packets or not-expressible), frames an assumption not yet made rules out are
    looked for first, one assumption at a time: which frame z3 returns otherwise depends on
    the solver's history, and the report must not."""
    s = rs.synth
    outcome = s.outcomes[p.id]
    order = [s.typical, z3.BoolVal(True)]
    if code == "atypical-packets":
        order.reverse()
        order[0] = z3.Not(s.typical)
    if code in ("atypical-packets", "not-expressible"):
        order = [z3.Not(ask.holds[a]) for a in ask.free] + order
    for block in _blocks(rs, p) if isinstance(outcome, Outcome) else ():
        if block is None:
            continue
        bad = [*s.env, *_region(s, block), z3.Not(s.good(outcome))]
        model, empty = None, False
        for i, c in enumerate(order):
            model = ask.shortest(*bad, c, empty=empty)
            if model is not None:
                break
            # no frame for the first class: when the block has no packet of another verdict
            # at all, no class has one, and the other classes' frames are not asked for
            # (xdp-filter: the block synthesis gave up, `protocol all` past a shield that
            # takes every packet; 5 queries of ~8 ms)
            empty = empty or (i == 0 and len(order) > 1 and ask.empty(*bad))
        if model is not None:
            other = _taken(s, model)
            verdict = s.e.paths[other].verdict if other is not None else None
            return Example(p.id, "differs", ask.bytes(model), other, verdict, *_inputs(s, ask, model, other))
    model = ask.shortest(*s.env, s.conds[p.id])
    if model is None:
        return None
    return Example(p.id, "witness", ask.bytes(model), p.id, p.verdict, *_inputs(s, ask, model, p.id))


def _inputs(s, ask: _Asker, model: z3.ModelRef, path: int | None) -> tuple[tuple[MapEntry, ...], OtherInputs]:
    """The map entries the path the frame takes looks up and the other inputs it reads, as
    the frame's model has them; stats-only maps left out (analyzer/mapuse.py: no verdict
    depends on their contents)."""
    if path is None:
        return (), OtherInputs()
    ev = lambda x: model.eval(x, model_completion=True)  # noqa: E731
    taken = s.e.paths[path]
    stats = frozenset(name for name, cls in s.maps.items() if cls == "stats-only")
    found = looked_up(s.e, taken, ev, stats, ask.terms)
    return tuple(found), other_inputs(s.e, taken, ev, ask.terms)


def _suggest(rs, ask: _Asker, out: dict[int, Example], fates) -> None:
    """Suggest the assumption ruling out a `differs` frame's class for a path left to
    software for atypical packets or flower's view, when the path's own filter (its block,
    with the pass shields synthesis adds) proves under that assumption.

    A path tries its frame's classes in order and takes the first assumption that proves.
    This is done in rounds (every path's first untried assumption, then the next for those
    not yet suggested): the paths of a round whose blocks are the same under the same
    assumption are proved together (`_proves`), their blocks' shield loop once. A path
    whose block under the assumption is provably keyless (`keyless`: not extracted where
    with_assumption did not share extraction) proves no more than a group of keyless blocks
    would: where `mac_twin` says no shield helps such a block, it is passed over unextracted."""
    codes = {f.path: f.reason.code for f in fates if f.reason is not None}
    again: dict[str, Synthesizer] = {}
    twins: dict[tuple[str, Outcome], bool] = {}
    todo: dict[int, list[str]] = {}
    for pid, ex in out.items():
        if ex.kind != "differs" or codes.get(pid) not in ("atypical-packets", "not-expressible"):
            continue
        tried = [RULES_OUT.get(c) for c in frame(ex.frame).classes]
        tried = list(dict.fromkeys(a for a in tried if a in ask.free))
        if tried:
            todo[pid] = tried
    while todo:
        groups: dict[tuple, list[tuple[int, Block]]] = {}
        for pid, tried in todo.items():
            a = tried.pop(0)
            if a not in again:
                again[a] = rs.synth.with_assumption(a)
            s = again[a]
            if rs.synth.out_of_time() is not None:  # a suggestion re-proves: the budget comes first
                return
            p, outcome = s.e.paths[pid], s.outcomes[pid]
            if not isinstance(outcome, Outcome):
                continue
            if (pid, outcome, False) not in s.extracted and keyless(s, p, outcome, rs.synth.typical_models.get(pid)):
                # its block: keyless, as every keyless block of this outcome under `a`, proved
                # by no shield where mac_twin says so (asked once per assumption and outcome)
                if (a, outcome) not in twins:
                    twins[a, outcome] = mac_twin(s, Block("all", {}, outcome, [pid]))
                if twins[a, outcome]:
                    continue
            block = s.extract(p, outcome, quiet=True)
            if block is not None:
                groups.setdefault((a, _shape(block)), []).append((pid, block))
        for (a, _), members in groups.items():
            if rs.synth.out_of_time() is not None:
                return
            for pid in _proves(again[a], members):
                out[pid].suggestion = a
                todo[pid] = []
        todo = {pid: tried for pid, tried in todo.items() if tried}


def _shape(b: Block) -> tuple:
    """All of a fresh block that `Synthesizer.prove` reads but its paths: its keys, their
    values and masks, and its outcome (the block's formula is made of them)."""
    return (
        b.protocol,
        tuple(sorted(b.sets.items())),
        tuple(sorted((n, (x.value, x.mask)) for n, x in b.masked.items())),
        tuple(sorted(b.set_masks.items())),
        b.outcome,
    )


def _proves(s: Synthesizer, members: list[tuple[int, Block]]) -> list[int]:
    """The paths among `members` (path, its block; the blocks of one `_shape`) whose own
    filter proves under `s`: for each, what `s.prove(block, [])` would conclude, with the
    shield loop run once. That loop reads the block's keys and outcome, never its paths
    (they matter only in prove's last check: some packet of the block's own paths is left
    past the shields), so it runs the same for every member: it is run on one block standing
    for all the members' paths. Not proved, no member proves (its shields took every
    packet of all of them, or no shields were found); proved, the loop ended where it does
    for each member, and each gets prove's last check on its own path. A block `mac_twin`
    shows no shield can help proves no member, without the loop."""
    first = members[0][1]
    if mac_twin(s, first):
        return []
    rep = Block(
        first.protocol,
        dict(first.sets),
        first.outcome,
        [pid for pid, _ in members],
        masked=dict(first.masked),
        set_masks=dict(first.set_masks),
    )
    s.prove(rep, [])
    if not rep.proved:
        return []
    if len(members) == 1:
        return [members[0][0]]
    past = [z3.Not(match_formula(m, s.d)) for m in rep.shields]
    region = rep.formula(s.d)
    return [pid for pid, _ in members if maybe_sat(*s.env, s.reach([]), region, *past, s.conds[pid])]


def mac_twin(s: Synthesizer, block: Block) -> bool:
    """Whether `s.prove(block, [])` provably cannot prove `block` (nor any block of its
    `_shape`, whatever its paths): True only where

    * the block is `protocol all` without keys (no sets, masked keys or prefix sets), and
    * some path's witness w (Path.witness, from exploration) of another outcome than the
      block's is a *MAC twin*: with its bytes 0-11 (the MAC addresses) set to any values
      and everything else w's (the rest of the packet, its length, w's map contents,
      helper results and ctx; whatever w leaves free, any value), the packet satisfies the
      environment (`s.env`: assumptions included), lies in the block's region and is not
      one the program gives the block's outcome (`not s.good(outcome)`). First evaluated
      in w; then w's values are put in and what is left must be true over the free MAC
      bytes: true by simplification, or z3 finds no packet breaking it (a context of its
      own, TWIN_RLIMIT; past it, False: the proof runs).

    Why that block is never proved. Its region is `reaches_tc` (match_formula of `protocol
    all` with no key). Every pass shield `prove` gives it is a `protocol all` match on
    src_mac and dst_mac only: `shield` keeps only the keys `_key_names("all", {}, False,
    ())` names - src_mac, dst_mac (`chain_family("all", {})` is None: EXTRACTED[None], no
    SHIELD_ONLY, no tag keys) - and the block's single-valued sets (none); `widen` keeps a
    shield or the bits two shields agree on, of the same keys. Such a match's formula is
    reaches_tc and conditions on bytes 0-11 (the dissector's macs(), whatever the walk
    below). So a packet x of the block's region past the shields S, and w's twin y with
    x's MACs, are alike for every shield (both reach tc: both are in the region), and y
    is past S too, in the environment and the region, and not good: the query that must be
    unsat for `prove` to conclude (environment, region, past S, not good; no earlier
    blocks) has the model y whenever some x is past S. Hence either a packet is past S
    and the loop never ends in `proved`, or none is and its vacuity check (a packet of the
    block's own paths past S) fails: `prove` never sets `proved`, and `_proves` returns no
    path. Nothing printed comes from the skipped proof but its answer (its shields'
    models are not shown), so skipping it leaves the report as it was (xdp-filter's keyless
    blocks under no-ip-options and no-fragments: 0.2-0.4 s each)."""
    if block.protocol != "all" or block.sets or block.masked or block.set_masks:
        return False
    bad = z3.And(*s.env, block.formula(s.d), z3.Not(s.good(block.outcome)))
    for q in s.e.paths:
        w = q.witness
        if w is None or s.outcomes[q.id] == block.outcome:
            continue  # (a path of the block's outcome is good: its witness is no twin)
        if not z3.is_true(w.eval(bad, model_completion=True)):
            continue
        if _any_macs(w, bad):
            return True
    return False


def keyless(s: Synthesizer, p, outcome: Outcome, kept: z3.ModelRef | None = None) -> bool:
    """Whether `s.extract(p, outcome, quiet=True)` is, provably without running it, the one
    block `protocol all` without keys (the block `mac_twin` asks about): True only where a
    model w - the path's exploration witness, else `kept` (a typical packet of it another
    synthesizer found) - is a typical packet of the path under `s.env` whose skb protocol
    is no family's (a VLAN tag, another ethertype), and stays one with its bytes 0-11 (the
    MACs) set to any values, everything else w's (`mac_twin`'s question).

    Why extraction then finds that block (where z3 answers its checks: they have
    QUERY_TIMEOUT_MS, a wall-clock limit never reached on the corpus; an unknown there
    would send extraction elsewhere). Unsplit (`quiet`), `_unsplit` names the protocol: w
    is a typical packet of the path of no family's protocol, so its probe (or the witness
    it evaluates, or its check for another protocol than a family witness's) is
    satisfiable: `all`, from typical packets (not fragments). Under `all` extraction reads
    src_mac and dst_mac only (`_key_names`: EXTRACTED[None]); each takes every one of its
    2**48 values on typical packets of the path (w's twins), so `_key_values` answers None
    (every value) or, enumerating, more than MAX_VALUES values with no fixed bit
    (`_fixed_bits`): the key is left free either way; no set, mask or prefix, and MACs are
    no flag key (no cubes). The skipped extraction (0.01-0.08 s a path on xdp-filter under
    no-fragments, which with_assumption cannot share) would only have handed that block on."""
    claim = z3.And(s.conds[p.id], *s.env, s.typical)
    for w in (p.witness, None if kept is None else home(kept)):
        if w is None or not z3.is_true(w.eval(claim, model_completion=True)):
            continue
        if w.eval(s.d.skb_protocol, model_completion=True).as_long() in FAMILIES:
            continue
        if _any_macs(w, claim):
            return True
    return False


def _any_macs(w: z3.ModelRef, formula: z3.BoolRef) -> bool:
    """Whether `formula` (true in model w) holds with the packet's bytes 0-11 set to any
    values and every other input w's (what w leaves free: any value): true once w's
    values are put in, or z3 finds no MAC bytes breaking it (a context of its own,
    TWIN_RLIMIT; past it, False)."""
    macs = z3.Array("twin!mac", z3.BitVecSort(64), z3.BitVecSort(8))
    i = z3.BitVec("twin!i", 64)
    rest = w.eval(PACKET, model_completion=True)
    pkt = z3.Lambda([i], z3.If(z3.ULT(i, MAC_BYTES), macs[i], rest[i]))
    held = w.eval(z3.substitute(formula, (PACKET, pkt)), model_completion=False)
    return z3.is_true(held) or isolated(z3.Not(held), rlimit=TWIN_RLIMIT)[0] == z3.unsat


def _region(s, block) -> list[z3.BoolRef]:
    """Packets the block's filter takes: its keys, past the pass shields synthesis tried."""
    return [block.formula(s.d)] + [z3.Not(match_formula(m, s.d)) for m in block.shields]


def _shortest(*constraints) -> z3.ModelRef | None:
    """The model of the shortest frame (LENGTHS) satisfying the constraints, asked in a z3
    context of their own (rules/isolation.py): which frame z3 returns - its class, the
    path it takes, the suggestion made from it - then depends on the constraints alone,
    not on the queries the process asked before (extraction, reports, other programs). The
    bytes the constraints leave free are 0 (isolation.plain)."""
    sv = own_solver(*constraints, rlimit=QUERY_RLIMIT)
    length = PACKET_LEN.translate(sv.ctx)
    for limit in LENGTHS:
        bound = [] if limit is None else [z3.ULE(length, limit)]
        sv.push()
        sv.add(*bound)
        r, model = check(sv)  # a model the frame's constraints hold in (satmodel.py)
        sv.pop()
        if r == z3.unknown:  # no answer from the pushed solver: one of its own (isolation.sibling)
            r, model = check(sibling(sv, *bound, rlimit=QUERY_RLIMIT))
        if r == z3.sat:
            return home(plain(sv, model, *bound))
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
