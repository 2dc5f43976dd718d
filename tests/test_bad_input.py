"""Bad input: every damaged or foreign file gets one line on stderr naming the file (and the
section/program/instruction where known) and exit code 2 — never a traceback."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, corpus_objects, require
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpus
from lifter.errors import LiftError
from lifter.insn import Jump
from lifter.program import load_bytes, load_object


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "offload.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def _assert_clean_error(path: Path, *must_contain: str) -> str:
    for command in ("info", "disasm"):
        result = _cli(command, str(path))
        assert result.returncode == 2, (command, result.stdout[-500:], result.stderr)
        assert "Traceback" not in result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"xdp2tc: {path}"), lines[0]
        for text in must_contain:
            assert text in lines[0], lines[0]
    return lines[0]


def _sample() -> Path:
    path = corpus.BUILD_DIR / "clang" / "thesis_static_rules.o"
    require(path.exists(), "corpus is not built (run `make corpus`)")
    return path


def _section(path: Path, name: str):
    with path.open("rb") as f:
        sec = ELFFile(f).get_section_by_name(name)
        return sec["sh_offset"], sec["sh_size"]


def test_missing_file(tmp_path):
    _assert_clean_error(tmp_path / "nope.o", "cannot read file")


@pytest.mark.parametrize("keep", [0, 3, 16, 63, 64, 500, -200, -1])
def test_truncated_object(tmp_path, keep):
    data = _sample().read_bytes()
    bad = tmp_path / "truncated.o"
    bad.write_bytes(data[:keep] if keep >= 0 else data[: len(data) + keep])
    _assert_clean_error(bad)


def test_random_bytes(tmp_path):
    bad = tmp_path / "random.o"
    bad.write_bytes(random.Random(7).randbytes(4096))
    _assert_clean_error(bad, "not an ELF file")


def test_host_object_is_not_bpf(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    require(cc is not None, "a host C compiler")
    src = tmp_path / "host.c"
    src.write_text("int f(int x) { return x + 1; }\n")
    obj = tmp_path / "host.o"
    subprocess.run([cc, "-c", str(src), "-o", str(obj)], check=True)
    _assert_clean_error(obj, "not a BPF object: machine is EM_X86_64")


def test_executable_is_not_bpf():
    _assert_clean_error(Path(sys.executable).resolve(), "not a BPF object")


def _patched(tmp_path: Path, section: str, insn: int, new: bytes, at: int = 0) -> Path:
    src = _sample()
    offset, _size = _section(src, section)
    data = bytearray(src.read_bytes())
    pos = offset + insn * 8 + at
    data[pos : pos + len(new)] = new
    out = tmp_path / "patched.o"
    out.write_bytes(bytes(data))
    return out


def test_unknown_opcode(tmp_path):
    bad = _patched(tmp_path, "xdp", 3, b"\xff")
    line = _assert_clean_error(bad, "section xdp", "insn 3", "unknown ALU operation")
    assert "program xdp_prog" in line or "program " in line


def test_jump_out_of_range(tmp_path):
    obj = load_object(_sample())
    jump = next(i for f in obj.functions.values() for i in f.insns if isinstance(i, Jump))
    bad = _patched(tmp_path, "xdp", jump.pc, struct.pack("<h", 0x7000), at=2)
    _assert_clean_error(bad, f"insn {jump.pc}", "outside function")


def _reloc_object() -> Path:
    path = corpus.BUILD_DIR / "clang" / "thesis_ddos_blacklist.o"
    require(path.exists(), "corpus is not built (run `make corpus`)")
    return path


def test_relocation_not_on_an_instruction(tmp_path):
    src = _reloc_object()
    offset, _ = _section(src, ".relxdp")
    data = bytearray(src.read_bytes())
    r_offset = struct.unpack_from("<Q", data, offset)[0]
    struct.pack_into("<Q", data, offset, r_offset + 4)
    bad = tmp_path / "badrel.o"
    bad.write_bytes(bytes(data))
    _assert_clean_error(bad, "relocation at byte", "not at the start of an instruction")


def test_relocation_of_unknown_type(tmp_path):
    src = _reloc_object()
    offset, _ = _section(src, ".relxdp")
    data = bytearray(src.read_bytes())
    info = struct.unpack_from("<Q", data, offset + 8)[0]
    struct.pack_into("<Q", data, offset + 8, (info & ~0xFFFFFFFF) | 99)
    bad = tmp_path / "badreltype.o"
    bad.write_bytes(bytes(data))
    _assert_clean_error(bad, "relocation type 99")


def test_relocation_symbol_out_of_range(tmp_path):
    src = _reloc_object()
    offset, _ = _section(src, ".relxdp")
    data = bytearray(src.read_bytes())
    info = struct.unpack_from("<Q", data, offset + 8)[0]
    struct.pack_into("<Q", data, offset + 8, (0xFFFF << 32) | (info & 0xFFFFFFFF))
    bad = tmp_path / "badrelsym.o"
    bad.write_bytes(bytes(data))
    _assert_clean_error(bad, "names symbol 65535")


def test_section_flagged_compressed_but_not_zlib(tmp_path):
    """SHF_COMPRESSED on a section whose bytes are not zlib (found by the fuzz test below as
    a zlib.error traceback): a clean error naming the section."""
    src = _sample()
    data = bytearray(src.read_bytes())
    with src.open("rb") as f:
        elf = ELFFile(f)
        index = next(i for i, sec in enumerate(elf.iter_sections()) if sec.name == "xdp")
        header = elf["e_shoff"] + index * elf["e_shentsize"]
    flags = struct.unpack_from("<Q", data, header + 8)[0]  # Elf64_Shdr.sh_flags
    struct.pack_into("<Q", data, header + 8, flags | 0x800)  # SHF_COMPRESSED
    offset = struct.unpack_from("<Q", data, header + 24)[0]  # Elf64_Shdr.sh_offset
    struct.pack_into("<IIQQ", data, offset, 1, 0, 64, 8)  # Elf64_Chdr: ELFCOMPRESS_ZLIB, 64 bytes
    bad = tmp_path / "compressed.o"
    bad.write_bytes(bytes(data))
    _assert_clean_error(bad, "malformed ELF", "xdp")


def test_huge_program_is_refused(tmp_path):
    """More instructions than the kernel would ever load (1M) is refused before decoding."""
    src = tmp_path / "huge.s"
    src.write_text('.section xdp,"ax"\n.globl big\n.type big,@function\nbig:\n.rept 1000001\nr0 = 0\n.endr\nexit\n')
    clang = shutil.which("clang-19")
    require(clang is not None, "clang-19")
    obj = tmp_path / "huge.o"
    subprocess.run([clang, "-target", "bpf", "-c", str(src), "-o", str(obj)], check=True)
    _assert_clean_error(obj, "1000002 instructions", "at most 1000000")


_FUZZ_SEEDS: dict[str, bytes] = {}


def _fuzz_seeds() -> dict[str, bytes]:
    """Seed objects read once, so every hypothesis example sees the same inputs."""
    if not _FUZZ_SEEDS:
        for path in sorted(corpus_objects())[::3]:
            _FUZZ_SEEDS[str(path)] = path.read_bytes()
    return _FUZZ_SEEDS


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    mutations=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.one_of(st.none(), st.integers(0, 1 << 20)),
)
def test_fuzz_mutated_objects_raise_only_lift_errors(seed, mutations, cut):
    """Byte mutations and truncations of real objects: the lifter either lifts or raises
    LiftError; any other exception is a bug (it would surface as a traceback)."""
    seeds = _fuzz_seeds()
    name = sorted(seeds)[seed % len(seeds)]
    raw = bytearray(seeds[name])
    for pos, value in mutations:
        raw[pos % len(raw)] = value
    if cut is not None:
        raw = raw[: cut % (len(raw) + 1)]
    try:
        load_bytes(bytes(raw), name)
    except LiftError:
        pass
