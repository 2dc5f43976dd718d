"""Rules (issue 4): what `xdp2tc rules` emits is accepted by the real tc parser, every
non-pass filter agrees with the kernel running the program, and the seed's chapter 6
examples come out as the thesis's rules (where those were sound) or better.

Oracles: iproute2's tc (syntax), BPF_PROG_TEST_RUN (semantics), hand-written thesis rules
(seed 000 6.5.1, typed in from the text) compared with z3 over the dissector model."""

from __future__ import annotations

import functools
import json
import random
import re
import struct

import pytest
import z3

import corpus
from analyzer import kernel
from analyzer.exploration import VERDICTS
from analyzer.explore import explore
from analyzer.symbolic import PACKET, PACKET_LEN
from lifter.program import load_object
from offload.cli import main
from offload.programs import entry_programs
from rules import ruleset, tc
from rules.dissector import dissect, evaluate, match_formula
from rules.flower import Exact, FlowerMatch, exact
from rules.synthesis import Synthesizer, assumption_constraints, typical_packet
from tests.conftest import need_object, require
from tests.test_kernel_runner import kernel_ready, tcp4, udp4

ASSUME = ("no-ip-options",)
#: Witness packets per non-pass filter, random packets per object.
WITNESSES, RANDOM = 3, 200


def _clang(stem: str):
    return corpus.BUILD_DIR / "clang" / f"{stem}.o"


#: Clang objects that get no non-pass filter, by name, and why (the corpus headers say so,
#: or the README's "Not yet" does). Every other object must get at least one.
NO_FILTER = {
    "atomics": "the drop depends on counters the program updates",
    "bounded_loop": "the drop depends on payload bytes flower cannot match",
    "config_array": "map-dependent: filters from map contents (templates) are not built yet",
    "devmap_section": "a devmap egress program: not attached to a device's ingress",
    "flag_counter": "map-dependent: templates are not built yet",
    **{
        f"or_flags_udp_k{k}": "issue 17's shape: a level on the source address's low byte needs a "
        "non-prefix mask (0.0.0.255), which tc's src_ip cannot take"
        for k in (2, 4, 16, 48)
    },
    "icmp_too_big": "XDP_TX of a reply built from the packet's own bytes: no flower action",
    "globals": "depends on .bss/.data globals the control plane writes: templates not yet",
    "ingress_ifindex": "decides on the ingress ifindex and RX queue (ctx), not on headers",
    "isa_gotol": "a hash of the ports, no flower match",
    "legacy_maps": "map-dependent: templates are not built yet",
    "allow_block": "map-dependent: without --maps-from; filled in tests/test_templates.py",
    "counted_blacklist": "map-dependent: without --maps-from; filled in tests/test_counters.py",
    "lpm_src_block": "map-dependent: without --maps-from; filled in tests/test_templates.py",
    "port_flags_map": "map-dependent: without --maps-from; filled in tests/test_templates.py",
    "random_drop": "a random verdict",
    "rate_limiter": "depends on time and state the program writes",
    "redirect_devmap": "redirects to a devmap slot the control plane fills: templates not yet",
    "syn_tracker": "depends on state the program writes",
    "tailcall_variable": "tail-calls into slots filled at run time",
    "thesis_ddos_blacklist": "map-dependent: without --maps-from; filled in tests/test_templates.py",
    "thesis_nested_maps": "map-dependent: without --maps-from; filled in tests/test_templates.py",
    "tx_mac_swap": "XDP_TX with a MAC swap: pedit writes constants (rules/rewrite.py)",
}
#: Corpus programs whose `Offload:` header promises filters that `rules` does not emit today:
#: expected failures, strict, so the tests fail (XPASS) the day that changes.
DEFECTS: dict[str, str] = {}
#: Assumptions beside ASSUME a corpus program's filters need, and why (issue 11).
ASSUME_FOR = {
    # an RFC 1624 checksum update equals tc's csum ip4h only on packets with a right checksum
    **{stem: ("valid-ip-checksum",) for stem in ("rewrite_tos", "fwd_ttl_dec", "tx_ttl_set")},
    "ipv6_filter": (
        "no-ipv6-ext",  # flower walks IPv6 extension headers, the program reads L4 right after 40 bytes
    ),
    "icmpv6_filter": ("no-ipv6-ext",),  # the same: ICMPv6 read right after the fixed header
}
#: Paths ending UNKNOWN (cut), by name; every other program has none.
CUT_PATHS = {"tailcall_variable": 1}  # tail-calls into a slot filled at run time
#: Device names for the ifindexes a program redirects to (redirect_ifindex.c: ifindex 4).
IFNAMES = {
    "redirect_ifindex": {4: "eth4"},
    "fwd_ttl_dec": {4: "eth4"},
    "vlan_pop_fwd": {5: "eth5"},
    "vlan_modify_tx": {5: "eth5"},
}


