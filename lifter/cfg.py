"""Basic blocks and the control-flow graph of one function.

Nodes of `Cfg.graph` are block start slots; every edge has a `kind`: ``taken`` (condition
true), ``fallthrough`` (condition false or straight-line), ``goto`` (unconditional jump).
Calls do not end a block: a bpf-to-bpf call returns, and a failed tail call falls through.
Loops are found as back edges (u -> h where h dominates u) with their natural-loop bodies;
a retreating edge whose head does not dominate its tail makes the loop irreducible, which is
reported rather than guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from .errors import LiftError
from .insn import Exit, Goto, Insn, Jump, LoadImm64, ends_block, slots

TAKEN, FALLTHROUGH, GOTO = "taken", "fallthrough", "goto"


@dataclass(frozen=True)
class Block:
    """Straight-line instructions [start, end) in slots; control enters only at `start`."""

    start: int
    end: int
    insns: tuple[Insn, ...]

    @property
    def last(self) -> Insn:
        return self.insns[-1]


@dataclass(frozen=True)
class Loop:
    """A natural loop: `header` dominates every block in `body` (header included)."""

    header: int
    latch: int  # source of the back edge
    body: frozenset[int]


@dataclass
class Cfg:
    """The CFG of one function."""

    function: str
    blocks: dict[int, Block]
    graph: nx.DiGraph
    entry: int
    exits: list[int] = field(default_factory=list)  # blocks ending in `exit`
    back_edges: list[tuple[int, int]] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    irreducible: list[tuple[int, int]] = field(default_factory=list)
    unreachable: list[int] = field(default_factory=list)

    @property
    def retreating(self) -> list[tuple[int, int]]:
        """Every edge that closes a cycle, natural loop or irreducible: the edges a loop bound
        counts, so an irreducible cycle is bounded like a natural one."""
        return sorted(self.back_edges + self.irreducible)

    def block_of(self, pc: int) -> Block:
        """The block containing slot `pc`."""
        for block in self.blocks.values():
            if block.start <= pc < block.end:
                return block
        raise KeyError(pc)

    def successors(self, start: int) -> list[tuple[int, str]]:
        return [(dst, data["kind"]) for _, dst, data in self.graph.out_edges(start, data=True)]


def build_cfg(function: str, insns: list[Insn], start: int, end: int) -> Cfg:
    """Build the CFG of the function occupying slots [start, end) with instructions `insns`.

    Raises LiftError for a jump outside the function or into the second slot of an
    ld_imm64, and for code that falls off the end of the function."""
    if not insns:
        raise LiftError("function has no instructions", program=function)
    starts = {i.pc for i in insns}
    wide_tails = {i.pc + 1 for i in insns if isinstance(i, LoadImm64)}
    leaders = {start}
    for index, insn in enumerate(insns):
        if isinstance(insn, (Jump, Goto)):
            target = insn.target
            if not start <= target < end:
                raise LiftError(f"jump to slot {target} is outside function {function} [{start}, {end})", insn=insn.pc)
            if target in wide_tails or target not in starts:
                raise LiftError(f"jump to slot {target}, the middle of an instruction", insn=insn.pc)
            leaders.add(target)
        if ends_block(insn) and index + 1 < len(insns):
            leaders.add(insns[index + 1].pc)
    last = insns[-1]
    if not isinstance(last, (Exit, Goto)):
        raise LiftError(f"control falls off the end of function {function}", insn=last.pc)

    blocks: dict[int, Block] = {}
    current: list[Insn] = []
    for insn in insns:
        if insn.pc in leaders and current:
            blocks[current[0].pc] = Block(current[0].pc, insn.pc, tuple(current))
            current = []
        current.append(insn)
    blocks[current[0].pc] = Block(current[0].pc, current[-1].pc + slots(current[-1]), tuple(current))

    graph = nx.DiGraph()
    graph.add_nodes_from(blocks)
    exits = []
    for block in blocks.values():
        insn = block.last
        if isinstance(insn, Exit):
            exits.append(block.start)
        elif isinstance(insn, Goto):
            graph.add_edge(block.start, insn.target, kind=GOTO)
        elif isinstance(insn, Jump):
            # A jump whose target is the next instruction has one successor reached both ways.
            graph.add_edge(block.start, block.end, kind=FALLTHROUGH)
            if insn.target != block.end:
                graph.add_edge(block.start, insn.target, kind=TAKEN)
        else:
            graph.add_edge(block.start, block.end, kind=FALLTHROUGH)

    cfg = Cfg(function, blocks, graph, start, exits)
    _find_loops(cfg)
    return cfg


def _find_loops(cfg: Cfg) -> None:
    graph = cfg.graph
    reachable = nx.descendants(graph, cfg.entry) | {cfg.entry}
    cfg.unreachable = sorted(set(graph) - reachable)
    sub = graph.subgraph(reachable)
    # networkx < 3.5 maps the entry to itself; 3.5 and later leave the entry out.
    idom = nx.immediate_dominators(sub, cfg.entry)

    def dominates(a: int, b: int) -> bool:
        while True:
            if a == b:
                return True
            parent = idom.get(b, b)
            if parent == b:
                return False
            b = parent

    for tail, head in _retreating_edges(sub, cfg.entry):
        if dominates(head, tail):
            cfg.back_edges.append((tail, head))
            # Natural loop: the header plus every block that reaches the latch without it.
            without_head = sub.subgraph(set(sub) - {head})
            body = {head, tail} | (nx.ancestors(without_head, tail) if tail != head else set())
            cfg.loops.append(Loop(head, tail, frozenset(body)))
        else:
            cfg.irreducible.append((tail, head))
    cfg.back_edges.sort()
    cfg.loops.sort(key=lambda loop: (loop.header, loop.latch))


def _retreating_edges(graph: nx.DiGraph, entry: int) -> list[tuple[int, int]]:
    """Edges to a node on the current DFS path (iterative DFS, deterministic order)."""
    on_stack: set[int] = {entry}
    visited: set[int] = {entry}
    stack = [(entry, iter(sorted(graph.successors(entry))))]
    found = []
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_stack.discard(node)
            continue
        if child in on_stack:
            found.append((node, child))
        elif child not in visited:
            visited.add(child)
            on_stack.add(child)
            stack.append((child, iter(sorted(graph.successors(child)))))
    return found
