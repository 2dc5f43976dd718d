"""The work behind the editor's annotations (offload/editor.py), run in the fork server's
children: the CLI's pipeline on one object, published in two stages.

`analyse` explores each entry program and sends the EXPLORED stage at once: the `check`
entries and findings of the paths synthesis cannot change (`settled`); then DOCUMENTED with
`analyze` and `cost`; then it runs `check` itself (synthesis, the printed script's proof,
counterexamples) and sends the COMPLETE stage with `rules`, the tc script and a witness
packet per path. `serve` is the fork
server (editor.Forker) that runs it per job.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from dataclasses import replace
from multiprocessing import reduction
from multiprocessing.connection import Connection
from pathlib import Path

from analyzer.cost.count import Counted, count
from analyzer.cost.price import path_costs
from analyzer.cost.profile import ProfileError, load_profile
from analyzer.cost.report import program_json
from analyzer.cost.tailgraph import Node, ProgramCost, TailGraph
from analyzer.explore import Exploration, ExplorationError, Options
from analyzer.fields import Decoder
from analyzer.helpers import helper_name
from analyzer.report import analysis_json
from analyzer.verify import witness_packet
from lifter.errors import LiftError
from lifter.insn import Call
from lifter.opcodes import CallSrc
from lifter.program import BpfObject, load_object
from rules import output as rules_output
from rules.dissector import dissect
from rules.reasons import PathFate, Reason, account
from rules.ruleset import RuleSet
from rules.synthesis import ASSUMPTIONS, DEFAULT_ASSUMPTIONS, Synthesizer

from . import check, mapfill
from .editor import COMPLETE, DOCUMENTED, EXPLORED, Config, ProgramResult, Result, digest
from .mapsource import parse_spec
from .programs import device_programs
from .targets import TARGETS


def check_config(cfg: Config) -> None:
    """The same refusals as the CLI's option parsing, as a LiftError (one line)."""
    for a in cfg.assume:
        if a not in ASSUMPTIONS or a in DEFAULT_ASSUMPTIONS:
            allowed = ", ".join(sorted(set(ASSUMPTIONS) - set(DEFAULT_ASSUMPTIONS)))
            raise LiftError(f"assume {a!r}: expected one of {allowed}")
    for t in cfg.targets:
        if t not in TARGETS:
            raise LiftError(f"target {t!r}: expected one of {', '.join(TARGETS)}")


def settled(e: Exploration, assume: tuple[str, ...]) -> tuple[list[PathFate], list[int]]:
    """The fates of the paths synthesis cannot change, and the ids of those it decides.
    Settled: a non-PASS path whose outcome is a Reason before any block is extracted
    (Synthesizer.outcome: not understood, side effects beyond counters, a redirect device
    unknown), which synthesis lists first in `software`, and a path whose outcome is a plain
    pass (pass-to-host). `account` on a rule set with only those reasons gives them the fates
    it gives them after synthesis; every other path (a drop a filter might take, a rewrite,
    a PASS path not understood) is pending."""
    s = Synthesizer(e, assume, {})
    software, pending = [], []
    for p in e.paths:
        o = s.outcomes[p.id]
        if isinstance(o, Reason) and p.verdict != "PASS":
            software.append(([p.id], o))
        elif isinstance(o, Reason) or not o.is_pass:
            pending.append(p.id)
    fates = account(e, RuleSet([], software, s.assume), s.maps)
    return [f for f in fates if f.path not in pending], pending


