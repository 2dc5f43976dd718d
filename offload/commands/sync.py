"""`xdp2tc sync`: keep tc filters in step with a running program's maps (the daemon is
offload/sync.py)."""

from __future__ import annotations

import argparse
import signal
import sys

from analyzer import kernel
from lifter.errors import LiftError
from lifter.program import load_object
from offload import flowervm
from offload.commands import command_help
from offload.mapsource import open_maps
from offload.options import assume_flag, interface_name, live_maps_from, netns_name, refuse_duplicates, seconds
from offload.programs import device_programs
from offload.sync import SyncDaemon, filling_for, open_watcher
from offload.tcsync import TcError


def add_parser(sub) -> None:
    p = sub.add_parser("sync", help=command_help("sync"))
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
    assume_flag(p)
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
    p.add_argument(
        "--sw",
        action="store_true",
        help="skip_hw instead of skip_sw (test in software; counters are not folded: tc ingress runs "
        "after XDP, so the program counted those packets itself)",
    )
    flowervm.add_sync_option(p)  # --vm: the batches applied in the flower VM


def run(args: argparse.Namespace) -> int:
    """Fill, reconcile, then follow (offload/sync.py)."""
    obj = load_object(args.file)
    refuse_duplicates("--assume", args.assume)
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
    missing = sorted(filling.maps - live.maps.keys())
    if missing:
        live.close()
        raise LiftError(f"--maps-from {args.maps_from}: no live map {', '.join(missing)}", file=obj.path)
    unfolded = sorted(filling.counter_maps - live.maps.keys())
    if unfolded:  # the filters do not depend on them: sync runs, those counters stay unfolded
        print(
            f"xdp2tc: sync: --maps-from {args.maps_from}: no live counter map {', '.join(unfolded)}: "
            "the packets the NIC takes are not added to it",
            file=sys.stderr,
        )
    for line in getattr(filling, "notes", list)():  # what the templates are, before the first batch
        print(line)
    device = flowervm.sync_device(args)  # here, or with --vm in the flower VM
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
