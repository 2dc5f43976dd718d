"""`xdp2tc cfg`: the control-flow graph of a program (dot, JSON or SVG)."""

from __future__ import annotations

import argparse
import json
import sys

from lifter.program import load_object
from offload.commands import command_help
from offload.console import svg
from offload.render import cfg_dot, cfg_json


def add_parser(sub) -> None:
    p = sub.add_parser("cfg", help=command_help("cfg"))
    p.add_argument("file")
    p.add_argument("--program", "-p")
    p.add_argument("--format", choices=("dot", "json", "svg"), default="dot")


def run(args: argparse.Namespace) -> int:
    obj = load_object(args.file)
    prog = obj.program(args.program)
    if args.format == "json":
        print(json.dumps(cfg_json(obj, prog), indent=2))
        return 0
    dot = cfg_dot(obj, prog)
    if args.format == "dot":
        sys.stdout.write(dot)
        return 0
    sys.stdout.write(svg(dot, "--format svg"))
    return 0
