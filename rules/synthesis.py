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
   After MAX_SHIELDS attempts the block is given up: its paths stay in software. So is a
   block, at its first counterexample with IPv4 options, when z3 proves that every packet of
   it has an options twin flower sees the same and the program treats otherwise (optiontwins.py:
   then no shields can make its proof go through without taking all of it). So is a
   block whose own paths are all map-decided (`map_decided`: with the maps as a freshly
   loaded program has them, every packet of them gets another outcome), before its first
   shield round where z3 settles that within EARLY_DECIDED_RLIMIT, else once its shield
   loop has run MAP_DECIDED_ROUND rounds: no shield can help it, since each of its packets
   then needs one (a filter is fixed while the maps may be as loaded). That round's proof
   query is not asked when a packet of the block's own paths is left past its shields
   (`_decided_left`: that packet with the maps as loaded is a counterexample of it).
4. **Lay out** (ruleset.py): prios per mask shape, chains for multi-key value sets; then
   the printed script is read back and proved (final.py) - what is printed is what is proved.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import z3

from analyzer.classify import classes
from analyzer.exploration import Exploration, Path
from analyzer.fields import IPV6_EXT_HEADERS, IPV6_FRAGMENT
from analyzer.symbolic import PACKET, PACKET_LEN, const_value, fresh_context, symbols

from .dissector import ADDR_TYPES, chain_keys, dissect, match_formula
from .flower import (
    FAMILIES,
    FLOWER_KEYS,
    IP_FLAG_FRAG,
    PORT_PROTOS,
    PROTOCOLS,
    VLAN_TYPES,
    Exact,
    FlowerMatch,
    allowed,
    chain_family,
    exact,
    protocol_name,
)
from .isolation import home, isolated, own_solver
from .optiontwins import no_shield_helps
from .reasons import Reason, constant_reads
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
#: z3's deterministic resource limit of `typical_implies` (whether typical packets satisfy an
#: assumption, the environment left out). Past it, the question is asked under the
#: environment as before: the limit bounds the cost, never an answer.
IMPLIED_RLIMIT = 100_000
#: Per query of `_key_values`' shortcut: z3's resource limit (deterministic, unlike a time:
#: a timeout that fires or not with the machine's load changes what z3 answers later in the
#: process, issue 14). A shortcut past it falls back to the plain enumeration, so this
#: bounds its cost, never its answer. xdp-filter's shortcut queries take ~500-4,100 except
#: one or two per tcp/udp object that z3 does not answer within millions (0.3 s per million);
#: the most any shortcut that answered took on 10 corpus and xdp-filter objects (issue 14,
#: session 14): 75,580 (qinq_tags), so 200,000 leaves room and cuts the hopeless ones early.
SHORTCUT_RLIMIT = 200_000
#: The first try of `_key_values`' claim around the model's map contents, before the
#: contents as loaded are tried (then the claim again within SHORTCUT_RLIMIT): xdp-filter's
#: answered claims take ~500-4,100 (above), its src_mac ones past 200,000 are answered as
#: loaded in under 1 ms.
FIRST_RLIMIT = 20_000
#: Per check of `_near_values`' query (z3's resource limit): its checks that find a value
#: take <2,000 on xdp-filter (ip_proto, addresses, MACs: all answered at that limit); a
#: query z3 does not answer within it (a VLAN ethertype whose bytes change the parse) only
#: finds no value, and the path's solver is asked as before: this bounds its cost.
NEAR_RLIMIT = 10_000
#: z3's deterministic resource limit of the question `map_decided` asks z3 (where the path's
#: witness does not answer it). Past it the path is taken as not map-decided: its block's
#: shield loop runs on as before, so the limit bounds the cost, never an answer. Asked of
#: every non-pass path of the xdp-filter objects in a trial, the questions z3 settled took
#: up to 1.8 million (alw_udp); those prove asks (alw_ip) up to 342,000 (issue 14, session 20).
MAP_DECIDED_RLIMIT = 2_000_000
#: Shield rounds after which `prove` asks whether the block's paths are all map-decided:
#: blocks most often fail or prove in fewer, and then the question costs nothing.
MAP_DECIDED_ROUND = 2
#: The resource limit of the same question asked before the first round (`_prove`): where z3
#: settles it within this, the answer is the one MAP_DECIDED_RLIMIT gives (a proof or a packet
#: is one whatever the limit), and a block whose paths are all map-decided is given up before
#: its shield rounds. xdp-filter's alw_ip proves its twelve map-decided drops in 6-58 ms each
#: (under 100,000), where alw_all's and dny_tcp's undecided ones run to the full limit
#: (0.25-0.33 s each): asked at this limit first, those cost a twentieth (issue 14). 0: not
#: asked before the first round.
EARLY_DECIDED_RLIMIT = 100_000
#: Why a block of map-decided paths is given up, before rules/reasons.py names the map (and
#: the header fields of its key) from the paths' inputs.
MAP_DECIDED = Reason(
    "not-expressible",
    "with the maps as a freshly loaded program has them (hash maps empty, arrays zeroed) the "
    "program gives every packet of this path another verdict: no filter fixed in the NIC can take them",
)

#: Why a block is given up when every packet of it has an IPv4-options twin that flower sees
#: the same and the program treats otherwise (rules/optiontwins.py): no shield can help.
#: Not-expressible, so that a path's inputs name a more specific cause where they can (IP
#: options read at fixed offsets, a map: rules/reasons.py).
OPTION_TWINS = Reason(
    "not-expressible",
    "every packet of this filter has a twin with other IPv4 options that flower sees the same and "
    "the program treats otherwise (z3): no pass rule can separate them (try --assume no-ip-options)",
)

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
#: Keys flower reads from the L4 header: never extracted from fragments (flower reads none).
L4_KEYS = ("tcp_flags", "icmp_code", "icmp_type", "src_port", "dst_port")
#: The tag keys of a VLAN protocol chain (outer tag, and inner when vlan_ethtype is a VLAN
#: type), extracted before the family's keys and generalised away last.
TAG_KEYS = {"vlan": ("vlan_prio", "vlan_id", "vlan_ethtype"), "cvlan": ("cvlan_prio", "cvlan_id", "cvlan_ethtype")}
#: Ethertypes a path's frames may have (skb protocol, vlan_ethtype) and still be split into
#: one block per protocol chain.
MAX_CHAINS = 4
#: Ethertypes a filter's protocol chain can name.
_NAMEABLE = frozenset(FAMILIES) | VLAN_TYPES
#: VLAN protocol chains a program's paths are split into at most (shields and reports
#: extract paths as one block).
MAX_SPLIT_CHAINS = 12

#: The share of the command's `--timeout` (Options.timeout, counted from Options.started)
#: by which synthesis stops taking paths and proving blocks: the rest stay in software,
#: and the printed script's proof, the layout and the report get the remainder.
SYNTHESIS_SHARE = 0.9
#: The keys a VLAN protocol chain fixes itself (with `protocol`).
CHAIN_KEYS = frozenset({"vlan_ethtype", "cvlan_ethtype"})
#: Masked values tried as a union for a flag key (`tcp_flags`) before it is left free.
MAX_CUBES = 8

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


def with_defaults(assume) -> tuple[str, ...]:
    """The assumptions a synthesizer works under when asked for `assume`: the defaults first,
    each once, in order (Synthesis.assumptions, RuleSet.assumptions)."""
    return tuple(dict.fromkeys(DEFAULT_ASSUMPTIONS + tuple(assume)))


