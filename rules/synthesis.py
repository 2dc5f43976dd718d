"""From explored paths to a prioritised list of tc flower rules, each non-pass rule proved.

The contract (issue 4): a rule whose action is not `pass` matches a packet only if the
program returns that verdict for it - same redirect, no side effect but counters - given
that no earlier rule matched. `pass` hands the packet to the host, where the program runs
anyway, so it is always safe.

How the rules are found, per path whose outcome a rule can reproduce (a *target*: DROP or
ABORTED, REDIRECT to a constant ifindex with a device name), in exploration order (the
program's decision order):

1. **Extract** a block: for every flower key, the values it takes on the path - under
   "typical" packets only (IPv4 without options, not a fragment), which is where a header
   read at a fixed offset means the same as the dissector's key. A key with few values is
   a value set (laid out as masks, ranges, prefixes, or one chain level per key); a key
   with many is left free.
2. **Prove** the block against all packets (options, fragments, VLAN tags, truncation,
   every map content and helper result): z3 looks for a packet that reaches the block,
   matches it and that the program does not give the block's outcome. None: proved.
3. **Shield**: a counterexample becomes an `action pass` rule placed before the block,
   generalised to the widest match that does not cover packets the block is meant to
   take; two shields of the same keys that differ in values are widened into one without
   those keys (flower cannot see what separates them: an IPv4 option moving the port).
   After MAX_SHIELDS attempts the block is given up: its paths stay in software.
4. **Lay out** (ruleset.py): prios per mask shape, chains for multi-key value sets; then
   the printed script is read back and proved (final.py) - what is printed is what is proved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from analyzer.classify import classes
from analyzer.exploration import Exploration, Path
from analyzer.fields import IPV6_EXT_HEADERS, IPV6_FRAGMENT
from analyzer.symbolic import PACKET, PACKET_LEN, const_value

from .dissector import dissect, match_formula
from .flower import FAMILIES, FLOWER_KEYS, IP_FLAG_FRAG, PORT_PROTOS, Exact, FlowerMatch, protocol_name
from .reasons import Reason
from .rewrite import derive, tx_terminal
from .rewriteproof import is_rewrite, rewrite_good

#: Values a key may take on a path and still be enumerated (else it is left free).
MAX_VALUES = 64
#: Counterexamples turned into shields before a block is given up.
MAX_SHIELDS = 12
#: Refused merges of same-key shields before they are merged anyway.
FORCE_WIDEN = 3
#: Per z3 query (ms).
QUERY_TIMEOUT_MS = 10000

#: Keys extracted from paths, per protocol family, in the order shields are generalised
#: (the first ones dropped first: least likely to separate verdicts).
EXTRACTED = {
    "ip": (
        "ip_ttl",
        "ip_tos",
        "tcp_flags",
        "icmp_code",
        "icmp_type",
        "src_mac",
        "dst_mac",
        "src_port",
        "dst_port",
        "src_ip",
        "dst_ip",
        "ip_proto",
    ),
    "ipv6": (
        "ip_ttl",
        "ip_tos",
        "tcp_flags",
        "icmp_code",
        "icmp_type",
        "src_mac",
        "dst_mac",
        "src_port",
        "dst_port",
        "src_ip6",
        "dst_ip6",
        "ip_proto",
    ),
    "arp": ("src_mac", "dst_mac", "arp_op", "arp_sip", "arp_tip"),
    None: ("src_mac", "dst_mac"),
}
#: The Ethernet minimum frame without FCS: shorter frames are padded on the wire.
MIN_FRAME = 60
#: Shields may also say "fragment or not".
SHIELD_ONLY = ("ip_flags",)

#: Assumptions a user may add (`--assume`): name -> (what it says, constraint builder).
ASSUMPTIONS = {
    "min-frame": "frames are at least 60 bytes (the IEEE 802.3 minimum without FCS: an "
    "Ethernet MAC discards runts, shorter frames arrive padded)",
    "no-ip-options": "every IPv4 packet has a 20-byte header (ihl = 5)",
    "no-fragments": "no IPv4 packet is a fragment, and no IPv6 packet starts with a Fragment header",
    "valid-ip-checksum": "every untagged IPv4 header arrives whole (ihl >= 5, inside the frame) with a "
    "correct header checksum, never 0xffff (RFC 1624) (needed to offload a program that updates "
    "the checksum incrementally: tc's csum ip4h recomputes it)",
    "no-ipv6-ext": "no IPv6 packet has extension headers (the IPv6 header's next header is not "
    "hop-by-hop, routing, fragment, ESP, AH, destination options, mobility, HIP, shim6 or 253/254)",
}
#: Why a path no typical packet takes gets no block.
ATYPICAL_ONLY = Reason(
    "atypical-packets",
    "only atypical packets take this path (short frames, IP options, fragments): no flower key separates them",
)
#: Always made (a fact of Ethernet hardware, stated in every script).
DEFAULT_ASSUMPTIONS = ("min-frame",)

#: Effects a non-pass rule may leave to the NIC's counters (the rest keeps a path in software).
COUNTER_EFFECTS = ("map_write", "map_delete")


@dataclass(frozen=True)
class Outcome:
    """What a rule does, as tc says it and as the program says it."""

    action: tuple[str, ...]  # tc tokens after `action`
    verdicts: tuple[str, ...]  # program verdicts that agree (DROP and ABORTED both drop)
    ifindex: int | None = None  # for redirects

    @property
    def is_pass(self) -> bool:
        return self.action == ("pass",)


PASS = Outcome(("pass",), ("PASS",))
DROP = Outcome(("drop",), ("DROP", "ABORTED"))


@dataclass
class Block:
    """A candidate: packets of `protocol` whose keys lie in `sets` (key -> sorted values;
    one value = exact) get `outcome`. `masked` keys carry an Exact with a mask (a masked
    singleton); a key in `set_masks` is compared on those bits only (an address whose
    prefix takes a few values: `src_ip` in 10.0.3.0/24, 10.0.6.0/24, ...); `paths` are
    the program paths it stands for."""

    protocol: str
    sets: dict[str, tuple[int, ...]]
    outcome: Outcome
    paths: list[int]
    masked: dict[str, Exact] = field(default_factory=dict)  # keys known on some bits only
    set_masks: dict[str, int] = field(default_factory=dict)  # multi-valued sets of prefixes
    shields: list[FlowerMatch] = field(default_factory=list)
    refused: dict = field(default_factory=dict)  # shield key set -> merges refused
    proved: bool = False
    why: Reason | None = None

    def formula(self, d) -> z3.BoolRef:
        base = FlowerMatch(self.protocol, tuple(_fixed(self.sets)) + tuple(self.masked.items()))
        parts = [match_formula(base, d)]
        for name, values in self.sets.items():
            if len(values) > 1:
                x = d.keys[name]
                if name in self.set_masks:
                    x = x & self.set_masks[name]
                parts.append(z3.Or([x == v for v in values]))
        return z3.And(parts)


@dataclass
class Synthesis:
    """The blocks in order, what was left in software and why, and the assumptions used."""

    blocks: list[Block]
    software: list[tuple[list[int], Reason]]
    assumptions: tuple[str, ...]
    max_len: int


class Synthesizer:
    """The synthesis state of one program: its paths' conditions and outcomes, the
    environment (assumptions, map and helper facts) every proof runs under, and `run()`."""

    def __init__(self, e: Exploration, assume, ifnames):
        for a in assume:
            if a not in ASSUMPTIONS:
                raise ValueError(f"unknown assumption {a!r} (known: {', '.join(ASSUMPTIONS)})")
        assume = tuple(dict.fromkeys(DEFAULT_ASSUMPTIONS + tuple(assume)))
        self.e, self.assume, self.ifnames = e, assume, ifnames
        self.d = dissect()
        self.maps = classes(e)[1]
        self.conds = {p.id: e.condition(p) for p in e.paths}
        self.env = e.environment() + assumption_constraints(self.assume)
        self.typical = typical_packet()
        self.outcomes = {p.id: self.outcome(p) for p in e.paths}
        self.software: list[tuple[list[int], Reason]] = []
        self._blocks: dict[int, Block | None] = {}
        #: (path id, outcome) -> extract's z3 findings (shared by with_assumption)
        self.extracted: dict[tuple[int, Outcome], tuple | None] = {}
        #: blocks given up, by path: with the shields tried (counterexample.py shows why)
        self.failed: dict[int, Block] = {}
        #: rewrite outcomes' good sets (rewriteproof.py), by outcome
        self.rewrite_goods: dict[Outcome, z3.BoolRef] = {}

    # --- what each path asks for ---------------------------------------------------------

    def outcome(self, p: Path) -> Outcome | Reason:
        """The rule outcome reproducing path `p`, or why none can."""
        if p.truncated or p.notes:
            return Reason("unknown", "the path is not fully understood: " + (p.truncated or p.notes[0]))
        bad = [
            f"{x.kind} {x.target}"
            for x in p.effects
            if not (x.kind in COUNTER_EFFECTS and self.maps.get(x.target) in ("stats-only", "control-plane"))
            and x.kind not in ("redirect", "tail_call", "callback", "packet_resize")
        ]
        if p.verdict in ("DROP", "ABORTED"):
            return Reason("data-plane-state", "side effects beyond counters: " + ", ".join(bad)) if bad else DROP
        if p.verdict == "PASS":
            # a rewrite without other effects may be redone by tc (rewrite.py); else the host does it
            return derive(self, p, ("pass",), ("PASS",)) if p.writes and not bad else PASS
        if bad:
            return Reason("data-plane-state", "side effects beyond counters: " + ", ".join(bad))
        if p.verdict == "REDIRECT" and p.redirect and p.redirect[0] == "ifindex":
            ifindex = const_value(self.e.expand(p.redirect[1]))
            if ifindex is None:
                return Reason("redirect-device", "redirect to an ifindex computed from the packet")
            if ifindex not in self.ifnames:
                return Reason(
                    "redirect-device", f"redirect to ifindex {ifindex}: no device name (use --ifname {ifindex}=DEV)"
                )
            redirect = ("mirred", "egress", "redirect", "dev", self.ifnames[ifindex])
            if p.writes:
                return derive(self, p, redirect, ("REDIRECT",), ifindex)
            return Outcome(redirect, ("REDIRECT",), ifindex)
        if p.verdict == "REDIRECT":
            return Reason("redirect-device", "redirect through a map (the target is control-plane state)")
        if p.verdict == "TX":
            return derive(self, p, tx_terminal(), ("TX",))
        return Reason("unknown", f"verdict {p.verdict}")

    def good(self, outcome: Outcome) -> z3.BoolRef:
        """Packets for which the program does what `outcome` does (cleanly)."""
        if is_rewrite(outcome):  # the output bytes matter too (rewriteproof.py)
            if outcome not in self.rewrite_goods:
                self.rewrite_goods[outcome] = rewrite_good(self, outcome)
            return self.rewrite_goods[outcome]
        conds = [self.conds[p.id] for p in self.e.paths if self.outcomes[p.id] == outcome]
        return z3.Or(conds) if conds else z3.BoolVal(False)

    # --- the loop --------------------------------------------------------------------------

    def run(self) -> Synthesis:
        blocks: list[Block] = []
        for p in self.e.paths:
            o = self.outcomes[p.id]
            if isinstance(o, Reason):
                if p.verdict not in ("PASS",) or p.writes:  # a rewrite tc cannot redo says why
                    self.software.append(([p.id], o))
                continue
            if o.is_pass:
                continue
            block = self.extract(p, o)
            if block is None:
                continue
            same = next((b for b in blocks if _covers(b, block)), None)
            if same is not None:
                same.paths.append(p.id)
                continue
            if blocks and _merge_into(blocks[-1], block):
                continue
            blocks.append(block)
        kept = []
        for b in blocks:
            self.prove(b, kept)
            if b.proved:
                kept.append(b)
            else:
                self.software.append((b.paths, b.why))
                self.failed.update({p: b for p in b.paths})
        return Synthesis(kept, self.software, self.assume, self.e.options.max_len)

    def extract(self, p: Path, outcome: Outcome, quiet: bool = False) -> Block | None:
        """Path `p`'s block for `outcome`, unproved (a new Block each time; the z3 work is
        done once per path and shared with `block_for`, the counterexamples and the
        suggestions' synthesis when its assumption adds nothing under typical packets)."""
        key = (p.id, outcome)
        if key not in self.extracted:
            self.extracted[key] = self._extract(p)
        found = self.extracted[key]
        if found is None:
            if not quiet:
                self.software.append(([p.id], ATYPICAL_ONLY))
            return None
        protocol, sets, masked, set_masks = found
        return Block(protocol, dict(sets), outcome, [p.id], masked=dict(masked), set_masks=dict(set_masks))

    def with_assumption(self, name: str) -> Synthesizer:
        """A synthesizer for the same program under one more assumption. When typical packets
        (the only ones extraction looks at) already satisfy it, the extracted blocks are the
        same: they are shared (z3 proves that implication first)."""
        other = Synthesizer(self.e, self.assume + (name,), self.ifnames)
        added = z3.And(assumption_constraints([name]))
        if not maybe_sat(*self.env, self.typical, z3.Not(added)):
            other.extracted = self.extracted
        return other

    def _extract(self, p: Path) -> tuple | None:
        """(protocol, sets, masked, set_masks) of path `p` under typical packets; None when
        only atypical packets take it."""
        cond = z3.And(self.conds[p.id], *self.env, self.typical)
        s = solver(cond)
        if s.check() != z3.sat:
            return None
        protocols = _values(s, self.d.skb_protocol, 2)
        eth = protocols[0] if len(protocols) == 1 else None
        family = FAMILIES.get(eth)
        protocol = protocol_name(eth) if family else "all"
        sets: dict[str, tuple[int, ...]] = {}
        masked: dict[str, Exact] = {}
        set_masks: dict[str, int] = {}
        for name in EXTRACTED[family]:
            term = self.d.keys[name]
            values = _values(s, term, MAX_VALUES + 1)
            if len(values) <= MAX_VALUES:
                sets[name] = tuple(sorted(values))
                continue
            prefixes = _prefix_set(s, term, FLOWER_KEYS[name]) if FLOWER_KEYS[name].mask == "prefix" else None
            if prefixes is not None:
                sets[name], set_masks[name] = prefixes
            elif FLOWER_KEYS[name].mask != "none":
                bits = _fixed_bits(s, term, values, FLOWER_KEYS[name].width)
                if FLOWER_KEYS[name].mask == "prefix":
                    bits = Exact(bits.value, _prefix_part(bits.mask, FLOWER_KEYS[name].width))
                if bits.mask:
                    masked[name] = Exact(bits.value & bits.mask, bits.mask)
        sets = _valid(protocol, sets)
        masked = {n: v for n, v in masked.items() if n in _valid(protocol, {**sets, n: (0,)})}
        set_masks = {n: m for n, m in set_masks.items() if n in sets}
        return protocol, sets, masked, set_masks

    def prove(self, b: Block, earlier: list[Block]) -> None:
        good = self.good(b.outcome)
        taken = self.reach(earlier)
        region = b.formula(self.d)
        for _ in range(MAX_SHIELDS):
            shields = [match_formula(m, self.d) for m in b.shields]
            s = solver(*self.env, taken, region, *[z3.Not(x) for x in shields], z3.Not(good))
            r = s.check()
            if r == z3.unsat:
                # Proved - but vacuously if the shields (or earlier blocks) take every packet
                # of the block's own paths: then nothing is offloaded, say so here.
                own = z3.Or([self.conds[p] for p in b.paths])
                if solver(*self.env, taken, region, *[z3.Not(x) for x in shields], own).check() == z3.unsat:
                    b.why = Reason(
                        "not-expressible",
                        "every packet of this path is taken by a pass shield or an earlier "
                        "filter: flower cannot separate it from packets the program passes",
                    )
                    return
                b.proved = True
                return
            if r == z3.unknown:
                b.why = Reason("unknown", "z3 gave no answer in time")
                return
            shield = self.shield(b, s.model(), good)
            b.shields = self.widen(b, good, shield)
        b.why = Reason(
            "not-expressible",
            f"not proved after {MAX_SHIELDS} shields (flower cannot separate what the program decides)",
        )

    def path_block(self, model: z3.ModelRef) -> Block | None:
        """The extracted block of the path the model's packet takes (None if it is only
        taken by atypical packets)."""
        for p in self.e.paths:
            if z3.is_true(model.eval(self.conds[p.id], model_completion=True)):
                return self.block_for(p)
        return None

    def block_for(self, p: Path) -> Block | None:
        """Path `p`'s own extracted block, unproved (cached; None: only atypical packets
        take it). A path without a rule outcome is extracted as if it passed."""
        if p.id not in self._blocks:
            o = self.outcomes[p.id]
            self._blocks[p.id] = self.extract(p, o if isinstance(o, Outcome) else PASS, quiet=True)
        return self._blocks[p.id]

    def reach(self, earlier: list[Block]) -> z3.BoolRef:
        """Packets no earlier block (or its shields) takes."""
        taken = []
        for b in earlier:
            taken += [match_formula(m, self.d) for m in b.shields]
            taken.append(b.formula(self.d))
        return z3.Not(z3.Or(taken)) if taken else z3.BoolVal(True)

    def shield(self, b: Block, model: z3.ModelRef, good: z3.BoolRef) -> FlowerMatch:
        """The widest pass rule through the counterexample that takes none of the packets
        the block is meant for."""
        family = FAMILIES.get(FlowerMatch(b.protocol).ethertype)
        names = [n for n in EXTRACTED[family] + (SHIELD_ONLY if family in ("ip", "ipv6") else ())]
        seen = {n: model.eval(self.d.keys[n], model_completion=True).as_long() for n in names}
        taken = self.path_block(model)
        if taken is not None and taken.protocol == b.protocol:
            # The keys that path fixes, where the packet's flower view agrees: its natural
            # region, cut down to what flower sees of this packet.
            fixed = {n: v[0] for n, v in taken.sets.items() if len(v) == 1}
            keys = {n: v for n, v in fixed.items() if seen.get(n) == v}
            keys.update({n: v[0] for n, v in b.sets.items() if len(v) == 1})
            keys = {n: v[0] for n, v in _valid(b.protocol, {n: (v,) for n, v in keys.items()}).items()}
            shield = _match(b.protocol, keys)
            lost = [n for n, v in fixed.items() if seen.get(n) != v]
            if lost and seen.get("ip_flags", 0) & IP_FLAG_FRAG:
                # flower lost a key because the packet is a fragment: say so in the shield
                shield = FlowerMatch(b.protocol, shield.keys + (("ip_flags", Exact(IP_FLAG_FRAG, IP_FLAG_FRAG)),))
            return shield
        keys = dict(seen)
        for n, v in b.sets.items():
            if len(v) == 1:
                keys[n] = v[0]
        keys = dict(_valid(b.protocol, {n: (v,) for n, v in keys.items()}))
        keys = {n: v[0] for n, v in keys.items()}
        # Typical packets the block is for: widening stops before it would take them
        # (atypical ones - options, fragments - a shield may take: they pass, safely).
        region = z3.And(b.formula(self.d), good, *self.env)
        if maybe_sat(region, match_formula(_match(b.protocol, keys), self.d)):
            region = z3.And(region, self.typical)
            if maybe_sat(region, match_formula(_match(b.protocol, keys), self.d)):
                return _match(b.protocol, keys)  # flower cannot separate: the narrowest shield
        for n in names:
            if n not in keys or (n in b.sets and len(b.sets[n]) == 1):
                continue
            trial = {k: v for k, v in keys.items() if k != n}
            trial = {k: v[0] for k, v in _valid(b.protocol, {k: (v,) for k, v in trial.items()}).items()}
            if not maybe_sat(region, match_formula(_match(b.protocol, trial), self.d)):
                keys = trial
        return _match(b.protocol, keys)

    def widen(self, b: Block, good: z3.BoolRef, new: FlowerMatch) -> list[FlowerMatch]:
        """Add `new` to the block's shields. A shield on the same keys with other values is
        merged with it, keeping only the bits the two agree on, unless that takes typical
        packets the block is for; after FORCE_WIDEN such refusals it is merged anyway (flower
        cannot see what separates them - an IPv4 option moving the port - so those packets
        go to software)."""
        region = z3.And(b.formula(self.d), good, *self.env, self.typical)
        for i, old in enumerate(b.shields):
            if [k for k, _ in old.keys] == [k for k, _ in new.keys] and old.protocol == new.protocol:
                merged = _common(old, new)
                shape = tuple(k for k, _ in old.keys)
                b.refused[shape] = b.refused.get(shape, 0) + 1
                if b.refused[shape] >= FORCE_WIDEN or not maybe_sat(region, match_formula(merged, self.d)):
                    return b.shields[:i] + [merged] + b.shields[i + 1 :]
        return b.shields + [new]


