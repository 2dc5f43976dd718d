"""The proof of a printed tc script, with tc's semantics, over the program's paths.

Input: the filters `script.parse_script` read back from the printed text. tc's semantics
(net/sched/cls_api.c tcf_classify; cls_flower.c fl_classify): classification starts in
chain 0; a chain's filters run in prio order, the first match acts; `goto chain N`
restarts in chain N and never comes back; `pass` and a chain where nothing matches end
classification (the packet goes on to the host, where the program runs). The proof
refuses scripts whose meaning would rest on more than that: two actions or protocols in
one (chain, prio) (the match order inside a prio is the kernel's hash order), or a goto
that is not to a later chain (loops; tcf_classify's reclassify limit).

Per filter that does not pass, `sound`: no packet that reaches it (through the gotos
before it) and matches it gets another outcome from the program (z3, over the dissector
model, every map content and helper result). Per claimed path, `reached`: some packet
of that path reaches a filter that claims it. Per synthesised block (the specification
the script was laid out from), `complete`: every packet the block was proved to take
(its region, minus its shields and earlier blocks) gets the block's action from the
script - so a filter, a chain entry or a level that goes missing is noticed. A "proven"
label is printed only from this proof.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import z3
from z3 import z3core

from analyzer.symbolic import Z3_C, mk_and, mk_not

from .actionmodel import ActionError, parse_actions
from .dissector import match_formula
from .script import Filter
from .synthesis import DROP, Outcome, solver
from .tc import INGRESS_DEV


@dataclass
class ScriptProof:
    """The verdict on one parsed script. `sound[i]`: filter i (in file order) is proven
    (None for pass and goto filters); `reached[path]`: a packet of the path hits a
    non-pass filter claiming it; `errors`: why the script as a whole has no meaning the
    proof accepts (then nothing in it is proven)."""

    filters: list[Filter]
    sound: list[bool | None] = field(default_factory=list)
    reached: dict[int, bool] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    complete: list[bool] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Sound and every claimed path reached (what printing needs)."""
        return not self.errors and all(s is not False for s in self.sound) and all(self.reached.values())

    @property
    def exact(self) -> bool:
        """ok, and every block's packets are taken (what the mutation tests hold it to)."""
        return self.ok and all(self.complete)


def outcome_of(action: tuple[str, ...], ifnames: dict[int, str], dev: str | None = None) -> Outcome | None:
    """The program outcome a non-pass action stands for (None: pass or goto). `dev`: the
    filter's device (a redirect back out of it is XDP_TX)."""
    if action == ("drop",):
        return DROP
    rewrite = rewrite_outcome(action, ifnames, dev)
    if rewrite is not None:
        return rewrite
    if action[0] == "mirred":
        ifindex = next((i for i, n in ifnames.items() if n == action[4]), None)
        return Outcome(action, ("REDIRECT",), ifindex)
    return None


def structure_errors(filters: list[Filter]) -> list[str]:
    """Why the script's meaning would rest on more than the semantics proved here."""
    errors = []
    seen: dict[tuple[int, int], Filter] = {}
    chains = {f.chain for f in filters}
    if filters and 0 not in chains:
        errors.append("no filter in chain 0, where tc starts: nothing is ever matched")
    for f in filters:
        first = seen.setdefault((f.chain, f.prio), f)
        if first.action != f.action or first.match.protocol != f.match.protocol:
            errors.append(
                f"line {f.lineno}: chain {f.chain} prio {f.prio} already holds line "
                f"{first.lineno} with another action or protocol"
            )
        if f.goto is not None and f.goto <= f.chain:
            errors.append(f"line {f.lineno}: goto chain {f.goto} from chain {f.chain} (only forward jumps are proved)")
    return errors


_TRUE = z3.BoolVal(True)


