"""`xdp2tc sync`, the live daemon (issue 12, item 3): fill rule templates from live maps,
then follow map changes and keep the device's tc filters in step.

The rule templates (rules/, issue 12 item 1) reach the daemon through one narrow seam,
`Filling`: `fill(contents)` gives every filter for whole map contents, `entry(contents, map,
key)` the filters that come from one entry (after the daemon updated `contents` with that
entry's new value, or removed it). A `Filling` for an object comes from the factories in
FILLINGS, asked in order; the first that returns one is used.

The loop: events from the watcher (offload/mapwatch.py) name changed (map, key) pairs;
every `interval` seconds the watched maps are also re-read in one batched lookup each and
diffed (writes the program makes, lost events), and with --apply the filters' hardware
counters are folded back. Each round of changes becomes one batch (offload/tcsync.py)
that is printed (--dry-run) or applied with `tc -batch` (--apply), with a header naming its
time, the changes and, for watched writes, the time since the write's syscall.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from lifter.program import BpfObject, Program
from offload.counting import counting_filling
from offload.mapsource import LiveMaps
from offload.mapwatch import MapEvent, MapWatcher, WatcherUnavailable
from offload.tcsync import Batch, CounterFolder, SyncFilter, TcDevice, TcError, fold_slot, parse_filters, stamp
from rules.mapcontents import MapContents


class Filling(Protocol):
    """What sync needs from the rule templates of one program."""

    #: control-plane maps the filters come from (watched; every one must be found live)
    maps: frozenset[str]
    #: stats-only maps that the filters' CounterRefs name (folded back with --apply)
    counter_maps: frozenset[str]

    def fill(self, contents: MapContents) -> list[SyncFilter]:
        """Every filter for these contents, in any order (static filters included)."""
        ...

    def entry(self, contents: MapContents, map_name: str, key: bytes) -> list[SyncFilter] | None:
        """The filters whose origin is (map_name, key) for these contents (the entry may be
        absent: usually no filter then). None: this change needs a whole `fill`."""
        ...


#: Where `xdp2tc sync` gets a Filling for (object, program, --assume): the first non-None
#: wins. The product's one: the program's rule templates with counter references (offload/counting.py).
FILLINGS: list[Callable[[BpfObject, Program, tuple[str, ...]], Filling | None]] = [counting_filling]


def filling_for(obj: BpfObject, prog: Program, assume: tuple[str, ...] = ()) -> Filling | None:
    for factory in FILLINGS:
        filling = factory(obj, prog, assume)
        if filling is not None:
            return filling
    return None


@dataclass
class Change:
    """One changed entry: where, and when its syscall entered (None: seen by polling).
    `early`: seen at the syscall's entry, before the kernel writes: `value` is what the entry
    is about to hold (None: it is being deleted); only the safe half of the change is done
    (drops taken away, pass shields added) until the exit event re-reads the entry."""

    map: str
    key: bytes | None  # None: re-read the whole map
    enter_ns: int | None = None
    early: bool = False
    value: tuple[bytes, ...] | None = None


@dataclass
class SyncDaemon:
    """One device kept in step with one program's live maps (module docstring)."""

    filling: Filling
    live: LiveMaps
    device: TcDevice
    apply: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    watcher: MapWatcher | None = None
    interval: float = 1.0
    contents: MapContents = field(default_factory=MapContents)
    by_origin: dict[tuple[str, bytes], Sequence[SyncFilter]] = field(default_factory=dict)
    static: list[SyncFilter] = field(default_factory=list)
    batches: int = 0
    failed: int = 0  # batches tc refused
    dirty: bool = False  # a batch failed: the next poll tick plans everything again
    folder: CounterFolder | None = None
    _next_poll: float = 0.0
    _woke: tuple[int, int] = (0, 0)  # CLOCK_MONOTONIC and thread CPU ns when the last events were read

    # -- start
    def start(self) -> Batch:
        """Read the device and the maps, fill, and write the first batch (the reconcile)."""
        began = time.monotonic()
        # Filling creates a few objects per entry and keeps them all: the collector's young
        # passes would walk the growing heap again and again (100k entries: ~2 s of 11).
        # Garbage so far (the templates' exploration) is collected now, while the heap is
        # small; the fill itself makes next to none (688 unreachable objects at 100k entries),
        # so no collection walks the filled state afterwards (0.3-0.6 s at 100k entries).
        gc.collect()
        gc.disable()
        try:
            return self._start(began)
        finally:
            gc.enable()

    def _start(self, began: float) -> Batch:
        try:
            self.device.load(parse_filters(self.device.show()))
        except TcError as err:
            if self.apply:
                raise
            print(f"# dry run: cannot read the device's filters ({err}); starting from none", file=self.out)
        if self.watcher is not None:
            self.watcher.watch([self.live.maps[n].kernel.id for n in self.filling.maps])
        self.contents = self.live.contents(sorted(self.filling.maps))
        self._index(self.filling.fill(self.contents))
        counters = {n: self.live.maps[n].kernel for n in self.filling.counter_maps if n in self.live.maps}
        if self.apply and counters:
            if self.device.folds is None:
                print(
                    f"# counters: not folded: the {self.device.skip or 'software'} filters on {self.device.dev} run "
                    "behind the program's XDP hook (tc ingress sees only what XDP passed), so the program "
                    "has counted every packet they take",
                    file=self.out,
                )
            else:
                self.folder = CounterFolder(counters, fold_slot(), self.device.folds)
        self._next_poll = time.monotonic() + self.interval
        desired = self._desired()
        batch = self.device.plan(desired)
        entries = sum(len(m.entries) for m in self.contents.maps.values())
        took = (time.monotonic() - began) * 1000
        self._write(batch, f"reconcile: {entries} entries, {len(desired)} filters wanted in {took:.0f} ms", None)
        # The filled state lives as long as the daemon: keep it out of the collector's full
        # passes, which would otherwise walk every entry's objects in the middle of a change.
        gc.freeze()
        return batch

    def _index(self, filters: list[SyncFilter]) -> None:
        self.by_origin, self.static = {}, []
        by_origin = self.by_origin
        for f in filters:
            if f.origin is None:
                self.static.append(f)
            else:  # tuples: most entries have one filter, and a 1-tuple is one small object
                got = by_origin.get(f.origin)
                by_origin[f.origin] = (f,) if got is None else (*got, f)

    def _desired(self) -> list[SyncFilter]:
        return self.static + [f for fs in self.by_origin.values() for f in fs]

    # -- the loop
    def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        while not stop():
            self.step(int(self.interval * 1000))

    def step(self, timeout_ms: int) -> Batch | None:
        """Wait up to `timeout_ms` for changes (or the poll interval), then write one batch."""
        now = time.monotonic()
        wait = max(0, min(timeout_ms, math.ceil((self._next_poll - now) * 1000)))
        changes: list[Change] = []
        if self.watcher is not None:
            events = self.watcher.poll(wait)
            self._woke = (time.monotonic_ns(), time.thread_time_ns())
            changes += self._from_events(events)
        elif wait:
            time.sleep(wait / 1000)
        retry = False
        if time.monotonic() >= self._next_poll:
            changes += self._from_poll()
            self._fold()
            self._next_poll = time.monotonic() + self.interval
            retry, self.dirty = self.dirty, False
        if retry:  # a batch failed: plan everything against the device as re-read
            return self.handle(changes, whole=True)
        return self.handle(changes) if changes else None

    def _from_events(self, events: list[MapEvent]) -> list[Change]:
        ids = {m.kernel.id: name for name, m in self.live.maps.items() if name in self.filling.maps}
        return [
            Change(ids[e.map_id], e.key, e.enter_ns, e.early, None if e.value is None else (e.value,))
            for e in events
            if e.map_id in ids
        ]

    def _from_poll(self) -> list[Change]:
        """Batched-lookup diff of every watched map against what the daemon holds."""
        changes = []
        for name in sorted(self.filling.maps):
            now = self.live.maps[name].entries().entries
            held = self.contents.maps[name].entries
            for key in now.keys() | held.keys():
                if now.get(key) != held.get(key):
                    changes.append(Change(name, key))
        return changes

    def handle(self, changes: list[Change], whole: bool = False) -> Batch:
        """Bring `contents` and the desired filters up to date with `changes`, then write the
        one batch that gets the device there (`whole`: diff every desired filter, not only
        the changed entries')."""
        pairs: list[tuple[list[SyncFilter], list[SyncFilter]]] = []
        early: list[tuple[list[SyncFilter], list[SyncFilter]]] = []
        refill = False
        last = {(ch.map, ch.key): ch for ch in changes}  # an exit event overrides its entry event
        for ch in last.values():
            entries = self.contents.maps[ch.map].entries
            if ch.key is None:
                entries.clear()
                entries.update(self.live.maps[ch.map].entries().entries)
                refill = True
                continue
            if ch.early:
                self._early(ch, entries, early)
                continue
            value = self.live.maps[ch.map].read(ch.key)
            if value is None:
                entries.pop(ch.key, None)
            else:
                entries[ch.key] = value
            if refill:
                continue
            new = self.filling.entry(self.contents, ch.map, ch.key)
            if new is None:
                refill = True
                continue
            old = self.by_origin.get((ch.map, ch.key), [])
            pairs.append((old, new))
            if new:
                self.by_origin[(ch.map, ch.key)] = new
            else:
                self.by_origin.pop((ch.map, ch.key), None)
        if refill:
            self._index(self.filling.fill(self.contents))
        if refill or whole:
            batch = self.device.plan(self._desired())
        else:
            batch = self.device.plan_changes(pairs, early)
        first = min((c.enter_ns for c in changes if c.enter_ns), default=None)
        self._write(batch, self._describe(changes), first)
        return batch

    def _early(self, ch: Change, entries: dict, early: list) -> None:
        """The filters the entry will have once the syscall lands (contents left as they
        are); the entry's filters become old + new, so its exit event's diff adds the new
        drops and removes what the write really took away (or restores what a failed write
        left valid)."""
        held = entries.get(ch.key)
        if ch.value is None:
            entries.pop(ch.key, None)
        else:
            entries[ch.key] = ch.value
        try:
            new = self.filling.entry(self.contents, ch.map, ch.key)
        finally:
            if held is None:
                entries.pop(ch.key, None)
            else:
                entries[ch.key] = held
        if new is None:  # needs a whole fill: wait for the exit event
            return
        old = self.by_origin.get((ch.map, ch.key), [])
        early.append((old, new))
        seen = {f.cookie(self.device.skip) for f in old}
        both = [*old, *(f for f in new if f.cookie(self.device.skip) not in seen)]
        if both:
            self.by_origin[(ch.map, ch.key)] = both

    def _describe(self, changes: list[Change]) -> str:
        shown = []
        for ch in changes[:8]:
            live = self.live.maps[ch.map]
            if ch.key is None:
                shown.append(f"{ch.map}[*]")
                continue
            if ch.early:
                what = live.describe(ch.key, ch.value) if ch.value else live.describe(ch.key) + " deleted"
                shown.append(what + " (at syscall entry)")
                continue
            value = self.contents.maps[ch.map].entries.get(ch.key)
            shown.append(live.describe(ch.key, value) if value is not None else live.describe(ch.key) + " deleted")
        more = f" (+{len(changes) - 8} more)" if len(changes) > 8 else ""
        return "changes: " + "; ".join(shown) + more

    def _write(self, batch: Batch, why: str, enter_ns: int | None) -> None:
        """Print or apply one batch; the header ends with mono=NS (CLOCK_MONOTONIC when the
        batch was written) and, for a watched write, since_syscall_us split in two: woke_us
        (the syscall's entry to the daemon holding its event: the kernel, the ring buffer's
        wake-up and the scheduler) and work_us (from there to the batch written), with
        cpu_us the daemon's CPU time in that part (work_us - cpu_us: waiting for a CPU or I/O)."""
        if not batch:
            return
        self.batches += 1
        self.out.write(f"# batch {self.batches} at {stamp()}: {why}\n")
        if self.apply:
            try:
                self.device.apply(batch)
            except TcError as err:
                self.device.forget(batch)
                self.failed += 1
                print(f"xdp2tc: sync: {self.device.dev}: {err}", file=sys.stderr)
                self._resync()
                return
        else:
            for i in range(0, len(batch.lines), 4096):  # a 100k-line batch is not copied whole
                self.out.write("".join(line + "\n" for line in batch.lines[i : i + 4096]))
            self.out.flush()
        self.device.commit(batch)
        done = time.monotonic_ns()
        lag = ""
        if enter_ns:
            woke, cpu = self._woke
            lag = (
                f" since_syscall_us={(done - enter_ns) / 1000:.1f} woke_us={(woke - enter_ns) / 1000:.1f}"
                f" work_us={(done - woke) / 1000:.1f} cpu_us={(time.thread_time_ns() - cpu) / 1000:.1f}"
            )
        verb = "applied" if self.apply else "written"
        self.out.write(f"# batch {self.batches} {verb}: {len(batch.lines)} lines mono={done}{lag}\n")
        self.out.flush()

    def _resync(self) -> None:
        """After a failed batch: read the device again and plan from there next time."""
        self.dirty = True
        try:
            self.device.load(parse_filters(self.device.show()))
            for cookie in list(self.device.wanted):
                if cookie not in self.device.present:
                    del self.device.wanted[cookie]
        except TcError as err:
            print(f"xdp2tc: sync: {self.device.dev}: {err}", file=sys.stderr)

    def _fold(self) -> None:
        if self.folder is None:
            return
        try:
            device = parse_filters(self.device.show(stats=True))
        except TcError as err:
            print(f"xdp2tc: sync: counters: {err}", file=sys.stderr)
            return
        self.folder.fold(device, self.device.wanted)

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
        self.live.close()
        self.device.tc.close()


def open_watcher(out: TextIO) -> MapWatcher | None:
    """The map watcher, or None with a note when it cannot run (sync then polls)."""
    try:
        return MapWatcher()
    except WatcherUnavailable as err:
        print(f"# map watcher unavailable ({err}); polling only", file=out)
        return None