def _covers(a: Block, b: Block) -> bool:
    """Block `a` takes every packet of block `b` with the same outcome (key by key, b's
    values are among a's): b's paths are a's to claim."""
    return (a.protocol, a.outcome, a.masked) == (b.protocol, b.outcome, b.masked) and all(
        n in b.sets and a.set_masks.get(n) == b.set_masks.get(n) and set(b.sets[n]) <= set(v) for n, v in a.sets.items()
    )


def _merge_into(a: Block, b: Block) -> bool:
    """Merge block `b` into the block `a` just before it when they differ only in the
    values of one key (clang splits `x == c1 || ... || x == cK` over several paths): one
    chain level with the union instead of a second tree of chains. The merged block is
    proved like any other."""
    if (a.protocol, a.outcome, a.masked, a.set_masks, a.sets.keys()) != (
        b.protocol,
        b.outcome,
        b.masked,
        b.set_masks,
        b.sets.keys(),
    ):
        return False
    differ = [n for n in a.sets if a.sets[n] != b.sets[n]]
    if len(differ) != 1:
        return False
    n = differ[0]
    a.sets[n] = tuple(sorted(set(a.sets[n]) | set(b.sets[n])))
    a.paths += b.paths
    return True


# --- assumptions and typical packets ---------------------------------------------------------


