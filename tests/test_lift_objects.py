"""Every corpus and external object, lifted and checked against independent readers:
llvm-objdump for decoding (line by line), the bytes themselves for encoding, llvm-objdump's
jump targets for CFG edges, and libbpf for programs and maps."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import networkx as nx
import pytest
from conftest import need_object, objdump, object_params, require
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.libbpf import LibbpfError, library, open_object

import corpus
from lifter.cfg import FALLTHROUGH, GOTO, TAKEN, Block, Cfg, Loop, find_loops
from lifter.decode import decode
from lifter.encode import encode_all
from lifter.insn import Call, Exit
from lifter.opcodes import CallSrc
from lifter.printer import objdump_text
from lifter.program import load_object

OBJECTS = object_params()
_INSN_LINE = re.compile(r"^\s*(\d+):\t([0-9a-f ]+)\t(.*)$")


def _functions(obj):
    order = [s.name for s in obj.image.sections]
    return sorted(obj.functions.values(), key=lambda f: (order.index(f.section), f.start))


def _accepted(ours: str, theirs: str) -> bool:
    """The one accepted decoding difference: LLVM 19 does not know the Linux 6.15
    load-acquire/store-release atomics and prints <unknown>."""
    return theirs.endswith("\t<unknown>") and ("load_acquire" in ours or "store_release" in ours)


@pytest.mark.parametrize("path", OBJECTS)
def test_disassembly_equals_llvm_objdump(path):
    path = need_object(path)
    obj = load_object(path)
    ours = objdump_text(obj, _functions(obj)).splitlines()
    theirs = objdump(path).splitlines()
    assert len(ours) == len(theirs), "\n".join(_first_diff(ours, theirs))
    for n, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b or _accepted(a, b), f"line {n + 1}: ours {a!r} != llvm-objdump {b!r}"


def _first_diff(ours, theirs):
    for n, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return [f"first difference at line {n + 1}:", f"  ours:   {a!r}", f"  theirs: {b!r}"]
    return [f"lengths differ: ours {len(ours)}, theirs {len(theirs)}"]


@pytest.mark.parametrize("path", OBJECTS)
def test_encode_decode_is_identity(path):
    path = need_object(path)
    obj = load_object(path)
    for section in obj.image.sections:
        if not section.is_code:
            continue
        assert encode_all(decode(section.data)) == section.data, section.name
        # Relocated, split into functions: still the same bytes.
        funcs = [f for f in _functions(obj) if f.section == section.name]
        assert b"".join(encode_all(f.insns) for f in funcs) == section.data, section.name


def _objdump_jumps(path: Path) -> dict[tuple[str, int], tuple[str, int]]:
    """(section, pc) -> ('goto'|'cond'|'exit', target) read from llvm-objdump's text."""
    out = {}
    section = None
    for line in objdump(path).splitlines():
        if line.startswith("Disassembly of section "):
            section = line[len("Disassembly of section ") : -1]
        m = _INSN_LINE.match(line)
        if not m:
            continue
        pc, text = int(m.group(1)), m.group(3)
        jm = re.match(r"(?:if .* )?goto(?:l)? ([+-]0x[0-9a-f]+)", text)
        if jm:
            kind = "cond" if text.startswith("if ") else "goto"
            out[(section, pc)] = (kind, pc + 1 + int(jm.group(1), 16))
        elif text == "exit":
            out[(section, pc)] = ("exit", -1)
    return out


@pytest.mark.parametrize("path", OBJECTS)
def test_cfg_partitions_code_and_follows_jumps(path):
    path = need_object(path)
    obj = load_object(path)
    jumps = _objdump_jumps(path)
    for func in obj.functions.values():
        cfg = func.cfg
        covered = [i.pc for b in cfg.blocks.values() for i in b.insns]
        assert sorted(covered) == [i.pc for i in func.insns], f"{func.name}: blocks do not partition"
        assert cfg.entry == func.start
        for block in cfg.blocks.values():
            last = block.last
            edges = {(dst, kind) for dst, kind in cfg.successors(block.start)}
            jump = jumps.get((func.section, last.pc))
            if jump is None:
                assert edges == {(block.end, FALLTHROUGH)}, f"{func.name}@{last.pc}"
            elif jump[0] == "exit":
                assert edges == set() and block.start in cfg.exits
            elif jump[0] == "goto":
                assert edges == {(jump[1], GOTO)}
            else:
                expected = {(block.end, FALLTHROUGH)} | ({(jump[1], TAKEN)} if jump[1] != block.end else set())
                assert edges == expected, f"{func.name}@{last.pc}"
            # Only a jump target or the instruction after a block end starts a block.
            for insn in block.insns[:-1]:
                assert (func.section, insn.pc) not in jumps
        assert set(cfg.exits) == {b.start for b in cfg.blocks.values() if isinstance(b.last, Exit)}


def _networkx_loops(cfg: Cfg) -> tuple:
    """The CFG's loops as lifter/cfg.py found them with networkx until issue 14 (its
    dominators, descendants and ancestors): the reference for the dict-based code. The
    retreating edges are the same DFS as lifter's (its answers only depend on the edges)."""
    graph = cfg.graph
    reachable = nx.descendants(graph, cfg.entry) | {cfg.entry}
    unreachable = sorted(set(graph) - reachable)
    sub = graph.subgraph(reachable)
    idom = nx.immediate_dominators(sub, cfg.entry)

    def dominates(a: int, b: int) -> bool:
        while True:
            if a == b:
                return True
            parent = idom.get(b, b)
            if parent == b:
                return False
            b = parent

    back, loops, irreducible = [], [], []
    stack, on_stack, visited = [(cfg.entry, iter(sorted(sub.successors(cfg.entry))))], {cfg.entry}, {cfg.entry}
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_stack.discard(node)
        elif child in on_stack:
            tail, head = node, child
            if dominates(head, tail):
                back.append((tail, head))
                without_head = sub.subgraph(set(sub) - {head})
                body = {head, tail} | (nx.ancestors(without_head, tail) if tail != head else set())
                loops.append(Loop(head, tail, frozenset(body)))
            else:
                irreducible.append((tail, head))
        elif child not in visited:
            visited.add(child)
            on_stack.add(child)
            stack.append((child, iter(sorted(sub.successors(child)))))
    return unreachable, sorted(back), sorted(loops, key=lambda loop: (loop.header, loop.latch)), irreducible


