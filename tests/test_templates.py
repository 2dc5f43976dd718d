"""Rule templates filled from map contents (issue 12): the seed's cases (000 §6.6, §6.7) with
hand-derived expectations, the printed script proved equal to the seed's cross product, and
the kernel as the oracle: witness and random packets run through the program
(BPF_PROG_TEST_RUN) with the same map entries get the verdict the printed filters give
(read by the independent tc oracle)."""

from __future__ import annotations

import json
import random
import socket
import struct
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest
import z3

import corpus
from analyzer import kernel
from analyzer.explore import Options, explore
from analyzer.symbolic import PACKET, PACKET_LEN
from analyzer.xdp import VERDICTS
from lifter.program import load_object
from offload import cli, mapfill
from offload.mapsource import parse_spec
from rules import ruleset, tc
from rules.filled import finish_filled
from rules.lpmagg import aggregate, proven_equal
from rules.mapcontents import MapContents, MapEntries
from rules.proof import hits, prove_script
from rules.script import parse_script
from rules.templates import ContentSynth, fill, fill_entry, find_templates
from tests.conftest import CLANG, need_object, require, require_kernel, require_tool
from tests.oracles import tcflower
from tests.test_kernel_runner import kernel_ready

ROOT_PY = f"cd {Path(__file__).resolve().parent.parent} && {sys.executable}"

#: Test programs of this module's own (tests/data/templates/*.c), built on first use.
OWN = Path(__file__).parent / "data" / "templates"


def _clang(stem):
    if (OWN / f"{stem}.c").is_file():
        return _own(stem)
    if stem.startswith("xdpfilt_"):  # Debian's xdp-filter (make external)
        found = [p for p in corpus.external_objects() if p.stem == stem]
        require(bool(found), "external objects are missing (run `make external`)")
        return found[0]
    return need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o")


@cache
def _own(stem: str) -> Path:
    """tests/data/templates/STEM.c built as the corpus builds (clang -O2 -g -target bpf)."""
    clang = require_tool(CLANG)
    out = Path(tempfile.mkdtemp(prefix="xdp2tc-tpl-")) / f"{stem}.o"
    inc = ["-I/usr/include/x86_64-linux-gnu", f"-I{corpus.BUILD_DIR.parent / 'include'}"]
    subprocess.run(
        [clang, "-O2", "-g", "-target", "bpf", *inc, "-c", str(OWN / f"{stem}.c"), "-o", str(out)], check=True
    )
    return out


def ip(a: str) -> bytes:
    return socket.inet_aton(a)


@cache
def _built(stem: str, assume: tuple[str, ...] = ()):
    path = _clang(stem)
    obj = load_object(path)
    e = explore(obj, obj.programs[0], Options())
    rs = ruleset.build(e, assume)
    templates, unfit = find_templates(rs.synth, 1, 1)
    return path, e, rs, templates, unfit


def _contents(e, entries: dict[str, list[tuple[bytes, bytes]]]) -> MapContents:
    maps = {m.name: m for m in e.obj.maps}
    return MapContents(
        {
            n: MapEntries(n, maps[n].type.id, maps[n].key_size, maps[n].value_size, {k: (v,) for k, v in kv})
            for n, kv in entries.items()
        }
    )


def _script(stem, assume, entries, aggregate=True, max_rules=512):
    path, e, rs, templates, _ = _built(stem, assume)
    contents = _contents(e, entries)
    static = rs.finish("eth0", "skip_sw")
    got = finish_filled(static, rs.synth, fill(templates, contents, aggregate), contents, "eth0", "skip_sw", max_rules)
    return path, e, rs, contents, "\n".join(static + got.lines), got


DDOS = {
    "blacklist": [(ip("192.168.1.40"), b"\1\0\0\0")],
    "port_blacklist": [(struct.pack("<H", 50), b"\1\0\0\0")],
}
NESTED = {
    "blacklist_src": [(ip(f"192.168.1.{i}"), b"\1") for i in (1, 2, 3)],
    "blacklist_dst": [(ip(f"192.168.1.{i}"), b"\1") for i in (4, 5, 6)],
}
#: 000 §6.7, table 6.2: the nine rules the seed emitted for the two 3-entry maps.
SEED_CROSS = "\n".join(
    f"filter add dev eth0 ingress protocol ip prio 1 flower skip_sw src_ip 192.168.1.{s} dst_ip 192.168.1.{d} "
    "action drop"
    for s in (1, 2, 3)
    for d in (4, 5, 6)
)


def _dump(entries):
    hexes = lambda b: [f"0x{x:02x}" for x in b]  # noqa: E731
    return {n: [{"key": hexes(k), "value": hexes(v)} for k, v in kv] for n, kv in entries.items()}


def _filters(text: str) -> list[str]:
    """The filter lines after `flower skip_sw` (keys and action), in print order."""
    return [line.split(" skip_sw ", 1)[1] for line in text.splitlines() if line.startswith("filter ")]


