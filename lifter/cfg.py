"""Basic blocks and the control-flow graph of one function.

Nodes are block start slots; every edge has a `kind`: ``taken`` (condition true),
``fallthrough`` (condition false or straight-line), ``goto`` (unconditional jump).
Calls do not end a block: a bpf-to-bpf call returns, and a failed tail call falls through.
Loops are found as back edges (u -> h where h dominates u) with their natural-loop bodies;
a retreating edge whose head does not dominate its tail makes the loop irreducible, which is
reported rather than guessed at.

The graph is plain dicts (`Cfg.edges`): networkx costs every command ~0.13 s to import, so
it is imported only by those that ask for `Cfg.graph` (renderers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from .errors import LiftError
from .insn import Exit, Goto, Insn, Jump, LoadImm64, ends_block, slots

if TYPE_CHECKING:
    import networkx as nx

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
    #: block start -> {successor block start: edge kind}, every block a key, successors in
    #: the order the block's branch is read (fall-through first)
    edges: dict[int, dict[int, str]]
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
        return list(self.edges[start].items())

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The CFG as a networkx graph, each edge with its `kind` (nodes and edges in the
        order of `blocks` and `edges`)."""
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_nodes_from(self.blocks)
        for src, succs in self.edges.items():
            for dst, kind in succs.items():
                graph.add_edge(src, dst, kind=kind)
        return graph

    def postorder(self) -> list[int]:
        """The blocks reachable from the entry in post-order of a depth-first walk taking
        successors in `edges` order (networkx's dfs_postorder_nodes from the entry)."""
        out: list[int] = []
        visited = {self.entry}
        stack = [(self.entry, iter(self.edges[self.entry]))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if child not in visited:
                    visited.add(child)
                    stack.append((child, iter(self.edges[child])))
                    break
            else:
                stack.pop()
                out.append(node)
        return out


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

    edges: dict[int, dict[int, str]] = {b: {} for b in blocks}
    exits = []
    for block in blocks.values():
        insn = block.last
        out = edges[block.start]
        if isinstance(insn, Exit):
            exits.append(block.start)
        elif isinstance(insn, Goto):
            out[insn.target] = GOTO
        elif isinstance(insn, Jump):
            # A jump whose target is the next instruction has one successor reached both ways.
            out[block.end] = FALLTHROUGH
            if insn.target != block.end:
                out[insn.target] = TAKEN
        else:
            out[block.end] = FALLTHROUGH

    cfg = Cfg(function, blocks, edges, start, exits)
    find_loops(cfg)
    return cfg


def find_loops(cfg: Cfg) -> None:
    """Fill `cfg`'s unreachable blocks, back edges, natural loops and irreducible edges."""
    edges = cfg.edges
    reachable = _reached(cfg.entry, edges, set())
    cfg.unreachable = sorted(set(edges) - reachable)
    preds: dict[int, list[int]] = {b: [] for b in reachable}
    for src in reachable:
        for dst in edges[src]:
            preds[dst].append(src)
    idom = _immediate_dominators(cfg, preds)

    def dominates(a: int, b: int) -> bool:
        while True:
            if a == b:
                return True
            parent = idom.get(b, b)
            if parent == b:
                return False
            b = parent

    for tail, head in _retreating_edges(edges, cfg.entry):
        if dominates(head, tail):
            cfg.back_edges.append((tail, head))
            # Natural loop: the header plus every block that reaches the latch without it.
            body = {head} | (_reached(tail, preds, {head}) if tail != head else set())
            cfg.loops.append(Loop(head, tail, frozenset(body)))
        else:
            cfg.irreducible.append((tail, head))
    cfg.back_edges.sort()
    cfg.loops.sort(key=lambda loop: (loop.header, loop.latch))


def _reached(start: int, edges, avoid: set[int]) -> set[int]:
    """`start` and every node reached from it along `edges` (node -> successors) without
    passing through a node of `avoid`."""
    seen = {start}
    todo = [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen and nxt not in avoid:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _immediate_dominators(cfg: Cfg, preds: dict[int, list[int]]) -> dict[int, int]:
    """Each block reachable from the entry -> its immediate dominator (the entry -> itself):
    Cooper, Harvey and Kennedy's iteration over the reverse post-order ("A Simple, Fast
    Dominance Algorithm", 2001); the dominator tree is unique, whatever computes it."""
    order = cfg.postorder()
    rank = {b: i for i, b in enumerate(order)}  # post-order number: the entry has the highest
    idom = {cfg.entry: cfg.entry}

    def meet(a: int, b: int) -> int:
        while a != b:
            while rank[a] < rank[b]:
                a = idom[a]
            while rank[b] < rank[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in reversed(order):
            if b == cfg.entry:
                continue
            new = None
            for p in preds[b]:
                if p in idom:
                    new = p if new is None else meet(p, new)
            if idom.get(b) != new:
                idom[b] = new
                changed = True
    return idom


def _retreating_edges(edges: dict[int, dict[int, str]], entry: int) -> list[tuple[int, int]]:
    """Edges to a node on the current DFS path (iterative DFS, deterministic order)."""
    on_stack: set[int] = {entry}
    visited: set[int] = {entry}
    stack = [(entry, iter(sorted(edges[entry])))]
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
            stack.append((child, iter(sorted(edges[child]))))
    return found
