"""Path conditions in header fields: `ipv4.saddr == 192.168.1.21 ∧ tcp.dport != 22`.

A path condition (explore.py) is a z3 formula over packet bytes `pkt[i]`, the length, map
contents, ctx fields and helper results. `decode(e, path)` names what it reads:

* the headers a path has are what its condition implies (z3): Ethernet always; one or two
  VLAN tags (802.1Q 0x8100, 802.1ad 0x88a8) when the ethertype is implied; IPv4 or IPv6
  after them; TCP, UDP, ICMP or ICMPv6 after IPv4 when `ipv4.proto` is implied, at the
  offset the IHL gives (a read at `14 + ihl*4 + 2` is `tcp.dport` whatever the IHL is), or
  after a fixed 40-byte IPv6 header when `ipv6.nexthdr` is implied;
* a read is a run of packet bytes, in network order (a byte-swapped load) or in load order
  (little-endian: the compared constant is swapped back); sub-byte fields (IHL, TCP flags,
  VLAN id, fragment bits) are named when the mask selects exactly them;
* byte comparisons that together cover a field (`pkt[12] == 8 ∧ pkt[13] == 0`) are joined
  (`eth.proto == ipv4`);
* what no field fits stays as `pkt[34:36]`; map lookups print as `blacklist[ipv4.saddr]`,
  a key of several parts as its parts in memory order (an LPM key: `{32, ipv4.saddr}`),
  one read at an offset no header layout of the path fixes as `2 bytes at a
  packet-dependent offset (from eth.proto, …)` with the fields its offset is computed
  from, not the offset's whole term;
* C's `a || b` over comparisons, which compilers turn into `(a ? 1 : 0) | (b ? 1 : 0)`
  tested against 1 or 0, reads as the condition it tests: `(a ∨ b)`, `¬(a ∨ b)`.

A hash or checksum computed from the packet prints as `hash(udp.sport, udp.dport)` (or
`f(...)`): the fields it reads, through the summaries it is made of (`summary.<n>`, whose
definitions `Decoder` may be given); comparisons and remainders around it stay
(`hash(ipv4.saddr) % 64 == 3`). Distinct computations in one condition get distinct
names (`hash1`, `hash2`); the same one, the same name.

The result is for people: it is not parsed back by anything.
"""

from __future__ import annotations

import ipaddress
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import z3

from .symbolic import PACKET, PACKET_LEN, Z3_C, fresh_context, symbols, wrap

#: Per header: field -> (offset, size in bytes).
HEADERS: dict[str, dict[str, tuple[int, int]]] = {
    "eth": {"dst": (0, 6), "src": (6, 6), "proto": (12, 2)},
    "vlan": {"tci": (0, 2), "proto": (2, 2)},
    "ipv4": {
        "ver_ihl": (0, 1),
        "tos": (1, 1),
        "tot_len": (2, 2),
        "id": (4, 2),
        "frag": (6, 2),
        "ttl": (8, 1),
        "proto": (9, 1),
        "check": (10, 2),
        "saddr": (12, 4),
        "daddr": (16, 4),
    },
    "ipv6": {
        "vtc_flow": (0, 4),
        "payload_len": (4, 2),
        "nexthdr": (6, 1),
        "hop_limit": (7, 1),
        "saddr": (8, 16),
        "daddr": (24, 16),
    },
    "tcp": {
        "sport": (0, 2),
        "dport": (2, 2),
        "seq": (4, 4),
        "ack_seq": (8, 4),
        "doff": (12, 1),
        "flags": (13, 1),
        "window": (14, 2),
        "check": (16, 2),
        "urg_ptr": (18, 2),
    },
    "udp": {"sport": (0, 2), "dport": (2, 2), "len": (4, 2), "check": (6, 2)},
    "icmp": {"type": (0, 1), "code": (1, 1), "check": (2, 2)},
}
HEADERS["vlan2"] = HEADERS["vlan"]
HEADERS["l4"] = {"sport": (0, 2), "dport": (2, 2)}  # TCP or UDP: the ports are at the same place
HEADERS["icmp6"] = HEADERS["icmp"]

#: Sub-byte fields: (header, field) -> [(name, mask, shift)] (mask over the field's value).
SUBFIELDS = {
    ("vlan", "tci"): [("pcp", 0xE000, 13), ("dei", 0x1000, 12), ("vid", 0x0FFF, 0)],
    ("ipv4", "ver_ihl"): [("version", 0xF0, 4), ("ihl", 0x0F, 0)],
    ("ipv4", "frag"): [("df", 0x4000, 14), ("mf", 0x2000, 13), ("frag_off", 0x1FFF, 0), ("fragment", 0x3FFF, 0)],
    ("ipv6", "vtc_flow"): [("version", 0xF0000000, 28), ("flow_lbl", 0x000FFFFF, 0)],
    ("tcp", "doff"): [("doff", 0xF0, 4)],
    ("tcp", "flags"): [(f, 1 << i, i) for i, f in enumerate(("fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr"))],
}
SUBFIELDS[("vlan2", "tci")] = SUBFIELDS[("vlan", "tci")]

ETHERTYPES = {0x0800: "ipv4", 0x86DD: "ipv6", 0x0806: "arp", 0x8100: "802.1q", 0x88A8: "802.1ad"}
IP_PROTOS = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6", 47: "gre", 132: "sctp"}
VLAN_TPIDS = (0x8100, 0x88A8)
#: L4 header names by IP protocol number ("ports": TCP or UDP, not known which).
L4 = {6: "tcp", 17: "udp", 1: "icmp", 58: "icmp6", "ports": "l4"}
#: Longest rendering of one condition (characters); longer ones end with "…".
MAX_TEXT = 1200
#: Characters of a packet-dependent key offset printed (`Decoder._key_parts`).
KEY_RAW = 40
#: Layouts (header positions, a few z3 queries each) worked out per rendered condition.
MAX_LAYOUTS = 40
#: z3 queries per rendered condition (questions a model at hand answers are free), and z3's
#: deterministic resource limit per query (not a time). Past them nothing more is "implied":
#: fewer names, never wrong ones. z3's answer near the limit depends on the AST ids of its
#: context: each rendering asks in a context of its own (`_Session`).
MAX_QUERIES = 96
QUERY_RLIMIT = 20_000
#: Packet bytes `layout` decides on: ethertypes (untagged, one and two VLAN tags), and per
#: L3 start the IPv4 version/IHL and protocol bytes and the IPv6 next header.
LAYOUT_BYTES = frozenset({12, 13, 16, 17, 20, 21} | {o for l3 in (14, 18, 22) for o in (l3, l3 + 6, l3 + 9)})
#: The text of a condition not decoded because the command's time budget ran out (`deadline`).
NOT_DECODED = "(conditions not decoded: the time budget ran out)"
#: Appended when fixed-offset reads were named as L4 fields.
FIXED_NOTE = " [L4 fields at fixed offsets: as named only without IPv4 options]"
#: A long computation (a hash, a checksum) prints as `hash(udp.sport, udp.dport)` or
#: `f(...)`: the fields it reads, not its operations (`_long`). It is a value made of
#: arithmetic with no if-then-else in it (a header offset merged over paths is printed
#: whole), with at least MIX_OPS mixing operations (multiplications, xors, rotations,
#: remainders: then `hash`) or LONG_OPS arithmetic operations (`f`), counted over its tree.
MIX_OPS = 3
LONG_OPS = 12


#: Order comparisons by z3 operation, as printed.
_ORDERS = {
    z3.Z3_OP_ULEQ: "<=",
    z3.Z3_OP_SLEQ: "<=s",
    z3.Z3_OP_UGEQ: ">=",
    z3.Z3_OP_ULT: "<",
    z3.Z3_OP_UGT: ">",
    z3.Z3_OP_SGEQ: ">=s",
    z3.Z3_OP_SLT: "<s",
    z3.Z3_OP_SGT: ">s",
}


@dataclass
class Layout:
    """Where each header of a path starts: an int, or a z3 offset term (TCP after an IPv4
    header whose IHL the path does not fix)."""

    bases: dict[str, int | z3.BitVecRef] = field(default_factory=lambda: {"eth": 0})
    #: (L4 header, offset) where a program that ignores IPv4 options reads it, when the
    #: path does not fix the IHL: such reads are named, with a note
    fixed_l4: tuple[str, int] | None = None

    def constant(self) -> tuple:
        """What a read at a constant offset is named by (`absolute`, `describe`): the headers
        at constant offsets, in order, and `fixed_l4`."""
        return tuple((h, b) for h, b in self.bases.items() if isinstance(b, int)), self.fixed_l4

    def name(self, header: str, offset: int, size: int) -> str | None:
        for fname, (off, n) in HEADERS[header].items():
            if off == offset and n == size:
                return f"{header}.{fname}"
        return None


@dataclass
class Known:
    """What a Decoder knows of one condition `cond`: `premise`, formulas `cond` implies that
    z3 decides fast (`_fixed_part`; for a branch, what its parent's layout proved and the
    branch's own fixed part), z3's answer on them and its model, and a model of `cond`
    itself when one is known. `whole`: the premise is `cond` (it reads no packet byte at a
    computed offset); `branch`: a branch of an Or, never asked whole (see `_branch`)."""

    cond: z3.BoolRef  # kept alive: the Decoder's memo is keyed by its AST id
    premise: list[z3.BoolRef]
    whole: bool = False
    branch: bool = False
    answer: z3.CheckSatResult | None = None
    premise_model: z3.ModelRef | None = None
    model: z3.ModelRef | None = None
    #: claims proven of `cond` (and of the conditions it is a branch of)
    facts: list[z3.BoolRef] = field(default_factory=list)
    #: models at hand (Decoder.models, by index) -> whether they satisfy the premise
    fits: dict[int, bool] = field(default_factory=dict)
    #: the rendering's witnesses (Decoder.witnesses) that are models of `cond`, once worked out
    witnessed: list[Witness] | None = None
    #: for a branch: (what is known of the condition it is a branch of, the branch's literal)
    via: tuple[Known, z3.BoolRef] | None = None
    #: id of a model -> (whether it makes `cond` true, the model: kept alive) (`_satisfies`)
    satisfied: dict[int, tuple[bool, z3.ModelRef]] = field(default_factory=dict)


@dataclass(frozen=True)
class Read:
    """A packet read: bytes `offs` (most significant first; each (header, offset) or
    ("pkt", absolute)) and the bits hi..lo of their concatenation."""

    offs: tuple[tuple[str, int], ...]
    hi: int
    lo: int