def explored_check(
    explored: list[Counted], cfg: Config, fields: list[dict[int, str]] | None = None
) -> tuple[dict, int]:
    """The check document of what exploration settles (`settled`), and how many paths are
    pending: the same entries and findings `check` writes for those paths, less the
    counterexamples (synthesis finds them). Header fields from `fields` (per program, the
    `analyze` documents'); without, rendered here for the findings' paths only (the same
    Decoder rendering as `check`'s: each rendering stands alone), the others left None."""
    report = check.Report([TARGETS[t] for t in cfg.targets])
    pending = 0
    for n, counted in enumerate(explored):
        e = counted.exploration
        fates, waiting = settled(e, cfg.assume)
        pending += len(waiting)
        if fields is not None:
            rendered = fields[n]
        else:
            decoder = Decoder(e.environment(), None, e.summaries)
            shown = {f.path for f in fates if not f.offloaded and f.reason.code != "pass-to-host"}
            rendered = {p.id: decoder.render(e.condition(p)) if p.id in shown else None for p in e.paths}
        paths = [check.path_json(f, rendered, {}) for f in fates]
        paths += [
            {"id": i, "verdict": e.paths[i].verdict, "offloaded": None, "fields": rendered[i], "pending": True}
            for i in waiting
        ]
        report.programs.append(
            {
                "file": str(e.obj.path),
                "program": e.program.name,
                "section": e.program.section,
                "paths": sorted(paths, key=lambda d: d["id"]),
            }
        )
        report.findings += check.target_findings(e, [], fates, rendered, {}, report.targets)
    failed = check.settle(report, None, ["any"])
    return check.json_doc(report, failed, ["any"], None), pending


def analyse(path: Path, cfg: Config, send) -> None:
    """The CLI's pipeline on one object, in three messages: `send((EXPLORED, Result))` as
    soon as the programs are explored (the findings `settled` decides: the diagnostics go
    out), `send((DOCUMENTED, Result))` with `analyze` and `cost` (classes, ns: hover and
    lenses), then `send((COMPLETE, Result))` with `check`, `rules` and the rest. Raises
    LiftError on bad input."""
    check_config(cfg)
    clock = Clock()
    obj = load_object(str(path))
    explored = []
    for prog in device_programs(obj, cfg.program, per_program_output=True):
        try:
            explored.append(count(obj, prog, Options()))
        except ExplorationError as err:
            raise LiftError(str(err), file=obj.path, program=prog.name) from err
    clock.tick("lift+explore")
    dig = digest(path)
    doc, pending = explored_check(explored, cfg)
    early = [located(counted) for counted in explored]
    clock.tick("settled")
    send((EXPLORED, Result(str(path), dig, doc, early, EXPLORED, pending, dict(clock.times))))
    try:
        profile = load_profile()
    except ProfileError:
        profile = None
    early = [documented(pr, counted, profile) for pr, counted in zip(early, explored)]
    doc, pending = explored_check(explored, cfg, [{d["id"]: d["fields"] for d in pr.analyze["paths"]} for pr in early])
    clock.tick("analyze+cost")
    send((DOCUMENTED, Result(str(path), dig, doc, early, DOCUMENTED, pending, dict(clock.times))))
    report = check.Report([TARGETS[t] for t in cfg.targets])
    rulesets = [check.check_exploration(counted.exploration, report, cfg.assume, 512) for counted in explored]
    failed = check.settle(report, None, ["any"])
    clock.tick("synthesis+proofs+counterexamples")
    contents = None
    if cfg.maps_from:
        try:
            contents = mapfill.contents_from([parse_spec(cfg.maps_from)], obj)
        except ValueError as err:
            raise LiftError(f"maps_from: {err}".splitlines()[0]) from None
    programs = [
        complete_program(pr, counted, rs, cfg.dev, contents) for pr, counted, rs in zip(early, explored, rulesets)
    ]
    clock.tick("rules documents+witnesses")
    doc = check.json_doc(report, failed, ["any"], None)
    send((COMPLETE, Result(str(path), dig, doc, programs, COMPLETE, 0, dict(clock.times))))


class Clock:
    """Seconds per stage, measured one after the other."""

    def __init__(self):
        self.times: dict[str, float] = {}
        self.last = time.perf_counter()

    def tick(self, name: str) -> None:
        now = time.perf_counter()
        self.times[name] = round(self.times.get(name, 0.0) + now - self.last, 4)
        self.last = now


