"""`xdp2tc check FILE.o...`: the CI gate. No privileges needed.

For every XDP entry program of every object, every path is accounted for (rules/reasons.py
`account`): offloaded by proven filters, passed to the host, or in software with a reason
code. Per target (offload/targets.py) the offloaded paths are checked again against what the
driver can do (keys, masks, port ranges, ip/tcp flags, actions, chains, table size); for the
eBPF target the program itself (helpers, map types, tail calls, redirects). Each path that
stays in software on a target is a *finding* with the source line (BTF line info) of the
verdict it returns, a rule id per reason code and a fingerprint that survives rebuilds and
line moves (program, target, code, detail, verdict, source text).

Output: `--format text` (default), `json` (schema `xdp2tc.check/1`, below) or `sarif`
(SARIF 2.1.0, for code scanning). Exit 0: nothing to gate on; 1: a new finding matches
`--fail-on`; 2: bad input or usage.

JSON schema `xdp2tc.check/1` (new fields may be added within the version):

    schema, version, targets [names], fail_on [categories], baseline (path|null), failed (bool)
    programs  [{file, program, section, summary {verdicts {VERDICT: {paths, offloaded,
                filters, software, reasons}}, lines [...]}, paths [{id, verdict, offloaded,
                code, detail, fields}],
                kernel (with --kernel-verify) {loads (bool|null: not asked), message},
                traffic (with --pcap) {total {packets, bytes}, nic {packets, bytes, packet_share,
                byte_share}, filters [{filter (index), tc, action, packets, bytes, ...shares}],
                host_paths [{path (null: map/helper-dependent), code, packets, bytes, ...}]}}]
    findings  [{fingerprint, new (bool), target, file, program, path (id|null for
                program-wide findings), verdict, code, rule, level, detail, fields,
                location {file, line, col, text} | null}]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path as FsPath

from analyzer import kernel
from analyzer.classify import classes
from analyzer.explore import Exploration, ExplorationError, Options, explore
from analyzer.fields import decode
from analyzer.helpers import helper, helper_name
from lifter.errors import LiftError
from lifter.insn import Call, LoadImm64, MapRef
from lifter.opcodes import CallSrc
from lifter.program import BpfObject, Program, load_object
from rules import output as rules_output
from rules import ruleset
from rules.ahead import ExplainAhead
from rules.counterexample import examples
from rules.flower import FLOWER_KEYS, Range, prefix_len
from rules.frametext import frame_inputs
from rules.reasons import REASONS, Reason, account, summary, summary_lines
from rules.synthesis import ASSUMPTIONS, DEFAULT_ASSUMPTIONS, with_defaults

from . import flowercheck, flowervm, traffic
from .commands import command_help
from .options import exploration_flags, exploration_options, jobs_flag, pcap_out_flag, write_pcap
from .programs import device_programs
from .targets import DEFAULT_TARGETS, TARGETS, Target

SCHEMA = "xdp2tc.check/1"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
#: --fail-on categories.
FAIL_ON = ("software-drop", "unknown", "target-unsupported", "any")
EXIT_OK, EXIT_FOUND, EXIT_BAD_INPUT = 0, 1, 2


@dataclass
class Finding:
    """One path (or, for the eBPF target, one instruction) that stays in software on a target."""

    target: str
    file: str
    program: str
    path: int | None
    verdict: str | None
    reason: Reason
    fields: str | None
    location: dict | None  # {file, line, col, text}
    fingerprint: str = ""
    new: bool = True
    example: dict | None = None  # counterexample.Example.json(): the frame showing why
    suggestion: str | None = None  # an --assume NAME under which the path is offloaded

    def json(self) -> dict:
        row = self.reason.row
        return {
            "fingerprint": self.fingerprint,
            "new": self.new,
            "target": self.target,
            "file": self.file,
            "program": self.program,
            "path": self.path,
            "verdict": self.verdict,
            "code": row.code,
            "rule": row.rule,
            "level": row.level,
            "detail": self.reason.detail,
            "fields": self.fields,
            "location": self.location,
            "counterexample": self.example,
            "suggestion": self.suggestion,
        }


@dataclass
class Report:
    """What `check` found over all objects."""

    targets: list[Target]
    programs: list[dict] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    frames: list[bytes] = field(default_factory=list)  # counterexample frames, for --pcap-out
    #: (exploration, rule set) per program, for --check-flower
    explored: list[tuple[Exploration, ruleset.RuleSet]] = field(default_factory=list)


# --- per target --------------------------------------------------------------------------------

_ACTIONS = {"drop": "drop", "pass": "pass", "mirred": "redirect", "goto": "goto"}


def unsupported(rule, t: Target) -> str | None:
    """What of a filter (ruleset.Rule) target `t` cannot offload, or None."""
    action = _ACTIONS.get(rule.action[0], rule.action[0])
    if action not in t.actions:
        return f"action {' '.join(rule.action)}" + (" (a pass shield)" if rule.role == "shield" else "")
    if rule.chain and not t.chains:
        return f"tc chains (filter in chain {rule.chain})"
    for name, value in rule.match.keys:
        row = FLOWER_KEYS[name]
        if name not in t.keys:
            return f"flower key {row.tc}"
        if isinstance(value, Range):
            if not t.port_ranges:
                return f"port range {row.tc} {value.lo}-{value.hi}"
            continue
        if name in t.prefix_only and prefix_len(value.mask, row.width) is None:
            return f"{row.tc} with a non-prefix mask {value.mask:#x}"
        if name == "ip_flags" and value.mask & ~t.ip_flags:
            return "ip_flags " + ("firstfrag" if value.mask & ~t.ip_flags & 2 else "frag")
        if name == "tcp_flags" and value.mask & ~t.tcp_flags:
            return f"tcp_flags mask {value.mask & ~t.tcp_flags:#x}"
    return None


def ebpf_findings(obj: BpfObject, prog: Program, t: Target) -> list[tuple[str, int, Reason]]:
    """(section, pc, reason) for what the eBPF target's verifier refuses in `prog`."""
    out = []
    maps = {m.name: m for m in obj.maps}
    seen_maps = set()
    for func in prog.functions:
        for insn in func.insns:
            if isinstance(insn, Call) and insn.kind == CallSrc.HELPER:
                known = helper(insn.imm)
                name = known.name if known else helper_name(insn.imm)
                if name == "tail_call" and not t.tail_calls:
                    out.append((func.section, insn.pc, Reason("target-unsupported", "tail calls (bpf_tail_call)")))
                elif name in ("redirect", "redirect_map") and not t.redirect:
                    out.append((func.section, insn.pc, Reason("target-unsupported", f"redirect (bpf_{name})")))
                elif name not in t.helpers:
                    out.append((func.section, insn.pc, Reason("target-unsupported", f"helper {helper_name(insn.imm)}")))
            elif isinstance(insn, Call) and insn.kind == CallSrc.KFUNC:
                out.append((func.section, insn.pc, Reason("target-unsupported", f"kfunc {insn.symbol or insn.imm}")))
            elif isinstance(insn, LoadImm64) and isinstance(insn.ref, MapRef) and insn.ref.map not in seen_maps:
                m = maps.get(insn.ref.map)
                seen_maps.add(insn.ref.map)
                if m is None:
                    continue
                kind = m.type.name if m.type else "?"
                if kind not in t.map_types:
                    out.append((func.section, insn.pc, Reason("target-unsupported", f"map {m.name} of type {kind}")))
                elif m.flags:
                    out.append(
                        (func.section, insn.pc, Reason("target-unsupported", f"map {m.name} with flags {m.flags:#x}"))
                    )
    if t.max_insns is not None and prog.insn_count > t.max_insns:
        out.append(
            (
                prog.section,
                prog.entry.start,
                Reason("target-unsupported", f"{prog.insn_count} instructions (limit {t.max_insns})"),
            )
        )
    return out


