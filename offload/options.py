"""The options several commands share, and command-line values checked before any work:
the exploration bounds (`exploration_flags`, read back by `exploration_options`), `--assume`,
interface names, `IFINDEX=NAME` pairs and numeric bounds as argparse `type=` functions, and a
parser whose errors are one line with exit code 2.
"""

from __future__ import annotations

import argparse
import sys
import time
import unicodedata
from typing import TYPE_CHECKING

from lifter.errors import EXIT_BAD_INPUT, LiftError

if TYPE_CHECKING:
    from analyzer.exploration import Options

#: The smallest `--max-len`: an Ethernet header (every program reads one; `rules` assumes
#: frames of at least 60 bytes and refuses a smaller bound).
MIN_PACKET = 14

#: IFNAMSIZ in include/uapi/linux/if.h: 16 bytes with the terminating NUL.
IFNAMSIZ = 16
#: Characters the kernel accepts in a name but that tc's batch parser (quotes, backslash,
#: `#` comments) or a shell a line is pasted into would interpret: refused, so a name is
#: copied into a script only as itself.
SCRIPT_SPECIAL = set("\"'\\#;&|<>()$`*?[]{}!~")


def interface_name(text: str) -> str:
    """A device name the kernel accepts: Linux net/core/dev.c `dev_valid_name()` refuses
    the empty name, names of IFNAMSIZ (16) bytes or more, `.` and `..`, and any `/`, `:`
    or whitespace (isspace). On top of that, control characters and SCRIPT_SPECIAL."""
    size = len(text.encode("utf-8", "surrogateescape"))
    why = None
    if not text:
        why = "empty"
    elif size >= IFNAMSIZ:
        why = f"{size} bytes (at most {IFNAMSIZ - 1})"
    elif text in (".", ".."):
        why = "'.' and '..' are not device names"
    elif bad := sorted({c for c in text if c in "/:" or c.isspace()}):
        why = f"contains {''.join(bad)!r} (the kernel refuses '/', ':' and whitespace)"
    elif bad := sorted({c for c in text if unicodedata.category(c) == "Cc" or c in SCRIPT_SPECIAL}):
        why = f"contains {''.join(bad)!r} (control and shell/tc-batch special characters are refused)"
    if why:
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid interface name: {why}")
    return text


def ifname_pair(text: str) -> tuple[int, str]:
    """`IFINDEX=NAME`: a positive ifindex (the kernel's are 1 .. 2^31-1) and a valid name."""
    index, sep, name = text.partition("=")
    if not sep or not index.isascii() or not index.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected IFINDEX=NAME, e.g. 4=eth1")
    if not 1 <= int(index) < 2**31:
        raise argparse.ArgumentTypeError(f"{text!r}: the ifindex must be 1 .. {2**31 - 1}")
    return int(index), interface_name(name)