def _objects() -> list:
    """Every clang object the corpus Makefile plans, built or not (a missing one fails under
    CI), DEFECTS marked as strict expected failures."""
    return [
        pytest.param(
            p, id=p.name, marks=[pytest.mark.xfail(strict=True, reason=DEFECTS[p.stem])] if p.stem in DEFECTS else []
        )
        for p in corpus.expected_objects("clang")
    ]


def _assume(path) -> tuple[str, ...]:
    return ASSUME + ASSUME_FOR.get(path.stem, ())


@functools.cache
def _build(path, assume=None):
    """(exploration, rule set) of every XDP program but devmap egress ones, under the
    object's assumptions (`_assume`); cached: the tests below share one build per object."""
    assume = _assume(path) if assume is None else assume
    obj = load_object(path)
    out = []
    for prog in [p for p in obj.programs if p.is_xdp and not p.section.startswith("xdp/devmap")]:
        e = explore(obj, prog)
        out.append((e, ruleset.build(e, assume, IFNAMES.get(path.stem))))
    return out


def _no_filter_is_expected(path) -> None:
    """A program without a non-pass filter must be named in NO_FILTER (never a skip)."""
    assert path.stem in NO_FILTER, (
        f"{path.stem}: no non-pass filter, but the corpus says: {corpus.header(path.stem)['offload']}"
    )


@pytest.mark.parametrize("path", _objects())
def test_offloadable_programs_get_filters(path):
    """Every corpus program gets at least one proved non-pass filter, with no unproved one
    and no path cut, unless NO_FILTER names it; a NO_FILTER program gets none."""
    require(path.is_file(), f"{path} is not built")
    built = _build(path)
    drops = [r for _, rs in built for r in rs.rules if r.outcome and not r.outcome.is_pass]
    assert all(rs.unproved == 0 for _, rs in built)
    cut = [p.id for e, _ in built for p in e.paths if p.verdict == "UNKNOWN"]
    assert len(cut) == CUT_PATHS.get(path.stem, 0), f"cut paths {cut}"
    if path.stem in NO_FILTER:
        assert not drops, f"{path.stem} now gets {len(drops)} filters: take it out of NO_FILTER"
    else:
        assert drops, f"{path.stem}: no non-pass filter, but the corpus says: {corpus.header(path.stem)['offload']}"


# ---------------------------------------------------------------- layout helpers


def test_cover_is_exact():
    """Value covers: ranges for ports, CIDR blocks for addresses, singles otherwise."""
    assert ruleset.value_cover("dst_port", (22, 23, 24, 80)) == [ruleset.Range(22, 24), Exact(80, 0xFFFF)]
    assert ruleset.value_cover("dst_port", (22, 23), ranges=False) == [Exact(22, 0xFFFE)]  # 22-23: one aligned block
    assert ruleset.value_cover("dst_port", (23, 24), ranges=False) == [Exact(23, 0xFFFF), Exact(24, 0xFFFF)]
    ips = tuple(range(0x0A000000, 0x0A000000 + 6))  # 10.0.0.0 .. 10.0.0.5 = /30 + /31
    assert ruleset.value_cover("src_ip", ips) == [Exact(0x0A000000, 0xFFFFFFFC), Exact(0x0A000004, 0xFFFFFFFE)]
    assert ruleset.value_cover("ip_proto", (6, 7)) == [Exact(6, 0xFF), Exact(7, 0xFF)]
    # flag keys: the fewest masked values, exactly the set (frag and frag+firstfrag: `ip_flags frag`)
    assert ruleset.value_cover("ip_flags", (1, 3)) == [Exact(1, 1)]
    assert ruleset.value_cover("ip_flags", (1, 2)) == [Exact(1, 3), Exact(2, 3)]
    assert ruleset.value_cover("tcp_flags", (3, 7, 0x29)) == [Exact(3, 0xFFB), Exact(0x29, 0xFFF)]


