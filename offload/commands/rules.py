"""`xdp2tc rules`: tc flower rules for the paths hardware can take, each proven
(`--check-flower` in offload/flowercheck.py, `--maps-from` in offload/mapfill.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from analyzer.explore import explore
from lifter.errors import LiftError
from lifter.program import load_object
from offload.commands import command_help
from offload.console import progress_printer
from offload.options import (
    assume_flag,
    at_least,
    exploration_flags,
    exploration_options,
    ifname_pair,
    interface_name,
    jobs_flag,
    maps_from,
    pcap_out_flag,
    refuse_duplicates,
    write_pcap,
)
from offload.programs import device_programs
from rules import output as rules_output
from rules import ruleset
from rules.ahead import ExplainAhead
from rules.counterexample import examples
from rules.reasons import account
from rules.synthesis import MIN_FRAME, with_defaults


def add_parser(sub) -> None:
    p = sub.add_parser("rules", help=command_help("rules"))
    p.add_argument("file")
    p.add_argument(
        "--dev",
        required=True,
        type=interface_name,
        help="the device the tc script attaches to (the one running the program)",
    )
    exploration_flags(p, "this program (default: the object's only entry program; see --out-dir)")
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
    jobs_flag(p)
    p.add_argument("--max-rules", type=at_least(1), default=512, help="filters the NIC holds (default 512)")
    p.add_argument(
        "--out-dir",
        metavar="DIR",
        help="write one file per entry program, DIR/PROGRAM.tc (or .json), instead of "
        "stdout; without it an object with several entry programs needs --program",
    )
    assume_flag(p)
    p.add_argument(
        "--ifname",
        action="append",
        default=[],
        metavar="IFINDEX=NAME",
        type=ifname_pair,
        help="device name of an ifindex the program redirects to (repeatable)",
    )
    pcap_out_flag(p)
    p.add_argument(  # run by offload/flowercheck.py
        "--check-flower",
        action="store_true",
        help="apply the printed script in Debian's kernel under QEMU (skip_hw) and send "
        "witnesses, random and adversarial packets: exit 1 if a non-pass filter "
        "takes a packet the program (BPF_PROG_TEST_RUN) gives another verdict; "
        "such packets go to FILE.PROGRAM.unsound.pcap; report on stderr",
    )
    p.add_argument(  # read by offload/mapfill.py
        "--maps-from",
        action="append",
        default=[],
        metavar="SOURCE",
        type=maps_from,
        help="fill the map-dependent paths' rule templates from these map contents (repeatable): "
        "pinned:DIR (maps pinned in bpffs under DIR), prog:ID (the maps of loaded program ID), "
        "json:NAME=FILE (a `bpftool map dump -j` of map NAME) or json:FILE ({NAME: dump, ...})",
    )


def run(args: argparse.Namespace) -> int:
    refuse_duplicates("--ifname", [index for index, _ in args.ifname])
    refuse_duplicates("--assume", args.assume)
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
    contents = None
    if args.maps_from:
        from offload import mapfill  # templates, map sources: only with --maps-from

        contents = mapfill.contents_from(args.maps_from, obj)
    frames = []
    for prog in device_programs(obj, args.program, per_program_output=out_dir is not None):
        # rules asks for the paths' witnesses: synthesis starts from them (one query fewer per path)
        options = dataclasses.replace(exploration_options(args), witnesses=True)
        e = explore(obj, prog, options, progress_printer(prog.name))
        # the software paths' reasons and conditions are worked out by a forked child meanwhile
        texts = args.format == "tc" and not args.teardown
        with ExplainAhead(e, with_defaults(args.assume), texts, start=args.jobs > 1) as ahead:
            try:
                rs = ruleset.build(e, tuple(args.assume), ifnames, args.max_rules)
            except ValueError as err:
                raise LiftError(str(err), file=obj.path, program=prog.name) from err
            ahead.install(rs)
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
        write_pcap(args.pcap_out, frames)
    return 0