def _same_as_networkx(cfg: Cfg) -> None:
    assert (cfg.unreachable, cfg.back_edges, cfg.loops, cfg.irreducible) == _networkx_loops(cfg)
    assert cfg.postorder() == list(nx.dfs_postorder_nodes(cfg.graph, cfg.entry))
    assert list(cfg.graph.edges(data="kind")) == [(a, b, k) for a, succ in cfg.edges.items() for b, k in succ.items()]


@pytest.mark.parametrize("path", OBJECTS)
def test_cfg_loops_and_order_equal_networkx(path):
    """Loops, unreachable blocks and the explorer's block order (post-order) as networkx
    finds them, on every corpus object; the call graph as the calls found."""
    obj = load_object(need_object(path))
    for func in obj.functions.values():
        _same_as_networkx(func.cfg)
    for prog in obj.programs:
        assert set(prog.call_graph) == {f.key for f in prog.functions}
        assert set(prog.call_graph.edges) == {(f.key, callee) for f in prog.functions for _, callee, _ in f.callees()}


def _graphs(n: int):
    """n blocks' successor lists (0 to 3 each, repeats allowed)."""
    return st.lists(st.lists(st.integers(0, n - 1), max_size=3), min_size=n, max_size=n)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9).flatmap(_graphs))
def test_loops_of_any_graph_equal_networkx(successors):
    """The same on arbitrary graphs (irreducible cycles, self-loops, unreachable nodes,
    nested loops sharing a header) of up to 9 blocks, entry 0."""
    edges = {b: {s: TAKEN for s in succ} for b, succ in enumerate(successors)}
    cfg = Cfg("f", {b: Block(b, b + 1, ()) for b in edges}, edges, 0)
    find_loops(cfg)
    _same_as_networkx(cfg)


def _libbpf_map_match(ours, lmap):
    if not lmap.internal:
        return next((m for m in ours if m.name == lmap.name and m.origin != "global"), None)
    suffix = lmap.name[lmap.name.index(".") :]
    return next((m for m in ours if m.origin == "global" and m.name.startswith(suffix)), None)


@pytest.mark.parametrize("path", OBJECTS)
def test_programs_and_maps_equal_libbpf(path):
    path = need_object(path)
    require(library() is not None, "libbpf1 is not installed")
    obj = load_object(path)
    if any(m.origin == "legacy" for m in obj.maps):
        # libbpf 1.x refuses legacy `maps` sections; tests/test_maps.py checks them by hand.
        with pytest.raises(LibbpfError):
            open_object(path)
        return
    try:
        ref = open_object(path)
    except LibbpfError as err:
        # libbpf refuses calls to undefined functions (e.g. GCC 12's __sync_* libcalls); the
        # lifter must keep such a call visibly unresolved, never bind it to something.
        unresolved = [
            i
            for f in obj.functions.values()
            for i in f.insns
            if isinstance(i, Call) and i.kind is CallSrc.LOCAL and i.callee is None
        ]
        assert unresolved, f"libbpf cannot open {path} (errno {err}) but the lifter saw nothing wrong"
        return
    ours = {(p.name, p.section): p for p in obj.programs}
    assert set(ours) == {(p.name, p.section) for p in ref.programs}
    for lp in ref.programs:
        prog = ours[(lp.name, lp.section)]
        assert prog.entry.size == lp.insn_cnt
        assert encode_all(prog.entry.insns) == lp.insns
    matched = set()
    for lmap in ref.maps:
        mdef = _libbpf_map_match(obj.maps, lmap)
        assert mdef is not None, f"libbpf map {lmap.name} not found among ours"
        matched.add(mdef.name)
        assert (mdef.type.id, mdef.key_size, mdef.value_size, mdef.max_entries, mdef.flags) == (
            lmap.type,
            lmap.key_size,
            lmap.value_size,
            lmap.max_entries,
            lmap.flags,
        ), lmap.name
        if lmap.initial is not None:
            assert mdef.initial == lmap.initial, lmap.name
    # Maps libbpf does not create: only global-data sections it skips (none expected).
    assert {m.name for m in obj.maps} == matched


def test_every_planned_object_is_built():
    """The object lists the tests run over cannot shrink silently: corpus.expected_objects()
    is what `make -C corpus list` (the Makefile itself) plans, and every one of them is built.
    Nothing built at all is a missing capability (skip outside CI); a partial build fails."""
    plan = subprocess.run(
        ["make", "-s", "-C", str(corpus.CORPUS_DIR), "list"], check=True, capture_output=True, text=True
    ).stdout.split()
    assert sorted(corpus.CORPUS_DIR / p for p in plan) == corpus.expected_objects()
    built = corpus.built_objects()
    require(bool(built), "corpus is not built (run `make corpus`)")
    missing = [str(p.relative_to(corpus.CORPUS_DIR)) for p in corpus.expected_objects() if p not in built]
    assert built == corpus.expected_objects(), f"{len(missing)} planned objects not built: {missing[:10]}"
    require(bool(corpus.external_objects()), "external objects are missing (run `make external`)")