def _byte(o: int) -> z3.BitVecRef:
    return PACKET[z3.BitVecVal(o, 64)]


def _is_ipv4() -> z3.BoolRef:
    return z3.And(z3.UGE(PACKET_LEN, 34), _byte(12) == 0x08, _byte(13) == 0x00)


def _ipv6_next_headers() -> list[tuple[z3.BoolRef, z3.BitVecRef]]:
    """(the frame is IPv6 after 0, 1 or 2 VLAN tags, its IPv6 header's next-header byte)."""
    out = []
    tpid = lambda o: z3.Or(_be16(o) == 0x8100, _be16(o) == 0x88A8)  # noqa: E731
    for tags in range(3):
        at = 14 + 4 * tags
        here = [tpid(12 + 4 * i) for i in range(tags)] + [_be16(at - 2) == 0x86DD, z3.UGE(PACKET_LEN, at + 40)]
        out.append((z3.And(here), _byte(at + 6)))
    return out


def _be16(o: int) -> z3.BitVecRef:
    return z3.Concat(_byte(o), _byte(o + 1))


def assumption_constraints(names) -> list[z3.BoolRef]:
    out = []
    for n in names:
        if n == "min-frame":
            out.append(z3.UGE(PACKET_LEN, MIN_FRAME))
        elif n == "no-ip-options":
            out.append(z3.Implies(_is_ipv4(), _byte(14) & 0x0F == 5))
        elif n == "no-fragments":
            out.append(z3.Implies(_is_ipv4(), z3.And(_byte(20) & 0x3F == 0, _byte(21) == 0)))
            out += [z3.Implies(is6, nh != IPV6_FRAGMENT) for is6, nh in _ipv6_next_headers()]
        elif n == "no-ipv6-ext":
            out += [z3.Implies(is6, z3.And([nh != x for x in IPV6_EXT_HEADERS])) for is6, nh in _ipv6_next_headers()]
    return out