def test_seed_6_6_ddos_blacklist_cli(tmp_path, capsys):
    """§6.6: adding 192.168.1.40 gives `src_ip 192.168.1.40 drop`; adding port 50 gives the
    tcp and udp `dst_port 50` drops (the seed's three rules, read from a bpftool-format dump)."""
    path = _clang("thesis_ddos_blacklist")
    f = tmp_path / "maps.json"
    f.write_text(json.dumps(_dump(DDOS)))
    rc = cli.main(["rules", str(path), "--dev", "eth0", "--assume", "no-ip-options", "--maps-from", f"json:{f}"])
    out = capsys.readouterr().out
    assert rc == 0
    assert _filters(out) == [
        "src_ip 192.168.1.40 action drop",
        "ip_proto tcp dst_port 50 action drop",
        "ip_proto udp dst_port 50 action drop",
    ]
    assert "proven on this printed script with these map contents" in out


def test_seed_6_6_named_dump_and_json(tmp_path):
    """json:NAME=FILE takes one map's bare dump; the JSON part lists each filter's source entry."""
    path, e, rs, templates, _ = _built("thesis_ddos_blacklist", ("no-ip-options",))
    f = tmp_path / "ports.json"
    f.write_text(json.dumps(_dump(DDOS)["port_blacklist"]))
    contents = mapfill.contents_from([parse_spec(f"json:port_blacklist={f}")], e.obj)
    assert contents.get("port_blacklist").entries == {b"\x32\0": (b"\1\0\0\0",)}
    doc = mapfill.json_part(mapfill.fill_rules(rs, contents, "eth0", "skip_sw", 512))
    assert [x["sources"] for x in doc["filters"]] == [[{"map": "port_blacklist", "key": "3200"}]] * 2
    assert doc["proven"] is True


