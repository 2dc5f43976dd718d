"""The `xdp2tc` command on corpus programs: what a user sees, checked against the corpus
sources (hand-written) and, for dot output, against graphviz itself."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter

import pytest
from conftest import CLANG, LLVM_OBJDUMP, ROOT, corpus_object, require, require_kernel, require_tool, run_cli

import corpus
from offload.cli import main


def test_info_lists_programs_maps_and_sources(capsys):
    code, out, _ = run_cli(capsys, "info", corpus_object("thesis_ddos_blacklist"))
    assert code == 0
    source = corpus.source_of("thesis_ddos_blacklist").read_text()
    prog = re.search(r'SEC\("xdp"\)\s*int (\w+)', source).group(1)
    maps = re.findall(r"\} (\w+) SEC\(\"\.maps\"\)", source)
    assert prog in out and maps and all(m in out for m in maps)
    assert "thesis_ddos_blacklist.c" in out


def test_info_json_is_versioned(capsys):
    code, out, _ = run_cli(capsys, "info", "--json", corpus_object("tailcall_dispatch"))
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "xdp2tc.info/1"
    assert {p["name"] for p in doc["programs"]} == {
        "xdp_dispatch",
        "xdp_handle_tcp",
        "xdp_handle_udp",
        "xdp_handle_icmp",
    }
    (jmp,) = [m for m in doc["maps"] if m["name"] == "jmp_table"]
    assert jmp["static_values"] == {"0": "xdp_handle_tcp", "1": "xdp_handle_udp", "2": "xdp_handle_icmp"}


def test_disasm_program_includes_its_subprograms(capsys):
    source = corpus.source_of("subprog_call").read_text()
    prog = re.search(r'SEC\("xdp"\)\s*int (\w+)', source).group(1)
    sub = re.search(r"__noinline int (\w+)\(", source).group(1)
    code, out, _ = run_cli(capsys, "disasm", "--program", prog, corpus_object("subprog_call"))
    assert code == 0, out
    assert f"<{prog}>:" in out and f"<{sub}>:" in out and "Disassembly of section .text:" in out


def test_disasm_lines_show_source(capsys):
    code, out, _ = run_cli(capsys, "disasm", "--lines", corpus_object("thesis_static_rules"))
    source = corpus.source_of("thesis_static_rules").read_text().splitlines()
    shown = re.findall(r"^; .*thesis_static_rules\.c:(\d+):\d+  (.*)$", out, re.M)
    assert code == 0 and shown
    for line, text in shown:
        assert source[int(line) - 1].strip() == text


def test_cfg_json_finds_the_loop(capsys):
    """corpus/bounded_loop.c keeps one real loop (unrolling disabled); §6.5.1 has none."""
    code, out, _ = run_cli(capsys, "cfg", "--format", "json", corpus_object("bounded_loop"))
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "xdp2tc.cfg/1"
    entry = doc["functions"][0]
    assert len(entry["loops"]) == 1 and len(entry["back_edges"]) == 1
    header, latch = entry["loops"][0]["header"], entry["loops"][0]["latch"]
    assert [latch, header] == entry["back_edges"][0] and header in entry["loops"][0]["body"]
    _, out, _ = run_cli(capsys, "cfg", "--format", "json", corpus_object("thesis_static_rules"))
    assert json.loads(out)["functions"][0]["loops"] == []


@pytest.mark.parametrize("stem", ["thesis_static_rules", "subprog_call", "bpf_loop_cb", "bounded_loop"])
def test_cfg_dot_is_valid_graphviz(capsys, stem, tmp_path):
    dot = require_tool("dot")
    code, out, _ = run_cli(capsys, "cfg", corpus_object(stem))
    assert code == 0
    svg = subprocess.run([dot, "-Tsvg"], input=out, capture_output=True, text=True)
    assert svg.returncode == 0, svg.stderr
    code, out, _ = run_cli(capsys, "cfg", "--format", "svg", corpus_object(stem))
    assert code == 0 and out.lstrip().startswith("<?xml")


def test_choosing_among_several_programs(capsys):
    code, _, err = run_cli(capsys, "cfg", corpus_object("tailcall_dispatch"))
    assert code == 2 and "choose one with --program" in err and "xdp_dispatch" in err
    code, _, err = run_cli(capsys, "cfg", "--program", "nope", corpus_object("tailcall_dispatch"))
    assert code == 2 and "no program named 'nope'" in err


def test_console_script_runs():
    exe = shutil.which("xdp2tc", path=str(ROOT / ".venv" / "bin"))
    require(exe is not None, "the package is not installed in .venv (make setup)")
    result = subprocess.run([exe, "info", corpus_object("thesis_static_rules")], capture_output=True, text=True)
    assert result.returncode == 0 and "xdp_static_rules" in result.stdout


#: Modules `rules` without --check-flower, --maps-from and --pcap-out never runs: importing
#: them costs every run (`check`'s VM and kernel runner, flowercheck's verifier, mapfill's
#: templates and map sources; networkx, which only renderers of the CFG use).
RULES_DOES_NOT_IMPORT = (
    "networkx",
    "offload.check",
    "offload.flowercheck",
    "offload.flowervm",
    "offload.mapfill",
    "offload.mapsource",
    "analyzer.kernel",
    "analyzer.verify",
    "rules.templates",
)


def test_rules_imports_only_what_it_runs():
    """A plain `rules` run (a fresh process, as a user runs it) imports none of the modules
    of the options it was not given, nor angr."""
    code = (
        "import contextlib, io, sys; from offload.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()): rc = main(['rules', {corpus_object('allow_block')!r}, "
        "'--dev', 'eth0'])\n"
        f"print(rc, sorted(m for m in {RULES_DOES_NOT_IMPORT + ('angr',)!r} if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.stdout.split("\n")[0] == "0 []", proc.stdout + proc.stderr


def test_version_is_looked_up_only_when_asked():
    """The parser every command builds does not import importlib.metadata (~40 ms a run with
    the lookup); --version does."""
    code = (
        "import sys; from offload.cli import main, parser; parser(''); print('importlib.metadata' in sys.modules); "
        "main(['--version']); print('importlib.metadata' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    lines = proc.stdout.split("\n")
    assert (lines[0], lines[1].startswith("xdp2tc "), lines[2]) == ("False", True, "True"), proc.stdout + proc.stderr


def test_every_corpus_object_loads_in_the_kernel():
    """The kernel's verifier is the oracle that the corpus is real XDP code."""
    require_kernel()
    result = subprocess.run(
        ["bash", str(corpus.CORPUS_DIR / "check_load.sh")], capture_output=True, text=True, timeout=600
    )
    print(result.stdout[-2000:])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"summary: \d+ pass, 0 fail", result.stdout)


