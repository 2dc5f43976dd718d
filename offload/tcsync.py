"""The batch writer of `xdp2tc sync` (issue 12, items 3 and 4): desired filters versus the
filters on the device, as the smallest sound batch of `tc` commands; and the filters'
hardware counters folded back into the program's stats-only maps.

Identity. Every filter sync adds carries an action cookie (`action drop cookie HEX`, 16
bytes: the tag `x2tc` then 12 bytes of SHA-256 over what the filter is: chain, prio, match,
action, skip flag). So `tc -j filter show` tells, without parsing flower keys back, which
filters are sync's (the tag), which of them are still wanted (the digest) and where they sit
(chain, pref, handle). Filters without the tag are someone else's: never touched, their
handles avoided. Restarting sync therefore neither duplicates nor leaves stale filters.

Order inside one batch (each line is one instant the NIC sees; `pass` is always sound, it
hands the packet to the program, and a filter's proof assumes the filters before it):
  1. add the new shields (pass, goto) in evaluation order: they only take packets away
     from the filters after them;
  2. delete the verdict filters (drop, redirect) that are no longer wanted, last-evaluated
     first: after a map entry changed they are the ones that may be wrong now;
  3. add the new verdict filters in evaluation order, behind every shield they rely on;
  4. delete the shields no longer wanted, last-evaluated first.
A verdict filter made wrong by a map change is wrong from the syscall until step 2 of the
batch that follows it has been applied: that window is what bench/sync.py measures.

Counters folded back: `tc -s -j filter show` gives each action's `stats` (iproute2
tc/m_action.c prints an action's `cookie` and `stats`; tc/tc_util.c print_tcstats2_attr the
totals `packets`/`bytes`, and print_tcstats_basic_hw `hw_packets`/`hw_bytes` beside them, only
when the kernel sent TCA_STATS_BASIC_HW and they are not both zero). Which of them are packets
the program no longer sees depends on where the filters classify relative to the XDP hook
(TcDevice.folds):
  * FOLD_HARDWARE, `skip_sw` filters in the NIC (sync's default): the NIC classifies before
    the driver runs XDP, so what the filters drop never reaches the program: the `hw_*`
    counters are folded. Where tc prints none, the totals: a skip_sw filter is never run in
    software (cls_flower keeps it out of its software table), so its totals are the NIC's
    (all zero when tc leaves `hw_*` out for being zero; the NIC's alone on kernels without
    TCA_STATS_BASIC_HW).
  * FOLD_SOFTWARE, `skip_hw` filters in the flower VM (`sync --apply --vm`): the VM has no
    NIC and no XDP program; its software classifier stands in for the NIC, so the totals are
    folded, as the NIC's would be.
  * None, `skip_hw` filters on the program's own host (`sync --sw`): tc's ingress hook runs
    in __netif_receive_skb_core after XDP (native XDP runs in the driver before an skb
    exists; generic XDP, do_xdp_generic, runs before sch_handle_ingress), so only packets
    the program returned XDP_PASS for reach these filters: the program has seen and counted
    every packet they count. Nothing is folded (folding would count them twice).
The delta since the last reading is added to the counter entries the filter names
(CounterRef) in one CPU's slot: a possible CPU that is not online when there is one (the
program never writes that slot), else CPU 0. The update syscall writes every CPU's slot of a
per-CPU value at once (there is no single-slot update), so an increment another CPU makes
between the read and the write of one fold is lost: a window of two syscalls per entry.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from dataclasses import dataclass, field
from typing import Protocol

from analyzer import kernel
from rules.flower import Exact, FlowerMatch
from rules.tc import filter_line

#: The first 4 bytes of every cookie sync writes (ASCII "x2tc").
COOKIE_TAG = b"x2tc".hex()
#: Actions after which a packet continues to the program or to other filters: adding them
#: early and removing them late keeps every instant sound.
SHIELD_ACTIONS = ("pass", "goto")
#: tc filter handles are 32-bit, 0 meaning "none".
MAX_HANDLE = 0xFFFFFFFF
#: TcDevice.folds: which counters of sync's filters are packets the program no longer sees
#: (module docstring): the NIC's (`hw_packets`/`hw_bytes`), or the flower VM's software
#: classifier's, standing in for a NIC (`packets`/`bytes`). None: the filters run behind XDP.
FOLD_HARDWARE = "hardware"
FOLD_SOFTWARE = "software"
#: `folds` from the skip flag: FOLD_HARDWARE for skip_sw filters, None for skip_hw ones here.
BY_SKIP = "by-skip"


@dataclass(frozen=True)
class CounterRef:
    """A stats-only map entry the program increments on the packets a filter now takes in
    hardware: `what` ("packets" or "bytes") times `scale` is added to the integer of `size`
    bytes at `offset` in the value under `key` of map `map`."""

    map: str
    key: bytes
    offset: int = 0
    size: int = 8
    what: str = "packets"
    scale: int = 1


def keys_repr(keys: tuple) -> str:
    """repr(keys) of a FlowerMatch's keys, character for character (a cookie hashes it, so
    filters keep their cookies across versions), without the dataclasses' generic repr:
    a 100k-entry reconcile makes one per filter."""
    parts = [
        f"({n!r}, Exact(value={v.value!r}, mask={v.mask!r}))" if type(v) is Exact else f"({n!r}, {v!r})"
        for n, v in keys
    ]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


@dataclass(frozen=True, slots=True)
class SyncFilter:
    """One filter sync wants on the device: where it sits (chain, prio), what it matches and
    does (`action` tokens after the word `action`), which map entry it comes from (`origin`,
    None for filters that hold for every map content) and the counters it takes over.
    Slotted: sync keeps one per map entry (100k entries: every byte counts)."""

    match: FlowerMatch
    action: tuple[str, ...]
    prio: int
    chain: int = 0
    origin: tuple[str, bytes] | None = None
    counters: tuple[CounterRef, ...] = ()
    #: the last cookie() call's skip flag and cookie (a device asks with one skip flag)
    _skip: str | None = field(default=None, init=False, repr=False, compare=False)
    _cookie: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def shield(self) -> bool:
        return self.action[0] in SHIELD_ACTIONS

    def cookie(self, skip: str | None) -> str:
        """The action cookie naming this filter (module docstring); cached for one skip."""
        if self._cookie is not None and self._skip == skip:
            return self._cookie
        # the match's normalised keys (repr of ints and key names: stable across runs)
        keys = keys_repr(self.match.keys)
        what = f"{self.chain}|{self.prio}|{self.match.protocol}|{keys}|{' '.join(self.action)}|{skip}"
        cookie = COOKIE_TAG + hashlib.sha256(what.encode()).hexdigest()[:24]
        object.__setattr__(self, "_skip", skip)
        object.__setattr__(self, "_cookie", cookie)
        return cookie


@dataclass(frozen=True, slots=True)
class DeviceFilter:
    """A filter found on the device (`tc -j filter show`): where it sits, its kind, the
    first action's cookie (None: none) and its counters: tc's totals (`packets`, `bytes`)
    and the hardware part (`hw_packets`, `hw_bytes`; None where tc printed none)."""

    chain: int
    prio: int
    protocol: str
    handle: int
    kind: str
    cookie: str | None
    action: str = ""  # the first action's control type (gact: drop, pass, goto, ...)
    packets: int = 0
    bytes: int = 0
    hw_packets: int | None = None
    hw_bytes: int | None = None

    @property
    def ours(self) -> bool:
        return bool(self.cookie) and self.cookie.startswith(COOKIE_TAG)

    def unseen(self, folds: str) -> tuple[int, int]:
        """(packets, bytes) the program did not see, for filters classifying as `folds` says
        (FOLD_HARDWARE or FOLD_SOFTWARE; module docstring)."""
        if folds == FOLD_HARDWARE and self.hw_packets is not None:
            return self.hw_packets, self.hw_bytes or 0
        return self.packets, self.bytes


def parse_filters(text: str) -> list[DeviceFilter]:
    """The filters of a `tc [-s] -j filter show` document. The per-prio header objects tc
    prints without `options` are skipped; a handle may come as a number or "0x.." text."""
    out = []
    for item in json.loads(text or "[]"):
        options = item.get("options")
        if not isinstance(options, dict) or "handle" not in options:
            continue
        handle = options["handle"]
        handle = int(handle, 16) if isinstance(handle, str) else int(handle)
        actions = options.get("actions") or [{}]
        first = actions[0]
        stats = first.get("stats") or {}
        out.append(
            DeviceFilter(
                chain=int(item.get("chain", 0)),
                prio=int(item["pref"]),
                protocol=str(item.get("protocol", "all")),
                handle=handle,
                kind=str(item.get("kind", "")),
                cookie=first.get("cookie"),
                action=str((first.get("control_action") or {}).get("type", first.get("kind", ""))),
                packets=int(stats.get("packets", 0)),
                bytes=int(stats.get("bytes", 0)),
                hw_packets=int(stats["hw_packets"]) if "hw_packets" in stats else None,
                hw_bytes=int(stats["hw_bytes"]) if "hw_bytes" in stats else None,
            )
        )
    return out


@dataclass
class Batch:
    """One batch of tc lines and what they do (for the dry-run header and the counters)."""

    lines: list[str] = field(default_factory=list)
    added: list[tuple[SyncFilter, int, str]] = field(default_factory=list)  # filter, handle, cookie
    removed: list[DeviceFilter] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.lines)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


class TcRunner(Protocol):
    """Where sync's tc commands run (the executor seam): called with tc's arguments and the
    text for its stdin, it returns what `subprocess.run(..., text=True)` would. HostTc runs
    `tc` (or `tc -n NETNS`) here; offload/flowervm.py's VmTc runs it in the flower VM, so
    `sync --apply --vm` applies its batches to a real cls_flower. `name` is how messages
    call it; `close` ends what the runner holds (the VM); `folds` is TcDevice's default for
    its filters' counters (BY_SKIP: from the skip flag; the VM's: FOLD_SOFTWARE)."""

    name: str
    folds: str | None

    def __call__(self, args: list[str], stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run tc with `args`."""
        ...

    def close(self) -> None:
        """Release what the runner holds."""
        ...