@pytest.mark.parametrize(
    "content, message",
    [
        ("[]", "a bare dump does not name its map"),
        ('{"nosuch": []}', "no map 'nosuch' in the object"),
        ('{"blacklist": [{"key": ["0x01"], "value": ["0x00","0x00","0x00","0x00"]}]}', "key of 1 bytes"),
        ('{"blacklist": [{"key": ["zz","0","0","0"], "value": []}]}', "list of hex bytes"),
        ("{", "not JSON"),
    ],
)
def test_maps_from_bad_input(tmp_path, capsys, content, message):
    path = _clang("thesis_ddos_blacklist")
    f = tmp_path / "m.json"
    f.write_text(content)
    assert cli.main(["rules", str(path), "--dev", "eth0", "--maps-from", f"json:{f}"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_port_zero_stays_in_software():
    """A non-first fragment has no ports for flower (dst_port reads 0) while the program reads
    payload bytes: an entry for port 0 cannot be offloaded, and says why."""
    _, e, rs, templates, _ = _built("thesis_ddos_blacklist", ("no-ip-options",))
    port = next(t for t in templates if t.maps == ("port_blacklist",))
    got, why = fill_entry(port, 0, b"\0\0", (b"\1\0\0\0",))
    assert got == [] and why.code == "atypical-packets"
    got, why = fill_entry(port, 0, struct.pack("<H", 50), (b"\1\0\0\0",))
    assert why is None and len(got) == 2 and {f.sources for f in got} == {(("port_blacklist", b"\x32\0"),)}


def test_seed_6_7_nested_chained_equals_cross_product():
    """§6.7: two nested 3-entry maps take 3 + 3 chained filters, not 9, and drop exactly the
    packets the seed's 9-rule cross product drops (z3, over both scripts as parsed)."""
    _, e, rs, contents, text, got = _script("thesis_nested_maps", (), NESTED, aggregate=False)
    lines = _filters(text)
    assert len(lines) == 6
    assert lines[:3] == [f"src_ip 192.168.1.{i} action goto chain 1" for i in (1, 2, 3)]
    assert lines[3:] == [f"dst_ip 192.168.1.{i} action drop" for i in (4, 5, 6)]
    assert got.proved is True
    d = rs.synth.d
    for candidate in (text, _script("thesis_nested_maps", (), NESTED)[4]):  # also aggregated (2 + 2)
        ours = parse_script(candidate)
        seed = parse_script(SEED_CROSS)
        drop_ours = z3.Or([h for f, h in zip(ours, hits(ours, d)) if f.action == ("drop",)])
        drop_seed = z3.Or([h for f, h in zip(seed, hits(seed, d)) if f.action == ("drop",)])
        s = z3.Solver()
        s.add(drop_ours != drop_seed)
        assert s.check() == z3.unsat
    assert len(_filters(_script("thesis_nested_maps", (), NESTED)[4])) == 4


def test_wrong_filled_filter_is_refused():
    """The content proof can fail: a drop on a port the map does not hold is unsound."""
    _, e, rs, contents, text, _ = _script("thesis_ddos_blacklist", ("no-ip-options",), DDOS)
    wrong = text.replace("dst_port 50", "dst_port 51")
    proof = prove_script(parse_script(wrong), ContentSynth(rs.synth, contents))
    assert proof.sound.count(False) == 2 and proof.sound.count(True) == 1


def test_aggregation_fewest_prefixes():
    """An address set is a band of /32s with one label (rules/lpmagg.py). Hand-derived: .0-.3
    is one /30, .5 stays /32, .6-.7 a /31; a wrong cover is caught."""
    base = 0x0A000000
    rules = {(base + i, 32): "drop" for i in (0, 1, 2, 3, 5, 6, 7)}
    got = aggregate(rules, 32)
    assert sorted(got) == [(base, 30, "drop"), (base + 5, 32, "drop"), (base + 6, 31, "drop")]
    assert proven_equal(rules, got, 32)
    assert not proven_equal(rules, [(base, 29, "drop")], 32)


def test_address_set_fill_aggregates_with_lpmagg():
    """fill() aggregates a hash level keyed by one address: 10.0.0.0-10.0.0.3 and 192.168.1.40
    give a /30 and a /32 whose sources are the entries they stand for, proven equal."""
    entries = {"blacklist": [(ip(f"10.0.0.{i}"), b"\1\0\0\0") for i in range(4)] + DDOS["blacklist"]}
    _, e, rs, templates, _ = _built("thesis_ddos_blacklist", ("no-ip-options",))
    got = fill(templates, _contents(e, entries))
    assert got.aggregated["blacklist"] == (5, 2, True)
    by = {str(f.match.get("src_ip").mask.bit_count()): sorted(k for _, k in f.sources) for f in got.filters}
    assert by == {"30": [ip(f"10.0.0.{i}") for i in range(4)], "32": [ip("192.168.1.40")]}


def test_rule_budget():
    """Budget 2: the largest prefix goes first, the rest is software with reason rule-budget."""
    more = [(ip("10.0.0.0"), b"\1\0\0\0"), (ip("10.0.0.1"), b"\1\0\0\0")]
    entries = {**DDOS, "blacklist": DDOS["blacklist"] + more}
    _, e, rs, contents, text, got = _script("thesis_ddos_blacklist", ("no-ip-options",), entries, max_rules=2)
    assert _filters(text) == ["src_ip 192.168.1.40 action drop", "src_ip 10.0.0.0/31 action drop"]
    assert [(src, why.code) for src, why in got.software] == [(("port_blacklist", b"\x32\0"), "rule-budget")]
    assert got.proved is True


def test_lpm_and_flag_templates():
    """LPM entries become prefixes; xdp-filter-style flag bits choose the protocols."""
    _, e, rs, contents, text, got = _script(
        "lpm_src_block", (), {"blocked_prefixes": [(struct.pack("<I", 24) + ip("10.1.2.0"), b"\1")]}
    )
    assert _filters(text) == ["src_ip 10.1.2.0/24 action drop"] and got.proved
    tcp_dst = struct.pack("<H", 8080), struct.pack("<I", 0x2 | 0x4)  # PF_DST | PF_TCP
    udp_src = struct.pack("<H", 53), struct.pack("<I", 0x1 | 0x8)  # PF_SRC | PF_UDP
    _, e, rs, contents, text, got = _script("port_flags_map", ("no-ip-options",), {"filter_ports": [tcp_dst, udp_src]})
    assert _filters(text) == ["ip_proto tcp dst_port 8080 action drop", "ip_proto udp src_port 53 action drop"]
    assert got.proved


ALLOW_BLOCK = {
    "allowlist": [(ip("10.1.1.1"), b"\1")],
    "blocklist": [(struct.pack("<I", 8) + ip("10.0.0.0"), b"\1"), (struct.pack("<I", 32) + ip("192.168.9.9"), b"\1")],
}


def test_allow_list_before_block_list():
    """The block list's proof needs the allow list's pass filters before it: they are printed
    first, the printed script proves; without them (deleted, or the allow list's contents not
    given) the /8 drop is unsound or not emitted at all."""
    _, e, rs, contents, text, got = _script("allow_block", (), ALLOW_BLOCK)
    assert _filters(text) == [
        "src_ip 10.1.1.1 action pass",
        "src_ip 10.0.0.0/8 action drop",
        "src_ip 192.168.9.9 action drop",
    ]
    assert got.proved is True
    without = "\n".join(x for x in text.splitlines() if "action pass" not in x)
    proof = prove_script(parse_script(without), ContentSynth(rs.synth, contents))
    assert proof.sound == [False, True]  # 10.1.1.1 is inside 10.0.0.0/8 and allowed
    _, _, _, _, text, got = _script("allow_block", (), {"blocklist": ALLOW_BLOCK["blocklist"]})
    assert _filters(text) == []
    assert {why.code for _, why in got.software} == {"map-dependent"}


# --- the kernel as the oracle ----------------------------------------------------------------

CONFIG = {"config": [(bytes(4), struct.pack("<HBB", 8080, 1, 0))]}  # blocked_port 8080, enabled


def _globals_initial():
    """globals.o's .rodata/.data/.bss as the object initialises them (blocked_port 53, on)."""
    obj = load_object(_clang("globals"))
    return {n: [(k, v[0]) for k, v in me.entries.items()] for n, me in mapfill.initial_globals(obj).items()}


KERNEL_CASES = [
    ("thesis_ddos_blacklist", ("no-ip-options",), DDOS),
    ("thesis_nested_maps", (), NESTED),
    ("allow_block", (), ALLOW_BLOCK),
    ("lpm_src_block", (), {"blocked_prefixes": [(struct.pack("<I", 24) + ip("10.1.2.0"), b"\1")]}),
    (
        "port_flags_map",
        ("no-ip-options",),
        {
            "filter_ports": [
                (struct.pack("<H", 8080), struct.pack("<I", 6)),
                (struct.pack("<H", 53), struct.pack("<I", 9)),
            ]
        },
    ),
]


#: xdp-filter's flag bits (xdp-filter/common_kern_user.h): value & wanted == wanted hits.
FLAG_SRC, FLAG_DST, FLAG_TCP, FLAG_UDP = 1, 2, 4, 8
MAC_DST = bytes.fromhex("020000000002")  # the destination of _random_frame's frames
XDPFILT_ETH = {
    "filter_ethernet": [
        (MAC_DST, struct.pack("<Q", FLAG_DST | 5 << 6)),  # hit count (bits 6..) left by the program
        (bytes.fromhex("0a0000000007"), struct.pack("<Q", FLAG_SRC)),
        (bytes.fromhex("0a0000000008"), struct.pack("<Q", 0)),  # no flag: no decision
    ]
}

LPM_ACTION = {
    "src_action": [
        (struct.pack("<I", 8) + ip("10.0.0.0"), struct.pack("<I", 1)),
        (struct.pack("<I", 24) + ip("10.1.1.0"), struct.pack("<I", 0)),
        (struct.pack("<I", 32) + ip("10.1.1.7"), struct.pack("<I", 1)),
    ]
}

KERNEL_CASES += [
    ("xdpfilt_alw_eth", (), XDPFILT_ETH),
    ("lpm_action", (), LPM_ACTION),
    ("config_array", ("no-ip-options",), CONFIG),
    ("globals", ("no-ip-options",), "initial"),
]


def _witness(f_hit, env) -> bytes | None:
    s = z3.Solver()
    s.set("timeout", 10000)
    s.add(*env, f_hit, z3.ULE(PACKET_LEN, 128))
    if s.check() != z3.sat:
        return None
    m = s.model()
    n = m.eval(PACKET_LEN, model_completion=True).as_long()
    return bytes(m.eval(PACKET[z3.BitVecVal(i, 64)], model_completion=True).as_long() for i in range(n))


def _random_frame(rng: random.Random, addrs: list[bytes], ports: list[int]) -> bytes:
    proto = rng.choice((6, 17, 1))
    sport, dport = rng.choice(ports), rng.choice(ports)
    l4 = (
        struct.pack("!HHHH", sport, dport, 8, 0)
        if proto == 17
        else struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 0x50, 2, 1, 0, 0)
    )
    if proto == 1:
        l4 = bytes([8, 0, 0, 0, 0, 1, 0, 1])
    ip_hdr = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0, 64, proto, 0, rng.choice(addrs), rng.choice(addrs)
    )
    return (bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip_hdr + l4).ljust(60, b"\0")


