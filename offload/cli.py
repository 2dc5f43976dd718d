"""The `xdp2tc` command: one subcommand per pipeline view.

Exit codes (documented in the README):
  0  success
  1  the command ran and found a problem the user asked it to gate on (later: `check`)
  2  bad input or usage: unreadable/invalid object, unknown program, bad option
Errors are one line on stderr, `xdp2tc: <file>: <section>: ...: <what>`; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from analyzer import kernel
from analyzer.exploration import ExplorationError, Options
from analyzer.explore import explore
from analyzer.report import SCHEMA, analysis_json, analysis_text
from analyzer.verify import verify
from lifter.errors import EXIT_BAD_INPUT, LiftError
from lifter.printer import format_insn, objdump_text
from lifter.program import BpfObject, Program, load_object
from offload import (  # check: the CI gate (issue 11); cost model (issue 5)
    angrcmd,  # angr engine and cross-check (issue 16)
    budget,  # --timeout, --path-timeout and Options from the flags (issue 14)
    check,
    costcmd,
    flowercheck,  # rules --check-flower (issue 13)
    flowervm,  # sync --apply --vm (issue 13)
    mapfill,  # rules --maps-from (issue 12)
)
from offload.mapsource import open_maps
from offload.options import OneLineParser, at_least, ifname_pair, interface_name, live_maps_from, netns_name, seconds
from offload.programs import EGRESS_SECTIONS, device_programs
from offload.sync import SyncDaemon, filling_for, open_watcher
from offload.tcsync import TcError
from rules import output as rules_output
from rules import ruleset
from rules.counterexample import examples
from rules.reasons import account
from rules.synthesis import ASSUMPTIONS, DEFAULT_ASSUMPTIONS, MIN_FRAME


def _info(args: argparse.Namespace) -> int:
    obj = load_object(args.file)
    if args.json:
        print(json.dumps(info_json(obj), indent=2))
        return 0
    print(
        f"{obj.path}: BPF object, license {obj.license or '(none)'}, "
        f"BTF {'yes' if obj.btf else 'no'}, line info {'yes' if obj.btf_ext else 'no'}"
    )
    print(f"\nprograms ({len(obj.programs)}):")
    print(f"  {'name':<24} {'section':<20} {'attach':<10} {'insns':>6} {'total':>6}  subprograms")
    for prog in obj.programs:
        subs = ", ".join(f.name for f in prog.functions[1:]) or "-"
        print(
            f"  {prog.name:<24} {prog.section:<20} {prog.attach:<10} {prog.entry.size:>6} {prog.insn_count:>6}  {subs}"
        )
    subprogs = [f for f in obj.functions.values() if not f.is_program]
    if subprogs:
        print(
            f"\nsubprograms ({len(subprogs)}): "
            + ", ".join(f"{f.name} ({f.section}, {f.size} insns)" for f in subprogs)
        )
    real_maps = [m for m in obj.maps if m.origin != "global"]
    print(f"\nmaps ({len(real_maps)}):")
    print(f"  {'name':<24} {'type':<18} {'key':>5} {'value':>6} {'max':>8} {'flags':>7}  origin  key/value types")
    for m in real_maps:
        types = f"{m.key_type or '?'} / {m.value_type or '?'}" if m.origin == "btf" else "-"
        extra = ""
        if m.static_values:
            extra = "  slots: " + ", ".join(f"[{k}]={v}" for k, v in sorted(m.static_values.items()))
        print(
            f"  {m.name:<24} {_opt(m.type and m.type.name):<18} {_opt(m.key_size):>5} "
            f"{_opt(m.value_size):>6} {_opt(m.max_entries):>8} {m.flags:>#7x}  {m.origin:<7} {types}{extra}"
        )
    globals_ = [m for m in obj.maps if m.origin == "global"]
    print(f"\nglobals ({len(globals_)} sections):")
    for m in globals_:
        ro = "read-only" if m.read_only else "writable"
        print(f"  {m.name} ({m.value_size} bytes, {ro})")
        for var in m.variables:
            init = m.initial[var.offset : var.offset + var.size].hex() if m.initial else ""
            print(f"    {var.name:<22} +{var.offset:<5} {var.size:>3} bytes  {var.type or '?':<18} = {init or '0'}")
    print(f"\nsource files: {', '.join(obj.source_files) or '(no line info)'}")
    return 0


def _opt(value) -> str:
    return "?" if value is None else str(value)


def info_json(obj: BpfObject) -> dict:
    """The `info --json` document (schema version 1)."""
    return {
        "schema": "xdp2tc.info/1",
        "file": obj.path,
        "license": obj.license,
        "btf": obj.btf is not None,
        "programs": [
            {
                "name": p.name,
                "section": p.section,
                "attach": p.attach,
                "insns": p.entry.size,
                "total_insns": p.insn_count,
                "subprograms": [f.name for f in p.functions[1:]],
            }
            for p in obj.programs
        ],
        "maps": [
            {
                "name": m.name,
                "section": m.section,
                "origin": m.origin,
                "type": m.type.name if m.type else None,
                "key_size": m.key_size,
                "value_size": m.value_size,
                "max_entries": m.max_entries,
                "flags": m.flags,
                "key_type": m.key_type,
                "value_type": m.value_type,
                "static_values": {str(k): v for k, v in sorted(m.static_values.items())},
                "variables": [
                    {"name": v.name, "offset": v.offset, "size": v.size, "type": v.type} for v in m.variables
                ],
            }
            for m in obj.maps
        ],
        "source_files": obj.source_files,
    }


def _disasm(args: argparse.Namespace) -> int:
    obj = load_object(args.file)
    if args.program:
        functions = obj.program(args.program).functions
    else:
        order = [s.name for s in obj.image.sections]
        functions = sorted(obj.functions.values(), key=lambda f: (order.index(f.section), f.start))
    sys.stdout.write(objdump_text(obj, functions, lines=args.lines))
    return 0


def _cfg(args: argparse.Namespace) -> int:
    obj = load_object(args.file)
    prog = obj.program(args.program)
    if args.format == "json":
        print(json.dumps(cfg_json(obj, prog), indent=2))
        return 0
    dot = cfg_dot(obj, prog)
    if args.format == "dot":
        sys.stdout.write(dot)
        return 0
    if shutil.which("dot") is None:
        raise LiftError("--format svg needs graphviz's `dot` (apt-get install graphviz)")
    svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, check=True).stdout
    sys.stdout.write(svg)
    return 0


def cfg_json(obj: BpfObject, prog: Program) -> dict:
    """The `cfg --format json` document (schema version 1)."""
    functions = []
    for func in prog.functions:
        cfg = func.cfg
        functions.append(
            {
                "name": func.name,
                "section": func.section,
                "start": func.start,
                "end": func.end,
                "entry": cfg.entry,
                "exits": cfg.exits,
                "blocks": [
                    {"start": b.start, "end": b.end, "insns": [{"pc": i.pc, "text": format_insn(i)} for i in b.insns]}
                    for b in sorted(cfg.blocks.values(), key=lambda b: b.start)
                ],
                "edges": [{"from": a, "to": b, "kind": d["kind"]} for a, b, d in sorted(cfg.graph.edges(data=True))],
                "back_edges": [list(e) for e in cfg.back_edges],
                "loops": [{"header": lp.header, "latch": lp.latch, "body": sorted(lp.body)} for lp in cfg.loops],
                "irreducible": [list(e) for e in cfg.irreducible],
                "unreachable": cfg.unreachable,
            }
        )
    names = {f.key: f.name for f in obj.functions.values()}
    calls = [{"from": names[a], "to": names[b], "kind": d["kind"]} for a, b, d in prog.call_graph.edges(data=True)]
    return {
        "schema": "xdp2tc.cfg/1",
        "file": obj.path,
        "program": prog.name,
        "functions": functions,
        "call_graph": calls,
    }


def cfg_dot(obj: BpfObject, prog: Program) -> str:
    """Graphviz text: one cluster per function, blocks as boxes, calls as dashed edges."""
    lines = [f'digraph "{prog.name}" {{', "  node [shape=box fontname=monospace fontsize=9];"]
    for n, func in enumerate(prog.functions):
        lines.append(f'  subgraph cluster_{n} {{ label="{func.name} ({func.section})";')
        for block in sorted(func.cfg.blocks.values(), key=lambda b: b.start):
            text = "\\l".join(f"{i.pc}: {format_insn(i)}".replace('"', '\\"') for i in block.insns) + "\\l"
            lines.append(f'    "{func.name}:{block.start}" [label="{text}"];')
        lines.append("  }")
        style = {"taken": "color=darkgreen label=T", "fallthrough": "color=red label=F", "goto": ""}
        for a, b, d in sorted(func.cfg.graph.edges(data=True)):
            back = " style=bold" if (a, b) in func.cfg.back_edges else ""
            lines.append(f'  "{func.name}:{a}" -> "{func.name}:{b}" [{style[d["kind"]]}{back}];')
        for pc, callee, kind in func.callees():
            target = obj.functions[callee]
            lines.append(
                f'  "{func.name}:{func.cfg.block_of(pc).start}" -> "{target.name}:{target.start}" '
                f'[style=dashed label="{kind}"];'
            )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _xdp_programs(obj: BpfObject, name: str | None) -> list[Program]:
    """The program asked for, or every XDP program of the object (legacy sections such as
    `prog` count as XDP); a clear error when there is none."""
    if name:
        return [obj.program(name)]
    progs = [p for p in obj.programs if p.is_xdp]
    if not progs:
        sections = ", ".join(sorted({p.section for p in obj.programs})) or "none"
        raise LiftError(f"no XDP program (sections: {sections})", file=obj.path)
    return progs


def _options(args: argparse.Namespace) -> Options:
    return budget.options(args)


def _progress_printer(name: str):
    """Progress on stderr for long runs, only on a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(paths: int, queued: int, insns: int) -> None:
        print(
            f"\r{name}: {paths} paths, {queued} states queued, {insns} instructions",
            end="",
            file=sys.stderr,
            flush=True,
        )

    return show


