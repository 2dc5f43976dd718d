"""Why a path stays in software: the one closed set of reason codes.

Every path xdp2tc does not hand to the NIC gets exactly one `Reason`: a code from `REASONS`
and a detail naming the map, helper, field, packet class or target key concerned. The table
is what `rules` comments and JSON, `check` findings and SARIF rules are made from; README
lists it. A code's `rule` is its stable SARIF rule id; `level` the SARIF level a finding gets
by default (`note`, `warning`, `error`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import z3

from analyzer.fields import HEADERS, L4, VLAN_TPIDS, Decoder, decode
from analyzer.symbolic import PACKET, Z3_C, fresh_context, source_of, symbols


@dataclass(frozen=True)
class ReasonCode:
    """One row of the reason table."""

    code: str
    rule: str  # SARIF rule id, stable across versions
    level: str  # SARIF level: note | warning | error
    text: str  # one line a network engineer reads


REASONS: dict[str, ReasonCode] = {
    r.code: r
    for r in (
        ReasonCode(
            "pass-to-host", "XT000", "note", "the packet goes on to the host, where the XDP program runs anyway"
        ),
        ReasonCode(
            "map-dependent",
            "XT001",
            "warning",
            "the verdict depends on the contents of a map (filters would follow its entries)",
        ),
        ReasonCode(
            "data-plane-state",
            "XT002",
            "warning",
            "the verdict depends on state the program itself writes (counters, rate limits, connection tracking)",
        ),
        ReasonCode(
            "helper",
            "XT003",
            "warning",
            "the verdict depends on a helper's result (time, random numbers, FIB or socket lookups)",
        ),
        ReasonCode(
            "ctx-field",
            "XT004",
            "warning",
            "the verdict depends on the receiving interface or queue, not on the packet",
        ),
        ReasonCode(
            "not-expressible",
            "XT005",
            "warning",
            "flower has no key for what the program decides on (payload bytes, lengths, "
            "header fields flower does not parse)",
        ),
        ReasonCode(
            "atypical-packets",
            "XT006",
            "warning",
            "flower and the program disagree only on a class of unusual packets (IP options, "
            "truncated L4 headers, fragments, IPv6 extension headers, short frames)",
        ),
        ReasonCode(
            "rewrite",
            "XT007",
            "warning",
            "the program rewrites the packet in a way no derived tc action redoes (MAC swap, "
            "values computed from the packet, fields other than MACs/TOS/TTL, adjust_head/tail)",
        ),
        ReasonCode(
            "redirect-device",
            "XT008",
            "warning",
            "the program redirects to an interface given by a map or without a known name (use --ifname IFINDEX=DEV)",
        ),
        ReasonCode(
            "target-unsupported",
            "XT009",
            "error",
            "the target NIC cannot match this key or perform this action in hardware",
        ),
        ReasonCode(
            "rule-budget",
            "XT010",
            "warning",
            "the filters needed exceed the rule budget (--max-rules or the NIC's table size)",
        ),
        ReasonCode(
            "unknown",
            "XT011",
            "error",
            "xdp2tc does not fully understand this path (loop bound, exploration budget, "
            "unsupported call or instruction)",
        ),
        ReasonCode(
            "flower-unsound",
            "XT012",
            "error",
            "the real cls_flower (check --check-flower: Linux under QEMU) took a packet with a "
            "filter whose action the program does not take on it, or refused the printed script",
        ),
    )
}


@dataclass(frozen=True)
class Reason:
    """Why some paths stay in software: a code of REASONS and what it concerns. Printed, it
    is the detail (the sentence `rules` always printed)."""

    code: str
    detail: str = ""

    def __post_init__(self):
        if self.code not in REASONS:
            raise ValueError(f"unknown reason code {self.code!r}")

    @property
    def row(self) -> ReasonCode:
        return REASONS[self.code]

    def __str__(self) -> str:
        return self.detail or self.row.text


#: path_reason's answers per exploration (id -> {(path id, map classes, assumed): (path,
#: environment, Reason)}), dropped with the exploration: `rules --pcap-out`, `check
#: --check-flower` and the editor server account for the same paths more than once, and a
#: reason costs z3 queries and a rendering of the map's key.
_REASONS: dict[int, dict[tuple, tuple]] = {}


def path_reason(e, path, map_classes: dict[str, str], assumed: tuple[str, ...] = ()) -> Reason:
    """`_path_reason`, worked out once per path, map classes and assumptions (and for the
    exploration's current environment: what every query of it is asked under)."""
    memo = _memo(e)
    key = (path.id, tuple(sorted(map_classes.items())), tuple(assumed))
    env = e.environment()
    hit = memo.get(key)
    if hit is None or hit[0] is not path or [a.get_id() for a in hit[1]] != [a.get_id() for a in env]:
        hit = memo[key] = (path, env, _path_reason(e, path, map_classes, assumed))
    return hit[2]


#: A `symbols` cache per exploration (id -> cache), dropped with it: the paths' conditions
#: share most of their terms (a parser's tests), each walked once for all of them.
_NAMES: dict[int, dict] = {}


def _per_exploration(store: dict, e) -> dict:
    """`store`'s dict for exploration `e`, made when first needed and dropped with `e`."""
    found = store.get(id(e))
    if found is None:
        found = store[id(e)] = {}
        weakref.finalize(e, store.pop, id(e), None)
    return found


def _names(e) -> dict:
    """The exploration's `symbols` cache (`_NAMES`)."""
    return _per_exploration(_NAMES, e)


def _memo(e) -> dict:
    """path_reason's memo for exploration `e` (`_REASONS`)."""
    return _per_exploration(_REASONS, e)


def remember(e, path, map_classes: dict[str, str], assumed: tuple[str, ...], reason: Reason) -> None:
    """Put `reason`, worked out elsewhere (rules/ahead.py: by a forked copy of this process),
    in path_reason's memo as its answer for these arguments and the current environment."""
    _memo(e)[(path.id, tuple(sorted(map_classes.items())), tuple(assumed))] = (path, e.environment(), reason)


def forget() -> None:
    """Drop path_reason's answers (for a test that changes what they are worked out with)."""
    _REASONS.clear()


def _path_reason(e, path, map_classes: dict[str, str], assumed: tuple[str, ...] = ()) -> Reason:
    """The reason a path stays in software when nothing more specific is known, from the
    inputs its condition depends on: an unknown input or a cut path first, then helpers,
    state the program writes, ctx fields, maps (with the header fields of their key), and
    packet bytes alone: IP options when the program reads L4 fields at fixed offsets
    (`fixed_l4_reads`) and no-ip-options is not `assumed` already, else flower cannot
    express the decision."""
    if path.truncated or path.notes:
        return Reason("unknown", path.truncated or path.notes[0])
    cond = e.condition(path)
    names = _names(e)
    sources = {s for s in (source_of(n) for n in symbols(cond, names)) if s is not None}
    kinds = {s.kind for s in sources}
    if "unknown" in kinds:
        return Reason("unknown", "depends on " + ", ".join(sorted(s.name for s in sources if s.kind == "unknown")))
    if "helper" in kinds:
        return Reason("helper", ", ".join(sorted(f"bpf_{s.name}()" for s in sources if s.kind == "helper")))
    maps = sorted({s.name for s in sources if s.kind == "map"})
    state = [m for m in maps if map_classes.get(m) == "data-plane"]
    if state:
        return Reason("data-plane-state", "map " + ", ".join(state) + " (written by the program)")
    if "ctx" in kinds:
        return Reason("ctx-field", ", ".join(sorted(f"ctx->{s.name}" for s in sources if s.kind == "ctx")))
    if maps:
        decoder = Decoder(e.environment(), None, e.summaries)
        # keys are read against the condition `decode` renders (both simplified in a context
        # of their own: fields.canonical), so the key's layout is the printed `when`'s, its
        # z3 questions answered once for both (fields' memo of answers: xdpfilt_alw_tcp 8
        # queries fewer). Simplified here first, it was another term: few were shared.
        keys = []
        for m in maps:
            key = next((a.key for a in path.accesses if a.map == m), None)
            if key is not None:  # over inputs, as `cond` is: a merged offset's literals expanded
                key = e.expand(key, names)
            keys.append(
                f"map {m}"
                + (f" keyed by {decoder.key_fields(key, cond, witness=path.witness)}" if key is not None else "")
            )
        return Reason("map-dependent", "; ".join(keys))
    if "summary" in kinds:
        return Reason(
            "not-expressible",
            "decides on a long computation of its inputs (a hash or checksum, kept as any value): "
            "flower cannot match on it",
        )
    # the decoded condition (`rules` prints it) is worked out here as it always was: its
    # text depends on the z3 queries asked before it (analyzer/fields.py), the frames of
    # counterexample.py no longer do (asked in contexts of their own)
    decode(e, path)
    if "no-ip-options" not in assumed and fixed_l4_reads(e, path):
        return Reason(
            "atypical-packets",
            "IP options: the program reads L4 fields at fixed offsets, flower "
            "after the real IPv4 header (try --assume no-ip-options)",
        )
    return Reason(
        "not-expressible",
        "no proven filter takes this path: flower cannot separate its packets "
        "from packets the program treats otherwise",
    )


#: z3's deterministic resource limit per query of `fixed_l4_reads` (not a time: the same path
#: always gets the same reason). Far above what the corpus needs; past it the answer is no
#: (the reason then claims less: not-expressible).
FACT_RLIMIT = 50_000_000
#: Where an IPv4 header starts: untagged, after one and after two VLAN tags, with the
#: ethertypes before it (VLAN TPIDs, then IPv4).
IPV4_STARTS = (14, 18, 22)


def fixed_l4_reads(e, path) -> bool:
    """Whether z3 proves that the path reads L4 fields at fixed offsets where IPv4 options
    move them: every packet of the path is IPv4 at one place (after 0, 1 or 2 VLAN tags:
    IPV4_STARTS) with one L4 protocol (TCP, UDP, ICMP, ICMPv6, or TCP-or-UDP: their ports),
    the path's condition reads a byte at a constant offset that lies in a field of that L4
    header when the IPv4 header has no options, and some packet of the path has an IHL
    other than 5 (a model shows it). The facts `analyzer.fields` names such reads by
    (`FIXED_NOTE`), asked in full here: the decoded text stops at its query budget.

    The path's witness (a model of it, checked here by evaluation) answers "not implied"
    for the claims it makes false, without z3: where it does, z3 answers sat (or unknown),
    and either is a no."""
    cond = e.condition(path)
    if not _l4_starts(constant_reads(cond)):  # a superset of the simplified reads: no z3
        return False
    # asked in a context of its own: the answer does not depend on the queries asked
    # before, nor do the queries after it depend on this one (rules/isolation.py)
    ctx = fresh_context()
    cond = z3.simplify(cond.translate(ctx))
    pkt = PACKET.translate(ctx)
    reads = constant_reads(cond)
    base = z3.Solver(ctx=ctx)
    base.set("rlimit", FACT_RLIMIT)
    env = [a.translate(ctx) for a in e.environment()]
    base.add(*env, cond)
    witness = path.witness.translate(ctx) if path.witness is not None else None
    if witness is not None and not z3.is_true(witness.eval(z3.And(*env, cond), model_completion=True)):
        witness = None  # not a model of the path: it refutes nothing

    def byte(o: int) -> z3.BitVecRef:
        return pkt[z3.BitVecVal(o, 64, ctx)]

    def be16(o: int) -> z3.BitVecRef:
        return z3.Concat(byte(o), byte(o + 1))

    def implied(claim) -> bool:
        if witness is not None and z3.is_false(witness.eval(claim, model_completion=True)):
            return False
        base.push()
        base.add(z3.Not(claim))
        r = base.check()
        base.pop()
        return r == z3.unsat

    for l3 in _l4_starts(reads):
        tags = [z3.Or([be16(at) == t for t in VLAN_TPIDS]) for at in range(12, l3 - 2, 4)]
        if not implied(z3.And(*tags, be16(l3 - 2) == 0x0800)):
            continue
        proto = byte(l3 + 9)
        header = next((L4[v] for v in (6, 17, 1, 58) if implied(proto == v)), None)
        if header is None and implied(z3.Or(proto == 6, proto == 17)):
            header = L4["ports"]
        if header is None:
            return False
        start = l3 + 20
        if not any(o <= r - start < o + n for r in reads for o, n in HEADERS[header].values()):
            return False
        base.push()
        base.add(byte(l3) & 0x0F != 5)
        options = base.check() == z3.sat
        base.pop()
        return options
    return False


def _l4_starts(reads: set[int]) -> list[int]:
    """The IPv4 starts (IPV4_STARTS) after whose option-less header some of `reads` lie."""
    return [l3 for l3 in IPV4_STARTS if any(o >= l3 + 20 for o in reads)]


def constant_reads(t: z3.ExprRef) -> set[int]:
    """The packet offsets `t` reads at a constant index (a select on the packet array at a
    bit-vector numeral). Walked on raw ASTs through symbolic's table of z3's C functions
    (`Z3_C`), each shared subterm once: wrapping every node in a Python ExprRef cost more
    than the rest of `fixed_l4_reads`. The array is known by its name: `t` may live in
    another context than PACKET (fixed_l4_reads asks in one of its own)."""
    raw = Z3_C.raw
    ctx, root = Z3_C.handles(t)
    name = PACKET.decl().name()
    packet = name.encode() if raw else name  # the raw C function returns bytes
    out: set[int] = set()
    seen: set[int] = set()
    todo = [root]
    while todo:
        a = todo.pop()
        i = Z3_C.ast_id(ctx, a)
        if i in seen:
            continue
        seen.add(i)
        if Z3_C.ast_kind(ctx, a) != z3.Z3_APP_AST:
            continue  # numerals, variables, quantifiers: no reads below
        n = Z3_C.num_args(ctx, a)
        if n == 2 and Z3_C.decl_kind(ctx, Z3_C.decl(ctx, a)) == z3.Z3_OP_SELECT:
            arr, index = Z3_C.arg(ctx, a, 0), Z3_C.arg(ctx, a, 1)
            if (
                Z3_C.ast_kind(ctx, arr) == z3.Z3_APP_AST
                and Z3_C.symbol(ctx, Z3_C.decl_name(ctx, Z3_C.decl(ctx, arr))) == packet
                and Z3_C.ast_kind(ctx, index) == z3.Z3_NUMERAL_AST
                and Z3_C.sort_kind(ctx, Z3_C.sort(ctx, index)) == z3.Z3_BV_SORT
            ):
                out.add(int(Z3_C.numeral(ctx, index)))
        todo.extend(Z3_C.arg(ctx, a, k) for k in range(n))
    return out


@dataclass
class PathFate:
    """What becomes of one path: `offloaded` by `filters` (indices into the rule list), or
    left to the host with a `reason` (PASS paths: pass-to-host). `partly`: an offloaded
    path whose packets the script takes only in part (the rest reach the host), and why."""

    path: int
    verdict: str
    offloaded: bool
    filters: list[int]
    reason: Reason | None
    partly: Reason | None = None


#: How the summary names the classes of atypical packets a detail mentions.
ATYPICAL_CLASSES = ("IP options", "fragments", "IPv6 extension headers", "truncated", "short frames")


def account(e, rs, map_classes: dict[str, str]) -> list[PathFate]:
    """Every path of exploration `e` exactly once, given rule set `rs` (ruleset.RuleSet):
    offloaded by the proved non-pass filters that name it, else in software with the reason
    the rule set gave, else with `path_reason` (nothing is left without one)."""
    given: dict[int, Reason] = {}
    for paths, why in rs.software:
        for p in paths:
            given.setdefault(p, why)
    by_path: dict[int, list[int]] = {}
    for i, r in enumerate(rs.rules):
        if r.outcome is not None and not r.outcome.is_pass and r.proved:
            for p in r.paths:
                by_path.setdefault(p, []).append(i)
    out = []
    for p in e.paths:
        if p.id in by_path and p.id not in given:
            # the filters of its block, shields and chain jumps included
            filters = [i for i, r in enumerate(rs.rules) if p.id in r.paths]
            out.append(PathFate(p.id, p.verdict, True, filters, None, rs.partly.get(p.id)))
        elif p.verdict == "PASS" and not p.truncated and not p.notes and p.id not in given:
            out.append(PathFate(p.id, p.verdict, False, [], Reason("pass-to-host")))
        else:
            why = _reason(given.get(p.id), e, p, map_classes, rs.assumptions)
            out.append(PathFate(p.id, p.verdict, False, [], why))
    return out


def _reason(given: Reason | None, e, path, map_classes: dict[str, str], assumed=()) -> Reason:
    """The rule set's reason for a path, unless it is a generic not-expressible one and the
    path's inputs name the real cause (`path_reason`: a map, state, a helper, ctx, IP options):
    a drop on a map lookup is map-dependent even where synthesis only saw that no filter fits."""
    if given is not None and given.code != "not-expressible":
        return given
    inputs = path_reason(e, path, map_classes, assumed)
    return inputs if given is None or inputs.code != "not-expressible" else given


def reason_label(r: Reason) -> str:
    """The summary's name for a reason: its code, or the packet class for atypical packets."""
    if r.code == "atypical-packets":
        for c in ATYPICAL_CLASSES:
            if c.lower() in r.detail.lower():
                return c
    return r.code


def summary(fates: list[PathFate]) -> dict[str, dict]:
    """Per verdict: paths, offloaded (and by how many filters), software by reason.
    PASS paths are counted as passed to the host."""
    out: dict[str, dict] = {}
    for f in fates:
        v = out.setdefault(
            f.verdict, {"paths": 0, "offloaded": 0, "partly": 0, "filters": set(), "software": 0, "reasons": {}}
        )
        v["paths"] += 1
        if f.offloaded:
            v["offloaded"] += 1
            v["partly"] += f.partly is not None
            v["filters"] |= set(f.filters)
        else:
            v["software"] += 1
            label = reason_label(f.reason)
            v["reasons"][label] = v["reasons"].get(label, 0) + 1
    for v in out.values():
        v["filters"] = len(v["filters"])
    return dict(sorted(out.items(), key=lambda kv: (kv[0] == "PASS", kv[0])))


def summary_lines(counts: dict[str, dict]) -> list[str]:
    """`DROP paths 4: offloaded 2 (3 filters), software 2 (map-dependent 1, IP options 1)`;
    `offloaded 2 (3 filters; 1 in part)` when the script takes some path only in part."""
    lines = []
    for verdict, v in counts.items():
        if verdict == "PASS" and set(v["reasons"]) <= {"pass-to-host"} and not v["offloaded"]:
            lines.append(f"PASS paths {v['paths']}: pass to host (the program runs anyway)")
            continue
        reasons = ", ".join(f"{k} {n}" for k, n in sorted(v["reasons"].items()))
        lines.append(
            f"{verdict} paths {v['paths']}: offloaded {v['offloaded']} ({v['filters']} filters"
            + (f"; {v['partly']} in part" if v["partly"] else "")
            + "), "
            f"software {v['software']}" + (f" ({reasons})" if reasons else "")
        )
    return lines