class Synthesizer:
    """The synthesis state of one program: its paths' conditions and outcomes, the
    environment (assumptions, map and helper facts) every proof runs under, and `run()`."""

    def __init__(self, e: Exploration, assume, ifnames):
        for a in assume:
            if a not in ASSUMPTIONS:
                raise ValueError(f"unknown assumption {a!r} (known: {', '.join(ASSUMPTIONS)})")
        assume = with_defaults(assume)
        self.e, self.assume, self.ifnames = e, assume, ifnames
        self.d = dissect()
        self.maps = classes(e)[1]
        self.conds = {p.id: e.condition(p) for p in e.paths}
        self.env = e.environment() + assumption_constraints(self.assume)
        self.typical = typical_packet()
        self.typical_fragment = typical_packet(fragments=True)
        self.outcomes = {p.id: self.outcome(p) for p in e.paths}
        self.software: list[tuple[list[int], Reason]] = []
        self._blocks: dict[int, list[Block]] = {}
        #: (path id, outcome, split into VLAN chains) -> extract_all's z3 findings (shared by
        #: with_assumption): blocks' (protocol, sets, masked, set_masks), None: atypical only
        self.extracted: dict[tuple[int, Outcome, bool], list[tuple] | None] = {}
        #: path id -> (protocol, the keys with one value) of its unsplit block: what a shield
        #: reads of the path a counterexample takes (path_block); None: atypical only
        self.fixed_keys: dict[int, tuple[str, dict[str, int]] | None] = {}
        #: path id -> the model of a typical packet of it that extraction started from
        #: (`_typical`, `_unsplit`; not exploration's witness), in a z3 context of its own
        #: (`_keep`): what `with_assumption` hands on as `seeds`
        self.typical_models: dict[int, z3.ModelRef] = {}
        self._kept: z3.Context | None = None
        #: path id -> a model of it found under a weaker environment (the synthesizer this
        #: one was made from by `with_assumption`): `_witness` tries it after exploration's
        self.seeds: dict[int, z3.ModelRef] = {}
        #: blocks given up, by path: with the shields tried (counterexample.py shows why)
        self.failed: dict[int, Block] = {}
        #: rewrite outcomes' good sets (rewriteproof.py), by outcome
        self.rewrite_goods: dict[Outcome, z3.BoolRef] = {}
        #: VLAN protocol chains left to split paths into (each costs a whole key extraction;
        #: beyond, a path is one block as if untagged frames were all it takes)
        self.chain_budget = MAX_SPLIT_CHAINS
        #: paths offloaded by some of their blocks while another was given up: why the rest stays
        self.partial: dict[int, Reason] = {}
        #: map_decided's answers, by path id (None: z3 did not settle it within the limit
        #: asked, EARLY_DECIDED_RLIMIT); `as_loaded`'s map contents and its memo
        self.decided: dict[int, bool | None] = {}
        self._as_loaded: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}
        #: (the block `prove` is working on, its formula, `_typical_good`'s solvers by path)
        #: while it runs: `region` hands the formula out
        self._proving: tuple[Block, z3.BoolRef, dict[int, z3.Solver]] | None = None
        opts = e.options
        #: perf_counter() past which no path is extracted nor block proved (None: no budget)
        self.deadline = (
            None if opts.timeout is None or opts.started is None else opts.started + opts.timeout * SYNTHESIS_SHARE
        )

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

    def out_of_time(self) -> Reason | None:
        """Why synthesis stops here (the command's time budget ran out), or None."""
        if self.deadline is None or time.perf_counter() < self.deadline:
            return None
        return Reason("unknown", f"the time budget of {self.e.options.timeout:g} s ran out before synthesis finished")

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
            late = self.out_of_time()
            if late is not None:
                self.software.append(([p.id], late))
                continue
            for block in self.extract_all(p, o):
                same = next((b for b in blocks if _covers(b, block)), None)
                if same is not None:
                    if p.id not in same.paths:
                        same.paths.append(p.id)
                    continue
                if blocks and _merge_into(blocks[-1], block):
                    continue
                blocks.append(block)
        kept = []
        failed = []
        for b in blocks:
            late = self.out_of_time()
            if late is not None:
                b.why = late
                failed.append(b)
                continue
            self.prove(b, kept)
            if b.proved:
                kept.append(b)
            else:
                failed.append(b)
        # A path with several blocks (protocol chains, flag masks) some of which were proved
        # is offloaded in part: the failed blocks' packets stay in software, said per path.
        offloaded = {p for b in kept for p in b.paths}
        for b in failed:
            gone = [p for p in b.paths if p not in offloaded]
            if gone:
                self.software.append((gone, b.why))
            self.partial.update({p: b.why for p in b.paths if p in offloaded})
            self.failed.update({p: b for p in gone})
        return Synthesis(kept, self.software, self.assume, self.e.options.max_len)

    @functools.cached_property
    def loaded_maps(self) -> list[tuple]:
        """Exploration.maps_as_loaded: the map contents `as_loaded` puts in."""
        return self.e.maps_as_loaded()

    def as_loaded(self, expr: z3.ExprRef) -> z3.ExprRef:
        """`expr` with the maps as a freshly loaded program has them
        (Exploration.maps_as_loaded), simplified; memoised by term."""
        if not self.loaded_maps:
            return expr
        hit = self._as_loaded.get(expr.get_id())
        if hit is None:  # the term is kept with its answer: no id is reused while memoised
            hit = self._as_loaded[expr.get_id()] = (expr, z3.simplify(z3.substitute_funs(expr, *self.loaded_maps)))
        return hit[1]

    def map_decided(self, p: Path, rlimit: int = MAP_DECIDED_RLIMIT) -> bool:
        """Whether non-pass path `p` is decided by the maps: every packet of it (under any map
        contents, helper results and ctx) gets another outcome with the same helper results
        and ctx but the maps as loaded (`as_loaded`). Then no filter can take any of its
        packets soundly, since a filter is fixed while the maps may be as loaded. Exact where
        it says yes: z3 proves it (in a context of its own, under `rlimit`); a path whose
        witness keeps its outcome with the maps as loaded, or that z3 does not settle within
        the limit, is not map-decided. An answer z3 gave is kept for any limit; one it did
        not give under a lower limit (EARLY_DECIDED_RLIMIT) is asked again under a higher."""
        if p.id in self.decided:
            known = self.decided[p.id]
            if known is not None or rlimit <= EARLY_DECIDED_RLIMIT:
                return bool(known)
        o = self.outcomes[p.id]
        answer: bool | None = False
        if isinstance(o, Outcome) and not o.is_pass and not is_rewrite(o) and self.loaded_maps:
            # another outcome with the maps as loaded: what every packet of a map-decided path gets
            other = z3.And(*[self.as_loaded(x) for x in self.env], z3.Not(self.as_loaded(self.good(o))))
            w = p.witness
            held = w is not None and z3.is_true(w.eval(z3.And(*self.env, self.conds[p.id]), model_completion=True))
            if not (held and z3.is_false(w.eval(other, model_completion=True))):
                # (else the witness is a packet of the path that keeps its outcome: not decided)
                r, _ = isolated(self.env, self.conds[p.id], z3.Not(other), rlimit=rlimit)
                answer = None if r == z3.unknown and rlimit < MAP_DECIDED_RLIMIT else r == z3.unsat
        self.decided[p.id] = answer
        return bool(answer)

    def extract(self, p: Path, outcome: Outcome, quiet: bool = False) -> Block | None:
        """Path `p`'s first block (extract_all), or None."""
        blocks = self.extract_all(p, outcome, quiet)
        return blocks[0] if blocks else None

    def extract_all(self, p: Path, outcome: Outcome, quiet: bool = False) -> list[Block]:
        """Path `p`'s blocks: one per protocol chain its frames take where a VLAN tag is in
        it (flower has one `protocol` and one vlan_ethtype per filter), and per masked value
        of a flag key the path reads as an OR of flag tests. Extracted under typical packets;
        a path only fragments take is extracted from them (no L4 keys, with ip_flags). New
        Blocks each time: the z3 work is done once per path and shared with `blocks_for`, the
        counterexamples and the suggestions' synthesis (`with_assumption`)."""
        split = not quiet and self.chain_budget > 0
        key = (p.id, outcome, split)
        if key not in self.extracted:
            found, one = self._extract_all(p, outcome, split)
            self.extracted[key] = (
                None if found is None else [(b.protocol, b.sets, b.masked, b.set_masks) for b in found]
            )
            if one:  # no VLAN chain to split into: the unsplit extraction is the same
                self.extracted[(p.id, outcome, False)] = self.extracted[key]
        found = self.extracted[key]
        if found is None:
            if not quiet:
                self.software.append(([p.id], ATYPICAL_ONLY))
            return []
        return [
            Block(protocol, dict(sets), outcome, [p.id], masked=dict(masked), set_masks=dict(set_masks))
            for protocol, sets, masked, set_masks in found
        ]

    def with_assumption(self, name: str) -> Synthesizer:
        """A synthesizer for the same program under one more assumption. When typical packets
        and typical fragments (the only ones extraction looks at) already satisfy it, the
        extracted blocks are the same: they are shared (z3 proves that implication first), and
        so is what `path_block` found (`fixed_keys`: extraction's first steps, asked of the
        same packets), so a shield the other's proofs make asks nothing again.

        Otherwise (no-fragments: typical packets include IPv6 ones with a Fragment header)
        the other extracts afresh, but starts from the typical packets this one found where
        they satisfy the assumption too (`seeds`, `_witness`: evaluated, as exploration's
        witness is). Such a packet is a model of the query extraction would otherwise check
        to find one (the path under the environment and typical packets), and the blocks do
        not depend on which model they start from: every key's value set is asked of the
        path's solver, the model only makes the first questions smaller (`_key_values`).
        Each saves a check of the path's whole condition (xdp-filter: 0.04-0.12 s a path).
        Per-path sharing of `extracted` is not sound here: typical packets with an IPv6
        Fragment header take most xdp-filter paths, so no-fragments changes their queries.

        Whether typical packets satisfy the assumption is first asked without the
        environment (`typical_implies`: no-ip-options, which typical packets' IHL 5 implies):
        unsat there is unsat under it too. Only where that is not proved is the question
        asked under the environment, in z3's main context, as before."""
        other = Synthesizer(self.e, self.assume + (name,), self.ifnames)
        other.seeds = {**self.seeds, **self.typical_models}
        added = z3.And(assumption_constraints([name]))
        typical = z3.Or(self.typical, self.typical_fragment)
        if typical_implies(typical, added) or not maybe_sat(*self.env, typical, z3.Not(added)):
            other.extracted = self.extracted
            other.fixed_keys = self.fixed_keys
        return other

    def _typical_solver(self, p: Path) -> tuple[z3.Solver, bool] | None:
        """A solver holding path `p` under typical packets (else typical fragments: then
        True), or None when only atypical packets take it."""
        found = self._typical(p)
        return None if found is None else found[:2]

    def _typical(self, p: Path) -> tuple[z3.Solver, bool, z3.ModelRef] | None:
        """_typical_solver with the model of its satisfiable check: the queries after it
        start from that model instead of asking the solver for one again (each check of the
        path's whole condition costs as much as the first)."""
        cond = z3.And(self.conds[p.id], *self.env)
        s = solver(cond, self.typical)
        model = self._witness(p, self.typical)
        if model is None and s.check() == z3.sat:
            model = s.model()
        if model is not None:
            self._keep(p, model)
            return s, False, model
        s = solver(cond, self.typical_fragment)
        return (s, True, s.model()) if s.check() == z3.sat else None

    def _witness(self, p: Path, *extra: z3.BoolRef) -> z3.ModelRef | None:
        """The model exploration found of path `p` (Path.witness), else the one a weaker
        synthesizer found (`seeds`), when it also satisfies the environment (assumptions
        included) and `extra`, evaluated, not asked: then it is a model of the query
        `solver(condition, *env, *extra)` and that query need not be checked. None
        otherwise (the query decides)."""
        seed = self.seeds.get(p.id)
        if seed is not None and seed.ctx is not z3.main_ctx():  # kept (`_keep`): brought home once
            seed = self.seeds[p.id] = home(seed)
        for m in (p.witness, seed):
            if m is not None and all(
                z3.is_true(m.eval(f, model_completion=True)) for f in (self.conds[p.id], *self.env, *extra)
            ):
                return m
        return None

    def _keep(self, p: Path, model: z3.ModelRef) -> None:
        """Record `model`, a typical packet of path `p`, in `typical_models` (the first one;
        exploration's witness and a seed are not: a synthesizer made by `with_assumption`
        tries them anyway). Translated into
        a context of its own: kept in the main context, ~20 models would keep their terms
        alive and change the ids z3 gives later terms, and with them the models later queries
        return (xdpfilt_alw_ip's shields and report, issue 14), even those asked in contexts
        of their own (rules/isolation.py: the same constraints, another model)."""
        if p.id in self.typical_models or model is p.witness or model is self.seeds.get(p.id):
            return
        if self._kept is None:
            self._kept = fresh_context()
        self.typical_models[p.id] = model.translate(self._kept)

    def _unsplit(self, p: Path) -> tuple[z3.Solver, bool, z3.ModelRef, tuple[str, dict[str, int]]] | None:
        """_typical and _one_chain together (None: only atypical packets take the path).
        First one query: a typical packet of the path whose protocol is no family's (a
        VLAN tag, another ethertype) makes the chain `all` whatever other protocols the
        path takes, and is a model of the path under typical packets (xdp-filter's paths
        all take tagged frames: one check of the whole condition instead of two).

        With exploration's witness of the path a typical packet: its protocol is one the
        path takes, so if it is no family's, the chain is `all` without a query; if it is
        family f, one query (another protocol besides f?) decides: none, f's chain; one,
        `all` whether that one is a family's (two protocols: _one_chain's `all`) or not
        (the probe's `all`)."""
        cond = z3.And(self.conds[p.id], *self.env)
        model = self._witness(p, self.typical)
        if model is not None:
            s = solver(cond, self.typical)
            self._keep(p, model)
            eth = model.eval(self.d.skb_protocol, model_completion=True).as_long()
            if eth not in FAMILIES:
                return s, False, model, ("all", {})
            more = self._tagged(p, model, eth)
            if not more:
                s.push()
                s.add(self.d.skb_protocol != eth)
                more = s.check() == z3.sat  # not sat: as _one_chain's enumeration stops (f alone)
                s.pop()
            return s, False, model, ("all" if more else protocol_name(eth), {})
        other = [self.d.skb_protocol != f for f in FAMILIES]
        probe = solver(cond, self.typical, *other)
        if probe.check() == z3.sat:
            model = probe.model()
            self._keep(p, model)
            return solver(cond, self.typical), False, model, ("all", {})
        found = self._typical(p)
        if found is None:
            return None
        s, frags, model = found
        return s, frags, model, self._one_chain(s, model)

    def _tagged(self, p: Path, model: z3.ModelRef, eth: int) -> bool:
        """Whether `model` (a typical packet of path `p` with ethertype `eth`) with a VLAN
        tag inserted before its ethertype (802.1Q, else 802.1ad; TCI 0; the frame 4 bytes
        longer) is still a typical packet of the path, of another skb protocol: evaluated,
        not asked (a generic parser walks the tag and takes the same path). True proves
        that the path takes another protocol than `eth` (the tagged frame is one); False
        proves nothing (_unsplit asks z3)."""
        claim = z3.And(self.conds[p.id], *self.env, self.typical, self.d.skb_protocol != eth)
        old = model.eval(PACKET, model_completion=True)
        length = model.eval(PACKET_LEN, model_completion=True)
        i = z3.BitVec("tag!i", 64)
        for tpid in sorted(VLAN_TYPES):
            # bytes 0-11 (the MACs) stay, 12-15 the tag, the rest moves 4 bytes on
            hi, lo, zero = (z3.BitVecVal(v, 8) for v in (tpid >> 8, tpid & 0xFF, 0))
            tag = z3.If(i == 12, hi, z3.If(i == 13, lo, zero))
            pkt = z3.Lambda([i], z3.If(z3.ULT(i, 12), old[i], z3.If(z3.ULT(i, 16), tag, old[i - 4])))
            moved = z3.substitute(claim, (PACKET, pkt), (PACKET_LEN, length + 4))
            if z3.is_true(model.eval(moved, model_completion=True)):
                return True
        return False

    def _extract_all(self, p: Path, outcome: Outcome, split: bool) -> tuple[list[Block] | None, bool]:
        """extract_all's work: None when only atypical packets take the path; and whether
        the result is also the unsplit one (split asked, but one chain without a VLAN tag)."""
        if split:
            found = self._typical(p)
            if found is None:
                return None, True
            s, frags, model = found
            memo: dict = {}
            first = self._first_tagged(s, model, memo)
            done = {}
            if first is not None:
                # the chain _extract_chains would look at first: when its blocks decide
                # nothing beyond it, the rest of the enumeration is not needed
                done[0] = self._extract_chains(s, p, outcome, [first], frags, model)
                if done[0] is None:
                    self.chain_budget = 0
                    return self._extract_chains(s, p, outcome, [self._no_split(s, model, memo)], frags, model), True
            chains = self._chains(s, model, memo)
            if first is not None:
                done = {chains.index(first): done[0]}
        else:
            found = self._unsplit(p)
            if found is None:
                return None, True
            s, frags, model, chain = found
            chains = [chain]
        out = self._extract_chains(s, p, outcome, chains, frags, model, done if split else None)
        if out is None:
            # A VLAN chain's blocks constrain nothing beyond the chain itself: the program's
            # tag parsing decides nothing there (generic parsers such as xdp-filter's walk the
            # tags and then read the same fields). Stop splitting, here and for later paths.
            # Extraction only proposes blocks, the proofs decide, so this can lose a VLAN
            # filter but never make one wrong; each chain costs a full key enumeration.
            self.chain_budget = 0
            one_chain = self._no_split(s, model, memo) if split else self._one_chain(s, model)
            return self._extract_chains(s, p, outcome, [one_chain], frags, model), True
        if len(chains) > 1 or chains[0][1]:
            self.chain_budget -= len(chains)
        one = len(chains) == 1 and not chains[0][1] and PROTOCOLS.get(chains[0][0]) not in VLAN_TYPES
        return out, one

    def _extract_chains(
        self,
        s: z3.Solver,
        p: Path,
        outcome: Outcome,
        chains,
        frags: bool,
        model: z3.ModelRef | None = None,
        done: dict[int, list[Block]] | None = None,
    ) -> list[Block] | None:
        """The blocks of each protocol chain (_extract_all), or None as soon as a VLAN chain's
        blocks constrain no key beyond the chain's own (CHAIN_KEYS). `model`: a model of `s`
        (used where it also satisfies a chain's constraints).

        The chains are extracted tagged ones first, two tags before one (a chain whose tags
        decide nothing is most often one the program's tag walk does not look into), so a
        None costs as few extractions as can be; the blocks come out in `chains`' order."""
        order = sorted(
            range(len(chains)), key=lambda i: (not chains[i][1], chains[i][1].get("vlan_ethtype") not in VLAN_TYPES, i)
        )
        got: dict[int, list[Block]] = dict(done or {})  # chains extracted already
        for i in order:
            if i in got:
                continue
            protocol, chain = chains[i]
            added = [self.d.skb_protocol == PROTOCOLS[protocol]] if protocol != "all" else []
            added += [self.d.keys[name] == value for name, value in chain.items()]
            if added:  # a scope only for constraints: a pop drops what the solver learnt (~13 ms)
                s.push()
                s.add(*added)
            got[i] = self._extract_chain(s, p, outcome, protocol, chain, frags, _still(model, added))
            if added:
                s.pop()
            if chain and not any(_decides_beyond_chain(b) for b in got[i]):
                return None
        return [b for i in range(len(chains)) for b in got[i]]

    def _one_chain(self, s: z3.Solver, model: z3.ModelRef | None = None) -> tuple[str, dict[str, int]]:
        """The protocol of all models of `s`, or `all` (no split into VLAN chains). `model`:
        one model of `s`, whose protocol need not be asked again."""
        protocols = _values(s, self.d.skb_protocol, 2, _seen(model, self.d.skb_protocol))
        eth = protocols[0] if len(protocols) == 1 else None
        return (protocol_name(eth) if eth in FAMILIES else "all", {})

    def _chains(
        self, s: z3.Solver, model: z3.ModelRef | None = None, memo: dict | None = None
    ) -> list[tuple[str, dict[str, int]]]:
        """(protocol, fixed vlan_ethtype/cvlan_ethtype) per protocol chain the models of `s`
        take: one chain when no VLAN tag is involved (protocol `all` when the ethertype
        varies), else every combination of nameable ethertypes (at most MAX_CHAINS per level;
        a level with more, or with another ethertype, is left free). `model`: a model of `s`;
        `memo`: the value sets found so far (_level_values), shared with _first_tagged."""
        memo = {} if memo is None else memo
        protocols = self._protocols(s, model, memo)
        if protocols is None:
            return [self._no_split(s, model, memo)]
        out: list[tuple[str, dict[str, int]]] = []
        for eth in sorted(protocols):
            if eth not in VLAN_TYPES:
                out.append((protocol_name(eth), {}))
                continue
            levels = self._levels(s, {"skb": eth}, ("vlan_ethtype", "cvlan_ethtype"), model, memo)
            out += [(protocol_name(eth), chain) for chain in levels]
        return out

    def _protocols(self, s: z3.Solver, model: z3.ModelRef | None, memo: dict) -> list[int] | None:
        """The ethertypes (skb protocol) of the models of `s` when they split into VLAN
        protocol chains (a VLAN type among them, at most MAX_CHAINS, all nameable), else None."""
        protocols = self._level_values(s, {}, "skb", model, memo)
        if not VLAN_TYPES & set(protocols) or len(protocols) > MAX_CHAINS or not set(protocols) <= _NAMEABLE:
            return None
        return protocols

    def _no_split(self, s: z3.Solver, model: z3.ModelRef | None, memo: dict) -> tuple[str, dict[str, int]]:
        """_chains' one chain where the models of `s` do not split; also `_one_chain(s, model)`
        wherever `memo` holds the skb protocol's values (_extract_all, once a split is given
        up), without its query. Exact: both lists start with `model`'s protocol (`_seen`),
        then add values of the same term in the models of the same `s` while there are any,
        `_one_chain`'s up to 2 and the memo's up to MAX_CHAINS + 1; so either both hold one
        value, the same, or both more than one, and the chain is that family's, else `all`."""
        protocols = self._level_values(s, {}, "skb", model, memo)
        eth = protocols[0] if len(protocols) == 1 else None
        return (protocol_name(eth) if eth in FAMILIES else "all", {})

    def _level_values(
        self, s: z3.Solver, fixed: dict[str, int], name: str, model: z3.ModelRef | None, memo: dict
    ) -> list[int]:
        """Up to MAX_CHAINS + 1 values of key `name` ("skb": the skb protocol) in the models
        of `s` where the keys `fixed` (skb first, then the tag levels) have those values;
        `model`: a model of `s`; asked once per `memo`."""
        key = (tuple(fixed.items()), name)
        if key not in memo:
            d = self.d
            term = d.skb_protocol if name == "skb" else d.keys[name]
            added = [(d.skb_protocol if n == "skb" else d.keys[n]) == v for n, v in fixed.items()]
            s.push()
            s.add(*added)
            memo[key] = _values(s, term, MAX_CHAINS + 1, _seen(_still(model, added), term))
            s.pop()
        return memo[key]

    def _levels(
        self, s: z3.Solver, fixed: dict[str, int], names: tuple[str, ...], model: z3.ModelRef | None, memo: dict
    ) -> list[dict[str, int]]:
        """The combinations of values of the ethertype keys `names` (vlan_ethtype, then
        cvlan_ethtype under a VLAN type) in the models of `s` where the keys `fixed` have
        those values (`model`: a model of `s`)."""
        if not names:
            return [{}]
        values = self._nameable(s, fixed, names, model, memo)
        if values is None:
            return [{}]
        out = []
        for v in values:
            deeper = self._levels(s, {**fixed, names[0]: v}, names[1:], model, memo) if v in VLAN_TYPES else [{}]
            out += [{names[0]: v, **rest} for rest in deeper]
        return out

    def _nameable(
        self, s: z3.Solver, fixed: dict[str, int], names: tuple[str, ...], model: z3.ModelRef | None, memo: dict
    ) -> list[int] | None:
        """The values, sorted, of the first of `names` (_levels) when it is a level of
        chains (at most MAX_CHAINS, all nameable), else None."""
        values = self._level_values(s, fixed, names[0], model, memo)
        nameable = _NAMEABLE if len(names) > 1 else set(FAMILIES)  # flower matches two tags, no third
        if not values or len(values) > MAX_CHAINS or not set(values) <= nameable:
            return None
        return sorted(values)

    def _first_tagged(self, s: z3.Solver, model: z3.ModelRef | None, memo: dict) -> tuple[str, dict[str, int]] | None:
        """The chain of _chains(s) that _extract_chains extracts first when it is a VLAN
        chain (tags fixed): the first with two tags, else the first with one; found asking
        only the levels before it (the same value sets _chains then reads from `memo`).
        None when the models of `s` do not split or no chain fixes a tag."""
        protocols = self._protocols(s, model, memo)
        if protocols is None:
            return None
        one = None
        names = ("vlan_ethtype", "cvlan_ethtype")
        for eth in sorted(set(protocols) & VLAN_TYPES):
            values = self._nameable(s, {"skb": eth}, names, model, memo)
            if values is None:
                continue
            two = [v for v in values if v in VLAN_TYPES]
            if two:
                inner = self._levels(s, {"skb": eth, names[0]: two[0]}, names[1:], model, memo)
                return (protocol_name(eth), {names[0]: two[0], **inner[0]})
            one = one or (protocol_name(eth), {names[0]: values[0]})
        return one

    def _extract_chain(
        self,
        s: z3.Solver,
        p: Path,
        outcome: Outcome,
        protocol: str,
        chain: dict[str, int],
        frags: bool,
        model: z3.ModelRef | None = None,
    ) -> list[Block]:
        """The block(s) of one protocol chain: per key, its value set (few values), its
        prefixes or fixed bits (many), or a union of masked values (a flag key). `model`: a
        model of `s` if one is known (else z3 is asked for one)."""
        fixed = {n: exact(n, v) for n, v in chain.items()}
        names = _key_names(protocol, fixed, frags)
        vlan = PROTOCOLS[protocol] in VLAN_TYPES  # a chain view only where tags are: smaller terms
        keys = chain_keys(FlowerMatch(protocol, tuple(fixed.items())), self.d) if vlan else self.d.keys
        sets: dict[str, tuple[int, ...]] = {}
        masked: dict[str, Exact] = {}
        set_masks: dict[str, int] = {}
        free: list[str] = []
        if model is None:
            model = s.model() if s.check() == z3.sat else None
        for name in names:
            term = keys[name]
            row = FLOWER_KEYS[name]
            top = min(PREFIX_LENGTHS) if row.mask == "prefix" else 0
            values = _key_values(s, model, term, MAX_VALUES + 1, self.loaded_maps, top)
            if values is None:
                # what enumerating would conclude, in one small query instead of 65 checks
                # and a prefix/fixed-bit search: the key does not matter, or is left free
                if 1 << FLOWER_KEYS[name].width > MAX_VALUES + 1 and FLOWER_KEYS[name].mask != "none":
                    free.append(name)
                continue
            if len(values) == 1 << FLOWER_KEYS[name].width:
                continue  # every value (vlan_prio, ip_flags): the key does not matter
            if len(values) <= MAX_VALUES:
                sets[name] = tuple(sorted(values))
                continue
            prefixes = _prefix_set(s, term, row, values) if row.mask == "prefix" else None
            if prefixes is not None:
                sets[name], set_masks[name] = prefixes
            elif FLOWER_KEYS[name].mask != "none":
                bits = _fixed_bits(s, term, values, FLOWER_KEYS[name].width)
                if FLOWER_KEYS[name].mask == "prefix":
                    bits = Exact(bits.value, _prefix_part(bits.mask, FLOWER_KEYS[name].width))
                if bits.mask:
                    masked[name] = Exact(bits.value & bits.mask, bits.mask)
                else:
                    free.append(name)
        sets = _valid(protocol, sets)
        masked = {n: v for n, v in masked.items() if n in _valid(protocol, {**sets, n: (0,)})}
        set_masks = {n: m for n, m in set_masks.items() if n in sets}
        block = Block(protocol, sets, outcome, [p.id], masked=masked, set_masks=set_masks)
        for name in free:
            if FLOWER_KEYS[name].kind != "flags" or name not in _valid(protocol, {**sets, name: (0,)}):
                continue
            cubes = self._cubes(s, keys[name], block, self.typical_fragment if frags else self.typical)
            if cubes:
                return [
                    Block(protocol, dict(sets), outcome, [p.id], masked={**masked, name: c}, set_masks=dict(set_masks))
                    for c in cubes
                ]
        return [block]

    def _cubes(self, s: z3.Solver, term: z3.BitVecRef, block: Block, typical: z3.BoolRef) -> list[Exact] | None:
        """Masked values of a flag key (its value `term`) whose union holds every value the
        key takes in the models of `s` (the path: an OR of masked flag tests). Each starts at
        a value the path takes and is widened bit by bit while the values it adds hold no
        typical packet of `block` that gets another outcome (the proof then judges each).
        None: the key does not matter in the block, a value cannot be widened at all, or more
        than MAX_CUBES are needed."""
        width = term.size()
        bad = [*self.env, typical, block.formula(self.d), z3.Not(self.good(block.outcome))]
        if not maybe_sat(*bad):
            return None  # the block is right without the key
        cubes: list[Exact] = []
        s.push()
        try:
            while s.check() == z3.sat:
                if len(cubes) == MAX_CUBES:
                    return None
                v = s.model().eval(term, model_completion=True).as_long()
                mask = (1 << width) - 1
                for i in reversed(range(width)):
                    trial = mask & ~(1 << i)
                    if not maybe_sat(*bad, term & trial == v & trial, term & mask != v & mask):
                        mask = trial
                if mask == (1 << width) - 1:
                    return None  # not a test of some bits: values one by one are not worth it
                cubes.append(Exact(v & mask, mask))
                s.add(term & mask != v & mask)
        finally:
            s.pop()
        return cubes

    def prove(self, b: Block, earlier: list[Block]) -> None:
        """Prove block `b` past the `earlier` blocks (set b.proved), adding pass shields for
        counterexamples, or give it up (set b.why); the module's docstring, steps 2-3."""
        good = self.good(b.outcome)
        taken = self.reach(earlier)
        region = b.formula(self.d)  # built in this order as ever: z3 numbers new terms as made
        self._proving = (b, region, {})
        try:
            self._prove(b, good, taken, region)
        finally:
            self._proving = None

    def region(self, b: Block) -> z3.BoolRef:
        """b.formula(self.d): the one `prove` built when it is working on `b` (its sets do
        not change meanwhile). Building it is Python work (a big block - 48 ports, 48
        addresses - takes 15-25 ms a build, issue 14) and gives z3 nothing new: the same
        terms, hash-consed, while prove holds them, so no answer or model moves."""
        if self._proving is not None and self._proving[0] is b:
            return self._proving[1]
        return b.formula(self.d)

    def _prove(self, b: Block, good: z3.BoolRef, taken: z3.BoolRef, region: z3.BoolRef) -> None:
        twins = self._twin_header(b)  # where the options-twin proof is asked, if anywhere
        for rounds in range(MAX_SHIELDS):
            shields = [match_formula(m, self.d) for m in b.shields]
            if rounds == 0 and EARLY_DECIDED_RLIMIT and self._decided_left(b, taken, region, [], EARLY_DECIDED_RLIMIT):
                b.why = MAP_DECIDED  # settled cheaply: no shield round runs
                return
            if rounds == MAP_DECIDED_ROUND and self._decided_left(b, taken, region, shields):
                b.why = MAP_DECIDED  # what the round's counterexample would lead to (_decided_left)
                return
            r, model = isolated(
                self.env, taken, region, *[z3.Not(x) for x in shields], z3.Not(good), timeout_ms=QUERY_TIMEOUT_MS
            )
            if r == z3.unsat:
                # Proved - but vacuously if the shields (or earlier blocks) take every packet
                # of the block's own paths: then nothing is offloaded, say so here.
                if not self._own_left(b, [*self.env, taken, region, *[z3.Not(x) for x in shields]]):
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
            if rounds == MAP_DECIDED_ROUND and all(self.map_decided(self.e.paths[p]) for p in b.paths):
                b.why = MAP_DECIDED
                return
            if twins is not None and model.eval(_byte(twins[1]) & 0x0F, model_completion=True).as_long() != 5:
                # the first counterexample with IPv4 options: can any shield help at all? (only
                # asked of paths that read a byte at a fixed offset options move: else a twin is
                # treated alike, and the query costs ~0.3 s to say so on xdp-filter)
                chain, l3 = twins
                own = [self.conds[p] for p in b.paths]
                moved = any(o >= l3 + 20 for c in own for o in constant_reads(c))
                if moved and no_shield_helps(
                    self.env, taken, region, z3.Or(own), good, chain, l3, self.e.options.max_len
                ):
                    b.why = OPTION_TWINS
                    return
                twins = None
            shield = self.shield(b, model, good)
            b.shields = self.widen(b, good, shield)
        b.why = Reason(
            "not-expressible",
            f"not proved after {MAX_SHIELDS} shields (flower cannot separate what the program decides)",
        )

    def _decided_left(
        self, b: Block, taken: z3.BoolRef, region: z3.BoolRef, shields: list[z3.BoolRef], rlimit=MAP_DECIDED_RLIMIT
    ) -> bool:
        """Whether prove's query of this round (`_prove`: the environment, past earlier
        blocks `taken`, in the `region`, past the `shields`, not good) would be sat and the
        block then given up as MAP_DECIDED, known without asking it: block `b`'s own paths
        are all map-decided and some packet of them is in the query's region (`_own_left`).
        That packet, with the maps as loaded (its helper results and ctx kept), is still
        there - taken, region and shields read no map: checked here, else False - and
        satisfies the environment as loaded and gets another outcome (`map_decided`): a
        counterexample of the query. The loop used nothing of that round's counterexample
        but that there is one (no shield is made from it), and the query was one of prove's
        costliest on xdp-filter's alw_ip (its IPv4 address block's: 1.2 M of prove's 5.0 M
        z3 work units, ~0.2 s; issue 14). Where z3 does not answer `_own_left`'s check (its
        timeout), a packet counts as left, as there: the block is given up, never claimed.
        `rlimit`: map_decided's (EARLY_DECIDED_RLIMIT before the first round)."""
        if not all(self.map_decided(self.e.paths[p], rlimit) for p in b.paths):
            return False
        if any(n.startswith("map.") for t in [taken, region, *shields] for n in symbols(t)):
            return False
        return self._own_left(b, [*self.env, taken, region, *[z3.Not(x) for x in shields]])

    def _own_left(self, b: Block, past: list[z3.BoolRef]) -> bool:
        """Whether some packet of block `b`'s own paths satisfies `past` (prove's: the
        environment, past earlier blocks, in the region, past the shields): a model
        `_witness` finds of one of the paths in which `past` holds - evaluated, not asked:
        such a model is a model of the query, whose answer is then sat (the 48-OR stress
        programs' suggestions: the kept typical packet is one, and saves a check of ~20-30
        ms) - else z3's answer."""
        if any(self._witness(self.e.paths[pid], *past) is not None for pid in b.paths):
            return True
        own = z3.Or([self.conds[p] for p in b.paths])
        return solver(*past, own).check() != z3.unsat

    def _twin_header(self, b: Block) -> tuple[FlowerMatch, int] | None:
        """Block `b`'s protocol chain and where its IPv4 header starts (14, 18 or 22: after
        the chain's tags) when `prove` may ask whether options twins leave no shield any use
        (rules/optiontwins.py): an IPv4 block whose outcome rewrites nothing (a rewrite's
        proof reads the output bytes too), with IP options not assumed away (then no twin is
        a packet). Else None."""
        chain = {n: v for n, v in _fixed(b.sets) if n in ("vlan_ethtype", "cvlan_ethtype")}
        if is_rewrite(b.outcome) or "no-ip-options" in self.assume or chain_family(b.protocol, chain) != "ip":
            return None
        inner = "vlan_ethtype" in chain and chain["vlan_ethtype"].value in VLAN_TYPES
        return FlowerMatch(b.protocol, tuple(chain.items())), 14 + 4 * ((PROTOCOLS[b.protocol] in VLAN_TYPES) + inner)

    def path_block(self, model: z3.ModelRef) -> tuple[str, dict[str, int]] | None:
        """The protocol and single-valued keys of the unsplit block of the path the model's
        packet takes (None if only atypical packets take it): all a shield reads of it."""
        for p in self.e.paths:
            if z3.is_true(model.eval(self.conds[p.id], model_completion=True)):
                if p.id not in self.fixed_keys:
                    self.fixed_keys[p.id] = self._fixed_keys(p)
                return self.fixed_keys[p.id]
        return None

    def _fixed_keys(self, p: Path) -> tuple[str, dict[str, int]] | None:
        """path_block's work: extraction's first steps (extract_all, unsplit) asking each
        key for two values, not for its whole value set. Only whether a key has a second
        value counts: where `_flipped` finds one by evaluation, it is not asked."""
        found = self._unsplit(p)
        if found is None:
            return None
        s, frags, model, (protocol, _) = found
        s.push()
        added = [self.d.skb_protocol == PROTOCOLS[protocol]] if protocol != "all" else []
        s.add(*added)
        model = _still(model, added)
        sets = {}
        for name in _key_names(protocol, {}, frags):
            seen = _seen(model, self.d.keys[name])
            if seen and _flipped(model, self.d.keys[name], seen[0], s.assertions()):
                continue  # two values: not fixed
            values = _values(s, self.d.keys[name], 2, seen)
            if len(values) == 1:
                sets[name] = (values[0],)
        s.pop()
        return protocol, {n: v[0] for n, v in _valid(protocol, sets).items()}

    def block_for(self, p: Path) -> Block | None:
        """Path `p`'s first extracted block (blocks_for), or None."""
        blocks = self.blocks_for(p)
        return blocks[0] if blocks else None

    def blocks_for(self, p: Path) -> list[Block]:
        """Path `p`'s own extracted blocks, unproved (cached; none: only atypical packets
        take it). A path without a rule outcome is extracted as if it passed."""
        if p.id not in self._blocks:
            o = self.outcomes[p.id]
            self._blocks[p.id] = self.extract_all(p, o if isinstance(o, Outcome) else PASS, quiet=True)
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
        chain = {n: v for n, v in _fixed(b.sets) if n in ("vlan_ethtype", "cvlan_ethtype")}
        only = SHIELD_ONLY if chain_family(b.protocol, chain) in ("ip", "ipv6") else ()
        names = _key_names(b.protocol, chain, False, only)
        # an address key is compared only where the walk set its family's addr_type: on a
        # packet whose walk did not (IPv4 IHL < 5), a shield with `dst_ip 0.0.0.0` - the value
        # the dissector's term reads there - would not take the packet it is made from
        addr_type = model.eval(self.d.keys["addr_type"], model_completion=True).as_long()
        names = [n for n in names if ADDR_TYPES.get(FLOWER_KEYS[n].addr_struct, addr_type) == addr_type]
        seen = {n: model.eval(self.d.keys[n], model_completion=True).as_long() for n in names}
        taken = self.path_block(model)
        if taken is not None and taken[0] == b.protocol:
            # The keys that path fixes, where the packet's flower view agrees: its natural
            # region, cut down to what flower sees of this packet.
            fixed = dict(taken[1])
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
        region = z3.And(self.region(b), good, *self.env)
        narrowest = match_formula(_match(b.protocol, keys), self.d)
        # Typical packets of the block the narrowest shield takes: asked first, since they
        # are also packets of the block it takes (one query where there are, as most often)
        typical = self._good_check(b, [region, self.typical, narrowest], [self.typical, narrowest])
        if typical == z3.sat or maybe_sat(region, narrowest):
            region = z3.And(region, self.typical)
            if typical != z3.unsat:
                return _match(b.protocol, keys)  # flower cannot separate: the narrowest shield
        for n in names:
            if n not in keys or (n in b.sets and len(b.sets[n]) == 1):
                continue
            trial = {k: v for k, v in keys.items() if k != n}
            trial = {k: v[0] for k, v in _valid(b.protocol, {k: (v,) for k, v in trial.items()}).items()}
            if not maybe_sat(region, match_formula(_match(b.protocol, trial), self.d)):
                keys = trial
        return _match(b.protocol, keys)

    def _good_check(self, b: Block, query: list[z3.BoolRef], extra: list[z3.BoolRef]) -> z3.CheckSatResult:
        """solver(*query).check() for a `query` that asks for a packet of block `b` the
        program gives its outcome (good), with `extra`. Unless the outcome is a rewrite,
        good is the OR of the conditions of the paths with that outcome: the block's own
        paths first, then the others, one at a time (smaller queries; the OR has a packet
        iff one of them has): the same answer (unknown where one is and none is sat). The
        shield loop's questions (`extra` = typical packets, then a match) go to
        `_typical_good`'s held solvers while `prove` works on `b`; others (tests ask with
        atypical packets too) each to a fresh solver."""
        if is_rewrite(b.outcome):
            return solver(*query).check()
        own = [pid for pid in b.paths if self.outcomes[pid] == b.outcome]
        others = [p.id for p in self.e.paths if p.id not in own and self.outcomes[p.id] == b.outcome]
        answer = z3.unsat
        for pid in own + others:
            held = self._typical_good(b, pid) if extra and extra[0] is self.typical else None
            if held is None:
                r = solver(self.region(b), self.conds[pid], *self.env, *extra).check()
            else:
                held.push()
                held.add(*extra[1:])
                r = held.check()
                held.pop()
            if r == z3.sat:
                return r
            if r == z3.unknown:
                answer = r
        return answer

    def _typical_good(self, b: Block, pid: int) -> z3.Solver | None:
        """While `prove` works on block `b`: a solver holding the block's formula, path `pid`'s
        condition, the environment and typical packets, for `_good_check`'s questions of
        the shield loop (each adds one shield-shaped match: `shield`'s narrowest, `widen`'s
        merged). z3 then reads that big, fixed part once per block and path instead of
        once a question (or_stress_k48: 14 questions, 1.1 s -> 0.7 s, issue 14); the answers
        are the same questions' (sat, unsat; unknown past the same per-query timeout;
        tests/test_synthesis_incremental.py). The solvers hold terms that isolated queries
        print too: rules/isolation.py prints them apart, or this would move frames.
        None when prove is not working on `b` (templates.py asks it of its own blocks)."""
        if self._proving is None or self._proving[0] is not b:
            return None
        held = self._proving[2]
        if pid not in held:
            held[pid] = solver(self._proving[1], self.conds[pid], *self.env, self.typical)
        return held[pid]

    def widen(self, b: Block, good: z3.BoolRef, new: FlowerMatch) -> list[FlowerMatch]:
        """Add `new` to the block's shields. A shield on the same keys with other values is
        merged with it, keeping only the bits the two agree on, unless that takes typical
        packets the block is for; after FORCE_WIDEN such refusals it is merged anyway (flower
        cannot see what separates them - an IPv4 option moving the port - so those packets
        go to software)."""
        region = z3.And(self.region(b), good, *self.env, self.typical)
        for i, old in enumerate(b.shields):
            if [k for k, _ in old.keys] == [k for k, _ in new.keys] and old.protocol == new.protocol:
                merged = _common(old, new)
                shape = tuple(k for k, _ in old.keys)
                b.refused[shape] = b.refused.get(shape, 0) + 1
                m = match_formula(merged, self.d)
                if b.refused[shape] >= FORCE_WIDEN or self._good_check(b, [region, m], [self.typical, m]) == z3.unsat:
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
    if len(differ) != 1 or differ[0] in ("vlan_ethtype", "cvlan_ethtype"):  # these fix the protocol chain
        return False
    n = differ[0]
    a.sets[n] = tuple(sorted(set(a.sets[n]) | set(b.sets[n])))
    a.paths += [p for p in b.paths if p not in a.paths]
    return True


