"""What each offload target can do: one table, one row per target, each row from the
driver's public source (cited per row; paths are in the Linux kernel tree).

Flower targets (`kind="flower"`) take the tc flower filters `rules` emits; `keys` are the
key names of rules/flower.py FLOWER_KEYS the driver accepts, `prefix_only` the keys it takes
with prefix masks only, `ip_flags`/`tcp_flags` the flag bits it can match, `actions` the tc
actions, `chains` whether `goto chain` is offloaded, `max_rules` the table size when the
driver states one (None: the device reports it at run time; `check --max-rules` applies).
The eBPF target (`kind="ebpf"`, Netronome's NFP BPF offload) runs the XDP program itself on
the NIC: `map_types`, `helpers`, `tail_calls`, `redirect` and `max_insns` describe what its
verifier and JIT accept.

A driver that silently ignores a key it does not parse is listed as not supporting it:
xdp2tc must not count a rule as offloaded when the NIC would match more than it says.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.flower import FLOWER_KEYS, IP_FLAG_FIRSTFRAG, IP_FLAG_FRAG

ALL_FLOWER_KEYS = frozenset(FLOWER_KEYS)
_L2 = frozenset({"dst_mac", "src_mac", "vlan_id", "vlan_prio", "vlan_ethtype"})
_CVLAN = frozenset({"cvlan_id", "cvlan_prio", "cvlan_ethtype"})
_L3 = frozenset({"ip_proto", "src_ip", "dst_ip", "src_ip6", "dst_ip6"})
_PORTS = frozenset({"src_port", "dst_port"})
_ICMP = frozenset({"icmp_type", "icmp_code"})
_TOS_TTL = frozenset({"ip_tos", "ip_ttl"})
FRAG, FIRSTFRAG = IP_FLAG_FRAG, IP_FLAG_FIRSTFRAG
#: TCP flag bits as cls_flower's tcp_flags key holds them (FIN=0x1 ... CWR=0x80)
TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK, TCP_URG = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20


@dataclass(frozen=True)
class Target:
    """One offload target (see the module docstring for the columns)."""

    name: str
    kind: str  # flower | ebpf
    title: str
    source: str  # where the row comes from
    keys: frozenset[str] = frozenset()
    prefix_only: frozenset[str] = frozenset()
    port_ranges: bool = False
    ip_flags: int = 0
    tcp_flags: int = 0
    actions: frozenset[str] = frozenset()
    chains: bool = False
    max_rules: int | None = None
    map_types: frozenset[str] = frozenset()
    helpers: frozenset[str] = frozenset()
    tail_calls: bool = False
    redirect: bool = False
    max_insns: int | None = None


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        # Software tc (net/sched/cls_flower.c fl_set_key and fl_classify): every key, masks,
        # port ranges (fl_range_port_*), both ip_flags bits, all TCP flag bits; any action.
        Target(
            "generic",
            "flower",
            "tc flower in software (skip_hw), any NIC",
            "net/sched/cls_flower.c (fl_set_key, fl_classify)",
            keys=ALL_FLOWER_KEYS,
            port_ranges=True,
            ip_flags=FRAG | FIRSTFRAG,
            tcp_flags=0xFFF,
            actions=frozenset({"drop", "pass", "redirect", "goto"}),
            chains=True,
        ),
        # mlx5 (ConnectX-4 and later): drivers/net/ethernet/mellanox/mlx5/core/en_tc.c
        # __parse_cls_flower takes ETH_ADDRS, VLAN, CVLAN (when the device has
        # outer_second_vid), BASIC, IPV4/IPV6_ADDRS, IP (tos, ttl), PORTS, TCP (flags), ICMP (when
        # the flex parser has ICMP), CONTROL with FLOW_DIS_IS_FRAGMENT only ("HW doesn't support
        # frag first/later"); no ARP keys, no PORTS_RANGE. Actions (en/tc/act/): drop, accept,
        # mirred redirect, goto chain.
        Target(
            "mlx5",
            "flower",
            "NVIDIA/Mellanox ConnectX (mlx5_core)",
            "drivers/net/ethernet/mellanox/mlx5/core/en_tc.c (__parse_cls_flower); en/tc/act/*.c",
            keys=_L2 | _CVLAN | _L3 | _PORTS | _ICMP | _TOS_TTL | {"ip_flags", "tcp_flags"},
            ip_flags=FRAG,
            tcp_flags=0xFFF,
            actions=frozenset({"drop", "pass", "redirect", "goto"}),
            chains=True,
        ),
        # Netronome Agilio flower firmware: drivers/net/ethernet/netronome/nfp/flower/offload.c
        # NFP_FLOWER_WHITELIST_DISSECTOR (CONTROL, BASIC, IPV4/IPV6_ADDRS, TCP, PORTS, ETH_ADDRS,
        # VLAN, CVLAN, IP, tunnel keys; no ICMP, no ARP, no PORTS_RANGE),
        # NFP_FLOWER_SUPPORTED_TCPFLAGS (FIN SYN RST PSH URG), NFP_FLOWER_SUPPORTED_CTLFLAGS
        # (IS_FRAGMENT, FIRST_FRAG); actions in flower/action.c nfp_flower_loop_action: drop,
        # mirred redirect (no accept, no goto outside conntrack).
        Target(
            "nfp-flower",
            "flower",
            "Netronome Agilio, flower firmware (nfp)",
            "drivers/net/ethernet/netronome/nfp/flower/offload.c (NFP_FLOWER_WHITELIST_DISSECTOR, "
            "NFP_FLOWER_SUPPORTED_TCPFLAGS/CTLFLAGS); flower/action.c (nfp_flower_loop_action)",
            keys=_L2 | _CVLAN | _L3 | _PORTS | _TOS_TTL | {"ip_flags", "tcp_flags"},
            ip_flags=FRAG | FIRSTFRAG,
            tcp_flags=TCP_FIN | TCP_SYN | TCP_RST | TCP_PSH | TCP_URG,
            actions=frozenset({"drop", "redirect"}),
        ),
        # Broadcom NetXtreme (bnxt_en): drivers/net/ethernet/broadcom/bnxt/bnxt_tc.c
        # bnxt_tc_parse_flow reads BASIC, CONTROL, ETH_ADDRS, VLAN (is_vlan_tci_allowed: exact VLAN
        # id, priority zero or wildcard), IPV4/IPV6_ADDRS (sent as prefix lengths,
        # inet_mask_len), PORTS, ICMP; it rejects control flags
        # (flow_rule_match_has_control_flags) and ignores other keys (tos/ttl, tcp flags), which
        # are therefore unsupported here. bnxt_tc_parse_actions: drop, mirred redirect, VLAN
        # push/pop, tunnel, pedit; no accept, no goto.
        Target(
            "bnxt",
            "flower",
            "Broadcom NetXtreme-C/E (bnxt_en)",
            "drivers/net/ethernet/broadcom/bnxt/bnxt_tc.c (bnxt_tc_parse_flow, bnxt_tc_parse_actions)",
            keys=frozenset({"dst_mac", "src_mac", "vlan_id", "vlan_ethtype"}) | _L3 | _PORTS | _ICMP,
            prefix_only=frozenset({"src_ip", "dst_ip", "src_ip6", "dst_ip6"}),
            actions=frozenset({"drop", "redirect"}),
        ),
        # Intel E800 (ice): drivers/net/ethernet/intel/ice/ice_tc_lib.c ice_parse_cls_flower
        # refuses keys outside CONTROL, BASIC, ETH_ADDRS, VLAN, CVLAN, IPV4/IPV6_ADDRS, IP, PORTS,
        # PPPOE, L2TPV3 and tunnel keys ("Unsupported key used"); control flags are refused
        # (flow_rule_has_control_flags); no TCP flags, no ICMP, no ARP. Actions: drop
        # (ice_tc_parse_action; also RX queue mapping), redirect only in switchdev mode
        # (ice_eswitch_tc_parse_action); no accept, no goto.
        Target(
            "ice",
            "flower",
            "Intel E800 series (ice), switchdev",
            "drivers/net/ethernet/intel/ice/ice_tc_lib.c (ice_parse_cls_flower, ice_tc_parse_action, "
            "ice_eswitch_tc_parse_action)",
            keys=_L2 | _CVLAN | _L3 | _PORTS | _TOS_TTL,
            actions=frozenset({"drop", "redirect"}),
        ),
        # Netronome NFP eBPF offload (the XDP program runs on the card, `ip link set dev X xdpoffload`):
        # drivers/net/ethernet/netronome/nfp/bpf/verifier.c nfp_bpf_check_helper_call accepts
        # xdp_adjust_head, xdp_adjust_tail, map_lookup/update/delete_elem, get_prandom_u32 and
        # perf_event_output; stores into map values are refused ("map writes not supported",
        # atomic add only); offload.c nfp_bpf_map_alloc takes the map types the firmware lists
        # (hash and array on Agilio BPF firmware) and no map flags; tail calls and redirects are
        # not among the helpers; the code store size is read from the card
        # (NFP_NET_CFG_BPF_MAX_LEN), so no fixed instruction limit is stated here.
        Target(
            "nfp-bpf",
            "ebpf",
            "Netronome Agilio, eBPF offload firmware (xdpoffload)",
            "drivers/net/ethernet/netronome/nfp/bpf/verifier.c (nfp_bpf_check_helper_call, "
            "nfp_bpf_check_ptr); bpf/offload.c (nfp_bpf_map_alloc, nfp_net_bpf_load)",
            map_types=frozenset({"hash", "array"}),
            helpers=frozenset(
                {
                    "map_lookup_elem",
                    "map_update_elem",
                    "map_delete_elem",
                    "get_prandom_u32",
                    "xdp_adjust_head",
                    "xdp_adjust_tail",
                    "perf_event_output",
                }
            ),
        ),
    )
}

#: What `check` uses when no --target is given.
DEFAULT_TARGETS = ("generic",)


def target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r} (known: {', '.join(TARGETS)})") from None
