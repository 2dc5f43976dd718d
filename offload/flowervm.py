"""The real cls_flower as an oracle: Debian's kernel booted under QEMU (TCG) with a busybox
initramfs, where `tc ... flower skip_hw` filters run on a veth and their counters say which
filter took each packet.

Nothing here is committed from Debian: `fetch()` (`make flowervm`, `python -m offload.flowervm
fetch`) downloads the packages with `apt-get download` into build/flowervm/ (ignored),
unpacks them with `dpkg-deb -x`, and builds one initramfs per set of package versions:

- the kernel of `linux-image-amd64` and the modules veth sch_ingress cls_flower act_gact
  act_mirred act_pedit act_csum act_vlan plus what their `.modinfo` says they depend on;
- busybox-static (the shell and init), iproute2's `ip` and `tc` with every shared library their
  ELF headers name (found in the lib* packages iproute2 depends on);
- the sender (offload/flowervm_sender.c, built with the host's `gcc -static`).

`run_jobs()` boots the VM once for a batch of jobs. A job is a tc script, the device it uses
and frames: the guest makes a veth pair (frames go in at the peer, tc's ingress hook runs on
the device), applies the script with `tc -batch`, and sends the frames one by one. After each,
the sender waits until the ingress qdisc has counted it (veth delivers through the backlog),
then reads the counters of every filter with the RTM_GETTFILTER dump `tc -s filter show` uses
(one `tc` process per frame costs 0.25 s under TCG); the host takes the filters whose counters
moved, and checks the totals against `tc -s -j filter show` at the end of the job. With
`Job.capture`, the sender also reads the frames the actions sent out of those devices (a
mirred redirect's bytes after pedit/csum/vlan: the rewrite bytes check, tests/test_rewrite.py). One vCPU,
so a frame's classification ends before the sender runs again; IPv6 is off in the guest, so
none of its own packets reach the filters. TCG only: a KVM boot was seen to hang in the
firmware on this machine.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import io
import json
import lzma
import os
import queue
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from lifter.errors import LiftError
from offload.tcsync import FOLD_SOFTWARE, TcDevice

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDP2TC_FLOWERVM_CACHE", ROOT / "build" / "flowervm"))
SENDER_SOURCE = Path(__file__).resolve().parent / "flowervm_sender.c"
MODULES = ("veth", "sch_ingress", "cls_flower", "act_gact", "act_mirred", "act_pedit", "act_csum", "act_vlan")
PACKAGES = ("linux-image-amd64", "busybox-static", "iproute2")
QEMU = "qemu-system-x86_64"
#: Seconds a boot may take before the run is abandoned (TCG on a shared core is slow).
BOOT_TIMEOUT = 900


class VmUnavailable(RuntimeError):
    """QEMU, the fetched packages or the build of the initramfs are missing (one-line reason)."""


class VmError(RuntimeError):
    """The VM booted but the batch did not run to its end (one-line reason)."""


@dataclass(frozen=True)
class Image:
    """What a boot needs: kernel, base initramfs, and the versions they were built from."""

    kernel: Path
    initramfs: Path
    kernel_release: str
    packages: tuple[str, ...]  # .deb file names


# --- fetching and building ------------------------------------------------------------------


def _apt(args: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(["apt-get", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise VmUnavailable(f"apt-get {' '.join(args[:2])}: {msg[-1] if msg else proc.returncode}")
    return proc.stdout


def _uris(packages: list[str]) -> dict[str, str]:
    """package -> .deb file name apt would download (the version is in the name)."""
    out = {}
    for line in _apt(["download", "--print-uris", *packages]).splitlines():
        parts = line.split()
        if len(parts) >= 2:
            name = parts[1]
            out[name.split("_")[0]] = name
    return out


def _download(packages: list[str], debs: Path) -> list[Path]:
    names = _uris(packages)
    missing = [p for p in packages if not (debs / names.get(p, "-")).is_file()]
    if missing:
        _apt(["download", *missing], cwd=debs)
    return [debs / names[p] for p in packages]


def _library_packages() -> list[str]:
    """The lib* packages iproute2 depends on, recursively (a superset of what ip/tc load)."""
    proc = subprocess.run(
        [
            "apt-cache",
            "depends",
            "--recurse",
            "--no-recommends",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
            "--no-pre-depends",
            "iproute2",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise VmUnavailable("apt-cache depends iproute2 failed")
    names = {line.strip() for line in proc.stdout.splitlines() if not line.startswith(" ")}
    return sorted(
        n
        for n in names
        if re.match(r"^(lib|zlib)[\w.+-]*$", n) and not n.endswith("-common") and n != "libdebian-installer4"
    )


def fetch(cache: Path = CACHE, log=print) -> Image:
    """Download what is missing, build the initramfs and the sender if their inputs changed."""
    if shutil.which("apt-get") is None:
        raise VmUnavailable("apt-get is missing: the flower VM is built from Debian packages")
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    try:
        meta = _download(["linux-image-amd64"], debs)[0]
    except VmUnavailable:  # a fresh machine may have no package lists yet
        log("flower VM: apt-get download failed; running apt-get update once")
        _apt(["update"])
        meta = _download(["linux-image-amd64"], debs)[0]
    depends = subprocess.run(
        ["dpkg-deb", "-f", str(meta), "Depends"], capture_output=True, text=True, check=True
    ).stdout
    kernel_pkg = re.search(r"(linux-image-[\w.-]+-amd64)", depends)
    if not kernel_pkg:
        raise VmUnavailable(f"{meta.name}: no kernel package in Depends: {depends.strip()}")
    packages = [kernel_pkg.group(1), "busybox-static", "iproute2"] + _library_packages()
    files = _download(packages, debs)
    key = hashlib.sha256("\n".join(sorted(f.name for f in files)).encode() + SENDER_SOURCE.read_bytes()).hexdigest()[
        :16
    ]
    out = cache / key
    ready = out / "image.json"
    if ready.is_file():
        log(f"flower VM: {out} is up to date")
    else:
        log(f"flower VM: building {out} from {len(files)} packages")
        _build(files, out)
    shutil.copy(ready, cache / "image.json")
    return image(cache)


def image(cache: Path = CACHE) -> Image:
    """The image `fetch()` built last; VmUnavailable when there is none."""
    path = cache / "image.json"
    if not path.is_file():
        raise VmUnavailable(f"the flower VM image is not built ({path} missing): run `make flowervm`")
    doc = json.loads(path.read_text())
    img = Image(Path(doc["kernel"]), Path(doc["initramfs"]), doc["kernel_release"], tuple(doc["packages"]))
    for p in (img.kernel, img.initramfs):
        if not p.is_file():
            raise VmUnavailable(f"the flower VM image is incomplete ({p} missing): run `make flowervm`")
    return img


def _build(files: list[Path], out: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="xdp2tc-flowervm-"))
    try:
        root = tmp / "root"
        for f in files:
            subprocess.run(["dpkg-deb", "-x", str(f), str(root)], check=True)
        kernels = sorted(root.glob("boot/vmlinuz-*"))
        if not kernels:
            raise VmUnavailable("no boot/vmlinuz-* in the kernel package")
        release = kernels[-1].name.removeprefix("vmlinuz-")
        entries: dict[str, bytes | str | None] = {}  # path -> file bytes, symlink target or dir
        _add_busybox(root, entries)
        _add_iproute(root, entries)
        order = _add_modules(root, release, entries)
        entries["modules.order"] = "\n".join(order).encode() + b"\n"
        entries["init"] = INIT.encode()
        entries["bin/sender"] = _build_sender(tmp)
        out.mkdir(parents=True, exist_ok=True)
        kernel = out / "vmlinuz"
        shutil.copy(kernels[-1], kernel)
        initramfs = out / "initramfs.cpio.gz"
        initramfs.write_bytes(gzip.compress(cpio(entries), 6))
        (out / "image.json").write_text(
            json.dumps(
                {
                    "kernel": str(kernel),
                    "initramfs": str(initramfs),
                    "kernel_release": release,
                    "packages": sorted(f.name for f in files),
                    "modules": order,
                },
                indent=1,
            )
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _add_busybox(root: Path, entries: dict) -> None:
    bb = root / "bin" / "busybox"
    if not bb.is_file():
        raise VmUnavailable("busybox-static has no bin/busybox")
    for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "job", "lib", "lib64", "etc", "run"):
        entries[d] = None
    entries["bin/busybox"] = bb.read_bytes()
    entries["bin/sh"] = "busybox"


def _add_iproute(root: Path, entries: dict) -> None:
    libdirs = [root / "lib/x86_64-linux-gnu", root / "usr/lib/x86_64-linux-gnu"]
    needed: list[Path] = []
    for tool in ("ip", "tc"):
        found = [
            p
            for p in (root / "bin" / tool, root / "sbin" / tool, root / "usr/bin" / tool, root / "usr/sbin" / tool)
            if p.is_file() and not p.is_symlink()
        ]
        if not found:
            raise VmUnavailable(f"iproute2 has no {tool} binary")
        entries[f"usr/sbin/{tool}"] = found[0].read_bytes()
        needed.append(found[0])
    seen: set[str] = set()
    while needed:
        elf = needed.pop()
        for lib in _needed(elf):
            if lib in seen:
                continue
            seen.add(lib)
            path = next((d / lib for d in libdirs if (d / lib).exists()), None)
            if path is None:
                raise VmUnavailable(f"{elf.name} needs {lib}, which no fetched package provides")
            real = path.resolve()
            if not real.is_relative_to(root):  # an absolute symlink inside the package
                real = root / os.readlink(path).lstrip("/")
            entries[f"lib/x86_64-linux-gnu/{lib}"] = real.read_bytes()
            needed.append(real)
    loader = root / "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    entries["lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"] = loader.resolve().read_bytes()
    entries["lib64/ld-linux-x86-64.so.2"] = "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"


def _needed(path: Path) -> list[str]:
    with open(path, "rb") as f:
        elf = ELFFile(f)
        out = []
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                out += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
        return out


def _add_modules(root: Path, release: str, entries: dict) -> list[str]:
    """The modules and their dependencies (read from each module's .modinfo), in load order."""
    base = root / "lib" / "modules" / release
    index = {}
    for p in base.rglob("*.ko*"):
        index[re.sub(r"\.ko(\.xz|\.zst|\.gz)?$", "", p.name).replace("-", "_")] = p
    order: list[str] = []

    def alias(name: str) -> str:
        """A crypto algorithm name as a module: itself, else its generic implementation."""
        name = name.replace("-", "_")
        for cand in (name, f"{name}_generic"):
            if cand in index:
                return cand
        raise VmUnavailable(f"no module provides {name} in the kernel package {release}")

    def visit(name: str, chain: tuple[str, ...]) -> None:
        name = name.replace("-", "_")
        if name in order:
            return
        if name in chain:
            raise VmUnavailable(f"module dependency cycle: {' -> '.join(chain + (name,))}")
        path = index.get(name)
        if path is None:
            raise VmUnavailable(f"module {name} is not in the kernel package {release}")
        data = path.read_bytes()
        if path.suffix == ".xz":
            data = lzma.decompress(data)
        elif path.suffix != ".ko":
            raise VmUnavailable(f"module {path.name}: compression not supported")
        info = _modinfo(data)
        deps = [d for d in info.get("depends", "").split(",") if d]
        # softdep "pre: crc32c": libcrc32c asks the crypto API for crc32c when it loads
        pre = info.get("softdep", "").partition("pre:")[2].partition("post:")[0].split()
        deps += [alias(d) for d in pre]
        for dep in deps:
            visit(dep, chain + (name,))
        entries[f"lib/modules/{name}.ko"] = data
        order.append(f"{name}.ko")

    for m in MODULES:
        visit(m, ())
    return order


def _modinfo(data: bytes) -> dict[str, str]:
    elf = ELFFile(io.BytesIO(data))
    section = elf.get_section_by_name(".modinfo")
    out = {}
    for item in section.data().split(b"\0") if section else []:
        k, _, v = item.decode(errors="replace").partition("=")
        if k:
            out.setdefault(k, v)
    return out


def _build_sender(tmp: Path) -> bytes:
    gcc = shutil.which("gcc")
    if gcc is None:
        raise VmUnavailable("gcc is missing: the flower VM's sender is built with `gcc -static`")
    exe = tmp / "sender"
    proc = subprocess.run(
        [gcc, "-static", "-O2", "-Wall", "-o", str(exe), str(SENDER_SOURCE)], capture_output=True, text=True
    )
    if proc.returncode:
        raise VmUnavailable(f"gcc -static {SENDER_SOURCE.name}: {proc.stderr.strip().splitlines()[-1]}")
    return exe.read_bytes()


def cpio(entries: dict[str, bytes | str | None]) -> bytes:
    """A newc cpio archive: bytes are files (executable), str symlinks, None directories."""
    out = bytearray()

    def add(name: str, mode: int, data: bytes, ino: int) -> None:
        name_b = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08x}" for v in (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
        out.extend(hdr.encode() + name_b)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))

    entries = dict(entries)
    for name in list(entries):  # every parent directory, before what it holds
        parts = name.split("/")
        for i in range(1, len(parts)):
            entries.setdefault("/".join(parts[:i]), None)
    ino = 1
    for name in sorted(entries, key=lambda n: (n.count("/"), n)):
        value = entries[name]
        if value is None:
            add(name, stat.S_IFDIR | 0o755, b"", ino)
        elif isinstance(value, str):
            add(name, stat.S_IFLNK | 0o777, value.encode(), ino)
        else:
            add(name, stat.S_IFREG | 0o755, value, ino)
        ino += 1
    add("TRAILER!!!", 0, b"", 0)
    return bytes(out)