# ---------------------------------------------------------------- options checked up front (issue 11, item 5)

#: Every bad value: (argv after the command's FILE, what the one-line error names).
BAD_OPTIONS = [
    (["rules", "--dev", ""], "--dev"),
    (["rules", "--dev", "a b"], "--dev"),
    (["rules", "--dev", "a\tb"], "--dev"),
    (["rules", "--dev", "eth0\nreboot"], "--dev"),
    (["rules", "--dev", "a/b"], "--dev"),
    (["rules", "--dev", "eth0:1"], "--dev"),
    (["rules", "--dev", "."], "--dev"),
    (["rules", "--dev", ".."], "--dev"),
    (["rules", "--dev", "x" * 16], "--dev"),
    (["rules", "--dev", "é" * 8], "--dev"),  # 8 characters, 16 bytes
    (["rules", "--dev", "x" * 25], "--dev"),
    (["rules", "--dev", "eth0; rm -rf /"], "--dev"),
    (["rules", "--dev", "eth0;reboot"], "--dev"),
    (["rules", "--dev", "eth\x01"], "--dev"),
    (["rules", "--dev", "eth0", "--ifname", "4=eth1;reboot"], "--ifname"),
    (["rules", "--dev", "eth0", "--ifname", "four=eth1"], "--ifname"),
    (["rules", "--dev", "eth0", "--ifname", "0=eth1"], "--ifname"),
    (["rules", "--dev", "eth0", "--ifname", "-4=eth1"], "--ifname"),
    (["rules", "--dev", "eth0", "--ifname", "2147483648=eth1"], "--ifname"),
    (["rules", "--dev", "eth0", "--ifname", "4="], "--ifname"),
    (["rules", "--dev", "eth0", "--ifname", "4"], "--ifname"),
    (["rules", "--dev", "eth0", "--ifname", "4=a/b"], "--ifname"),
    (["rules", "--dev", "eth0", "--ifname", "4=eth1", "--ifname", "4=eth2"], "--ifname"),
    (["rules", "--dev", "eth0", "--assume", "no-ip-options", "--assume", "no-ip-options"], "--assume"),
    (["rules", "--dev", "eth0", "--max-rules", "0"], "--max-rules"),
    (["rules", "--dev", "eth0", "--max-rules", "-1"], "--max-rules"),
    (["rules", "--dev", "eth0", "--max-rules", "many"], "--max-rules"),
    (["rules", "--dev", "eth0", "--max-len", "59"], "--max-len"),
    (["rules", "--dev", "eth0", "--out-dir", "/nonexistent/dir"], "--out-dir"),
    (["analyze", "--max-len", "-1"], "--max-len"),
    (["analyze", "--max-len", "13"], "--max-len"),
    (["analyze", "--loop-bound", "0"], "--loop-bound"),
    (["analyze", "--loop-bound", "-3"], "--loop-bound"),
    (["analyze", "--max-insns", "0"], "--max-insns"),
    (["analyze", "--max-paths", "0"], "--max-paths"),
    (["analyze", "--max-paths", "1e3"], "--max-paths"),
    (["verify", "--random", "-1"], "--random"),
    (["cost", "--max-paths", "-1"], "--max-paths"),
]