def typical_packet() -> z3.BoolRef:
    """Where fixed-offset header reads and flower keys agree: a frame of at least the
    Ethernet minimum (60 bytes without FCS, so a TCP header after a plain IPv4 header is
    never cut), IPv4 without options and not a fragment (other ethertypes unconstrained)."""
    return z3.And(
        z3.UGE(PACKET_LEN, MIN_FRAME),
        z3.Implies(_is_ipv4(), z3.And(_byte(14) == 0x45, _byte(20) & 0x3F == 0, _byte(21) == 0)),
    )


# --- small helpers ---------------------------------------------------------------------------


def solver(*constraints) -> z3.Solver:
    """A z3 solver with the per-query timeout."""
    s = z3.Solver()
    s.set("timeout", QUERY_TIMEOUT_MS)
    s.add(*constraints)
    return s


def maybe_sat(*constraints) -> bool:
    """False only when z3 proves the constraints unsatisfiable (a timeout counts as sat)."""
    return solver(*constraints).check() != z3.unsat


def _values(s: z3.Solver, term: z3.BitVecRef, limit: int) -> list[int]:
    """Up to `limit` values `term` takes in models of `s` (s is restored)."""
    out: list[int] = []
    s.push()
    try:
        while len(out) < limit and s.check() == z3.sat:
            v = s.model().eval(term, model_completion=True).as_long()
            out.append(v)
            s.add(term != v)
    finally:
        s.pop()
    return out


