"""The printed tc script is what is proved (issues 17 and 21).

Over every corpus program (clang build) and Debian's XDP objects, on the script exactly
as `xdp2tc rules` prints it:
- no key carries an all-zero mask (cls_flower: such an address key matches nothing);
- the independent oracle (tests/oracles/tcflower.py) and the product's parser
  (rules/script.py) read the same filters;
- the product's proof of the printed text holds: sound, every claimed path reached,
  every block taken (or the script says which paths are partly in software);
- mutations (a filter removed, a chain's entry removed, a key dropped from a drop
  filter) make the proof fail, or the proof shows them harmless.
Issue 17's shape (corpus or_flags_*, or_direct_udp) against hand-derived layouts, and
its two packets against the kernel (BPF_PROG_TEST_RUN) and the oracle running the
printed script."""

from __future__ import annotations

import re
import struct
from functools import cache

import pytest
import z3

import corpus
from analyzer import kernel
from analyzer.exploration import VERDICTS
from analyzer.explore import explore
from lifter.program import load_object
from rules import output, ruleset
from rules.final import prove_text
from rules.flower import Range
from rules.proof import hits
from rules.reasons import REASONS
from rules.script import ScriptError, parse_script
from tests.conftest import need_object, require
from tests.oracles import tcflower
from tests.test_kernel_runner import kernel_ready

ASSUME = ("no-ip-options",)
#: product key names -> the tc words the oracle keeps them under
ORACLE_NAME = {"icmp_type": "type", "icmp_code": "code"}


def _objects() -> list:
    objs = []
    if corpus.BUILD_DIR.is_dir():
        objs += sorted((corpus.BUILD_DIR / "clang").glob("*.o"))
    objs += corpus.external_objects()
    return objs


def _id(p) -> str:
    return str(p.relative_to(corpus.CORPUS_DIR))


@cache
def _scripts(path) -> list:
    """(exploration, rule set, printed script) per XDP program of the object."""
    obj = load_object(path)
    out = []
    for prog in obj.programs:
        if not prog.is_xdp or prog.section.startswith("xdp/devmap"):
            continue
        e = explore(obj, prog)
        rs = ruleset.build(e, ASSUME, dev="eth0")
        # without counterexamples (tests/test_report.py checks those): only comments, and
        # their z3 queries would double this file's time on the xdp-filter objects
        out.append((e, rs, output.tc_script(e, rs, "eth0", "skip_sw", explain=False)))
    return out


def _with_filters(path) -> list:
    require(path.is_file(), f"{path} is not built")
    done = [x for x in _scripts(path) if "\nfilter add" in x[2]]
    if not done:
        pytest.skip("no filter for this program (its paths stay in software)")
    return done


# ---------------------------------------------------------------- issue 21


@pytest.mark.parametrize("path", _objects(), ids=_id)
def test_no_zero_mask_keys(path):
    """No emitted key has an all-zero mask (read by the oracle, not the emitter)."""
    for _, _, text in _with_filters(path):
        for line in tcflower.parse(text):
            zero = [k for k, (_, m) in line.keys.items() if k not in line.ranges and m == 0]
            assert not zero, f"line {line.lineno}: {zero} with mask 0"


def test_zero_mask_address_matches_nothing():
    """The kernel rule (cls_flower fl_set_key + fl_init_dissector) in the oracle and in
    the product's model: `src_ip 0.0.0.0/0` matches no packet, `0.0.0.0/1` does."""
    from rules.dissector import evaluate

    frame = _udp(0x0A000002, 0x0A000009, 1000, 53, 64)
    dead = "filter add dev x ingress protocol ip prio 1 flower ip_proto udp src_ip 0.0.0.0/0 action drop"
    live = dead.replace("0.0.0.0/0", "0.0.0.0/1")
    assert tcflower.run(tcflower.parse(dead), frame) == ("pass",)
    assert tcflower.run(tcflower.parse(live), frame) == ("drop",)
    assert not evaluate(parse_script(dead)[0].match, frame)
    assert evaluate(parse_script(live)[0].match, frame)
    # without the address key, the same filter matches
    assert evaluate(parse_script(dead.replace(" src_ip 0.0.0.0/0", ""))[0].match, frame)


# ---------------------------------------------------------------- issue 17: parsers, proof


def _product_keys(f) -> dict:
    out = {}
    for name, v in f.match.keys:
        name = ORACLE_NAME.get(name, name)
        out[name] = (v.lo, v.hi) if isinstance(v, Range) else (v.value, v.mask)
    return out


