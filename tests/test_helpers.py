"""Helper models (analyzer/calls.py) against the running kernel, and the issue-18 corpus
shapes against hand-derived packets.

bpf_csum_diff: a probe program (tests/data/csum_diff_probe.c) writes the helper's result
into the packet; the kernel's answer for chosen inputs (sizes 0, 3, 4, 20, 36, odd
addresses, odd seeds, all-zero and all-ones buffers) must equal what the explorer predicts
for the same packet. icmp_too_big: the reply the kernel builds must equal the one built here
with struct.pack and an RFC 1071 checksum written here. vlan_sections: every program of
every toolchain's object, including the one whose sections have no FUNC symbol, loads one
at a time and does what its source says.
"""

from __future__ import annotations

import random
import struct
import subprocess
from pathlib import Path

import pytest
import z3

import corpus
from analyzer import kernel, xdp
from analyzer.explore import explore
from analyzer.symbolic import PACKET, PACKET_FRAGS, PACKET_LEN, ctx_field
from analyzer.verify import Verifier, output_of
from lifter.program import load_object
from tests.conftest import CLANG, require, require_tool
from tests.test_kernel_runner import ETH_P_IP, MAC_A, MAC_B, eth, ip4, kernel_ready, udp

DATA = Path(__file__).resolve().parent / "data"
PROBE_LEN = 160


