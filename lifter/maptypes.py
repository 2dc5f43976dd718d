"""BPF map types: the one table of what each kind of map is.

Ids are `enum bpf_map_type` from the kernel's include/uapi/linux/bpf.h. The columns say what
later stages need to know about a lookup: how the key selects an entry (`keyed`), whether the
value is per CPU (so data-plane counters in it never feed a cross-CPU decision), whether every
index always has an entry (arrays: a lookup never misses, clearing means writing zeros), and
whether a lookup from XDP returns a value pointer at all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MapType:
    """One row of the table."""

    id: int
    name: str  # as bpftool prints it
    keyed: str  # "index" (array-like), "hash", "lpm", "none" (queue/stack/ringbuf/...)
    percpu: bool = False
    always_present: bool = False  # every index below max_entries has an entry (zeroed at creation)
    lookup_returns_value: bool = True  # False: lookups from BPF are not allowed or return no value
    holds: str = "data"  # "data", "program", "map", "device", "cpu", "socket"


MAP_TYPES: tuple[MapType, ...] = (
    MapType(0, "unspec", "none", lookup_returns_value=False),
    MapType(1, "hash", "hash"),
    MapType(2, "array", "index", always_present=True),
    MapType(3, "prog_array", "index", lookup_returns_value=False, holds="program"),
    MapType(4, "perf_event_array", "index", lookup_returns_value=False, holds="socket"),
    MapType(5, "percpu_hash", "hash", percpu=True),
    MapType(6, "percpu_array", "index", percpu=True, always_present=True),
    MapType(7, "stack_trace", "index"),
    MapType(8, "cgroup_array", "index", lookup_returns_value=False),
    MapType(9, "lru_hash", "hash"),
    MapType(10, "lru_percpu_hash", "hash", percpu=True),
    MapType(11, "lpm_trie", "lpm"),
    MapType(12, "array_of_maps", "index", holds="map"),
    MapType(13, "hash_of_maps", "hash", holds="map"),
    MapType(14, "devmap", "index", holds="device"),
    MapType(15, "sockmap", "index", holds="socket"),
    MapType(16, "cpumap", "index", holds="cpu"),
    MapType(17, "xskmap", "index", holds="socket"),
    MapType(18, "sockhash", "hash", holds="socket"),
    MapType(19, "cgroup_storage_deprecated", "none"),
    MapType(20, "reuseport_sockarray", "index", lookup_returns_value=False, holds="socket"),
    MapType(21, "percpu_cgroup_storage_deprecated", "none", percpu=True),
    MapType(22, "queue", "none", lookup_returns_value=False),
    MapType(23, "stack", "none", lookup_returns_value=False),
    MapType(24, "sk_storage", "none"),
    MapType(25, "devmap_hash", "hash", holds="device"),
    MapType(26, "struct_ops", "index", lookup_returns_value=False),
    MapType(27, "ringbuf", "none", lookup_returns_value=False),
    MapType(28, "inode_storage", "none"),
    MapType(29, "task_storage", "none"),
    MapType(30, "bloom_filter", "none", lookup_returns_value=False),
    MapType(31, "user_ringbuf", "none", lookup_returns_value=False),
    MapType(32, "cgrp_storage", "none"),
    MapType(33, "arena", "none", lookup_returns_value=False),
)

_BY_ID = {t.id: t for t in MAP_TYPES}
_BY_NAME = {t.name: t for t in MAP_TYPES}


def map_type(type_id: int) -> MapType:
    """The row for a map type id; unknown ids get a row named `unknown(N)` that no later stage
    treats as understood."""
    return _BY_ID.get(type_id) or MapType(type_id, f"unknown({type_id})", "none", lookup_returns_value=False)


def map_type_by_name(name: str) -> MapType | None:
    """The row for a bpftool-style name (``hash``, ``lpm_trie``...)."""
    return _BY_NAME.get(name)
