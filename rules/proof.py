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

from dataclasses import dataclass, field

import z3

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


def hits(filters: list[Filter], d) -> list[z3.BoolRef]:
    """Per filter (file order): the packets that reach it from chain 0 and match it."""
    order = sorted(range(len(filters)), key=lambda i: (filters[i].chain, filters[i].prio, i))
    entry: dict[int, list[z3.BoolRef]] = {0: [z3.BoolVal(True)]}
    missed: dict[int, z3.BoolRef] = {}  # per chain: no filter so far matched (one shared term)
    ors: dict = {}
    out: list[z3.BoolRef | None] = [None] * len(filters)
    for i in order:
        f = filters[i]
        m = match_formula(f.match, d)
        into = chain_entry(entry, f.chain, ors)
        none = missed.get(f.chain, z3.BoolVal(True))
        out[i] = z3.And(into, none, m)
        missed[f.chain] = z3.And(none, z3.Not(m))
        if f.goto is not None:
            entry.setdefault(f.goto, []).append(out[i])
    return out


def chain_entry(entry: dict[int, list[z3.BoolRef]], chain: int, memo: dict) -> z3.BoolRef:
    """The packets entering `chain` (the Or of `entry[chain]`, the goto hits into it), built
    once per chain and again only when a goto into it was added since (z3.Or over many
    terms is slow to build; ruleset.Checker uses it too)."""
    terms = entry.get(chain, [])
    if memo.get(chain, (None,))[0] != len(terms):
        memo[chain] = (len(terms), z3.Or(terms) if terms else z3.BoolVal(False))
    return memo[chain][1]


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
    hit = hits(filters, synth.d)
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
        if solver(*synth.env, z3.Or([hit[i] for i in members]), bad).check() == z3.unsat:
            for i in members:
                proof.sound[i] = True
            continue
        for i in members:
            proof.sound[i] = solver(*synth.env, hit[i], bad).check() == z3.unsat
    claimed: dict[int, list[z3.BoolRef]] = {}
    for f, h, s in zip(filters, hit, proof.sound):
        for p in f.claims if s is not None else ():
            claimed.setdefault(p, []).append(h)
    for p, hs in claimed.items():
        cond = synth.conds.get(p)
        proof.reached[p] = cond is not None and solver(*synth.env, cond, z3.Or(hs)).check() == z3.sat
    takes: dict[Outcome, list[z3.BoolRef]] = {}
    for f, h in zip(filters, hit):
        o = outcome_of(f.action, synth.ifnames, f.dev)
        if o is not None:
            takes.setdefault(o, []).append(h)
    for i, b in enumerate(blocks):
        intended = z3.And(
            synth.reach(blocks[:i]), b.formula(synth.d), *[z3.Not(match_formula(m, synth.d)) for m in b.shields]
        )
        taken = z3.Or(takes.get(b.outcome) or [z3.BoolVal(False)])
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