@pytest.mark.parametrize("path", _objects(), ids=_id)
def test_parsers_agree(path):
    """rules/script.py (the product's re-reader) and the oracle read the same filters."""
    for _, _, text in _with_filters(path):
        ours, theirs = parse_script(text), tcflower.parse(text)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert (a.lineno, a.chain, a.prio, a.match.protocol, list(a.action)) == (
                b.lineno,
                b.chain,
                b.prio,
                b.protocol,
                b.action,
            )
            assert _product_keys(a) == b.keys, a.lineno


def _claims(text: str) -> set[int]:
    """Paths the printed script says a non-pass filter takes over."""
    out = set()
    for m in re.finditer(r"^# paths ([\d,]+) .*- proven$", text, re.M):
        out |= {int(x) for x in m.group(1).split(",")}
    return out


def _partly(text: str) -> set[int]:
    out = set()
    for m in re.finditer(r"^# path (\d+) \S+ offloaded in part", text, re.M):
        out.add(int(m.group(1)))
    return out


@pytest.mark.parametrize("path", _objects(), ids=_id)
def test_printed_script_proves(path):
    """The printed text, proved afresh: sound, every path a `proven` filter claims is
    reached from chain 0, and every block is taken whole unless the script says
    `partly in software` for its paths."""
    for _e, rs, text in _with_filters(path):
        proof = prove_text(text, rs.synth, rs.blocks)
        assert proof.ok, (proof.errors, proof.sound, proof.reached)
        assert set(proof.reached) == _claims(text)
        for b, done in zip(rs.blocks, proof.complete):
            assert done or set(b.paths) <= _partly(text), b.paths
        proven = sum(1 for line in text.splitlines() if line.endswith("- proven"))
        assert proven == sum(1 for s in proof.sound if s)


@pytest.mark.parametrize("path", _objects(), ids=_id)
def test_no_internal_names(path):
    """The script names header fields, never the explorer's branch literals (`b!<n>`: a
    merged state's selector). xdp-filter's port and address keys sit at offsets its VLAN
    and IPv6 walks merge; their reasons printed `pkt[(2 + (b!173 ∧ ¬b!190 ...` before the
    key was expanded over inputs (rules/reasons.py)."""
    require(path.is_file(), f"{path} is not built")
    for _, _, text in _scripts(path):
        leaked = sorted(set(re.findall(r"\bb!\d+", text)))
        assert not leaked, leaked[:5]


@pytest.mark.parametrize("path", _objects(), ids=_id)
def test_every_path_exactly_once(path):
    """Issue 11's invariant, read off the printed script (the scripts above, shared): every
    path of the program is exactly one of: claimed by a `proven` filter (non-pass verdict),
    one `stays in software (CODE: ...)` line with a code of the closed reason table, or a
    PASS path passed to the host (counted, not listed). `offloaded in part` lines name only
    claimed paths; the summary lines count the same; the JSON fates say the same."""
    require(path.is_file(), f"{path} is not built")
    for e, rs, text in _scripts(path):
        claimed = _claims(text)
        software: dict[int, str] = {}
        for m in re.finditer(r"^# path (\d+) (\S+) stays in software \(([\w-]+): ", text, re.M):
            n, verdict, code = int(m.group(1)), m.group(2), m.group(3)
            assert n not in software, f"path {n} listed twice"
            assert code in REASONS and code != "pass-to-host", code
            assert verdict == e.paths[n].verdict
            software[n] = code
        assert _partly(text) <= claimed
        assert not claimed & set(software), claimed & set(software)
        # a PASS path is claimed only by a rewrite filter (pedit ..., then pass)
        assert all(e.paths[n].verdict != "PASS" or e.paths[n].writes for n in claimed)
        host = {p.id for p in e.paths} - claimed - set(software)
        assert all(e.paths[n].verdict == "PASS" for n in host), host
        counts = dict(re.findall(r"^# (\w+) paths (\d+):", text, re.M))
        assert sum(map(int, counts.values())) == len(e.paths)
        if host:
            line = re.search(r"^# PASS paths (\d+): (.*)$", text, re.M)
            assert (
                line.group(2).startswith("pass to host")
                and int(line.group(1)) == len(host)
                or (f"pass-to-host {len(host)}" in line.group(2))
            ), line.group(0)
        doc = output.rules_json(e, rs, "eth0", "skip_sw", explain=False)
        fates = {f["path"]: f for f in doc["fates"]}
        assert sorted(fates) == sorted(p.id for p in e.paths)
        assert {n for n, f in fates.items() if f["offloaded"]} == claimed
        assert {
            n: f["code"] for n, f in fates.items() if not f["offloaded"] and f["code"] != "pass-to-host"
        } == software


