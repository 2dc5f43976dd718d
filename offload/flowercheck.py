"""`xdp2tc rules ... --check-flower`: the printed tc script replayed in the real cls_flower.

The script the user receives is parsed back from the printed text (tc or JSON), its
`skip_sw` turned into `skip_hw` (the same classifier, run in software), and applied in
Debian's kernel under QEMU (offload/flowervm.py). Packets are sent through it: every path's
z3 witness (analyzer/verify.py), random mutations of them, and adversarial variants of each
witness per class of header the dissector walks (IPv4 options of every length, first and
later fragments, one and two VLAN tags, IPv6 with each extension header, truncated L3/L4
headers, runts). For every packet the first filter that took it comes from the per-filter
counters, and the program's verdict on the same bytes from BPF_PROG_TEST_RUN on the host.

A non-pass filter taking a packet the program gives another verdict is a soundness failure
(exit 1, the packets written as pcap), unless the packet breaks an assumption the script
states (`# ASSUMED: ... (--assume NAME)`): those are counted apart, since the proof excludes
them by name.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import re
import struct
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import z3

from analyzer import kernel
from analyzer.exploration import VERDICTS, Exploration, Options
from analyzer.explore import explore
from analyzer.symbolic import PACKET, PACKET_LEN
from analyzer.verify import Verifier
from analyzer.xdp import ETH_HLEN
from lifter.errors import LiftError
from lifter.program import load_object
from rules.synthesis import assumption_constraints
from rules.tc import qdisc_line

from . import flowervm
from .options import exploration_options

#: What a tc action means as a program verdict (the verdicts that agree with it).
ACTION_VERDICTS = {"drop": ("DROP", "ABORTED"), "egress redirect": ("REDIRECT",)}
RANDOM_PACKETS = 200
MAX_FRAME = 1514


# --- packets ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """A frame and the class of header it exercises (witness, random, ipv4-options, ...)."""

    frame: bytes
    kind: str


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


@dataclass
class Parsed:
    """A frame cut into MACs, VLAN tags, ethertype, L3 fields and what follows L3."""

    macs: bytes
    tags: list[bytes]  # 4 bytes each: TPID + TCI
    ethertype: int
    proto: int = -1  # IP protocol, -1 when not IPv4/IPv6
    src4: bytes = b"\xc0\x00\x02\x01"
    dst4: bytes = b"\xc0\x00\x02\x02"
    tos: int = 0
    ttl: int = 64
    l4: bytes = b""
    raw_l3: bytes = b""


def parse_frame(frame: bytes) -> Parsed | None:
    if len(frame) < 14:
        return None
    p = Parsed(frame[:12], [], 0)
    o = 12
    while len(frame) >= o + 4 and frame[o : o + 2] in (b"\x81\x00", b"\x88\xa8"):
        p.tags.append(frame[o : o + 4])
        o += 4
    if len(frame) < o + 2:
        return None
    p.ethertype = int.from_bytes(frame[o : o + 2], "big")
    l3 = frame[o + 2 :]
    p.raw_l3 = l3
    # z3 witnesses often carry what the program reads and nothing else (version 0, ihl 0):
    # the fields are taken where a 20-byte IPv4 / 40-byte IPv6 header has them, and the
    # variants get a well-formed header around them.
    if p.ethertype == 0x0800:
        l3 = l3.ljust(28, b"\0")
        ihl = (l3[0] & 0xF) * 4 if l3[0] >> 4 == 4 and l3[0] & 0xF >= 5 else 20
        p.proto, p.tos, p.ttl = l3[9], l3[1], l3[8]
        p.src4, p.dst4 = l3[12:16], l3[16:20]
        p.l4 = l3[ihl:].ljust(8, b"\0")
    elif p.ethertype == 0x86DD:
        l3 = l3.ljust(48, b"\0")
        p.proto, p.ttl = l3[6], l3[7]
        p.tos = (int.from_bytes(l3[0:2], "big") >> 4) & 0xFF
        p.src4, p.dst4 = l3[20:24], l3[36:40]
        p.l4 = l3[40:]
    return p


def ipv4(p: Parsed, options: bytes = b"", frag: int = 0, proto: int | None = None) -> bytes:
    """An IPv4 header (checksum filled) and p's L4 bytes."""
    ihl = 5 + len(options) // 4
    proto = p.proto if proto is None else proto
    hdr = (
        struct.pack(
            "!BBHHHBBH4s4s",
            0x40 | ihl,
            p.tos,
            20 + len(options) + len(p.l4),
            0x1234,
            frag,
            p.ttl,
            proto & 0xFF,
            0,
            p.src4,
            p.dst4,
        )
        + options
    )
    hdr = hdr[:10] + _checksum(hdr).to_bytes(2, "big") + hdr[12:]
    return hdr + p.l4


