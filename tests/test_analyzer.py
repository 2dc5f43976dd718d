"""The analyzer against independent oracles: hand-derived ISA results, the corpus's
hand-written `// expect:` classes, hand-derived path conditions for the seed's cases
(proved equivalent with z3), and the running kernel (witness and random packets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import z3

import corpus
from analyzer import kernel
from analyzer.classify import RANK, classify, map_classes
from analyzer.explore import Options, explore
from analyzer.semantics import alu, compare
from analyzer.symbolic import PACKET, PACKET_LEN
from analyzer.verify import verify
from lifter.insn import AluOp, Cond
from lifter.program import load_object
from offload.cli import main
from tests.conftest import corpus_object, need_object, object_params, require
from tests.test_kernel_runner import kernel_ready


def val(e) -> int:
    return z3.simplify(e).as_long()


# ---------------------------------------------------------------- instruction semantics
# Expected values derived by hand from RFC 9669 section 4.


@pytest.mark.parametrize(
    "op,wide,a,b,want",
    [
        (AluOp.DIV, True, 7, 0, 0),  # division by zero gives 0
        (AluOp.MOD, True, 7, 0, 7),  # modulo by zero leaves dst
        (AluOp.MOD, False, (1 << 40) | 7, 0, 7),  # ... zero-extended from 32 bits
        (AluOp.SDIV, True, -7 % (1 << 64), 2, -3 % (1 << 64)),  # truncates toward zero
        (AluOp.SMOD, True, -7 % (1 << 64), 2, -1 % (1 << 64)),  # sign of the dividend
        (AluOp.ADD, False, 0xFFFFFFFF, 1, 0),  # 32-bit wrap, upper half zeroed
        (AluOp.LSH, True, 1, 65, 2),  # shift count masked to 6 bits
        (AluOp.LSH, False, 1, 33, 2),  # ... to 5 bits for 32-bit
        (AluOp.ARSH, False, 0x80000000, 4, 0xF8000000),  # sign of bit 31, zero-extended
        (AluOp.RSH, True, 1 << 63, 63, 1),
    ],
)
def test_alu(op, wide, a, b, want):
    assert val(alu(op, wide, z3.BitVecVal(a, 64), z3.BitVecVal(b, 64))) == want


@pytest.mark.parametrize(
    "cond,wide,a,b,want",
    [
        (Cond.GT, True, -1 % (1 << 64), 1, True),  # unsigned
        (Cond.SGT, True, -1 % (1 << 64), 1, False),  # signed
        (Cond.EQ, False, (1 << 32) | 5, 5, True),  # jmp32 looks at the low half only
        (Cond.SET, True, 6, 1, False),
        (Cond.SET, True, 6, 2, True),
    ],
)
def test_compare(cond, wide, a, b, want):
    assert z3.is_true(z3.simplify(compare(cond, wide, z3.BitVecVal(a, 64), z3.BitVecVal(b, 64)))) == want


# ---------------------------------------------------------------- corpus classes


def _objects_with_lines() -> list:
    # bpf-gcc 12 writes no .BTF.ext line info, so only clang objects map jumps to lines.
    objs = [p for tc in ("clang", "clang-v4") for p in corpus.built_objects(tc)]
    if not objs:
        return [pytest.param(None, id="not-built")]
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in objs]


#: How far below its own line a compiled test may be attributed (clang puts the first
#: compare of `a && b` on the statement before, or folds a later test into an earlier one).
LINE_SLACK = 3


@pytest.mark.parametrize("path", _objects_with_lines())
def test_corpus_classes(path):
    """Every annotated condition that survives compilation has its hand-written
    class: the least offloadable class among the conditional jumps of its line equals the
    annotation (a mixed condition's jumps may each be more offloadable), and no jump is less
    offloadable than its line says. A jump may sit up to LINE_SLACK lines above its
    condition (compiler line attribution)."""
    require(path is not None, "corpus is not built (run `make corpus`)")
    obj = load_object(path)
    src = corpus.source_of(path)
    expected = corpus.line_expectations(path.stem)
    found: dict[int, list[str]] = {}
    problems = []
    for prog in [p for p in obj.programs if p.is_xdp]:  # vlan_sections' tc program is refused
        e = explore(obj, prog)
        cut = [p.truncated for p in e.paths if p.truncated and "unknown program" not in p.truncated]
        assert not cut, cut
        for b in classify(e):
            if b.site.kind != "jump" or not b.file or Path(b.file).name != src.name:
                continue
            candidates = [ln for ln in range(b.line, b.line + LINE_SLACK + 1) if ln in expected]
            match = next((ln for ln in candidates if RANK[expected[ln]] >= RANK[b.cls]), None)
            if match is None:
                problems.append(
                    f"{src.name}:{b.line} pc {b.site.pc}: {b.cls} {b.detail}, expected "
                    f"{[expected[ln] for ln in candidates] or 'no annotation nearby'}"
                )
            else:
                found.setdefault(match, []).append(b.cls)
    # Conditions may vanish (preprocessor variants, constant folding, merged tests), so an
    # annotation without a jump is not an error; one whose jumps disagree is.
    for line, cls in expected.items():
        if line in found and max(found[line], key=RANK.__getitem__) != cls:
            problems.append(f"{src.name}:{line}: expected {cls}, its jumps are {found[line]}")
    assert found or not expected, f"no annotated condition found in {path}"
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", _objects_with_lines())
def test_corpus_map_classes(path):
    require(path is not None, "corpus is not built (run `make corpus`)")
    obj = load_object(path)
    want = corpus.map_expectations(path.stem)
    got: dict[str, str] = {}
    for prog in [p for p in obj.programs if p.is_xdp]:
        e = explore(obj, prog)
        for name, cls in map_classes(e, classify(e)).items():
            if cls != "unused":
                got[name] = cls if got.get(name) in (None, cls) else max(got[name], cls)
    assert {m: got.get(m) for m in want} == want


def test_expectation_order_matches_classifier():
    """The corpus README's "least offloadable" order is the classifier's."""
    order = ["constant", "stateless", "control-plane-map", "ctx", "data-plane-state", "helper"]
    assert sorted(order, key=RANK.__getitem__) == order


# ---------------------------------------------------------------- seed cases, exactly


def _union(e, verdict: str) -> z3.BoolRef:
    return z3.Or(*[e.condition(p) for p in e.paths if p.verdict == verdict])


def _equivalent(a: z3.BoolRef, b: z3.BoolRef, e) -> bool:
    s = z3.Solver()
    s.add(*e.base_constraints(), a != b)
    return s.check() == z3.unsat


def byte(i: int) -> z3.BitVecRef:
    return z3.Select(PACKET, i)


def be16(i: int) -> z3.BitVecRef:
    return z3.Concat(byte(i), byte(i + 1))


def be32(i: int) -> z3.BitVecRef:
    return z3.Concat(byte(i), byte(i + 1), byte(i + 2), byte(i + 3))


IPV4 = z3.And(z3.UGE(PACKET_LEN, 34), be16(12) == 0x0800)


@pytest.mark.parametrize("toolchain", ["clang", "clang-v4", "gcc", "nobtf"])
def test_seed_goto(toolchain):
    """§6.5.2: the goto makes every IPv4 packet (with a full IPv4 header) DROP."""
    path = corpus.BUILD_DIR / toolchain / "thesis_goto.o"
    require(path.is_file(), f"{path} is not built")
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    assert {p.verdict for p in e.paths} == {"DROP", "PASS"} and not any(p.truncated for p in e.paths)
    assert _equivalent(_union(e, "DROP"), IPV4, e)


@pytest.mark.parametrize("toolchain", ["clang", "clang-v4", "gcc", "nobtf"])
def test_seed_const_cond(toolchain):
    """§6.5.3: `i == 20` is always true: DROP exactly for IPv4 from 192.168.1.21."""
    path = corpus.BUILD_DIR / toolchain / "thesis_const_cond.o"
    require(path.is_file(), f"{path} is not built")
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    assert _equivalent(_union(e, "DROP"), z3.And(IPV4, be32(26) == 0xC0A80115), e)


@pytest.mark.parametrize("toolchain", ["clang", "clang-v4", "gcc", "nobtf"])
def test_seed_static_rules(toolchain):
    """§6.5.1: from .1.21 drop unless TCP to port 22 (header complete); to .6.21 drop."""
    path = corpus.BUILD_DIR / toolchain / "thesis_static_rules.o"
    require(path.is_file(), f"{path} is not built")
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    ssh = z3.And(byte(23) == 6, z3.UGE(PACKET_LEN, 54), be16(36) == 22)
    drop = z3.And(
        IPV4, z3.Or(z3.And(be32(26) == 0xC0A80115, z3.Not(ssh)), z3.And(be32(26) != 0xC0A80115, be32(30) == 0xC0A80615))
    )
    assert _equivalent(_union(e, "DROP"), drop, e)


def test_xdp_filter_classes():
    """Debian's xdp-filter: the VLAN loop and port tests are stateless; the filter maps are
    read for their value flags and count hits in the bits above them (z3 proves the count
    never changes a flag: control-plane); the per-CPU stats map is only counted into."""
    objs = [p for p in corpus.external_objects() if p.name.startswith("xdpfilt_")]
    require(bool(objs), "external objects are missing (run `make external`)")
    for path in objs:
        obj = load_object(path)
        e = explore(obj, obj.programs[0])
        branches = classify(e)
        classes = {b.cls for b in branches}
        assert classes <= {"constant", "stateless", "control-plane-map"}, (path, classes)
        assert "stateless" in classes, path
        maps = map_classes(e, branches)
        assert maps["xdp_stats_map"] == "stats-only", path
        filters = {m: c for m, c in maps.items() if m.startswith("filter_")}
        assert set(filters.values()) <= {"control-plane", "unused"}, (path, filters)
        if "ports" in path.name or "all" in path.name:
            assert filters["filter_ports"] == "control-plane", path


# ---------------------------------------------------------------- the kernel agrees

#: Random packets per program in the suite (`xdp2tc verify` defaults to 1000).
RANDOM_PACKETS = 60


@pytest.mark.parametrize("path", object_params())
def test_kernel_agrees(path, kernel_checks):
    """Every witness and random packet: the kernel's verdict and output packet are the
    predicted ones (0 mismatches)."""
    path = need_object(path)
    kernel_ready()
    toolchain = path.parent.name
    if corpus.BUILD_DIR in path.parents and corpus.expected_load_failures(path.stem).get(toolchain):
        pytest.skip("known verifier rejection (tested in test_kernel_runner)")
    obj = load_object(path)
    progs = [p for p in obj.programs if p.is_xdp and not p.section.startswith("xdp/devmap")]
    if not progs:
        pytest.skip("no test-runnable XDP program (devmap egress / tracing only)")
    checked = witnessed = 0
    for prog in progs:
        e = explore(obj, prog, Options())
        with kernel.load(path, programs=[prog.name]) as loaded:
            report = verify(e, loaded, RANDOM_PACKETS)
        assert not report.mismatches, "\n".join(map(str, report.mismatches[:5]))
        # A witness the kernel refuses points at a bad witness, not at a test-run limit.
        rejected = [(i, why) for i, why in report.unwitnessable if why.startswith("map entry rejected")]
        assert not rejected, rejected
        checked += report.packets
        witnessed += report.witnesses
    # Random packets alone would make `checked` positive: the z3 witnesses must run too.
    assert witnessed > 0, "no path witnessed"
    kernel_checks.append((f"{toolchain}/{path.name}", checked))


# ---------------------------------------------------------------- the command


def test_analyze_json(capsys):
    path = corpus.BUILD_DIR / "clang" / "thesis_static_rules.o"
    require(path.is_file(), f"{path} is not built")
    assert main(["analyze", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "xdp2tc.analyze/1"
    assert doc["summary"]["verdicts"].keys() == {"DROP", "PASS"}
    assert all(b["class"] == "stateless" for b in doc["branches"])
    assert all(p["condition"].startswith("(") for p in doc["paths"])
    assert {p["verdict"] for p in doc["paths"]} == {"DROP", "PASS"}


def test_analyze_refuses_non_xdp(capsys):
    path = corpus.EXTERNAL_DIR / "libxdp1" / "xdpdump_bpf.o"
    require(path.is_file(), "external objects are missing (run `make external`)")
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no XDP program" in err


def test_unsupported_call_is_reported():
    """gcc 12's libcall for an atomic: the path ends UNKNOWN and names the function."""
    path = corpus.BUILD_DIR / "gcc" / "atomics.o"
    require(path.is_file(), f"{path} is not built")
    obj = load_object(path)
    e = explore(obj, obj.programs[0])
    unknown = [p for p in e.paths if p.verdict == "UNKNOWN"]
    assert unknown and all("__sync_" in p.truncated for p in unknown)


def test_loop_bound_cut_is_marked():
    path = corpus.BUILD_DIR / "clang" / "bounded_loop.o"
    require(path.is_file(), f"{path} is not built")
    obj = load_object(path)
    e = explore(obj, obj.programs[0], Options(loop_bound=2))
    cut = [p for p in e.paths if p.truncated]
    assert cut and all("loop" in p.truncated and p.verdict == "UNKNOWN" for p in cut)


def test_budget_cut_is_marked():
    path = corpus.BUILD_DIR / "clang" / "thesis_static_rules.o"
    require(path.is_file(), f"{path} is not built")
    obj = load_object(path)
    e = explore(obj, obj.programs[0], Options(max_insns=10))
    assert any(p.truncated and "budget" in p.truncated for p in e.paths)


def test_verify_command(capsys):
    kernel_ready()
    path = corpus.BUILD_DIR / "clang" / "port_flags_map.o"
    require(path.is_file(), f"{path} is not built")
    assert main(["verify", str(path), "--random", "50"]) == 0
    out = capsys.readouterr().out
    assert "0 mismatches" in out


def test_nonlinear_terms_are_the_outermost_products_of_two_variables():
    # By hand: a*b and (a udiv c) multiply/divide two variables; 8*c and a udiv 3 do not;
    # (a*b)*c is one outermost product (the inner a*b is under it).
    from analyzer.symbolic import input_reads, nonlinear_terms

    a, b, c = z3.BitVecs("a b c", 64)
    found = nonlinear_terms(z3.And(a * b + 8 * c == 1, z3.UDiv(a, 3) == z3.UDiv(a, c)), {})
    assert {str(t) for t in found} == {"a*b", "UDiv(a, c)"}
    assert [str(t) for t in nonlinear_terms((a * b) * c == 0, {})] == ["a*b*c"]
    x = z3.Select(PACKET, 3)
    assert {str(t) for t in input_reads(z3.ZeroExt(56, x) * a, {})} == {"pkt[3]", "a"}


def test_nonlinear_paths_are_exactly_feasible():
    # isa_v4 divides and takes the remainder of two packet fields (id / ttl, id % ttl): the
    # explorer keeps those terms out of its solver (explore.Nonlinear). Oracle: a plain z3
    # solver over the real terms says every path it kept is feasible, and together they
    # cover every input.
    obj = load_object(corpus_object("isa_v4"))
    e = explore(obj, obj.programs[0], Options())
    assert {p.verdict for p in e.paths} == {"DROP", "PASS"}
    for p in e.paths:
        s = z3.Solver()
        s.add(*e.environment(), e.condition(p))
        assert s.check() == z3.sat, p.id
    s = z3.Solver()
    s.add(*e.environment(), z3.Not(z3.Or([e.condition(p) for p in e.paths])))
    assert s.check() == z3.unsat