def _key_names(protocol: str, chain: dict[str, Exact], frags: bool, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The keys extracted for a protocol chain (`chain`: its vlan_ethtype/cvlan_ethtype), in
    the order shields generalise them: the family's (EXTRACTED; from fragments without L4
    keys, with ip_flags), `extra`, then the tag keys."""
    names = EXTRACTED[chain_family(protocol, chain)]
    if frags:
        names = tuple(n for n in names if n not in L4_KEYS) + ("ip_flags",)
    tags: tuple[str, ...] = ()
    if PROTOCOLS[protocol] in VLAN_TYPES:
        tags = TAG_KEYS["vlan"]
        v = chain.get("vlan_ethtype")
        if v is not None and v.value in VLAN_TYPES:
            tags = TAG_KEYS["cvlan"] + tags
    return names + extra + tags


# --- assumptions and typical packets ---------------------------------------------------------


def _byte(o: int) -> z3.BitVecRef:
    return PACKET[z3.BitVecVal(o, 64)]


def _tpid(o: int) -> z3.BoolRef:
    return z3.Or(_be16(o) == 0x8100, _be16(o) == 0x88A8)


def _ipv4_headers() -> list[tuple[z3.BoolRef, int]]:
    """(the frame is IPv4 after 0, 1 or 2 VLAN tags, the offset of its IPv4 header)."""
    out = []
    for tags in range(3):
        at = 14 + 4 * tags
        here = [_tpid(12 + 4 * i) for i in range(tags)] + [_be16(at - 2) == 0x0800, z3.UGE(PACKET_LEN, at + 20)]
        out.append((z3.And(here), at))
    return out


def _ipv6_next_headers() -> list[tuple[z3.BoolRef, z3.BitVecRef]]:
    """(the frame is IPv6 after 0, 1 or 2 VLAN tags, its IPv6 header's next-header byte)."""
    out = []
    for tags in range(3):
        at = 14 + 4 * tags
        here = [_tpid(12 + 4 * i) for i in range(tags)] + [_be16(at - 2) == 0x86DD, z3.UGE(PACKET_LEN, at + 40)]
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
            out += [z3.Implies(is4, _byte(at) & 0x0F == 5) for is4, at in _ipv4_headers()]
        elif n == "no-fragments":
            out += [z3.Implies(is4, _not_fragment(at)) for is4, at in _ipv4_headers()]
            out += [z3.Implies(is6, nh != IPV6_FRAGMENT) for is6, nh in _ipv6_next_headers()]
        elif n == "no-ipv6-ext":
            out += [z3.Implies(is6, z3.And([nh != x for x in IPV6_EXT_HEADERS])) for is6, nh in _ipv6_next_headers()]
    return out


def _not_fragment(at: int) -> z3.BoolRef:
    """The IPv4 header at `at` has neither MF nor a fragment offset."""
    return z3.And(_byte(at + 6) & 0x3F == 0, _byte(at + 7) == 0)


def typical_packet(fragments: bool = False) -> z3.BoolRef:
    """Where fixed-offset header reads and flower keys agree: a frame of at least the
    Ethernet minimum (60 bytes without FCS, so a TCP header after a plain IPv4 header is
    never cut), IPv4 (untagged or behind one or two VLAN tags) without options and not a
    fragment (other ethertypes unconstrained). With `fragments`, IPv4 fragments are typical
    too (for paths only fragments take: flower's ip_flags and L3 keys still agree)."""
    ipv4 = [
        z3.Implies(is4, z3.And(_byte(at) == 0x45, *([] if fragments else [_not_fragment(at)])))
        for is4, at in _ipv4_headers()
    ]
    return z3.And(z3.UGE(PACKET_LEN, MIN_FRAME), *ipv4)


# --- small helpers ---------------------------------------------------------------------------


def solver(*constraints, timeout_ms: int = QUERY_TIMEOUT_MS, rlimit: int | None = None) -> z3.Solver:
    """A z3 solver with the per-query timeout, or with resource limit `rlimit` instead."""
    s = z3.Solver()
    if rlimit is not None:
        s.set("rlimit", rlimit)
    else:
        s.set("timeout", timeout_ms)
    s.add(*constraints)
    return s


def typical_implies(typical: z3.BoolRef, added: z3.BoolRef) -> bool:
    """Whether z3 proves that every packet `typical` takes satisfies `added`, whatever the
    program's environment (IMPLIED_RLIMIT, a context of its own; past it, False: nothing is
    concluded). True implies `with_assumption`'s question under the environment is unsat:
    fewer constraints unsat, more are too. That question, asked in z3's main context, cost
    0.18-0.56 M z3 work units on xdp-filter under no-ip-options (its whole environment read:
    map facts, helper results), an amount that moved with what the context asked before
    (0.62 M vs 1.33 M on xdpfilt_dny_udp, issue 14); this one costs ~5,600 units, and
    makes no term in the main context (translated, not parsed: only its answer is used)."""
    return own_solver(typical, z3.Not(added), rlimit=IMPLIED_RLIMIT, text=False).check() == z3.unsat


def maybe_sat(*constraints) -> bool:
    """False only when z3 proves the constraints unsatisfiable (a timeout counts as sat)."""
    return solver(*constraints).check() != z3.unsat


def _decides_beyond_chain(b: Block) -> bool:
    """Whether block `b` constrains a key beyond its protocol chain's own (CHAIN_KEYS)."""
    return bool(b.masked) or any(name not in CHAIN_KEYS for name in b.sets)


def _key_values(
    s: z3.Solver,
    model: z3.ModelRef | None,
    term: z3.BitVecRef,
    limit: int,
    loaded: list[tuple] = (),
    top: int = 0,
) -> list[int] | None:
    """Up to `limit` values `term` takes in the models of `s`, or None when it takes every
    value of its width. Both are worked out around `model` first (`_around`: only the bits
    that make up the term's value change, every other variable - map contents and helper
    results too - keeps its model value), in small queries over one variable:
    - every value: the formula holds for every x (one query instead of 65 checks); where it
      does not, the same with the maps as loaded (`loaded`: Exploration.maps_as_loaded, the
      other variables keeping their model values), then with each map alone as loaded
      (`_emptied`), when given: a key a map lookup is keyed by (an allow list: the model's
      map has no entry for most x, an empty one has none for all);
    - else its solutions are values the term takes, and the models of `s` give the rest, if
      any (one check when there are none).
    - when the path's solver finds a value beyond those, more are looked for in another
      small query (`_near_values`: the term's bytes free, the maps' contents too) before
      the path's solver is asked for the rest: an address the path looks up in a map, a
      protocol the dissector reads through IPv6 extension headers take more than `limit`
      values, learnt there in cheap checks instead of `limit` checks of the whole path.
      `top`: the bits of an address's shortest prefix (`_prefix_set`), which those values
      then differ in where they can (its enumeration of prefixes starts from them).
    The same set as `_values`; where the term is not made of packet bits that can change
    alone (a map lookup keyed by them, a value computed from them), `_values` it is, after
    what `_near_values` finds."""
    if model is None:
        return _values(s, term, limit)
    claim, near = _around(s, model, term), model
    if claim is None:  # a constant in this model (ports of a packet without them): another
        s.push()
        s.add(term != model.eval(term, model_completion=True))
        other = s.model() if s.check() == z3.sat else None
        s.pop()  # the claim is about s itself: the value excluded here is one of them
        claim, near = (_around(s, other, term) if other is not None else False), other
    if claim is None or claim is False:
        return _more_values(s, near if near is not None else model, term, limit, _seen(model, term), top)
    # the shortcut's own timeout: an unknown answer proves nothing and finds no value, and
    # `_values` on the path does the rest. Where the maps' contents may decide it, the claim
    # around the model's contents is asked within FIRST_RLIMIT first and the contents as
    # loaded next (xdp-filter's src_mac: the model's map is a 60-90 ms unknown, the loaded
    # one a <1 ms unsat); only when neither answers it gets the rest of SHORTCUT_RLIMIT
    maps = bool(loaded) and _reads_maps(near)
    every = solver(z3.Not(claim), rlimit=FIRST_RLIMIT if maps else SHORTCUT_RLIMIT).check()
    if every == z3.unsat:
        return None
    if maps:
        for contents in _emptied(loaded):
            as_loaded = _around(s, near, term, contents)
            if as_loaded is None or as_loaded is False:
                break  # the same for every contents: the term's bytes decide it
            if solver(z3.Not(as_loaded), rlimit=SHORTCUT_RLIMIT).check() == z3.unsat:
                return None
        if every == z3.unknown:
            every = solver(z3.Not(claim), rlimit=SHORTCUT_RLIMIT).check()
            if every == z3.unsat:
                return None
    if every == z3.unknown:
        # a claim z3 could not settle within the limit: its solutions are not asked either
        # (xdp-filter's cvlan_ethtype: those checks ran out of the limit too, 30-70 ms), the
        # model's own value is one (`_near_values` looks for more, with other bytes freed)
        known = _seen(near, term)
    else:
        known = _values(solver(claim, rlimit=SHORTCUT_RLIMIT), _every_x(term.size()), limit)
    return _more_values(s, near, term, limit, known, top)


def _every_x(width: int) -> z3.BitVecRef:
    """The variable of `_around`'s formula."""
    return z3.BitVec("every!value", width)


def _around(
    s: z3.Solver, model: z3.ModelRef, term: z3.BitVecRef, maps: list[tuple] | None = None
) -> z3.BoolRef | bool | None:
    """A formula over x (`_every_x`, the term's width) that holds iff `model`'s packet, with
    the bits that make up the term's value replaced by x, still satisfies every assertion of
    `s` and the term then equals x. All other variables (map contents, helper results too)
    keep their model values - the maps the contents `maps` instead, when given (function,
    body) pairs for them - so the formula is small and each x satisfying it is a value of
    the term in a model of `s`. False when the term's value is not such bits (changing them
    changes how it is computed); None when it is made of fewer bits than its width in this
    model (no packet bytes: a constant)."""
    at = _value_bytes(term, model)
    width = term.size()
    if not at:
        return _around_var(s, model, term) if maps is None else None
    if len(at) * 8 < width:
        return None
    fresh = [z3.BitVec(f"every!{i}", 8) for i in range(len(at))]
    b = z3.Concat(*fresh) if len(fresh) > 1 else fresh[0]
    pkt = model.eval(PACKET, model_completion=True)
    values, funs = _model_terms(model)
    if maps is not None:  # the given contents first: substitute_funs replaces each function once
        mine = {f.get_id() for f, _ in maps}
        funs = [*maps, *[(f, body) for f, body in funs if f.get_id() not in mine]]
    packet = PACKET.get_id()
    pins = [(c, v) for c, v in values if c.get_id() != packet]

    value = _pinned(term, [*pins, (PACKET, _stored(pkt, at, fresh))], funs)
    # where the term's bits sit in b (a sub-byte key: vlan_prio, vlan_id): its lowest bit;
    # the other bits of those bytes keep the model's values (a TCP header's data offset,
    # which decides whether flower reads the flags at all)
    model_bytes = sum(
        model.eval(PACKET[o], model_completion=True).as_long() << (8 * i) for i, o in enumerate(reversed(at))
    )
    ones = (1 << width) - 1
    low = next(
        (
            i
            for i in range(b.size() - width + 1)
            if all(_at(value, fresh, model_bytes & ~(ones << i) | v << i) == v for v in (0, 1, ones))
        ),
        None,
    )
    if low is None:
        return False
    x = _every_x(width)
    keep = model_bytes & ~(ones << low)
    bits = z3.BitVecVal(keep, b.size()) | z3.ZeroExt(b.size() - width, x) << low if b.size() > width else x
    placed = [z3.Extract(b.size() - 1 - 8 * i, b.size() - 8 - 8 * i, bits) for i in range(len(fresh))]
    # one substitution of the whole conjunction, the bytes placed with the rest
    return _pinned(z3.And(*s.assertions(), term == x), [*pins, (PACKET, _stored(pkt, at, placed))], funs)


def _stored(pkt: z3.ArrayRef, at: list[int], bytes_: list[z3.BitVecRef]) -> z3.ArrayRef:
    """Packet `pkt` with the bytes at offsets `at` replaced by `bytes_`."""
    # z3.Store's sort checks cost more than the stores (the bytes are of the range's sort)
    ctx, index = pkt.ctx, PACKET.domain()
    out = pkt
    for offset, byte in zip(at, bytes_):
        at_ = z3.BitVecVal(offset, index)
        out = z3.ArrayRef(z3.Z3_mk_store(ctx.ref(), out.as_ast(), at_.as_ast(), byte.as_ast()), ctx)
    return out


def _more_values(
    s: z3.Solver, model: z3.ModelRef | None, term: z3.BitVecRef, limit: int, known: list[int], top: int = 0
) -> list[int]:
    """`_values(s, term, limit, known)`, where the first value `s` finds beyond `known`
    (below the limit) brings in what `_near_values` finds around `model` (a model of `s`)
    before `s` is asked for the rest, in the same scope: where it finds nothing, `s` is
    asked what `_values` asks, in the same order (a second scope would lose what `s`
    learnt in the first: isa_v4's ip_ttl, +10% of its key extraction). The same set: every
    value found either way is one the term takes, and `s` is asked until it has none or
    `limit`."""
    if model is None:
        return _values(s, term, limit, known)
    path = s.assertions()  # without the scope `_values` pushes

    def near(out: list[int]) -> list[int]:
        return _near_values(s, model, term, limit, out, top, path)

    return _values(s, term, limit, known, near)


def _near_values(
    s: z3.Solver,
    model: z3.ModelRef,
    term: z3.BitVecRef,
    limit: int,
    known: list[int],
    top: int = 0,
    assertions: z3.AstVector | None = None,
) -> list[int]:
    """`known` and more values `term` takes in models of `s` (up to `limit` in all), found in
    one small query: `model`'s packet with the bytes that make up the term's value in it
    (`_value_bytes`) free, the maps' contents free, every other variable (helper results
    too) at its model value. Each of its solutions with that model's other values is a model
    of `s`, so each value found is one the term takes; finding none proves nothing (the
    query is a part of `s`: the caller asks `s` for the rest). Unlike `_around` the term
    need not equal those bytes: a protocol read through IPv6 extension headers, an address
    the path looks up in a map (around one model only the value the model's map holds).
    `top` > 0: values that differ in their top `top` bits are taken first. `assertions`:
    those of `s` to keep (default all; `_more_values` leaves out its scope's)."""
    at = _value_bytes(term, model)
    out = list(known)
    if not at or len(out) >= limit:
        return out
    fresh = [z3.BitVec(f"near!{i}", 8) for i in range(len(at))]
    values, funs = _model_terms(model)
    packet = PACKET.get_id()
    pins = [(c, v) for c, v in values if c.get_id() != packet]
    kept = [(f, body) for f, body in funs if not f.name().startswith("map.")]
    pkt = _stored(model.eval(PACKET, model_completion=True), at, fresh)
    # simplified: with every other byte and variable a constant most of the path's condition
    # and of the term's walk over the packet folds away (checks of the term's blocked
    # values cost ~5 ms each unsimplified, <1 ms simplified: xdpfilt_alw_ip's ip_proto)
    value = z3.simplify(_pinned(term, [*pins, (PACKET, pkt)], kept))
    path = s.assertions() if assertions is None else assertions
    formula = z3.simplify(_pinned(z3.And(*path), [*pins, (PACKET, pkt)], kept))
    near = solver(formula, rlimit=NEAR_RLIMIT)
    width = term.size()
    xs = z3.Concat(*fresh) if len(fresh) > 1 else fresh[0]
    if 0 < top < width:
        high = z3.Extract(width - 1, width - top, value)
        near.push()
        near.add(z3.And([high != v >> (width - top) for v in out]) if out else z3.BoolVal(True))
        # and in the bits the values so far agree on, while it can (`_fixed_bits` asks the
        # path's solver only about bits no value found differs in)
        ones = (1 << width) - 1
        same = functools.reduce(lambda a, v: a & ~(v ^ out[0]), out, ones) if out else 0
        while len(out) < limit:
            r = z3.unknown
            if same:
                r = near.check((value & same) != (out[0] & same))
                if r != z3.sat:
                    same = 0
            if r != z3.sat and near.check() != z3.sat:
                break
            v = near.model().eval(value, model_completion=True).as_long()
            same = same & ~(v ^ out[0]) if out else ones
            out.append(v)
            near.add(high != v >> (width - top))
        near.pop()
    # each solution's bytes are ruled out, not its value: `value != v` over the term's walk
    # made each check ~10 times as costly (ip_proto through IPv6 extension headers); bytes
    # that give a value found before cost a check, so at most 2 * limit are asked
    seen = set(out)
    for _ in range(2 * limit):
        if len(out) >= limit or near.check() != z3.sat:
            break
        m = near.model()
        v = m.eval(value, model_completion=True).as_long()
        near.add(xs != m.eval(xs, model_completion=True))
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def _around_var(s: z3.Solver, model: z3.ModelRef, term: z3.BitVecRef) -> z3.BoolRef | None:
    """`_around` for a term whose value in `model` is no packet bytes but one variable of
    its width (ports of a protocol the dissector model leaves unknown, DCCP or UDP-Lite: a
    fresh value): the formula over x holds iff `model`, with that variable set to x, still
    satisfies every assertion of `s` and the term then equals x. None when the value is not
    one such variable (a constant in this model)."""
    var = _value_var(term, model)
    if var is None:
        return None
    x = _every_x(term.size())
    values, funs = _model_terms(model)
    pins = [(c, v) for c, v in values if c.get_id() != var.get_id()]
    value = _pinned(term, pins, funs)
    ones = (1 << term.size()) - 1
    for v in (0, 1, ones):
        at = z3.simplify(z3.substitute(value, (var, z3.BitVecVal(v, term.size()))))
        if not z3.is_bv_value(at) or at.as_long() != v:
            return None
    return _pinned(z3.And(*s.assertions(), term == x), [*pins, (var, x)], funs)


def _emptied(loaded: list[tuple]) -> list[list[tuple]]:
    """The map contents `_key_values` tries: every map as loaded, then each map as loaded
    alone (the others as the model has them: an allow list on one key and a lookup that
    must hit on another, as xdp-filter's allow mode does), in name order."""
    by_map: dict[str, list[tuple]] = {}
    for f, body in loaded:
        by_map.setdefault(f.name().rsplit(".", 1)[0], []).append((f, body))
    return [loaded] + ([by_map[n] for n in sorted(by_map)] if len(by_map) > 1 else [])


def _reads_maps(model: z3.ModelRef) -> bool:
    """Whether `model` interprets map contents (`map.` functions): the path reads a map."""
    return any(f.name().startswith("map.") for f, _ in _model_terms(model)[1])


@functools.lru_cache(maxsize=4)
def _model_terms(model: z3.ModelRef) -> tuple[list, list]:
    """For `_pinned`: `model`'s constants with their values, and its functions (map values,
    helper results) with their interpretation as terms (`_interpretation`). Asked once per
    model (extraction asks `_around` for every key around the same model; a model is
    immutable, kept alive by the cache, so its identity is its key)."""
    decls = model.decls()
    values = [(c, model.eval(c, model_completion=True)) for c in (d() for d in decls if d.arity() == 0)]
    funs = [(d, f) for d in decls if d.arity() > 0 and (f := _interpretation(d, model[d])) is not None]
    return values, funs


def _pinned(t: z3.ExprRef, pins: list[tuple[z3.ExprRef, z3.ExprRef]], funs: list) -> z3.ExprRef:
    """`t` with the constants `pins` replaced, then the functions `funs` by their terms: one
    call each of z3's C API over the whole term (z3.substitute's per-pair checks and one call
    per assertion were most of `_around`'s cost; z3 shares the work on common subterms)."""
    ctx, kind = t.ctx, type(t)  # a substitution keeps the sort, so the class of the term
    if pins:
        n = len(pins)
        src, dst = (z3.Ast * n)(), (z3.Ast * n)()
        for i, (a, b) in enumerate(pins):
            src[i], dst[i] = a.as_ast(), b.as_ast()
        t = kind(z3.Z3_substitute(ctx.ref(), t.as_ast(), n, src, dst), ctx)
    if funs:
        n = len(funs)
        fs, bodies = (z3.FuncDecl * n)(), (z3.Ast * n)()
        for i, (f, body) in enumerate(funs):
            fs[i], bodies[i] = f.as_func_decl(), body.as_ast()
        t = kind(z3.Z3_substitute_funs(ctx.ref(), t.as_ast(), n, fs, bodies), ctx)
    return t


def _value_var(term: z3.ExprRef, model: z3.ModelRef) -> z3.BitVecRef | None:
    """The one variable (an uninterpreted constant of the term's sort) `term`'s value is in
    `model` (`_value_leaves`); None when it is anything else: packet bytes, several
    variables, a constant."""
    leaves = _value_leaves(term, model)
    if len(leaves) != 1 or z3.is_select(leaves[0]) or not leaves[0].sort().eq(term.sort()):
        return None
    return leaves[0]


def _at(term: z3.ExprRef, fresh: list[z3.BitVecRef], v: int) -> int | None:
    """The value of `term` when the bytes `fresh` (most significant first) are v, if it
    simplifies to a constant."""
    n = len(fresh)
    x = z3.simplify(
        z3.substitute(term, *[(byte, z3.BitVecVal(v >> (8 * (n - 1 - i)), 8)) for i, byte in enumerate(fresh)])
    )
    return x.as_long() if z3.is_bv_value(x) else None


def _interpretation(f: z3.FuncDeclRef, interp) -> z3.ExprRef | None:
    """A model's interpretation of function `f` as a term over its arguments (z3.Var(i)),
    or None when the model gives none as a table."""
    if not isinstance(interp, z3.FuncInterp) or interp.else_value() is None:
        return None
    args = [z3.Var(i, f.domain(i)) for i in range(f.arity())]
    out = interp.else_value()
    for i in reversed(range(interp.num_entries())):
        entry = interp.entry(i)
        out = z3.If(z3.And([a == entry.arg_value(j) for j, a in enumerate(args)]), entry.value(), out)
    return out


def _value_bytes(term: z3.ExprRef, model: z3.ModelRef) -> list[int]:
    """The packet offsets, ascending, of the bytes `term`'s value is made of in `model`
    (`_value_leaves`; a byte read only to decide or to index is not counted)."""
    return sorted(
        {model.eval(t.arg(1), model_completion=True).as_long() for t in _value_leaves(term, model) if z3.is_select(t)}
    )


def _value_leaves(term: z3.ExprRef, model: z3.ModelRef) -> list[z3.ExprRef]:
    """What `term`'s value is made of in `model`: its packet reads and uninterpreted
    constants outside if-then-else conditions, in the branches the model takes (a read's
    index is not walked into), each once."""
    out: list[z3.ExprRef] = []
    seen: set[int] = set()
    todo = [term]
    while todo:
        t = todo.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_select(t) and t.arg(0).eq(PACKET):
            out.append(t)
        elif z3.is_app_of(t, z3.Z3_OP_ITE):
            todo.append(t.arg(1) if z3.is_true(model.eval(t.arg(0), model_completion=True)) else t.arg(2))
        elif z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.append(t)
        else:
            todo.extend(t.children())
    return out


def _still(model: z3.ModelRef | None, added: list[z3.BoolRef]) -> z3.ModelRef | None:
    """`model` if it satisfies the constraints `added` to its solver too, else None."""
    if model is None or all(z3.is_true(model.eval(c, model_completion=True)) for c in added):
        return model
    return None


def _flipped(model: z3.ModelRef, term: z3.BitVecRef, value: int, constraints) -> bool:
    """Whether `model` (in which `term` is `value` and `constraints` hold) with the lowest
    bit of the last packet byte `term` reads at a fixed offset flipped still satisfies
    `constraints` and gives `term` another value: then it takes two values, known without
    asking z3 (evaluated on a copy of the model). A key the path never looks at, like
    xdpfilt_alw_ip's src_mac, is one: z3 took ~0.1-0.17 s and 1.2 M work units to find
    another source MAC for its IPv4 address path (issue 14)."""
    offsets = constant_reads(term)
    if not offsets:
        return False
    at = z3.BitVecVal(max(offsets), 64)
    other = model.translate(model.ctx)  # a copy: the model itself is read on
    byte = other.eval(PACKET[at], model_completion=True)
    other.update_value(PACKET, other.eval(z3.Store(PACKET, at, byte ^ 1), model_completion=True))
    return other.eval(term, model_completion=True).as_long() != value and _holds(other, constraints)


def _holds(model: z3.ModelRef, constraints) -> bool:
    """Whether every one of `constraints` is true in `model` (completed where it says nothing)."""
    return all(z3.is_true(model.eval(c, model_completion=True)) for c in constraints)


def _seen(model: z3.ModelRef | None, term: z3.BitVecRef) -> list[int]:
    """The value `term` takes in `model` (a model of the solver asked next), as `_values`'
    known values: one check fewer than asking the solver for a model again."""
    return [] if model is None else [model.eval(term, model_completion=True).as_long()]


def _values(s: z3.Solver, term: z3.BitVecRef, limit: int, known: list[int] = (), more=None) -> list[int]:
    """Up to `limit` values `term` takes in models of `s` (s is restored): `known` ones
    (values it is known to take) and more. `more`: called once, with the values so far
    when `s` has found one beyond `known` (below the limit), it returns them and other
    values the term takes (`_more_values`), which `s` is then not asked for."""
    out: list[int] = list(known)
    s.push()
    try:
        if 0 < len(out) < limit:
            s.add(z3.And([term != v for v in out]))
        while len(out) < limit and s.check() == z3.sat:
            v = s.model().eval(term, model_completion=True).as_long()
            out.append(v)
            s.add(term != v)
            if more is not None and len(out) < limit:
                found = more(out)
                if len(found) > len(out):
                    s.add(z3.And([term != v for v in found[len(out) :]]))
                out, more = found, None
    finally:
        s.pop()
    return out


#: Prefix lengths tried, longest first, for an address with too many values.
PREFIX_LENGTHS = (24, 16, 8)


def _prefix_set(s: z3.Solver, term: z3.BitVecRef, row, seen: list[int] = ()) -> tuple[tuple[int, ...], int] | None:
    """(values, mask) when the address's top bits take 2..MAX_VALUES values in the models
    of `s` (the longest such prefix); None otherwise (a single prefix is `_fixed_bits`'s).
    A longer prefix takes at least as many values as a shorter one: when the shortest
    already takes too many, none fits (one enumeration, not one per length). `seen`:
    values the address is known to take (their prefixes are not asked again)."""
    lengths = [n for n in PREFIX_LENGTHS if n < row.width]
    if not lengths:
        return None

    def prefixes(length: int) -> list[int]:
        shift = row.width - length
        known = list(dict.fromkeys(v >> shift for v in seen))[: MAX_VALUES + 1]
        return _values(s, z3.Extract(row.width - 1, shift, term), MAX_VALUES + 1, known)

    found = {lengths[-1]: prefixes(lengths[-1])}
    if len(found[lengths[-1]]) > MAX_VALUES:
        return None
    for length in lengths:
        shift = row.width - length
        if length not in found:
            found[length] = prefixes(length)
        values = found[length]
        if len(values) <= 1:
            return None
        if len(values) <= MAX_VALUES:
            mask = ((1 << length) - 1) << shift
            return tuple(sorted(v << shift for v in values)), mask
    return None


def _fixed_bits(s: z3.Solver, term: z3.BitVecRef, seen: list[int], width: int) -> Exact:
    """The bits of `term` that have one value in every model of `s` (seen: values found).
    The bits not yet seen to vary are asked together; a model where some of them differ
    rules those out and the rest are asked again (few checks where most bits are fixed or
    vary together); a query without an answer falls back to asking bit by bit."""
    first = seen[0]
    full = (1 << width) - 1
    candidates = full
    for v in seen:
        candidates &= ~(v ^ first)
    while candidates:
        s.push()
        s.add(term & candidates != first & candidates)
        r = s.check()
        differs = s.model().eval(term, model_completion=True).as_long() ^ first if r == z3.sat else 0
        s.pop()
        if r == z3.unsat:
            return Exact(first & candidates, candidates)
        if r != z3.sat:
            break
        candidates &= ~differs
    mask = 0
    for i in range(width):
        if not candidates >> i & 1:
            continue
        s.push()
        s.add(z3.Extract(i, i, term) != (first >> i & 1))
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
    ICMP keys without ICMP, tcp_flags without TCP, keys the protocol chain does not allow,
    an ethertype that is not one nameable protocol)."""
    proto = sets.get("ip_proto")
    one = proto[0] if proto and len(proto) == 1 else None
    sets = dict(sets)
    for name, nameable in (("vlan_ethtype", _NAMEABLE), ("cvlan_ethtype", FAMILIES)):
        v = sets.get(name)
        if v is not None and (len(v) != 1 or v[0] not in nameable):
            del sets[name]  # only one nameable ethertype can be a filter's protocol chain
    chain = {n: v for n, v in _fixed(sets) if n in ("vlan_ethtype", "cvlan_ethtype")}
    out = {}
    for name, values in sets.items():
        row = FLOWER_KEYS[name]
        if not allowed(name, protocol, chain):
            continue
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