def ipv6(p: Parsed, ext: bytes = b"", first_nh: int | None = None) -> bytes:
    """An IPv6 header, extension headers `ext` (first_nh: the first one's number), p's L4."""
    nh = p.proto if first_nh is None else first_nh
    src = bytes.fromhex("20010db8000000000000000000000000")[:12] + p.src4
    dst = bytes.fromhex("20010db8000000000000000000000000")[:12] + p.dst4
    ver = (6 << 28) | (p.tos << 20)
    return struct.pack("!IHBB16s16s", ver, len(ext) + len(p.l4), nh & 0xFF, p.ttl, src, dst) + ext + p.l4


def build_frame(p: Parsed, ethertype: int, l3: bytes, tags: list[bytes] | None = None) -> bytes:
    """p's MACs and tags (or `tags`), then `ethertype` and `l3`, padded to 60 bytes."""
    tags = p.tags if tags is None else tags
    return (p.macs + b"".join(tags) + ethertype.to_bytes(2, "big") + l3).ljust(60, b"\0")[:MAX_FRAME]


def adversarial(seed: bytes) -> list[Probe]:
    """Variants of one frame per class of header the flow dissector walks."""
    p = parse_frame(seed)
    out: list[Probe] = []
    if p is None:
        return out
    if p.proto < 0:  # not IP: make it TCP to port 22 so the IP classes still get packets
        p.proto, p.l4 = 6, struct.pack("!HHIIBBHHH", 40000, 22, 1, 0, 0x50, 0x02, 512, 0, 0)
    plain4 = ipv4(p)
    for n in range(1, 11):  # ihl 6..15
        opts = b"\x01" * (4 * n - 1) + b"\x00"
        out.append(Probe(build_frame(p, 0x0800, ipv4(p, opts)), "ipv4-options"))
    out.append(Probe(build_frame(p, 0x0800, ipv4(p, frag=0x2000)), "fragment-first"))
    out.append(Probe(build_frame(p, 0x0800, ipv4(p, frag=0x2000 | 185)), "fragment-later"))
    out.append(Probe(build_frame(p, 0x0800, ipv4(p, frag=185)), "fragment-later"))
    out.append(Probe(build_frame(p, 0x0800, ipv4(p, frag=0x4000)), "fragment-df"))
    one = [b"\x81\x00" + (0x6064).to_bytes(2, "big")]  # prio 3, vid 100
    two = [b"\x88\xa8" + (0x00C8).to_bytes(2, "big"), b"\x81\x00" + (0x0064).to_bytes(2, "big")]
    untagged = Parsed(p.macs, [], p.ethertype, p.proto, p.src4, p.dst4, p.tos, p.ttl, p.l4, p.raw_l3)
    inner_type, inner = (p.ethertype, p.raw_l3) if p.ethertype in (0x0800, 0x86DD) else (0x0800, plain4)
    out.append(Probe(build_frame(untagged, inner_type, inner, one), "vlan-1"))
    out.append(Probe(build_frame(untagged, inner_type, inner, two), "vlan-2"))
    out.append(Probe(build_frame(untagged, 0x0800, plain4, []), "ipv4"))
    if len(seed) < 60:
        out.append(Probe(seed.ljust(60, b"\0"), "witness-padded"))
    out.append(Probe(build_frame(p, 0x86DD, ipv6(p)), "ipv6"))
    for name, nh in (("hop", 0), ("routing", 43), ("dest", 60)):
        ext = bytes([p.proto & 0xFF, 0]) + (b"\x00" * 6 if nh != 43 else b"\x00\x00" + b"\0" * 4)
        out.append(Probe(build_frame(p, 0x86DD, ipv6(p, ext, nh)), f"ipv6-{name}"))
    for name, off in (("frag-first", 0x0001), ("frag-later", (23 << 3) | 1)):
        ext = struct.pack("!BBHI", p.proto & 0xFF, 0, off, 0x12345678)
        out.append(Probe(build_frame(p, 0x86DD, ipv6(p, ext, 44)), f"ipv6-{name}"))
    ext2 = bytes([60, 0]) + b"\0" * 6 + bytes([p.proto & 0xFF, 0]) + b"\0" * 6
    out.append(Probe(build_frame(p, 0x86DD, ipv6(p, ext2, 0)), "ipv6-hop+dest"))
    l2 = 12 + 4 * len(p.tags) + 2
    whole4 = p.macs + b"".join(p.tags) + b"\x08\x00" + plain4
    for cut in (l2 + 1, l2 + 10, l2 + 19):
        out.append(Probe(whole4[:cut], "truncated-l3"))
    for cut in (l2 + 21, l2 + 22, l2 + 23):
        out.append(Probe(whole4[:cut], "truncated-l4"))
    for cut in (14, 20, 42, 59):
        out.append(Probe(seed[:cut], "runt"))
    return out


