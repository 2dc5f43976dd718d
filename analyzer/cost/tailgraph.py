"""The program-to-program tail-call graph, across objects, and chains priced end to end.

Nodes are programs (object file, program name). Edges come from two places:

* `static`: tail calls the explorer followed into PROG_ARRAY slots the object fills itself
  (`.values`); their cost is already inside the caller's paths;
* `prog-array`: `--prog-array MAP=IDX:FILE:PROG` says that slot IDX of the caller's map MAP
  holds program PROG of FILE at run time. A caller path that ends in a tail call into
  MAP[IDX] (or into MAP with a variable index: every mapped slot) continues in PROG: its
  end-to-end cost is the path's own plus PROG's, recursively.

Each edge carries the price of the tail call (the site's kind in the kernel: constant or
variable index, see analyzer/cost/count.py). A cycle means no bound on the chain but the
kernel's counter, and a chain of more than MAX_TAIL_CALLS (33) tail calls is cut by the
kernel: both are errors.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import networkx as nx

from ..exploration import UNKNOWN
from ..xdp import MAX_TAIL_CALLS
from .count import Counted, Site
from .price import PathCost


@dataclass(frozen=True)
class Node:
    file: str
    program: str

    def __str__(self) -> str:
        return f"{self.file}:{self.program}"


@dataclass(frozen=True)
class Mapping:
    """One `--prog-array MAP=IDX:FILE:PROG`."""

    map: str
    index: int
    file: str
    program: str


_MAPPING = re.compile(r"^([^=\s]+)=(\d+):(.+):([^:\s]+)$")


def parse_mapping(text: str) -> Mapping:
    """`MAP=IDX:FILE:PROG`; ValueError (one line) otherwise."""
    m = _MAPPING.match(text.strip())
    if not m:
        raise ValueError(f"--prog-array {text!r}: expected MAP=IDX:FILE:PROG, e.g. jmp_table=0:handlers.o:xdp_tcp")
    return Mapping(m.group(1), int(m.group(2)), m.group(3), m.group(4))


@dataclass
class ProgramCost:
    """One analysed program: where it is, its counted exploration and priced paths."""

    node: Node
    counted: Counted
    paths: list[PathCost]
    root: bool = True  # named on the command line (False: only reached through --prog-array)

    def site_reason(self, site: Site) -> str:
        keys = self.counted.site_keys.get(site, set())
        maps = {m for m, _ in keys}
        indexes = {i for _, i in keys}
        if self.counted.site_kind(site) == "constant":
            ((m, i),) = keys
            return f"always {m}[{i}]: the verifier patches it into a direct jump"
        if None in indexes:
            return "the index is not a constant"
        if len(maps) > 1:
            return f"{len(maps)} different maps reach it"
        if not keys:
            return "never reached"
        return (
            f"{len(indexes)} different constant indices reach it "
            f"({', '.join(str(i) for i in sorted(indexes))}): the verifier cannot patch it"
        )


@dataclass
class Edge:
    src: Node
    dst: Node
    map: str
    index: int | None
    kind: str  # constant | variable (the site, as the kernel runs it)
    source: str  # static | prog-array
    ns: float
    paths: int = 0
    sites: set = field(default_factory=set)


@dataclass
class Continuation:
    """Where a path goes after a tail call into a slot the object does not fill."""

    targets: list[Node]  # mapped programs (empty: unknown)
    ns: tuple[float, float] | None  # end-to-end (path + continuation); None if unbounded/unknown
    depth: int | None  # tail calls end to end


class TailGraph:
    def __init__(self, programs: list[ProgramCost], mappings: list[Mapping], profile):
        self.programs = {p.node: p for p in programs}
        self.mappings = mappings
        self.profile = profile
        self.edges: dict[tuple, Edge] = {}
        self.graph = nx.DiGraph()
        for p in programs:
            self.graph.add_node(p.node)
        for p in programs:
            self._edges_of(p)
        self.errors = self._check()
        self._memo: dict[Node, tuple | None] = {}

    # -- building

    def mapped(self, caller: ProgramCost, map_name: str, index: int | None) -> list[Node]:
        out = []
        for m in self.mappings:
            if (
                m.map == map_name
                and (index is None or m.index == index)
                and caller.counted.exploration.obj.map(map_name)
            ):
                node = self.node_for(m)
                if node is not None:
                    out.append(node)
        return out

    def node_for(self, m: Mapping) -> Node | None:
        for node in self.programs:
            if node.program == m.program and _same_file(node.file, m.file):
                return node
        return None

    def _edges_of(self, p: ProgramCost) -> None:
        for pc in p.paths:
            for t in pc.path.tail_calls:
                site = Site(t.caller, t.pc)
                kind = p.counted.site_kind(site)
                if t.target is not None:
                    targets, source = [Node(p.node.file, t.target)], "static"
                else:
                    targets, source = self.mapped(p, t.map, t.index), "prog-array"
                src = Node(p.node.file, t.caller) if t.caller != p.node.program else p.node
                for dst in targets:
                    self._add(
                        src, dst, t.map, t.index if source == "static" else _slot_of(self, dst, t), kind, source, site
                    )

    def _add(self, src: Node, dst: Node, map_name: str, index, kind: str, source: str, site: Site) -> None:
        key = (src, dst, map_name, index, source)
        edge = self.edges.get(key)
        if edge is None:
            edge = self.edges[key] = Edge(src, dst, map_name, index, kind, source, self.profile.tail_call[kind])
            self.graph.add_edge(src, dst)
        edge.paths += 1
        edge.sites.add(site)

    # -- checks

    def _check(self) -> list[str]:
        errors = []
        cycles = []
        for cycle in nx.simple_cycles(self.graph):
            cycles.append(cycle)
            if len(cycles) > 5:
                break
        for cycle in cycles[:5]:
            chain = " -> ".join(str(n) for n in cycle + [cycle[0]])
            errors.append(
                f"tail-call cycle {chain}: the chain is bounded only by the kernel's limit of "
                f"{MAX_TAIL_CALLS} tail calls"
            )
        if len(cycles) > 5:
            errors.append("more tail-call cycles not listed")
        if not cycles:
            for root in self.graph.nodes:
                depth, chain = _longest(self.graph, root)
                if depth > MAX_TAIL_CALLS:
                    errors.append(
                        f"tail-call chain of {depth} calls from {root} ({' -> '.join(map(str, chain[:4]))}"
                        f" -> ...) is deeper than the kernel's limit of {MAX_TAIL_CALLS}: "
                        "the calls past it fall through"
                    )
                    break
        return errors

    # -- end-to-end prices

    def continuation(self, p: ProgramCost, pc: PathCost) -> Continuation | None:
        """For a path ending in a tail call into a slot the object does not fill."""
        if pc.path.verdict != UNKNOWN or not pc.path.tail_calls or pc.path.tail_calls[-1].target is not None:
            return None
        t = pc.path.tail_calls[-1]
        targets = self.mapped(p, t.map, t.index)
        own = pc.ns()
        if not targets or own is None:
            return Continuation(targets, None, None)
        spans = [self.span(n, (p.node,)) for n in targets]
        if any(s is None for s in spans):
            return Continuation(targets, None, None)
        lo = own[0] + min(s[0] for s in spans)
        hi = own[2] + max(s[1] for s in spans)
        depth = len(pc.path.tail_calls) + max(s[2] for s in spans)
        return Continuation(targets, (lo, hi), depth)

    def span(self, node: Node, stack: tuple = ()) -> tuple[float, float, int] | None:
        """(min ns, max ns, deepest chain) over every path of `node` and what follows it;
        None on a cycle or when a path's price is unknown."""
        if node in self._memo:
            return self._memo[node]
        if node in stack or node not in self.programs:
            return None
        p = self.programs[node]
        lo, hi, depth = float("inf"), 0.0, 0
        for pc in p.paths:
            ns = pc.ns()
            if ns is None:
                continue
            last = pc.path.tail_calls[-1] if pc.path.tail_calls else None
            targets = (
                self.mapped(p, last.map, last.index)
                if pc.path.verdict == UNKNOWN and last is not None and last.target is None
                else []
            )
            if targets:
                spans = [self.span(n, stack + (node,)) for n in targets]
                if any(s is None for s in spans):
                    if not stack:
                        self._memo[node] = None
                    return None
                lo = min(lo, ns[0] + min(s[0] for s in spans))
                hi = max(hi, ns[2] + max(s[1] for s in spans))
                depth = max(depth, len(pc.path.tail_calls) + max(s[2] for s in spans))
            else:
                lo, hi = min(lo, ns[0]), max(hi, ns[2])
                depth = max(depth, len(pc.path.tail_calls))
        result = None if lo == float("inf") else (lo, hi, depth)
        if not stack:
            self._memo[node] = result
        return result

    # -- output

    def to_json(self) -> dict:
        return {
            "nodes": [
                {
                    "id": str(n),
                    "file": n.file,
                    "program": n.program,
                    "root": self.programs[n].root if n in self.programs else False,
                }
                for n in self.graph.nodes
            ],
            "edges": [
                {
                    "from": str(e.src),
                    "to": str(e.dst),
                    "map": e.map,
                    "index": e.index,
                    "kind": e.kind,
                    "source": e.source,
                    "ns": round(e.ns, 3),
                    "paths": e.paths,
                    "sites": sorted(str(s) for s in e.sites),
                }
                for e in self.edges.values()
            ],
        }

    def dot(self) -> str:
        lines = ['digraph "tail calls" {', "  rankdir=LR;", "  node [shape=box fontname=monospace fontsize=10];"]
        cyclic = {n for c in nx.simple_cycles(self.graph) for n in c} if self.errors else set()
        for n in self.graph.nodes:
            p = self.programs.get(n)
            span = self.span(n) if p else None
            label = f"{n.program}\\n{n.file}"
            if span:
                label += (
                    f"\\n{_ns(span[0])}-{_ns(span[1])} ns end to end"
                    if span[0] != span[1]
                    else f"\\n{_ns(span[0])} ns end to end"
                )
            style = " color=red" if n in cyclic else ""
            lines.append(f'  "{n}" [label="{label}"{style}];')
        for e in self.edges.values():
            idx = "?" if e.index is None else str(e.index)
            style = "solid" if e.source == "static" else "dashed"
            color = "darkgreen" if e.kind == "constant" else "darkorange"
            lines.append(
                f'  "{e.src}" -> "{e.dst}" [label="{e.map}[{idx}] {e.kind}\\n{_ns(e.ns)} ns" '
                f"style={style} color={color}];"
            )
        lines.append("}")
        return "\n".join(lines) + "\n"


def _slot_of(g: TailGraph, dst: Node, t) -> int | None:
    for m in g.mappings:
        if m.map == t.map and m.program == dst.program and _same_file(dst.file, m.file):
            return m.index
    return t.index


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b


def _longest(graph: nx.DiGraph, root) -> tuple[int, list]:
    """Longest chain (edges) from `root` in a DAG, and the nodes on it."""
    order = list(nx.topological_sort(graph.subgraph(nx.descendants(graph, root) | {root})))
    best: dict = {root: (0, [root])}
    for n in order:
        if n not in best:
            continue
        d, chain = best[n]
        for m in graph.successors(n):
            if m not in best or best[m][0] < d + 1:
                best[m] = (d + 1, chain + [m])
    return max(best.values(), key=lambda x: x[0])


def _ns(v: float) -> str:
    return f"{v:.1f}"
