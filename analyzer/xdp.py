"""Kernel facts about XDP that several modules rely on, each written once (Linux 6.18).

Action codes are `enum xdp_action` (include/uapi/linux/bpf.h); the packet geometry is that of
one x86_64 page as XDP and BPF_PROG_TEST_RUN lay it out (include/net/xdp.h, net/core/filter.c,
net/bpf/test_run.c). The explorer, the angr engine, the kernel runner and the helper models
read these instead of writing the numbers again.
"""

from __future__ import annotations

XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)
#: XDP return codes (enum xdp_action) and the verdict names xdp2tc prints for them.
VERDICTS = {XDP_ABORTED: "ABORTED", XDP_DROP: "DROP", XDP_PASS: "PASS", XDP_TX: "TX", XDP_REDIRECT: "REDIRECT"}
#: A return value outside enum xdp_action: the kernel warns and drops the packet.
INVALID = "INVALID"

#: The kernel's MAX_TAIL_CALL_CNT: a chain of at most 33 tail calls.
MAX_TAIL_CALLS = 33

ETH_HLEN = 14
PAGE_SIZE = 4096
#: XDP_PACKET_HEADROOM: bytes reserved in front of the packet.
XDP_PACKET_HEADROOM = 256
#: How far bpf_xdp_adjust_head can grow a packet in front: the headroom minus the struct
#: xdp_frame (40 bytes on 64-bit) kept there (include/net/xdp.h).
HEADROOM = XDP_PACKET_HEADROOM - 40
#: Metadata must stay below 256 bytes and be a multiple of 4 (bpf_xdp_adjust_meta).
MAX_META = 255
#: Where the linear data of one page ends, counted from the packet's original first byte: the
#: page minus the headroom and SKB_DATA_ALIGN(sizeof(struct skb_shared_info)) (320 on x86_64).
#: It bounds bpf_xdp_adjust_tail's growth and is the largest packet a test run keeps linear.
MAX_LINEAR_PACKET = PAGE_SIZE - XDP_PACKET_HEADROOM - 320
#: Bytes of fragments an `xdp.frags` packet may carry (MAX_SKB_FRAGS = 17 pages).
MAX_FRAGS_BYTES = 17 * PAGE_SIZE


def refused_value_access(access: str, name: str, offset: int, width: int, value_size: int | None) -> str | None:
    """Why the kernel's verifier refuses a `width`-byte `access` ("load" or "store") at byte
    `offset` of a value of map or global data section `name` that holds `value_size` bytes,
    or None when the bytes lie within the value (or its size is not known). The verifier
    checks every access through a map value pointer against value_size (check_map_access in
    kernel/bpf/verifier.c, "invalid access to map value"), and a `ld_imm64` that points at or
    past a global section's end already (resolve_pseudo_ldimm64, "invalid access to map value
    pointer"): either way the program does not load, so no packet ever sees such a load."""
    if not value_size or 0 <= offset <= value_size - width:
        return None
    where = f"{width} bytes at offset {offset} of {name} (value_size {value_size})"
    return f"the kernel's verifier refuses this {access}: {where}"