# ---------------------------------------------------------------- the tc parser accepts them


@pytest.mark.parametrize("path", _objects())
def test_rules_parse(path, tmp_path):
    """Every emitted filter line goes through the real iproute2 parser (netns oracle)."""
    require(path.is_file(), f"{path} is not built")
    lines = []
    for _e, rs in _build(path):
        assert rs.unproved == 0
        for r in rs.rules:
            lines.append(tc.filter_line("eth0", r.match, r.action, r.prio, r.chain or None))
    if not lines:
        return _no_filter_is_expected(path)
    kernel_ready()
    bad = [r for r in tc.check_syntax(lines) if not r.accepted]
    assert not bad, "\n".join(f"{r.line}: {r.message}" for r in bad[:5])


# ---------------------------------------------------------------- the kernel agrees


def _packet(model: z3.ModelRef) -> bytes:
    n = model.eval(PACKET_LEN, model_completion=True).as_long()
    return bytes(model.eval(PACKET[z3.BitVecVal(i, 64)], model_completion=True).as_long() for i in range(n))


def _random_packet(rng: random.Random) -> bytes:
    """Plain Ethernet/IPv4 TCP/UDP/ICMP packets around the corpus's constants."""
    proto = rng.choice((6, 17, 1, 6, 17))
    src = rng.choice((0xC0A80115, 0x0A010007, rng.getrandbits(32)))
    dst = rng.choice((0xC0A80615, 0xC0A80009, rng.getrandbits(32)))
    l4 = struct.pack(
        "!HH",
        rng.choice((22, 53, 80, 1024, 20000, rng.getrandbits(16))),
        rng.choice((22, 53, 80, 1024, 5001, rng.getrandbits(16))),
    )
    l4 += bytes(rng.getrandbits(8) for _ in range(16))
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        rng.getrandbits(8),
        20 + len(l4),
        0,
        rng.choice((0, 0x4000, 0x2000, 0x0010)),
        rng.choice((1, 64)),
        proto,
        0,
        src.to_bytes(4, "big"),
        dst.to_bytes(4, "big"),
    )
    eth = bytes.fromhex("020000000002020000000001") + rng.choice((b"\x08\x00", b"\x86\xdd", b"\x08\x06"))
    return (eth + ip + l4).ljust(60, b"\0")


def _first_match(rules, packet: bytes):
    """The filter tc would act on (chains and gotos), by the model's evaluator."""
    chain = 0
    while True:
        hit = next((r for r in rules if r.chain == chain and evaluate(r.match, packet)), None)
        if hit is None or hit.role != "goto":
            return hit
        chain = int(hit.action[2])


