"""`xdp2tc sync` (issue 12, items 2-5): live map sources, the map-change watcher, the batch
writer's order and reconcile, tc's parser on applied batches, and counters folded back.

Oracles: bpftool (an independent reader and writer of the same kernel maps; its writes come
from another process, as an operator's would), iproute2 `tc` in a network namespace (the
parser judges every applied line; this kernel has no cls_flower, so the kernel's refusal
is the expected end), hand-derived filter lines for the seed's §6.6 blacklist (and the
hand-written filling in tests/sync_filling.py), tests/oracles/tcflower.py reading the printed
batch back with the kernel running the program on the same frames (BPF_PROG_TEST_RUN), and a
hand-written `tc -s -j filter show` document for the counters.
"""

from __future__ import annotations

import functools
import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, require, require_kernel, require_tool
from oracles import tcflower
from sync_filling import DdosBlacklistFilling, factory
from test_templates import _random_frame

from analyzer import kernel
from analyzer.xdp import VERDICTS
from lifter.errors import LiftError
from lifter.program import load_object
from offload import cli, flowervm, mapfill, mapwatch, sync, tcsync
from offload.mapsource import MapSourceSpec, open_maps
from offload.sync import Change, SyncDaemon
from offload.tcsync import COOKIE_TAG, CounterFolder, CounterRef, SyncFilter, TcDevice, TcError, parse_filters
from rules.flower import FlowerMatch, exact, prefix
from rules.reasons import Reason
from rules.tc import KERNEL_ERROR, check_syntax

DDOS = ROOT / "corpus/build/clang/thesis_ddos_blacklist.o"
DROP_COUNT = ROOT / "corpus/build/clang/thesis_drop_count.o"
NESTED = ROOT / "corpus/build/clang/thesis_nested_maps.o"
BPFFS = Path("/sys/fs/bpf")


def _obj(path: Path) -> Path:
    require(path.is_file(), f"{path.name} is not built (run `make corpus`)")
    return path


