"""The flower VM session (issue 13 item 4): boot time and per-batch apply latency in the VM,
as `sync --apply --vm` pays them.

Boot: a Session started and stopped --boots times: the guest's own clock at /init ready
(kernel start to modules loaded), and the host's wall clock from qemu's start to the session
loop's first reply line (firmware, decompression, initramfs unpacking included).

Apply: in one session, on a veth with a clsact qdisc, batches of --size `filter add` lines
(skip_hw flower drops, one address each, sync's own line format via TcDevice.plan) applied with
TcDevice.apply (the executor seam: `tc -batch -` in the guest over ttyS1), then the same
filters deleted in one batch; the host's wall clock around each apply. A 1-line batch and a
`tc -j filter show` read are timed too (what each sync round trip costs at least).

    .venv/bin/python bench/flowervm.py [--boots 3] [--batches 10] [--size 1,10,100] [--json FILE]

Needs qemu and `make flowervm` (no root needed for the VM itself). Medians; the load
(`uptime`) is printed with the results: on shared cores, compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from offload import flowervm  # noqa: E402
from offload.tcsync import SyncFilter, TcDevice, parse_filters  # noqa: E402
from rules.flower import FlowerMatch, prefix  # noqa: E402


def boots(n: int) -> dict:
    guest, host = [], []
    for _ in range(n):
        with flowervm.Session() as s:
            guest.append(s.boot_seconds)
            host.append(s.host_boot_seconds)
    return {"guest_s": statistics.median(guest), "host_s": statistics.median(host), "runs": n}


def applies(batches: int, sizes: list[int]) -> dict:
    out = {}
    with flowervm.Session() as s:
        s.device("eth0")
        device = TcDevice("eth0", "skip_hw", flowervm.VmTc(s))
        reads = []
        for _ in range(batches):
            t = time.monotonic()
            device.load(parse_filters(device.show()))
            reads.append(time.monotonic() - t)
        out["show_ms"] = statistics.median(reads) * 1000
        base = 0
        for size in sizes:
            add, delete = [], []
            for _ in range(batches):
                filters = [
                    SyncFilter(
                        FlowerMatch("ip", (("src_ip", prefix("src_ip", 0x0A000000 + base + i, 32)),)), ("drop",), 10
                    )
                    for i in range(size)
                ]
                base += size
                batch = device.plan(filters)
                t = time.monotonic()
                device.apply(batch)
                add.append(time.monotonic() - t)
                device.commit(batch)
                batch = device.plan([])
                t = time.monotonic()
                device.apply(batch)
                delete.append(time.monotonic() - t)
                device.commit(batch)
            out[f"add_{size}_ms"] = statistics.median(add) * 1000
            out[f"del_{size}_ms"] = statistics.median(delete) * 1000
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boots", type=int, default=3)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--size", default="1,10,100")
    ap.add_argument("--json")
    args = ap.parse_args()
    load = os.getloadavg()
    result = {"load_before": load, "boot": boots(args.boots)}
    result["apply"] = applies(args.batches, [int(x) for x in args.size.split(",")])
    result["load_after"] = os.getloadavg()
    b, a = result["boot"], result["apply"]
    print(f"load {load[0]:.1f} -> {result['load_after'][0]:.1f} (1-min average)")
    print(f"boot (median of {b['runs']}): guest {b['guest_s']:.1f} s, host (qemu start to session) {b['host_s']:.1f} s")
    print(f"tc -j filter show in the VM: {a['show_ms']:.0f} ms")
    for key, value in a.items():
        if key != "show_ms":
            verb, size, _ = key.split("_")
            print(f"{verb} batch of {size} filters: {value:.0f} ms (median of {args.batches})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
