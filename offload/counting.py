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

from .mapfill import TemplateFilling, template_filling
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

    def converter(self, t: Template, level: int):
        """TemplateFilling.converter with the acting filters' CounterRefs (one recipe per
        mask shape, so a 100k-entry fill proves and looks up once, not per entry)."""
        plain = super().converter(t, level)
        if t.outcome.is_pass or level != len(t.levels) - 1:
            return plain  # no acting filter here (chain jumps, pass filters)
        if t.levels[level].kind != "lpm" and self.recipe(t, level, None) is None:
            return plain  # one mask shape, and it folds nothing
        recipes: dict[int | None, list[Increment] | None] = {}

        def make(f: FilledFilter) -> SyncFilter:
            if f.role != "rule":
                return plain(f)
            (origin,) = f.sources
            shape = entry_shape(t, level, origin[1])
            if shape not in recipes:
                recipes[shape] = self.recipe(t, level, shape)
            got = recipes[shape]
            if got is None:
                return plain(f)
            refs = tuple(
                CounterRef(i.map, i.key if i.key is not None else origin[1], i.offset, i.size, "packets", i.amount)
                for i in got
            )
            return SyncFilter(f.match, f.action, f.prio, f.chain, origin, refs)

        return make

    def recipe(self, t: Template, level: int, shape: int | None) -> list[Increment] | None:
        """The Increments a filter of `t` at `level` with this mask shape folds into; None when
        none (no proof, or one names another level's entry, whose key this filter does not know)."""
        got = self.of(t, tuple(shape if i == level else None for i in range(len(t.levels))))
        if not got or isinstance(got, Reason) or any(i.key is None and i.level != level for i in got):
            return None
        return got

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