def _analyze(args: argparse.Namespace) -> int:
    if angrcmd.wanted(args):
        return angrcmd.analyze(args, _xdp_programs, _options)
    obj = load_object(args.file)
    docs = []
    for prog in _xdp_programs(obj, args.program):
        progress = _progress_printer(prog.name)
        try:
            e = explore(obj, prog, _options(args), progress)
        except ExplorationError as err:
            raise LiftError(str(err), file=obj.path, program=prog.name) from err
        finally:
            if progress:
                print("\r\033[K", end="", file=sys.stderr)
        if args.json:
            docs.append(analysis_json(e))
        else:
            sys.stdout.write(analysis_text(e))
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else {"schema": SCHEMA + "+list", "programs": docs}, indent=2))
    return 0


def _verify(args: argparse.Namespace) -> int:
    obj = load_object(args.file)
    programs = [p for p in _xdp_programs(obj, args.program) if not p.section.startswith(EGRESS_SECTIONS)]
    if not programs:
        raise LiftError(
            "no program that BPF_PROG_TEST_RUN can run (devmap/cpumap egress programs cannot be test-run)",
            file=obj.path,
        )
    try:
        kernel.check_kernel()
    except kernel.KernelUnavailable as err:
        print(f"xdp2tc: {obj.path}: {err}", file=sys.stderr)
        return kernel.EXIT_UNAVAILABLE
    failed = False
    for prog in programs:
        e = explore(obj, prog, _options(args), _progress_printer(prog.name))
        try:
            with kernel.load(obj.path, programs=[prog.name]) as loaded:
                report = verify(e, loaded, args.random, args.seed)
        except kernel.KernelLoadError as err:
            print(f"xdp2tc: {err}".splitlines()[0], file=sys.stderr)
            return EXIT_BAD_INPUT
        print(
            f"{obj.path}: program {prog.name}: {len(e.paths)} paths, {report.packets} packets "
            f"({report.witnesses} witnesses, {report.random} random), {len(report.mismatches)} mismatches"
            + (f", {report.consistent} allowed by helper-dependent paths" if report.consistent else "")
        )
        for path_id, why in report.unwitnessable:
            print(f"  path #{path_id} not run: {why}")
        for m in report.mismatches:
            print(f"  MISMATCH {m}")
        failed |= bool(report.mismatches)
    return 1 if failed else 0