def build_probe(tmp_path: Path, from_size: int, from_off: int, to_size: int, to_off: int) -> Path:
    clang = require_tool(CLANG)
    out = tmp_path / f"probe_{from_size}_{from_off}_{to_size}_{to_off}.o"
    subprocess.run(
        [
            clang,
            "-O2",
            "-target",
            "bpf",
            "-Wall",
            "-Werror",
            f"-I{corpus.CORPUS_DIR / 'include'}",
            "-I/usr/include/x86_64-linux-gnu",
            f"-DFROM_SIZE={from_size}",
            f"-DFROM_OFF={from_off}",
            f"-DTO_SIZE={to_size}",
            f"-DTO_OFF={to_off}",
            "-c",
            str(DATA / "csum_diff_probe.c"),
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


def predicted(e, packet: bytes) -> tuple[int, bytes]:
    """The explorer's (retval, output packet) for a concrete packet: the one path whose
    condition holds, its written bytes evaluated."""
    array = z3.K(z3.BitVecSort(64), z3.BitVecVal(0, 8))
    for i, b in enumerate(packet):
        array = z3.Store(array, z3.BitVecVal(i, 64), z3.BitVecVal(b, 8))
    subst = [
        (PACKET, array),
        (PACKET_LEN, z3.BitVecVal(len(packet), 64)),
        (PACKET_FRAGS, z3.BitVecVal(0, 64)),
        (ctx_field("ingress_ifindex"), z3.BitVecVal(1, 32)),
        (ctx_field("rx_queue_index"), z3.BitVecVal(0, 32)),
    ]

    def ev(x):
        v = z3.simplify(z3.substitute(e.expand(x), *subst))
        assert z3.is_bv_value(v), f"prediction still open: {v}"
        return v.as_long()

    paths = [p for p in e.paths if z3.is_true(z3.simplify(z3.substitute(e.condition(p), *subst)))]
    assert len(paths) == 1, [p.id for p in paths]
    return output_of(paths[0], ev, packet)


def probe_packets(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    fills = [bytes(PROBE_LEN), b"\xff" * PROBE_LEN] + [rng.randbytes(PROBE_LEN) for _ in range(3)]
    seeds = [0, 1, 0xFFFFFFFF, 0x12345679, 0xFFFF0001, rng.getrandbits(32) | 1]
    out = []
    for fill in fills:
        for s in seeds:
            out.append(fill[:8] + struct.pack("<I", s) + fill[12:])
    # A buffer whose words sum to a multiple of 2^32 - 1 (zero residue, non-zero data).
    out.append(bytes(8) + struct.pack("<I", 0) + bytes(4) + b"\xff" * 144)
    return out


# (from_size, from address offset, to_size, to address offset): sizes 0, 3, 4, 20, 36;
# offsets 1 make the buffer's address odd (csum_partial's byte-swapped path).
CSUM_CASES = [
    (0, 0, 0, 0),
    (0, 0, 4, 0),
    (4, 0, 0, 0),
    (0, 0, 20, 0),
    (20, 0, 0, 0),
    (20, 0, 20, 0),
    (4, 0, 20, 0),
    (0, 0, 36, 0),
    (0, 0, 3, 0),
    (3, 0, 0, 0),
    (0, 0, 20, 1),
    (20, 1, 0, 0),
    (4, 1, 4, 1),
    (20, 0, 36, 1),
    (7, 1, 5, 0),
    (64, 0, 64, 0),
]


@pytest.mark.parametrize("case", CSUM_CASES, ids=lambda c: "from{}@{}-to{}@{}".format(*c))
def test_csum_diff_matches_kernel(case, tmp_path):
    kernel_ready()
    path = build_probe(tmp_path, *case)
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    with kernel.load(path) as loaded:
        for n, packet in enumerate(probe_packets(sum(case))):
            got = loaded.run("csum_probe", packet)
            want = predicted(e, packet)
            assert (got.retval, got.packet_out) == want, (
                f"packet {n} (seed {packet[8:12][::-1].hex()}): kernel {got.packet_out[:8].hex()}, "
                f"model {want[1][:8].hex()}"
            )


# ---------------------------------------------------------------- icmp_too_big


def rfc1071(data: bytes) -> int:
    """The Internet checksum of `data` (RFC 1071), as it is stored in a header (big endian)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def icmp_too_big_reply(frame: bytes) -> bytes:
    """What icmp_too_big.c builds from an oversized IPv4 frame, derived from its source:
    MACs swapped, a new IPv4 header (TTL 64, protocol 1, addresses swapped, total length 56)
    and ICMP type 3 code 4 with MTU 586, followed by the original IP header and 8 bytes."""
    orig = frame[14 : 14 + 28]
    src, dst = orig[12:16], orig[16:20]
    icmp = struct.pack("!BBHHH", 3, 4, 0, 0, 586) + orig
    icmp = icmp[:2] + struct.pack("!H", rfc1071(icmp)) + icmp[4:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 0, 0, 64, 1, 0, dst, src)
    ip = ip[:10] + struct.pack("!H", rfc1071(ip)) + ip[12:]
    return frame[6:12] + frame[0:6] + struct.pack("!H", ETH_P_IP) + ip + icmp


@pytest.mark.parametrize("toolchain", ["clang", "clang-v4", "gcc", "nobtf"])
def test_icmp_too_big_reply(toolchain):
    kernel_ready()
    path = corpus.BUILD_DIR / toolchain / "icmp_too_big.o"
    require(path.is_file(), f"{path} is not built (run `make -C corpus`)")
    rng = random.Random(18)
    big = [
        eth(ETH_P_IP, ip4("192.0.2.1", "198.51.100.7", 17, udp(53, payload=rng.randbytes(n)))) for n in (573, 600, 1400)
    ]
    small = eth(ETH_P_IP, ip4("192.0.2.1", "198.51.100.7", 17, udp(53, payload=bytes(100))))
    with kernel.load(path) as loaded:
        for frame in big:
            assert len(frame) > 600
            got = loaded.run("xdp_icmp_too_big", frame)
            assert got.retval == xdp.XDP_TX
            assert got.packet_out == icmp_too_big_reply(frame), got.packet_out.hex()
            # The reply's own checksums verify (sum of the header including them is 0).
            assert rfc1071(got.packet_out[14:34]) == 0 and rfc1071(got.packet_out[34:]) == 0
        # 601-byte frames are answered; 600 bytes and shorter pass unchanged.
        edge = eth(ETH_P_IP, ip4("192.0.2.1", "198.51.100.7", 17, udp(53, payload=bytes(558))))
        assert len(edge) == 600 and loaded.run("xdp_icmp_too_big", edge).retval == xdp.XDP_PASS
        got = loaded.run("xdp_icmp_too_big", small)
        assert (got.retval, got.packet_out) == (xdp.XDP_PASS, small)


def test_icmp_too_big_is_predicted_exactly():
    """The explorer's TX path predicts the reply's checksum bytes (no helper freedom)."""
    path = corpus.BUILD_DIR / "clang" / "icmp_too_big.o"
    require(path.is_file(), f"{path} is not built (run `make -C corpus`)")
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    frame = eth(ETH_P_IP, ip4("192.0.2.1", "198.51.100.7", 6, bytes(range(256)) * 3))
    assert predicted(e, frame) == (xdp.XDP_TX, icmp_too_big_reply(frame))
    assert not any(p.notes for p in e.paths)


# ---------------------------------------------------------------- arbitrary helper results


def test_arbitrary_helper_bytes_are_any_value(tmp_path):
    """Bytes written from bpf_get_prandom_u32/bpf_ktime_get_ns are compared as "any
    value" (never a mismatch); the byte copied from the packet is still compared."""
    kernel_ready()
    clang = require_tool(CLANG)
    path = tmp_path / "helper_bytes.o"
    subprocess.run(
        [
            clang,
            "-O2",
            "-target",
            "bpf",
            "-Wall",
            "-Werror",
            f"-I{corpus.CORPUS_DIR / 'include'}",
            "-I/usr/include/x86_64-linux-gnu",
            "-c",
            str(DATA / "helper_bytes.c"),
            "-o",
            str(path),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    with kernel.load(path) as loaded:
        v = Verifier(e, loaded, seed=3)
        tx = next(p for p in e.paths if p.verdict == "TX")
        model = v.witness(v.conditions[tx.id])
        assert v.free_bytes(tx, lambda x: model.eval(x, model_completion=True).as_long()) == {0, 1, 2, 3, 4}
        v.run_witnesses()
        v.run_random(300, v.seeds)
    report = v.report
    assert not report.mismatches, "\n".join(map(str, report.mismatches[:3]))
    assert report.witnesses == 3 and report.consistent > 0


# ---------------------------------------------------------------- vlan_sections


def vlan_frame(vid: int, pcp: int = 5, tpid: int = 0x8100) -> bytes:
    return (
        MAC_A
        + MAC_B
        + struct.pack("!HH", tpid, pcp << 13 | vid)
        + struct.pack("!H", ETH_P_IP)
        + ip4("10.0.0.1", "10.0.0.2", 17, udp(9))
    )


def notype_object(tmp_path: Path) -> Path:
    """vlan_sections.c without BTF and with untyped function symbols (assembly whose
    `.type f,@function` lines are gone, as in hand-written or rewritten objects): no
    section has a FUNC symbol, so libbpf >= 1.0 finds no program at all."""
    clang = require_tool(CLANG)
    asm = tmp_path / "vlan_sections.s"
    subprocess.run(
        [
            clang,
            "-O2",
            "-target",
            "bpf",
            f"-I{corpus.CORPUS_DIR / 'include'}",
            "-I/usr/include/x86_64-linux-gnu",
            "-S",
            str(corpus.CORPUS_DIR / "vlan_sections.c"),
            "-o",
            str(asm),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    asm.write_text("".join(ln for ln in asm.read_text().splitlines(True) if "@function" not in ln))
    out = tmp_path / "vlan_notype.o"
    subprocess.run(
        [clang, "-target", "bpf", "-c", str(asm), "-o", str(out)], check=True, capture_output=True, text=True
    )
    return out


def check_vlan_programs(path: Path, names: list[str]) -> None:
    """The four XDP programs, loaded one at a time, on hand-built frames (from the source)."""
    drop, change, pop, pop2 = names
    tagged, other = vlan_frame(4011), vlan_frame(42, tpid=0x88A8)
    untagged = eth(ETH_P_IP, ip4("10.0.0.1", "10.0.0.2", 17, udp(9)))
    popped = tagged[:12] + tagged[16:]
    with kernel.load(path, programs=[drop]) as loaded:
        assert set(loaded.programs) == {drop}
        assert loaded.run(drop, tagged).retval == xdp.XDP_DROP
        assert loaded.run(drop, other).retval == xdp.XDP_PASS
    with kernel.load(path, programs=[change]) as loaded:
        got = loaded.run(change, tagged)
        assert (got.retval, got.packet_out) == (
            xdp.XDP_PASS,
            tagged[:14] + struct.pack("!H", 5 << 13 | 4000) + tagged[16:],
        )
        assert loaded.run(change, other).packet_out == other
    for prog in (pop, pop2):
        with kernel.load(path, programs=[prog]) as loaded:
            got = loaded.run(prog, tagged)
            assert (got.retval, got.packet_out) == (xdp.XDP_PASS, popped)
            assert loaded.run(prog, untagged).packet_out == untagged


@pytest.mark.parametrize("toolchain", ["clang", "clang-v4", "gcc", "nobtf"])
def test_vlan_sections(toolchain):
    kernel_ready()
    path = corpus.BUILD_DIR / toolchain / "vlan_sections.o"
    require(path.is_file(), f"{path} is not built (run `make -C corpus`)")
    check_vlan_programs(path, ["xdp_prognum0", "xdp_prognum1", "xdp_prognum2", "xdp_prognum3"])
    # The tc program loads as SCHED_CLS (the whole object too), but is never test-run as XDP.
    with kernel.load(path) as loaded:
        assert loaded.types["tc_prognum4"] == kernel.BPF_PROG_TYPE_SCHED_CLS
        with pytest.raises(kernel.KernelRunError, match="tc program"):
            loaded.run("tc_prognum4", vlan_frame(1))


def test_sections_without_func_symbols(tmp_path, capsys):
    """libbpf sees no program; xdp2tc loads each one itself and verify agrees with the
    kernel; the tc program is refused in one line with exit code 2."""
    kernel_ready()
    from offload.cli import main

    path = notype_object(tmp_path)
    obj = load_object(path)
    sections = ["xdp_drop_vlan_4011", "xdp_vlan_change", "xdp_vlan_remove_outer", "xdp_vlan_remove_outer2"]
    assert [p.name for p in obj.programs] == sections + ["tc_vlan_push"]
    check_vlan_programs(path, sections)
    assert main(["verify", str(path), "--random", "100"]) == 0
    out = capsys.readouterr().out
    assert out.count(" 0 mismatches") == 4, out
    assert main(["verify", str(path), "--program", "tc_vlan_push"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not an XDP program" in err and "tc_vlan_push" in err