def random_probes(seeds: list[bytes], count: int, rng: random.Random) -> list[Probe]:
    """Witnesses with 1-3 header bytes changed, some cut short; a few frames of noise."""
    out = []
    for _ in range(count):
        if seeds and rng.random() < 0.9:
            f = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 3)):
                f[rng.randrange(12, min(len(f), 64))] = rng.randrange(256)
            if rng.random() < 0.15:
                f = f[: rng.randint(14, len(f))]
        else:
            f = bytearray(rng.randrange(256) for _ in range(rng.randint(14, 128)))
        out.append(Probe(bytes(f), "random"))
    return out


def probe_set(seeds: list[bytes], random_count: int, seed: int = 0) -> list[Probe]:
    """The witnesses, their adversarial variants and random mutations; each frame once (the
    first class that made it names it)."""
    probes = [Probe(s, "witness") for s in seeds]
    for s in seeds:
        probes += adversarial(s)
    probes += random_probes(seeds, random_count, random.Random(seed))
    first: dict[bytes, Probe] = {}
    for p in probes:
        first.setdefault(p.frame, p)
    return list(first.values())


def write_pcap(path: Path, frames: list[bytes]) -> None:
    """A classic pcap file (LINKTYPE_ETHERNET)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, frame in enumerate(frames):
            f.write(struct.pack("<IIII", i, 0, len(frame), len(frame)) + frame)


# --- the printed script, parsed back -------------------------------------------------------


@dataclass
class Script:
    """One program's part of the printed output: its tc lines and stated assumptions."""

    program: str
    dev: str
    lines: list[str]
    assumptions: tuple[str, ...]


def parse_printed(text: str) -> list[Script]:
    """The scripts in `xdp2tc rules` output (tc format: one per `# xdp2tc rules for` header;
    JSON: one document or a +list)."""
    text = text.strip()
    if text.startswith("{"):
        doc = json.loads(text)
        docs = doc.get("programs", [doc])
        return [
            Script(
                d["program"],
                d["dev"],
                [qdisc_line(d["dev"])] + [r["tc"] for r in d["rules"]],
                tuple(d["assumptions"]),
            )
            for d in docs
        ]
    out = []
    for part in re.split(r"^(?=# xdp2tc rules for )", text, flags=re.M):
        head = re.match(r"# xdp2tc rules for .* program (\S+):", part)
        if not head:
            continue
        lines = [ln.strip() for ln in part.splitlines() if ln.strip() and not ln.startswith("#")]
        assumed = tuple(re.findall(r"^# ASSUMED: .*\(--assume ([\w-]+)\)$", part, flags=re.M))
        dev = next((ln.split()[3] for ln in lines if ln.startswith(("qdisc add dev ", "qdisc replace dev "))), "")
        out.append(Script(head.group(1), dev, lines, assumed))
    return out


def has_non_pass(script: Script) -> bool:
    """Whether any filter can refuse or redirect a packet (else there is nothing to check)."""
    return any(
        ln.startswith("filter ") and not ln.endswith(" action pass") and " goto chain " not in ln for ln in script.lines
    )


def vm_lines(lines: list[str]) -> list[str]:
    """skip_sw -> skip_hw: the same filters, run by the software classifier."""
    return [re.sub(r" skip_sw( |$)", r" skip_hw\1", ln) for ln in lines]


def other_devices(lines: list[str], dev: str) -> tuple[str, ...]:
    names = []
    for ln in lines:
        words = ln.split()
        names += [words[i + 1] for i, w in enumerate(words[:-1]) if w == "dev" and words[i + 1] != dev]
    return tuple(dict.fromkeys(names))


# --- one program's check ---------------------------------------------------------------------


