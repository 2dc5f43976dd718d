"""Every frame a `rules` script prints, replayed by the running kernel with the map entries
the script prints next to it.

For each path left in software, the script shows a frame: a `differs` frame (flower would
take it, "the program returns V (path M)") or a `witness` (a packet of this path, whose
verdict is the `# path N VERDICT` line's). Where the path the frame takes looks maps up,
the verdict is claimed for the frame *with* the entries the next line lists
(`name[key hex] = value hex` or `name[key hex] absent`): the test writes exactly those
into the loaded object's maps, runs the frame with BPF_PROG_TEST_RUN, and compares the
kernel's return code with the claimed verdict.

Entries are written on top of whatever earlier frames left in the maps, never reset: the
claim is that the program reads no other entry, so the others may be anything.

The script is read back from its text by the regular expressions below (nothing of the
emitter is imported); the return codes are the UAPI's (include/uapi/linux/bpf.h `enum
xdp_action`). Objects: the clang corpus and Debian's objects.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import corpus
from tests.conftest import need_object, require_kernel, run_cli

#: include/uapi/linux/bpf.h, enum xdp_action.
XDP_ACTIONS = {0: "ABORTED", 1: "DROP", 2: "PASS", 3: "TX", 4: "REDIRECT"}

HEADER = re.compile(r"^# xdp2tc rules for (\S+) program (\S+):")
FATE = re.compile(r"^# path (\d+) (\S+) stays in software ")
FRAME = re.compile(r"^# path (\d+) (differs|witness) packet \((\d+) bytes\): ([0-9a-f]+)$")
CLAIM = re.compile(
    r"^# path (\d+) (differs|witness) packet: .*: "
    r"(a packet of this path|.*the program returns (\S+)(?: \(path \d+\))?)$"
)
ENTRIES = re.compile(r"^# path (\d+) (differs|witness) packet with map entries \([^)]*\): (.*)$")
ENTRY = re.compile(r"^(\S+)\[([0-9a-f]+)\](?: = ([0-9a-f]+)| absent)$")
ALSO = re.compile(r"^# path (\d+) (differs|witness) packet also reads: (.*)$")
CTX = re.compile(r"^ctx\.(\w+) = (\d+)$")
HELPERS = re.compile(r"^results of (.*) \(z3 chose them, the kernel does in a run\)$")


@dataclass
class Frame:
    """One printed frame and what the script claims of it."""

    program: str
    path: int
    kind: str
    packet: bytes
    verdict: str | None = None
    entries: list[tuple[str, bytes, bytes | None]] = field(default_factory=list)
    ctx: dict[str, int] = field(default_factory=dict)
    helpers: list[str] = field(default_factory=list)


def frames(script: str) -> list[Frame]:
    """The frames of a printed script, with their claimed verdicts and map entries."""
    out: list[Frame] = []
    program, fates = None, {}
    by_key: dict[tuple[str, int], Frame] = {}
    for line in script.splitlines():
        if m := HEADER.match(line):
            program, fates = m.group(2), {}
        elif m := FATE.match(line):
            fates[int(m.group(1))] = m.group(2)
        elif m := FRAME.match(line):
            packet = bytes.fromhex(m.group(4))
            assert len(packet) == int(m.group(3)), line
            f = Frame(program, int(m.group(1)), m.group(2), packet)
            by_key[(program, f.path)] = f
            out.append(f)
        elif m := CLAIM.match(line):
            f = by_key[(program, int(m.group(1)))]
            f.verdict = fates[f.path] if f.kind == "witness" else m.group(4)
        elif m := ENTRIES.match(line):
            f = by_key[(program, int(m.group(1)))]
            for item in m.group(3).split("; "):
                e = ENTRY.match(item)
                assert e, item
                value = bytes.fromhex(e.group(3)) if e.group(3) is not None else None
                f.entries.append((e.group(1), bytes.fromhex(e.group(2)), value))
        elif m := ALSO.match(line):
            f = by_key[(program, int(m.group(1)))]
            for item in m.group(3).split("; "):
                if c := CTX.match(item):
                    f.ctx[c.group(1)] = int(c.group(2))
                else:
                    h = HELPERS.match(item)
                    assert h, item
                    f.helpers += h.group(1).split(", ")
    return out


def test_the_parser_reads_a_hand_written_script():
    """The regular expressions on lines written by hand (the emitter's format as the module
    docstring states it), so a format change cannot make the replay read nothing."""
    script = "\n".join(
        [
            "# xdp2tc rules for x.o program prog: 0 filters",
            "# path 3 DROP stays in software (map-dependent: map m keyed by ipv4.saddr) when x",
            "# path 3 differs packet (4 bytes): 0a0b0c0d",
            "# path 3 differs packet: eth.dst=00: flower sees this path's keys, the program returns PASS (path 1)",
            "# path 3 differs packet with map entries (those it looks up): m[0a000001] absent; n[00000000] = ff01",
            "# path 5 ABORTED stays in software (atypical-packets: ...) when y",
            "# path 5 witness packet (2 bytes): 0102",
            "# path 5 witness packet: eth.proto=ipv4 [IP options]: a packet of this path",
            "# path 5 witness packet also reads: ctx.rx_queue_index = 2; results of ktime_get_ns, get_prandom_u32"
            " (z3 chose them, the kernel does in a run)",
        ]
    )
    a, b = frames(script)
    assert (a.program, a.path, a.kind, a.packet, a.verdict) == ("prog", 3, "differs", bytes.fromhex("0a0b0c0d"), "PASS")
    assert a.entries == [("m", bytes.fromhex("0a000001"), None), ("n", bytes(4), bytes.fromhex("ff01"))]
    assert (a.ctx, a.helpers) == ({}, [])
    assert (b.path, b.kind, b.verdict, b.entries) == (5, "witness", "ABORTED", [])
    assert (b.ctx, b.helpers) == ({"rx_queue_index": 2}, ["ktime_get_ns", "get_prandom_u32"])


def _objects() -> list:
    objs = [p for p in corpus.expected_objects() if p.parent.name == "clang"] + sorted(corpus.external_objects())
    return [pytest.param(p, id=str(p.relative_to(corpus.CORPUS_DIR))) for p in objs]


def _write(loaded, name: str, key: bytes, value: bytes | None) -> None:
    """One printed entry into the loaded map `name` (a per-CPU map gets the value in every
    CPU's 8-byte aligned slot; an absent entry is deleted, if there)."""
    info = loaded.map(name)
    if value is None:
        loaded.map_delete(name, key)
        return
    if info.value_bytes != len(value):  # per-CPU: the kernel takes every CPU's slot
        slot = value + bytes(-len(value) % 8)
        value = slot * (info.value_bytes // len(slot))
    loaded.map_update(name, key, value)


#: include/uapi/linux/bpf.h, enum bpf_map_type: maps whose entries are sockets, which
#: bytes alone cannot make (an update gets ENOTSOCK or EOPNOTSUPP).
SOCKET_MAPS = {15: "sockmap", 17: "xskmap", 18: "sockhash"}


def _scripts(obj: Path, tmp_path: Path, capsys) -> list[str]:
    """The printed text scripts of every entry program of `obj` (one per program, as
    --out-dir writes them); an object without an entry program names its program(s)."""
    code, _, err = run_cli(capsys, "rules", str(obj), "--dev", "eth0", "--out-dir", str(tmp_path))
    if code == 2 and "name one with --program: " in err:
        names = err.strip().rsplit("--program: ", 1)[1].split(", ")
        for name in names:
            code, _, err = run_cli(
                capsys, "rules", str(obj), "--dev", "eth0", "--program", name, "--out-dir", str(tmp_path)
            )
            assert code == 0, err
    elif code == 2 and "no XDP program" in err:
        return []  # xdpdump_bpf.o: fentry/fexit only
    else:
        assert code == 0, err
    return [p.read_text() for p in sorted(tmp_path.glob("*.tc"))]


@pytest.mark.parametrize("path", _objects())
def test_every_printed_frame_gets_its_claimed_verdict_from_the_kernel(path: Path, tmp_path: Path, capsys):
    """Frames that claim nothing (a path whose verdict is UNKNOWN) are not run; frames the
    script says rest on helper results (z3 chose them, the kernel chooses its own), on an
    xdp_md field this namespace cannot give (a device that does not exist, a queue other
    than 0), on a socket map's entry, or that a devmap/cpumap program returns (the kernel
    test-runs none) are not run either, and the script must say so (a helper or ctx line,
    a socket map's entry). A `.rodata` entry is configuration set before load: such frames
    run in an object loaded with it."""
    from analyzer import kernel
    from analyzer.verify import existing_ifindexes

    require_kernel()
    obj = need_object(path)
    found = [f for text in _scripts(obj, tmp_path, capsys) for f in frames(text)]
    assert all(f.verdict is not None for f in found), [f for f in found if f.verdict is None]
    devices = set(existing_ifindexes())
    wrong, run, left = [], 0, []
    todo: dict[tuple, list[Frame]] = {}
    for f in found:
        if f.verdict == "UNKNOWN":
            continue
        ifindex, queue = f.ctx.get("ingress_ifindex", 1), f.ctx.get("rx_queue_index", 0)
        if f.helpers:
            left.append((f.path, "helpers"))
        elif ifindex not in devices or queue != 0:
            left.append((f.path, f"ctx {f.ctx}"))
        else:
            rodata = tuple((name, value) for name, _, value in f.entries if name.startswith(".rodata"))
            todo.setdefault(rodata, []).append(f)
    for rodata, group in todo.items():
        with kernel.load(str(obj), rodata=dict(rodata) or None) as loaded:
            for f in group:
                sockets = [
                    name
                    for name, _, _ in f.entries
                    if not name.startswith(".rodata") and loaded.map(name).type in SOCKET_MAPS
                ]
                if sockets:
                    left.append((f.path, f"socket map {sockets}"))
                    continue
                for name, key, value in f.entries:
                    if not name.startswith(".rodata"):
                        _write(loaded, name, key, value)
                ctx = kernel.XdpCtx(f.ctx.get("ingress_ifindex", 1), f.ctx.get("rx_queue_index", 0))
                try:
                    got = XDP_ACTIONS.get(loaded.run(f.program, f.packet, ctx=ctx).retval, "INVALID")
                except kernel.KernelRunError as err:
                    assert "devmap/cpumap egress programs cannot be test-run" in str(err), err
                    left.append((f.path, "a devmap/cpumap program"))
                    continue
                run += 1
                if got != f.verdict:
                    wrong.append((f.program, f.path, f.kind, f.verdict, got, f.packet.hex(), f.entries, f.ctx))
    print(f"{obj.name}: {len(found)} frames, {run} run by the kernel, not run: {left}")
    assert not wrong, wrong
    if obj.name.startswith("xdpfilt_dny_"):
        # deny mode drops on a hit in its address or port maps (xdp-filter's source): the
        # frames of its map-decided paths claim their verdicts with entries, all run here
        assert run and any(f.entries for f in found), found


def test_an_index_past_the_array_end_names_no_entry(tmp_path: Path, capsys):
    """tests/data/array_index.c looks its ARRAY (16 slots) up at the IPv4 TOS: a TOS of 16
    or more takes the NULL branch (ABORTED) without reading an entry, and no entry can be
    written there (the kernel says E2BIG). Its five paths (short, not IPv4, ABORTED, DROP,
    PASS: by hand) are each witnessed by the kernel, none left out for a rejected entry."""
    from tests.conftest import CLANG, require_tool

    require_kernel()
    obj = tmp_path / "array_index.o"
    source = Path(__file__).resolve().parent / "data" / "array_index.c"
    include = [f"-I{corpus.CORPUS_DIR / 'include'}", "-I/usr/include/x86_64-linux-gnu"]
    subprocess.run(
        [require_tool(CLANG), "-O2", "-g", "-target", "bpf", *include, "-c", str(source), "-o", str(obj)],
        check=True,
        capture_output=True,
    )
    code, out, err = run_cli(capsys, "verify", str(obj))
    assert code == 0, err
    assert "5 paths" in out and "(5 witnesses," in out and "0 mismatches" in out and "not run" not in out, out
