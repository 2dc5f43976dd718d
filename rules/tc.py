"""tc script lines, and the real iproute2 parser as the judge of their syntax.

`filter_line` writes one `tc -batch` line. `check_syntax` runs lines through the installed
`tc` inside a network namespace it creates (and always deletes): each line is its own
`tc -batch` run, so an `exit()` inside tc's parser (invarg, get_prefix) costs one line, not
the rest. A line is accepted when tc's parser let it through: it either succeeded or failed
in the kernel ("We have an error talking to the kernel", e.g. "Error: TC classifier not
found." where cls_flower is not built, or a refused skip_sw offload). Anything else is a
parser rejection, reported with tc's message.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .flower import FlowerMatch, render

SKIPS = ("skip_sw", "skip_hw", None)
#: Stands for the filter's own device in action tokens (XDP_TX: `mirred egress redirect dev
#: <the ingress device>`); filter_line writes the device in its place.
INGRESS_DEV = "@ingress-dev"
#: What tc prints when its parser accepted the line and the kernel refused it.
KERNEL_ERROR = "We have an error talking to the kernel"


def qdisc_line(dev: str) -> str:
    """The qdisc the filters hang off: `replace` creates clsact or leaves an existing one
    (a second run does not fail), and `filter add dev DEV ingress` reaches clsact's ingress
    hook. (An old plain `ingress` qdisc makes the line fail: tc refuses to replace one
    qdisc kind by another; `tc qdisc del dev DEV ingress` first.)"""
    return f"qdisc replace dev {_token(dev, 'dev')} clsact"


def teardown_lines(rules, dev: str) -> list[str]:
    """`filter del` lines removing what a rule list (ruleset.Rule: chain, prio) adds: one
    per (chain, prio), later chains first (nothing jumps into a chain already gone)."""
    seen = sorted({(r.chain, r.prio) for r in rules}, key=lambda cp: (-cp[0], cp[1]))
    return [
        f"filter del dev {_token(dev, 'dev')} ingress prio {prio}" + (f" chain {chain}" if chain else "")
        for chain, prio in seen
    ]


def filter_line(
    dev: str,
    match: FlowerMatch,
    action_tokens,
    prio: int,
    chain: int | None = None,
    handle: int | None = None,
    skip: str | None = "skip_sw",
) -> str:
    """`filter add dev DEV ingress protocol P prio N [chain C] [handle H] flower [skip] KEYS...
    action ...` for tc -batch. `action_tokens` are the words after the first `action` (further
    actions carry their own `action` word)."""
    if skip not in SKIPS:
        raise ValueError(f"skip must be skip_sw, skip_hw or None, not {skip!r}")
    if not 1 <= prio <= 0xFFFF:
        raise ValueError(f"prio {prio} outside 1..65535")
    words = ["filter", "add", "dev", _token(dev, "dev"), "ingress", "protocol", match.protocol, "prio", str(prio)]
    if chain is not None:
        if not 0 <= chain <= 0xFFFFFFFF:
            raise ValueError(f"chain {chain} outside 0..2^32-1")
        words += ["chain", str(chain)]
    if handle is not None:
        if not 1 <= handle <= 0xFFFFFFFF:
            raise ValueError(f"handle {handle} outside 1..2^32-1")
        words += ["handle", f"0x{handle:x}"]
    zero = match.zero_mask_keys()
    if zero:  # such a filter matches nothing in cls_flower (flower.py module doc)
        raise ValueError(f"{match}: {', '.join(zero)} with an all-zero mask is never emitted")
    words.append("flower")
    if skip:
        words.append(skip)
    words += render(match)
    actions = [_token(dev if t == INGRESS_DEV else t, "action") for t in action_tokens]
    if actions:
        words += (["action"] if actions[0] != "action" else []) + actions
    return " ".join(words)


#: What a token may not contain: a blank (str.isspace's set) or a quote, backslash or '#'.
_UNSAFE = re.compile(r"[\s#\"'\\\x1c-\x1f\x85]")


def _token(word, what: str) -> str:
    word = str(word)
    if not word or _UNSAFE.search(word):
        raise ValueError(f"{what} token {word!r} is empty or has a blank, quote or '#'")
    return word


# --- the parser oracle ----------------------------------------------------------------------


@dataclass(frozen=True)
class SyntaxResult:
    line: str
    accepted: bool  # tc's parser let the line through
    message: str  # tc's output (stderr and stdout), one line
    exit_code: int


class SyntaxCheckUnavailable(RuntimeError):
    """No privilege or no tool to run the check."""


def check_syntax(lines, tc: str | None = None) -> list[SyntaxResult]:
    """Run each `filter ...` line through the real tc parser; one result per line, in order.
    Needs root (CAP_SYS_ADMIN for the namespace, CAP_NET_ADMIN inside)."""
    lines = [str(line).strip() for line in lines]
    for line in lines:
        if not line.startswith("filter ") or "\n" in line:
            raise ValueError(f"check_syntax takes single `filter ...` lines, got {line[:60]!r}")
    tc = tc or shutil.which("tc")
    ip = shutil.which("ip")
    if not tc or not ip:
        raise SyntaxCheckUnavailable("check_syntax needs iproute2's tc and ip on PATH")
    if os.geteuid() != 0:
        raise SyntaxCheckUnavailable("check_syntax needs root (it creates a network namespace)")
    ns = f"xdp2tc-syntax-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    _run([ip, "netns", "add", ns], "create network namespace")
    try:
        _setup_devices(ip, tc, ns, lines)
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(lambda line: _check_one(tc, ns, line), lines))
    finally:
        subprocess.run([ip, "netns", "delete", ns], capture_output=True)


def _setup_devices(ip: str, tc: str, ns: str, lines: list[str]) -> None:
    """Every device a line names (`dev X`, also in mirred) exists, with an ingress qdisc."""
    devs: dict[str, None] = {"lo": None}
    for line in lines:
        words = line.split()
        for i, w in enumerate(words[:-1]):
            if w == "dev":
                devs[words[i + 1]] = None
    _run([ip, "-n", ns, "link", "set", "lo", "up"], "bring lo up")
    _run([tc, "-n", ns, "qdisc", "add", "dev", "lo", "ingress"], "add an ingress qdisc")
    for n, dev in enumerate(devs):
        if dev == "lo":
            continue
        made = subprocess.run(
            [ip, "-n", ns, "link", "add", dev, "type", "veth", "peer", "name", f"xdp2tcp{n}"], capture_output=True
        )
        if made.returncode == 0:  # a name ip refuses is left for tc to refuse, line by line
            _run([tc, "-n", ns, "qdisc", "add", "dev", dev, "ingress"], f"add ingress qdisc on {dev}")


def _check_one(tc: str, ns: str, line: str) -> SyntaxResult:
    proc = subprocess.run([tc, "-n", ns, "-batch", "-"], input=line + "\n", capture_output=True, text=True, timeout=30)
    text = " | ".join(
        s.strip() for s in (proc.stderr + proc.stdout).splitlines() if s.strip() and not s.startswith("Command failed")
    )
    accepted = proc.returncode == 0 or KERNEL_ERROR in text
    return SyntaxResult(line, accepted, text, proc.returncode)


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise SyntaxCheckUnavailable(f"check_syntax: cannot {what}: {msg[0] if msg else proc.returncode}")