@dataclass
class Unsound:
    """A packet a non-pass filter took while the program gave `verdict`."""

    probe: Probe
    filter: flowervm.Filter
    verdict: str


@dataclass
class Check:
    """A program's packets, the program's verdicts, and (after the VM ran) the comparison."""

    path: str
    script: Script
    probes: list[Probe]
    verdicts: list[str | None]  # None: shorter than the test run takes (never reaches tc either)
    in_assumptions: list[bool]
    sent: Counter = field(default_factory=Counter)  # class -> frames delivered to tc
    refused: Counter = field(default_factory=Counter)  # class -> frames that never reached tc
    taken: Counter = field(default_factory=Counter)  # class -> frames a non-pass filter took
    unsound: list[Unsound] = field(default_factory=list)
    outside: list[Unsound] = field(default_factory=list)  # disagreements outside the assumptions
    idle: list[flowervm.Filter] = field(default_factory=list)  # non-pass filters no packet reached
    apply_error: str = ""

    def job(self) -> flowervm.Job:
        lines = vm_lines(self.script.lines)
        return flowervm.Job(
            f"{Path(self.path).name}:{self.script.program}",
            self.script.dev,
            lines,
            [p.frame for p in self.probes],
            other_devices(lines, self.script.dev),
        )


def witnesses(path: str, program: str, options: Options, e: Exploration | None = None) -> list[bytes]:
    """Every path's z3 witness packet (analyzer/verify.py builds and runs them); `e`: the
    program's exploration when the caller has it."""
    if e is None:
        obj = load_object(path)
        e = explore(obj, obj.program(program), options)
    with kernel.load(path, programs=[program]) as loaded:
        v = Verifier(e, loaded)
        v.run_witnesses()
    return v.seeds


def prepare(path: str, script: Script, seeds: list[bytes], random_count: int = RANDOM_PACKETS, seed: int = 0) -> Check:
    """The probes for one program and its verdicts on each (maps empty, as loaded)."""
    probes = probe_set(seeds, random_count, seed)
    verdicts: list[str | None] = []
    with kernel.load(path, programs=[script.program]) as loaded:
        for p in probes:
            if len(p.frame) < ETH_HLEN:
                verdicts.append(None)
                continue
            verdicts.append(VERDICTS.get(loaded.run(script.program, p.frame).retval, "INVALID"))
    assumed = assumption_constraints(script.assumptions)
    return Check(path, script, probes, verdicts, [_holds(assumed, p.frame) for p in probes])


def _holds(constraints: list[z3.BoolRef], frame: bytes) -> bool:
    if not constraints:
        return True
    subst = [(PACKET_LEN, z3.BitVecVal(len(frame), 64))]
    subst += [(PACKET[z3.BitVecVal(i, 64)], z3.BitVecVal(b, 8)) for i, b in enumerate(frame[:64])]
    return z3.is_true(z3.simplify(z3.substitute(z3.And(constraints), *subst)))


def first_filter(hits: list[flowervm.Filter]) -> flowervm.Filter | None:
    """The filter whose action decided: the one hit that is not a `goto chain` (None: the
    packet matched nothing, or only gotos into chains where nothing matched: it passes)."""
    final = [f for f in hits if not f.control.startswith("goto")]
    if len(final) > 1:
        raise flowervm.VmError(f"one frame moved {len(final)} terminal filters: {final}")
    return final[0] if final else None


def judge(check: Check, result: flowervm.JobResult) -> None:
    check.apply_error = result.apply_error
    if result.apply_error:
        return
    check.idle = [
        f for f in result.filters if f.packets == 0 and f.control != "pass" and not f.control.startswith("goto")
    ]
    for probe, verdict, ok, _sent, reached, hits in zip(
        check.probes, check.verdicts, check.in_assumptions, result.sent, result.reached, result.hits
    ):
        if not reached:
            check.refused[probe.kind] += 1
            continue
        check.sent[probe.kind] += 1
        f = first_filter(hits)
        if f is None or f.control == "pass":
            continue
        check.taken[probe.kind] += 1
        agree = next((v for k, v in ACTION_VERDICTS.items() if f.control.startswith(k)), ())
        if f.control == f"egress redirect to {check.script.dev}":  # XDP_TX: out of the port it came in
            agree = ("TX",)
        if verdict not in agree:
            (check.unsound if ok else check.outside).append(Unsound(probe, f, str(verdict)))


