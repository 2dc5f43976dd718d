"""Map-change events for `xdp2tc sync` (issue 12, item 3): the project's own tracing
program (offload/mapwatch.bpf.c, built into build/mapwatch.o by `make watcher`) on the
`syscalls:sys_enter_bpf`/`sys_exit_bpf` tracepoints, read over its ring buffer.

Why the syscall tracepoints and not the BPF LSM `bpf` hook: both see the command and its
attributes before the command runs, but only the exit tracepoint says whether it succeeded
(a BPF_NOEXIST update of an existing key changes nothing), and they need no `lsm=` boot
setting (`bpf` must be in the active LSM list for LSM programs; tracepoints only need
CONFIG_FTRACE_SYSCALLS and tracefs). The fd is resolved to the map id in the kernel, in the
writer's context, because short-lived writers are gone before user space could read
/proc/PID/fdinfo.

What this cannot see, and `sync` therefore also polls for (batched-lookup diffs): writes
the XDP program itself makes (bpf_map_update_elem from BPF is not a syscall), writes
through a memory-mapped array, and events lost when the ring buffer is full.
"""

from __future__ import annotations

import os
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from analyzer import kernel

#: build/mapwatch.o in a source checkout (where `make watcher` puts it).
OBJECT = Path(__file__).resolve().parent.parent / "build" / "mapwatch.o"
TRACEFS = Path("/sys/kernel/tracing")
KEY_MAX = VALUE_MAX = 64
#: struct event in mapwatch.bpf.c: enter_ns, map_id, cmd, key_size, ret, early, pad,
#: key[KEY_MAX], value_size, pad2, value[VALUE_MAX].
EVENT = struct.Struct(f"<QIIIiII{KEY_MAX}sII{VALUE_MAX}s")


@dataclass(frozen=True)
class MapEvent:
    """A change to a watched map: its id, the bpf command, the key (None: unknown, re-read
    the whole map), CLOCK_MONOTONIC ns at the syscall's entry, and whether it was seen at
    its entry (`early`: a delete, or an update with its new `value`, about to happen; the
    exit event follows whatever the command returns)."""

    map_id: int
    cmd: int
    key: bytes | None
    enter_ns: int
    early: bool = False
    value: bytes | None = None


class WatcherUnavailable(RuntimeError):
    """The watcher cannot run here; the message (one line) says why. sync then polls."""


class MapWatcher:
    """The loaded, attached watcher: `watch(ids)`, then `poll(ms)` returns the events."""

    def __init__(self, obj_path: Path = OBJECT):
        if not obj_path.is_file():
            raise WatcherUnavailable(f"{obj_path} is not built (make watcher)")
        _ensure_tracefs()
        self._events: list[MapEvent] = []
        try:
            self._obj = kernel.load(obj_path)
            self._obj.attach("xdp2tc_map_enter")
            self._obj.attach("xdp2tc_map_exit")
            self._ring = self._obj.ring_buffer("events", self._record)
        except (kernel.KernelUnavailable, kernel.KernelLoadError, kernel.KernelRunError, KeyError) as err:
            if getattr(self, "_obj", None) is not None:
                self._obj.close()
            raise WatcherUnavailable(str(err).splitlines()[0]) from None

    def watch(self, map_ids) -> None:
        for map_id in map_ids:
            self._obj.map_update("watched", map_id.to_bytes(4, "little"), b"\1")

    def _record(self, data: bytes) -> None:
        enter_ns, map_id, cmd, key_size, _ret, early, _pad, key, value_size, _pad2, value = EVENT.unpack_from(data)
        self._events.append(
            MapEvent(
                map_id,
                cmd,
                key[:key_size] if key_size else None,
                enter_ns,
                bool(early),
                value[:value_size] if value_size else None,
            )
        )

    def poll(self, timeout_ms: int) -> list[MapEvent]:
        """Events that arrived within `timeout_ms` (returns as soon as there is one)."""
        self._ring.poll(timeout_ms)
        self._ring.poll(0)  # whatever followed the first record
        events, self._events = self._events, []
        return events

    def close(self) -> None:
        self._obj.close()


def _ensure_tracefs() -> None:
    """Syscall tracepoints are attached by id, read from tracefs: mount it where systemd does
    when it is missing (root only), else say why the watcher cannot run."""
    if (TRACEFS / "events").is_dir() or Path("/sys/kernel/debug/tracing/events").is_dir():
        return
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tracefs", "tracefs", str(TRACEFS)], capture_output=True)
    if not (TRACEFS / "events").is_dir():
        raise WatcherUnavailable(f"tracefs is not mounted at {TRACEFS} (mount -t tracefs tracefs {TRACEFS})")