# --- one object ----------------------------------------------------------------------------------


def decided_at(path) -> tuple[str, int]:
    """Where a path's verdict is decided: the branch at the highest address before its exit,
    in the section it exits from (usually the `if` in front of the `return`: clang often
    shares one exit instruction between all returns, whose line is the closing brace), else
    the exit itself."""
    sites = [pc for section, pc in path.sites if section == path.exit_section and pc <= path.exit_pc]
    return path.exit_section, max(sites) if sites else path.exit_pc


def location(obj: BpfObject, section: str, pc: int) -> dict | None:
    li = obj.line_at(section, pc)
    if li is None or not li.line:
        return None
    return {"file": li.file_name, "line": li.line, "col": max(li.col, 1), "text": li.line_text.strip()}


def kernel_verdict(path: str, program: str) -> dict:
    """The running kernel's verifier on one program: {loads: true|false|null, message}. null
    when it cannot be asked here (no privileges, no libbpf): `check` itself needs none."""
    try:
        kernel.check_kernel()
    except kernel.KernelUnavailable as err:
        return {"loads": None, "message": f"not asked: {err}"}
    try:
        with kernel.load(path, programs=[program]):
            return {"loads": True, "message": "the verifier accepts it"}
    except kernel.KernelLoadError as err:
        return {"loads": False, "message": str(err).splitlines()[0]}