#: The guest's /init: modules, then the batch in /job/run.sh, its output gzipped and base64'd
#: between markers on the serial console, then power off.
INIT = """#!/bin/sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
echo 1 > /proc/sys/kernel/printk
# no traffic of the guest's own (router solicitations, MLD) may reach the filters
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
for m in $(cat /modules.order); do insmod /lib/modules/$m || echo "@@insmod-failed $m"; done
/usr/sbin/ip link set lo up
echo "@@ready $(cut -d' ' -f1 /proc/uptime)"
cd /job && sh /job/run.sh > /tmp/out 2>&1
echo "@@done $? $(cut -d' ' -f1 /proc/uptime)"
echo "@@output-begin"
gzip -c /tmp/out | base64
echo "@@output-end"
reboot -f
"""


# --- running jobs ---------------------------------------------------------------------------


@dataclass
class Job:
    """One script and its frames. `script`: tc -batch lines for device `dev` (ingress qdisc and
    filters); `devices`: other devices the script names (made as veth pairs, e.g. for mirred);
    `capture`: devices whose outgoing frames are read after each frame (JobResult.outputs:
    the bytes a mirred redirect or mirror sends, the rewrites of the actions before it done)."""

    name: str
    dev: str
    script: list[str]
    frames: list[bytes]
    devices: tuple[str, ...] = ()
    capture: tuple[str, ...] = ()


