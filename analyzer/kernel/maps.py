"""Kernel maps: map info and the map syscalls (update, lookup, delete, dump), maps of
other processes (pinned or by id) and the ids of loaded maps and programs, map creation."""

from __future__ import annotations

import ctypes
import errno as errno_mod
import os
from dataclasses import dataclass

from lifter.maptypes import map_type

from .libbpf import KernelLoadError, KernelRunError, check_kernel, library


@dataclass(frozen=True)
class MapInfo:
    """A loaded map: its fd and the sizes map operations must honour."""

    name: str
    fd: int
    type: int
    key_size: int
    value_size: int
    max_entries: int

    @property
    def percpu(self) -> bool:
        return map_type(self.type).percpu

    @property
    def value_bytes(self) -> int:
        """Bytes of a value as the syscall reads/writes it: for per-CPU maps one slot of
        round_up(value_size, 8) per possible CPU, CPU i at offset i * slot."""
        if self.percpu:
            return (self.value_size + 7) // 8 * 8 * possible_cpus()
        return self.value_size


def possible_cpus() -> int:
    """libbpf_num_possible_cpus(): how many per-CPU slots a per-CPU map value has."""
    lib = library()
    n = lib.libbpf_num_possible_cpus() if lib else -1
    if n <= 0:
        raise KernelRunError("cannot read the number of possible CPUs", -n if n < 0 else 0)
    return n


# --------------------------------------------------------------------------- map syscalls


def _map_buf(data: bytes, size: int, what: str, info: MapInfo):
    # The kernel reads exactly `size` bytes from the pointer: a wrong length must never
    # reach it (it would read past the Python object).
    if len(data) != size:
        extra = (
            f" ({possible_cpus()} possible CPUs x {(info.value_size + 7) // 8 * 8} bytes)"
            if info.percpu and what == "value"
            else ""
        )
        raise ValueError(f"map {info.name}: {what} must be {size} bytes{extra}, got {len(data)}")
    return ctypes.create_string_buffer(bytes(data), max(size, 1))


def _map_check(ret: int, op: str, info: MapInfo) -> None:
    if ret != 0:
        err = ctypes.get_errno() or -ret
        raise KernelRunError(
            f"{op} on map {info.name} failed: {errno_mod.errorcode.get(err, err)} ({os.strerror(err)})", err
        )


def map_update(info: MapInfo, key: bytes, value: bytes, flags: int = 0) -> None:
    """bpf_map_update_elem on any map fd. Per-CPU maps take `value_bytes` (every CPU's slot)."""
    k = _map_buf(key, info.key_size, "key", info)
    v = _map_buf(value, info.value_bytes, "value", info)
    _map_check(library().bpf_map_update_elem(info.fd, k, v, flags), "update", info)


def map_lookup(info: MapInfo, key: bytes) -> bytes | None:
    """bpf_map_lookup_elem on any map fd: the value (every CPU's slot), or None."""
    k = _map_buf(key, info.key_size, "key", info)
    v = ctypes.create_string_buffer(max(info.value_bytes, 1))
    if library().bpf_map_lookup_elem(info.fd, k, v) != 0:
        err = ctypes.get_errno()
        if err == errno_mod.ENOENT:
            return None
        _map_check(-err or -1, "lookup", info)
    return v.raw[: info.value_bytes]


def map_delete(info: MapInfo, key: bytes) -> bool:
    """bpf_map_delete_elem on any map fd; False if the key was not there."""
    k = _map_buf(key, info.key_size, "key", info)
    if library().bpf_map_delete_elem(info.fd, k) != 0:
        err = ctypes.get_errno()
        if err == errno_mod.ENOENT:
            return False
        _map_check(-err or -1, "delete", info)
    return True


