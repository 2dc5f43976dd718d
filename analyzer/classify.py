"""Decision classes: why each branch goes the way it goes, and what each map is for.

A branch's class comes from the inputs its condition depends on (symbolic.py names them),
over every visit on which both directions were feasible; a branch that always went the
same single way is `constant`. When inputs mix, the least offloadable wins, in this order
(the corpus README uses the same one):

    unsupported > helper > data-plane-state > ctx > control-plane-map > stats-only >
    stateless > constant

A map the program writes counts as control-plane for its decisions when z3 proves its writes
never change them, and as stats-only when no packet's fate depends on it (mapuse.py).

Maps: `control-plane` (the data path only reads it, or its writes provably leave every
decision on it unchanged), `data-plane` (the program writes it and a decision reads it),
`stats-only` (written, and never read into a packet's fate: counters), `unused` (neither).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .exploration import BranchSite, Exploration
from .mapuse import MapUse, map_uses
from .symbolic import Source

#: Branch classes, most offloadable first.
CLASSES = (
    "constant",
    "stateless",
    "stats-only",
    "control-plane-map",
    "ctx",
    "data-plane-state",
    "helper",
    "unsupported",
)
RANK = {c: i for i, c in enumerate(CLASSES)}

MAP_CLASSES = ("control-plane", "data-plane", "stats-only", "unused")


@dataclass
class BranchClass:
    """The class of one decision site, with what it depends on (`detail`: map names,
    ctx fields, helpers, reasons) and where it is in the source."""

    site: BranchSite
    cls: str
    detail: list[str] = field(default_factory=list)
    file: str | None = None
    line: int | None = None
    direction: bool | None = None  # for constant branches: always taken (True) or not


def source_class(source: Source, uses: dict[str, MapUse]) -> tuple[str, str]:
    """(class, detail) of one input; `uses` says what the program's writes to a map mean."""
    if source.kind == "packet":
        return "stateless", ""
    if source.kind == "ctx":
        return "ctx", source.name
    if source.kind == "map":
        use = uses.get(source.name)
        if use is None or use.preserved:
            return "control-plane-map", source.name
        return ("stats-only" if use.fateless else "data-plane-state"), source.name
    if source.kind == "helper":
        return "helper", source.name
    return "unsupported", source.name


def classify_site(site: BranchSite, uses: dict[str, MapUse]) -> tuple[str, list[str], bool | None]:
    if site.both == 0 and len(site.one_way) == 1:
        return "constant", [], next(iter(site.one_way))
    inputs = site.sources if site.both else site.all_sources
    if not inputs:
        return "constant", [], None
    pairs = [source_class(s, uses) for s in inputs]
    cls = max((c for c, _ in pairs), key=RANK.__getitem__)
    detail = sorted({d for c, d in pairs if d and c != "stateless"})
    return cls, detail, None


def classify(e: Exploration) -> list[BranchClass]:
    """Every decision site of the exploration with its class, in (section, pc) order."""
    return classify_sites(e.obj, e.sites, map_uses(e))


def classify_sites(obj, sites: dict[tuple[str, int], BranchSite], uses: dict[str, MapUse]) -> list[BranchClass]:
    """`classify` for any engine's decision sites (the angr engine has no map proofs: `uses`
    is empty there, so a written map that a decision reads is data-plane)."""
    out = []
    for key in sorted(sites):
        site = sites[key]
        cls, detail, direction = classify_site(site, uses)
        line = obj.line_at(site.section, site.pc)
        out.append(
            BranchClass(site, cls, detail, line.file_name if line else None, line.line if line else None, direction)
        )
    return out


def classes(e: Exploration) -> tuple[list[BranchClass], dict[str, str]]:
    """The branch classes and the map classes of `e`, computed once per exploration (every
    consumer reads them from here; do not change the lists returned)."""
    if e.classes is None:
        branches = classify(e)
        e.classes = (branches, map_classes(e, branches))
    return e.classes


def map_classes(e: Exploration, branches: list[BranchClass], uses: dict[str, MapUse] | None = None) -> dict[str, str]:
    """Class of every map of the object (see the module docstring); `uses` defaults to the
    z3 proofs of mapuse.py (a map without one is neither preserved nor fateless)."""
    decided = set()
    for b in branches:
        if b.cls not in ("constant",):
            inputs = b.site.sources if b.site.both else b.site.all_sources
            decided |= {s.name for s in inputs if s.kind == "map"}
    # A verdict taken from a map value also reads it into a decision.
    out = {}
    uses = map_uses(e) if uses is None else uses
    for m in e.obj.maps:
        if m.name in e.written_maps:
            use = uses.get(m.name)
            if m.name not in decided or (use is not None and use.fateless):
                out[m.name] = "stats-only"
            else:
                out[m.name] = "control-plane" if use is not None and use.preserved else "data-plane"
        elif m.name in e.read_maps or m.name in decided:
            out[m.name] = "control-plane"
        else:
            out[m.name] = "unused"
    return out
