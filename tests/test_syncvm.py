"""`xdp2tc sync --apply --vm` (issue 13 item 4): sync runs here with the program's real maps
(loaded and pinned on this host, written with bpftool), its batches are applied to the real
cls_flower of Debian's kernel under QEMU through tcsync's executor seam (flowervm.VmTc).

Oracles: the Linux 6.1 cls_flower itself (`tc -j filter show` in the VM, per-filter counters
for frames sent there), tests/oracles/tcflower.py reading the applied batch text back (which
filters should be on the device, which one takes each frame), BPF_PROG_TEST_RUN on the host
with the same map contents for the program's verdict, bpftool for the map writes and the
folded counter. ONE boot for the module (fixture `vm`). Needs root, qemu and `make
flowervm`: skipped with a reason outside CI, a failure under CI=true.
"""

from __future__ import annotations

import io
import ipaddress
import json
import random
import re

import pytest
from conftest import require
from oracles import tcflower
from sync_filling import factory
from test_flowervm import _need_vm
from test_sync import DDOS, DROP_COUNT, _bpftool, _DropCountFilling, _frame, _ip, _pinned, _template_filling
from test_templates import _random_frame

from analyzer import kernel
from analyzer.xdp import VERDICTS
from lifter.program import load_object
from offload import cli, flowercheck, flowervm, sync
from offload.mapsource import MapSourceSpec, open_maps
from offload.sync import SyncDaemon
from offload.tcsync import TcDevice, parse_filters

ASSUME = ("no-ip-options",)
ADDRS = ["192.168.1.40", "192.168.1.41", "10.0.0.9", "10.0.0.2"]


class _Kept:
    """The module's session, handed out where a fresh one would be booted; closing it is
    left to the fixture (so a restarted sync finds the same VM and its filters)."""

    def __init__(self, session: flowervm.Session):
        self.session = session

    def __getattr__(self, name):
        return getattr(self.session, name)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def vm():
    img = _need_vm()
    with flowervm.Session(img) as session:
        print(f"flower VM session: guest boot {session.boot_seconds:.1f} s, up after {session.host_boot_seconds:.1f} s")
        yield _Kept(session)


@pytest.fixture
def ddos():
    yield from _pinned(DDOS, ("blacklist", "port_blacklist"))


# --------------------------------------------------------------------------- helpers


def _vm_keys(item: dict) -> dict[str, tuple[int, int]]:
    """A filter's keys as the VM's `tc -j` prints them, as (value, mask) like the oracle's."""
    out = {}
    for name, text in item["options"]["keys"].items():
        if name == "eth_type":
            continue  # the protocol, compared apart
        if name in tcflower.ADDRESS_KEYS:
            net = ipaddress.ip_network(text, strict=False)
            out[name] = (int(net.network_address), int(net.netmask))
        elif name == "ip_proto":
            out[name] = (tcflower.L4_NAMES[text], 0xFF)
        elif name in ("src_port", "dst_port") and isinstance(text, int):
            out[name] = (text, 0xFFFF)
        else:
            raise ValueError(f"key {name}={text!r}: not read by this test")
    return out


def _on_vm(device: TcDevice) -> list[tuple]:
    """What the VM's classifier holds on the device: (chain, prio, protocol, keys, action, cookie)."""
    out = []
    for item in json.loads(device.show()):
        if "options" not in item:
            continue
        (action,) = item["options"]["actions"]
        assert item["options"].get("skip_hw") and item["options"].get("not_in_hw"), item
        control = action["control_action"]["type"]
        out.append(
            (
                item.get("chain", 0),
                item["pref"],
                item["protocol"],
                tuple(sorted(_vm_keys(item).items())),
                control,
                action.get("cookie"),
            )
        )
    return sorted(out)