@dataclass(frozen=True)
class Filter:
    """A filter as tc shows it: where it sits and its action's kind and control."""

    chain: int
    prio: int
    handle: int
    protocol: str
    action: str  # gact/mirred/... kind
    control: str  # drop, pass, goto chain N, or mirred's "egress redirect to DEV"
    packets: int

    @property
    def id(self) -> tuple[int, int, int]:
        return (self.chain, self.prio, self.handle)


@dataclass
class JobResult:
    """What the guest saw for one job: `apply_error` is tc -batch's complaint (then nothing was
    sent); `hits[i]` lists the filters whose counters moved on frame i, `sent[i]` the bytes the
    sender wrote (negative errno when the kernel refused the frame), `reached[i]` whether tc's
    ingress hook saw it (the stack drops some frames before, e.g. a VLAN tag cut short)."""

    name: str
    apply_error: str = ""
    filters: list[Filter] = field(default_factory=list)  # after the last frame
    hits: list[list[Filter]] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)
    reached: list[bool] = field(default_factory=list)  # the ingress qdisc counted the frame
    outputs: list[list[tuple[str, bytes]]] = field(default_factory=list)  # (device, frame) sent, per frame


@dataclass
class BatchResult:
    """One boot's results, in job order, with its timings."""

    jobs: list[JobResult]
    boot_seconds: float  # kernel start to /init ready, guest clock
    total_seconds: float  # host wall clock, qemu start to exit