def _mutants(text: str):
    """(what, mutated text): one filter removed (first and last non-pass, first goto,
    first shield), the entry of the last chain removed, each key of the first drop
    filter dropped in turn."""
    lines = text.splitlines()
    idx = [i for i, x in enumerate(lines) if x.startswith("filter add")]
    drops = [i for i in idx if not re.search(r" action (goto|pass)", lines[i])]
    gotos = [i for i in idx if " action goto " in lines[i]]
    shields = [i for i in idx if lines[i].endswith(" action pass")]

    def without(*gone):
        return "\n".join(x for i, x in enumerate(lines) if i not in gone and i + 1 not in gone) + "\n"

    picks = {
        "first drop filter": drops[:1],
        "last drop filter": drops[-1:],
        "first goto": gotos[:1],
        "first shield": shields[:1],
    }
    for what, i in picks.items():
        if i:
            yield what, without(i[0])
    if gotos:
        last = max(int(lines[i].split(" action goto chain ")[1]) for i in gotos)
        entry = [i for i in gotos if lines[i].endswith(f" goto chain {last}")]
        yield f"entry of chain {last}", without(*entry)
    if drops:
        words = lines[drops[0]].split()
        start = words.index("flower") + 1 + (words[words.index("flower") + 1].startswith("skip"))
        end = words.index("action")
        for k in range(start, end, 2):
            cut = words[:k] + words[k + 2 :]
            yield (
                f"key {words[k]} of the first drop filter",
                "\n".join(lines[: drops[0]] + [" ".join(cut)] + lines[drops[0] + 1 :]) + "\n",
            )


def _mutation_objects() -> list:
    """Every object, but of the K variants only the smaller ones (the K = 16 and 48 builds
    are the same programs; their proofs take minutes per mutation)."""
    return [p for p in _objects() if not re.search(r"_k(16|48)$", p.stem)]


def _takes(text: str, synth):
    """z3: the packets the script drops or redirects (tc semantics over the model)."""
    filters = parse_script(text)
    hit = hits(filters, synth.d)
    return z3.Or([h for f, h in zip(filters, hit) if f.action[0] in ("drop", "mirred")] or [z3.BoolVal(False)])


@pytest.mark.parametrize("path", _mutation_objects(), ids=_id)
def test_mutations_are_caught(path):
    """A removed filter or chain entry: the proof fails (unsound, a claimed path unreached,
    a block not taken whole) unless the script still takes exactly the same packets (z3,
    the two scripts compared). A key dropped from a drop filter: the proof fails or proves
    the wider filter sound (harmless). At least one mutant per script is caught."""
    for _e, rs, text in _with_filters(path):
        base = prove_text(text, rs.synth, rs.blocks)
        assert base.ok
        caught = 0
        for what, mutant in _mutants(text):
            try:
                proof = prove_text(mutant, rs.synth, rs.blocks)
            except ScriptError:
                caught += 1  # not a script tc's flower accepts
                continue
            if what.startswith("key "):
                caught += not proof.ok
                continue
            if not proof.ok or (base.exact and not proof.exact):
                caught += 1
                continue
            same = z3.Solver()
            same.add(*rs.synth.env, _takes(text, rs.synth) != _takes(mutant, rs.synth))
            assert same.check() == z3.unsat, f"{what}: the script changed, the proof did not notice"
        assert caught, "no mutant was caught"


# ---------------------------------------------------------------- issue 17's shape


def _clang(stem):
    return need_object(corpus.BUILD_DIR / "clang" / f"{stem}.o")


#: Hand-derived from the sources' headers: per key, the (value, mask) of level value i (i < K).
SHAPES = {
    "or_flags_tcp": {
        "ip_ttl": lambda i: (10 + 2 * i, 0xFF),
        "src_port": lambda i: (4000 + 7 * i, 0xFFFF),
        "dst_port": lambda i: (3000 + 5 * i, 0xFFFF),
        "src_ip": lambda i: (0x0A000000 + (3 * i << 8), 0xFFFFFF00),
    },
    "or_direct_udp": {
        "ip_ttl": lambda i: (2 + 3 * i, 0xFF),
        "src_port": lambda i: (1000 + 3 * i, 0xFFFF),
        "dst_port": lambda i: (2000 + 3 * i, 0xFFFF),
        "dst_ip": lambda i: (0xC0A80001 + 7 * i, 0xFFFFFFFF),
    },
}


