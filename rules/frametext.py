"""The words for what a counterexample frame's verdict rests on beside its bytes.

One printer for the script's comments (rules/output.py), `check`'s text (offload/check.py)
and the editor's hover (offload/editor.py), from the frame's JSON (counterexample.py
`Example.json`). Plain string work, no z3: the language server imports it at a hover
without the analysis modules.
"""

from __future__ import annotations


def frame_inputs(ex: dict) -> list[str]:
    """What a JSON counterexample's verdict rests on beside the frame, as text: the map
    entries its path looks up (`map[key hex] = value hex`, `map[key hex] absent`), then the
    xdp_md fields and helper results that path reads. Empty for a frame that reads none."""
    out = []
    if ex.get("maps"):
        entries = [
            f"{m['map']}[{m['key']}] absent" if m["value"] is None else f"{m['map']}[{m['key']}] = {m['value']}"
            for m in ex["maps"]
        ]
        out.append("with map entries (those it looks up, stats-only maps aside): " + "; ".join(entries))
    also = [f"ctx.{name} = {value}" for name, value in ex.get("ctx", {}).items()]
    if ex.get("helpers"):
        also.append("results of " + ", ".join(ex["helpers"]) + " (z3 chose them, the kernel does in a run)")
    if also:
        out.append("also reads: " + "; ".join(also))
    return out