#: Prefix lengths tried, longest first, for an address with too many values.
PREFIX_LENGTHS = (24, 16, 8)


def _prefix_set(s: z3.Solver, term: z3.BitVecRef, row) -> tuple[tuple[int, ...], int] | None:
    """(values, mask) when the address's top bits take 2..MAX_VALUES values in the models
    of `s` (the longest such prefix); None otherwise (a single prefix is `_fixed_bits`'s)."""
    for length in PREFIX_LENGTHS:
        if length >= row.width:
            continue
        shift = row.width - length
        values = _values(s, z3.Extract(row.width - 1, shift, term), MAX_VALUES + 1)
        if len(values) <= 1:
            return None
        if len(values) <= MAX_VALUES:
            mask = ((1 << length) - 1) << shift
            return tuple(sorted(v << shift for v in values)), mask
    return None


def _fixed_bits(s: z3.Solver, term: z3.BitVecRef, seen: list[int], width: int) -> Exact:
    """The bits of `term` that have one value in every model of `s` (seen: values found)."""
    first = seen[0]
    mask = 0
    for i in range(width):
        bit = first >> i & 1
        if any((v >> i & 1) != bit for v in seen):
            continue
        s.push()
        s.add(z3.Extract(i, i, term) != bit)
        if s.check() == z3.unsat:
            mask |= 1 << i
        s.pop()
    return Exact(first & mask, mask)


