"""Build the public XDP programs vendored here (tests/public/*.c, xdp-tutorial/, xdp-filter/,
eupf/, each with its origin and licence noted) and one large program of our own
(corpus/large/tailcall_stages.c) with clang into build/public/<stem>.o; never committed.

    .venv/bin/python tests/public/build.py      (also: from Python, `build()`)

`SOURCES` says per source the extra flags and what the program is. The shims in include/
stand in for headers of the programs' own trees (see each shim's comment); the sources
themselves are unchanged.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "build" / "public"

#: stem -> extra clang flags (the samples' VLAN header comes from the kernel tree's headers)
SOURCES = {
    "xdp1_kern": ["-DXDP2TC_KERNEL_VLAN_HDR"],
    "xdp2_kern": ["-DXDP2TC_KERNEL_VLAN_HDR"],
    "suricata_xdp_filter": [],
    "xdp_adjust_tail_kern": ["-DXDP2TC_KERNEL_VLAN_HDR"],
    "xdp_tx_iptunnel_kern": ["-DXDP2TC_KERNEL_VLAN_HDR"],
    # xdp-tutorial's upstream xdp_stats_kern_user.h defines XDP_ACTION_MAX (XDP_REDIRECT + 1)
    "xdp_tutorial_prog_kern_02": ["-DXDP_ACTION_MAX=5"],
    "xdpfilt_alw_tcp": [],  # <xdp/...> from Debian's libxdp-dev (make setup)
    "eupf_n3n6_entrypoint": [f"-I{HERE / 'eupf'}"],  # its "xdp/..." includes (eupf/README.md)
    # ours, not public: 8 stages of ~2,550 instructions chained by tail calls (issue 14's
    # 20k-instruction program); kept out of corpus/*.c so the corpus-wide tests skip it
    "tailcall_stages": [f"-I{ROOT / 'corpus' / 'include'}"],
}
#: stem -> source path under tests/public, where not <stem>.c (a tree's own layout kept)
PATHS = {
    "xdp_tutorial_prog_kern_02": "xdp-tutorial/packet-solutions/xdp_prog_kern_02.c",
    "xdpfilt_alw_tcp": "xdp-filter/xdpfilt_alw_tcp.c",
    "eupf_n3n6_entrypoint": "eupf/xdp/n3n6_entrypoint.c",
    "tailcall_stages": "../../corpus/large/tailcall_stages.c",
}


def clang() -> str | None:
    return shutil.which(os.environ.get("CLANG", "clang-19")) or shutil.which("clang")


def build(stems=None) -> dict[str, Path]:
    """Build (when older than its sources) and return {stem: object}; raises RuntimeError
    with clang's message when a build fails, FileNotFoundError without clang."""
    cc = clang()
    if cc is None:
        raise FileNotFoundError("clang not found (make setup installs clang-19)")
    OUT.mkdir(parents=True, exist_ok=True)
    headers = [p.stat().st_mtime for p in [*HERE.rglob("*.h"), *(ROOT / "corpus" / "include").glob("*.h")]]
    out = {}
    for stem in stems or SOURCES:
        src, obj = (HERE / PATHS.get(stem, f"{stem}.c")).resolve(), OUT / f"{stem}.o"
        newest = max([src.stat().st_mtime, *headers])
        if not obj.exists() or obj.stat().st_mtime < newest:
            cmd = [cc, "-O2", "-g", "-target", "bpf", "-Wno-everything", "-I", str(HERE / "include"), "-I", str(HERE)]
            cmd += ["-I/usr/include/x86_64-linux-gnu", *SOURCES[stem], "-c", str(src), "-o", f"{obj}.tmp"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"{src.name}: clang failed: {proc.stderr.strip()}")
            os.replace(f"{obj}.tmp", obj)
        out[stem] = obj
    return out


if __name__ == "__main__":
    for stem, obj in build(sys.argv[1:] or None).items():
        print(f"{stem}: {obj}")