@pytest.mark.parametrize("stem, assume, entries", KERNEL_CASES, ids=[c[0] for c in KERNEL_CASES])
def test_kernel_agrees_with_filled_filters(stem, assume, entries):
    """With the same map entries loaded, each filled drop filter's witness packet and every
    random packet the printed script drops (per the independent tc oracle) get XDP_DROP;
    iproute2's tc parses every printed line. ("initial": the object's own global data,
    which the kernel loads as it is.)"""
    if entries == "initial":
        entries = _globals_initial()
    path, e, rs, contents, text, got = _script(stem, assume, entries)
    assert got.proved and got.filters
    parsed = parse_script(text)
    cs = ContentSynth(rs.synth, contents)
    oracle = tcflower.parse(text)
    packets = []
    for f, h in zip(parsed, hits(parsed, rs.synth.d)):
        if f.action == ("drop",):
            w = _witness(h, cs.env)
            assert w is not None, f"no packet reaches filter at line {f.lineno}"
            assert tcflower.run(oracle, w) == ("drop",)
            packets.append(w)
    rng = random.Random(12)
    addrs = [k[-4:] for kv in entries.values() for k, _ in kv] + [ip("10.1.2.77"), ip("172.16.0.1"), ip("10.9.9.9")]
    ports = [50, 53, 8080, 22, 443]
    randoms = [_random_frame(rng, addrs, ports) for _ in range(400)]
    dropped = [p for p in randoms if tcflower.run(oracle, p) == ("drop",)]
    assert dropped, "the random packets should hit some filled filter"
    kernel_ready()
    bad = [r for r in tc.check_syntax([x for x in text.splitlines() if x.startswith("filter ")]) if not r.accepted]
    assert not bad, "\n".join(f"{r.line}: {r.message}" for r in bad[:3])  # iproute2 reads every filled line
    with kernel.load(path, programs=[e.program.name]) as loaded:
        write_entries(loaded, e.obj, entries)
        for p in packets + dropped:
            assert VERDICTS.get(loaded.run(e.program.name, p).retval) == "DROP", p.hex()