def check_object(
    path: str,
    report: Report,
    options: Options,
    program: str | None,
    assume: tuple,
    max_rules: int,
    frames: list[bytes] | None = None,
    kernel_verify: bool = False,
    jobs: int = 1,
) -> None:
    """Explore each entry program of the object at `path` and add it to `report`
    (check_exploration); with `jobs` > 1 its paths are explained by a forked child while
    its rules are built (rules/ahead.py: the same report)."""
    obj = load_object(path)
    for prog in device_programs(obj, program, per_program_output=True):  # a report per program
        try:
            e = explore(obj, prog, dataclasses.replace(options, witnesses=True))  # synthesis starts from them
        except ExplorationError as err:
            raise LiftError(str(err), file=obj.path, program=prog.name) from err
        with ExplainAhead(e, with_defaults(assume), every=True, start=jobs > 1) as ahead:
            rs = check_exploration(e, report, assume, max_rules, frames, kernel_verify, ahead)
        report.explored.append((e, rs))


def check_exploration(
    e: Exploration,
    report: Report,
    assume: tuple,
    max_rules: int,
    frames: list[bytes] | None = None,
    kernel_verify: bool = False,
    ahead: ExplainAhead | None = None,
) -> ruleset.RuleSet:
    """Add one explored program's entry and findings to `report`; the rule set it built is
    returned so a caller that shows the filters too (the editor, offload/lsp.py) builds it once.
    `ahead`: a child explaining the paths meanwhile (check_object), whose work is taken once
    the rule set is built."""
    obj, prog = e.obj, e.program
    maps = classes(e)[1]
    try:
        rs = ruleset.build(e, assume, {}, max_rules)
    except ValueError as err:
        raise LiftError(str(err), file=obj.path, program=prog.name) from err
    if ahead is not None:
        ahead.install(rs)
    fates = account(e, rs, maps)
    found = examples(rs, fates)
    report.frames += [found[f.path].frame for f in fates if f.path in found]
    fields = {p.id: "" if e.cut_by_budget(p) else decode(e, p) for p in e.paths}
    counts = summary(fates)
    report.programs.append(
        {
            "file": str(obj.path),
            "program": prog.name,
            "section": prog.section,
            "summary": {"verdicts": counts, "lines": summary_lines(counts)},
            "paths": [path_json(f, fields, found) for f in fates],
        }
    )
    if kernel_verify:
        report.programs[-1]["kernel"] = kernel_verdict(str(obj.path), prog.name)
    if frames is not None:
        report.programs[-1]["traffic"] = traffic.traffic_json(traffic.run(e, rs.rules, frames), rs.rules, fates)
    report.findings += target_findings(e, rs.rules, fates, fields, found, report.targets)
    return rs


def path_json(f, fields: dict[int, str], found: dict) -> dict:
    """One path's entry of a program's `paths` (schema above): its fate (reasons.PathFate),
    header fields and counterexample."""
    return {
        "id": f.path,
        "verdict": f.verdict,
        "offloaded": f.offloaded,
        "code": f.reason.code if f.reason else None,
        "detail": f.reason.detail if f.reason else None,
        "fields": fields[f.path],
        "counterexample": found[f.path].json() if f.path in found else None,
        "suggestion": found[f.path].suggestion if f.path in found else None,
    }


