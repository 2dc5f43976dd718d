"""The rule templates as sync's Filling with counter references (issue 12, item 4): each
acting filter names the stats entries the program would have incremented for the packets it
now takes in hardware (rules/counters.py derives and proves them from the exploration), so
`sync --apply` folds the filters' `tc -s -j` counters into exactly those entries.
"""

from __future__ import annotations

from lifter.program import BpfObject, Program
from rules.counters import Increment, path_increments, template_increments
from rules.reasons import Reason
from rules.templates import FilledFilter, Template, entry_shape

from .mapfill import TemplateFilling, sync_filter, template_filling
from .tcsync import CounterRef, SyncFilter


class CountingFilling(TemplateFilling):
    """TemplateFilling whose acting filters carry CounterRefs; counter_maps: every map a
    template's path increments (a constant key, or the filter's own entry)."""

    def __init__(self, templates: list[Template]):
        super().__init__(templates)
        self.increments: dict[tuple[int, tuple], list[Increment] | Reason] = {}
        self.counter_maps = frozenset(
            i.map
            for t in templates
            if not t.outcome.is_pass
            for p in t.paths
            if isinstance(got := path_increments(t, p), list)
            for i in got
        )

    def of(self, t: Template, shape: tuple) -> list[Increment] | Reason:
        """The template's Increments at one mask shape (proved once, cached)."""
        if (t.index, shape) not in self.increments:
            self.increments[(t.index, shape)] = template_increments(t, shape)
        return self.increments[(t.index, shape)]

    def sync_filter(self, t: Template, f: FilledFilter) -> SyncFilter:
        plain = sync_filter(f)
        if f.role != "rule":
            return plain
        (origin,) = f.sources
        shape = tuple(entry_shape(t, f.level, origin[1]) if i == f.level else None for i in range(len(t.levels)))
        got = self.of(t, shape)
        if not got or isinstance(got, Reason):
            return plain
        refs = []
        for i in got:
            if i.key is None and i.level != f.level:
                return plain  # another level's entry: this filter does not know its key
            key = i.key if i.key is not None else origin[1]
            refs.append(CounterRef(i.map, key, i.offset, i.size, "packets", i.amount))
        return SyncFilter(plain.match, plain.action, plain.prio, plain.chain, plain.origin, tuple(refs))

    def notes(self) -> list[str]:
        out = super().notes()
        for t in self.templates:
            if t.outcome.is_pass or t.complement is not None:  # a complement is rules only
                continue
            shape = tuple(None for _ in t.levels)
            got = self.of(t, shape) if all(lv.kind == "hash" for lv in t.levels) else None
            if isinstance(got, Reason):
                out.append(f"# counters: template {t.index}: none folded ({got.detail})")
            elif got:
                what = ", ".join(
                    f"{i.map}[{i.key.hex() if i.key is not None else 'its entry'}]+{i.amount}@{i.offset}" for i in got
                )
                out.append(f"# counters: template {t.index}: each packet folds into {what}")
        return out


def counting_filling(obj: BpfObject, prog: Program, assume: tuple[str, ...] = ()) -> CountingFilling | None:
    """A FILLINGS factory (offload/sync.py): the program's templates with counter references."""
    base = template_filling(obj, prog, assume)
    return None if base is None else CountingFilling(base.templates)
