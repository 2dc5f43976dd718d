"""Maps, globals and static prog-array slots, against hand-written expectations from the
corpus sources and against llvm-readelf's symbol table."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import need_object, object_params, require, require_tool

import corpus
from lifter.program import load_object

TOOLCHAINS = ("clang", "clang-v4", "gcc", "nobtf")


def _built(stem: str, toolchain: str):
    path = corpus.BUILD_DIR / toolchain / f"{stem}.o"
    require(path.exists(), f"{path} is not built (run `make corpus`)")
    return path


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_legacy_map_record(toolchain):
    """corpus/legacy_maps.c: a struct bpf_map_def-style record in SEC("maps")."""
    obj = load_object(_built("legacy_maps", toolchain))
    (mdef,) = [m for m in obj.maps if m.origin != "global"]
    assert (mdef.name, mdef.section, mdef.origin) == ("legacy_blocklist", "maps", "legacy")
    assert (mdef.type.name, mdef.key_size, mdef.value_size, mdef.max_entries, mdef.flags) == ("hash", 4, 4, 1024, 0)
    (prog,) = obj.programs
    assert (prog.name, prog.section) == ("xdp_legacy", "prog")


@pytest.mark.parametrize("toolchain", TOOLCHAINS[:3])
def test_static_prog_array_slots(toolchain):
    """corpus/tailcall_dispatch.c initialises jmp_table.values with its three handlers."""
    source = corpus.source_of("tailcall_dispatch").read_text()
    slots = {name: int(value) for name, value in re.findall(r"(SLOT_\w+) = (\d+)", source)}
    expected = {slots[slot]: prog for slot, prog in re.findall(r"\[(SLOT_\w+)\]\s*=\s*\(void \*\)&(\w+)", source)}
    assert len(expected) == 3
    obj = load_object(_built("tailcall_dispatch", toolchain))
    jmp = obj.map("jmp_table")
    assert jmp.type.name == "prog_array" and jmp.max_entries == 3
    assert jmp.static_values == expected
    assert set(expected.values()) <= {p.name for p in obj.programs}


def test_objects_without_btf_still_lift():
    """nobtf builds: programs, legacy maps and code are all there, only names from BTF and
    line info are missing."""
    built = corpus.built_objects("nobtf")
    require(bool(built), "nobtf corpus is not built")
    for path in built:
        obj = load_object(path)
        assert obj.btf is None and obj.btf_ext is None and obj.source_files == []
        assert obj.programs, path
        for mdef in obj.maps:
            if mdef.origin == "global":
                assert all(v.type is None for v in mdef.variables)


def _readelf_symbols(path):
    tool = require_tool("llvm-readelf-19")
    out = subprocess.run([tool, "-s", "-S", "--wide", str(path)], check=True, capture_output=True, text=True).stdout
    sections = dict(re.findall(r"^\s*\[\s*(\d+)\]\s+(\S+)", out, re.M))
    symbols = []
    for value, size, kind, ndx, name in re.findall(
        r"^\s*\d+:\s+([0-9a-f]+)\s+(\d+)\s+(\w+)\s+\w+\s+\w+\s+(\w+)\s+(\S+)$", out, re.M
    ):
        if kind == "OBJECT" and ndx.isdigit():
            symbols.append((sections[ndx], name, int(value, 16), int(size)))
    return symbols


def _readelf_data_sections(path) -> dict[str, tuple[str, int]]:
    """Allocated, non-empty `.rodata*`/`.data*`/`.bss*` sections, name -> (type, size), as
    llvm-readelf lists them: libbpf makes a one-entry array map of each."""
    tool = require_tool("llvm-readelf-19")
    out = subprocess.run([tool, "-S", "--wide", str(path)], check=True, capture_output=True, text=True).stdout
    found = {}
    for name, kind, size, flags in re.findall(
        r"^\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\s+(\S*)\s", out, re.M
    ):
        if re.match(r"\.(rodata|data|bss)(\.|$)", name) and "A" in flags and int(size, 16):
            found[name] = (kind, int(size, 16))
    return found


def _readelf_bytes(path, section: str) -> bytes:
    """A section's contents from llvm-readelf's hex dump."""
    tool = require_tool("llvm-readelf-19")
    out = subprocess.run([tool, "-x", section, str(path)], check=True, capture_output=True, text=True).stdout
    return bytes.fromhex(
        "".join("".join(m.split()) for m in re.findall(r"^0x[0-9a-f]+ ((?:[0-9a-f]{2,8} ){1,4})", out, re.M))
    )


@pytest.mark.parametrize("path", object_params())
def test_global_data_matches_readelf(path):
    """Global-data maps against llvm-readelf (not the lifter's own ELF reader): the same
    sections (also when both have none: the lifter must not invent one), sizes, initial
    bytes from the hex dump (zeros for .bss), and every variable symbol."""
    path = need_object(path)
    obj = load_object(path)
    theirs = _readelf_data_sections(path)
    ours = {m.section: m for m in obj.maps if m.origin == "global"}
    assert sorted(ours) == sorted(theirs)
    for name, (kind, size) in theirs.items():
        mdef = ours[name]
        assert mdef.value_size == size and mdef.max_entries == 1
        want = bytes(size) if kind == "NOBITS" else _readelf_bytes(path, name)
        assert mdef.initial == want, name
    variables = {(m.section, v.name, v.offset, v.size) for m in ours.values() for v in m.variables}
    symbols = {s for s in _readelf_symbols(path) if s[0] in theirs}
    # BTF lists static variables that have no symbol (LLVM drops local symbols), so ours may
    # be larger; every symbol must be there exactly.
    assert symbols <= variables


def test_global_data_comparison_is_not_vacuous():
    """corpus/globals.c declares one .rodata, one .data and one .bss variable."""
    path = need_object(corpus.BUILD_DIR / "clang" / "globals.o")
    assert sorted(_readelf_data_sections(path)) == [".bss", ".data", ".rodata"]
    assert {s[1] for s in _readelf_symbols(path)} >= {"blocked_port", "drop_enabled", "packets_seen"}