def target_findings(e: Exploration, rules: list, fates: list, fields: dict, found: dict, targets) -> list[Finding]:
    """The findings of one explored program per target, given its filters (`rules`) and the
    fates of its paths (all of them, or those synthesis cannot change: the editor's first
    publish, offload/editor.py, passes those with no filters)."""
    obj, prog = e.obj, e.program
    out: list[Finding] = []
    for t in targets:
        if t.kind == "ebpf":
            for section, pc, reason in ebpf_findings(obj, prog, t):
                out.append(
                    Finding(t.name, str(obj.path), prog.name, None, None, reason, None, location(obj, section, pc))
                )
            continue
        bad = {i: why for i, r in enumerate(rules) if (why := unsupported(r, t))}
        limit = t.max_rules
        for f in fates:
            p = e.paths[f.path]
            if f.offloaded:
                whys = [bad[i] for i in f.filters if i in bad]
                if whys:
                    reason = Reason("target-unsupported", whys[0])
                elif limit is not None and max(f.filters) >= limit:
                    reason = Reason("rule-budget", f"{len(rules)} filters, {t.name} holds {limit}")
                else:
                    continue
            elif f.reason.code == "pass-to-host":
                continue
            else:
                reason = f.reason
            out.append(
                Finding(
                    t.name,
                    str(obj.path),
                    prog.name,
                    f.path,
                    f.verdict,
                    reason,
                    fields[f.path],
                    location(obj, *decided_at(p)),
                    example=found[f.path].json() if f.path in found else None,
                    suggestion=found[f.path].suggestion if f.path in found else None,
                )
            )
    return out


# --- the runtime check in the real cls_flower (--check-flower) ----------------------------------

#: `check --check-flower`'s findings' target: the software classifier of the VM's kernel.
FLOWER_VM_TARGET = "cls_flower-vm"


def check_in_flower(report: Report) -> None:
    """Replay every explored program's printed filters in the flower VM (one boot for all,
    offload/flowercheck.py) and add a flower-unsound finding per program whose filters took a
    packet the program disagrees with (or that tc refused); the packets go to report.frames."""
    try:
        kernel.check_kernel()
        img = flowervm.image()
        flowervm.check_qemu()
    except (kernel.KernelUnavailable, flowervm.VmUnavailable) as err:
        raise LiftError(f"--check-flower: {err}") from None
    checks: list[tuple[dict, flowercheck.Check]] = []
    for (e, rs), entry in zip(report.explored, report.programs):
        path, name = str(e.obj.path), e.program.name
        printed = rules_output.tc_script(e, rs, "eth0", "skip_sw")
        scripts = [s for s in flowercheck.parse_printed(printed) if flowercheck.has_non_pass(s)]
        if not scripts:
            entry["flower"] = {"checked": False, "line": "no non-pass filter, nothing to replay"}
            continue
        try:
            seeds = flowercheck.witnesses(path, name, e.options, e)
            checks.append((entry, flowercheck.prepare(path, scripts[0], seeds)))
        except kernel.KernelLoadError as err:
            raise LiftError(str(err).splitlines()[0], file=path, program=name) from None
        except kernel.KernelRunError as err:  # e.g. a devmap program: no test run
            entry["flower"] = {"checked": False, "line": f"not replayed: BPF_PROG_TEST_RUN: {str(err).splitlines()[0]}"}
    if not checks:
        return
    try:
        batch = flowercheck.run([c for _, c in checks], img)
    except flowervm.VmError as err:
        raise LiftError(f"--check-flower: {err}") from None
    for entry, c in checks:
        entry["flower"] = flower_json(c, img, batch)
        if c.apply_error:
            detail = f"tc -batch refused the printed script in the VM: {c.apply_error}"
            report.findings.append(_flower_finding(c, Reason("flower-unsound", detail), None, None))
        for u in c.unsound:
            f = u.filter
            detail = (
                f"filter chain {f.chain} prio {f.prio} handle {f.handle} ({f.control}) took a "
                f"{u.probe.kind} packet the program gives {u.verdict}"
            )
            example = {
                "kind": u.probe.kind,
                "length": len(u.probe.frame),
                "hex": u.probe.frame.hex(),
                "fields": f"sent through Linux {img.kernel_release} cls_flower",
                "why": f"{f.control} by the filter, {u.verdict} by the program (BPF_PROG_TEST_RUN)",
            }
            report.findings.append(_flower_finding(c, Reason("flower-unsound", detail), u.verdict, example))
            report.frames.append(u.probe.frame)


