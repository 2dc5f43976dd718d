"""The last step before printing: render the filter lines, read them back, prove them.

`finish` renders the rule list as the lines the user will receive (`# paths` comments and
`filter add` lines, via tc.filter_line), re-reads that text with the separate parser
(script.py) and proves the parsed script with tc's semantics (proof.py). A filter whose
proof fails is taken out, a path no packet of which reaches a filter claiming it goes to
software with the reason, and the remaining list is rendered and proved again, until the
text proves as a whole. Only then are `proven` labels set, from that proof.
"""

from __future__ import annotations

from .proof import ScriptProof, prove_script
from .reasons import Reason
from .script import parse_script
from .tc import filter_line

#: Why a path leaves the script when no packet of it reaches its filters.
UNREACHED = Reason(
    "not-expressible",
    "no packet of this path reaches a filter that takes it through the printed chains "
    "from chain 0 (pass shields or other filters take them first: flower cannot "
    "separate them from packets the program passes)",
)


def source_lines(e, paths: list[int], memo: dict | None = None) -> list[str]:
    """file:line of the decisions on these paths (for the comments); `memo` keeps each
    path's lines (path id -> list) for the next call on the same exploration."""
    memo = {} if memo is None else memo
    out = []
    for pid in paths:
        if pid not in memo:
            mine: list[str] = []
            for section, pc in sorted(e.paths[pid].sites):
                line = e.obj.line_at(section, pc)
                if line:
                    where = f"{line.file_name.rsplit('/', 1)[-1]}:{line.line}"
                    if where not in mine:
                        mine.append(where)
            memo[pid] = mine
        out += [w for w in memo[pid] if w not in out]
    return out


def render_block(rs, dev: str, skip: str | None) -> list[str]:
    """The filter part of the script: per rule a `# paths` comment and its `filter` line.
    The label on the comment comes from the proof of the previous rendering (finish)."""
    out = []
    e = rs.synth.e
    for r in rs.rules:
        what = {"rule": "proven" if r.proved else "", "shield": "shield (pass)", "goto": "chain jump"}[r.role]
        where = " ".join(source_lines(e, r.paths, rs.lines))
        out.append(f"# paths {','.join(map(str, r.paths))} {where} - {what}".rstrip())
        out.append(filter_line(dev, r.match, r.action, r.prio, r.chain or None, skip=skip))
    return out


#: What the rest of a path's packets get when the script takes only part of its block.
PARTLY = Reason(
    "not-expressible",
    "partly in software: some packets the proof allows to take reach no filter of "
    "this block (an earlier chain's level takes them first, or --max-rules cut it)",
)


def prove_text(text: str, synth, blocks=(), cache: dict | None = None) -> ScriptProof:
    """Parse and prove a printed script; `cache` maps a parsed script's semantics (chains,
    prios, matches, actions, claims: not the device name or comments) to its proof."""
    filters = parse_script(text)
    key = tuple(f.semantics() for f in filters)
    if cache is not None and key in cache:
        old = cache[key]
        return ScriptProof(filters, old.sound, old.reached, old.errors, old.complete)
    proof = prove_script(filters, synth, blocks)
    if cache is not None:
        cache[key] = proof
    return proof


def finish(rs, dev: str, skip: str | None, relayout) -> list[str]:
    """Prove what is printed (see the module doc); returns the proven filter block and sets
    each rule's `proved`, rs.proved/unproved, rs.software and rs.partly. `relayout(rules)` re-runs
    minimisation and prios after filters were taken out."""
    while True:
        lines = render_block(rs, dev, skip)
        proof = prove_text("\n".join(lines), rs.synth, rs.blocks, rs.proofs)
        bad = [r for r, s in zip(rs.rules, proof.sound) if s is False]
        lost = sorted(p for p, ok in proof.reached.items() if not ok)
        if not bad and not lost:
            break
        why = Reason(
            "not-expressible",
            "the printed script did not prove: " + proof.errors[0]
            if proof.errors
            else "the printed filter did not prove (a packet reaching it gets another verdict from the program)",
        )
        for r in bad:
            rs.software.append((r.paths, why))
            rs.unproved += 1
        if lost:
            rs.software.append((lost, UNREACHED))
        bad_ids = {id(r) for r in bad}
        keep = []
        for r in rs.rules:
            if id(r) in bad_ids:
                continue
            if r.outcome is not None and not r.outcome.is_pass:
                r.paths = [p for p in r.paths if p not in lost]
                if not r.paths:
                    continue
            keep.append(r)
        rs.rules = relayout(keep)
    claimed = set(proof.reached)
    orphans = sorted(p for p in rs.taken if p not in claimed and not any(p in ps for ps, _ in rs.software))
    if orphans:
        rs.software.append((orphans, UNREACHED))
    rs.partly = {}
    for b, done in zip(rs.blocks, proof.complete):
        if not done:
            rs.partly.update({p: PARTLY for p in b.paths if proof.reached.get(p)})
    if rs.synth is not None:  # some of the path's blocks were given up in synthesis
        rs.partly.update({p: why for p, why in rs.synth.partial.items() if proof.reached.get(p)})
    for r, s in zip(rs.rules, proof.sound):
        r.proved = s
    rs.proved = sum(1 for s in proof.sound if s)
    # The labels are comments: rendering them changes nothing the proof read (the parsed
    # semantics must be those just proved, which prove_text finds in the cache).
    lines = render_block(rs, dev, skip)
    again = prove_text("\n".join(lines), rs.synth, rs.blocks, rs.proofs)
    if again.sound != proof.sound or again.reached != proof.reached:
        raise AssertionError("labelled script differs from the proved one")
    rs.printed = (dev, skip, lines)
    return lines