def _refuse_duplicates(option: str, values: list) -> None:
    seen = set()
    for value in values:
        if value in seen:
            raise LiftError(f"{option} {value} given twice")
        seen.add(value)


def _rules(args: argparse.Namespace) -> int:
    _refuse_duplicates("--ifname", [index for index, _ in args.ifname])
    _refuse_duplicates("--assume", args.assume)
    if args.max_len < MIN_FRAME:
        raise LiftError(f"--max-len {args.max_len}: rules assume frames of at least {MIN_FRAME} bytes")
    if args.teardown and args.format == "json":
        raise LiftError("--teardown prints a tc script; the JSON has its lines as `teardown`")
    out_dir = Path(args.out_dir) if args.out_dir else None
    if out_dir is not None and not out_dir.is_dir():
        raise LiftError("--out-dir: not a directory", file=args.out_dir)
    obj = load_object(args.file)
    ifnames = dict(args.ifname)
    if args.maps_from and getattr(args, "check_flower", False):
        raise LiftError("--check-flower does not go with --maps-from yet (the VM's program would run with empty maps)")
    contents = mapfill.contents_from(args.maps_from, obj) if args.maps_from else None
    frames = []
    for prog in device_programs(obj, args.program, per_program_output=out_dir is not None):
        e = explore(obj, prog, _options(args), _progress_printer(prog.name))
        try:
            rs = ruleset.build(e, tuple(args.assume), ifnames, args.max_rules)
        except ValueError as err:
            raise LiftError(str(err), file=obj.path, program=prog.name) from err
        skip = "skip_hw" if args.sw else "skip_sw"
        filled = mapfill.fill_rules(rs, contents, args.dev, skip, args.max_rules) if contents else None
        if args.pcap_out:
            fates = account(e, rs, rs.synth.maps)
            found = examples(rs, fates)
            frames += [found[f.path].frame for f in fates if f.path in found]
        if args.format == "json":
            doc = rules_output.rules_json(e, rs, args.dev, skip)
            if filled:
                doc["maps"] = mapfill.json_part(filled)
            text = json.dumps(doc, indent=2) + "\n"
        elif args.teardown:
            text = rules_output.teardown_script(e, rs, args.dev, skip)
        else:
            text = rules_output.tc_script(e, rs, args.dev, skip)
            if filled:
                text += "\n".join(mapfill.comments(filled) + filled.script.lines) + "\n"
        if out_dir is None:
            sys.stdout.write(text)
            continue
        target = out_dir / (f"{prog.name}.teardown.tc" if args.teardown else f"{prog.name}.{args.format}")
        try:
            target.write_text(text)
        except OSError as err:
            raise LiftError(f"cannot write: {err.strerror}", file=str(target)) from None
        print(target)
    if args.pcap_out:
        check.write_pcap(args.pcap_out, frames)
    return 0