def map_dump(info: MapInfo, batch: int = 4096) -> dict[bytes, bytes]:
    """Every entry of a map: BPF_MAP_LOOKUP_BATCH where the map type has it (hash and array
    maps: one syscall per `batch` entries), else get_next_key + lookup per key (LPM tries).
    Values are raw (per-CPU maps: every CPU's slot)."""
    lib = library()
    out: dict[bytes, bytes] = {}
    vbytes = info.value_bytes
    count = max(1, min(batch, info.max_entries or batch))
    keys = ctypes.create_string_buffer(max(info.key_size, 1) * count)
    values = ctypes.create_string_buffer(max(vbytes, 1) * count)
    token_in = ctypes.create_string_buffer(max(info.key_size, 8))
    token_out = ctypes.create_string_buffer(max(info.key_size, 8))
    first = True
    while True:
        n = ctypes.c_uint32(count)
        ret = lib.bpf_map_lookup_batch(
            info.fd, None if first else token_in, token_out, keys, values, ctypes.byref(n), None
        )
        err = ctypes.get_errno() if ret != 0 else 0
        if ret != 0 and err not in (errno_mod.ENOENT,):
            if err == errno_mod.ENOSPC and count < info.max_entries:  # a hash bucket larger than count
                return map_dump(info, count * 4)
            if first and err in (errno_mod.EINVAL, errno_mod.ENOTSUP, 524):  # 524: ENOTSUPP
                return _map_dump_by_key(info)
            _map_check(-err or -1, "lookup_batch", info)
        kraw, vraw = keys.raw, values.raw
        for i in range(n.value):
            out[kraw[i * info.key_size : (i + 1) * info.key_size]] = vraw[i * vbytes : (i + 1) * vbytes]
        if ret != 0:  # ENOENT: no more entries
            return out
        ctypes.memmove(token_in, token_out, len(token_in))
        first = False


def _map_dump_by_key(info: MapInfo) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for key in map_keys(info):
        value = map_lookup(info, key)
        if value is not None:  # deleted between the two syscalls
            out[key] = value
    return out


def map_keys(info: MapInfo) -> list[bytes]:
    """Every key of a map now, via bpf_map_get_next_key (stops after max_entries keys: a hash
    map changing under the walk can restart it)."""
    lib = library()
    cur = ctypes.create_string_buffer(max(info.key_size, 1))
    nxt = ctypes.create_string_buffer(max(info.key_size, 1))
    keys = []
    prev = None
    while lib.bpf_map_get_next_key(info.fd, prev, nxt) == 0:
        keys.append(nxt.raw[: info.key_size])
        ctypes.memmove(cur, nxt, info.key_size)
        prev = cur
        if len(keys) > info.max_entries:
            break
    return keys


@dataclass(frozen=True)
class KernelMap(MapInfo):
    """A map that lives in the kernel independently of this process (pinned in bpffs or held
    by a loaded program), opened by this process: its kernel id and BTF ids too. `close()`
    releases the fd."""

    id: int = 0
    flags: int = 0
    btf_id: int = 0
    btf_key_type_id: int = 0
    btf_value_type_id: int = 0

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class _BpfMapInfo(ctypes.Structure):
    """struct bpf_map_info (include/uapi/linux/bpf.h), the fields up to btf_value_type_id."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("key_size", ctypes.c_uint32),
        ("value_size", ctypes.c_uint32),
        ("max_entries", ctypes.c_uint32),
        ("map_flags", ctypes.c_uint32),
        ("name", ctypes.c_char * 16),
        ("ifindex", ctypes.c_uint32),
        ("btf_vmlinux_value_type_id", ctypes.c_uint32),
        ("netns_dev", ctypes.c_uint64),
        ("netns_ino", ctypes.c_uint64),
        ("btf_id", ctypes.c_uint32),
        ("btf_key_type_id", ctypes.c_uint32),
        ("btf_value_type_id", ctypes.c_uint32),
    ]


class _BpfProgInfo(ctypes.Structure):
    """struct bpf_prog_info (include/uapi/linux/bpf.h), the fields up to name."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("tag", ctypes.c_uint8 * 8),
        ("jited_prog_len", ctypes.c_uint32),
        ("xlated_prog_len", ctypes.c_uint32),
        ("jited_prog_insns", ctypes.c_uint64),
        ("xlated_prog_insns", ctypes.c_uint64),
        ("load_time", ctypes.c_uint64),
        ("created_by_uid", ctypes.c_uint32),
        ("nr_map_ids", ctypes.c_uint32),
        ("map_ids", ctypes.c_uint64),
        ("name", ctypes.c_char * 16),
    ]


def _obj_info(fd: int, info: ctypes.Structure, what: str) -> None:
    size = ctypes.c_uint32(ctypes.sizeof(info))
    if library().bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)) != 0:
        err = ctypes.get_errno()
        raise KernelRunError(f"BPF_OBJ_GET_INFO_BY_FD on {what} failed: {os.strerror(err)}", err)


def _kernel_map(fd: int, what: str) -> KernelMap:
    info = _BpfMapInfo()
    try:
        _obj_info(fd, info, what)
    except KernelRunError:
        os.close(fd)
        raise
    return KernelMap(
        info.name.decode(errors="replace"),
        fd,
        info.type,
        info.key_size,
        info.value_size,
        info.max_entries,
        id=info.id,
        flags=info.map_flags,
        btf_id=info.btf_id,
        btf_key_type_id=info.btf_key_type_id,
        btf_value_type_id=info.btf_value_type_id,
    )