@pytest.mark.parametrize("argv,names", BAD_OPTIONS, ids=lambda v: repr(v) if isinstance(v, list) else v)
def test_bad_option_is_one_line_before_any_work(argv, names, capsys, monkeypatch):
    """Exit 2 and one line on stderr naming the option, before the object is even read (a
    lifter or explorer call fails the test), and no traceback."""
    import importlib

    def forbidden(*_args, **_kw):
        raise AssertionError("the object was read before the options were checked")

    command = importlib.import_module(f"offload.commands.{argv[0]}")
    for name in ("load_object", "explore"):
        if hasattr(command, name):
            monkeypatch.setattr(command, name, forbidden)
    code = main([argv[0], corpus_object("two_progs_one_section"), *argv[1:]])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out)
    assert err.count("\n") == 1 and err.startswith("xdp2tc: ") and names in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["calibrate", "--repeat", "0"], ["calibrate", "--rounds", "-1"], []])
def test_bad_option_without_file(argv, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("xdp2tc")


def test_good_options_are_accepted():
    """The boundaries: 15-byte names (the kernel's IFNAMSIZ - 1), the largest ifindex, the
    smallest bounds."""
    from offload.cli import parser

    args = parser().parse_args(
        [
            "rules",
            "f.o",
            "--dev",
            "x" * 15,
            "--ifname",
            "2147483647=br-lan.100",
            "--ifname",
            "1=veth_a@b",
            "--max-rules",
            "1",
            "--max-len",
            "60",
            "--loop-bound",
            "1",
            "--max-insns",
            "1",
            "--max-paths",
            "1",
        ]
    )
    assert args.dev == "x" * 15 and args.ifname == [(2147483647, "br-lan.100"), (1, "veth_a@b")]
    assert (args.max_rules, args.max_len, args.loop_bound, args.max_insns, args.max_paths) == (1, 60, 1, 1, 1)
    assert parser().parse_args(["verify", "f.o", "--random", "0"]).random == 0


def test_version(capsys):
    """--version prints the version pyproject.toml declares."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"xdp2tc {declared}\n"


# ---------------------------------------------------------------- --no-merge (issue 14)


def test_no_merge_gives_every_path_apart_with_the_same_verdicts(capsys):
    """or_stress with ORS=2: four nested ifs, each an OR of 2 equality tests (corpus/or_stress.c),
    after three early PASS tests (too short, not IPv4, not TCP). Unmerged, by hand from the
    source: an OR of 2 holds in 2 ways (first test, or first false and second true) and fails
    in 1, so DROP takes 2^4 = 16 paths and the ORs' PASS 1 + 2 + 4 + 8 = 15, plus the 3 early
    PASS paths: 34. By default states meeting at a join point are merged, so fewer. The drop
    condition (the OR of the DROP paths' conditions) is the same formula either way (z3)."""
    import z3

    from analyzer.explore import explore
    from lifter.program import load_object
    from offload.cli import parser
    from offload.options import exploration_options

    path = corpus_object("or_stress_k2")
    code, out, _ = run_cli(capsys, "analyze", "--json", "--no-merge", path)
    unmerged = json.loads(out)
    assert code == 0 and unmerged["options"]["merge"] is False
    assert Counter(p["verdict"] for p in unmerged["paths"]) == {"DROP": 16, "PASS": 18}
    code, out, _ = run_cli(capsys, "analyze", "--json", path)
    merged = json.loads(out)
    assert code == 0 and merged["options"]["merge"] is True
    assert len(merged["paths"]) < len(unmerged["paths"])
    assert {p["verdict"] for p in merged["paths"]} == {p["verdict"] for p in unmerged["paths"]}

    # the same through the options every exploring command reads (offload/options.py)
    obj = load_object(path)
    drops = []
    for argv in (["analyze", path], ["analyze", path, "--no-merge"]):
        options = exploration_options(parser("analyze").parse_args(argv))
        e = explore(obj, obj.program(), options)
        assert options.merge == ("--no-merge" not in argv)
        drops.append((z3.Or(*[e.condition(p) for p in e.paths if p.verdict == "DROP"]), e.environment()))
    s = z3.Solver()
    s.add(*drops[0][1], *drops[1][1], drops[0][0] != drops[1][0])
    assert s.check() == z3.unsat


@pytest.mark.parametrize("command", ["analyze", "verify", "cost", "rules", "check"])
def test_every_exploring_command_takes_no_merge(command):
    from offload.cli import parser

    extra = ["--dev", "eth0"] if command == "rules" else []
    assert parser(command).parse_args([command, "f.o", *extra]).merge is True
    assert parser(command).parse_args([command, "f.o", *extra, "--no-merge"]).merge is False


# ---------------------------------------------------------------- program order (issue 14)

#: Three XDP programs whose ELF order (sections as clang emits them, in order of first use;
#: functions in a section by address) is not alphabetical: `zz_first` in `xdp/b`, then
#: `mm_second` and `aa_third` in `xdp`.
ORDER_SOURCE = """
#define SEC(name) __attribute__((section(name), used))
struct xdp_md;
SEC("xdp/b") int zz_first(struct xdp_md *ctx) { return 1; }
SEC("xdp") int mm_second(struct xdp_md *ctx) { return 2; }
SEC("xdp") int aa_third(struct xdp_md *ctx) { return 1; }
char _license[] SEC("license") = "GPL";
"""


def elf_program_order(path) -> list[str]:
    """The object's functions in ELF order, read by llvm-objdump (not by the lifter): code
    sections by section index (`-h`), FUNC symbols in each by address (`-t`)."""
    tool = require_tool(LLVM_OBJDUMP)
    headers = subprocess.run([tool, "-h", str(path)], check=True, capture_output=True, text=True).stdout
    index = {m[2]: int(m[1]) for m in re.finditer(r"^\s*(\d+)\s+(\S+)\s+\w+\s+\w+\s+TEXT$", headers, re.M)}
    table = subprocess.run([tool, "-t", str(path)], check=True, capture_output=True, text=True).stdout
    funcs = re.findall(r"^([0-9a-f]{16}) g\s+F (\S+)\s+[0-9a-f]+ (\w+)$", table, re.M)
    return [name for value, section, name in sorted(funcs, key=lambda f: (index[f[1]], int(f[0], 16)))]


def test_analyze_lists_programs_in_the_objects_order_as_info_does(capsys, tmp_path):
    clang = require_tool(CLANG)
    src = tmp_path / "order.c"
    src.write_text(ORDER_SOURCE)
    obj = tmp_path / "order.o"
    subprocess.run([clang, "-O2", "-target", "bpf", "-c", str(src), "-o", str(obj)], check=True)
    expected = elf_program_order(obj)
    assert expected == ["zz_first", "mm_second", "aa_third"]  # as the source puts them
    assert expected != sorted(expected)

    code, out, _ = run_cli(capsys, "info", "--json", str(obj))
    assert code == 0 and [p["name"] for p in json.loads(out)["programs"]] == expected
    code, out, _ = run_cli(capsys, "info", str(obj))
    assert code == 0 and [n for n in re.findall(r"^  (\w+)\s+xdp", out, re.M)] == expected
    code, out, _ = run_cli(capsys, "analyze", str(obj))
    assert code == 0 and re.findall(r": program (\w+) \(", out) == expected
    code, out, _ = run_cli(capsys, "analyze", "--json", str(obj))
    doc = json.loads(out)
    assert code == 0 and [p["program"] for p in doc["programs"]] == expected
    assert [sorted({p["verdict"] for p in d["paths"]}) for d in doc["programs"]] == [["DROP"], ["PASS"], ["DROP"]]