def _job_script(i: int, job: Job) -> str:
    peer = f"xp{i}"
    lines = [
        f"echo '@@job {i}'",
        f"$IP link add {job.dev} type veth peer name {peer} || exit 3",
        f"$IP link set {job.dev} up; $IP link set {peer} up",
    ]
    for n, d in enumerate(job.devices):
        # both ends up: mirred sends nothing out of a device without carrier (counted as overlimits)
        lines.append(
            f"$IP link add {d} type veth peer name xq{i}x{n} && $IP link set {d} up && $IP link set xq{i}x{n} up"
        )
    lines += [
        f"if $TC -batch /job/{i}.tc > /tmp/apply.{i} 2>&1; then",
        f"  sender {peer} /job/{i}.frames {' '.join((job.dev, *job.capture))}",
        "else",
        f"  echo '@@apply-failed'; cat /tmp/apply.{i}",
        "fi",
        f"echo '@@final {i}'",
        f"$TC -s -j filter show dev {job.dev} ingress",
        f"$IP link del {peer}",
    ]
    lines += [f"$IP link del {d}" for d in job.devices]
    return "\n".join(lines) + "\n"


def job_archive(jobs: list[Job]) -> bytes:
    """The cpio appended to the base initramfs: /job/run.sh, per job its script and frames."""
    entries: dict = {"job": None}
    run = []
    for i, job in enumerate(jobs):
        entries[f"job/{i}.tc"] = ("\n".join(job.script) + "\n").encode()
        entries[f"job/{i}.frames"] = b"".join(len(f).to_bytes(4, "little") + f for f in job.frames)
        run.append(_job_script(i, job))
    # full paths: busybox's sh prefers its own ip and tc applets to anything on PATH
    entries["job/run.sh"] = ("IP=/usr/sbin/ip\nTC=/usr/sbin/tc\n" + "".join(run)).encode()
    return cpio(entries)