def write_entries(loaded, obj, entries: dict[str, list[tuple[bytes, bytes]]]) -> None:
    """The entries written into the loaded object's maps (a per-CPU map: the same value on
    every CPU); global data equal to the object's own is left as loaded (.rodata is frozen)."""
    initial = mapfill.initial_globals(obj)
    for name, kv in entries.items():
        for k, v in kv:
            if name in initial and initial[name].value(k) == (v,):
                continue
            info = loaded.map(name)
            if info.percpu:
                v = v.ljust(-(-len(v) // 8) * 8, b"\0") * (info.value_bytes // (-(-len(v) // 8) * 8))
            loaded.map_update(name, k, v)


def test_config_array_value_is_the_match():
    """config_array: the blocked port lives in the value of slot 0 (`dst_port VALUE`), the
    enable switch beside it. Proven once for every value: 8080 gives the drop; switched off
    nothing; port 0 is the value z3 set aside (a non-first fragment shows flower no ports)."""
    _, e, rs, contents, text, got = _script("config_array", ("no-ip-options",), CONFIG)
    assert _filters(text) == ["ip_proto tcp dst_port 8080 action drop"] and got.proved
    (t,) = [t for t in _built("config_array", ("no-ip-options",))[3] if not t.outcome.is_pass]
    assert [lv.vkeys for lv in t.levels] == [(("dst_port", (1, 0)),)] and all(t.proved.values())
    off = {"config": [(bytes(4), struct.pack("<HBB", 8080, 0, 0))]}
    assert _filters(_script("config_array", ("no-ip-options",), off)[4]) == []
    zero = {"config": [(bytes(4), struct.pack("<HBB", 0, 1, 0))]}
    _, _, _, _, text, got = _script("config_array", ("no-ip-options",), zero)
    assert _filters(text) == [] and [why.code for _, why in got.software] == ["atypical-packets"]


def test_globals_rodata_port_gated_by_data_switch(tmp_path, capsys):
    """globals: `.rodata`'s blocked_port gives the match, `.data`'s drop_enabled gates it, the
    `.bss` counter plays no part. Without a source for them the object's initialised data
    is used (53, on); a `.data` of 0 switches the filter off."""
    initial = _globals_initial()
    _, e, rs, contents, text, got = _script("globals", ("no-ip-options",), initial)
    assert _filters(text) == ["ip_proto udp dst_port 53 action drop"] and got.proved
    (t,) = _built("globals", ("no-ip-options",))[3]
    assert [g.map for g in t.gates] == [".data"] and t.maps == (".rodata",)
    off = {**initial, ".data": [(bytes(4), bytes(4))]}
    _, _, _, _, text, got = _script("globals", ("no-ip-options",), off)
    assert _filters(text) == [] and got.software == []
    f = tmp_path / "none.json"
    f.write_text("{}")
    path = _clang("globals")
    args = ["rules", str(path), "--dev", "eth0", "--assume", "no-ip-options", "--maps-from", f"json:{f}"]
    assert cli.main(args) == 0
    assert _filters(capsys.readouterr().out) == ["ip_proto udp dst_port 53 action drop"]


def test_lpm_value_decides_by_longest_match():
    """lpm_action: the longest match's value decides. 10.0.0.0/8 drops, 10.1.1.0/24 inside it
    holds 0 (pass), 10.1.1.7 inside that drops again: the /24 becomes a pass filter at a
    lower prio than the /8 (longer prefixes first), and the printed script proves; without
    the pass filter the /8 drop is refused by the content proof. Over budget, pass filters
    are kept first (a cut /32 drop only leaves its packets to the program)."""
    _, e, rs, contents, text, got = _script("lpm_action", (), LPM_ACTION)
    lines = [x.split(" prio ", 1)[1] for x in text.splitlines() if x.startswith("filter ")]
    assert sorted(lines, key=lambda x: int(x.split()[0])) == [
        "1 flower skip_sw src_ip 10.1.1.7 action drop",
        "9 flower skip_sw src_ip 10.1.1.0/24 action pass",
        "25 flower skip_sw src_ip 10.0.0.0/8 action drop",
    ]
    assert got.proved is True
    without = "\n".join(x for x in text.splitlines() if "action pass" not in x)
    proof = prove_script(parse_script(without), ContentSynth(rs.synth, contents))
    assert proof.sound.count(False) == 1
    t = next(t for t in _built("lpm_action", ())[3] if not t.outcome.is_pass)
    assert t.longest and t.needs == [t.index]
    _, _, _, _, text, got = _script("lpm_action", (), LPM_ACTION, max_rules=2)  # pass filters go first
    assert _filters(text) == ["src_ip 10.1.1.0/24 action pass", "src_ip 10.0.0.0/8 action drop"] and got.proved
    assert [(k[-4:], why.code) for (_, k), why in got.software] == [(ip("10.1.1.7"), "rule-budget")]


def test_xdp_filter_ethernet_allow_mode():
    """xdpfilt_alw_eth (hits drop): the destination MAC entry flagged DST and the source MAC
    entry flagged SRC each give one drop, the unflagged entry none; the counter bits the
    program adds to a value (COUNTER_SHIFT 6) do not change the decision; proven."""
    _, e, rs, contents, text, got = _script("xdpfilt_alw_eth", (), XDPFILT_ETH)
    assert _filters(text) == ["dst_mac 02:00:00:00:00:02 action drop", "src_mac 0a:00:00:00:00:07 action drop"]
    assert got.proved is True and got.software == []


def test_xdp_filter_deny_mode_complement():
    """xdpfilt_dny_eth (a flagged MAC passes, everything else drops): each flagged entry's
    pass filter, then one catch-all drop per family (ip, ipv6, arp), proven for every map
    content and on the printed script. The kernel agrees (same entries): frames the tc
    oracle drops get XDP_DROP, frames a MAC pass filter takes get XDP_PASS."""
    path, e, rs, contents, text, got = _script("xdpfilt_dny_eth", (), XDPFILT_ETH)
    assert got.proved is True
    lines = _lines(text)
    macs = [k for _, k in lines if "_mac" in k]
    assert macs == ["dst_mac 02:00:00:00:00:02 action pass", "src_mac 0a:00:00:00:00:07 action pass"]
    catch = [i for i, x in enumerate(lines) if x[1] == "action drop"]
    assert sorted(lines[i][0] for i in catch) == ["arp", "ip", "ipv6"]
    assert min(catch) > max(i for i, x in enumerate(lines) if "_mac" in x[1])
    oracle = tcflower.parse(text)
    rng = random.Random(3)
    base = [_random_frame(rng, [ip("10.0.0.1")], [80]) for _ in range(4)]
    frames = list(base)  # to the DST-flagged MAC: pass
    frames += [bytes.fromhex("ffffffffffff0a0000000007") + f[12:] for f in base]  # SRC-flagged: pass
    frames += [bytes.fromhex("ffffffffffff0a0000000008") + f[12:] for f in base]  # unflagged: drop
    frames += [bytes.fromhex("020000000003020000000001") + f[12:] for f in base]  # unlisted: drop
    said = [tcflower.run(oracle, f) for f in frames]
    assert said == [("pass",)] * 8 + [("drop",)] * 8
    kernel_ready()
    with kernel.load(path, programs=[e.program.name]) as loaded:
        write_entries(loaded, e.obj, XDPFILT_ETH)
        for f, verdict in zip(frames, said):
            want = "DROP" if verdict == ("drop",) else "PASS"
            assert VERDICTS.get(loaded.run(e.program.name, f).retval) == want, f.hex()


def _in_private_bpffs(script: str) -> str:
    """`script` (sh) run in a mount namespace of its own with a fresh bpffs on /sys/fs/bpf:
    what bpftool and libbpf pin there (xdp-filter pins its maps by name) goes with it."""
    require_kernel()
    require_tool("unshare")
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-ec", "mount -t bpf bpf /sys/fs/bpf\n" + script],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_xdp_filter_rules_from_maps_bpftool_loaded_and_wrote(tmp_path):
    """The real set-up: bpftool loads xdpfilt_alw_eth (libbpf pins its maps by name, as
    xdp-filter does), bpftool writes the entries; `rules --maps-from pinned:/sys/fs/bpf`,
    `prog:ID` and `json:` of bpftool's own dump each print the same filters, which the
    kernel (the same entries, BPF_PROG_TEST_RUN) agrees with through the tc oracle."""
    path = _clang("xdpfilt_alw_eth")
    rules = (
        f"{ROOT_PY} -c 'import sys; from offload import cli; sys.exit(cli.main(sys.argv[1:]))' rules {path} --dev eth0"
    )
    writes = "".join(
        f"bpftool map update pinned /sys/fs/bpf/filter_ethernet key hex {k.hex(' ')} value hex {v.hex(' ')}\n"
        for k, v in XDPFILT_ETH["filter_ethernet"]
    )
    out = _in_private_bpffs(
        f"bpftool prog load {path} /sys/fs/bpf/prog type xdp\n{writes}"
        f"bpftool -j map dump pinned /sys/fs/bpf/filter_ethernet > {tmp_path}/dump.json\n"
        "id=$(bpftool -j prog show pinned /sys/fs/bpf/prog | sed 's/^{\"id\":\\([0-9]*\\).*/\\1/')\n"
        f"echo '=== pinned'; {rules} --maps-from pinned:/sys/fs/bpf\n"
        f"echo '=== prog'; {rules} --maps-from prog:$id\n"
        f"echo '=== json'; {rules} --maps-from json:filter_ethernet={tmp_path}/dump.json\n"
    )
    parts = dict(p.split("\n", 1) for p in out.split("=== ")[1:])
    want = ["dst_mac 02:00:00:00:00:02 action drop", "src_mac 0a:00:00:00:00:07 action drop"]
    for kind in ("pinned", "prog", "json"):
        got = [x for x in _filters(parts[kind]) if "_mac" in x]
        assert got == want, (kind, parts[kind])
    text = parts["pinned"]
    oracle = tcflower.parse(text)
    rng = random.Random(5)
    frames = [_random_frame(rng, [ip("10.0.0.1")], [80]) for _ in range(5)]
    frames += [bytes.fromhex("ffffffffffff0a0000000007") + f[12:] for f in frames]  # from the SRC-flagged MAC
    frames += [bytes.fromhex("ffffffffffff0a0000000008") + f[12:] for f in frames[:5]]  # unflagged: not dropped
    _, e, *_ = _built("xdpfilt_alw_eth", ())
    with kernel.load(path, programs=[e.program.name]) as loaded:
        write_entries(loaded, e.obj, XDPFILT_ETH)
        for f in frames:
            want_drop = tcflower.run(oracle, f) == ("drop",)
            assert (VERDICTS.get(loaded.run(e.program.name, f).retval) == "DROP") == want_drop, f.hex()


def test_check_flower_refuses_maps_from(tmp_path, capsys):
    """The VM's program would run with empty maps: the combination is refused in one line."""
    path = _clang("thesis_ddos_blacklist")
    f = tmp_path / "m.json"
    f.write_text(json.dumps(_dump(DDOS)))
    assert cli.main(["rules", str(path), "--dev", "eth0", "--maps-from", f"json:{f}", "--check-flower"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


# --- deny mode: a complement after a pass filter per entry (tests/data/templates/deny_addrs.c) ---


def v6(n: int) -> bytes:
    return bytes.fromhex("fd00" + "00" * 13) + bytes([n])


#: deny_addrs/allow_addrs: the source flag (1) set on 10.0.0.2, fd00::1 and fd00::3 only.
ADDRS = {
    "filter_v4": [(ip(f"10.0.0.{i}"), struct.pack("<Q", f)) for i, f in ((1, 2), (2, 1), (3, 0))],
    "filter_v6": [(v6(i), struct.pack("<Q", f)) for i, f in ((1, 1), (2, 0), (3, 3))],
}


def _lines(text: str) -> list[tuple[str, str]]:
    """(protocol, keys and action) of each filter line, in print order."""
    return [
        (x.split(" protocol ", 1)[1].split()[0], x.split(" skip_sw ", 1)[1])
        for x in text.splitlines()
        if x.startswith("filter ")
    ]


def test_deny_mode_complement():
    """deny_addrs (a flagged source passes, every other IPv4/IPv6 packet drops): each flagged
    entry gets a pass filter, each unflagged one a drop, and each family one catch-all drop
    after them, proven for every map content (the proof assumes only the pass filters of
    the allow templates it names) and again on the printed script with these entries.
    Without the pass filters the content proof refuses both catch-alls."""
    _, e, rs, contents, text, got = _script("deny_addrs", (), ADDRS)
    assert _lines(text) == [
        ("ipv6", "src_ip fd00::1 action pass"),
        ("ipv6", "src_ip fd00::3 action pass"),
        ("ip", "src_ip 10.0.0.2 action pass"),
        ("ipv6", "src_ip fd00::2 action drop"),
        ("ip", "src_ip 10.0.0.1 action drop"),
        ("ip", "src_ip 10.0.0.3 action drop"),
        ("ipv6", "action drop"),
        ("ip", "action drop"),
    ]
    assert got.proved is True and got.software == []
    templates = _built("deny_addrs", ())[3]
    alls = [t for t in templates if t.complement is not None]
    assert [(t.protocol, t.proved) for t in alls] == [("ipv6", {(): True}), ("ip", {(): True})]
    for t in alls:
        allow = {i for i in t.needs if i != t.index}
        assert {templates[i].maps for i in allow} == {("filter_v6",) if t.protocol == "ipv6" else ("filter_v4",)}
        assert all(templates[i].outcome.is_pass for i in allow)
    without = "\n".join(x for x in text.splitlines() if "action pass" not in x)
    proof = prove_script(parse_script(without), ContentSynth(rs.synth, contents))
    assert proof.sound.count(False) == 2
    # filter_v6's contents not given: no IPv6 catch-all (unknown is not empty); IPv4's stays
    _, _, _, _, text, got = _script("deny_addrs", (), {"filter_v4": ADDRS["filter_v4"]})
    assert ("ipv6", "action drop") not in _lines(text) and ("ip", "action drop") in _lines(text) and got.proved


def test_ipv6_source_address_layout():
    """The IPv6 source address key is src_ip6 (shown `src_ip` on a protocol ipv6 line): its
    first 8 bytes are also the IPv4 keys' view of the address union, which must not win."""
    templates = _built("allow_addrs", ())[3]
    drops = [t for t in templates if not t.outcome.is_pass]
    assert sorted((t.protocol, t.levels[0].keys, t.proved) for t in drops) == [
        ("ip", ("src_ip",), {(None,): True}),
        ("ipv6", ("src_ip6",), {(None,): True}),
    ]


def _random_frame6(rng: random.Random, addrs: list[bytes], ports: list[int]) -> bytes:
    proto = rng.choice((6, 17))
    sport, dport = rng.choice(ports), rng.choice(ports)
    l4 = (
        struct.pack("!HHHH", sport, dport, 8, 0)
        if proto == 17
        else struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 0x50, 2, 1, 0, 0)
    )
    ip6 = struct.pack("!IHBB16s16s", 6 << 28, len(l4), proto, 64, rng.choice(addrs), rng.choice(addrs))
    return (bytes.fromhex("020000000002020000000001") + b"\x86\xdd" + ip6 + l4).ljust(60, b"\0")


@pytest.mark.parametrize("stem", ["deny_addrs", "allow_addrs"])
def test_kernel_agrees_ipv4_ipv6_addresses(stem):
    """The kernel as oracle for IPv4 and IPv6 entries: with the same entries loaded, every
    random frame (listed and unlisted sources, both families) the printed script drops
    (independent tc oracle) gets XDP_DROP, and in deny mode every frame a pass filter takes
    gets XDP_PASS (there each pass filter is exactly an entry the program lets through)."""
    path, e, rs, contents, text, got = _script(stem, (), ADDRS)
    assert got.proved
    oracle = tcflower.parse(text)
    rng = random.Random(7)
    v4 = [k for k, _ in ADDRS["filter_v4"]] + [ip("10.9.9.9")]
    six = [k for k, _ in ADDRS["filter_v6"]] + [v6(9)]
    frames = [_random_frame(rng, v4, [53, 80]) for _ in range(100)] + [
        _random_frame6(rng, six, [53]) for _ in range(100)
    ]
    said = [tcflower.run(oracle, f) for f in frames]
    assert said.count(("drop",)) > 20
    kernel_ready()
    bad = [r for r in tc.check_syntax([x for x in text.splitlines() if x.startswith("filter ")]) if not r.accepted]
    assert not bad, "\n".join(f"{r.line}: {r.message}" for r in bad[:3])
    with kernel.load(path, programs=[e.program.name]) as loaded:
        write_entries(loaded, e.obj, ADDRS)
        for f, verdict in zip(frames, said):
            got_v = VERDICTS.get(loaded.run(e.program.name, f).retval)
            if verdict == ("drop",):
                assert got_v == "DROP", f.hex()
            elif stem == "deny_addrs":
                assert got_v == "PASS", f.hex()


def _tcp6_behind(headers: list[int], dport: int) -> bytes:
    """An IPv6 TCP frame to `dport` behind the given extension headers (hdrlen 0: 8 bytes
    each, AH's (0 + 2) * 4 too)."""
    l4 = struct.pack("!HHIIBBHHH", 1234, dport, 1, 0, 0x50, 2, 1, 0, 0)
    chain = b""
    for nxt in [*headers[1:], 6][: len(headers)]:
        chain += bytes([nxt, 0]) + bytes(6)
    first = headers[0] if headers else 6
    ip6 = struct.pack("!IHBB16s16s", 6 << 28, len(chain) + len(l4), first, 64, bytes(15) + b"\1", bytes(15) + b"\2")
    return (bytes.fromhex("020000000002020000000001") + b"\x86\xdd" + ip6 + chain + l4).ljust(60, b"\0")


def test_ipv6_ports_behind_extension_headers_kernel():
    """What xdpfilt_alw_tcp does with a TCP port behind IPv6 extension headers (the kernel as
    oracle; templates._family_templates' reason): with port 8080 flagged DST|TCP the frame
    is dropped behind up to 5 destination-options headers (past the dissector model's
    MAX_EXT) and aborted from 6 on (a drop); behind AH, mobility or a fragment header it is
    dropped, where flower sees ip_proto 51 / 135 or no ports (no filter matches)."""
    kernel_ready()
    path = _clang("xdpfilt_alw_tcp")
    obj = load_object(path)
    entries = {"filter_ports": [(struct.pack("!H", 8080) + bytes(2), struct.pack("<Q", 2 | 4))]}
    with kernel.load(path, programs=[obj.programs[0].name]) as loaded:
        write_entries(loaded, obj, entries)

        def verdict(frame):
            return VERDICTS.get(loaded.run(obj.programs[0].name, frame).retval)

        got = {n: verdict(_tcp6_behind([60] * n, 8080)) for n in range(9)}
        assert got == {n: "DROP" if n <= 5 else "ABORTED" for n in range(9)}, str(got)
        assert verdict(_tcp6_behind([60] * 5, 8081)) == "PASS"
        assert [verdict(_tcp6_behind([h], 8080)) for h in (51, 135, 44)] == ["DROP"] * 3