def at_least(minimum: int, maximum: int | None = None):
    """An argparse type: an integer in [minimum, maximum]."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"at least {minimum}" if maximum is None else f"{minimum} .. {maximum}"
            raise argparse.ArgumentTypeError(f"{value} is out of range (must be {bound})")
        return value

    parse.__name__ = "integer"
    return parse


class OneLineParser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (`xdp2tc: rules: argument --dev: ...`) and
    exit code 2, like every other bad input."""

    def error(self, message: str):
        where = self.prog.replace(" ", ": ")
        print(f"{where}: {message}".replace("\n", "\\n"), file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def maps_from(text: str):
    """`rules --maps-from pinned:DIR|prog:ID|json:...` (offload/mapsource.py parses it)."""
    from offload.mapsource import parse_spec

    try:
        return parse_spec(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def live_maps_from(text: str):
    """`sync --maps-from pinned:DIR|prog:ID`: live maps only (offload/mapsource.py says why)."""
    from offload.mapsource import parse_spec

    try:
        return parse_spec(text, live=True)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def seconds(text: str) -> float:
    """A positive number of seconds (at most a day)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"{text} is out of range (must be > 0 and at most 86400)")
    return value


def netns_name(text: str) -> str:
    """A network namespace name as `ip netns` stores it (a file in /run/netns): not empty,
    not `.`/`..`, no `/`, whitespace, control or SCRIPT_SPECIAL characters."""
    bad = sorted({c for c in text if c == "/" or c.isspace() or unicodedata.category(c) == "Cc" or c in SCRIPT_SPECIAL})
    if not text or text in (".", "..") or bad:
        why = f"contains {''.join(bad)!r}" if bad else "empty, '.' or '..'"
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid network namespace name: {why}")
    return text


def exploration_flags(
    p: argparse.ArgumentParser, program_help: str = "only this program (default: every XDP program)"
) -> None:
    """`--program` and the exploration bounds (analyzer.exploration.Options), as every
    command that explores takes them."""
    from analyzer.exploration import Options  # z3 and the lifter: only for a command that explores

    d = Options()
    p.add_argument("--program", "-p", help=program_help)
    p.add_argument(
        "--max-len",
        type=at_least(MIN_PACKET),
        default=d.max_len,
        help=f"largest packet in bytes, at least {MIN_PACKET} (default {d.max_len})",
    )
    p.add_argument(
        "--loop-bound",
        type=at_least(1),
        default=d.loop_bound,
        help=f"iterations of one loop per path before the path is cut (default {d.loop_bound})",
    )
    p.add_argument(
        "--max-insns",
        type=at_least(1),
        default=d.max_insns,
        help=f"instructions explored before remaining paths are cut (default {d.max_insns})",
    )
    p.add_argument("--max-paths", type=at_least(1), default=d.max_paths, help=f"paths (default {d.max_paths})")
    p.add_argument(
        "--no-merge",
        dest="merge",
        action="store_false",
        default=d.merge,
        help="explore every path separately (states meeting at a join point with the same shape are "
        "merged by default): more, smaller paths; slower",
    )
    # Time budgets: what cannot be explored in time still gives a report. The paths cut are
    # UNKNOWN (so never offloaded), each names the instruction and source line it was cut at,
    # and `analyze` lists the functions explored and those not reached (analyzer/report.py).
    p.add_argument(
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="time budget of the exploration of every program the command handles (shared; the last "
        "fifth is left to the report): past it the paths not finished are cut "
        "(UNKNOWN, kept in software) and the report says what was explored and where paths were cut",
    )
    p.add_argument(
        "--path-timeout",
        type=seconds,
        metavar="SECONDS",
        help="time budget of one path (counted over the branches it came from); past it the path is cut",
    )


def exploration_options(args: argparse.Namespace) -> Options:
    """The Options the `exploration_flags` of a parsed command line ask for. `--timeout`
    counts from the first call for `args`: every program a command explores shares it."""
    from analyzer.exploration import Options

    started = vars(args).setdefault("budget_started", time.perf_counter())
    return Options(
        max_len=args.max_len,
        loop_bound=args.loop_bound,
        max_insns=args.max_insns,
        max_paths=args.max_paths,
        merge=getattr(args, "merge", True),
        timeout=getattr(args, "timeout", None),
        path_timeout=getattr(args, "path_timeout", None),
        started=started,
    )


def assume_flag(p: argparse.ArgumentParser) -> None:
    """--assume, as `rules` and `sync` take it (the proofs' assumptions beyond the default)."""
    from rules.synthesis import ASSUMPTIONS, DEFAULT_ASSUMPTIONS

    p.add_argument(
        "--assume",
        action="append",
        default=[],
        choices=sorted(set(ASSUMPTIONS) - set(DEFAULT_ASSUMPTIONS)),
        help="prove under this assumption too (repeatable): "
        + "; ".join(f"{k}: {v}" for k, v in ASSUMPTIONS.items() if k not in DEFAULT_ASSUMPTIONS)
        + f" (always assumed: {ASSUMPTIONS['min-frame']})",
    )


def jobs_flag(p: argparse.ArgumentParser) -> None:
    """--jobs, as `rules` and `check` take it (rules/ahead.py: a forked child explains the
    software paths while the rules are built; the output is the same either way)."""
    from rules.ahead import default_jobs

    p.add_argument(
        "-j",
        "--jobs",
        type=at_least(1),
        default=default_jobs(),
        help="processes per program: 2 (or more) explains the paths in a child process while the rules "
        "are built (the same output, sooner); 1 does all in one (default: 2 on a machine with "
        "two CPUs or more, else 1)",
    )


def pcap_out_flag(p: argparse.ArgumentParser) -> None:
    """`--pcap-out FILE` (rules and check), written by `write_pcap`."""
    p.add_argument(
        "--pcap-out",
        metavar="FILE",
        help="write the counterexample packet of every path left in software to FILE (pcap, Ethernet)",
    )


def write_pcap(path: str, frames: list[bytes]) -> None:
    """The --pcap-out file: `frames` as a pcap (a write error is bad input)."""
    from rules.counterexample import pcap

    try:
        with open(path, "wb") as f:
            f.write(pcap(frames))
    except OSError as err:
        raise LiftError(f"--pcap-out: cannot write: {err.strerror}", file=path) from None


def refuse_duplicates(option: str, values: list) -> None:
    """A repeatable option given the same value twice is bad usage."""
    seen = set()
    for value in values:
        if value in seen:
            raise LiftError(f"{option} {value} given twice")
        seen.add(value)