def check_qemu() -> str:
    path = shutil.which(QEMU)
    if path is None:
        raise VmUnavailable(f"{QEMU} is missing: run `make flowervm` (apt-get install qemu-system-x86)")
    return path


def qemu_argv(qemu: str, img: Image, initrd: Path, memory: str, serial: tuple[str, ...]) -> list[str]:
    """One vCPU under TCG, no devices but the serial ports in `serial` (the first is the
    kernel's console, ttyS0)."""
    return [
        qemu,
        *("-machine", "q35,accel=tcg", "-cpu", "max", "-m", memory, "-smp", "1"),
        *("-nographic", "-no-reboot", "-nodefaults", *serial),
        *("-kernel", str(img.kernel), "-initrd", str(initrd)),
        *("-append", "console=ttyS0 quiet panic=-1 mitigations=off"),
    ]


def run_jobs(
    jobs: list[Job], img: Image | None = None, timeout: float = BOOT_TIMEOUT, memory: str = "512M"
) -> BatchResult:
    """Boot once, run every job, power off; the parsed results in job order."""
    qemu = check_qemu()
    img = img or image()
    with tempfile.TemporaryDirectory(prefix="xdp2tc-flowervm-") as tmp:
        initrd = Path(tmp) / "initrd"
        with open(initrd, "wb") as f:
            f.write(img.initramfs.read_bytes())
            f.write(gzip.compress(job_archive(jobs), 1))
        argv = qemu_argv(qemu, img, initrd, memory, ("-serial", "stdio"))
        start = time.monotonic()
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as err:
            raise VmError(f"the flower VM did not finish in {timeout:.0f} s") from err
        total = time.monotonic() - start
    console = re.sub(
        r"\x1b(\[[0-9;?]*[A-Za-z]|[A-Za-z])",
        "",  # firmware's terminal escapes
        proc.stdout.decode(errors="replace").replace("\r", ""),
    )
    return BatchResult(parse_console(console, jobs), _boot_time(console), total)


def _boot_time(console: str) -> float:
    # not anchored: under load a kernel console message can land on the same serial line
    m = re.search(r"@@ready ([\d.]+)", console)
    if not m:
        tail = " | ".join(console.strip().splitlines()[-3:])
        raise VmError(f"the flower VM did not reach /init's batch: {tail[-300:] or 'no console output'}")
    return float(m.group(1))


def parse_console(console: str, jobs: list[Job]) -> list[JobResult]:
    failed = re.findall(r"^@@insmod-failed (\S+)", console, re.M)
    if failed:
        raise VmError(f"the flower VM could not load {', '.join(failed)}")
    m = re.search(r"^@@output-begin\n(.*?)^@@output-end", console, re.M | re.S)
    if not m:
        _boot_time(console)
        raise VmError("the flower VM stopped before printing its results")
    out = gzip.decompress(base64.b64decode("".join(m.group(1).split()))).decode(errors="replace")
    parts = re.split(r"^@@job (\d+)\n", out, flags=re.M)
    results = []
    by_index = {int(parts[k]): parts[k + 1] for k in range(1, len(parts), 2)}
    for i, job in enumerate(jobs):
        text = by_index.get(i)
        if text is None:
            raise VmError(f"job {job.name}: no output from the guest ({parts[0].strip()[:200]})")
        results.append(_parse_job(job, text))
    return results


