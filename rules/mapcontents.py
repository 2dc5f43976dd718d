"""Map contents: the entries of an object's maps at one instant, as plain bytes.

This is the seam between where map contents come from (offload: a `bpftool map dump -j` file,
maps pinned in bpffs, the maps of a loaded program; `sync` as they change) and what consumes
them (rule templates filled from real entries). Nothing here reads the kernel or prints tc.

Keys and values are the map's raw bytes in the kernel's layout (host byte order for integers,
network order where the program stores packet bytes). A per-CPU map holds one value per
possible CPU; every other map holds a one-element tuple, so consumers handle both alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MapEntries:
    """The entries of one map, named as the object names it (its ELF symbol)."""

    name: str
    map_type: int  # lifter.maptypes id
    key_size: int
    value_size: int
    entries: dict[bytes, tuple[bytes, ...]] = field(default_factory=dict)

    def value(self, key: bytes) -> tuple[bytes, ...] | None:
        """The value(s) stored under `key`, or None when the entry does not exist."""
        return self.entries.get(key)


@dataclass(frozen=True)
class MapContents:
    """Every map whose contents are known, by name. A map absent here is unknown, not empty."""

    maps: dict[str, MapEntries] = field(default_factory=dict)

    def get(self, name: str) -> MapEntries | None:
        """The map named `name`, or None when its contents were not given."""
        return self.maps.get(name)