def _fd_or_raise(fd: int, what: str) -> int:
    if fd < 0:
        err = ctypes.get_errno() or -fd
        raise KernelRunError(f"{what}: {errno_mod.errorcode.get(err, err)} ({os.strerror(err)})", err)
    return fd


def open_pinned_map(path: str) -> KernelMap:
    """The map pinned at `path` in bpffs (BPF_OBJ_GET), with its kernel info."""
    check_kernel()
    fd = _fd_or_raise(library().bpf_obj_get(str(path).encode()), f"{path}: BPF_OBJ_GET")
    return _kernel_map(fd, str(path))


def open_map_by_id(map_id: int) -> KernelMap:
    """The map with kernel id `map_id` (BPF_MAP_GET_FD_BY_ID), with its kernel info."""
    check_kernel()
    fd = _fd_or_raise(library().bpf_map_get_fd_by_id(map_id), f"map id {map_id}: BPF_MAP_GET_FD_BY_ID")
    return _kernel_map(fd, f"map id {map_id}")


def program_map_ids(prog_id: int) -> tuple[str, list[int]]:
    """A loaded program's name and the ids of the maps it uses (BPF_PROG_GET_FD_BY_ID,
    then BPF_OBJ_GET_INFO_BY_FD twice: once for nr_map_ids, once for the ids)."""
    check_kernel()
    lib = library()
    fd = _fd_or_raise(lib.bpf_prog_get_fd_by_id(prog_id), f"program id {prog_id}: BPF_PROG_GET_FD_BY_ID")
    try:
        info = _BpfProgInfo()
        _obj_info(fd, info, f"program id {prog_id}")
        count = info.nr_map_ids
        ids = (ctypes.c_uint32 * max(count, 1))()
        info = _BpfProgInfo(nr_map_ids=count, map_ids=ctypes.addressof(ids))
        _obj_info(fd, info, f"program id {prog_id}")
        return info.name.decode(errors="replace"), list(ids)[: min(count, info.nr_map_ids)]
    finally:
        os.close(fd)


def map_id(fd: int) -> int:
    """The kernel id of the map behind `fd` (BPF_OBJ_GET_INFO_BY_FD)."""
    info = _BpfMapInfo()
    _obj_info(fd, info, f"map fd {fd}")
    return info.id


def prog_id(fd: int) -> int:
    """The kernel id of the program behind `fd` (BPF_OBJ_GET_INFO_BY_FD)."""
    info = _BpfProgInfo()
    _obj_info(fd, info, f"program fd {fd}")
    return info.id


def kernel_btf(btf_id: int) -> bytes:
    """The raw BTF blob the kernel holds under `btf_id` (a map's or program's BTF)."""
    lib = library()
    btf = lib.btf__load_from_kernel_by_id(btf_id)  # libbpf >= 1.0: NULL and errno on failure
    if not btf:
        err = ctypes.get_errno()
        raise KernelRunError(f"BTF id {btf_id}: cannot load: {os.strerror(err)}", err)
    try:
        size = ctypes.c_uint32(0)
        data = lib.btf__raw_data(btf, ctypes.byref(size))
        return ctypes.string_at(data, size.value)
    finally:
        lib.btf__free(btf)


class _MapCreateOpts(ctypes.Structure):
    """struct bpf_map_create_opts (<bpf/bpf.h>, libbpf 1.1)."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("btf_fd", ctypes.c_uint32),
        ("btf_key_type_id", ctypes.c_uint32),
        ("btf_value_type_id", ctypes.c_uint32),
        ("btf_vmlinux_value_type_id", ctypes.c_uint32),
        ("inner_map_fd", ctypes.c_uint32),
        ("map_flags", ctypes.c_uint32),
        ("map_extra", ctypes.c_uint64),
        ("numa_node", ctypes.c_uint32),
        ("map_ifindex", ctypes.c_uint32),
    ]


def create_map(type_id: int, name: str, key_size: int, value_size: int, max_entries: int, flags: int = 0) -> int:
    """bpf(BPF_MAP_CREATE): the new map's fd (the caller closes it). KernelLoadError with
    the errno's name and text when the kernel refuses."""
    opts = _MapCreateOpts(sz=ctypes.sizeof(_MapCreateOpts), map_flags=flags)
    fd = library().bpf_map_create(type_id, name.encode()[:15], key_size, value_size, max_entries, ctypes.byref(opts))
    if fd < 0:
        err = ctypes.get_errno() or -fd
        raise KernelLoadError(f"creating map {name} failed: {errno_mod.errorcode.get(err, err)} ({os.strerror(err)})")
    return fd