@dataclass(frozen=True)
class HostTc:
    """tc on this host: `command` is `tc` or `tc -n NETNS` (argument vector, no shell)."""

    command: tuple[str, ...] = ("tc",)
    folds = BY_SKIP  # filters here: a NIC's (skip_sw) or behind XDP (skip_hw)

    @property
    def name(self) -> str:
        return " ".join(self.command)

    def __call__(self, args: list[str], stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([*self.command, *args], input=stdin, capture_output=True, text=True, timeout=timeout)

    def close(self) -> None:
        pass


class TcDevice:
    """The filters sync keeps on one device's ingress: what is there (by cookie), handles
    in use, and the TcRunner that reads and writes them (default: `tc` here; a tuple is
    taken as the host command, e.g. `tc -n NETNS`). `folds`: which of the filters' counters
    are packets the program does not see (module docstring; by default the runner's: in the
    flower VM FOLD_SOFTWARE, here FOLD_HARDWARE for skip_sw and None for skip_hw filters,
    which sit behind the program's XDP hook)."""

    def __init__(
        self,
        dev: str,
        skip: str | None = "skip_sw",
        tc: tuple[str, ...] | TcRunner = ("tc",),
        folds: str | None = BY_SKIP,
    ):
        self.dev = dev
        self.skip = skip
        self.tc: TcRunner = HostTc(tuple(tc)) if isinstance(tc, tuple | list) else tc
        if folds == BY_SKIP:
            folds = getattr(self.tc, "folds", BY_SKIP)
        self.folds = (None if skip == "skip_hw" else FOLD_HARDWARE) if folds == BY_SKIP else folds
        if self.folds not in (None, FOLD_HARDWARE, FOLD_SOFTWARE):
            raise ValueError(f"folds must be {FOLD_HARDWARE!r}, {FOLD_SOFTWARE!r} or None, not {folds!r}")
        # cookie -> sync's filter on the device: as read (DeviceFilter), or the handle of one
        # this process added (its filter is wanted[cookie]; see device_filter)
        self.present: dict[str, DeviceFilter | int] = {}
        self.wanted: dict[str, SyncFilter] = {}  # cookie -> filter (only those sync added)
        self.used: dict[tuple[int, int], set[int]] = {}  # (chain, prio) -> handles taken on the device
        self._next: dict[tuple[int, int], int] = {}  # (chain, prio) -> where the next handle search starts

    # -- reading the device
    def show(self, stats: bool = False) -> str:
        """`tc [-s] -j filter show dev DEV ingress` (argument vector, no shell)."""
        argv = [*(["-s"] if stats else []), "-j", "filter", "show", "dev", self.dev, "ingress"]
        proc = self.tc(argv, timeout=30)
        if proc.returncode != 0:
            raise TcError(f"{self.tc.name} {' '.join(argv)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
        return proc.stdout

    def load(self, filters: list[DeviceFilter]) -> None:
        """Take the device's filters as the starting point (restart-safe reconcile)."""
        self.present = {f.cookie: f for f in filters if f.ours}
        self.used = {}
        for f in filters:
            self.used.setdefault((f.chain, f.prio), set()).add(f.handle)
        self._next = {}

    # -- the diff
    def plan(self, desired: list[SyncFilter]) -> Batch:
        """The batch that turns the device's filters into `desired` (module docstring order).
        Filters already there (same cookie) are left alone; duplicates in `desired` collapse."""
        want: dict[str, SyncFilter] = {}
        skip = self.skip
        for f in desired:
            want.setdefault(f.cookie(skip), f)
        present = self.present
        return self._batch(
            [(c, f) for c, f in want.items() if c not in present],
            [self.device_filter(c) for c in present if c not in want],
        )

    def device_filter(self, cookie: str) -> DeviceFilter:
        """Sync's filter on the device under `cookie` (one this process added is kept as its
        handle beside its SyncFilter: 100k of them need no DeviceFilter until removed)."""
        d = self.present[cookie]
        if isinstance(d, DeviceFilter):
            return d
        f = self.wanted[cookie]
        return DeviceFilter(f.chain, f.prio, f.match.protocol, d, "flower", cookie, f.action[0])

    def plan_changes(
        self,
        changes: list[tuple[list[SyncFilter], list[SyncFilter]]],
        early: list[tuple[list[SyncFilter], list[SyncFilter]]] = (),
    ) -> Batch:
        """One batch for map entries' filters going from `old` to `new` (a list of such
        pairs), without looking at the rest (the per-change fast path: its cost does not
        grow with the map). A filter still wanted by another pair is kept. `early` pairs are
        changes about to happen: only their safe half is done, `pass` filters added and
        verdict filters removed (a goto is neither added nor removed before the write)."""
        old_c: dict[str, SyncFilter] = {}
        new_c: dict[str, SyncFilter] = {}
        for old, new in changes:
            old_c.update((f.cookie(self.skip), f) for f in old)
            new_c.update((f.cookie(self.skip), f) for f in new)
        for old, new in early:
            keep = {f.cookie(self.skip) for f in new}
            new_c.update((f.cookie(self.skip), f) for f in new if f.action[0] == "pass")
            old_c.update((c, f) for f in old if not f.shield and (c := f.cookie(self.skip)) not in keep)
        adds = [(c, f) for c, f in new_c.items() if c not in self.present]
        drops = [self.device_filter(c) for c in old_c.keys() - new_c.keys() if c in self.present]
        return self._batch(adds, drops)

    def _batch(self, adds: list[tuple[str, SyncFilter]], removes: list[DeviceFilter]) -> Batch:
        """`adds`: (cookie, filter) pairs."""
        batch = Batch()
        ordered = [(f, self._handle(f), c) for c, f in sorted(adds, key=lambda cf: (cf[1].chain, cf[1].prio))]

        def add(f: SyncFilter, h: int, c: str) -> None:
            batch.lines.append(filter_line(self.dev, f.match, (*f.action, "cookie", c), f.prio, f.chain, h, self.skip))
            batch.added.append((f, h, c))

        def remove(d: DeviceFilter) -> None:
            batch.lines.append(
                f"filter del dev {self.dev} ingress protocol {d.protocol} prio {d.prio} chain {d.chain} "
                f"handle 0x{d.handle:x} {d.kind or 'flower'}"
            )
            batch.removed.append(d)

        later_first = sorted(removes, key=lambda d: (d.chain, d.prio, d.handle), reverse=True)
        shields = {d.cookie for d in removes if self._was_shield(d)}
        for f, h, c in ordered:
            if f.shield:
                add(f, h, c)
        for d in later_first:
            if d.cookie not in shields:
                remove(d)
        for f, h, c in ordered:
            if not f.shield:
                add(f, h, c)
        for d in later_first:
            if d.cookie in shields:
                remove(d)
        return batch

    def _was_shield(self, d: DeviceFilter) -> bool:
        f = self.wanted.get(d.cookie)
        return f.shield if f is not None else d.action in SHIELD_ACTIONS

    def _handle(self, f: SyncFilter) -> int:
        """The lowest free handle at the filter's (chain, prio) from where the last search
        ended (handles freed since are found again when the search wraps)."""
        where = (f.chain, f.prio)
        used = self.used.setdefault(where, set())
        h = self._next.get(where, 1)
        for _ in range(2):
            while h in used and h <= MAX_HANDLE:
                h += 1
            if h <= MAX_HANDLE:
                break
            h = 1
        else:
            raise TcError(f"no free handle at chain {f.chain} prio {f.prio}")
        used.add(h)
        self._next[where] = h + 1
        return h

    def commit(self, batch: Batch) -> None:
        """Record a batch as done (applied, or printed in a dry run)."""
        for d in batch.removed:
            self.present.pop(d.cookie, None)
            self.wanted.pop(d.cookie, None)
            self.used.get((d.chain, d.prio), set()).discard(d.handle)
        present, wanted = self.present, self.wanted
        for f, h, c in batch.added:
            present[c] = h
            wanted[c] = f

    def forget(self, batch: Batch) -> None:
        """Give back the handles a batch reserved but did not apply."""
        for f, h, _ in batch.added:
            self.used.get((f.chain, f.prio), set()).discard(h)
            self._next.pop((f.chain, f.prio), None)

    # -- writing
    def apply(self, batch: Batch) -> None:
        """Run the batch through `tc -batch -` (lines on stdin); TcError with
        tc's message when a line fails (tc stops at the first failing line)."""
        proc = self.tc(["-batch", "-"], batch.text(), timeout=60)
        if proc.returncode != 0:
            text = " | ".join(s.strip() for s in (proc.stderr + proc.stdout).splitlines() if s.strip())
            raise TcError(f"tc -batch exited {proc.returncode}: {text}", proc.returncode)


class TcError(RuntimeError):
    """tc refused a command or could not be run; the message is one line."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


# --------------------------------------------------------------------------- counters


def fold_slot() -> int:
    """The per-CPU slot counters are added to: a possible CPU that is not online, else 0."""
    possible = kernel.possible_cpus()
    try:
        with open("/sys/devices/system/cpu/online") as fh:
            online = _cpu_list(fh.read())
    except OSError:
        return 0
    spare = [c for c in range(possible) if c not in online]
    return spare[0] if spare else 0


def _cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


@dataclass
class CounterFolder:
    """Counter deltas since the last reading, added to the counter maps; `folds`: which
    counters (FOLD_HARDWARE or FOLD_SOFTWARE, module docstring)."""

    maps: dict[str, kernel.MapInfo]  # counter map name -> open map
    slot: int = 0
    folds: str = FOLD_HARDWARE
    seen: dict[str, tuple[int, int]] = field(default_factory=dict)  # cookie -> (packets, bytes)

    def fold(self, device: list[DeviceFilter], wanted: dict[str, SyncFilter]) -> dict[tuple[str, bytes], int]:
        """Add each filter's new unseen packets/bytes to its CounterRefs. A filter seen for
        the first time sets its baseline (what it counted before sync saw it is not known to
        be unfolded); a counter that went down means the filter was re-created: all of it is
        new. Returns what was added per (map, key)."""
        added: dict[tuple[str, bytes], int] = {}
        for d in device:
            f = wanted.get(d.cookie) if d.cookie else None
            if f is None:
                continue
            packets, nbytes = d.unseen(self.folds)
            last = self.seen.get(d.cookie)
            self.seen[d.cookie] = (packets, nbytes)
            if last is None:
                continue
            dp = packets - last[0] if packets >= last[0] else packets
            db = nbytes - last[1] if nbytes >= last[1] else nbytes
            for ref in f.counters:
                delta = (dp if ref.what == "packets" else db) * ref.scale
                if delta and ref.map in self.maps:  # else a map the sources lack (sync warned)
                    self._add(ref, delta)
                    added[(ref.map, ref.key)] = added.get((ref.map, ref.key), 0) + delta
        return added

    def _add(self, ref: CounterRef, delta: int) -> None:
        info = self.maps[ref.map]
        raw = kernel.map_lookup(info, ref.key)
        if raw is None:
            raw = bytes(info.value_bytes)
        slot = (info.value_size + 7) // 8 * 8 if info.percpu else 0
        at = self.slot * slot + ref.offset
        mask = (1 << (8 * ref.size)) - 1
        value = (int.from_bytes(raw[at : at + ref.size], "little") + delta) & mask
        new = raw[:at] + value.to_bytes(ref.size, "little") + raw[at + ref.size :]
        kernel.map_update(info, ref.key, new)


def stamp() -> str:
    """A UTC wall-clock timestamp with microseconds, for batch headers."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