def _flower_finding(c: flowercheck.Check, reason: Reason, verdict: str | None, example: dict | None) -> Finding:
    return Finding(FLOWER_VM_TARGET, c.path, c.script.program, None, verdict, reason, None, None, example=example)


def flower_json(c: flowercheck.Check, img: flowervm.Image, batch: flowervm.BatchResult) -> dict:
    """A program's `flower` entry in the JSON report (and its one text line)."""
    sent, taken = sum(c.sent.values()), sum(c.taken.values())
    line = (
        f"Linux {img.kernel_release} under QEMU: {sent} packets, {taken} taken by non-pass filters, "
        f"{len(c.unsound)} unsound, {len(c.outside)} outside the assumptions"
        + (f"; tc refused the script: {c.apply_error}" if c.apply_error else "")
    )
    return {
        "checked": True,
        "kernel": img.kernel_release,
        "packets": sent,
        "taken": taken,
        "unsound": len(c.unsound),
        "outside_assumptions": len(c.outside),
        "per_class": dict(sorted(c.sent.items())),
        "apply_error": c.apply_error or None,
        "boot_seconds": round(batch.boot_seconds, 1),
        "line": line,
    }


# --- fingerprints and baseline -------------------------------------------------------------------


def fingerprint(f: Finding) -> str:
    """Stable across rebuilds and line moves: no path id, pc or line number."""
    where = (f.location or {}).get("text") or ""
    parts = [
        os.path.basename(f.file),
        f.program,
        f.target,
        f.reason.code,
        f.reason.detail,
        f.verdict or "",
        os.path.basename((f.location or {}).get("file") or ""),
        where,
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def assign_fingerprints(findings: list[Finding]) -> None:
    seen: dict[str, int] = {}
    for f in findings:
        base = fingerprint(f)
        n = seen.get(base, 0)
        seen[base] = n + 1
        f.fingerprint = base if n == 0 else f"{base}:{n}"


def baseline_fingerprints(path: str) -> set[str]:
    """Fingerprints of a previous `check --format json` or `--format sarif` output."""
    try:
        doc = json.loads(FsPath(path).read_text())
        if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            return {f["fingerprint"] for f in doc["findings"]}
        if isinstance(doc, dict) and "runs" in doc:
            return {r["partialFingerprints"]["xdp2tc/v1"] for run in doc["runs"] for r in run.get("results", [])}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise LiftError(f"--baseline {path}: cannot read it ({type(err).__name__}: {err})".splitlines()[0]) from None
    raise LiftError(f"--baseline {path}: not a check report (schema {SCHEMA} or SARIF)")


def gated(f: Finding, fail_on: set[str]) -> bool:
    if "any" in fail_on or f.reason.code == "flower-unsound":  # a wrong filter always fails
        return True
    return (
        ("software-drop" in fail_on and f.verdict in ("DROP", "ABORTED"))
        or ("unknown" in fail_on and f.reason.code == "unknown")
        or ("target-unsupported" in fail_on and f.reason.code == "target-unsupported")
    )


def settle(report: Report, baseline: set[str] | None, fail_on: list[str]) -> bool:
    """Fingerprint the findings, mark those not in `baseline` new; whether the gate fails."""
    assign_fingerprints(report.findings)
    for f in report.findings:
        f.new = baseline is None or f.fingerprint not in baseline
    return any(f.new and gated(f, set(fail_on)) for f in report.findings)


# --- output --------------------------------------------------------------------------------------


def _rel(file: str) -> str:
    try:
        return os.path.relpath(file) if os.path.isabs(file) and not os.path.relpath(file).startswith("..") else file
    except ValueError:
        return file


def text(report: Report, failed: bool, fail_on: list[str]) -> str:
    out = []
    for prog in report.programs:
        out.append(f"{prog['file']}: program {prog['program']} ({prog['section']})")
        out += [f"  {line}" for line in prog["summary"]["lines"]]
        if "kernel" in prog:
            out.append(f"  kernel verifier: {prog['kernel']['message']}")
        if "traffic" in prog:
            out += [f"  {line}" for line in traffic.traffic_lines(prog["traffic"])]
        if "flower" in prog:
            out.append(f"  real cls_flower: {prog['flower']['line']}")
    if report.findings:
        out.append("")
    for f in report.findings:
        row = f.reason.row
        loc = f.location
        where = f"{_rel(loc['file'])}:{loc['line']}:{loc['col']}" if loc else f"{f.file}: {f.program}"
        what = f"path {f.path} {f.verdict}" if f.path is not None else f"program {f.program}"
        out.append(
            f"{where}: {row.level} {row.rule} {row.code} [{f.target}] {what}: {f.reason.detail or row.text}"
            + ("" if f.new else " (in baseline)")
        )
        if f.fields:
            out.append(f"    when {f.fields}")
        if f.example:
            out.append(f"    {f.example['kind']} packet ({f.example['length']} bytes): {f.example['hex']}")
            out.append(f"    = {f.example['fields']}: {f.example['why']}")
            out += [f"    {text}" for text in frame_inputs(f.example)]
        if f.suggestion:
            out.append(f"    offloadable with --assume {f.suggestion}")
    new = sum(1 for f in report.findings if f.new)
    out.append(
        f"\n{len(report.findings)} findings ({new} new) on targets "
        f"{', '.join(t.name for t in report.targets)}; --fail-on {','.join(fail_on)}: "
        f"{'FAIL' if failed else 'ok'}"
    )
    return "\n".join(out) + "\n"


def json_doc(report: Report, failed: bool, fail_on: list[str], baseline: str | None) -> dict:
    return {
        "schema": SCHEMA,
        "version": _version(),
        "targets": [t.name for t in report.targets],
        "fail_on": fail_on,
        "baseline": baseline,
        "failed": failed,
        "programs": report.programs,
        "findings": [f.json() for f in report.findings],
    }


def sarif(report: Report) -> dict:
    """SARIF 2.1.0: one run, one rule per reason code, results located on the C source."""
    codes = list(REASONS)
    rules = [
        {
            "id": r.rule,
            "name": "".join(w.capitalize() for w in r.code.split("-")),
            "shortDescription": {"text": r.code},
            "fullDescription": {"text": r.text},
            "defaultConfiguration": {"level": r.level},
            "help": {"text": f"{r.code}: {r.text}. See the xdp2tc README, 'Reason codes'."},
        }
        for r in REASONS.values()
    ]
    results = []
    for f in report.findings:
        row = f.reason.row
        loc = f.location
        if loc:
            physical = {
                "artifactLocation": _artifact(loc["file"]),
                "region": {
                    "startLine": loc["line"],
                    "startColumn": loc["col"],
                    **({"snippet": {"text": loc["text"]}} if loc["text"] else {}),
                },
            }
        else:
            physical = {"artifactLocation": _artifact(f.file)}
        what = f"path {f.path} ({f.verdict})" if f.path is not None else f"program {f.program}"
        message = f"[{f.target}] {f.program}: {what} stays in software: {row.code}: {f.reason.detail or row.text}"
        if f.fields:
            message += f". Taken when {f.fields}"
        if f.suggestion:
            message += f". Offloadable with --assume {f.suggestion}"
        results.append(
            {
                "ruleId": row.rule,
                "ruleIndex": codes.index(row.code),
                "level": row.level,
                "message": {"text": message},
                "locations": [
                    {"physicalLocation": physical, "logicalLocations": [{"name": f.program, "kind": "function"}]}
                ],
                "partialFingerprints": {"xdp2tc/v1": f.fingerprint},
                "baselineState": "new" if f.new else "unchanged",
                "properties": {
                    "target": f.target,
                    "object": f.file,
                    "program": f.program,
                    "path": f.path,
                    "verdict": f.verdict,
                    "code": row.code,
                },
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "xdp2tc", "version": _version(), "rules": rules}},
                "originalUriBaseIds": {"SRCROOT": {"uri": FsPath.cwd().as_uri() + "/"}},
                "results": results,
            }
        ],
    }