@pytest.mark.parametrize("path", _objects())
def test_rules_agree_with_kernel(path):
    """Witness packets of every non-pass filter (z3: reaches it, matches it, within the
    assumptions) and random packets: whenever a non-pass filter takes a packet, the kernel
    running the program returns that verdict."""
    require(path.is_file(), f"{path} is not built")
    if corpus.expected_load_failures(path.stem).get("clang"):
        pytest.skip("known verifier rejection")
    built = [(e, rs) for e, rs in _build(path) if any(r.outcome and not r.outcome.is_pass for r in rs.rules)]
    if not built:
        return _no_filter_is_expected(path)
    kernel_ready()
    rng = random.Random(path.name)
    assumed = z3.And(assumption_constraints(_assume(path) + ("min-frame",)))
    checked = 0
    for e, rs in built:
        checker = ruleset.Checker(Synthesizer(e, _assume(path), IFNAMES.get(path.stem, {})))
        hits = checker.reaching(rs.rules)
        packets = []
        for r, hit in zip(rs.rules, hits):
            if r.outcome is None or r.outcome.is_pass:
                continue
            s = z3.Solver()
            s.add(hit, assumed, z3.ULE(PACKET_LEN, 1514))
            for _ in range(WITNESSES):
                if s.check() != z3.sat:
                    break
                p = _packet(s.model())
                packets.append(p)
                s.add(z3.Or([PACKET[z3.BitVecVal(i, 64)] != b for i, b in enumerate(p[:60])]))
        packets += [_random_packet(rng) for _ in range(RANDOM)]
        with kernel.load(path, programs=[e.program.name]) as loaded:
            for p in packets:
                if not z3.is_true(
                    z3.simplify(
                        z3.substitute(
                            assumed,
                            (PACKET_LEN, z3.BitVecVal(len(p), 64)),
                            *[(PACKET[z3.BitVecVal(i, 64)], z3.BitVecVal(b, 8)) for i, b in enumerate(p[:40])],
                        )
                    )
                ):
                    continue  # outside what the rules were proved for (e.g. IP options)
                r = _first_match(rs.rules, p)
                if r is None or r.outcome is None or r.outcome.is_pass:
                    continue
                verdict = VERDICTS.get(loaded.run(e.program.name, p).retval, "INVALID")
                assert verdict in r.outcome.verdicts, (p.hex(), r.match, verdict)
                checked += 1
    assert checked > 0


# ---------------------------------------------------------------- seed chapter 6


def _thesis_651() -> list[tuple[FlowerMatch, str]]:
    """Seed 000 6.5.1, the thesis's rule list as printed (prio order)."""
    X, Y = 0xC0A80115, 0xC0A80615
    return [
        (
            FlowerMatch(
                "ip",
                (
                    ("ip_proto", exact("ip_proto", 6)),
                    ("src_ip", exact("src_ip", X)),
                    ("dst_port", exact("dst_port", 22)),
                ),
            ),
            "pass",
        ),
        (FlowerMatch("ip", (("ip_proto", exact("ip_proto", 6)), ("src_ip", exact("src_ip", X)))), "drop"),
        (FlowerMatch("ip", (("src_ip", exact("src_ip", X)),)), "drop"),
        (FlowerMatch("ip", (("dst_ip", exact("dst_ip", Y)),)), "drop"),
    ]


def _drops(rules: list[tuple[FlowerMatch, str]], d) -> z3.BoolRef:
    out, earlier = [], []
    for m, action in rules:
        f = match_formula(m, d)
        if action == "drop":
            out.append(z3.And(f, *[z3.Not(x) for x in earlier]))
        earlier.append(f)
    return z3.Or(out) if out else z3.BoolVal(False)


def test_seed_651_equivalent_to_thesis():
    """6.5.1 under --assume no-ip-options: the packets our rules drop are exactly the
    thesis's on ordinary packets (not fragments); on fragments the thesis's list drops
    packets the program passes (z3 finds one) and ours does not."""
    path = need_object(_clang("thesis_static_rules"))
    ((e, rs),) = _build(path)
    assert rs.proved >= 2 and rs.unproved == 0
    d = dissect()
    ours = _drops([(r.match, r.action[0]) for r in rs.rules if r.chain == 0], d)
    theirs = _drops(_thesis_651(), d)
    env = z3.And(*assumption_constraints(ASSUME + ("min-frame",)), z3.ULE(PACKET_LEN, 1514))
    s = z3.Solver()
    s.add(env, typical_packet(), ours != theirs)
    assert s.check() == z3.unsat, "rule sets differ on an ordinary packet"
    program_passes = z3.Or([e.condition(p) for p in e.paths if p.verdict == "PASS"])
    s = z3.Solver()
    s.add(env, theirs, program_passes)
    assert s.check() == z3.sat, "expected the thesis's list to drop a packet the program passes"
    s = z3.Solver()
    s.add(env, ours, program_passes)
    assert s.check() == z3.unsat