class Decoder:
    """Renders conditions of one exploration path by path (`layout` first).

    `deadline` (a `time.perf_counter()` value, None: no limit) bounds the decoding by the
    command's time budget: a condition whose rendering starts past it is `NOT_DECODED`; one
    under way when it passes asks z3 nothing more (each query is also stopped at it), so it
    names fewer fields, never wrong ones. `summaries` (Exploration.summaries: summary name
    -> (the value it stands for, where)) lets a long computation name the fields its
    summaries read; without them it names the summaries."""

    def __init__(
        self,
        env: list[z3.BoolRef] | None = None,
        deadline: float | None = None,
        summaries: dict[str, tuple[z3.BitVecRef, str]] | None = None,
    ):
        self.env = env or []
        self.deadline = deadline
        self.summaries = summaries or {}
        #: long computations named in the condition being rendered: AST id -> number
        self.longs: dict[int, int] = {}
        self.symbol_cache: dict = {}  # symbols()'s memo over the summaries' definitions
        self.queries = 0  # questions asked for the condition being rendered (MAX_QUERIES)
        #: what asked something of the condition (a question, a layout, a computed offset, a
        #: long computation), counted: a text worked out while it stays is `_PURE`
        self.asked = 0
        self.layouts = 0  # layouts computed (each a few z3 queries), at most MAX_LAYOUTS
        self.emitted = 0  # characters rendered so far: past MAX_TEXT the rest is "…"
        self.last = Layout()
        self.fixed_used = False  # a fixed-offset L4 read was named (see Layout.fixed_l4)
        #: (kind, sub-term, layout, condition) -> (its text, characters counted, the three kept
        #: alive) in the rendering under way (`_memo`)
        self.texts: dict[tuple, tuple] = {}
        #: condition AST id -> what is known of it (`Known`)
        self.known: dict[int, Known] = {}
        #: z3 checks made (`_check`): for bench/fields.py
        self.checks = 0
        #: the models z3 gave while rendering this condition, in the order asked (`_at_hand`)
        self.models: list[z3.ModelRef] = []
        #: (model index, formula AST id) -> whether the model satisfies it (`_holds`)
        self.holds: dict[tuple[int, int], bool] = {}
        #: the z3 context of the rendering under way (`_Session`), None between renderings
        self.session: _Session | None = None
        #: the rendering's witness (`render`), and what is made of it when first needed:
        #: concrete models of the environment and the condition being rendered (`witnesses`:
        #: the witness and its untagged variants), used only to refute (`_refuted`)
        self.witness: z3.ModelRef | None = None
        self.witnesses: list[Witness] | None = None
        self.rendered: z3.BoolRef | None = None  # the condition `render` renders

    # --- which headers the path has ----------------------------------------------------
    #
    # Each question (is `cond` satisfiable, does it imply `claim`) counts against MAX_QUERIES
    # however it is answered, so the budget ends at the same question whatever answers it.
    # Answers come, cheapest first, from: a model of `cond` kept from an earlier question (a
    # claim it falsifies is not implied: exact, no solver call); z3 on `cond`'s fixed part
    # (`Known.fixed`: its conjuncts that read the packet at constant offsets only, weaker than
    # `cond`, so what it implies `cond` implies, and it has no unsatisfiable branch `cond`
    # has); z3 on `cond` itself, whose reads at computed offsets (an IPv6 extension-header
    # walk) often take it past the resource limit. Only unsat answers make a claim, so the
    # decoding states what z3 proved and nothing else.

    def _spent(self) -> bool:
        """Whether this rendering's questions or the time budget are spent."""
        if self.queries >= MAX_QUERIES:
            return True
        return self._late()

    def _late(self) -> bool:
        return self.deadline is not None and self.deadline - time.perf_counter() <= 0

    def _question(self) -> bool:
        """Count one question (`_satisfiable`, `_implied`, or a candidate value no question
        was needed for: see `_value`) against MAX_QUERIES; False when they are spent. Every
        question counts however it is answered (a model at hand, z3, or no z3 at all), so
        the budget ends at the same question whatever the models were: which models z3 gives
        can differ between processes (z3 iterates some tables in the order of memory
        addresses), the answers to the questions cannot (unless near the resource limit)."""
        self.asked += 1
        if self._spent():
            return False
        self.queries += 1
        return True

    def _check(self, formulas: list[z3.BoolRef], keep: bool = True) -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
        """z3 on the environment and `formulas` under the per-query resource limit (and the
        deadline): the answer and, when sat, a model; unknown without asking past the
        deadline (the question asking it was counted: `_question`). Within a process the
        answer is a function of the question alone (`_Session.solve`: near the resource
        limit, not across processes with other histories): asked in a z3 context made for
        it (`_Session`), not the rendering's, whose terms depend on the questions asked
        before (and a witness spares some: `_refuted`). So it is kept for any rendering (`_ANSWERS`): a question
        on a premise (small, and the same for many paths) and one on a whole
        condition (a map key's rendering, `key_fields`, and the path's `render` ask the
        same ones of the same condition: xdpfilt_alw_tcp's, 4 at 10-20 ms each)."""
        if self._late():
            return z3.unknown, None
        asked = [*self.env, *formulas]
        key = tuple(f.get_id() for f in asked)
        memo = _ANSWERS.get(key)
        if memo is None:
            timeout = None if self.deadline is None else max(1, int((self.deadline - time.perf_counter()) * 1000))
            self.checks += 1
            answer, model, by_limit = _Session().solve(asked, timeout)
            memo = (answer, model, asked)
            if answer != z3.unknown or by_limit:  # not the deadline's timeout
                if len(_ANSWERS) > 20_000:
                    _ANSWERS.clear()
                _ANSWERS[key] = memo
        if keep:  # a whole-condition question's model is not kept: a witness may spare it (`_refuted`)
            self._keep(memo[1])
        return memo[0], memo[1]

    def _keep(self, model: z3.ModelRef | None) -> None:
        if model is not None and not any(m is model for m in self.models):
            self.models.append(model)

    def _known(self, cond: z3.BoolRef) -> Known:
        known = self.known.get(cond.get_id())
        if known is None:
            known = Known(cond, _fixed_part(cond), whole=_offsets(cond) is not None)
            self.known[cond.get_id()] = known
        return known

    def _premise_model(self, known: Known) -> z3.ModelRef | None:
        """A model of `known`'s premise: one at hand (`_at_hand`), else z3's (asked once);
        None when z3 finds none."""
        if known.answer is None:
            m = self._at_hand(known)
            if m is not None:
                known.answer, known.premise_model = z3.sat, m
            else:
                known.answer, known.premise_model = self._check(known.premise)
            m = known.premise_model
            if m is not None and known.model is None and self._satisfies(m, known):
                known.model = m  # a model of `cond` too (exact: evaluated)
        return known.premise_model

    def _satisfies(self, m: z3.ModelRef, known: Known) -> bool:
        """Whether model `m` makes `known.cond` true (evaluated with model completion), each
        condition once per model. A branch's condition is `cond ∧ c` (`_branch`): it is true
        where `cond` is (asked of the parent, once per model for all its branches) and `c`
        is, so the whole path condition is no longer evaluated again for every branch. The
        same answer: z3 evaluates a conjunction from its conjuncts (each to true, false or a
        term left open; the conjunction is true exactly when every conjunct is), and model
        completion gives an uninterpreted symbol the same default value whichever formula
        meets it first."""
        hit = known.satisfied.get(id(m))
        if hit is None:
            if known.via is not None:
                parent, c = known.via
                holds = self._satisfies(m, parent) and z3.is_true(m.eval(c, model_completion=True))
            else:
                holds = z3.is_true(m.eval(known.cond, model_completion=True))
            hit = known.satisfied[id(m)] = (holds, m)
        return hit[0]

    def _at_hand(self, known: Known, falsifies: z3.BoolRef | None = None) -> z3.ModelRef | None:
        """The first model z3 gave for this condition (in the order asked) that satisfies
        `known`'s premise (evaluated: exact; every model z3 gave here satisfies the
        environment, asked with every query) and, given `falsifies`, makes it
        false: a model of the premise, or a packet of it where a claim does not hold,
        without asking z3 (a branch's premise often holds in a model its parent or a
        sibling got). Only this rendering's models: the text stays a function of the
        condition. Not those of whole-condition questions (`_implied`: not kept), which a
        witness may spare (`_refuted`)."""
        for i, m in enumerate(self.models):
            fits = known.fits.get(i)
            if fits is None:
                fits = known.fits[i] = all(self._holds(i, f) for f in known.premise)
            if fits and (falsifies is None or z3.is_false(m.eval(falsifies, model_completion=True))):
                return m
        return None

    def _holds(self, i: int, f: z3.BoolRef) -> bool:
        """Whether model `i` (of `models`) makes `f` true, evaluated once per rendering (the
        environment and a parent's premise are asked of every branch)."""
        key = (i, f.get_id())
        holds = self.holds.get(key)
        if holds is None:
            holds = self.holds[key] = z3.is_true(self.models[i].eval(f, model_completion=True))
        return holds

    def _satisfiable(self, cond: z3.BoolRef) -> z3.ModelRef | None:
        """A model that gives candidate values for what `cond` implies (of `cond`, or of its
        premise), None when z3 finds none: `cond` is unsatisfiable or past the resource
        limit, or the questions are spent."""
        if not self._question():
            return None
        known = self._known(cond)
        return known.model or self._premise_model(known)

    def _branch(self, cond: z3.BoolRef, c: z3.BoolRef, sub: z3.BoolRef) -> None:
        """What is known of `sub` (`cond` ∧ `c`, a branch of an Or in `cond`): what `cond` was
        proven to imply holds of it, and its premise is that and `c`'s fixed part (both
        implied by `sub`); `cond`'s model when that satisfies `c`; unsatisfiable when
        `cond`'s premise is. A branch is not asked whole: `cond` is the path's condition, and
        with its reads at computed offsets each question about it may cost 10-100 ms in z3."""
        if sub.get_id() in self.known:
            return
        parent = self._known(cond)
        mine = _fixed_part(c)
        reads = frozenset().union(*(_offsets(f) for f in mine))
        near = [f for f in parent.premise if _offsets(f) & reads]  # what may bear on the branch
        premise = _unique([*parent.facts, *near, *mine])
        known = Known(sub, premise, branch=True, facts=list(parent.facts), via=(parent, c))
        self.known[sub.get_id()] = known
        if parent.model is not None and z3.is_true(parent.model.eval(c, model_completion=True)):
            known.model = parent.model
        if parent.answer == z3.unsat:
            known.answer = z3.unsat

    def _implied(self, cond: z3.BoolRef, claim: z3.BoolRef) -> bool:
        if not self._may_constrain(cond, claim) or not self._question():
            return False
        known = self._known(cond)
        if known.model is not None and z3.is_false(known.model.eval(claim, model_completion=True)):
            return False  # a packet of `cond` where the claim is false
        model = self._premise_model(known)
        if known.answer == z3.unsat:
            return self._proven(known, claim)  # `cond` is unsatisfiable: it implies anything
        if model is None or not z3.is_false(model.eval(claim, model_completion=True)):
            if known.answer == z3.sat and _held(known.premise, claim):  # no model falsifies it either
                return self._proven(known, claim)
            if self._at_hand(known, claim) is None:
                if self._check([*known.premise, _negation(claim)])[0] == z3.unsat:
                    return self._proven(known, claim)
        if known.whole or (known.branch and _offsets(claim) is not None):
            return False  # the premise is `cond`; a branch's layout claims come from its premise
        if self._refuted(known, claim):
            return False  # a witness of `cond` where the claim is false: z3 would prove nothing
        return self._check([cond, _negation(claim)], keep=False)[0] == z3.unsat and self._proven(known, claim)

    def _refuted(self, known: Known, claim: z3.BoolRef) -> bool:
        """Whether a witness of the rendering is a model of `known.cond` (and the
        environment) where `claim` is false: then z3 need not be asked whether `cond` implies
        it. The text does not depend on which witness the path has, or on having one:

        * a witness only refutes, evaluated (exact): where it refutes, z3 would answer sat or
          unknown (a false claim has no proof), and `_implied` says False on either;
        * nothing else of it is used: it is no model at hand (`models`), gives no candidate
          value, answers no premise; it is asked last, after the premise and the question
          on it (`_implied`), so those, their answers and their models are the same with or
          without it;
        * what it spares is the whole-condition question, whose model is not kept either
          way; every z3 answer is a function of the question (`_check`: a context per
          question), not of the questions asked before it.

        So every question gets the same answer and the next question is the same, to the
        end of the rendering (tests/test_fields_witness.py checks texts on real objects)."""
        if self.witness is None:
            return False
        return any(w.falsifies(claim) for w in self._witnessed(known))

    def _witnessed(self, known: Known) -> list[Witness]:
        """The witnesses that are models of `known.cond`: a branch's, those of the condition
        it is a branch of that satisfy its literal (evaluated: the literal alone, not the
        whole condition again); the rendered condition's, all (`witnesses` kept only those)."""
        if self.witnesses is None:  # when first needed: most renderings ask z3 nothing whole
            root = self._known(self.rendered)
            self.witnesses = root.witnessed = witnesses(self.witness, [*self.env, root.cond])
        if known.witnessed is None:
            if known.via is None:
                known.witnessed = [w for w in self.witnesses if w.satisfies(known.cond)]
            else:
                parent, c = known.via
                known.witnessed = [w for w in self._witnessed(parent) if w.satisfies(c)]
        return known.witnessed

    @staticmethod
    def _proven(known: Known, claim: z3.BoolRef) -> bool:
        known.facts.append(claim)
        return True

    def _may_constrain(self, cond: z3.BoolRef, claim: z3.BoolRef) -> bool:
        """False when `cond` reads none of the packet bytes `claim` is about (both at
        constant offsets): then the environment alone would have to imply the claim, and
        it says nothing of packet bytes. Saves a z3 query per header the path never looks at."""
        mine, theirs = _offsets(claim), _offsets(cond)
        return mine is None or theirs is None or not mine or bool(mine & theirs)

    def _value(self, cond: z3.BoolRef, term: z3.BitVecRef, choices) -> int | None:
        """The one value among `choices` that `cond` implies for `term`: a candidate from a
        model of `cond` (any model: an implied value is every model's), then whether it is
        implied."""
        if not self._may_constrain(cond, _equal(term, 0)):
            return None
        model = self._satisfiable(cond)
        if model is None:
            return None
        v = model.eval(term, model_completion=True).as_long()
        if v not in choices:
            self._question()  # counted as the question another model would have led to
            return None
        return v if self._implied(cond, _equal(term, v)) else None

    def _ethertype(self, cond: z3.BoolRef, at: int):
        """The ethertype at `at` the path implies: a number, "vlan" for either VLAN TPID, or None."""
        term = _be(at, 2)
        if self._implied(cond, _claim(("vlan", at), lambda: z3.Or([term == t for t in VLAN_TPIDS]))):
            return "vlan"
        return self._value(cond, term, [t for t in ETHERTYPES if t not in VLAN_TPIDS])

    def _l4(self, cond: z3.BoolRef, proto: z3.BitVecRef):
        """The L4 protocol the path implies: a number, "ports" for TCP-or-UDP, or None."""
        value = self._value(cond, proto, [k for k in L4 if isinstance(k, int)])
        if value is None and self._implied(
            cond, _claim(("ports", proto.get_id()), lambda: z3.Or(proto == 6, proto == 17))
        ):
            return "ports"
        return value

    def layout(self, cond: z3.BoolRef, parent: Layout | None = None) -> Layout:
        """Where the headers of packets satisfying `cond` are (`parent` when that cannot be
        worked out: too many layouts asked for, or `cond` unsatisfiable)."""
        self.asked += 1
        if self.layouts >= MAX_LAYOUTS:
            return parent or self.last
        self.layouts += 1
        if self._spent():
            return parent or self.last
        if self._satisfiable(cond) is None:
            return parent or Layout()
        lay = Layout()
        l3 = 14
        ethertype = self._ethertype(cond, 12)
        for tag in ("vlan", "vlan2"):
            if ethertype != "vlan":
                break
            lay.bases[tag] = l3  # its TPID is the ethertype before it
            l3 += 4
            ethertype = self._ethertype(cond, l3 - 2)
        if ethertype == 0x0800:
            lay.bases["ipv4"] = l3
            proto = self._l4(cond, _byte(l3 + 9))
            if proto is not None:
                ihl = z3.ZeroExt(56, _byte(l3) & 0x0F) * 4
                fixed = self._implied(cond, _claim(("ihl5", l3), lambda: _byte(l3) & 0x0F == 5))
                lay.bases[L4[proto]] = l3 + 20 if fixed else z3.simplify(z3.BitVecVal(l3, 64) + ihl)
                if not fixed:
                    lay.fixed_l4 = (L4[proto], l3 + 20)
        elif ethertype == 0x86DD:
            lay.bases["ipv6"] = l3
            proto = self._l4(cond, _byte(l3 + 6))
            if proto is not None:
                lay.bases[L4[proto]] = l3 + 40
        self.last = lay
        return lay

    # --- reads ---------------------------------------------------------------------------

    def _place(self, lay: Layout, index: z3.BitVecRef, cond: z3.BoolRef) -> tuple[str, int]:
        """(header, offset) of a packet byte index (absolute if it is a constant)."""
        if z3.is_bv_value(index):
            return ("pkt", index.as_long())
        self.asked += 1  # what follows depends on the condition (`_memo`)
        for header, base in lay.bases.items():
            if isinstance(base, int):
                continue
            delta = z3.simplify(index - base)
            if z3.is_bv_value(delta) and delta.as_long() < 64:
                return (header, delta.as_long())
            if self._spent():
                break
            model = self._satisfiable(cond)
            if model is not None:
                k = model.eval(index - base, model_completion=True).as_long()
                if k >= 64:
                    self._question()  # counted as the question another model would have led to
                elif self._implied(cond, index - base == k):
                    return (header, k)
        return ("?", -1)

    def read(self, t: z3.ExprRef, lay: Layout, cond: z3.BoolRef) -> Read | None:
        """The packet read `t` is (its numeric value), or None."""
        kind = t.decl().kind() if z3.is_app(t) else None  # one lookup for the tests below
        if kind == z3.Z3_OP_SELECT and t.arg(0).eq(PACKET):
            place = self._place(lay, t.arg(1), cond)
            return None if place[0] == "?" else Read((place,), 7, 0)
        if kind == z3.Z3_OP_ZERO_EXT:
            return self.read(t.arg(0), lay, cond)
        if kind == z3.Z3_OP_EXTRACT:
            inner = self.read(t.arg(0), lay, cond)
            hi, lo = t.params()
            if inner is None or inner.lo + hi > inner.hi:
                return None
            return Read(inner.offs, inner.lo + hi, inner.lo + lo)
        if kind == z3.Z3_OP_CONCAT:
            offs: list = []
            for i, part in enumerate(t.children()):
                if z3.is_bv_value(part) and part.as_long() == 0 and i == 0:
                    continue  # leading zeros: the same number
                r = self.read(part, lay, cond)
                if r is None or r.lo % 8 or (r.hi + 1) % 8:
                    return None
                width = 8 * len(r.offs)
                first = (width - 1 - r.hi) // 8
                offs += r.offs[first : first + (r.hi - r.lo + 1) // 8]
            return Read(tuple(offs), 8 * len(offs) - 1, 0) if offs else None
        return None

    def absolute(self, lay: Layout, place: tuple[str, int]) -> tuple[str, int]:
        """(header, offset) for an absolute byte: the innermost header with a constant base
        that holds a field at it."""
        header, off = place
        if header != "pkt":
            return place
        best = ("pkt", off)
        for h, base in lay.bases.items():
            if isinstance(base, int) and base <= off:
                if any(o <= off - base < o + n for o, n in HEADERS[h].values()):
                    if best[0] == "pkt" or base >= lay.bases.get(best[0], -1):
                        best = (h, off - base)
        if lay.fixed_l4 and off >= lay.fixed_l4[1]:
            h, base = lay.fixed_l4
            if any(o <= off - base < o + n for o, n in HEADERS[h].values()):
                self.fixed_used = True
                return (h + "@", off - base)
        return best

    def describe(self, r: Read, lay: Layout) -> tuple[str, bool, int, int] | None:
        """(name, network order, mask, shift) of a read, mask over the named value; None if
        the bytes are not consecutive in one header."""
        places = [self.absolute(lay, p) for p in r.offs]
        headers = {h for h, _ in places}
        offs = [o for _, o in places]
        if len(headers) != 1:
            return None
        header = headers.pop()
        n = len(offs)
        if offs == list(range(offs[0], offs[0] + n)):
            network, start = True, offs[0]
        elif offs == list(range(offs[0], offs[0] - n, -1)):
            network, start = n == 1, offs[-1]
            if r.lo != 0 or r.hi != 8 * n - 1:
                return None  # part of a little-endian load: leave it to the fallback
        else:
            return None
        width = r.hi - r.lo + 1
        mask = ((1 << width) - 1) << r.lo
        if header == "pkt":
            return f"pkt[{start}:{start + n}]", network, mask, r.lo
        if header.endswith("@"):
            header = header[:-1]
            name = lay.name(header, start, n)
            if name is None:
                return None
            return name, network, mask, r.lo
        name = lay.name(header, start, n)
        for fname, (o, size) in HEADERS[header].items() if name is None else ():
            if o <= start and start + n <= o + size:  # part of a field
                return f"{header}.{fname}[{start - o}:{start - o + n}]", network, mask, r.lo
        if name is None:
            base = lay.bases[header]
            where = f"{header}+{start}" if not isinstance(base, int) else None
            absolute = base + start if isinstance(base, int) else None
            return (f"pkt[{absolute}:{absolute + n}]" if where is None else f"{where}:{n}"), network, mask, r.lo
        return name, network, mask, r.lo

    # --- rendering ---------------------------------------------------------------------------

    def render(self, cond: z3.BoolRef, lay: Layout | None = None, witness: z3.ModelRef | None = None) -> str:
        """`cond` in header fields, one line (`NOT_DECODED` past the deadline). `witness`
        (a model of the path, Path.witness) only saves z3 queries: the text is the same
        without it or with any other model (`_refuted`)."""
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.fixed_used = False
            return NOT_DECODED
        with self._rendering():
            cond = self.session.canonical(cond)
            self.witness, self.rendered = witness, cond
            self.fixed_used, self.emitted = False, 0
            self.longs.clear()
            lay = lay or self.layout(cond)
            text = self._bool(cond, lay, cond)
        text = " ".join(text.split())  # one line: z3's own printing breaks long terms
        several = len(self.longs) > 1  # numbered only when there are several
        text = _LONG_MARK.sub(lambda m: m[2] + (m[1] if several else ""), text)
        if len(text) > MAX_TEXT:
            text = text[: MAX_TEXT - 1] + "…"
        return text + (FIXED_NOTE if self.fixed_used else "")

    def _bool(self, t: z3.BoolRef, lay: Layout, cond) -> str:
        if self.emitted > MAX_TEXT:
            return "…"
        return self._memo("b", t, lay, cond, self._bool_counted)

    def _bool_counted(self, t: z3.BoolRef, lay: Layout, cond) -> str:
        text = self._bool_text(t, lay, cond)
        if not (z3.is_and(t) or z3.is_or(t) or z3.is_not(t)):
            self.emitted += len(text)
        return text

    def _memo(self, kind: str, t, lay: Layout, cond, make) -> str:
        """`make(t, lay, cond)`, worked out once per rendering for each sub-term, layout and
        condition (a sub-term is printed where it occurs: an offset's if-then-else chain
        under every read at it, a disjunct's literals in each branch). The text is what the
        first occurrence gave; a later one adds the characters it counted (`emitted`), and
        is worked out again where those would pass MAX_TEXT (the "…" falls where it falls).
        Only texts worked out whole are kept. Terms are the rendering's (`_Session`), kept
        alive by `texts`, so their ids stand for them.

        A text worked out without asking anything of the condition (no question, layout,
        read at a computed offset nor long computation: `asked` unchanged) is a function of
        the sub-term and the layout's constant bases alone (where each header starts, what
        names fixed-offset L4 reads): kept across renderings too (`_PURE`), for the same
        sub-term in other paths' conditions (the VLAN and ethertype tests every path of a
        parser repeats). Taking it asks nothing either, so the questions and layouts the
        rendering counts are the ones it counted without it: the same text."""
        tid = t.get_id()
        key = (kind, tid, id(lay), cond.get_id())
        hit = self.texts.get(key)
        if hit is not None and self.emitted + hit[1] <= MAX_TEXT:
            self.emitted += hit[1]
            return hit[0]
        pure_key = (kind, tid, lay.constant())
        pure = _PURE.get(pure_key)
        if pure is not None and pure[3].ctx == t.ctx and self.emitted + pure[1] <= MAX_TEXT:
            self.emitted += pure[1]
            self.fixed_used = self.fixed_used or pure[2]
            self.texts[key] = (pure[0], pure[1], t, lay, cond)
            return pure[0]
        before, asked, fixed = self.emitted, self.asked, self.fixed_used
        self.fixed_used = False
        try:
            text = make(t, lay, cond)
        finally:
            used, self.fixed_used = self.fixed_used, fixed or self.fixed_used
        if self.emitted <= MAX_TEXT and text != "…":
            self.texts[key] = (text, self.emitted - before, t, lay, cond)
            if self.asked == asked:
                if len(_PURE) > 200_000:
                    _PURE.clear()
                _PURE[pure_key] = (text, self.emitted - before, used, t)
        return text

    def _bool_text(self, t: z3.BoolRef, lay: Layout, cond) -> str:
        kind = t.decl().kind() if z3.is_app(t) else None  # one lookup for the tests below
        if kind == z3.Z3_OP_TRUE:
            return "true"
        if kind == z3.Z3_OP_FALSE:
            return "false"
        if kind == z3.Z3_OP_AND:
            parts = self._joined(list(t.children()), lay, cond)
            return " ∧ ".join(parts)
        if kind == z3.Z3_OP_OR:
            parts, size = [], 0
            for c in t.children():  # a branch may say more about the headers
                if size > MAX_TEXT:
                    parts.append("…")
                    break
                sub = z3.And(cond, c)
                self._branch(cond, c, sub)
                here = _offsets(c)
                same = here is not None and not here & LAYOUT_BYTES  # c cannot move a header
                parts.append(self._bool(c, lay if same else self.layout(sub, lay), sub))
                size += len(parts[-1])
            return "(" + " ∨ ".join(parts) + ")"
        if kind == z3.Z3_OP_NOT:
            inner = t.arg(0)
            if z3.is_eq(inner) and inner.arg(0).sort().kind() == z3.Z3_BV_SORT:
                return self._compare("!=", inner.arg(0), inner.arg(1), lay, cond)
            if z3.is_app_of(inner, z3.Z3_OP_ULEQ):
                return self._compare(">", inner.arg(0), inner.arg(1), lay, cond)
            if z3.is_app_of(inner, z3.Z3_OP_SLEQ):
                return self._compare(">s", inner.arg(0), inner.arg(1), lay, cond)
            if z3.is_and(inner):
                parts = self._joined(list(inner.children()), lay, cond)
                if len(parts) == 1 and parts[0].count(" == ") == 1 and " ∧ " not in parts[0]:
                    return parts[0].replace(" == ", " != ")  # one field, byte by byte
            return _negated(self._bool(inner, lay, cond))
        if kind == z3.Z3_OP_EQ and t.arg(0).sort().kind() == z3.Z3_BV_SORT:
            return self._compare("==", t.arg(0), t.arg(1), lay, cond)
        if kind == z3.Z3_OP_DISTINCT and t.num_args() == 2 and t.arg(0).sort().kind() == z3.Z3_BV_SORT:
            return self._compare("!=", t.arg(0), t.arg(1), lay, cond)
        if kind in _ORDERS:
            return self._compare(_ORDERS[kind], t.arg(0), t.arg(1), lay, cond)
        if kind == z3.Z3_OP_UNINTERPRETED and t.num_args():
            name = t.decl().name()
            if name.startswith("map.") and name.endswith(".found"):
                return f"{name[4:-6]}[{self._key(t.arg(0), lay, cond)}] exists"
        if kind == z3.Z3_OP_ITE:
            return (
                f"({self._bool(t.arg(0), lay, cond)} ? {self._bool(t.arg(1), lay, cond)} : "
                f"{self._bool(t.arg(2), lay, cond)})"
            )
        return self._term(t, lay, cond)

    def _byte_eqs(self, atoms, lay, cond) -> tuple[list[tuple[int, str]], set[int]]:
        """Equalities on single bytes or bits of one byte among `atoms`, joined per field:
        ([(first atom index, text)], indices used). A whole field prints as
        `ipv4.saddr == 10.0.0.1`, a sub-field as `vlan.vid == 100`, consecutive whole bytes
        of a field as `ipv6.daddr[0:4] == 0x20010db8`, anything else as `field & mask == v`."""
        bytes_at: dict[tuple[str, int], list[tuple[int, int, int]]] = {}  # -> [(atom, mask, value)]
        for i, a in enumerate(atoms):
            if z3.is_eq(a) and a.arg(0).sort().kind() == z3.Z3_BV_SORT:
                x, c = (a.arg(0), a.arg(1)) if z3.is_bv_value(a.arg(1)) else (a.arg(1), a.arg(0))
                r = self.read(x, lay, cond) if z3.is_bv_value(c) else None
                if r is not None and len(r.offs) == 1:
                    mask = ((1 << (r.hi - r.lo + 1)) - 1) << r.lo
                    bytes_at.setdefault(self.absolute(lay, r.offs[0]), []).append((i, mask, c.as_long() << r.lo))
        out, used = [], set()
        for header, off in sorted(bytes_at, key=lambda k: bytes_at[k][0][0]):
            h = header.rstrip("@")
            if h not in HEADERS or any(i in used for i, _, _ in bytes_at[(header, off)]):
                continue
            for fname, (start, n) in HEADERS[h].items():
                if not start <= off < start + n:
                    continue
                present = [k for k in range(start, start + n) if (header, k) in bytes_at]
                mask = value = 0
                for k in present:
                    for _, m, v in bytes_at[(header, k)]:
                        shift = 8 * (start + n - 1 - k)
                        mask |= m << shift
                        value |= v << shift
                whole = [k for k in present if (1 << 8) - 1 == _byte_mask(bytes_at[(header, k)])]
                name = f"{h}.{fname}"
                lo = hi = off
                while lo - 1 in whole:
                    lo -= 1
                while hi + 1 in whole:
                    hi += 1
                sub = self._subfield(name, mask, 0)
                if mask == (1 << (8 * n)) - 1:
                    text, keys = f"{name} == {fmt(name, value)}", present
                elif sub is not None:
                    text, keys = f"{sub[0]} == {fmt(sub[0], (value & sub[1]) >> sub[2])}", present
                elif off in whole and hi > lo and len(whole) == len(present):
                    v = int.from_bytes(bytes(_byte_value(bytes_at[(header, k)]) for k in range(lo, hi + 1)), "big")
                    text, keys = f"{name}[{lo - start}:{hi + 1 - start}] == {v:#x}", list(range(lo, hi + 1))
                elif name == "tcp.flags":
                    text, keys = f"{name} & {tcp_flags(mask)} == {tcp_flags(value) if value else 0}", present
                elif len(present) > 1 or n == 1:
                    text, keys = f"{name} & {mask:#x} == {value:#x}", present
                else:
                    break  # one byte of a wider field: printed on its own
                if header.endswith("@"):
                    self.fixed_used = True
                idx = [i for k in keys for i, _, _ in bytes_at[(header, k)]]
                out.append((min(idx), text))
                used |= set(idx)
                break
        return out, used

    def _joined(self, atoms, lay, cond) -> list[str]:
        joined, used = self._byte_eqs(atoms, lay, cond)
        parts = [(i, text) for i, text in joined]
        size = sum(len(text) for _, text in parts)
        for i, a in enumerate(atoms):
            if i in used:
                continue
            if size > MAX_TEXT:
                parts.append((i, "…"))
                break
            parts.append((i, self._bool(a, lay, cond)))
            size += len(parts[-1][1])
        return [text for _, text in sorted(parts, key=lambda p: p[0])]

    def _compare(self, op: str, a, b, lay, cond) -> str:
        flip = {"==": "==", "!=": "!=", "<=": ">=", ">=": "<=", "<": ">", ">": "<", "<=s": ">=s", ">s": "<s"}
        if z3.is_bv_value(a) and not z3.is_bv_value(b):
            a, b, op = b, a, flip[op]
        whole = a  # what the fallback prints (`a` may lose its mask below)
        if z3.is_bv_value(b):
            value = b.as_long()
            flag = _flag(a) if op in ("==", "!=") and value in (0, 1) else None
            if flag is not None:  # `(c1 ? 1 : 0) | (c2 ? 1 : 0)) != 1` is `¬(c1 ∨ c2)`
                text = self._flag_text(flag, lay, cond)
                return text if (op == "==") == (value == 1) else _negated(text)
            masked = None
            if z3.is_app_of(a, z3.Z3_OP_BAND) and a.num_args() == 2 and z3.is_bv_value(a.arg(1)):
                masked, a = a.arg(1).as_long(), a.arg(0)
            r = self.read(a, lay, cond)
            d = self.describe(r, lay) if r is not None else None
            if d is not None:
                name, network, mask, shift = d
                if not network:
                    if op not in ("==", "!="):
                        return f"le({name}) {op} {value}"
                    n = len(r.offs)
                    value = int.from_bytes(value.to_bytes(n, "little"), "big")
                    if masked is not None:
                        masked = int.from_bytes(masked.to_bytes(n, "little"), "big")
                full = mask >> shift
                if masked is not None:
                    mask &= masked << shift
                    value <<= shift
                    shift = 0
                    full = None
                named = self._subfield(name, mask, shift if full is not None else 0)
                if named is not None:
                    sub, sub_mask, sub_shift = named
                    v = value << shift if full is not None else value
                    return f"{sub} {op} {fmt(sub, (v & sub_mask) >> sub_shift)}"
                if full is not None and shift == 0 and mask == (1 << (8 * len(r.offs))) - 1:
                    return f"{name} {op} {fmt(name, value)}"
                if name == "tcp.flags":
                    return f"{name} & {tcp_flags(mask)} {op} {tcp_flags(value) if value else 0}"
                return f"{name} & {mask:#x} {op} {value << shift if full is not None else value:#x}"
            if a.eq(PACKET_LEN):
                return f"len {op.rstrip('s')} {value}"  # both non-negative: signed = unsigned
            if op.endswith("s") and value >> (b.size() - 1):  # a negative constant, as one
                return f"{self._term(whole, lay, cond)} {op} -{(1 << b.size()) - value}"
        return f"{self._term(whole, lay, cond)} {op} {self._term(b, lay, cond)}"

    def _flag_text(self, flag: tuple, lay, cond) -> str:
        """A `_flag` term as the condition it is 1 under: `eth.proto == 802.1q ∨ ...`."""
        kind, parts = flag
        if kind == "is":
            return self._bool(parts, lay, cond)
        if kind == "not":  # as `¬c` prints (`eth.proto != 802.1q` for one field)
            return self._bool(z3.Not(parts), lay, cond)
        texts = [self._flag_text(f, lay, cond) for f in parts]
        return "(" + f" {FLAG_OPS[kind]} ".join(texts) + ")"

    def _subfield(self, name: str, mask: int, shift: int):
        """(name, mask, shift) of the sub-byte field `mask` selects of field `name`."""
        header, _, fname = name.partition(".")
        for sub, m, s in SUBFIELDS.get((header, fname), []):
            if m == mask:
                return (f"{header}.{sub}" if sub != fname else name), m, s
        return None

    def _key(self, key, lay, cond) -> str:
        """A map key: the field it is (`ipv4.saddr`, whatever the byte order), else its parts
        in memory order (`_key_parts`), else the term."""
        r = self.read(key, lay, cond)
        d = self.describe(r, lay) if r is not None else None
        if d is not None:
            return d[0]
        parts = self._key_parts(key, lay, cond)
        return parts if parts is not None else self._term(key, lay, cond)

    def _key_parts(self, key, lay, cond) -> str | None:
        """A key made of packet bytes and constants, as its parts in memory order: the key's
        value is the little-endian load of its bytes (the lowest byte first in memory), so an
        LPM key {prefixlen 32, address} prints `{32, ipv4.saddr}`. A run of constant bytes
        prints as the little-endian number it holds; a run of packet bytes at consecutive
        places of one header as its field; a run at an offset no header layout of the path
        fixes as `N bytes at a packet-dependent offset (from eth.proto, vlan.proto, …)` with
        the fields its offset is computed from (their first KEY_RAW characters), not the
        offset's whole if-then-else chain. None when the key is not
        made of whole bytes (`_term` prints it). Zero bytes at the end of memory (the high
        end: a zero-extended value) are left out, as `read` does."""
        if not (z3.is_app(key) and key.decl().kind() == z3.Z3_OP_CONCAT):
            return None
        kids = list(key.children())
        if z3.is_bv_value(kids[0]) and kids[0].as_long() == 0 and len(kids) > 1:
            kids = kids[1:]
        units: list[tuple[str, object]] = []  # memory order: ("const", byte) | ("at", place) | ("dyn", index)
        for kid in reversed(kids):
            if kid.size() % 8:
                return None
            if z3.is_bv_value(kid):
                units += [("const", b) for b in kid.as_long().to_bytes(kid.size() // 8, "little")]
                continue
            if z3.is_select(kid) and kid.arg(0).eq(PACKET) and not z3.is_bv_value(kid.arg(1)):
                place = self._place(lay, kid.arg(1), cond)
                units.append(("dyn", kid.arg(1)) if place[0] == "?" else ("at", place))
                continue
            r = self.read(kid, lay, cond)
            if r is None or r.lo % 8 or (r.hi + 1) % 8 or r.hi + 1 != kid.size():
                return None
            units += [("at", o) for o in reversed(r.offs)]
        runs: list[list] = []
        for unit in units:
            last = runs[-1] if runs else None
            if last is not None and last[0][0] == unit[0] and self._follows(last[-1], unit, lay):
                last.append(unit)
            else:
                runs.append([unit])
        texts = []
        for run in runs:
            kind = run[0][0]
            if kind == "const":
                v = int.from_bytes(bytes(b for _, b in run), "little")
                texts.append(str(v) if v < 256 else hex(v))
            elif kind == "at":
                offs = tuple(o for _, o in run)
                d = self.describe(Read(offs, 8 * len(offs) - 1, 0), lay)
                if d is None:
                    return None
                texts.append(d[0])
            else:
                texts.append(
                    f"{len(run)} bytes at a packet-dependent offset (from {self._brief(run[0][1], lay, cond)})"
                )
        return texts[0] if len(texts) == 1 else "{" + ", ".join(texts) + "}"

    def _follows(self, a: tuple, b: tuple, lay: Layout) -> bool:
        """Whether key unit `b` is the packet byte after `a` (both of one kind), or both constants."""
        if a[0] == "const":
            return True
        if a[0] == "at":
            (ha, oa), (hb, ob) = self.absolute(lay, a[1]), self.absolute(lay, b[1])
            return ha == hb and ob == oa + 1
        delta = z3.simplify(b[1] - a[1])
        return z3.is_bv_value(delta) and delta.as_long() == 1

    def _brief(self, index, lay, cond) -> str:
        """What packet offset `index` is computed from (`_inputs`: header fields, the length,
        ...), at most KEY_RAW characters, not counted against MAX_TEXT (only they are
        printed): a reader learns which headers move the read, which the offset's
        if-then-else chain over them does not tell in a line."""
        emitted = self.emitted
        text = ", ".join(self._inputs(index, lay, cond)) or "-"
        self.emitted = emitted
        return text if len(text) <= KEY_RAW else text[: KEY_RAW - 1] + "…"

    def _term(self, t, lay, cond) -> str:
        if self.emitted > MAX_TEXT:
            return "…"
        return self._memo("t", t, lay, cond, self._term_text)

    def _term_text(self, t, lay, cond) -> str:
        if z3.is_bv_value(t):
            v = t.as_long()
            return str(v) if v < 256 else hex(v)
        if t.eq(PACKET_LEN):
            return "len"
        r = self.read(t, lay, cond)
        d = self.describe(r, lay) if r is not None else None
        if d is not None:
            name, network, mask, shift = d
            text = name if network else f"le({name})"
            full = (1 << (8 * len(r.offs))) - 1
            return text if mask == full else f"({text} & {mask:#x}) >> {shift}" if shift else f"({text} & {mask:#x})"
        if z3.is_const(t):
            name = t.decl().name()
            head, _, rest = name.partition(".")
            if head == "helper":
                return rest.rsplit(".", 1)[0] + "()"
            return name
        if _long(t) and not _peeled(t):
            return self._long_text(t, lay, cond)
        kind = t.decl().kind() if z3.is_app(t) else None  # one lookup for the tests below
        if kind == z3.Z3_OP_UNINTERPRETED:
            name = t.decl().name()
            if name.startswith("map.") and name.endswith(".val"):
                return f"{name[4:-4]}[{self._key(t.arg(0), lay, cond)}].byte[{self._term(t.arg(1), lay, cond)}]"
            if name.startswith("map.") and name.endswith(".found"):
                return f"{name[4:-6]}[{self._key(t.arg(0), lay, cond)}] exists"
        if kind == z3.Z3_OP_SELECT and t.arg(0).eq(PACKET):
            return f"pkt[{self._term(t.arg(1), lay, cond)}]"
        ops = {
            z3.Z3_OP_BADD: "+",
            z3.Z3_OP_BSUB: "-",
            z3.Z3_OP_BMUL: "*",
            z3.Z3_OP_BAND: "&",
            z3.Z3_OP_BOR: "|",
            z3.Z3_OP_BXOR: "^",
            z3.Z3_OP_BSHL: "<<",
            z3.Z3_OP_BLSHR: ">>",
            z3.Z3_OP_BASHR: ">>a",
            z3.Z3_OP_BUREM: "%",
            z3.Z3_OP_BUREM_I: "%",
            z3.Z3_OP_BUDIV: "/",
            z3.Z3_OP_BUDIV_I: "/",
        }
        if kind == z3.Z3_OP_BAND and t.num_args() == 2 and z3.is_bv_value(t.arg(1)):
            r = self.read(t.arg(0), lay, cond)
            d = self.describe(r, lay) if r is not None else None
            named = self._subfield(d[0], t.arg(1).as_long(), 0) if d is not None and d[1] else None
            if named is not None and named[2] == 0:
                return named[0]
        if kind in ops:
            return "(" + f" {ops[kind]} ".join(self._term(c, lay, cond) for c in t.children()) + ")"
        if kind == z3.Z3_OP_ZERO_EXT:
            return self._term(t.arg(0), lay, cond)
        if kind == z3.Z3_OP_BNOT:
            return f"~{self._term(t.arg(0), lay, cond)}"
        if kind == z3.Z3_OP_BNEG:
            return f"-{self._term(t.arg(0), lay, cond)}"
        if kind == z3.Z3_OP_EXTRACT:
            hi, lo = t.params()
            return f"{self._term(t.arg(0), lay, cond)}[{hi}:{lo}]"
        if kind == z3.Z3_OP_CONCAT:
            kids = list(t.children())
            while kids and z3.is_bv_value(kids[0]) and kids[0].as_long() == 0:
                kids = kids[1:]
            if len(kids) == 2 and z3.is_bv_value(kids[1]) and kids[1].as_long() == 0:
                return f"{self._term(kids[0], lay, cond)}*{1 << kids[1].size()}"
            if len(kids) == 1:
                return self._term(kids[0], lay, cond)
            return "concat(" + ", ".join(self._term(c, lay, cond) for c in t.children()) + ")"
        if kind == z3.Z3_OP_ITE:
            return (
                f"({self._bool(t.arg(0), lay, cond)} ? {self._term(t.arg(1), lay, cond)} : "
                f"{self._term(t.arg(2), lay, cond)})"
            )
        if z3.is_bool(t):
            return self._bool(t, lay, cond) if not z3.is_app(t) or t.num_args() == 0 else t.sexpr()
        return t.sexpr()

    def key_fields(
        self, key: z3.BitVecRef, cond: z3.BoolRef, lay: Layout | None = None, witness: z3.ModelRef | None = None
    ) -> str:
        """A map key in header fields (`ipv4.saddr`), for reasons: like `render`, in a z3
        context of its own, on `key` and `cond` simplified there; `witness` (a model of the
        path) only spares z3 queries, as render's does (`_refuted`)."""
        with self._rendering():
            cond = self.session.canonical(cond)
            self.witness, self.rendered = witness, cond
            return self._key(self.session.canonical(key), lay or self.layout(cond), cond)

    @contextmanager
    def _rendering(self):
        """One rendering (`render`, `key_fields`): its own z3 context (`_Session`), its
        question and layout counts from zero, and nothing of another rendering (what was
        known of its conditions, the models z3 gave: cleared before and after), so each
        starts from the same state."""
        self._forget()
        self.session = _Session()
        self.queries, self.layouts = 0, 0
        try:
            yield
        finally:
            self.session = None
            self._forget()

    def _forget(self) -> None:
        self.witness = self.witnesses = self.rendered = None
        self.texts.clear()
        self.known.clear()
        self.models.clear()
        self.holds.clear()

    # --- long computations (hashes, checksums) -----------------------------------------------

    def _long_text(self, t: z3.BitVecRef, lay: Layout, cond) -> str:
        """`hash(fields)` (or `f(fields)`) for a long computation: its inputs named, its
        operations not. Marked with its number in this condition (`render` keeps the number
        only when there are several distinct ones)."""
        self.asked += 1  # numbered per condition (`_memo`)
        number = self.longs.setdefault(t.get_id(), len(self.longs) + 1)
        label = "hash" if _shape(t)[0] >= MIX_OPS else "f"
        return f"\x01{number}\x02{label}({', '.join(self._inputs(t, lay, cond)) or '-'})"

    def _inputs(self, t: z3.ExprRef, lay: Layout, cond) -> list[str]:
        """What `t` reads, named: header fields in packet order (bytes no field holds as
        `pkt[a:b]`), then the length, ctx fields, map values, helper results and unknowns in
        the order met. A summary stands for what its definition reads (`summaries`), or
        for itself without it."""
        offsets: set[int] = set()
        named: list[str] = []
        for kind, x in _input_nodes(t, self._definitions(t)):
            if kind == "at":
                offsets.add(x)
            elif kind == "read":
                header, k = self._place(lay, x, cond)
                named.append("pkt[…]" if header == "?" else self._field_at(lay, (header, k)))
            elif kind == "len":
                named.append("len")
            elif kind == "const":
                if x.decl().name() not in self.summaries:  # a summary: its definition is walked
                    named.append(self._term(x, lay, cond))
            elif x.decl().name().startswith("map."):
                name = x.decl().name()
                named.append(f"{name.split('.')[1]}[{self._key(x.arg(0), lay, cond)}]")
        fields: list[str] = []
        run: list[int] = []  # consecutive bytes no field holds
        for off in sorted(offsets):
            name = self._field_at(lay, ("pkt", off))
            if name.startswith("pkt["):
                if run and run[-1] != off - 1:
                    fields.append(f"pkt[{run[0]}:{run[-1] + 1}]")
                    run = []
                run.append(off)
            elif name not in fields:
                fields.append(name)
        if run:
            fields.append(f"pkt[{run[0]}:{run[-1] + 1}]")
        return _unique_text(fields + named)

    def _definitions(self, t: z3.ExprRef) -> list[z3.ExprRef]:
        """The definitions of the summaries `t` stands on, through each other, that read
        anything but summaries (a chain of hundreds of summaries is followed by z3's C API
        in `symbols`; only the few definitions that read inputs are walked in Python)."""
        if not self.summaries:  # nothing to follow (no walk of `t`: an offset chain is long)
            return []
        out, done = [], set()
        pending = [n for n in symbols(t, self.symbol_cache) if n in self.summaries]
        while pending:
            name = pending.pop()
            if name in done:
                continue
            done.add(name)
            value = self.summaries[name][0]
            names = symbols(value, self.symbol_cache)
            pending.extend(n for n in names if n in self.summaries)
            if any(n not in self.summaries for n in names):
                out.append(value)
        return out

    def _field_at(self, lay: Layout, place: tuple[str, int]) -> str:
        """The field holding packet byte `place` ((header, offset), or ("pkt", absolute))."""
        header, off = self.absolute(lay, place)
        h = header.rstrip("@")
        for fname, (start, n) in HEADERS.get(h, {}).items():
            if start <= off < start + n:
                if header.endswith("@"):
                    self.fixed_used = True
                return f"{h}.{fname}"
        return f"pkt[{off}]" if header == "pkt" else f"{h}+{off}"


#: How a bitwise operation of `_flag` terms reads as one of the conditions they stand for.
FLAG_OPS = {z3.Z3_OP_BOR: "∨", z3.Z3_OP_BAND: "∧", z3.Z3_OP_BXOR: "⊕"}


def _flag(t: z3.ExprRef) -> tuple | None:
    """`t` as a 0/1 value of conditions, when it is one: `If(c, 1, 0)` -> ("is", c),
    `If(c, 0, 1)` -> ("not", c), a bitwise or/and/xor of such terms -> (its z3 op, [parts]).
    A compiler turns C's `a || b` over comparisons into `(a ? 1 : 0) | (b ? 1 : 0)` tested
    against 1 or 0; read as Booleans it prints as what the source says (`_compare`). None
    for any other term."""
    if not z3.is_app(t):
        return None
    kind = t.decl().kind()
    if kind == z3.Z3_OP_ITE and z3.is_bv_value(t.arg(1)) and z3.is_bv_value(t.arg(2)):
        ends = (t.arg(1).as_long(), t.arg(2).as_long())
        return ("is", t.arg(0)) if ends == (1, 0) else ("not", t.arg(0)) if ends == (0, 1) else None
    if kind in FLAG_OPS:
        parts = [_flag(c) for c in t.children()]
        return None if any(p is None for p in parts) else (kind, parts)
    return None


def _negated(text: str) -> str:
    """`¬text`, parenthesised unless it is one word or already in parentheses."""
    return "¬" + (text if text.startswith("(") or " " not in text else f"({text})")


def fmt(name: str, value: int) -> str:
    """A field value as an engineer writes it: addresses, protocol names, numbers."""
    short = name.rsplit(".", 1)[-1]
    if name in ("ipv4.saddr", "ipv4.daddr"):
        return str(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if name in ("ipv6.saddr", "ipv6.daddr"):
        return str(ipaddress.IPv6Address(value & (1 << 128) - 1))
    if name in ("eth.src", "eth.dst"):
        return ":".join(f"{b:02x}" for b in (value & (1 << 48) - 1).to_bytes(6, "big"))
    if short == "proto" and name.startswith(("eth", "vlan")) and value in ETHERTYPES:
        return ETHERTYPES[value]
    if name in ("ipv4.proto", "ipv6.nexthdr") and value in IP_PROTOS:
        return IP_PROTOS[value]
    if (
        short
        in (
            "sport",
            "dport",
            "len",
            "tot_len",
            "payload_len",
            "ttl",
            "hop_limit",
            "ihl",
            "version",
            "type",
            "code",
            "vid",
            "pcp",
            "doff",
        )
        or value < 10
    ):
        return str(value)
    return hex(value)


def _byte_mask(entries) -> int:
    m = 0
    for _, mask, _ in entries:
        m |= mask
    return m


def _byte_value(entries) -> int:
    v = 0
    for _, _, value in entries:
        v |= value
    return v


def tcp_flags(bits: int) -> str:
    """TCP flag bits by name: `syn|ack`."""
    names = SUBFIELDS[("tcp", "flags")]
    return "|".join(n for n, m, _ in names if bits & m) or "0"


def _byte(o: int) -> z3.BitVecRef:
    """Packet byte `o` (made once per offset)."""
    byte = _BYTES.get(o)
    if byte is None:
        byte = _BYTES[o] = PACKET[z3.BitVecVal(o, 64)]
    return byte


_BYTES: dict[int, z3.BitVecRef] = {}


_AST_KIND, _AST_ID, _NUM_ARGS, _ARG = Z3_C.ast_kind, Z3_C.ast_id, Z3_C.num_args, Z3_C.arg
_DECL, _DECL_KIND, _NUMERAL = Z3_C.decl, Z3_C.decl_kind, Z3_C.numeral
_SORT, _SORT_KIND = Z3_C.sort, Z3_C.sort_kind

#: Terms `_offsets` walked: AST id -> the term, kept alive so that neither its id nor the ids
#: of the nodes under it (`_NODE_OFFSETS`) are given to another term.
_OFFSET_ROOTS: dict[int, z3.ExprRef] = {}
#: AST id of every node under a term in `_OFFSET_ROOTS` -> its constant offsets (None: it reads
#: one at a computed index). Terms share nodes (a branch is `cond ∧ c`): each is walked once.
_NODE_OFFSETS: dict[int, frozenset[int] | None] = {}
_NO_OFFSETS: frozenset[int] = frozenset()


def _input_nodes(t: z3.ExprRef, definitions: list[z3.ExprRef]) -> list[tuple[str, object]]:
    """`_walk_inputs`, once per term and definitions (a function of them: the same offset
    chain is under the key of every path that reads it; xdpfilt_alw_all: 30 walks of 7 terms)."""
    key = (t.get_id(), *(d.get_id() for d in definitions))
    hit = _INPUT_NODES.get(key)
    if hit is None or hit[0][0].ctx is not t.ctx:  # ids are per context
        if len(_INPUT_NODES) > 20_000:
            _INPUT_NODES.clear()
        hit = _INPUT_NODES[key] = ((t, *definitions), list(_walk_inputs(t, definitions)))
    return hit[1]


#: `_input_nodes`' answers: (AST ids of the term and its definitions) -> (those terms, kept
#: alive so that the ids stay theirs; what the walk yields).
_INPUT_NODES: dict[tuple[int, ...], tuple[tuple[z3.ExprRef, ...], list[tuple[str, object]]]] = {}


def _walk_inputs(t: z3.ExprRef, definitions: list[z3.ExprRef]):
    """The inputs `Decoder._inputs` names, in the order its walk meets them: a depth-first,
    left-to-right walk of `definitions` (the last first) and then `t`, each shared node once,
    that stops at what it yields: ("at", offset) for a packet read at a constant offset,
    ("read", index) for one at a computed index, ("len", None) for the length, ("const", c)
    for any other constant but a bit-vector numeral, and ("map", m) for an application of
    an uninterpreted function named `map.*`; it walks into every other application (not
    into quantifiers or bound variables). Through z3's C API (`Z3_C`): only what it yields
    is made a Python term (a walk of ExprRefs spent ~0.5 s of xdpfilt_alw_all's `rules` on
    the offset chains of keys read at packet-dependent offsets)."""
    ctx, _ = Z3_C.handles(t)
    packet, length = (PACKET.get_id(), PACKET_LEN.get_id()) if t.ctx == PACKET.ctx else (None, None)
    if packet is None:  # another context: its own packet and length terms
        packet, length = PACKET.translate(t.ctx).get_id(), PACKET_LEN.translate(t.ctx).get_id()
    seen: set[int] = set()
    todo = [Z3_C.handles(x)[1] for x in (t, *definitions)]
    while todo:
        a = todo.pop()
        aid = _AST_ID(ctx, a)
        if aid in seen:
            continue
        seen.add(aid)
        kind = _AST_KIND(ctx, a)
        if kind == z3.Z3_NUMERAL_AST:
            if _SORT_KIND(ctx, _SORT(ctx, a)) != z3.Z3_BV_SORT:
                yield "const", _leaf(t.ctx, a)
            continue
        if kind != z3.Z3_APP_AST:
            continue  # quantifiers, bound variables
        n = _NUM_ARGS(ctx, a)
        if n == 0:
            yield ("len", None) if aid == length else ("const", _leaf(t.ctx, a))
            continue
        op = _DECL_KIND(ctx, _DECL(ctx, a))
        if n == 2 and op == z3.Z3_OP_SELECT and _AST_ID(ctx, _ARG(ctx, a, 0)) == packet:
            index = _ARG(ctx, a, 1)
            if _AST_KIND(ctx, index) == z3.Z3_NUMERAL_AST and _SORT_KIND(ctx, _SORT(ctx, index)) == z3.Z3_BV_SORT:
                yield "at", int(_NUMERAL(ctx, index))
            else:
                yield "read", wrap(t.ctx, index)
            continue
        if op == z3.Z3_OP_UNINTERPRETED:
            x = wrap(t.ctx, a)
            if x.decl().name().startswith("map."):
                yield "map", x
                continue
        todo.extend(_ARG(ctx, a, i) for i in reversed(range(n)))


def _leaf(ctx: z3.Context, a) -> z3.ExprRef:
    """A raw AST of `ctx` as the Python term z3's own `children()` makes of it (its most
    specific class: a numeral's, an arithmetic term's)."""
    v = z3.AstVector(ctx=ctx)  # its items are handed out as children() hands them out
    v.push(wrap(ctx, a))
    return v[0]


def _offsets(t: z3.ExprRef) -> frozenset[int] | None:
    """The constant packet offsets `t` reads; None when it reads one at a computed index
    (an IHL-relative read may be any byte). Memoised per node by z3 AST id (terms are
    hash-consed), walked through z3's C API."""
    key = t.get_id()
    memo = _NODE_OFFSETS
    if key in memo:
        return memo[key]
    if len(memo) > 1_000_000:
        memo.clear()
        _OFFSET_ROOTS.clear()
    _OFFSET_ROOTS[key] = t
    ctx, root = Z3_C.handles(t)
    packet = PACKET.get_id()
    stack: list = [(root, None)]
    while stack:
        a, kids = stack.pop()
        if kids is not None:  # its children are done
            out: frozenset[int] | None = _NO_OFFSETS
            for k in kids:
                sub = memo[k]
                if sub is None:
                    out = None
                    break
                if sub and not sub <= out:
                    out = sub if not out or out <= sub else out | sub
            memo[_AST_ID(ctx, a)] = out
            continue
        aid = _AST_ID(ctx, a)
        if aid in memo:
            continue
        if _AST_KIND(ctx, a) != z3.Z3_APP_AST:  # numerals, variables, quantifiers
            memo[aid] = _NO_OFFSETS
            continue
        n = _NUM_ARGS(ctx, a)
        args = [_ARG(ctx, a, i) for i in range(n)]
        if n == 2 and _DECL_KIND(ctx, _DECL(ctx, a)) == z3.Z3_OP_SELECT and _AST_ID(ctx, args[0]) == packet:
            index = args[1]
            numeral = _AST_KIND(ctx, index) == z3.Z3_NUMERAL_AST
            memo[aid] = frozenset({int(_NUMERAL(ctx, index))}) if numeral else None
            continue
        ids = [_AST_ID(ctx, c) for c in args]
        stack.append((a, ids))
        stack.extend((c, None) for c, cid in zip(args, ids) if cid not in memo)
    return memo[key]


def _held(premise: list[z3.BoolRef], claim: z3.BoolRef) -> bool:
    """Whether `claim` is one of `premise`'s formulas (the same term): then the premise implies
    it and z3 need not be asked (`_implied`: when z3 solved the premise; one past
    QUERY_RLIMIT is still asked, as before). A branch's premise holds what its parent was
    proven to imply (`_branch`), and the branch's layout asks the same claims again: 30-40
    of the 120-140 z3 questions of `rules` on an xdp-filter object were such, each unsat."""
    i = claim.get_id()
    return any(f.get_id() == i for f in premise)


def _unique(formulas: list[z3.BoolRef]) -> list[z3.BoolRef]:
    seen: set[int] = set()
    return [f for f in formulas if not (f.get_id() in seen or seen.add(f.get_id()))]


def _fixed_part(cond: z3.BoolRef) -> list[z3.BoolRef]:
    """The conjuncts of `cond` that read the packet at constant offsets only, without those
    on a long computation (a hash: z3 seldom decides them within QUERY_RLIMIT, and they say
    nothing of where headers are). Weaker than `cond`, so what they imply `cond` implies.

    A function of the term (its And tree, `_offsets` and `_has_long` of each conjunct): worked
    out once per term (`_FIXED`), a new list each time. The same branch literal is met by every
    path of a parser: on xdpfilt_alw_all 232 calls were on 60 terms."""
    hit = _FIXED.get(cond.get_id())
    if hit is None or hit[0].ctx is not cond.ctx:  # ids are per context
        if len(_FIXED) > 20_000:
            _FIXED.clear()
        hit = _FIXED[cond.get_id()] = (cond, _conjuncts_at_fixed_offsets(cond))
    return list(hit[1])


#: `_fixed_part`'s answers: term AST id -> (the term, kept alive so that its id stays its own,
#: its conjuncts at constant offsets).
_FIXED: dict[int, tuple[z3.BoolRef, list[z3.BoolRef]]] = {}


def _conjuncts_at_fixed_offsets(cond: z3.BoolRef) -> list[z3.BoolRef]:
    out, todo = [], [cond]
    while todo:
        f = todo.pop()
        if z3.is_and(f):
            todo.extend(reversed(f.children()))
        elif _offsets(f) is not None and not _has_long(f):
            out.append(f)
    return out


def _unique_text(texts: list[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in texts if not (x in seen or seen.add(x))]


#: `_long_text`'s mark of a long computation's number: `render` keeps it or drops it.
_LONG_MARK = re.compile("\x01(\\d+)\x02(hash|f)")

#: Operations of a long computation (`_shape`): mixing ones name it a hash.
_MIXING = frozenset(
    {
        z3.Z3_OP_BMUL,
        z3.Z3_OP_BXOR,
        z3.Z3_OP_ROTATE_LEFT,
        z3.Z3_OP_ROTATE_RIGHT,
        z3.Z3_OP_EXT_ROTATE_LEFT,
        z3.Z3_OP_EXT_ROTATE_RIGHT,
        z3.Z3_OP_BUREM,
        z3.Z3_OP_BUREM_I,
        z3.Z3_OP_BUDIV,
        z3.Z3_OP_BUDIV_I,
    }
)
_ARITHMETIC = _MIXING | {
    z3.Z3_OP_BADD,
    z3.Z3_OP_BSUB,
    z3.Z3_OP_BAND,
    z3.Z3_OP_BOR,
    z3.Z3_OP_BNOT,
    z3.Z3_OP_BNEG,
    z3.Z3_OP_BSHL,
    z3.Z3_OP_BLSHR,
    z3.Z3_OP_BASHR,
}
#: Operations that stay printed around a long computation: they bound its value
#: (`hash(...) % 64`, `hash(...) & 0xff`, `hash(...)[31:31]`).
_KEPT_AROUND = frozenset({z3.Z3_OP_BUREM, z3.Z3_OP_BUREM_I, z3.Z3_OP_BAND, z3.Z3_OP_EXTRACT, z3.Z3_OP_ZERO_EXT})
#: Counts are capped (a hash's tree is exponential in its steps).
_CAP = 1 << 20
#: Terms `_node_shape` walked: AST id -> the term, kept alive (see _OFFSET_ROOTS).
_SHAPE_ROOTS: dict[int, z3.ExprRef] = {}
#: AST id of every node under a term in `_SHAPE_ROOTS` -> (mixing operations, arithmetic
#: operations, whether an if-then-else is in it, whether a long computation is in it).
_NODE_SHAPES: dict[int, tuple[int, int, bool, bool]] = {}
_LEAF = (0, 0, False, False)


def _node_shape(t: z3.ExprRef) -> tuple[int, int, bool, bool]:
    """`_shape(t)` and `_has_long(t)` in one walk of `t` through z3's C API, memoised per
    node by AST id. Packet reads and symbols are leaves of the computation (a read's index
    is not part of it); a map lookup is one too, but a long computation in its key counts
    for `_has_long`."""
    key = t.get_id()
    memo = _NODE_SHAPES
    if key in memo:
        return memo[key]
    if len(memo) > 1_000_000:
        memo.clear()
        _SHAPE_ROOTS.clear()
    _SHAPE_ROOTS[key] = t
    ctx, root = Z3_C.handles(t)
    stack: list = [(root, None)]
    while stack:
        a, meta = stack.pop()
        if meta is not None:  # its children are done
            ids, op = meta
            found = any(memo[i][3] for i in ids)
            if op == z3.Z3_OP_UNINTERPRETED:
                memo[_AST_ID(ctx, a)] = (0, 0, False, found)
                continue
            mix = arith = 0
            ite = op == z3.Z3_OP_ITE
            for i in ids:
                cm, ca, ci, _ = memo[i]
                mix, arith, ite = mix + cm, arith + ca, ite or ci
            ops = max(1, len(ids) - 1)  # an n-ary sum is n - 1 additions
            mix = min(mix + (ops if op in _MIXING else 0), _CAP)
            arith = min(arith + (ops if op in _ARITHMETIC else 0), _CAP)
            if not found and not ite and (mix >= MIX_OPS or arith >= LONG_OPS):
                found = _SORT_KIND(ctx, _SORT(ctx, a)) == z3.Z3_BV_SORT  # a value, not a condition
            memo[_AST_ID(ctx, a)] = (mix, arith, ite, found)
            continue
        aid = _AST_ID(ctx, a)
        if aid in memo:
            continue
        if _AST_KIND(ctx, a) != z3.Z3_APP_AST:  # numerals, variables, quantifiers
            memo[aid] = _LEAF
            continue
        op = _DECL_KIND(ctx, _DECL(ctx, a))
        n = _NUM_ARGS(ctx, a)
        if op == z3.Z3_OP_SELECT or n == 0:
            memo[aid] = _LEAF
            continue
        args = [_ARG(ctx, a, i) for i in range(n)]
        ids = [_AST_ID(ctx, c) for c in args]
        stack.append((a, (ids, op)))
        stack.extend((c, None) for c, cid in zip(args, ids) if cid not in memo)
    return memo[key]


def _shape(t: z3.ExprRef) -> tuple[int, int, bool]:
    """(mixing operations, arithmetic operations, whether an if-then-else is in it) of `t`,
    counted over its tree (capped at _CAP): packet reads, map values and symbols are
    leaves (a read's index is not part of the computation)."""
    return _node_shape(t)[:3]


def _long(t: z3.ExprRef) -> bool:
    """Whether `t` is a long computation: a value (not a condition) of arithmetic with no
    if-then-else, with MIX_OPS mixing or LONG_OPS arithmetic operations."""
    if not z3.is_bv(t):
        return False
    mix, arith, ite = _shape(t)
    return not ite and (mix >= MIX_OPS or arith >= LONG_OPS)


def _peeled(t: z3.ExprRef) -> bool:
    """Whether `t` is an operation kept printed around a long computation (a remainder, a
    mask, bits of it) rather than part of it."""
    if not z3.is_app(t) or t.decl().kind() not in _KEPT_AROUND:
        return False
    inner = [c for c in t.children() if not z3.is_bv_value(c)]
    return len(inner) == 1 and _long(inner[0])


def _has_long(f: z3.ExprRef) -> bool:
    """Whether a long computation is in `f` (a condition; outside packet read indices)."""
    return _node_shape(f)[3]


def _be(o: int, n: int) -> z3.BitVecRef:
    """Packet bytes o..o+n-1 in network order (made once per offset and size)."""
    return _claim(("be", o, n), lambda: z3.Concat(*[_byte(o + i) for i in range(n)]) if n > 1 else _byte(o))


#: The terms `layout` asks about (a layout asks the same few per path and branch: their z3
#: terms took ~50 ms of Python per xdp-filter object to build again): key -> the term, kept
#: alive. z3 hash-conses terms: a term made again is the same AST (same id) while one is
#: alive, so a kept one asks z3 exactly the question a new one would.
_CLAIMS: dict[tuple, z3.ExprRef] = {}


def _claim(key: tuple, make) -> z3.ExprRef:
    """The term `make()` builds, made once per `key` (`_CLAIMS`); a key naming a term by its
    AST id is only used with terms `_CLAIMS` or `_BYTES` keep alive (their ids stay theirs)."""
    term = _CLAIMS.get(key)
    if term is None:
        term = _CLAIMS[key] = make()
    return term


def _equal(term: z3.BitVecRef, value: int) -> z3.BoolRef:
    """`term == value` for a term `_be`/`_byte` made (kept alive: its id names it)."""
    return _claim(("eq", term.get_id(), value), lambda: term == value)


#: Negations of the claims `_implied` asks z3 about: claim AST id -> (the claim, kept alive so
#: that its id is not another term's, its negation); cleared past 20,000 (like `_ANSWERS`).
_NEGATIONS: dict[int, tuple[z3.BoolRef, z3.BoolRef]] = {}


def _negation(claim: z3.BoolRef) -> z3.BoolRef:
    """z3.Not(claim), made once per claim (the same AST: z3 hash-conses terms)."""
    hit = _NEGATIONS.get(claim.get_id())
    if hit is None:
        if len(_NEGATIONS) > 20_000:
            _NEGATIONS.clear()
        hit = _NEGATIONS[claim.get_id()] = (claim, z3.Not(claim))
    return hit[1]


#: Texts of sub-terms worked out without asking anything of the condition (`Decoder._memo`):
#: (kind, AST id, Layout.constant()) -> (text, characters counted, whether a fixed-offset
#: L4 read was named, the term: kept alive so that its id is not given to another term).
_PURE: dict[tuple, tuple[str, int, bool, z3.ExprRef]] = {}


#: z3's answers to the questions renderings ask (`Decoder._check`): the AST ids of the formulas
#: asked, in order -> (the answer, a model when sat, the formulas: kept alive so that their ids
#: are not given to other terms). Each asked in a fresh z3 context: a function of the question.
#: Deterministic: the resource limit, not a time, bounds each query; answers stopped by the
#: deadline are not kept.
_ANSWERS: dict[tuple[int, ...], tuple[z3.CheckSatResult, z3.ModelRef | None, list[z3.BoolRef]]] = {}


class _Session:
    """The z3 context one rendering (`Decoder.render`, `key_fields`) asks its questions in,
    made for it and dropped after it, so that the text is a function of the condition.

    z3 numbers terms (AST ids) in the order a context makes them, and both its simplifier
    (the order of the arguments of and/or/+, which of equivalent rewrites it picks) and its
    solver (answers near the resource limit, models) follow the ids: in the process's
    context, the same condition printed its disjuncts in another order, and proved other
    layouts, whenever exploration or synthesis had made their terms in another order. In a
    fresh context the condition's terms get their ids in the order of a walk of it
    (`canonical`), and every later term of the rendering in an order the rendering fixes.
    The Python objects of the context are released by reference count (no cycles), at
    points the rendering fixes. Each z3 query is asked in a session of its own
    (`Decoder._check`), so its answer near the resource limit does not depend on the
    queries asked before it: a function of the question, kept across renderings
    (`_ANSWERS`)."""

    def __init__(self):
        self.ctx = fresh_context()
        #: AST id in the process's context -> (the term in this one, the original kept alive)
        self.terms: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}

    def own(self, f: z3.ExprRef) -> z3.ExprRef:
        """`f` in this context (translated once)."""
        memo = self.terms.get(f.get_id())
        if memo is None:
            memo = self.terms[f.get_id()] = (f.translate(self.ctx), f)
        return memo[0]

    def canonical(self, t: z3.ExprRef) -> z3.ExprRef:
        """`t` simplified by z3 in this context (as a function of its structure when it is
        the context's first term), returned in `t`'s context; its translation is kept."""
        mine = z3.simplify(t.translate(self.ctx))
        back = mine.translate(t.ctx)
        self.terms.setdefault(back.get_id(), (mine, back))
        return back

    def solve(self, formulas: list[z3.BoolRef], timeout: int | None):
        """z3 on `formulas` (in order) under QUERY_RLIMIT (and `timeout` ms, the deadline's):
        (the answer, a model in the formulas' context when sat, whether an unknown is the
        resource limit's).

        Without a timeout nothing but the resource limit stops z3 (no timer is set, nothing
        interrupts the context), so every unknown is the limit's, and as deterministic as a
        sat or unsat answer. z3 reports the limit as "max. resource limit exceeded" or, when
        its SMT core is the one that notices it, as "canceled" (the flag the limit sets): on
        xdpfilt_alw_all a premise z3 stops at an rlimit count of 21,230 says canceled on every
        try, and sat under 50 times the limit. Such an answer, not kept before, was asked
        again by every rendering that met the question (alw_all: one 10 times, ~14 ms each).
        With a timeout a "canceled" may be the timer's: only the limit's own message counts.
        Deterministic within a process, not across histories: after tests/test_printed_proof.py's
        builds that premise came out sat in a fresh context (z3 keeps process-wide state); the
        memo only needs the former."""
        s = z3.Solver(ctx=self.ctx)
        s.set("rlimit", QUERY_RLIMIT)
        if timeout is not None:
            s.set("timeout", timeout)
        s.add(*[self.own(f) for f in formulas])
        answer = s.check()
        home = formulas[0].ctx if formulas else z3.main_ctx()
        model = s.model().translate(home) if answer == z3.sat else None
        by_limit = answer == z3.unknown and (timeout is None or "resource" in s.reason_unknown())
        return answer, model, by_limit


@dataclass
class Witness:
    """A concrete model of a rendered condition and its environment: z3's model, read with
    PACKET (and PACKET_LEN) replaced by `packet` and `length` (an untagged variant of the
    model's packet), or as it is. Evaluation is exact: a claim it makes false is not implied."""

    model: z3.ModelRef
    packet: z3.ArrayRef | None = None
    length: z3.BitVecRef | None = None
    untagged: int = 0  # VLAN tags cut out of the model's packet

    def value(self, f: z3.ExprRef) -> z3.ExprRef:
        if self.packet is not None:
            f = z3.substitute(f, (PACKET, self.packet), (PACKET_LEN, self.length))
        return self.model.eval(f, model_completion=True)

    def satisfies(self, f: z3.BoolRef) -> bool:
        return z3.is_true(self.value(f))

    def falsifies(self, f: z3.BoolRef) -> bool:
        return z3.is_false(self.value(f))


#: VLAN tags a witness's packet is stripped of, at most (`witnesses`): 802.1Q and QinQ.
MAX_UNTAG = 2


def witnesses(model: z3.ModelRef | None, formulas: list[z3.BoolRef]) -> list[Witness]:
    """`model` and its untagged variants (the same packet with its first VLAN tags removed,
    the length 4 bytes less each) that satisfy every one of `formulas` (evaluated): the
    exploration's witness often has a tag, and the untagged packet refutes the claims a
    tagged one cannot (an ethertype at 12 of IPv4)."""
    if model is None or model.ctx != formulas[-1].ctx:
        return []
    out = []
    whole = z3.And(formulas)
    w = Witness(model)
    for _ in range(MAX_UNTAG + 1):
        if w.satisfies(whole):
            out.append(w)
        tpid = w.value(z3.Concat(PACKET[12], PACKET[13]))
        if not z3.is_bv_value(tpid) or tpid.as_long() not in VLAN_TPIDS:
            break
        packet = w.packet if w.packet is not None else PACKET
        length = w.length if w.length is not None else PACKET_LEN
        i = z3.BitVec("i", 64)
        w = Witness(model, z3.Lambda([i], z3.If(z3.ULT(i, 12), packet[i], packet[i + 4])), length - 4, w.untagged + 1)
    return out


def forget() -> None:
    """Drop what is kept across renderings (`_ANSWERS`, `_PURE`, `_INPUT_NODES`): for timing
    a cold decoding."""
    _ANSWERS.clear()
    _PURE.clear()
    _INPUT_NODES.clear()


def canonical(t: z3.ExprRef) -> z3.ExprRef:
    """`t` simplified by z3 in a fresh context: a function of its structure only (see
    `_Session`), in `t`'s context."""
    return _Session().canonical(t)


def decode_deadline(e) -> float | None:
    """When decoding path conditions must stop (`fields.Decoder`'s deadline): the end of the
    command's `--timeout` (counted from Options.started, else from the exploration's
    start), None without one. Paths decoded past it say so instead of their fields."""
    opts = e.options
    if opts.timeout is None:
        return None
    begun = opts.started if opts.started is not None else time.perf_counter() - e.seconds
    return begun + opts.timeout


def decode(e, path) -> str:
    """The condition of `path` (an explore.Path of exploration `e`) in header fields, worked
    out once per path (`rules` names a path's reason from it and prints it; `e.decoded`
    holds it with the path and environment it was rendered for, and a new one of either
    renders it again). Past the command's time budget (`decode_deadline`) it is NOT_DECODED."""
    env = e.environment()
    memo = e.decoded.get(path.id)
    if memo is None or memo[0] is not path or [a.get_id() for a in memo[1]] != [a.get_id() for a in env]:
        decoder = Decoder(env, decode_deadline(e), e.summaries)
        memo = e.decoded[path.id] = (path, env, decoder.render(e.condition(path), witness=path.witness))
    return memo[2]


# --- concrete frames (counterexample packets) ---------------------------------------------------

#: IPv6 extension header types (IANA "IPv6 Extension Header Types"): hop-by-hop, routing,
#: fragment, ESP, AH, destination options, mobility, HIP, shim6, and the two experimental.
IPV6_EXT_HEADERS = (0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254)
IPV6_FRAGMENT = 44


@dataclass
class Frame:
    """One concrete Ethernet frame in header fields: `fields` (name, text) in wire order and
    the atypical classes it belongs to (`IP options`, `fragments`, `IPv6 extension headers`,
    `truncated`, `short frames`: the names the report's summary uses)."""

    fields: list[tuple[str, str]]
    classes: list[str]  # also `malformed`: an IPv4 header with IHL < 5

    def text(self) -> str:
        out = " ".join(f"{n}={v}" for n, v in self.fields)
        return out + (f" [{', '.join(self.classes)}]" if self.classes else "")


def frame(data: bytes) -> Frame:
    """Read a frame's headers (the HEADERS table): Ethernet, up to two VLAN tags, IPv4 (its
    IHL), IPv6 (its first next-header), then TCP/UDP/ICMP/ICMPv6 where they fit."""
    out: list[tuple[str, str]] = []
    classes: list[str] = []

    def take(header: str, base: int, names) -> dict[str, int] | None:
        got = {}
        for n in names:
            off, size = HEADERS[header][n]
            if base + off + size > len(data):
                classes.append("truncated")
                return None
            got[n] = int.from_bytes(data[base + off : base + off + size], "big")
        return got

    if len(data) < 60:
        classes.append("short frames")
    eth = take("eth", 0, ("dst", "src", "proto"))
    if eth is None:
        return Frame(out, classes)
    out += [(f"eth.{n}", fmt(f"eth.{n}", v)) for n, v in eth.items()]
    proto, at = eth["proto"], 14
    for tag in ("vlan", "vlan2"):
        if proto not in VLAN_TPIDS:
            break
        v = take("vlan", at, ("tci", "proto"))
        if v is None:
            return Frame(out, classes)
        out += [(f"{tag}.vid", str(v["tci"] & 0xFFF)), (f"{tag}.proto", fmt("vlan.proto", v["proto"]))]
        proto, at = v["proto"], at + 4
    l4, l4_at = None, 0
    if proto == 0x0800:
        ip = take("ipv4", at, ("ver_ihl", "tot_len", "frag", "ttl", "proto", "saddr", "daddr"))
        if ip is None:
            return Frame(out, classes)
        ihl = ip["ver_ihl"] & 0xF
        out.append(("ipv4.ihl", str(ihl)))
        if ihl > 5:
            classes.append("IP options")
        elif ihl < 5:
            classes.append("malformed")
        if ip["frag"] & 0x3FFF:
            classes.append("fragments")
            out.append(("ipv4.frag", hex(ip["frag"])))
        out += [(f"ipv4.{n}", fmt(f"ipv4.{n}", ip[n])) for n in ("ttl", "proto", "saddr", "daddr")]
        if not ip["frag"] & 0x1FFF and ihl >= 5:
            l4, l4_at = L4.get(ip["proto"]), at + ihl * 4
    elif proto == 0x86DD:
        ip = take("ipv6", at, ("nexthdr", "hop_limit", "saddr", "daddr"))
        if ip is None:
            return Frame(out, classes)
        out += [(f"ipv6.{n}", fmt(f"ipv6.{n}", ip[n])) for n in ("nexthdr", "hop_limit", "saddr", "daddr")]
        if ip["nexthdr"] == IPV6_FRAGMENT:
            classes.append("fragments")
        if ip["nexthdr"] in IPV6_EXT_HEADERS:
            classes.append("IPv6 extension headers")
        else:
            l4, l4_at = L4.get(ip["nexthdr"]), at + 40
    if l4 in ("tcp", "udp"):
        names = ("sport", "dport") + (("flags",) if l4 == "tcp" else ())
        got = take(l4, l4_at, names)
        if got is not None:
            out += [(f"{l4}.{n}", str(got[n])) for n in ("sport", "dport")]
            if l4 == "tcp":
                out.append(("tcp.flags", tcp_flags(got["flags"])))
    elif l4 in ("icmp", "icmp6"):
        got = take(l4, l4_at, ("type", "code"))
        if got is not None:
            out += [(f"{l4}.{n}", str(v)) for n, v in got.items()]
    return Frame(out, classes)
