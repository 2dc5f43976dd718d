"""The documents of `info` and `cfg`: text, JSON and graphviz dot. (The other commands'
reports are rendered in their own rooms: analyzer/report.py for `analyze`, rules/output.py
for `rules`, analyzer/cost/report.py for `cost`, offload/check.py for `check`.)"""

from __future__ import annotations

from lifter.printer import format_insn
from lifter.program import BpfObject, Program


def info_text(obj: BpfObject) -> str:
    """The `info` text: programs, maps, globals and source files."""
    out: list[str] = []
    out.append(
        f"{obj.path}: BPF object, license {obj.license or '(none)'}, "
        f"BTF {'yes' if obj.btf else 'no'}, line info {'yes' if obj.btf_ext else 'no'}"
    )
    out.append(f"\nprograms ({len(obj.programs)}):")
    out.append(f"  {'name':<24} {'section':<20} {'attach':<10} {'insns':>6} {'total':>6}  subprograms")
    for prog in obj.programs:
        subs = ", ".join(f.name for f in prog.functions[1:]) or "-"
        out.append(
            f"  {prog.name:<24} {prog.section:<20} {prog.attach:<10} {prog.entry.size:>6} {prog.insn_count:>6}  {subs}"
        )
    subprogs = [f for f in obj.functions.values() if not f.is_program]
    if subprogs:
        out.append(
            f"\nsubprograms ({len(subprogs)}): "
            + ", ".join(f"{f.name} ({f.section}, {f.size} insns)" for f in subprogs)
        )
    real_maps = [m for m in obj.maps if m.origin != "global"]
    out.append(f"\nmaps ({len(real_maps)}):")
    out.append(f"  {'name':<24} {'type':<18} {'key':>5} {'value':>6} {'max':>8} {'flags':>7}  origin  key/value types")
    for m in real_maps:
        types = f"{m.key_type or '?'} / {m.value_type or '?'}" if m.origin == "btf" else "-"
        extra = ""
        if m.static_values:
            extra = "  slots: " + ", ".join(f"[{k}]={v}" for k, v in sorted(m.static_values.items()))
        out.append(
            f"  {m.name:<24} {_opt(m.type and m.type.name):<18} {_opt(m.key_size):>5} "
            f"{_opt(m.value_size):>6} {_opt(m.max_entries):>8} {m.flags:>#7x}  {m.origin:<7} {types}{extra}"
        )
    globals_ = [m for m in obj.maps if m.origin == "global"]
    out.append(f"\nglobals ({len(globals_)} sections):")
    for m in globals_:
        ro = "read-only" if m.read_only else "writable"
        out.append(f"  {m.name} ({m.value_size} bytes, {ro})")
        for var in m.variables:
            init = m.initial[var.offset : var.offset + var.size].hex() if m.initial else ""
            out.append(
                f"    {var.name:<22} +{var.offset:<5} {var.size:>3} bytes  {var.type or '?':<18} = {init or '0'}"
            )
    out.append(f"\nsource files: {', '.join(obj.source_files) or '(no line info)'}")
    return "\n".join(out) + "\n"


def _opt(value) -> str:
    return "?" if value is None else str(value)


def info_json(obj: BpfObject) -> dict:
    """The `info --json` document (schema version 1)."""
    return {
        "schema": "xdp2tc.info/1",
        "file": obj.path,
        "license": obj.license,
        "btf": obj.btf is not None,
        "programs": [
            {
                "name": p.name,
                "section": p.section,
                "attach": p.attach,
                "insns": p.entry.size,
                "total_insns": p.insn_count,
                "subprograms": [f.name for f in p.functions[1:]],
            }
            for p in obj.programs
        ],
        "maps": [
            {
                "name": m.name,
                "section": m.section,
                "origin": m.origin,
                "type": m.type.name if m.type else None,
                "key_size": m.key_size,
                "value_size": m.value_size,
                "max_entries": m.max_entries,
                "flags": m.flags,
                "key_type": m.key_type,
                "value_type": m.value_type,
                "static_values": {str(k): v for k, v in sorted(m.static_values.items())},
                "variables": [
                    {"name": v.name, "offset": v.offset, "size": v.size, "type": v.type} for v in m.variables
                ],
            }
            for m in obj.maps
        ],
        "source_files": obj.source_files,
    }


def cfg_json(obj: BpfObject, prog: Program) -> dict:
    """The `cfg --format json` document (schema version 1)."""
    functions = []
    for func in prog.functions:
        cfg = func.cfg
        functions.append(
            {
                "name": func.name,
                "section": func.section,
                "start": func.start,
                "end": func.end,
                "entry": cfg.entry,
                "exits": cfg.exits,
                "blocks": [
                    {"start": b.start, "end": b.end, "insns": [{"pc": i.pc, "text": format_insn(i)} for i in b.insns]}
                    for b in sorted(cfg.blocks.values(), key=lambda b: b.start)
                ],
                "edges": [{"from": a, "to": b, "kind": d["kind"]} for a, b, d in sorted(cfg.graph.edges(data=True))],
                "back_edges": [list(e) for e in cfg.back_edges],
                "loops": [{"header": lp.header, "latch": lp.latch, "body": sorted(lp.body)} for lp in cfg.loops],
                "irreducible": [list(e) for e in cfg.irreducible],
                "unreachable": cfg.unreachable,
            }
        )
    names = {f.key: f.name for f in obj.functions.values()}
    calls = [{"from": names[a], "to": names[b], "kind": d["kind"]} for a, b, d in prog.call_graph.edges(data=True)]
    return {
        "schema": "xdp2tc.cfg/1",
        "file": obj.path,
        "program": prog.name,
        "functions": functions,
        "call_graph": calls,
    }


def cfg_dot(obj: BpfObject, prog: Program) -> str:
    """Graphviz text: one cluster per function, blocks as boxes, calls as dashed edges."""
    lines = [f'digraph "{prog.name}" {{', "  node [shape=box fontname=monospace fontsize=9];"]
    for n, func in enumerate(prog.functions):
        lines.append(f'  subgraph cluster_{n} {{ label="{func.name} ({func.section})";')
        for block in sorted(func.cfg.blocks.values(), key=lambda b: b.start):
            text = "\\l".join(f"{i.pc}: {format_insn(i)}".replace('"', '\\"') for i in block.insns) + "\\l"
            lines.append(f'    "{func.name}:{block.start}" [label="{text}"];')
        lines.append("  }")
        style = {"taken": "color=darkgreen label=T", "fallthrough": "color=red label=F", "goto": ""}
        for a, b, d in sorted(func.cfg.graph.edges(data=True)):
            back = " style=bold" if (a, b) in func.cfg.back_edges else ""
            lines.append(f'  "{func.name}:{a}" -> "{func.name}:{b}" [{style[d["kind"]]}{back}];')
        for pc, callee, kind in func.callees():
            target = obj.functions[callee]
            lines.append(
                f'  "{func.name}:{func.cfg.block_of(pc).start}" -> "{target.name}:{target.start}" '
                f'[style=dashed label="{kind}"];'
            )
    lines.append("}")
    return "\n".join(lines) + "\n"
