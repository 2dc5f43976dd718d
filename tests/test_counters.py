"""Counter references (rules/counters.py, offload/counting.py): which stats entries a
template's filters fold into, derived from the exploration's map writes, with expectations
hand-derived from corpus/counted_blacklist.c; and the kernel as the oracle: the map entries
after folding a hand-written `tc -s -j filter show` document equal what BPF_PROG_TEST_RUN'ing
the same number of matching packets through the program leaves in a fresh copy of its maps."""

from __future__ import annotations

import json
import socket
import struct
from functools import cache

import corpus
from analyzer import kernel
from analyzer.xdp import VERDICTS
from lifter.program import load_object
from offload.counting import counting_filling
from offload.tcsync import CounterFolder, CounterRef, fold_slot, parse_filters
from rules.counters import Increment, template_increments
from rules.mapcontents import MapContents, MapEntries
from rules.reasons import Reason
from tests.conftest import need_object
from tests.test_kernel_runner import kernel_ready

ASSUME = ("no-ip-options",)
SRC = socket.inet_aton("10.0.0.1")
PORT = struct.pack("<H", 53)


@cache
def _filling():
    path = need_object(corpus.BUILD_DIR / "clang" / "counted_blacklist.o")
    obj = load_object(path)
    return path, obj, counting_filling(obj, obj.programs[0], ASSUME)


def _by_map(filling):
    return {t.levels[0].map: t for t in filling.templates}


def test_increments_from_the_paths_map_writes():
    """Hand-derived from the C source: a source drop adds 1 to drop_reasons[REASON_SRC = 1]
    (u64 at offset 0) and 1 to the source's own src_blacklist entry; a port drop's packet
    may carry a blacklisted source too, and then the program counts it under REASON_SRC:
    no counter is folded for the port filters."""
    _, _, filling = _filling()
    t = _by_map(filling)
    assert template_increments(t["src_blacklist"], (None,)) == [
        Increment("drop_reasons", (1).to_bytes(4, "little"), None, 0, 8, 1),
        Increment("src_blacklist", None, 0, 0, 8, 1),
    ]
    why = template_increments(t["port_blacklist"], (None,))
    assert isinstance(why, Reason) and "another path" in why.detail
    assert filling.counter_maps == {"drop_reasons", "src_blacklist"}


def test_no_counters_where_the_program_counts_nothing():
    path = need_object(corpus.BUILD_DIR / "clang" / "thesis_ddos_blacklist.o")
    obj = load_object(path)
    filling = counting_filling(obj, obj.programs[0], ASSUME)
    assert filling.counter_maps == frozenset()
    assert all(template_increments(t, (None,)) == [] for t in filling.templates)


def _contents(obj, percpu: int) -> MapContents:
    m = {x.name: x for x in obj.maps}
    return MapContents(
        {
            "src_blacklist": MapEntries("src_blacklist", m["src_blacklist"].type.id, 4, 8, {SRC: (bytes(8),) * percpu}),
            "port_blacklist": MapEntries("port_blacklist", m["port_blacklist"].type.id, 2, 1, {PORT: (b"\1",)}),
        }
    )


def _doc(filters, packets: dict[str, int]) -> str:
    """`tc -s -j filter show` as iproute2 prints it (the stats object of each action)."""
    out = []
    for handle, f in enumerate(filters, 1):
        n = packets[f.origin[0]]
        stats = {"bytes": n * 60, "packets": n, "drops": n, "overlimits": 0, "requeues": 0}
        stats.update({"hw_bytes": n * 60, "hw_packets": n})
        cookie = f.cookie("skip_sw")
        action = {"order": 1, "kind": "gact", "control_action": {"type": "drop"}, "cookie": cookie, "stats": stats}
        out.append({"protocol": "ip", "pref": f.prio, "kind": "flower", "chain": 0, "options": {"handle": handle}})
        out[-1]["options"]["actions"] = [action]
    return json.dumps(out)


def _frame(src: bytes, dport: int) -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 1, 0, 64, 17, 0, src, socket.inet_aton("10.9.9.9"))
    return (bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + struct.pack("!HHHH", 9, dport, 8, 0)).ljust(
        60, b"\0"
    )


def _totals(loaded, name: str, key: bytes) -> int:
    """An entry's u64 summed over every CPU's slot."""
    raw = loaded.map_lookup(name, key) or b""
    return sum(int.from_bytes(raw[i : i + 8], "little") for i in range(0, len(raw), 8))


def test_folded_counters_equal_what_the_program_counts():
    """The source filter took 5 packets in hardware, the port filter 3: folding adds 5 to
    drop_reasons[1] and to src_blacklist[10.0.0.1], nothing for the port filter; the program,
    given the source filter's 5 packets, leaves the same numbers in every entry."""
    path, obj, filling = _filling()
    kernel_ready()
    percpu = kernel.possible_cpus()
    filters = filling.fill(_contents(obj, percpu))
    by_origin = {f.origin[0]: f for f in filters}
    assert [r.map for r in by_origin["src_blacklist"].counters] == ["drop_reasons", "src_blacklist"]
    assert by_origin["port_blacklist"].counters == ()
    wanted = {f.cookie("skip_sw"): f for f in filters}
    zero = {"src_blacklist": 0, "port_blacklist": 0}
    prog = obj.programs[0].name
    reasons = [(r).to_bytes(4, "little") for r in range(4)]
    with kernel.load(path, programs=[prog]) as folded, kernel.load(path, programs=[prog]) as ran:
        for loaded in (folded, ran):
            loaded.map_update("src_blacklist", SRC, bytes(folded.map("src_blacklist").value_bytes))
            loaded.map_update("port_blacklist", PORT, b"\1")
        folder = CounterFolder({n: folded.map(n) for n in filling.counter_maps}, fold_slot())
        assert folder.fold(parse_filters(_doc(filters, zero)), wanted) == {}  # the baseline
        added = folder.fold(parse_filters(_doc(filters, {"src_blacklist": 5, "port_blacklist": 3})), wanted)
        assert added == {("drop_reasons", reasons[1]): 5, ("src_blacklist", SRC): 5}
        for _ in range(5):  # what the source filter took: packets from 10.0.0.1 (to port 53 too)
            assert VERDICTS.get(ran.run(prog, _frame(SRC, 53)).retval) == "DROP"
        for key in reasons:
            assert _totals(folded, "drop_reasons", key) == _totals(ran, "drop_reasons", key)
        assert _totals(folded, "src_blacklist", SRC) == _totals(ran, "src_blacklist", SRC) == 5
        assert _totals(ran, "drop_reasons", reasons[1]) == 5


def test_counter_ref_keys_name_the_filters_own_entry():
    """Two sources: each filter folds into its own src_blacklist entry."""
    path, obj, filling = _filling()
    other = socket.inet_aton("10.0.0.2")
    c = _contents(obj, 2)
    c.maps["src_blacklist"].entries[other] = (bytes(8),) * 2
    refs = {f.origin[1]: f.counters for f in filling.fill(c) if f.origin[0] == "src_blacklist"}
    assert {k: [r.key for r in rs if r.map == "src_blacklist"] for k, rs in refs.items()} == {
        SRC: [SRC],
        other: [other],
    }
    assert all(CounterRef("drop_reasons", (1).to_bytes(4, "little"), 0, 8, "packets", 1) in rs for rs in refs.values())
