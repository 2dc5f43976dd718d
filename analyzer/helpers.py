"""The helper table: every BPF helper xdp2tc knows, defined once.

Ids and argument kinds are from include/uapi/linux/bpf.h (``___BPF_FUNC_MAPPER``) and the
helpers' ``bpf_func_proto`` in the kernel (net/core/filter.c, kernel/bpf/helpers.c).
Everything downstream reads this table: the explorer (`model` picks the semantics in
`analyzer/calls.py`, `effects` what a path records), the angr engine (the same two), the cost
model and calibration (`name`), the check gate (`name`, for messages).

Columns:

* ``args``   -- what r1..r5 hold: ``ctx``, ``map``, ``key`` (pointer to key_size bytes),
  ``value`` (pointer to value_size bytes), ``mem``/``size`` (buffer and its length),
  ``int``, ``func`` (callback), ``ptr`` (helper-specific memory).
* ``ret``    -- ``int`` (scalar), ``map_value_or_null``, ``mem_or_null``, ``verdict``
  (an XDP action), ``none`` (void: r0 is not meaningful).
* ``effects`` -- side effects outside the packet verdict: ``map_write``, ``map_delete``,
  ``output`` (perf/ring buffer/trace pipe), ``lock``, ``packet_resize``, ``redirect``,
  ``tail_call``, ``callback``.
* ``model``  -- how the explorer interprets it (see analyzer/calls.py); ``havoc`` means
  r0 becomes an unknown scalar and the path is marked unsupported.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Helper:
    """One BPF helper (`id` = the imm of `call`)."""

    id: int
    name: str
    args: tuple[str, ...]
    ret: str
    effects: tuple[str, ...]
    model: str


def _h(id: int, name: str, args: str, ret: str, effects: str, model: str) -> Helper:
    return Helper(id, name, tuple(args.split()), ret, tuple(effects.split()), model)


#: The table. Order: by id.
HELPERS: tuple[Helper, ...] = (
    _h(1, "map_lookup_elem", "map key", "map_value_or_null", "", "map_lookup"),
    _h(2, "map_update_elem", "map key value int", "int", "map_write", "map_update"),
    _h(3, "map_delete_elem", "map key", "int", "map_delete", "map_delete"),
    _h(5, "ktime_get_ns", "", "int", "", "fresh64"),
    _h(6, "trace_printk", "mem size int int int", "int", "output", "output"),
    _h(7, "get_prandom_u32", "", "int", "", "fresh32"),
    _h(8, "get_smp_processor_id", "", "int", "", "fresh32"),
    _h(12, "tail_call", "ctx map int", "int", "tail_call", "tail_call"),
    _h(23, "redirect", "int int", "verdict", "redirect", "redirect"),
    _h(25, "perf_event_output", "ctx map int mem size", "int", "output", "output"),
    _h(28, "csum_diff", "mem size mem size int", "int", "", "csum_diff"),
    _h(44, "xdp_adjust_head", "ctx int", "int", "packet_resize", "adjust_head"),
    _h(51, "redirect_map", "map key int", "verdict", "redirect", "redirect_map"),
    _h(54, "xdp_adjust_meta", "ctx int", "int", "packet_resize", "adjust_meta"),
    _h(65, "xdp_adjust_tail", "ctx int", "int", "packet_resize", "adjust_tail"),
    _h(69, "fib_lookup", "ctx ptr size int", "int", "", "havoc_mem"),
    _h(93, "spin_lock", "ptr", "none", "lock", "effect"),
    _h(94, "spin_unlock", "ptr", "none", "lock", "effect"),
    _h(113, "probe_read_kernel", "mem size ptr", "int", "", "havoc_mem"),
    _h(121, "xdp_output", "ctx map int mem size", "int", "output", "output"),
    _h(125, "ktime_get_boot_ns", "", "int", "", "fresh64"),
    _h(130, "ringbuf_output", "map mem size int", "int", "output", "output"),
    _h(131, "ringbuf_reserve", "map size int", "mem_or_null", "output", "ringbuf_reserve"),
    _h(132, "ringbuf_submit", "ptr int", "none", "output", "effect"),
    _h(133, "ringbuf_discard", "ptr int", "none", "output", "effect"),
    _h(181, "loop", "int func ptr int", "int", "callback", "loop"),
    _h(188, "xdp_get_buff_len", "ctx", "int", "", "buff_len"),
    _h(189, "xdp_load_bytes", "ctx int mem size", "int", "", "load_bytes"),
    _h(190, "xdp_store_bytes", "ctx int mem size", "int", "", "store_bytes"),
    _h(208, "ktime_get_tai_ns", "", "int", "", "fresh64"),
)

HELPER_BY_ID: dict[int, Helper] = {h.id: h for h in HELPERS}
HELPER_BY_NAME: dict[str, Helper] = {h.name: h for h in HELPERS}


def helper(id: int) -> Helper | None:
    """The table entry for helper `id`, or None when xdp2tc does not know it."""
    return HELPER_BY_ID.get(id)


def helper_name(id: int) -> str:
    """`bpf_<name>` for known helpers, `helper <id>` otherwise (for messages)."""
    h = HELPER_BY_ID.get(id)
    return f"bpf_{h.name}" if h else f"helper {id}"