class FirstMatch:
    """tc's first-match semantics as z3 terms, built filter by filter in classification order
    (per chain, in prio order; chains in any order as long as every goto is added before the
    filters of the chain it enters). A filter's hit: the packets entering its chain, that no
    earlier filter of the chain matched, that it matches. The "no earlier filter" term of a
    chain is built on the previous one's, so z3 shares it: linear in the filters.

    `union` is the Or of several filters' hits, in the cheaper equivalent form for a run of
    filters that follow each other in their chain: the packets that reach the first of the
    run and match any of it (the first of the run that matches is the one that hits). The
    entry into a chain is the union of the gotos into it. Same sets of packets, smaller
    terms: z3 proves over the Or of the matches instead of an Or of nested first-match terms."""

    def __init__(self):
        self.hit: dict = {}  # key -> hit term
        self._at: dict = {}  # key -> (chain, position in the chain, entry, none before it, match)
        self._missed: dict[int, tuple[int, z3.BoolRef]] = {}  # chain -> (filters so far, none matched)
        self._gotos: dict[int, list] = {}  # chain -> keys of the gotos into it
        self._entry: dict[int, tuple[int, z3.BoolRef]] = {}  # chain -> (gotos then, its entry)

    def add(self, key, chain: int, match: z3.BoolRef, goto: int | None = None) -> z3.BoolRef:
        """Filter `key` of `chain` (after those added before in it) matching `match`, jumping
        to chain `goto` if given; returns its hit."""
        into = self.entry(chain)
        n, none = self._missed.get(chain, (0, _TRUE))
        self.hit[key] = mk_and([into, none, match])  # z3.And's term, through the C API (issue 14)
        self._at[key] = (chain, n, into, none, match)
        self._missed[chain] = (n + 1, mk_and([none, mk_not(match)]))
        if goto is not None:
            self._gotos.setdefault(goto, []).append(key)
        return self.hit[key]

    def entry(self, chain: int) -> z3.BoolRef:
        """The packets entering `chain` (chain 0: all; else the gotos into it so far), built
        again only when a goto into it was added since."""
        if chain == 0:
            return _TRUE
        keys = self._gotos.get(chain, [])
        if self._entry.get(chain, (None,))[0] != len(keys):
            self._entry[chain] = (len(keys), self.union(keys))
        return self._entry[chain][1]

    def union(self, keys) -> z3.BoolRef:
        """The Or of the hits of filters `keys` (see the class doc)."""
        runs: dict[tuple[int, int], list] = {}  # (chain, first position) -> the run's keys
        by_chain: dict[int, list] = {}
        for k in dict.fromkeys(keys):
            by_chain.setdefault(self._at[k][0], []).append(k)
        for chain, ks in by_chain.items():
            ks.sort(key=lambda k: self._at[k][1])
            run = [ks[0]]
            for k in ks[1:]:
                if self._at[k][1] != self._at[run[-1]][1] + 1:
                    runs[(chain, self._at[run[0]][1])] = run
                    run = []
                run.append(k)
            runs[(chain, self._at[run[0]][1])] = run
        terms = []
        for run in runs.values():
            if len(run) == 1:
                terms.append(self.hit[run[0]])
                continue
            _, _, into, none, _ = self._at[run[0]]
            terms.append(z3.And(into, none, any_of([self._at[k][4] for k in run])))
        return z3.Or(terms) if terms else z3.BoolVal(False)


def any_of(terms: list[z3.BoolRef]) -> z3.BoolRef:
    """The Or of `terms` with the conjuncts they all share taken out: And(C, Or(rests)) for
    terms And(C, rest_i) (filters of one chain level share their protocol, ip_proto and
    dissector conditions and differ in one key). The same set; z3 proves over it several
    times faster (or_direct_udp_k48's soundness query: 0.35 -> 0.05 s). The conjuncts are
    read through z3's C API (`Z3_C`: no Python term per conjunct) and the result is made by
    the same z3.And/z3.Or calls on them, in the same order (the same terms)."""
    c = Z3_C
    ctx = terms[0].ctx
    parts = []
    for t in terms:
        h, a = c.handles(t)
        is_and = c.ast_kind(h, a) == z3.Z3_APP_AST and c.decl_kind(h, c.decl(h, a)) == z3.Z3_OP_AND
        kids = [c.arg(h, a, i) for i in range(c.num_args(h, a))] if is_and else [a]
        parts.append([(c.ast_id(h, k), k) for k in kids])
    shared = set.intersection(*({i for i, _ in p} for p in parts))
    if not shared:
        return z3.Or(terms)
    rests = [[k for i, k in p if i not in shared] for p in parts]
    common = [k for i, k in parts[0] if i in shared]
    if any(not r for r in rests):  # one term is the shared part alone: the Or is that part
        return _made(z3core.Z3_mk_and, ctx, common)
    ors = [_made(z3core.Z3_mk_and, ctx, r) if len(r) > 1 else r[0] for r in rests]
    return _made(z3core.Z3_mk_and, ctx, common + [_made(z3core.Z3_mk_or, ctx, ors)])


def _made(mk, ctx: z3.Context, args: list) -> z3.BoolRef:
    """z3.And/z3.Or (`mk`: Z3_mk_and, Z3_mk_or) of Boolean terms given as raw ASTs (`Z3_C`)
    or BoolRefs, through the one C call those make; the BoolRefs among `args` keep the raw
    ones' parents alive until the call."""
    arr = (z3.Ast * len(args))()
    for i, a in enumerate(args):
        if isinstance(a, z3.ExprRef):
            a = a.as_ast()
        elif Z3_C.raw:
            a = z3.Ast.from_buffer_copy(ctypes.c_void_p(a))
        arr[i] = a
    return z3.BoolRef(mk(ctx.ref(), len(args), arr), ctx)