@pytest.mark.parametrize("stem", ["thesis_goto", "thesis_const_cond", "thesis_drop_count"])
def test_seed_offloads_where_thesis_gave_up(stem):
    """6.5.2 (goto), 6.5.3 (i == 20), 6.5.4 (drop and count): proven drop filters, even
    without extra assumptions."""
    path = need_object(_clang(stem))
    ((e, rs),) = _build(path, ())
    drops = [r for r in rs.rules if r.action == ("drop",)]
    # build() drops unproved filters, so `r.proved` holds by construction: what can fail is
    # that a filter was left out unproved, that a path was cut, or that no drop remains.
    assert rs.unproved == 0 and not [p for p in e.paths if p.verdict == "UNKNOWN"]
    assert drops, [str(r.match) for r in rs.rules]


def test_or_stress_uses_chains():
    """6.8.3: 4 nested ifs of K ORs each take 4K filters through chains, not K^4."""
    path = need_object(_clang("or_stress_k8"))
    ((e, rs),) = _build(path)
    assert len({r.chain for r in rs.rules}) == 4 and len(rs.rules) == 4 * 8
    assert rs.unproved == 0 and not [p for p in e.paths if p.verdict == "UNKNOWN"]
    assert sum(1 for r in rs.rules if r.action == ("drop",)) == 8  # the innermost level's K values


# ---------------------------------------------------------------- the command