def _artifact(file: str) -> dict:
    rel = _rel(file)
    if os.path.isabs(rel):
        return {"uri": FsPath(rel).as_uri()}
    return {"uri": FsPath(rel).as_posix(), "uriBaseId": "SRCROOT"}


def _version() -> str:
    try:
        return metadata.version("xdp2tc")
    except metadata.PackageNotFoundError:
        return "0"


# --- the command ---------------------------------------------------------------------------------


def _list(values: list[str], known, what: str) -> list[str]:
    out = []
    for v in values:
        for item in v.split(","):
            item = item.strip()
            if item not in known:
                raise LiftError(f"--{what} {item!r}: expected one of {', '.join(known)}")
            if item not in out:
                out.append(item)
    return out


def run(args) -> int:
    targets = [TARGETS[n] for n in _list(args.target or list(DEFAULT_TARGETS), TARGETS, "target")]
    fail_on = _list(args.fail_on or ["any"], FAIL_ON, "fail-on")
    for name in ("max_len", "loop_bound", "max_insns", "max_paths", "max_rules"):
        if getattr(args, name) < 1:
            raise LiftError(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    baseline = baseline_fingerprints(args.baseline) if args.baseline else None
    frames = traffic.read_capture(args.pcap) if args.pcap else None
    options = exploration_options(args)
    report = Report(targets)
    for path in args.files:
        check_object(
            path,
            report,
            options,
            args.program,
            tuple(args.assume),
            args.max_rules,
            frames,
            args.kernel_verify,
            args.jobs,
        )
    if args.check_flower:
        check_in_flower(report)
    failed = settle(report, baseline, fail_on)
    if args.format == "json":
        out = json.dumps(json_doc(report, failed, fail_on, args.baseline), indent=2, ensure_ascii=False) + "\n"
    elif args.format == "sarif":
        out = json.dumps(sarif(report), indent=2, ensure_ascii=False) + "\n"
    else:
        out = text(report, failed, fail_on)
    if args.pcap_out:
        write_pcap(args.pcap_out, report.frames)
    if args.output:
        FsPath(args.output).write_text(out)
    else:
        sys.stdout.write(out)
    return EXIT_FOUND if failed else EXIT_OK


def add_parser(sub) -> None:
    p = sub.add_parser("check", help=command_help("check"))
    p.add_argument("files", nargs="+", metavar="FILE.o")
    exploration_flags(p)
    p.add_argument(
        "--target",
        "-t",
        action="append",
        metavar="NAME[,NAME]",
        help=f"offload target(s), repeatable: {', '.join(TARGETS)} (default: {', '.join(DEFAULT_TARGETS)})",
    )
    p.add_argument(
        "--format",
        "-f",
        choices=("text", "json", "sarif"),
        default="text",
        help=f"text (default), JSON (schema {SCHEMA}) or SARIF 2.1.0",
    )
    p.add_argument("--output", "-o", metavar="FILE", help="write the report here instead of stdout")
    p.add_argument(
        "--fail-on",
        action="append",
        metavar="WHAT[,WHAT]",
        help="exit 1 when a new finding is one of: software-drop (a DROP/ABORTED path stays "
        "in software), unknown, target-unsupported, any (default: any)",
    )
    p.add_argument(
        "--baseline",
        metavar="PREVIOUS.json",
        help="a previous check report (json or sarif): only findings not in it count",
    )
    p.add_argument("--max-rules", type=int, default=512, help="filters the NIC holds (default 512)")
    p.add_argument(
        "--kernel-verify",
        action="store_true",
        help="also load each program into the running kernel and report the verifier's "
        "verdict beside xdp2tc's (needs root; without it the report says so)",
    )
    p.add_argument(
        "--pcap",
        metavar="FILE",
        help="a capture (pcap or pcapng, Ethernet): report the share "
        "of packets and bytes the NIC would handle, per filter, and the busiest software paths",
    )
    p.add_argument(
        "--assume",
        action="append",
        default=[],
        choices=sorted(set(ASSUMPTIONS) - set(DEFAULT_ASSUMPTIONS)),
        help="prove under this assumption too (as for `rules`)",
    )
    p.add_argument(
        "--check-flower",
        action="store_true",
        help="also replay each program's filters (as `rules --dev eth0` prints them, skip_hw) in "
        "the real cls_flower of Debian's kernel under QEMU with witness, random and adversarial "
        "packets: a filter taking a packet the program (BPF_PROG_TEST_RUN) gives another verdict "
        "is a flower-unsound finding, which always fails the gate; its packets go to --pcap-out",
    )
    jobs_flag(p)
    pcap_out_flag(p)