def located(counted: Counted) -> ProgramResult:
    """One program's result right after exploration: where each path is decided, its tail
    calls; no documents yet."""
    e = counted.exploration
    return ProgramResult(
        e.program.name,
        None,
        None,
        None,
        "",
        {p.id: check.location(e.obj, *check.decided_at(p)) for p in e.paths},
        tail_call_locations(e.obj, e.program),
        {},
    )


def documented(early: ProgramResult, counted: Counted, profile) -> ProgramResult:
    """`early` with the documents that need only the exploration: `analyze`, `cost`."""
    e = counted.exploration
    cost = None
    if profile is not None:
        pc = ProgramCost(Node(e.obj.path, e.program.name), counted, path_costs(counted, profile), True)
        cost = program_json(pc, TailGraph([pc], [], profile))
    return replace(early, analyze=analysis_json(e, conditions=False), cost=cost)


def complete_program(early: ProgramResult, counted: Counted, rs: RuleSet, dev: str, contents=None) -> ProgramResult:
    """`early` with the rule documents and witnesses; with map `contents` the templates
    filled as `rules --maps-from` does (the JSON's `maps` member, the filled filters after
    the script)."""
    e = counted.exploration
    tc = rules_output.tc_script(e, rs, dev, "skip_sw")
    filled = mapfill.fill_rules(rs, contents, dev, "skip_sw", rs.max_rules) if contents else None
    if filled:
        tc += "\n".join(mapfill.comments(filled) + filled.script.lines) + "\n"
    return replace(
        early,
        rules=rules_output.rules_json(e, rs, dev, "skip_sw"),
        tc=tc,
        witnesses={p.id: witness_packet(e, p) for p in e.paths},
        maps=mapfill.json_part(filled) if filled else None,
    )


def tail_call_locations(obj: BpfObject, prog) -> dict[int, dict | None]:
    """Source location of each `bpf_tail_call` of a program, by pc (cost sites name the pc)."""
    return {
        insn.pc: check.location(obj, func.section, insn.pc)
        for func in prog.functions
        for insn in func.insns
        if isinstance(insn, Call) and insn.kind == CallSrc.HELPER and helper_name(insn.imm) == "bpf_tail_call"
    }


def serve(ctrl) -> None:
    """The fork server (editor.Forker): imports done and the dissector model built once, then
    one forked child per job (`job`), which runs `analyse` and writes to the job's own pipe;
    never writes to stdout (the server's protocol channel). Single-threaded, so forking is
    safe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 (for the life of this process)
    assert dissect().keys  # the flower model every rule proof uses: built while nobody waits
    fork = multiprocessing.get_context("fork")
    # its children are its own (each killed by the server or done), not a daemon's orphans
    multiprocessing.current_process().daemon = False
    while True:
        try:
            path, cfg = ctrl.recv()
            fd = reduction.recv_handle(ctrl)
        except (EOFError, OSError, KeyboardInterrupt):
            return  # the server went away
        child = fork.Process(target=job, args=(ctrl, fd, path, cfg), daemon=True)
        child.start()
        os.close(fd)
        ctrl.send(child.pid)
        child.join()  # done, or killed by the server (a newer save)


def job(ctrl, fd: int, path: str, cfg: Config) -> None:
    """One forked analysis: `analyse` into the pipe `fd`; a bad input's one-line error too."""
    ctrl.close()
    conn = Connection(fd, readable=False)
    try:
        analyse(Path(path), cfg, conn.send)
    except LiftError as err:
        conn.send(("error", str(err).splitlines()[0]))
    except Exception as err:  # reported as a one-line error, never a traceback
        conn.send(("error", f"internal error: {type(err).__name__}: {err}".splitlines()[0]))
    finally:
        conn.close()