@pytest.mark.parametrize(
    "stem, k",
    [
        ("or_flags_tcp", 4),
        ("or_flags_tcp", 16),
        ("or_flags_tcp", 48),
        ("or_direct_udp", 4),
        ("or_direct_udp", 16),
        ("or_direct_udp", 48),
    ],
)
def test_issue17_shape_layout(stem, k):
    """chain 0 -> 1 -> 2 -> 3 -> drop, one key per chain besides ip_proto, exactly the K
    hand-derived values per level, all four levels present, nothing left in software."""
    ((e, rs, text),) = _scripts(_clang(f"{stem}_k{k}"))
    lines = tcflower.parse(text)
    assert sorted({x.chain for x in lines}) == [0, 1, 2, 3]
    seen = {}
    for c in range(4):
        here = [x for x in lines if x.chain == c]
        names = {n for x in here for n in x.keys} - {"ip_proto"}
        assert len(names) == 1 and len(here) == k, (c, names, len(here))
        name = names.pop()
        seen[name] = {x.keys[name] for x in here}
        assert all(x.action == (["drop"] if c == 3 else ["goto", "chain", str(c + 1)]) for x in here)
    assert seen == {n: {f(i) for i in range(k)} for n, f in SHAPES[stem].items()}
    assert "stays in software" not in text and "offloaded in part" not in text


def test_issue17_flag_udp_stays_in_software():
    """Issue 17's own program: the low byte of the source address is not a prefix, so no
    filter can hold that level; the DROP path is reported in software, nothing is printed."""
    for k in (2, 4, 16, 48):
        ((e, rs, text),) = _scripts(_clang(f"or_flags_udp_k{k}"))
        assert "\nfilter add" not in text
        drops = {p.id for p in e.paths if p.verdict == "DROP"}
        software = {p for ps, _ in rs.software for p in ps}
        assert drops and drops <= software, (k, rs.software)


def _udp(src: int, dst: int, sport: int, dport: int, ttl: int, proto: int = 17) -> bytes:
    l4 = (
        struct.pack("!HHHH", sport, dport, 8, 0)
        if proto == 17
        else struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x10, 65535, 0, 0)
    )
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0, ttl, proto, 0, src.to_bytes(4, "big"), dst.to_bytes(4, "big")
    )
    return (bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + l4).ljust(60, b"\0")


#: (object, packet, kernel verdict by hand, printed rules' verdict by hand): issue 17's two
#: packets on its program, and the same pair on the two shapes flower can express.
PACKETS = [
    ("or_flags_udp_k48", _udp(0x0A000001, 0x0A000009, 1000, 2135, 2), "DROP", ("pass",)),
    ("or_flags_udp_k48", _udp(0x0A000002, 0x0A000009, 1000, 2135, 64), "PASS", ("pass",)),
    ("or_flags_tcp_k48", _udp(0x0A000001, 0x0A000009, 4000 + 7 * 45, 3000, 10, 6), "DROP", ("drop",)),
    ("or_flags_tcp_k48", _udp(0x0A000101, 0x0A000009, 4000 + 7 * 45, 3000, 64, 6), "PASS", ("pass",)),
    ("or_direct_udp_k48", _udp(0x0A000001, 0xC0A80001, 1000, 2135, 2), "DROP", ("drop",)),
    ("or_direct_udp_k48", _udp(0x0A000002, 0xC0A80002, 1000, 2135, 64), "PASS", ("pass",)),
]


@pytest.mark.parametrize("stem, packet, verdict, printed", PACKETS, ids=[f"{s}-{v}" for s, _, v, _ in PACKETS])
def test_issue17_packets(stem, packet, verdict, printed):
    """The kernel gives the hand-derived verdict, the printed script (run by the oracle)
    the hand-derived action; a printed drop is never a kernel pass."""
    path = _clang(stem)
    ((e, rs, text),) = _scripts(path)
    assert tcflower.run(tcflower.parse(text), packet) == printed
    kernel_ready()
    with kernel.load(path, programs=[e.program.name]) as loaded:
        got = VERDICTS.get(loaded.run(e.program.name, packet).retval, "INVALID")
    assert got == verdict