def first_match(filters: list[Filter], d) -> FirstMatch:
    """FirstMatch over the parsed filters, keyed by their index in file order."""
    fm = FirstMatch()
    for i in sorted(range(len(filters)), key=lambda i: (filters[i].chain, filters[i].prio, i)):
        f = filters[i]
        fm.add(i, f.chain, match_formula(f.match, d), f.goto)
    return fm


def hits(filters: list[Filter], d) -> list[z3.BoolRef]:
    """Per filter (file order): the packets that reach it from chain 0 and match it."""
    fm = first_match(filters, d)
    return [fm.hit[i] for i in range(len(filters))]


def prove_script(filters: list[Filter], synth, blocks=()) -> ScriptProof:
    """Soundness and completeness of the parsed script against the program (`synth`: the
    rules.synthesis state: paths' conditions, environment, outcomes, device names;
    `blocks`: the synthesised blocks the script is meant to implement)."""
    proof = ScriptProof(filters, errors=structure_errors(filters))
    if proof.errors:
        proof.sound = [None if outcome_of(f.action, synth.ifnames, f.dev) is None else False for f in filters]
        proof.reached = {p: False for f, s in zip(filters, proof.sound) if s is not None for p in f.claims}
        proof.complete = [False] * len(blocks)
        return proof
    fm = first_match(filters, synth.d)
    hit = [fm.hit[i] for i in range(len(filters))]
    good: dict[Outcome, z3.BoolRef] = {}
    groups: dict[tuple, list[int]] = {}  # filters of one (chain, prio): one action
    for i, f in enumerate(filters):
        o = outcome_of(f.action, synth.ifnames, f.dev)
        proof.sound.append(None)
        if o is not None:
            groups.setdefault((f.chain, f.prio), []).append(i)
            if o not in good:
                good[o] = synth.good(o)
    for members in groups.values():
        bad = z3.Not(good[outcome_of(filters[members[0]].action, synth.ifnames, filters[members[0]].dev)])
        # one query for the whole prio; filter by filter only when it fails
        if solver(*synth.env, fm.union(members), bad).check() == z3.unsat:
            for i in members:
                proof.sound[i] = True
            continue
        for i in members:
            proof.sound[i] = solver(*synth.env, hit[i], bad).check() == z3.unsat
    claimed: dict[int, list[int]] = {}
    for i, (f, s) in enumerate(zip(filters, proof.sound)):
        for p in f.claims if s is not None else ():
            claimed.setdefault(p, []).append(i)
    for p, members in claimed.items():
        cond = synth.conds.get(p)
        proof.reached[p] = cond is not None and solver(*synth.env, cond, fm.union(members)).check() == z3.sat
    takes: dict[Outcome, list[int]] = {}
    for i, f in enumerate(filters):
        o = outcome_of(f.action, synth.ifnames, f.dev)
        if o is not None:
            takes.setdefault(o, []).append(i)
    for i, b in enumerate(blocks):
        intended = z3.And(
            synth.reach(blocks[:i]), b.formula(synth.d), *[z3.Not(match_formula(m, synth.d)) for m in b.shields]
        )
        taken = fm.union(takes.get(b.outcome, []))
        proof.complete.append(solver(*synth.env, intended, z3.Not(taken)).check() == z3.unsat)
    return proof


# --- rewriting actions (pedit, csum; XDP_TX) -------------------------------------------------


def rewrite_outcome(action: tuple[str, ...], ifnames: dict[int, str], dev: str | None) -> Outcome | None:
    """The outcome of an action list that rewrites the packet (pedit, csum, vlan push) or sends it back out of the
    filter's device (None for the plain actions above). The verdict is read with the action
    model (actionmodel.py); a redirect to `dev` is XDP_TX, written INGRESS_DEV as synthesis
    writes it, so both name the same outcome whatever the device is called."""
    own = action[0] == "mirred" and dev and action[-1] == dev and dev not in ifnames.values()
    if action[0] not in ("pedit", "csum", "vlan") and not own:
        return None
    try:
        verdict = parse_actions(action).verdict
    except ActionError:
        return Outcome(action, ("unmodelled",))  # good() of it is empty: never proven
    if verdict == ("pass",):
        return Outcome(action, ("PASS",))
    if verdict[0] == "mirred" and dev and verdict[4] == dev:
        return Outcome(action[:-1] + (INGRESS_DEV,), ("TX",))
    if verdict[0] == "mirred":
        ifindex = next((i for i, n in ifnames.items() if n == verdict[4]), None)
        return Outcome(action, ("REDIRECT",), ifindex)
    return Outcome(action, ("unmodelled",))