def _fixed(sets: dict[str, tuple[int, ...]]):
    for name, values in sets.items():
        if len(values) == 1:
            yield name, Exact(values[0], (1 << FLOWER_KEYS[name].width) - 1)


def _match(protocol: str, keys: dict[str, int]) -> FlowerMatch:
    return FlowerMatch(protocol, tuple((n, Exact(v, (1 << FLOWER_KEYS[n].width) - 1)) for n, v in keys.items()))


def _common(a: FlowerMatch, b: FlowerMatch) -> FlowerMatch:
    """The narrowest match containing both (same keys): per key the bits both agree on
    (a prefix for address keys, nothing for keys without masks)."""
    keys = []
    for (name, x), (_, y) in zip(a.keys, b.keys):
        row = FLOWER_KEYS[name]
        mask = x.mask & y.mask & ~(x.value ^ y.value)
        if row.mask == "prefix":
            mask = _prefix_part(mask, row.width)
        full = (1 << row.width) - 1
        if mask == 0 or (row.mask == "none" and mask != full):
            continue
        keys.append((name, Exact(x.value & mask, mask)))
    valid = _valid(a.protocol, {n: (x.value,) for n, x in keys})  # ports lose a dropped ip_proto
    return FlowerMatch(a.protocol, tuple((n, x) for n, x in keys if n in valid))


def _prefix_part(mask: int, width: int) -> int:
    """The leading ones of `mask`."""
    n = 0
    while n < width and mask >> (width - 1 - n) & 1:
        n += 1
    return ((1 << n) - 1) << (width - n)


def _valid(protocol: str, sets: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Drop keys flower would refuse in this combination (ports without a port protocol,
    ICMP keys without ICMP, tcp_flags without TCP, a zero address that only says "no IP
    header was read")."""
    proto = sets.get("ip_proto")
    one = proto[0] if proto and len(proto) == 1 else None
    out = {}
    for name, values in sets.items():
        row = FLOWER_KEYS[name]
        if row.ip_protos is not None:
            if name.startswith("icmp_"):
                need = {1} if protocol == "ip" else {58}
            else:
                need = set(row.ip_protos)
            if one is None or one not in need:
                continue
        if name in ("src_port", "dst_port") and (one is None or one not in PORT_PROTOS):
            continue
        out[name] = values
    return out