def _bpftool(*args: str) -> str:
    proc = subprocess.run(["bpftool", *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _pinned(path: Path, maps: tuple[str, ...]):
    """The object loaded, its maps pinned under a fresh bpffs folder (by bpftool, by map id):
    yields (loaded object, folder)."""
    require_kernel()
    obj = kernel.load(_obj(path))
    folder = BPFFS / f"xdp2tc-sync-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    try:
        for name in maps:
            _bpftool("map", "pin", "id", str(kernel.map_id(obj.map(name).fd)), str(folder / name))
        yield obj, folder
    finally:
        obj.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def ddos():
    """thesis_ddos_blacklist loaded, its maps pinned: (loaded object, folder)."""
    yield from _pinned(DDOS, ("blacklist", "port_blacklist"))


@pytest.fixture
def nested():
    """thesis_nested_maps loaded, its maps pinned: (loaded object, folder)."""
    yield from _pinned(NESTED, ("blacklist_src", "blacklist_dst"))


def _ip(a: str) -> bytes:
    return bytes(int(x) for x in a.split("."))


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "args, message",
    [
        (["--maps-from", "pinned:/no/such/dir"], "is not a directory"),
        (["--maps-from", "prog:0"], "a program id is an integer"),
        (["--maps-from", "json:x.json"], "sync follows live maps (pinned:DIR or prog:ID); a json: dump is a snapshot"),
        (["--maps-from", "file:x"], "expected pinned:DIR or prog:ID"),
        (["--maps-from", "prog:1", "--apply", "--dry-run"], "not allowed with"),
        (["--maps-from", "prog:1", "--interval", "0"], "out of range"),
        (["--maps-from", "prog:1", "--netns", "a/b"], "not a valid network namespace name"),
    ],
)
def test_sync_options_are_checked_up_front(args, message, capsys):
    assert cli.main(["sync", "x.o", "--dev", "eth0", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "spec, message",
    [
        ("pinned:/no/such/dir", "is not a directory"),
        ("prog:x", "a program id is an integer"),
        ("file:x", "expected pinned:DIR, prog:ID, json:NAME=FILE or json:FILE"),
        ("json:", "expected json:NAME=FILE or json:FILE"),
    ],
)
def test_rules_maps_from_uses_the_same_parser(spec, message, capsys):
    assert cli.main(["rules", "x.o", "--dev", "eth0", "--maps-from", spec]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_rules_maps_from_a_folder_without_the_maps_is_refused(tmp_path, capsys):
    assert cli.main(["rules", str(_obj(DDOS)), "--dev", "eth0", "--maps-from", f"pinned:{tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "none of the object's maps is there (maps: blacklist, port_blacklist)" in err and err.count("\n") == 1


# --------------------------------------------------------------------------- map sources


def test_pinned_source_reads_what_bpftool_dumps(ddos):
    obj, folder = ddos
    obj.map_update("blacklist", _ip("10.0.0.1"), (7).to_bytes(4, "little"))
    _bpftool("map", "update", "pinned", str(folder / "port_blacklist"), "key", "50", "0", "value", "1", "0", "0", "0")
    live = open_maps(load_object(DDOS), MapSourceSpec("pinned", str(folder)))
    try:
        got = live.contents()
        for name in ("blacklist", "port_blacklist"):
            dump = json.loads(_bpftool("-j", "map", "dump", "pinned", str(folder / name)))
            want = {
                bytes(int(b, 16) for b in e["key"]): (bytes(int(b, 16) for b in e["value"]),)
                for e in dump
                if isinstance(e.get("key"), list)
            }
            assert got.get(name).entries == want
        assert got.get("port_blacklist").entries == {(50).to_bytes(2, "little"): ((1).to_bytes(4, "little"),)}
        # BTF from the kernel: __u32 keys print as numbers, not bytes
        assert live.maps["blacklist"].btf is not None
        assert live.maps["blacklist"].describe(_ip("10.0.0.1"), ((7).to_bytes(4, "little"),)) == (
            f"blacklist[{int.from_bytes(_ip('10.0.0.1'), 'little')}] = 7"
        )
    finally:
        live.close()


def test_prog_source_finds_the_programs_maps(ddos):
    obj, _ = ddos
    obj.map_update("blacklist", _ip("192.0.2.1"), bytes(4))
    prog = kernel.prog_id(obj.programs["xdp_ddos_blacklist"])
    live = open_maps(load_object(DDOS), MapSourceSpec("prog", str(prog)))
    try:
        assert set(live.maps) == {"blacklist", "port_blacklist"}
        assert live.maps["blacklist"].kernel.id == kernel.map_id(obj.map("blacklist").fd)
        assert live.contents(["blacklist"]).get("blacklist").entries == {_ip("192.0.2.1"): (bytes(4),)}
    finally:
        live.close()


def test_an_lpm_trie_is_read_key_by_key_and_decoded_through_btf():
    require_kernel()
    path = _obj(ROOT / "corpus/build/clang/lpm_src_block.o")
    with kernel.load(path) as obj:
        key = (24).to_bytes(4, "little") + _ip("10.1.2.0")
        obj.map_update("blocked_prefixes", key, b"\x01")
        live = open_maps(
            load_object(path), MapSourceSpec("prog", str(kernel.prog_id(obj.programs["xdp_lpm_src_block"])))
        )
        try:
            m = live.maps["blocked_prefixes"]
            assert m.entries().entries == {key: (b"\x01",)}  # LPM tries have no batched lookup
            addr = int.from_bytes(_ip("10.1.2.0"), "little")
            assert m.describe(key, (b"\x01",)) == f"blocked_prefixes[{{prefixlen=24, addr={addr}}}] = 1"
        finally:
            live.close()


def test_a_map_that_only_shares_the_name_is_refused():
    require_kernel()
    folder = BPFFS / f"xdp2tc-sync-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    try:
        blacklist = str(folder / "blacklist")
        _bpftool(
            "map", "create", blacklist, "type", "hash", "key", "8", "value", "4", "entries", "8", "name", "blacklist"
        )
        with pytest.raises(LiftError, match="map blacklist: the live map's key size is 8, the object's is 4"):
            open_maps(load_object(_obj(DDOS)), MapSourceSpec("pinned", str(folder)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------- the real templates


@functools.cache
def _template_filling(path: Path, assume: tuple[str, ...]):
    """The product's filling (offload/mapfill.py, found through sync.FILLINGS), once per object."""
    obj = load_object(path)
    return sync.filling_for(obj, obj.programs[0], assume)


def _keys(lines: list[str]) -> list[str]:
    """What each filter line matches and does (after `skip_sw`, before the cookie)."""
    return [line.split(" skip_sw ", 1)[1].split(" cookie ")[0] for line in lines if line.startswith("filter add ")]


def _frame(src: str, dst: str, proto: int, dport: int) -> bytes:
    """An Ethernet + IPv4 (no options) + TCP/UDP frame, padded to 60 bytes."""
    if proto == 17:
        l4 = struct.pack("!HHHH", 1234, dport, 8, 0)
    else:
        l4 = struct.pack("!HHIIBBHHH", 1234, dport, 1, 0, 0x50, 2, 1, 0, 0)
    ip_hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0, 64, proto, 0, _ip(src), _ip(dst))
    return (bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip_hdr + l4).ljust(60, b"\0")


def _agree(lines: list[str], obj, prog: str, frames: list[bytes]) -> list[bytes]:
    """Every frame the printed batch drops (tcflower, read back from the text) the program
    drops too (the kernel, same maps); returns the frames the batch drops."""
    oracle = tcflower.parse("\n".join(x.split(" cookie ")[0] for x in lines if x.startswith("filter add ")))
    dropped = [f for f in frames if tcflower.run(oracle, f)[0] == "drop"]
    for f in dropped:
        assert VERDICTS.get(obj.run(prog, f).retval) == "DROP", f.hex()
    return dropped


def test_sync_and_rules_fill_the_seed_blacklist_from_pinned_maps(ddos, capsys):
    """§6.6 end to end: the entries bpftool writes, read from bpffs by `sync --dry-run --once`
    (the templates through sync.FILLINGS) and by `rules --maps-from pinned:DIR`, give the seed's
    three drops (hand-derived), the same in both, the same as the hand-written filling's; the
    kernel drops every frame the printed batch drops and passes the port next to it."""
    obj, folder = ddos
    _bpftool("map", "update", "pinned", str(folder / "blacklist"), "key", "192", "168", "1", "40", "value", *"1000")
    _bpftool("map", "update", "pinned", str(folder / "port_blacklist"), "key", "50", "0", "value", *"1000")
    common = [str(DDOS), "--dev", "eth0", "--maps-from", f"pinned:{folder}", "--assume", "no-ip-options"]
    assert cli.main(["sync", *common, "--dry-run", "--once"]) == 0
    printed = capsys.readouterr().out
    assert "# template 1: paths 6: port_blacklist[dst_port] -> drop (proven)" in printed
    batch = [x for x in printed.splitlines() if x.startswith("filter ")]
    seed = [
        "src_ip 192.168.1.40 action drop",
        "ip_proto tcp dst_port 50 action drop",
        "ip_proto udp dst_port 50 action drop",
    ]
    assert _keys(batch) == seed
    assert all(" chain 0 " in x and " cookie " + COOKIE_TAG in x for x in batch)
    assert cli.main(["rules", *common]) == 0
    out = capsys.readouterr().out
    assert _keys(out.splitlines()) == seed and "proven on this printed script with these map contents" in out
    # the same prios as the rules script: sync keeps what `rules` prints
    assert [x.split(" prio ")[1].split()[0] for x in batch] == [
        x.split(" prio ")[1].split()[0] for x in out.splitlines() if x.startswith("filter add ") and "skip_sw" in x
    ]
    contents = open_maps(load_object(DDOS), MapSourceSpec("pinned", str(folder)))
    try:
        hand = DdosBlacklistFilling().fill(contents.contents())
    finally:
        contents.close()
    assert sorted(_keys(TcDevice("eth0").plan(hand).lines)) == sorted(seed)
    frames = [_frame(a, "10.0.0.2", p, d) for a in ("192.168.1.40", "192.168.1.41") for p in (6, 17) for d in (50, 51)]
    dropped = _agree(batch, obj, "xdp_ddos_blacklist", frames)
    assert len(dropped) == 6  # the blacklisted address (4 frames), and port 50 from the other (2)
    for f in frames:
        if f not in dropped:
            assert VERDICTS.get(obj.run("xdp_ddos_blacklist", f).retval) == "PASS"


def test_sync_keeps_the_nested_maps_chained_and_follows_a_delete(nested):
    """§6.7 through sync: two nested 3-entry maps give 3 gotos and 3 drops in the template's
    chain (n + m), the printed batch (tcflower) drops only what the kernel drops, and deleting
    a source entry with bpftool removes exactly its goto."""
    obj, folder = nested
    for i in (1, 2, 3):
        _bpftool(
            "map", "update", "pinned", str(folder / "blacklist_src"), "key", "192", "168", "1", str(i), "value", "1"
        )
    for i in (4, 5, 6):
        _bpftool(
            "map", "update", "pinned", str(folder / "blacklist_dst"), "key", "192", "168", "1", str(i), "value", "1"
        )
    filling = _template_filling(NESTED, ())
    assert isinstance(filling, mapfill.TemplateFilling) and filling.maps == {"blacklist_src", "blacklist_dst"}
    live = open_maps(load_object(NESTED), MapSourceSpec("pinned", str(folder)))
    daemon = SyncDaemon(filling, live, TcDevice("veth-x2tc"), out=io.StringIO(), interval=60)
    try:
        first = daemon.start().lines
        chain = first[0].split(" goto chain ")[1].split()[0]
        assert sorted(_keys(first)) == sorted(
            [f"src_ip 192.168.1.{i} action goto chain {chain}" for i in (1, 2, 3)]
            + [f"dst_ip 192.168.1.{i} action drop" for i in (4, 5, 6)]
        )
        assert all(f" chain {chain} " in x for x in first if " action drop " in x)
        addrs = [f"192.168.1.{i}" for i in range(1, 8)]
        rng = random.Random(7)
        frames = [_frame(rng.choice(addrs), rng.choice(addrs), rng.choice((6, 17)), 80) for _ in range(200)]
        frames += [_random_frame(rng, [_ip(a) for a in addrs], [22, 80]) for _ in range(100)]
        assert _agree(first, obj, "xdp_nested_maps", frames)
        _bpftool("map", "delete", "pinned", str(folder / "blacklist_src"), "key", "192", "168", "1", "2")
        gone = daemon.handle([Change("blacklist_src", _ip("192.168.1.2"))])
        added = {x.split(" handle ")[1].split()[0]: x for x in first if "src_ip 192.168.1.2 " in x}
        ((handle, line),) = added.items()
        prio = line.split(" prio ")[1].split()[0]
        assert gone.lines == [
            f"filter del dev veth-x2tc ingress protocol ip prio {prio} chain 0 handle {handle} flower"
        ]
    finally:
        daemon.close()


ALLOW_BLOCK = ROOT / "corpus/build/clang/allow_block.o"


def _lpm_key(addr: str, plen: int) -> list[str]:
    """bpftool's words for an LPM key {u32 prefixlen (host order); IPv4 address}."""
    return [str(b) for b in plen.to_bytes(4, "little") + _ip(addr)]


@pytest.mark.parametrize("block_at_start", [True, False])
def test_an_allow_list_is_installed_before_the_lpm_drops_that_rely_on_it(block_at_start):
    """allow_block.c: sources in the allow list pass, those in the LPM block list drop. An
    LPM shape is proven at its first entry, and that proof is what says the drop relies on
    the allow list's pass filters: whether the block entry is there at the start or added
    later, the allow entry's pass filter must be on the device before (or in the same batch,
    ahead of) the /16 drop that covers it, and the printed filters drop only what the
    kernel drops (the allowed address inside the block is the frame that tells)."""
    gen = _pinned(ALLOW_BLOCK, ("allowlist", "blocklist"))
    obj, folder = next(gen)
    try:
        _bpftool("map", "update", "pinned", str(folder / "allowlist"), "key", "10", "1", "2", "3", "value", "1")
        block = ["map", "update", "pinned", str(folder / "blocklist"), "key", *_lpm_key("10.1.0.0", 16), "value", "1"]
        if block_at_start:
            _bpftool(*block)
        loaded = load_object(ALLOW_BLOCK)
        filling = sync.filling_for(loaded, loaded.programs[0], ())  # fresh: proofs cache shapes on it
        live = open_maps(loaded, MapSourceSpec("pinned", str(folder)))
        daemon = SyncDaemon(filling, live, TcDevice("veth-x2tc"), out=io.StringIO(), interval=60)
        try:
            lines = list(daemon.start().lines)
            if not block_at_start:
                _bpftool(*block)
                lines += daemon.handle([Change("blocklist", bytes(int(w) for w in _lpm_key("10.1.0.0", 16)))]).lines
        finally:
            daemon.close()
        added = _keys(lines)
        assert "src_ip 10.1.2.3 action pass" in added, added
        assert added.index("src_ip 10.1.2.3 action pass") < added.index("src_ip 10.1.0.0/16 action drop"), added
        frames = [_frame(a, "10.9.9.9", 6, 80) for a in ("10.1.2.3", "10.1.2.4", "10.2.0.1")]
        assert len(_agree(lines, obj, "xdp_allow_block", frames)) == 1  # 10.1.2.4 only
    finally:
        gen.close()


def test_an_allow_entry_without_its_pass_filter_takes_the_drops_relying_on_it_off(monkeypatch):
    """As rules.templates.fill: when an allow entry gets no pass filter (an LPM /0 or a key
    z3 refutes; here fill_entry and its batch form are made to refuse 10.1.2.3), the /16 drop whose proof
    assumed every allow entry's pass filter ahead of it is not installed, at start and when
    the refused entry arrives later; mending the allow list brings the drop back."""
    refused = bytes([10, 1, 2, 3])
    real = mapfill.fill_entry

    def fill_entry(t, level, key, values, contents=None):
        if t.outcome.is_pass and key == refused:
            return [], Reason("atypical-packets", "refused for the test")
        return real(t, level, key, values, contents)

    real_level = mapfill.fill_level

    def fill_level(t, level, entries, contents=None):  # the batch form (a whole fill) refuses it too
        refuse = t.outcome.is_pass and refused in entries
        out = real_level(t, level, {k: v for k, v in entries.items() if not (refuse and k == refused)}, contents)
        if refuse:
            out.refused.append((refused, Reason("atypical-packets", "refused for the test")))
        return out

    monkeypatch.setattr(mapfill, "fill_entry", fill_entry)
    monkeypatch.setattr(mapfill, "fill_level", fill_level)
    gen = _pinned(ALLOW_BLOCK, ("allowlist", "blocklist"))
    _, folder = next(gen)
    try:
        _bpftool("map", "update", "pinned", str(folder / "allowlist"), "key", "10", "1", "2", "4", "value", "1")
        _bpftool("map", "update", "pinned", str(folder / "blocklist"), "key", *_lpm_key("10.1.0.0", 16), "value", "1")
        loaded = load_object(ALLOW_BLOCK)
        filling = sync.filling_for(loaded, loaded.programs[0], ())
        live = open_maps(loaded, MapSourceSpec("pinned", str(folder)))
        daemon = SyncDaemon(filling, live, TcDevice("veth-x2tc"), out=io.StringIO(), interval=60)
        try:
            first = list(daemon.start().lines)
            start = _keys(first)
            assert "src_ip 10.1.0.0/16 action drop" in start, start  # every allow entry has its filter
            _bpftool("map", "update", "pinned", str(folder / "allowlist"), "key", *map(str, refused), "value", "1")
            later = list(daemon.handle([Change("allowlist", refused)]).lines)
            drop_prio = next(line.split(" prio ")[1].split()[0] for line in first if "10.1.0.0/16" in line)
            assert any(line.startswith("filter del ") and f" prio {drop_prio} " in line for line in later), later
            assert "src_ip 10.1.2.3 action pass" not in _keys(later), later
            _bpftool("map", "delete", "pinned", str(folder / "allowlist"), "key", *map(str, refused))
            mended = _keys(list(daemon.handle([Change("allowlist", refused)]).lines))
            assert "src_ip 10.1.0.0/16 action drop" in mended, mended
        finally:
            daemon.close()
    finally:
        gen.close()


# --------------------------------------------------------------------------- the daemon


def _daemon(folder: Path, watcher, interval: float = 1.0) -> tuple[SyncDaemon, io.StringIO]:
    out = io.StringIO()
    live = open_maps(load_object(DDOS), MapSourceSpec("pinned", str(folder)))
    daemon = SyncDaemon(
        DdosBlacklistFilling(), live, TcDevice("veth-x2tc"), out=out, watcher=watcher, interval=interval
    )
    return daemon, out


def _step_until_batch(daemon: SyncDaemon, tries: int = 50):
    for _ in range(tries):
        batch = daemon.step(100)
        if batch:
            return batch
    raise AssertionError("no batch came")


def test_daemon_follows_bpftool_writes_through_the_watcher(ddos):
    obj, folder = ddos
    obj.map_update("blacklist", _ip("10.0.0.1"), bytes(4))
    try:
        watcher = mapwatch.MapWatcher()
    except mapwatch.WatcherUnavailable as err:
        require(False, f"map watcher: {err}")
    daemon, out = _daemon(folder, watcher, interval=60)
    try:
        first = daemon.start()
        assert [line.split(" flower ")[1].split(" cookie ")[0] for line in first.lines] == [
            "skip_sw src_ip 10.0.0.1 action drop"
        ]
        # an address, from another process
        _bpftool("map", "update", "pinned", str(folder / "blacklist"), "key", "10", "0", "0", "9", "value", *"0000")
        added = _step_until_batch(daemon)
        assert (
            len(added.lines) == 1 and " prio 10 " in added.lines[0] and "src_ip 10.0.0.9 action drop" in added.lines[0]
        )
        # a port: the thesis' two rules (§6.6: dst_port 50 for tcp and for udp)
        _bpftool("map", "update", "pinned", str(folder / "port_blacklist"), "key", "50", "0", "value", *"0000")
        ports = _step_until_batch(daemon)
        assert sorted(line.split(" skip_sw ")[1].split(" cookie")[0] for line in ports.lines) == [
            "ip_proto tcp dst_port 50 action drop",
            "ip_proto udp dst_port 50 action drop",
        ]
        # deleting the address takes exactly its filter away, by the handle it was added with
        handle = added.lines[0].split(" handle ")[1].split()[0]
        _bpftool("map", "delete", "pinned", str(folder / "blacklist"), "key", "10", "0", "0", "9")
        gone = _step_until_batch(daemon)
        assert gone.lines == [f"filter del dev veth-x2tc ingress protocol ip prio 10 chain 0 handle {handle} flower"]
        # its entry event was seen (alone, or with its exit event when both came before the
        # daemon woke: the kernel deletes in microseconds); nothing is left for the exit event
        assert "blacklist[150994954] deleted (at syscall entry)" in _headers(out)[-1]
        assert daemon.step(200) is None
        text = out.getvalue()
        assert "changes: blacklist[" in text and "since_syscall_us=" in text
    finally:
        daemon.close()


def _headers(out: io.StringIO) -> list[str]:
    """The `# batch N at TIME: WHY` lines the daemon printed so far."""
    return [x for x in out.getvalue().splitlines() if x.startswith("# batch ") and " at " in x.split(":")[0]]


def _watcher() -> mapwatch.MapWatcher:
    try:
        return mapwatch.MapWatcher()
    except mapwatch.WatcherUnavailable as err:
        require(False, f"map watcher: {err}")


def _events(watcher: mapwatch.MapWatcher, n: int) -> list[mapwatch.MapEvent]:
    got: list[mapwatch.MapEvent] = []
    for _ in range(50):
        got += watcher.poll(100)
        if len(got) >= n:
            break
    return got


def test_the_watcher_reports_a_change_at_syscall_entry_only_where_it_can():
    """What the README's window rests on, with bpftool writing from another process: an
    update of a small non-per-CPU value and a delete are reported at their syscall's entry
    (`early`, the update with its new value) and again at exit; a failed delete too (sync
    then puts back what its entry event took away); a per-CPU update only at exit (no early
    event: its window runs to the exit event)."""
    require_kernel()
    folder = BPFFS / f"xdp2tc-watch-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    watcher = _watcher()
    try:
        ids = {}
        for name, kind in (("plain", "hash"), ("percpu", "percpu_hash")):
            _bpftool(
                "map",
                "create",
                str(folder / name),
                "type",
                kind,
                "key",
                "4",
                "value",
                "4",
                "entries",
                "8",
                "name",
                name,
            )
            ids[name] = json.loads(_bpftool("-j", "map", "show", "pinned", str(folder / name)))["id"]
        watcher.watch(ids.values())
        key = ["10", "0", "0", "1"]

        def write(*words: str) -> list[tuple]:
            _bpftool("map", *words)
            got = _events(watcher, 2 if words[0] != "update" or "plain" in words[2] else 1)
            return [(e.map_id, e.cmd, e.key, e.early, e.value) for e in got]

        plain, percpu = str(folder / "plain"), str(folder / "percpu")
        upd, dele = 2, 3  # BPF_MAP_UPDATE_ELEM, BPF_MAP_DELETE_ELEM
        k = bytes([10, 0, 0, 1])
        assert write("update", "pinned", plain, "key", *key, "value", "7", "0", "0", "0") == [
            (ids["plain"], upd, k, True, bytes([7, 0, 0, 0])),
            (ids["plain"], upd, k, False, None),
        ]
        assert write("delete", "pinned", plain, "key", *key) == [
            (ids["plain"], dele, k, True, None),
            (ids["plain"], dele, k, False, None),
        ]
        proc = subprocess.run(["bpftool", "map", "delete", "pinned", plain, "key", *key], capture_output=True)
        assert proc.returncode != 0  # no such entry: the delete fails, and still both events come
        assert [(e.early, e.key) for e in _events(watcher, 2)] == [(True, k), (False, k)]
        assert write("update", "pinned", percpu, "key", *key, "value", "1", "0", "0", "0") == [
            (ids["percpu"], upd, k, False, None)
        ]
        assert watcher.poll(200) == []  # nothing else came
    finally:
        watcher.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_value_update_through_the_watcher_takes_the_drop_away_at_syscall_entry(ddos):
    """The same ordering as the synthetic test below, with the kernel's events: bpftool
    turns 10.4.4.4's value from 0 (drop) to 1 (pass); the first batch holds the entry
    event (alone or with the exit event, whichever the daemon woke to): the shield is added
    before the drop goes, and nothing is left for a later batch."""
    obj, folder = ddos
    key = _ip("10.4.4.4")
    obj.map_update("blacklist", key, bytes(4))
    out = io.StringIO()
    live = open_maps(load_object(DDOS), MapSourceSpec("pinned", str(folder)))
    daemon = SyncDaemon(_ValueDecides(), live, TcDevice("veth-x2tc"), out=out, watcher=_watcher(), interval=60)
    try:
        daemon.start()
        _bpftool("map", "update", "pinned", str(folder / "blacklist"), "key", "10", "4", "4", "4", "value", *"1000")
        batch = _step_until_batch(daemon)
        assert [(x.split()[1], " action pass " in x) for x in batch.lines] == [("add", True), ("del", False)]
        assert "changes: blacklist[67372042] = 1 (at syscall entry)" in _headers(out)[-1]  # BTF: u32 host order
        assert daemon.step(200) is None
        assert [f.action for f in daemon.by_origin[("blacklist", key)]] == [("pass",)]
    finally:
        daemon.close()


def test_daemon_polls_when_there_is_no_watcher(ddos):
    obj, folder = ddos
    daemon, _ = _daemon(folder, None, interval=0.01)
    try:
        assert not daemon.start()
        obj.map_update("blacklist", _ip("198.51.100.7"), bytes(4))
        batch = _step_until_batch(daemon)
        assert "src_ip 198.51.100.7 action drop" in batch.lines[0]
        obj.map_delete("blacklist", _ip("198.51.100.7"))
        assert _step_until_batch(daemon).lines[0].startswith("filter del ")
    finally:
        daemon.close()


def test_an_early_delete_event_removes_the_drop_and_a_failed_delete_restores_it(ddos):
    obj, folder = ddos
    obj.map_update("blacklist", _ip("10.1.1.1"), bytes(4))
    daemon, _ = _daemon(folder, None, interval=60)
    try:
        daemon.start()
        early = daemon.handle([Change("blacklist", _ip("10.1.1.1"), early=True)])
        assert early.lines[0].startswith("filter del ")
        # the entry is still there (the delete failed): its exit event re-reads it
        back = daemon.handle([Change("blacklist", _ip("10.1.1.1"))])
        assert "src_ip 10.1.1.1 action drop" in back.lines[0]
    finally:
        daemon.close()


class _ValueDecides(DdosBlacklistFilling):
    """A blacklist whose value decides (as xdp-filter's action maps do): 0 drops the address,
    anything else passes it (a shield at a higher priority)."""

    def entry(self, contents, map_name, key):
        filters = super().entry(contents, map_name, key)
        value = contents.get(map_name).value(key)
        if map_name == "blacklist" and value is not None and value[0] != bytes(4):
            return [SyncFilter(f.match, ("pass",), 5, origin=f.origin) for f in filters]
        return filters


def test_an_early_update_removes_the_drop_it_makes_wrong_and_its_exit_settles_it(ddos):
    obj, folder = ddos
    key = _ip("10.3.3.3")
    obj.map_update("blacklist", key, bytes(4))
    live = open_maps(load_object(DDOS), MapSourceSpec("pinned", str(folder)))
    daemon = SyncDaemon(_ValueDecides(), live, TcDevice("veth-x2tc"), out=io.StringIO(), interval=60)

    def steps(batch):
        return [(line.split()[1], int(line.split(" prio ")[1].split()[0])) for line in batch.lines]

    try:
        daemon.start()
        # the value is about to become 1 (pass): the shield comes first, then the drop goes
        early = daemon.handle([Change("blacklist", key, early=True, value=((1).to_bytes(4, "little"),))])
        assert steps(early) == [("add", 5), ("del", 10)]
        # the write failed (the entry still holds 0): the exit event puts the drop back
        assert steps(daemon.handle([Change("blacklist", key)])) == [("add", 10), ("del", 5)]
        # the write happens: entry then exit
        daemon.handle([Change("blacklist", key, early=True, value=((1).to_bytes(4, "little"),))])
        obj.map_update("blacklist", key, (1).to_bytes(4, "little"))
        assert not daemon.handle([Change("blacklist", key)])  # nothing left to do
        assert [f.action for f in daemon.by_origin[("blacklist", key)]] == [("pass",)]
    finally:
        daemon.close()


class _RefillOnPorts(DdosBlacklistFilling):
    """A filling that cannot give one port's filters alone (as an aggregating template might)."""

    def entry(self, contents, map_name, key):
        return None if map_name == "port_blacklist" else super().entry(contents, map_name, key)


def test_a_filling_can_ask_for_a_whole_refill(ddos):
    obj, folder = ddos
    obj.map_update("blacklist", _ip("10.2.2.2"), bytes(4))
    live = open_maps(load_object(DDOS), MapSourceSpec("pinned", str(folder)))
    daemon = SyncDaemon(_RefillOnPorts(), live, TcDevice("veth-x2tc"), out=io.StringIO(), interval=60)
    try:
        daemon.start()
        obj.map_update("port_blacklist", (53).to_bytes(2, "little"), bytes(4))
        batch = daemon.handle([Change("port_blacklist", (53).to_bytes(2, "little"))])
        # the whole fill is diffed against the device: only the two new filters are added
        assert [line.split()[1] for line in batch.lines] == ["add", "add"]
        assert all("dst_port 53" in line for line in batch.lines)
    finally:
        daemon.close()


# --------------------------------------------------------------------------- batches


def _f(prio: int, action: str, port: int, origin=None) -> SyncFilter:
    match = FlowerMatch("ip", (("ip_proto", exact("ip_proto", 6)), ("dst_port", exact("dst_port", port))))
    return SyncFilter(match, (action,), prio, origin=origin)


def test_batch_order_shields_first_in_and_last_out():
    dev = TcDevice("eth0")
    shield, drop = _f(1, "pass", 22), _f(5, "drop", 23)
    first = dev.plan([drop, shield])
    assert [" action pass " in line for line in first.lines] == [True, False]
    dev.commit(first)
    # the drop goes, a new drop and a new shield come, the old shield goes: in that order
    new_shield, new_drop = _f(2, "pass", 24), _f(6, "drop", 25)
    change = dev.plan([new_shield, new_drop])
    # (verb, prio): prio 2 is the new shield, 5 the old drop, 6 the new drop, 1 the old shield
    steps = [(line.split()[1], int(line.split(" prio ")[1].split()[0])) for line in change.lines]
    assert steps == [("add", 2), ("del", 5), ("add", 6), ("del", 1)]


def test_reconcile_keeps_wanted_filters_removes_stale_ones_and_leaves_foreign_alone():
    wanted, stale = _f(5, "drop", 23), _f(5, "drop", 99)
    dev = TcDevice("eth0")

    def item(handle, cookie, kind="drop"):
        # `tc -j filter show dev eth0 ingress` as iproute2 prints a flower filter (tc/tc_filter.c
        # print_filter: protocol, pref, kind, chain; tc/f_flower.c: options.handle as "0x.." text;
        # tc/m_action.c: actions[] with order, kind, control_action, cookie)
        action = {"order": 1, "kind": "gact", "control_action": {"type": kind}, "index": handle, "ref": 1, "bind": 1}
        if cookie:
            action["cookie"] = cookie
        return {
            "protocol": "ip",
            "pref": 5,
            "kind": "flower",
            "chain": 0,
            "options": {"handle": f"0x{handle:x}", "keys": {}, "skip_sw": True, "actions": [action]},
        }

    doc = json.dumps(
        [
            {"protocol": "ip", "pref": 5, "kind": "flower", "chain": 0},
            item(1, wanted.cookie("skip_sw")),
            item(2, stale.cookie("skip_sw")),
            item(3, None),  # someone else's filter
        ]
    )
    dev.load(parse_filters(doc))
    batch = dev.plan([wanted, _f(5, "drop", 80)])
    assert batch.lines[0] == "filter del dev eth0 ingress protocol ip prio 5 chain 0 handle 0x2 flower"
    assert batch.lines[1].startswith("filter add dev eth0 ingress protocol ip prio 5 chain 0 handle 0x4 flower")
    assert "dst_port 80" in batch.lines[1] and len(batch.lines) == 2


def test_applied_batches_pass_tcs_parser_in_a_netns(capsys, monkeypatch, ddos):
    require_tool("tc")
    require_tool("ip")
    obj, folder = ddos
    obj.map_update("blacklist", _ip("10.0.0.1"), bytes(4))
    obj.map_update("port_blacklist", (50).to_bytes(2, "little"), bytes(4))
    ns = f"xdp2tc-sync-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1"], check=True)
        subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "veth0", "ingress"], check=True)
        monkeypatch.setattr(sync, "FILLINGS", [factory])
        args = ["sync", str(DDOS), "--dev", "veth0", "--maps-from", f"pinned:{folder}", "--netns", ns, "--once"]
        assert cli.main([*args, "--dry-run"]) == 0
        lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("filter ")]
        assert len(lines) == 3
        assert all(r.accepted for r in check_syntax(lines)), [r.message for r in check_syntax(lines)]
        code = cli.main([*args, "--apply"])
        err = capsys.readouterr().err
        # the parser took the batch; only a kernel without cls_flower refuses it
        assert code == 0 or (code == 1 and KERNEL_ERROR in err), err
        assert cli.main([*args[:2], "--dev", "nosuch0", *args[4:], "--apply"]) == 2
        assert "nosuch0" in capsys.readouterr().err
        device = TcDevice("veth0", tc=("tc", "-n", ns))
        with pytest.raises(TcError, match="cookie must be a hex string"):
            device.apply(type(device.plan([]))(lines=[lines[0].replace(COOKIE_TAG, "zz")]))
    finally:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


# --------------------------------------------------------------------------- counters


def test_hardware_counters_are_added_to_the_programs_percpu_counter():
    require_kernel()
    match = FlowerMatch("ip", (("src_ip", prefix("src_ip", 0xC0A80115, 32)),))
    ref = CounterRef("dropped_stat", (0).to_bytes(4, "little"), 0, 8, "packets")
    drop = SyncFilter(match, ("drop",), 1, counters=(ref,))
    cookie = drop.cookie("skip_sw")

    def doc(hw_packets: int) -> str:
        # `tc -s -j filter show`: tc/tc_util.c print_tcstats_basic_hw puts hw_packets and
        # hw_bytes next to the totals in the action's "stats" object
        stats = {"bytes": hw_packets * 60, "packets": hw_packets, "drops": hw_packets, "overlimits": 0}
        stats.update({"requeues": 0, "hw_bytes": hw_packets * 60, "hw_packets": hw_packets})
        action = {"order": 1, "kind": "gact", "control_action": {"type": "drop"}, "cookie": cookie, "stats": stats}
        return json.dumps(
            [{"protocol": "ip", "pref": 1, "kind": "flower", "chain": 0, "options": {"handle": 1, "actions": [action]}}]
        )

    with kernel.load(_obj(DROP_COUNT)) as obj:
        info = obj.map("dropped_stat")
        folder = CounterFolder({"dropped_stat": info}, slot=1)
        wanted = {cookie: drop}
        assert folder.fold(parse_filters(doc(100)), wanted) == {}  # the first reading is the baseline
        assert folder.fold(parse_filters(doc(107)), wanted) == {("dropped_stat", ref.key): 7}
        assert folder.fold(parse_filters(doc(3)), wanted) == {("dropped_stat", ref.key): 3}  # re-created
        dump = json.loads(_bpftool("-j", "map", "dump", "id", str(kernel.map_id(info.fd))))
        per_cpu = {v["cpu"]: int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little") for v in dump[0]["values"]}
        assert per_cpu[1] == 10 and per_cpu[0] == 0


class _DropCountFilling:
    """thesis_drop_count (seed 000 §6.5.4): one static drop whose packets the program counts
    in dropped_stat[0] (hand-derived from the C source)."""

    maps = frozenset()
    counter_maps = frozenset({"dropped_stat"})

    def fill(self, contents):
        match = FlowerMatch("ip", (("src_ip", prefix("src_ip", 0xC0A80115, 32)),))
        ref = CounterRef("dropped_stat", (0).to_bytes(4, "little"), 0, 8, "packets")
        return [SyncFilter(match, ("drop",), 1, counters=(ref,))]

    def entry(self, contents, map_name, key):
        return []


def _fake_tc(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """A `tc` stand-in: `-batch -` appends stdin to batches.txt (or refuses while the file
    `refuse` is non-empty), `-s ...` prints stats.json, anything else prints `[]`.
    Returns (tc, stats, batches, refuse)."""
    stats, log, fake = tmp_path / "stats.json", tmp_path / "batches.txt", tmp_path / "tc"
    refuse = tmp_path / "refuse"
    refuse.write_text("")
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "args = sys.argv[1:]\n"
        f"if args[:2] == ['-batch', '-']:\n"
        f"    if open({str(refuse)!r}).read():\n        print('Error: refused by the test', file=sys.stderr)\n"
        "        sys.exit(1)\n"
        f"    open({str(log)!r}, 'a').write(sys.stdin.read())\n    sys.exit(0)\n"
        f"if args[0] == '-s':\n    sys.stdout.write(open({str(stats)!r}).read())\n    sys.exit(0)\n"
        "sys.stdout.write('[]')\n"
    )
    fake.chmod(0o755)
    return fake, stats, log, refuse


def _stats_doc(cookie: str, packets: int, hw_packets: int | None) -> str:
    """`tc -s -j filter show` with one drop filter: iproute2 prints `hw_bytes`/`hw_packets`
    after the totals only when the kernel reports hardware counts that are not zero
    (tc/tc_util.c print_tcstats_basic_hw), with `sw_packets` the difference."""
    stats_obj = {"bytes": packets * 64, "packets": packets, "drops": packets, "overlimits": 0, "requeues": 0}
    if hw_packets is not None:
        stats_obj.update(sw_bytes=(packets - hw_packets) * 64, sw_packets=packets - hw_packets)
        stats_obj.update(hw_bytes=hw_packets * 64, hw_packets=hw_packets)
    action = {"order": 1, "kind": "gact", "control_action": {"type": "drop"}, "cookie": cookie}
    action["stats"] = stats_obj
    return json.dumps(
        [{"protocol": "ip", "pref": 1, "kind": "flower", "chain": 0, "options": {"handle": 1, "actions": [action]}}]
    )


def _dropped_total(obj) -> int:
    dump = json.loads(_bpftool("-j", "map", "dump", "id", str(kernel.map_id(obj.map("dropped_stat").fd))))
    return sum(int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little") for v in dump[0]["values"])


def test_apply_retries_a_refused_batch_and_folds_counters_through_a_fake_tc(tmp_path):
    require_kernel()
    fake, stats, log, refuse = _fake_tc(tmp_path)
    refuse.write_text("yes")  # the fake tc refuses batches
    filling = _DropCountFilling()
    (drop,) = filling.fill(None)
    cookie = drop.cookie("skip_sw")
    with kernel.load(_obj(DROP_COUNT)) as obj:
        prog = kernel.prog_id(obj.programs["xdp_drop_count"])
        live = open_maps(load_object(DROP_COUNT), MapSourceSpec("prog", str(prog)))
        daemon = SyncDaemon(
            filling, live, TcDevice("eth0", tc=(str(fake),)), apply=True, out=io.StringIO(), interval=0.001
        )
        try:
            stats.write_text(_stats_doc(cookie, 100, 100))
            daemon.start()
            assert daemon.failed == 1 and not log.exists()
            refuse.write_text("")
            daemon.step(5)  # the next tick plans everything again
            assert log.read_text().startswith(
                "filter add dev eth0 ingress protocol ip prio 1 chain 0 handle 0x1 flower"
            )
            daemon.step(5)  # first reading: the baseline
            stats.write_text(_stats_doc(cookie, 112, 112))
            daemon.step(5)
        finally:
            daemon.close()
        assert _dropped_total(obj) == 12


@pytest.mark.parametrize(
    "skip, folds, added",
    [
        # a NIC (skip_sw): only what the hardware counted; the program never saw it
        ("skip_sw", tcsync.BY_SKIP, 7),
        # the flower VM's skip_hw filters stand in for the NIC: their software totals
        ("skip_hw", tcsync.FOLD_SOFTWARE, 12),
        # `sync --sw` here: tc ingress runs after XDP, so the program counted all 12 itself
        ("skip_hw", tcsync.BY_SKIP, 0),
    ],
)
def test_which_counters_fold_depends_on_where_the_filters_sit(tmp_path, skip, folds, added):
    """One hand-written document read three ways: the filter's totals went 100 -> 112 and
    its hardware part 100 -> 107 (5 packets classified in software)."""
    require_kernel()
    fake, stats, log, _ = _fake_tc(tmp_path)
    filling = _DropCountFilling()
    (drop,) = filling.fill(None)
    cookie = drop.cookie(skip)
    device = TcDevice("eth0", skip, (str(fake),), folds=folds)
    with kernel.load(_obj(DROP_COUNT)) as obj:
        prog = kernel.prog_id(obj.programs["xdp_drop_count"])
        live = open_maps(load_object(DROP_COUNT), MapSourceSpec("prog", str(prog)))
        out = io.StringIO()
        daemon = SyncDaemon(filling, live, device, apply=True, out=out, interval=0.001)
        try:
            stats.write_text(_stats_doc(cookie, 100, 100))
            daemon.start()
            assert daemon.failed == 0 and f" flower {skip} " in log.read_text()
            daemon.step(5)  # first reading: the baseline
            stats.write_text(_stats_doc(cookie, 112, 107))
            daemon.step(5)
        finally:
            daemon.close()
        assert _dropped_total(obj) == added
    assert ("# counters: not folded" in out.getvalue()) == (added == 0)


@pytest.mark.parametrize(
    "stats_obj, folds, unseen",
    [
        ({"packets": 40, "bytes": 400, "hw_packets": 30, "hw_bytes": 300}, tcsync.FOLD_HARDWARE, (30, 300)),
        ({"packets": 40, "bytes": 400, "hw_packets": 30, "hw_bytes": 300}, tcsync.FOLD_SOFTWARE, (40, 400)),
        # no hw_* printed: zero in hardware, or a kernel without TCA_STATS_BASIC_HW, whose
        # totals are the NIC's: for a skip_sw filter (never run in software) the totals
        ({"packets": 9, "bytes": 90}, tcsync.FOLD_HARDWARE, (9, 90)),
        ({"packets": 0, "bytes": 0}, tcsync.FOLD_HARDWARE, (0, 0)),
    ],
)
def test_a_filters_unseen_counts_from_a_tc_document(stats_obj, folds, unseen):
    action = {"order": 1, "kind": "gact", "control_action": {"type": "drop"}, "cookie": COOKIE_TAG + "00" * 12}
    action["stats"] = stats_obj
    doc = [{"protocol": "ip", "pref": 3, "kind": "flower", "chain": 0, "options": {"handle": 2, "actions": [action]}}]
    (d,) = parse_filters(json.dumps(doc))
    assert (d.packets, d.hw_packets) == (stats_obj["packets"], stats_obj.get("hw_packets"))
    assert d.unseen(folds) == unseen


def test_a_device_says_where_its_filters_fold_from():
    assert TcDevice("eth0").folds == tcsync.FOLD_HARDWARE
    assert TcDevice("eth0", "skip_hw").folds is None
    assert TcDevice("eth0", "skip_hw", folds=tcsync.FOLD_SOFTWARE).folds == tcsync.FOLD_SOFTWARE

    class StandIn(tcsync.HostTc):  # a runner whose skip_hw filters play the NIC
        folds = tcsync.FOLD_SOFTWARE

    assert TcDevice("eth0", "skip_hw", StandIn()).folds == tcsync.FOLD_SOFTWARE
    assert flowervm.VmTc.folds == tcsync.FOLD_SOFTWARE  # `sync --apply --vm`'s runner
    with pytest.raises(ValueError, match="folds must be"):
        TcDevice("eth0", folds="both")


# --------------------------------------------------------------------------- the batch fill


def _random_entries(rng: random.Random, e, t, level: int, n: int) -> dict[bytes, tuple[bytes, ...]]:
    """`n` random entries for a template level's map: keys with the layout's constant bytes
    mostly right, LPM prefix lengths valid or not (few of them: each valid one is a proof),
    a few keys of the wrong size, all-zero keys (port 0: a z3 counterexample), values from a
    small pool (so the value condition holds for some) and now and then two CPUs that differ."""
    lv = t.levels[level]
    m = next(m for m in e.obj.maps if m.name == lv.map)
    pool = [bytes(m.value_size), b"\1" * m.value_size, b"\xff" * m.value_size]
    pool += [rng.randbytes(m.value_size) for _ in range(3)]
    out = {bytes(lv.key_size): (pool[1],), bytes(lv.key_size + 1): (pool[1],)}
    while len(out) < n:
        key = bytearray(rng.randbytes(lv.key_size))
        for i, kb in enumerate(lv.layout):
            if kb.key is None and rng.random() < 0.9:
                key[i] = kb.const
        if lv.kind == "lpm":
            key[:4] = rng.choice((0, 24, 32, 8 * len(lv.layout) + 1)).to_bytes(4, "little")
        values = (rng.choice(pool),) if rng.random() < 0.9 else (rng.choice(pool), rng.choice(pool))
        out[bytes(key)] = values
    return out


@pytest.mark.parametrize(
    "stem, assume",
    [("thesis_nested_maps", ()), ("lpm_action", ()), ("config_array", ("no-ip-options",))],
)
def test_the_batch_fill_gives_what_fill_entry_gives_entry_by_entry(stem, assume):
    """rules/levelfill.py's fill_level (one call per template level) against fill_entry per
    entry (levelfill.per_entry) on a few hundred random entries per level: the same filters
    and the same reasons, in the same order, byte for byte (repr). Covers two chained hash
    levels and a pass template (nested maps), LPM with the longest match's pass shields
    and a value condition (lpm_action), an array index with constant key bytes and the
    value as the match (config_array). The batch form runs first, on templates whose LPM
    shapes may not be proven yet, so it is what proves them."""
    from test_templates import _built

    from rules.levelfill import fill_level, per_entry
    from rules.mapcontents import MapContents, MapEntries

    _, e, _, templates, _ = _built(stem, assume)
    rng = random.Random(stem)
    maps = {m.name: m for m in e.obj.maps}
    checked = 0
    for t in templates:
        for level, lv in enumerate(t.levels):
            entries = _random_entries(rng, e, t, level, 300)
            m = maps[lv.map]
            contents = MapContents({lv.map: MapEntries(lv.map, m.type.id, m.key_size, m.value_size, entries)})
            batch = fill_level(t, level, entries, contents)
            one = per_entry(t, level, entries, contents)
            assert repr(batch.filters) == repr(one.filters)
            assert repr(batch.refused) == repr(one.refused)
            checked += len(batch.filters)
    assert checked > 0  # the random entries do get filters


def test_a_match_shape_makes_the_match_construction_makes():
    """flower.MatchShape (the batch fill's match maker) equals FlowerMatch built from the same
    keys, and refuses what construction refuses (a value too wide, a mask not a prefix)."""
    from rules.flower import Exact, MatchShape

    shape = MatchShape("ip", (("ip_proto", exact("ip_proto", 6)),), ("dst_port", "src_ip"))
    for port, addr in ((80, prefix("src_ip", 0x0A010000, 16)), (0, exact("src_ip", 0x0A010203))):
        values = {"src_ip": addr, "dst_port": exact("dst_port", port)}
        built = FlowerMatch("ip", (("ip_proto", exact("ip_proto", 6)), *values.items()))
        assert shape.match(values) == built and repr(shape.match(values)) == repr(built)
    with pytest.raises(ValueError, match="wider than"):
        shape.match({"src_ip": exact("src_ip", 1), "dst_port": Exact(1 << 16, 0xFFFF)})
    with pytest.raises(ValueError, match="not a prefix"):
        shape.match({"src_ip": Exact(0, 0x00FF00FF), "dst_port": exact("dst_port", 1)})
    with pytest.raises(ValueError, match="cannot be open"):
        MatchShape("ip", (), ("ip_proto",))


def test_cookies_and_ipv4_words_are_what_the_generic_forms_give():
    """A filter's cookie hashes repr(match.keys) (tcsync.keys_repr spells it out, the same
    characters, so filters keep their cookies), and IPv4 words are ipaddress' own."""
    import ipaddress

    from rules.flower import Range, render

    rng = random.Random(3)
    for _ in range(300):
        addr, plen = rng.getrandbits(32), rng.randint(1, 32)
        keys = [("src_ip", prefix("src_ip", addr, plen))]
        if rng.random() < 0.5:
            keys += [("ip_proto", exact("ip_proto", 6)), ("dst_port", rng.choice([exact("dst_port", 80), Range(1, 9)]))]
        m = FlowerMatch("ip", tuple(keys))
        assert tcsync.keys_repr(m.keys) == repr(m.keys)
        words = dict(zip(render(m)[::2], render(m)[1::2]))
        net = ipaddress.IPv4Network((addr & ((1 << 32) - 1 << (32 - plen)), plen))
        assert words["src_ip"] == (str(net.network_address) if plen == 32 else str(net))
    assert tcsync.keys_repr(()) == repr(())