def _parse_job(job: Job, text: str, base: dict[tuple, int] | None = None) -> JobResult:
    """One job's output; `base`: the filters' counters before its first frame (a session's
    filters may have counted earlier frames)."""
    res = JobResult(job.name)
    body, _, final = text.partition("@@final ")
    final = final.split("\n", 1)[1] if "\n" in final else ""
    if "@@apply-failed" in body:
        res.apply_error = " | ".join(body.split("@@apply-failed", 1)[1].strip().splitlines()[:3])
        return res
    res.filters = parse_filters(final)
    by_id = {f.id: f for f in res.filters}
    prev: dict[tuple, int] = dict(base or {})
    for chunk in re.split(r"^@pkt ", body, flags=re.M)[1:]:
        head, *lines = chunk.splitlines()
        _, sent, reached = head.split()
        res.sent.append(int(sent))
        if int(reached) > 1:  # the guest sends nothing of its own (IPv6 is off): never expected
            raise VmError(f"job {job.name}: frame {len(res.sent) - 1}: tc's ingress saw {reached} frames")
        res.reached.append(reached == "1")
        now = {}
        out: list[tuple[str, bytes]] = []
        for line in lines:
            if line.startswith("C "):
                chain, prio, handle, packets = map(int, line.split()[1:])
                now[(chain, prio, handle)] = packets
            elif line.startswith("O "):
                _, dev, data = line.split()
                out.append((dev, bytes.fromhex(data)))
        res.outputs.append(out)
        res.hits.append([by_id[k] for k, v in now.items() if v != prev.get(k, 0)])
        prev = now
    if len(res.sent) != len(job.frames):
        raise VmError(
            f"job {job.name}: {len(res.sent)} of {len(job.frames)} frames reported "
            f"({body.strip().splitlines()[-1][:200] if body.strip() else 'no output'})"
        )
    # the sender's netlink reading and tc's own JSON must tell the same totals
    for f in res.filters:
        if prev.get(f.id, 0) != f.packets:
            raise VmError(
                f"job {job.name}: filter {f.id}: sender counted {prev.get(f.id, 0)}, tc -s -j says {f.packets}"
            )
    return res


def parse_filters(text: str) -> list[Filter]:
    """Filters with their action and packet counter from `tc -s -j filter show` output."""
    text = text.strip()
    if not text:
        return []
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise VmError(f"tc -j filter show printed no JSON: {text[:120]!r}") from err
    out = []
    for f in doc:
        opts = f.get("options")
        if not opts:
            continue  # the per-prio head entry
        actions = opts.get("actions", [])
        if not actions:
            raise VmError(f"filter chain {f.get('chain')} prio {f['pref']}: no action")
        a = actions[-1]  # the verdict: rewrites (pedit, csum, vlan) come before it
        control = a.get("control_action", {}).get("type", "")
        if a.get("kind") == "mirred":
            control = f"{a.get('direction', '')} {a.get('mirred_action', '')} to {a.get('to_dev', '')}".strip()
        elif control == "goto":
            control = f"goto chain {a['control_action']['chain']}"
        out.append(
            Filter(
                f.get("chain", 0),
                f["pref"],
                int(opts.get("handle", f.get("handle", 0))),
                f.get("protocol", ""),
                a.get("kind", ""),
                control,
                actions[0].get("stats", {}).get("packets", 0),
            )
        )
    return out


# --- a session: the VM kept up, commands on request -------------------------------------------

#: The guest's side of a session: /init runs it as the job (so the cached image serves both
#: modes). Requests and replies travel on the second serial port, ttyS1, in raw mode (no echo,
#: no line editing); the kernel's console stays on ttyS0. A request is `chunk LEN` lines, each
#: followed by LEN bytes of base64 and acknowledged with `@@ack` (LEN stays far below the tty
#: layer's buffers, so nothing is lost while the guest is busy), then `run N`: the base64 is a
#: gzipped cpio (run.sh and its files), unpacked into a fresh /req and run there; the reply is
#: `@@begin N RC`, stdout and stderr gzipped and base64'd, separated by `@@sep`, `@@end N`.
SESSION_LOOP = """stty -F /dev/ttyS1 raw -echo
exec < /dev/ttyS1 > /dev/ttyS1 2>&1
echo "@@session-ready"
while read -r op n; do
  case "$op" in
  chunk) head -c "$n" >> /tmp/req.b64; echo "@@ack";;
  run)
    rm -rf /req; mkdir /req; cd /req
    base64 -d /tmp/req.b64 | gunzip | cpio -i -d -m 2> /dev/null; rm -f /tmp/req.b64
    sh /req/run.sh > /tmp/o 2> /tmp/e; rc=$?
    cd /
    echo "@@begin $n $rc"; gzip -c /tmp/o | base64; echo "@@sep"; gzip -c /tmp/e | base64; echo "@@end $n";;
  quit) echo "@@bye"; break;;
  esac
done
"""
#: Bytes of base64 per acknowledged chunk of a request.
CHUNK = 8192
#: Seconds one request may take in the guest.
REQUEST_TIMEOUT = 300


@dataclass
class Sent:
    """What `Session.send` saw: per frame the filters whose counters moved (`hits`), whether
    tc's ingress counted it (`reached`) and the bytes written (`sent`); `filters` after the
    last frame, with their totals."""

    hits: list[list[Filter]]
    reached: list[bool]
    sent: list[int]
    filters: list[Filter]