class _Model:
    """The filters the applied batches leave on the device, from their text alone: adds by
    (chain, prio, handle), deletes by the same; read with the independent tc oracle."""

    def __init__(self):
        self.lines: dict[tuple[int, int, int], str] = {}

    def apply(self, lines: list[str]) -> None:
        for line in lines:
            where = tuple(int(re.search(rf" {w} (\S+)", line).group(1), 0) for w in ("chain", "prio", "handle"))
            if line.startswith("filter add "):
                assert where not in self.lines, f"added twice: {line}"
                self.lines[where] = line
            else:
                assert line.startswith("filter del "), line
                del self.lines[where]

    def oracle(self) -> list[tcflower.Line]:
        return tcflower.parse("\n".join(self.lines.values()))

    def expected(self) -> list[tuple]:
        out = []
        for line in self.oracle():
            words = line.action
            cookie = words[words.index("cookie") + 1] if "cookie" in words else None
            out.append((line.chain, line.prio, line.protocol, tuple(sorted(line.keys.items())), words[0], cookie))
        return sorted(out)


def _frames(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = [_frame(a, "10.0.0.2", p, d) for a in ADDRS for p in (6, 17) for d in (50, 51)]
    return out + [_random_frame(rng, [_ip(a) for a in ADDRS], [50, 51, 80]) for _ in range(24)]


def _replay(vm, device: TcDevice, model: _Model, obj, frames: list[bytes]) -> int:
    """Send `frames` in the VM: the filter whose counter moved is the one the oracle picks
    (by cookie), and the VM drops exactly the frames the program drops (BPF_PROG_TEST_RUN,
    same maps). Returns how many the VM dropped."""
    sent = vm.send(device.dev, frames)
    cookies = {(d.chain, d.prio, d.handle): d.cookie for d in parse_filters(device.show())}
    oracle = model.oracle()
    dropped = 0
    for frame, hits, reached in zip(frames, sent.hits, sent.reached):
        assert reached, frame.hex()
        hit = flowercheck.first_filter(hits)
        want = tcflower.run(oracle, frame)
        if hit is None:
            assert want == ("pass",), frame.hex()
        else:
            assert want[0] == hit.control and cookies[hit.id] == want[want.index("cookie") + 1], frame.hex()
        verdict = VERDICTS.get(obj.run("xdp_ddos_blacklist", frame).retval)
        assert (hit is not None and hit.control == "drop") == (verdict == "DROP"), (frame.hex(), verdict)
        dropped += hit is not None
    return dropped


def _until_batch(daemon: SyncDaemon):
    for _ in range(50):
        batch = daemon.step(100)
        if batch:
            return batch
    raise AssertionError("no batch came")


# --------------------------------------------------------------------------- tests


def test_sync_applies_to_the_real_flower_and_follows_the_maps(vm, ddos):
    """The seed's blacklist (§6.6) through the product's templates: the VM's filters equal the
    applied batches read back; frames in the VM take the filter the oracle picks and are
    dropped exactly when the program drops them; a bpftool add and delete are followed; a
    restarted sync adds nothing, and removes exactly what went stale while it was down."""
    obj, folder = ddos
    _bpftool("map", "update", "pinned", str(folder / "blacklist"), "key", "192", "168", "1", "40", "value", *"1000")
    _bpftool("map", "update", "pinned", str(folder / "port_blacklist"), "key", "50", "0", "value", *"1000")
    vm.device("eth0")
    filling = _template_filling(DDOS, ASSUME)
    model = _Model()

    def daemon() -> SyncDaemon:
        live = open_maps(load_object(DDOS), MapSourceSpec("pinned", str(folder)))
        device = TcDevice("eth0", "skip_hw", flowervm.VmTc(vm))
        return SyncDaemon(filling, live, device, apply=True, out=io.StringIO(), interval=0.01)

    first = daemon()
    try:
        batch = first.start()
        assert first.failed == 0 and len(batch.lines) == 3, first.out.getvalue()
        model.apply(batch.lines)
        assert _on_vm(first.device) == model.expected()
        assert _replay(vm, first.device, model, obj, _frames(1)) >= 6
        # an address added by another process: one filter more, and the VM drops it
        _bpftool("map", "update", "pinned", str(folder / "blacklist"), "key", "10", "0", "0", "9", "value", *"0000")
        added = _until_batch(first)
        assert len(added.lines) == 1 and "src_ip 10.0.0.9 " in added.lines[0]
        model.apply(added.lines)
        assert _on_vm(first.device) == model.expected()
        _replay(vm, first.device, model, obj, _frames(2))
        # the port deleted: its two filters go, and port 50 passes again
        _bpftool("map", "delete", "pinned", str(folder / "port_blacklist"), "key", "50", "0")
        gone = _until_batch(first)
        assert len(gone.lines) == 2 and all(x.startswith("filter del ") for x in gone.lines)
        model.apply(gone.lines)
        assert _on_vm(first.device) == model.expected()
        _replay(vm, first.device, model, obj, _frames(3))
    finally:
        first.close()
    # restart: the VM's filters are found by cookie, nothing is added twice
    second = daemon()
    try:
        assert not second.start() and second.failed == 0
        assert _on_vm(second.device) == model.expected()
    finally:
        second.close()
    # an entry deleted while sync was down: the restart removes exactly its filter
    _bpftool("map", "delete", "pinned", str(folder / "blacklist"), "key", "192", "168", "1", "40")
    third = daemon()
    try:
        stale = third.start()
        assert len(stale.lines) == 1 and stale.lines[0].startswith("filter del ")
        model.apply(stale.lines)
        assert _on_vm(third.device) == model.expected() and len(model.lines) == 1
        _replay(vm, third.device, model, obj, _frames(4))
    finally:
        third.close()


def test_the_vms_counts_are_folded_into_the_programs_counter(vm):
    """thesis_drop_count (seed §6.5.4, hand-written filling: one static drop that the program
    counts in dropped_stat[0]): frames sent in the VM are counted by the real filter, and
    sync adds exactly that count to the live map; the program, run on the same frames on a
    second copy, counts the same number."""
    require(DROP_COUNT.is_file(), "thesis_drop_count is not built (run `make corpus`)")
    frames = [_frame(a, "10.0.0.2", 6, 80) for a in ("192.168.1.21",) * 5 + ("192.168.1.22",) * 3]
    vm.device("eth1")
    with kernel.load(DROP_COUNT) as obj, kernel.load(DROP_COUNT) as witness:
        prog = kernel.prog_id(obj.programs["xdp_drop_count"])
        live = open_maps(load_object(DROP_COUNT), MapSourceSpec("prog", str(prog)))
        device = TcDevice("eth1", "skip_hw", flowervm.VmTc(vm))
        daemon = SyncDaemon(_DropCountFilling(), live, device, apply=True, out=io.StringIO(), interval=0.001)
        try:
            assert len(daemon.start().lines) == 1
            daemon.step(5)  # the first reading: the baseline
            sent = vm.send("eth1", frames)
            assert [bool(h) for h in sent.hits] == [True] * 5 + [False] * 3
            daemon.step(5)
        finally:
            daemon.close()
        for f in frames:
            witness.run("xdp_drop_count", f)

        def total(o) -> int:
            dump = json.loads(_bpftool("-j", "map", "dump", "id", str(kernel.map_id(o.map("dropped_stat").fd))))
            return sum(int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little") for v in dump[0]["values"])

        assert total(obj) == total(witness) == 5


def test_sync_apply_vm_command(vm, ddos, monkeypatch, capsys):
    """The user's command: `sync --apply --vm --once` applies the reconcile batch in the VM
    (the module's session stands in for the boot; the hand-written filling stands in for the
    templates, checked above); --vm without --apply is refused."""
    obj, folder = ddos
    monkeypatch.setattr(sync, "FILLINGS", [factory])
    _bpftool("map", "update", "pinned", str(folder / "blacklist"), "key", "192", "168", "1", "40", "value", *"1000")
    monkeypatch.setattr(flowervm, "Session", lambda *a, **k: vm)
    args = ["sync", str(DDOS), "--dev", "eth2", "--maps-from", f"pinned:{folder}", *("--assume", ASSUME[0])]
    assert cli.main([*args, "--apply", "--vm", "--once"]) == 0
    out = capsys.readouterr().out
    assert "# flower VM: Linux " in out and "# batch 1 applied: 1 lines" in out, out
    (f,) = vm.filters("eth2")
    assert f.control == "drop" and f.protocol == "ip"
    assert cli.main([*args, "--vm", "--once"]) == 2
    err = capsys.readouterr().err
    assert "--vm goes with --apply" in err and err.count("\n") == 1
