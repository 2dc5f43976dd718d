"""`xdp2tc info`: programs, maps, globals and source files of an object."""

from __future__ import annotations

import argparse
import json
import sys

from lifter.program import load_object
from offload.commands import command_help
from offload.render import info_json, info_text


def add_parser(sub) -> None:
    p = sub.add_parser("info", help=command_help("info"))
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    obj = load_object(args.file)
    if args.json:
        print(json.dumps(info_json(obj), indent=2))
        return 0
    sys.stdout.write(info_text(obj))
    return 0