class Session:
    """The flower VM kept up between requests, for callers that talk to it over time (sync
    --apply --vm, tests): `run` a shell script with files, `tc` as a subprocess would run it,
    `device` makes a veth with a clsact qdisc, `send` frames through it.

    Why the serial port and not virtio-serial: the batch mode already talks over the serial
    console, the 8250 UART is built into Debian's kernel (virtio-serial would need
    virtio_console and its virtio-pci chain in the initramfs, changing the cached image), and
    the traffic is small (tc batches and their JSON, a few KB to a few hundred KB per request).
    Using ttyS1 rather than the console keeps kernel messages out of the replies."""

    def __init__(self, img: Image | None = None, timeout: float = BOOT_TIMEOUT, memory: str = "512M"):
        qemu = check_qemu()
        img = img or image()
        self.image = img
        self._tmp = tempfile.TemporaryDirectory(prefix="xdp2tc-flowervm-")
        tmp = Path(self._tmp.name)
        initrd = tmp / "initrd"
        with open(initrd, "wb") as f:
            f.write(img.initramfs.read_bytes())
            f.write(gzip.compress(cpio({"job": None, "job/run.sh": SESSION_LOOP.encode()}), 1))
        self._console = tmp / "console"
        argv = qemu_argv(
            qemu, img, initrd, memory, ("-monitor", "none", "-serial", f"file:{self._console}", "-serial", "stdio")
        )
        start = time.monotonic()
        with open(tmp / "qemu.err", "wb") as err:  # never read while it runs: a pipe could fill
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._n = 0
        self.devices: dict[str, str] = {}  # device -> the veth peer frames go in at
        try:
            self._expect(lambda line: line == "@@session-ready", timeout)
        except VmError:
            self.close()
            raise
        self.host_boot_seconds = time.monotonic() - start  # qemu start to the loop's first line
        self.boot_seconds = _boot_time(self.console())

    def _read(self) -> None:
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def console(self) -> str:
        try:
            return re.sub(r"\x1b(\[[0-9;?]*[A-Za-z]|[A-Za-z])", "", self._console.read_text(errors="replace"))
        except OSError:
            return ""

    def _expect(self, done, timeout: float) -> list[str]:
        """Lines up to and including the first for which `done(line)` holds."""
        end = time.monotonic() + timeout
        got = []
        while True:
            try:
                raw = self._lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise VmError(f"the flower VM did not answer in {timeout:.0f} s") from None
            if raw is None:
                self._lines.put(None)  # every later request fails the same way
                text = self.console().strip() or (Path(self._tmp.name) / "qemu.err").read_text(errors="replace")
                tail = " | ".join(text.strip().splitlines()[-3:])
                raise VmError(f"the flower VM stopped: {tail[-300:] or 'no console output'}")
            line = raw.decode(errors="replace").strip()
            got.append(line)
            if done(line):
                return got

    def _write(self, data: bytes) -> None:
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError) as err:
            raise VmError("the flower VM is gone") from err

    def run(
        self, script: str, files: dict[str, bytes] | None = None, timeout: float = REQUEST_TIMEOUT
    ) -> subprocess.CompletedProcess:
        """Run `script` with sh in the guest, in a folder holding `files`; its exit code,
        stdout and stderr (text) as subprocess.run would return them."""
        self._n += 1
        n = self._n
        entries = {"run.sh": script.encode(), **(files or {})}
        payload = base64.b64encode(gzip.compress(cpio(entries), 1))
        for at in range(0, len(payload), CHUNK):
            part = payload[at : at + CHUNK]
            self._write(b"chunk %d\n" % len(part) + part + b"\n")
            self._expect(lambda line: line == "@@ack", timeout)
        self._write(b"run %d\n" % n)
        lines = self._expect(lambda line: line == f"@@end {n}", timeout)
        head = next((i for i, line in enumerate(lines) if line.startswith(f"@@begin {n} ")), None)
        if head is None:
            raise VmError(f"request {n}: no reply header")
        rc = int(lines[head].split()[2])
        body = lines[head + 1 : -1]
        sep = body.index("@@sep")

        def text(part: list[str]) -> str:
            return gzip.decompress(base64.b64decode("".join(part))).decode(errors="replace")

        return subprocess.CompletedProcess(["sh"], rc, text(body[:sep]), text(body[sep + 1 :]))

    def check(self, script: str, files: dict[str, bytes] | None = None) -> str:
        """`run`, VmError with its stderr unless it exits 0; its stdout."""
        proc = self.run(script, files)
        if proc.returncode:
            raise VmError(f"in the VM: {script.splitlines()[0]}: {proc.stderr.strip() or proc.returncode}")
        return proc.stdout

    def tc(
        self, args: list[str], stdin: str | None = None, timeout: float = REQUEST_TIMEOUT
    ) -> subprocess.CompletedProcess:
        """`tc ARGS` in the guest (stdin given as text); as subprocess.run(text=True) returns."""
        quoted = " ".join(shlex.quote(a) for a in args)
        if stdin is None:
            return self.run(f"/usr/sbin/tc {quoted}\n", timeout=timeout)
        return self.run(f"/usr/sbin/tc {quoted} < stdin\n", {"stdin": stdin.encode()}, timeout)

    def device(self, dev: str) -> None:
        """A veth `dev` with a clsact qdisc (where sync's filters go); frames go in at its peer."""
        peer = f"xs{len(self.devices)}"
        self.check(
            f"$IP link add {dev} type veth peer name {peer} && $IP link set {dev} up && $IP link set {peer} up "
            f"&& /usr/sbin/tc qdisc add dev {dev} clsact\n".replace("$IP", "/usr/sbin/ip")
        )
        self.devices[dev] = peer

    def filters(self, dev: str) -> list[Filter]:
        """The filters on `dev`'s ingress with their counters."""
        return parse_filters(self.check(f"/usr/sbin/tc -s -j filter show dev {dev} ingress\n"))

    def send(self, dev: str, frames: list[bytes]) -> Sent:
        """Send `frames` one by one in at `dev`'s peer; what each did (Sent)."""
        base = {f.id: f.packets for f in self.filters(dev)}
        show = f"/usr/sbin/tc -s -j filter show dev {dev} ingress"
        out = self.check(
            f"sender {self.devices[dev]} frames {dev}\necho '@@final 0'\n{show}\n",
            {"frames": b"".join(len(f).to_bytes(4, "little") + f for f in frames)},
        )
        res = _parse_job(Job("send", dev, [], frames), out, base)
        return Sent(res.hits, res.reached, res.sent, res.filters)

    def close(self) -> None:
        """Ask the guest to stop, then make sure qemu is gone."""
        if self._proc.poll() is None:
            try:
                self._write(b"quit 0\n")
                self._proc.wait(timeout=10)
            except (VmError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._tmp.cleanup()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class VmTc:
    """tc run in a flower VM session, for tcsync.TcDevice (its TcRunner seam). The filters
    there are skip_hw and sync folds their software counts (tcsync.FOLD_SOFTWARE), the VM
    playing the NIC."""

    folds = FOLD_SOFTWARE

    def __init__(self, session: Session):
        self.session = session
        self.name = f"tc (in the flower VM, Linux {session.image.kernel_release})"

    def __call__(self, args: list[str], stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        try:
            return self.session.tc(args, stdin, timeout)
        except VmError as err:  # as a failed tc: sync reports it and reads the device again
            return subprocess.CompletedProcess(["tc", *args], 255, "", f"flower VM: {err}")

    def close(self) -> None:
        self.session.close()


# --- sync --apply --vm -------------------------------------------------------------------------


def add_sync_option(p: argparse.ArgumentParser) -> None:
    """`sync --vm`."""
    p.add_argument(
        "--vm",
        action="store_true",
        help="with --apply: apply the batches to the real cls_flower of Debian's kernel under QEMU "
        "(booted for the run; DEV is made there as a veth with a clsact qdisc; filters are skip_hw "
        "and their counts are folded back as the NIC's); the maps and the program stay on this host",
    )


def sync_device(args: argparse.Namespace) -> TcDevice:
    """The device `sync` keeps: here (`tc`, or `tc -n NETNS`), or with --vm in a flower VM."""
    if not getattr(args, "vm", False):
        tc = ("tc", "-n", args.netns) if args.netns else ("tc",)
        return TcDevice(args.dev, "skip_hw" if args.sw else "skip_sw", tc)
    if not args.apply:
        raise LiftError("--vm goes with --apply (a dry run reads nothing from a freshly booted VM)")
    if args.netns:
        raise LiftError("--vm and --netns name two different places for the filters")
    try:
        session = Session()
    except (VmUnavailable, VmError) as err:
        raise LiftError(f"--vm: {err}") from None
    try:
        session.device(args.dev)
    except VmError as err:
        session.close()
        raise LiftError(f"--vm: {err}") from None
    print(
        f"# flower VM: Linux {session.image.kernel_release} under QEMU (TCG), up in "
        f"{session.host_boot_seconds:.1f} s; {args.dev} made there (veth, clsact)",
        flush=True,
    )
    return TcDevice(args.dev, "skip_hw", VmTc(session))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["fetch"]:
        print("usage: python -m offload.flowervm fetch", file=sys.stderr)
        return 2
    try:
        fetch()
    except VmUnavailable as err:
        print(f"xdp2tc: flower VM: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
