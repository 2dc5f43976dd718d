"""IPv4-options twins (rules/optiontwins.py, issue 14): one z3 query that says no pass shield
can save a block, instead of the shield loop's MAX_SHIELDS rounds.

- The twin's bytes and length, read off z3 for concrete packets, against layouts written
  here by hand (IHL 5 -> 6 with 4 NOPs, 15 -> 14, a packet at the maximum length cut back).
- The proof is exact in what it decides: on the 48-OR stress programs (the loop ran all 12
  rounds there) `rules` with the proof and with it switched off prints the same filters,
  summaries, reason codes, conditions and suggestions; the counterexample frames (models of
  other queries) and a not-expressible reason's words ("not proved after 12 shields") differ.
- It is not asked where options move no byte the paths read (lpm_src_block), and it says no
  where a twin may keep the verdict (tcp_flags).
- The query's view of the chain (dissector.chain_exact, chain_keys) says what the whole
  flow-dissector walk says, on the chain's packets (z3).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import z3

import corpus
from analyzer.symbolic import PACKET, PACKET_LEN
from rules import synthesis
from rules.dissector import chain_exact, dissect, match_formula
from rules.flower import Exact, FlowerMatch
from rules.optiontwins import IPV4_NOP, twin_packet
from tests.conftest import need_object


def _twin(frame: bytes, max_len: int = 1514) -> bytes:
    """The twin of `frame` (IPv4 at 14) as z3 computes it: each byte read off by simplify."""
    x = z3.K(z3.BitVecSort(64), z3.BitVecVal(0, 8))
    for i, b in enumerate(frame):
        x = z3.Store(x, i, b)
    y, length = twin_packet(14, max_len)
    sub = [(PACKET, x), (PACKET_LEN, z3.BitVecVal(len(frame), 64))]
    n = z3.simplify(z3.substitute(length, *sub)).as_long()
    return bytes(z3.simplify(z3.substitute(y[z3.BitVecVal(i, 64)], *sub)).as_long() for i in range(n))


def _ipv4_tcp(ihl: int, payload: int) -> bytes:
    """Ethernet + IPv4 (IHL `ihl`, options 0xAA) + a 20-byte TCP header (ports 0x1234 ->
    0x0050) + `payload` bytes 0xEE, the total length field set to match."""
    options = bytes([0xAA]) * (4 * ihl - 20)
    tcp = bytes.fromhex("12340050") + bytes(16)
    total = 4 * ihl + len(tcp) + payload
    addresses = bytes([10, 0, 0, 1, 10, 0, 0, 2])
    ip = bytes([0x40 | ihl, 0]) + total.to_bytes(2, "big") + bytes(5) + b"\x06" + bytes(2) + addresses
    return bytes(6) + bytes(6) + b"\x08\x00" + ip + options + tcp + bytes([0xEE]) * payload


def test_twin_grows_ihl_5_by_four_nops():
    x = _ipv4_tcp(5, 6)
    y = _twin(x)
    assert len(y) == len(x) + 4
    assert y[14] == 0x46 and int.from_bytes(y[16:18], "big") == int.from_bytes(x[16:18], "big") + 4
    assert y[:14] == x[:14] and y[15] == x[15] and y[18:34] == x[18:34], "the rest of the fixed header as it was"
    assert y[34:38] == bytes([IPV4_NOP]) * 4
    assert y[38:] == x[34:], "TCP and payload moved by the options"
    assert y[38:42] == bytes.fromhex("12340050"), "flower's ports are x's"


def test_twin_of_ihl_15_has_one_word_fewer():
    x = _ipv4_tcp(15, 0)
    y = _twin(x)
    assert len(y) == len(x) - 4
    assert y[14] == 0x4E and int.from_bytes(y[16:18], "big") == int.from_bytes(x[16:18], "big") - 4
    assert y[34:70] == bytes([IPV4_NOP]) * 36, "x's 40 option bytes became 36 NOPs"
    assert y[70:] == x[74:]


def test_twin_at_the_maximum_length_is_cut_back():
    x = _ipv4_tcp(5, 46)  # 100 bytes
    y = _twin(x, max_len=len(x))
    assert len(y) == len(x), "no room for 4 more bytes: the last 4 are dropped"
    assert y[38:] == x[34:-4]


def _rules(obj: str, twins: bool) -> tuple[list[str], int]:
    """`rules --dev eth0 OBJ`'s stdout lines in a process of its own, the twin proof on or off,
    and how many blocks the proof gave up (counted on stderr)."""
    code = (
        "import sys; import rules.synthesis as s\n"
        + (
            "real = s.no_shield_helps\n"
            "def helps(*a):\n"
            "    r = real(*a)\n"
            "    print('twins', r, file=sys.stderr)\n"
            "    return r\n"
            if twins
            else "def helps(*a):\n    return False\n"
        )
        + "s.no_shield_helps = helps\n"
        + "from offload.cli import main; sys.argv = ['xdp2tc', 'rules', '--dev', 'eth0', sys.argv[1]]; main()"
    )
    out = subprocess.run([sys.executable, "-c", code, obj], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines(), out.stderr.count("twins True")


@pytest.mark.parametrize("name", ["or_stress_k48", "or_flags_tcp_k48"])
def test_same_outcome_as_the_shield_loop(name):
    obj = str(need_object(corpus.BUILD_DIR / "clang" / f"{name}.o"))
    (with_twins, given_up), (loop, _) = _rules(obj, True), _rules(obj, False)
    assert given_up, "the proof answered"
    frames = [line for line in loop if " differs packet" in line]
    assert frames, "the loop's output has counterexample frames (else this compares nothing)"
    assert _outcome(with_twins) == _outcome(loop)
    assert any("offloadable with --assume no-ip-options" in line for line in with_twins)


def _outcome(lines: list[str]) -> list[str]:
    """The script without its frames and with each software path's reason cut to its code
    (the loop's "not proved after 12 shields" or "taken by a pass shield" is the proof's own
    not-expressible detail now): filters, summaries, codes, conditions, suggestions."""
    out = []
    for line in lines:
        if " differs packet" in line:
            continue
        if line.startswith("# path ") and " stays in software (" in line:
            head, rest = line.split(" stays in software (", 1)
            line = f"{head} stays in software ({rest.split(':', 1)[0]}) when {rest.split(') when ', 1)[1]}"
        out.append(line)
    return out


def _asked(monkeypatch, name: str) -> tuple[int, list[bool]]:
    """How often synthesis of corpus object `name` looked for reads options move, and what
    no_shield_helps answered each time it was asked, in the shield loop (map-decided blocks
    not given up before it: lpm_src_block's drops are map-decided, its LPM trie empty as
    loaded, and z3 proves it within EARLY_DECIDED_RLIMIT)."""
    from analyzer.exploration import Options
    from analyzer.explore import explore
    from lifter.program import load_object

    looked, answers = [], []
    real_reads, real_helps = synthesis.constant_reads, synthesis.no_shield_helps
    monkeypatch.setattr(synthesis, "constant_reads", lambda c: looked.append(1) or real_reads(c))
    monkeypatch.setattr(synthesis, "no_shield_helps", lambda *a: answers.append(real_helps(*a)) or answers[-1])
    monkeypatch.setattr(synthesis, "EARLY_DECIDED_RLIMIT", 0)
    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / f"{name}.o"))
    e = explore(obj, obj.programs[0], Options(witnesses=True))
    synthesis.Synthesizer(e, (), {}).run()
    monkeypatch.undo()
    return len(looked), answers


def test_not_asked_where_options_move_no_read(monkeypatch):
    """lpm_src_block decides on the source address (bytes 26-29): a counterexample with
    options comes, but nothing the path reads moves, so the proof is not asked."""
    looked, answers = _asked(monkeypatch, "lpm_src_block")
    assert looked and answers == []


def test_says_no_where_a_twin_keeps_the_verdict(monkeypatch):
    """tcp_flags reads the flags at the fixed offset 47: a twin reads x's byte 43 there,
    which may hold the same bits, so not every twin is treated otherwise: the answer is no
    (and the shield loop runs on, as it did before)."""
    looked, answers = _asked(monkeypatch, "tcp_flags")
    assert looked and answers and not any(answers)


def test_query_holds_a_lambda_that_never_parses_back():
    """no_shield_helps asks its query with `text=False` (translated at once): the twin packet
    is a lambda, so the query's text never parses back the same (isolation.parsed), and the
    translation is what own_solver ended in before."""
    from rules.isolation import parsed
    from rules.optiontwins import _twin_view

    sub, same_view = _twin_view(FlowerMatch("ip"), 14, 1514)
    query = z3.Not(z3.And(*same_view, z3.substitute(PACKET_LEN >= 60, *sub)))
    assert "(lambda " in query.sexpr()
    assert not parsed(z3.Solver(ctx=z3.Context()), [query])


@pytest.mark.parametrize(
    "chain",
    [
        FlowerMatch("ip"),
        FlowerMatch("802.1Q", (("vlan_ethtype", Exact(0x0800, 0xFFFF)),)),
        FlowerMatch("802.1ad", (("vlan_ethtype", Exact(0x8100, 0xFFFF)), ("cvlan_ethtype", Exact(0x0800, 0xFFFF)))),
    ],
    ids=["ip", "vlan-ip", "qinq-ip"],
)
def test_chain_exact_is_the_whole_walks_exact_on_the_chain(chain):
    """The twin query reads the chain's layers only (dissector.chain_exact): on the chain's
    packets it must say what the whole walk's `exact` says (z3 proves them equal), and some
    packet of the chain is not exact (DCCP ports are left to a fresh variable), so the
    equality says something."""
    d = dissect()
    on = match_formula(chain, d)
    s = z3.Solver()
    s.add(on, chain_exact(chain, d) != d.exact)
    assert s.check() == z3.unsat
    s = z3.Solver()
    s.add(on, z3.Not(chain_exact(chain, d)))
    assert s.check() == z3.sat