def test_rules_command_json(capsys):
    path = need_object(_clang("thesis_static_rules"))
    assert main(["rules", str(path), "--dev", "eth0", "--format", "json", "--assume", "no-ip-options"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "xdp2tc.rules/1" and doc["assumptions"] == ["min-frame", "no-ip-options"]
    # the thesis's 6.5.1 drops (hand-derived): src 192.168.1.21 and dst 192.168.6.21, both proven
    drops = [dict(zip(r["keys"][::2], r["keys"][1::2])) for r in doc["rules"] if r["action"] == ["drop"]]
    assert sorted(d.get("src_ip", d.get("dst_ip")) for d in drops) == ["192.168.1.21", "192.168.6.21"]
    assert doc["summary"]["proven"] == len(drops) and doc["summary"]["unproven"] == 0
    assert all(r["tc"].startswith("filter add dev eth0 ingress protocol ") for r in doc["rules"])


def test_rules_command_script(capsys):
    path = need_object(_clang("thesis_goto"))
    assert main(["rules", str(path), "--dev", "eth1", "--sw"]) == 0
    out = capsys.readouterr().out
    assert "qdisc replace dev eth1 clsact" in out and " skip_hw " in out
    assert "ASSUMED: frames are at least 60 bytes" in out and "no-ip-options" not in out


def test_rules_bad_ifname(capsys):
    path = need_object(_clang("redirect_ifindex"))
    assert main(["rules", str(path), "--dev", "eth0", "--ifname", "four=eth1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "IFINDEX=NAME" in err


# ---------------------------------------------------------------- one device, one program (issue 20)


def _header_drops(stem: str) -> dict[str, set[tuple[str, int]]]:
    """{program: {(ip_proto, dst_port)}} from the corpus header's hand-written `Offload:` line."""
    spec = corpus.header(stem)["offload"]
    return {
        prog: {(proto, int(port)) for proto, port in re.findall(r"ip_proto (\w+) dst_port (\d+) drop", what)}
        for prog, what in re.findall(r"(\w+) -> ([^;]*)", spec)
    }


def test_several_entry_programs_need_program(capsys):
    """Without --program or --out-dir: exit 2, one line naming every entry program, no script."""
    path = need_object(_clang("two_progs_one_section"))
    for fmt in ("tc", "json"):
        code = main(["rules", str(path), "--dev", "eth0", "--assume", "no-ip-options", "--format", fmt])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert "--program" in err and all(p in err for p in _header_drops("two_progs_one_section"))


def test_out_dir_writes_one_script_per_entry_program(tmp_path, capsys):
    """--out-dir: one file per program, each with exactly that program's drops (the corpus
    header), one qdisc line; the kernel running each program drops that file's packets and
    passes the other program's (the issue's 12 of 120 frames)."""
    path = need_object(_clang("two_progs_one_section"))
    expected = _header_drops("two_progs_one_section")
    assert len(expected) == 2 and all(expected.values())
    assert main(["rules", str(path), "--dev", "eth0", "--assume", "no-ip-options", "--out-dir", str(tmp_path)]) == 0
    assert sorted(capsys.readouterr().out.split()) == sorted(str(tmp_path / f"{p}.tc") for p in expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{p}.tc" for p in expected)
    found = {}
    for prog in expected:
        lines = [ln for ln in (tmp_path / f"{prog}.tc").read_text().splitlines() if ln and not ln.startswith("#")]
        assert sum(ln.startswith("qdisc ") for ln in lines) == 1
        found[prog] = {
            (proto, int(port))
            for ln in lines
            if ln.endswith("action drop")
            for proto, port in re.findall(r"ip_proto (\w+) .*dst_port (\d+)", ln)
        }
        assert found[prog] == expected[prog], prog
    kernel_ready()
    build = {"tcp": tcp4, "udp": udp4}
    with kernel.load(path) as loaded:
        for prog in expected:
            for other in expected:
                for proto, port in found[other]:
                    packet = build[proto]("10.0.0.1", "10.0.0.2", port).ljust(60, b"\0")
                    verdict = VERDICTS.get(loaded.run(prog, packet).retval)
                    assert verdict == ("DROP" if other == prog else "PASS"), (prog, proto, port)


def test_tail_call_targets_are_not_entry_programs(tmp_path, capsys):
    """tailcall_dispatch: the handlers its jmp_table names (read from the source) are not
    attached to a device, so the dispatcher alone is the entry program: one script."""
    path = need_object(_clang("tailcall_dispatch"))
    source = corpus.source_of("tailcall_dispatch").read_text()
    programs = set(re.findall(r'SEC\("xdp"\)\s*int (\w+)', source))
    targets = set(re.findall(r"\[SLOT_\w+\]\s*=\s*\(void \*\)&(\w+)", source))
    assert len(programs) == 4 and len(targets) == 3 and targets < programs
    (entry,) = programs - targets
    assert [p.name for p in entry_programs(load_object(path))] == [entry]
    assert main(["rules", str(path), "--dev", "eth0"]) == 0
    out = capsys.readouterr().out
    assert out.count("\nqdisc replace dev eth0 clsact\n") == 1 and f"program {entry}:" in out
    assert not any(f"program {t}" in out for t in targets)
    assert main(["rules", str(path), "--dev", "eth0", "--out-dir", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == [f"{entry}.tc"]
    # a tail-call target can still be asked for by name
    target = sorted(targets)[0]
    assert main(["rules", str(path), "--dev", "eth0", "--program", target]) == 0
    assert f"program {target}:" in capsys.readouterr().out


def test_synthesis_keeps_the_time_budget():
    """`--timeout` bounds synthesis too: once the command's budget (Options.started +
    timeout) is spent, the remaining paths stay in software saying so, and nothing unproved
    is printed; with the budget not spent, the same exploration gets its filters."""
    import time
    from dataclasses import replace

    from analyzer.explore import Options

    path = need_object(_clang("thesis_static_rules"))
    obj = load_object(path)
    e = explore(obj, obj.program(), Options(timeout=3600.0, started=time.perf_counter()))
    in_time = ruleset.build(e)
    drops = [r for r in in_time.rules if r.outcome and not r.outcome.is_pass]
    assert drops and in_time.unproved == 0
    e.options = replace(e.options, started=time.perf_counter() - 3600.0)
    late = ruleset.build(e)
    assert not [r for r in late.rules if r.outcome and not r.outcome.is_pass]
    why = {p: r for ps, r in late.software for p in ps}
    for r in drops:
        for p in r.paths:
            assert why[p].code == "unknown" and "time budget of 3600 s ran out" in why[p].detail, why.get(p)