def report(check: Check, out=None) -> None:
    """The per-program lines of the --check-flower report (default: on stderr)."""
    out = out or sys.stderr
    name = f"{check.path}: program {check.script.program}"
    if check.apply_error:
        print(f"{name}: tc -batch refused the script in the VM: {check.apply_error}", file=out)
        return
    total = sum(check.sent.values())
    print(
        f"{name}: {total} packets through cls_flower, {sum(check.taken.values())} taken by a "
        f"non-pass filter, {len(check.unsound)} unsound, {len(check.outside)} outside the "
        f"assumptions ({', '.join(check.script.assumptions)})",
        file=out,
    )
    kinds = sorted(set(check.sent) | set(check.refused))
    print(
        "  per class: "
        + ", ".join(
            f"{k} {check.sent[k]}" + (f" (+{check.refused[k]} not reaching tc)" if check.refused[k] else "")
            for k in kinds
        ),
        file=out,
    )
    for f in check.idle:
        print(f"  no packet reached filter chain {f.chain} prio {f.prio} handle {f.handle} ({f.control})", file=out)
    for u in check.unsound[:10]:
        print(
            f"  UNSOUND {u.probe.kind}: filter chain {u.filter.chain} prio {u.filter.prio} "
            f"handle {u.filter.handle} ({u.filter.control}) took a packet the program gives "
            f"{u.verdict}: {u.probe.frame[:64].hex()}",
            file=out,
        )
    for u in check.outside[:3]:
        print(
            f"  outside the assumptions, {u.probe.kind}: filter prio {u.filter.prio} "
            f"({u.filter.control}), program {u.verdict}",
            file=out,
        )


def run(checks: list[Check], img: flowervm.Image | None = None) -> flowervm.BatchResult:
    """All checks in one boot."""
    batch = flowervm.run_jobs([c.job() for c in checks], img)
    for c, r in zip(checks, batch.jobs):
        judge(c, r)
    return batch


# --- the CLI option ---------------------------------------------------------------------------


def with_check(rules_command):
    """`rules` with --check-flower: run the command, then check what it printed."""

    def command(args: argparse.Namespace) -> int:
        if not getattr(args, "check_flower", False):
            return rules_command(args)
        if getattr(args, "out_dir", None) or getattr(args, "format", "tc") != "tc":
            print(
                "xdp2tc: rules: --check-flower checks the tc script printed on stdout: it does not "
                "go with --out-dir or --format json",
                file=sys.stderr,
            )
            return 2
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = rules_command(args)
        sys.stdout.write(buf.getvalue())
        sys.stdout.flush()
        if rc:
            return rc
        return check_command(args, buf.getvalue())

    return command


def check_command(args: argparse.Namespace, printed: str) -> int:
    try:
        kernel.check_kernel()
        img = flowervm.image()
        flowervm.check_qemu()
    except (kernel.KernelUnavailable, flowervm.VmUnavailable) as err:
        print(f"xdp2tc: {args.file}: --check-flower: {err}", file=sys.stderr)
        return 2
    options = exploration_options(args)
    checks = []
    for script in parse_printed(printed):
        if not has_non_pass(script):
            print(f"{args.file}: program {script.program}: no non-pass filter, nothing to check", file=sys.stderr)
            continue
        try:
            seeds = witnesses(args.file, script.program, options)
            checks.append(prepare(args.file, script, seeds))
        except kernel.KernelLoadError as err:
            raise LiftError(str(err).splitlines()[0], file=args.file) from err
        except kernel.KernelRunError as err:  # e.g. a devmap program: no test run
            print(
                f"{args.file}: program {script.program}: not checked: BPF_PROG_TEST_RUN: {str(err).splitlines()[0]}",
                file=sys.stderr,
            )
    if not checks:
        return 0
    try:
        batch = run(checks, img)
    except flowervm.VmError as err:
        print(f"xdp2tc: {args.file}: --check-flower: {err}", file=sys.stderr)
        return 2
    print(
        f"# cls_flower oracle: Linux {img.kernel_release} under QEMU (TCG), boot "
        f"{batch.boot_seconds:.1f} s, whole run {batch.total_seconds:.1f} s",
        file=sys.stderr,
    )
    failed = False
    for c in checks:
        report(c)
        if c.apply_error:
            failed = True
        if c.unsound:
            pcap = Path(f"{Path(c.path).stem}.{c.script.program}.unsound.pcap")
            write_pcap(pcap, [u.probe.frame for u in c.unsound])
            print(f"  unsound packets written to {pcap}", file=sys.stderr)
            failed = True
    return 1 if failed else 0