def _sync(args: argparse.Namespace) -> int:
    """`xdp2tc sync` (issue 12, item 3; offload/sync.py): fill, reconcile, then follow."""
    obj = load_object(args.file)
    _refuse_duplicates("--assume", args.assume)
    prog = device_programs(obj, args.program, per_program_output=False)[0]
    filling = filling_for(obj, prog, tuple(args.assume))
    if filling is None:
        raise LiftError(
            f"program {prog.name}: no rule template fills filters from its maps (issue 12 item 1)", file=obj.path
        )
    try:
        kernel.check_kernel()
    except kernel.KernelUnavailable as err:
        raise LiftError(str(err), file=obj.path) from None
    live = open_maps(obj, args.maps_from)
    missing = sorted((filling.maps | filling.counter_maps) - live.maps.keys())
    if missing:
        live.close()
        raise LiftError(f"--maps-from {args.maps_from}: no live map {', '.join(missing)}", file=obj.path)
    for line in getattr(filling, "notes", list)():  # what the templates are, before the first batch
        print(line)
    device = flowervm.sync_device(args)  # here, or with --vm in the flower VM (issue 13)
    watcher = None if args.once else open_watcher(sys.stdout)
    daemon = SyncDaemon(
        filling, live, device, apply=args.apply, out=sys.stdout, watcher=watcher, interval=args.interval
    )
    signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop ends sync like ^C
    try:
        try:
            daemon.start()
        except TcError as err:
            raise LiftError(f"--dev {args.dev}: {err}", file=obj.path) from None
        if not args.once:
            daemon.run()
    except KeyboardInterrupt:
        pass
    finally:
        daemon.close()
    return 1 if daemon.failed else 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _exploration_flags(
    p: argparse.ArgumentParser, program_help: str = "only this program (default: every XDP program)"
) -> None:
    d = Options()
    p.add_argument("--program", "-p", help=program_help)
    p.add_argument(
        "--max-len",
        type=at_least(MIN_PACKET),
        default=d.max_len,
        help=f"largest packet in bytes, at least {MIN_PACKET} (default {d.max_len})",
    )
    p.add_argument(
        "--loop-bound",
        type=at_least(1),
        default=d.loop_bound,
        help=f"iterations of one loop per path before the path is cut (default {d.loop_bound})",
    )
    p.add_argument(
        "--max-insns",
        type=at_least(1),
        default=d.max_insns,
        help=f"instructions explored before remaining paths are cut (default {d.max_insns})",
    )
    p.add_argument("--max-paths", type=at_least(1), default=d.max_paths, help=f"paths (default {d.max_paths})")
    budget.add_flags(p)  # --timeout, --path-timeout (offload/budget.py)


def _assume_flag(p: argparse.ArgumentParser) -> None:
    """--assume, as `rules` and `sync` take it (the proofs' assumptions beyond the default)."""
    p.add_argument(
        "--assume",
        action="append",
        default=[],
        choices=sorted(set(ASSUMPTIONS) - set(DEFAULT_ASSUMPTIONS)),
        help="prove under this assumption too (repeatable): "
        + "; ".join(f"{k}: {v}" for k, v in ASSUMPTIONS.items() if k not in DEFAULT_ASSUMPTIONS)
        + f" (always assumed: {ASSUMPTIONS['min-frame']})",
    )


#: The smallest `--max-len`: an Ethernet header (every program reads one; `rules` assumes
#: frames of at least 60 bytes and refuses a smaller bound, see _rules).
MIN_PACKET = 14


def parser() -> argparse.ArgumentParser:
    top = OneLineParser(prog="xdp2tc", description=__doc__.split("\n")[0])
    top.add_argument("--version", action="version", version=f"xdp2tc {metadata.version('xdp2tc')}")
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="programs, maps, globals and source files of an object")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("disasm", help="disassembly in llvm-objdump -dr layout")
    p.add_argument("file")
    p.add_argument("--program", "-p", help="only this program and its subprograms")
    p.add_argument("--lines", "-l", action="store_true", help="interleave source file:line:col")
    p = sub.add_parser("cfg", help="control-flow graph of a program")
    p.add_argument("file")
    p.add_argument("--program", "-p")
    p.add_argument("--format", choices=("dot", "json", "svg"), default="dot")
    p = sub.add_parser("analyze", help="explore every path: verdicts, effects, decision classes")
    p.add_argument("file")
    _exploration_flags(p)
    p.add_argument("--json", action="store_true", help=f"machine-readable output (schema {SCHEMA})")
    angrcmd.add_flags(p)
    p = sub.add_parser("verify", help="check every path's prediction against the running kernel")
    p.add_argument("file")
    _exploration_flags(p)
    p.add_argument("--random", type=at_least(0), default=1000, help="random packets after the witnesses (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p = sub.add_parser("rules", help="tc flower rules for the paths hardware can take, each proven")
    p.add_argument("file")
    p.add_argument(
        "--dev",
        required=True,
        type=interface_name,
        help="the device the tc script attaches to (the one running the program)",
    )
    _exploration_flags(p, "this program (default: the object's only entry program; see --out-dir)")
    p.add_argument(
        "--format",
        choices=("tc", "json"),
        default="tc",
        help=f"a tc -batch script (default) or JSON (schema {rules_output.SCHEMA})",
    )
    p.add_argument("--sw", action="store_true", help="skip_hw instead of skip_sw (test in software)")
    p.add_argument(
        "--teardown",
        action="store_true",
        help="print the tc -batch script deleting this script's filters instead (same options)",
    )
    p.add_argument("--max-rules", type=at_least(1), default=512, help="filters the NIC holds (default 512)")
    p.add_argument(
        "--out-dir",
        metavar="DIR",
        help="write one file per entry program, DIR/PROGRAM.tc (or .json), instead of "
        "stdout; without it an object with several entry programs needs --program",
    )
    _assume_flag(p)
    p.add_argument(
        "--ifname",
        action="append",
        default=[],
        metavar="IFINDEX=NAME",
        type=ifname_pair,
        help="device name of an ifindex the program redirects to (repeatable)",
    )
    check.add_pcap_out(p)
    flowercheck.add_option(p)  # --check-flower (issue 13)
    mapfill.add_option(p)  # --maps-from (issue 12)
    p = sub.add_parser("sync", help="keep tc filters in step with a running program's maps (a daemon)")
    p.add_argument("file")
    p.add_argument("--dev", required=True, type=interface_name, help="the device the filters go on")
    p.add_argument(
        "--maps-from",
        required=True,
        type=live_maps_from,
        metavar="pinned:DIR|prog:ID",
        help="the live maps: pinned in bpffs under DIR (one file per map name), or those of loaded program ID",
    )
    p.add_argument("--program", "-p", help="this program (default: the object's only entry program)")
    _assume_flag(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="run each batch with tc -batch")
    mode.add_argument("--dry-run", action="store_true", help="print each batch with a timestamp (the default)")
    p.add_argument(
        "--interval",
        type=seconds,
        default=1.0,
        help="seconds between map re-reads (changes the watcher cannot see) and counter folds (default 1)",
    )
    p.add_argument("--once", action="store_true", help="reconcile (one batch) and exit; no watcher")
    p.add_argument("--netns", type=netns_name, help="run tc in this network namespace (tc -n NETNS)")
    p.add_argument("--sw", action="store_true", help="skip_hw instead of skip_sw (test in software)")
    flowervm.add_sync_option(p)  # --vm (issue 13)
    # --- cost model (issue 5): `cost` and `calibrate`, implemented in offload/costcmd.py ---
    costcmd.add_parsers(sub, _exploration_flags)
    # --- end cost model ---
    check.add_parser(sub, _exploration_flags)  # the CI gate (issue 11), offload/check.py
    sub.add_parser("lsp", help="the language server for editors (stdio; offload/lsp.py)")
    return top


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "info": _info,
    "disasm": _disasm,
    "cfg": _cfg,
    "analyze": _analyze,
    "verify": _verify,
    "rules": flowercheck.with_check(_rules),  # --check-flower (issue 13)
    "sync": _sync,  # issue 12, offload/sync.py
}
# --- cost model (issue 5) ---
COMMANDS.update(costcmd.COMMANDS)
# --- end cost model ---
COMMANDS.update(check.COMMANDS)


def _lsp(args: argparse.Namespace) -> int:
    try:
        from offload import lsp
    except ImportError as err:
        raise LiftError(f"lsp needs pygls and lsprotocol (pip install 'xdp2tc[lsp]'): {err}") from None
    return lsp.run()


COMMANDS["lsp"] = _lsp


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as done:  # usage errors (one line, 2), --help and --version (0)
        return done.code if isinstance(done.code, int) else 0
    try:
        return COMMANDS[args.command](args)
    except LiftError as err:
        print(f"xdp2tc: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
