"""How many packet reads each path's decoded condition leaves unnamed, before and after a
change to analyzer/fields.py: two directories of saved outputs (`<stem>.rules`,
`<stem>.analyze`), compared path by path.

A read the decoder could not place in a header prints as raw bytes, `pkt[34:36]` (or `pkt[…]`
inside a hash); one it placed prints as a field (`tcp.dport`). Per path, the number of `pkt[`
in the `when` text of `rules` (the printed window: what the script's comments show) and in
`analyze --json`'s `fields` is counted in both directories; a path "names fewer fields" when
the new count is higher. Prints per object: paths compared, texts changed, paths with more /
fewer raw reads, and (with -v) each path with more raw reads and both texts.

    .venv/bin/python bench/fields_names.py save TREE DIR [--objects GLOB...]
    .venv/bin/python bench/fields_names.py BASE_DIR NEW_DIR [-v]

`save` writes those outputs for TREE's code (cwd TREE, this interpreter): `<stem>.rules` from
`rules OBJ --dev eth0` and `<stem>.analyze` from `analyze OBJ --json`, each as `exit N`, the
stdout, `--stderr--`, the stderr. Objects as bench/rules_outputs.py's.
Exit 1 when some path names fewer fields in NEW_DIR than in BASE_DIR.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rules_outputs import DEFAULT_GLOBS, PYTHON, objects  # noqa: E402

#: `# path 4 DROP stays in software (...) when TEXT` in the printed script
WHEN = re.compile(r"^# path (\d+) .*? when (.*)$")


def _body(text: str) -> str:
    """The command's stdout in a saved output (`exit N`, stdout, `--stderr--`, stderr)."""
    return text.split("\n", 1)[1].rsplit("\n--stderr--", 1)[0]


def analyze_fields(path: Path) -> dict[str, str]:
    """(program, path id) -> `fields` of every path of an `analyze --json` output."""
    body, out, at = _body(path.read_text()), {}, 0
    dec = json.JSONDecoder()
    while True:
        while at < len(body) and body[at].isspace():
            at += 1
        if at >= len(body):
            break
        doc, at = dec.raw_decode(body, at)
        for d in doc if isinstance(doc, list) else [doc]:
            for p in d.get("paths", []):
                if p.get("fields") is not None:
                    out[f"{d.get('program')} {p['id']}"] = p["fields"]
    return out


def rules_when(path: Path) -> dict[str, str]:
    """(script file, path id) -> the `when` text of every path the printed scripts name."""
    out, current = {}, ""
    for line in path.read_text().splitlines():
        if line.startswith("== "):
            current = line[3:]
            continue
        m = WHEN.match(line)
        if m:
            out.setdefault(f"{current} {m[1]}", m[2])
    return out


def compare(base: dict[str, str], new: dict[str, str]):
    """(compared, changed, [(key, base text, new text)] with more raw reads, ... with fewer)."""
    more, fewer, changed = [], [], 0
    keys = sorted(set(base) & set(new))
    for k in keys:
        a, b = base[k].count("pkt["), new[k].count("pkt[")
        changed += base[k] != new[k]
        if b > a:
            more.append((k, base[k], new[k]))
        elif b < a:
            fewer.append((k, base[k], new[k]))
    return len(keys), changed, more, fewer, sorted(set(base) ^ set(new))


def save(argv: list[str]) -> int:
    """`save TREE DIR`: the saved outputs `compare` reads, one pair per object."""
    ap = argparse.ArgumentParser(prog="fields_names.py save")
    ap.add_argument("tree", type=Path)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--objects", nargs="+", default=list(DEFAULT_GLOBS))
    args = ap.parse_args(argv)
    tree = args.tree.resolve()
    args.dir.mkdir(parents=True, exist_ok=True)
    for obj in objects(tree, args.objects):
        for ext, command in (("rules", ["rules", obj, "--dev", "eth0"]), ("analyze", ["analyze", obj, "--json"])):
            run = subprocess.run([PYTHON, "-m", "offload.cli", *command], cwd=tree, capture_output=True, text=True)
            text = f"exit {run.returncode}\n{run.stdout}\n--stderr--\n{run.stderr}"
            (args.dir / f"{Path(obj).stem}.{ext}").write_text(text)
        print(obj, flush=True)
    return 0


def main() -> int:
    if sys.argv[1:2] == ["save"]:
        return save(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("-v", action="store_true", help="print each path with more raw reads")
    args = ap.parse_args()
    worse = 0
    for a in sorted(args.base.glob("*.analyze")):
        stem = a.stem
        b = args.new / a.name
        if not b.exists():
            continue
        for kind, read, ext in (("analyze", analyze_fields, "analyze"), ("rules", rules_when, "rules")):
            n, changed, more, fewer, unmatched = compare(
                read(args.base / f"{stem}.{ext}"), read(args.new / f"{stem}.{ext}")
            )
            worse += len(more)
            print(
                f"{stem:28} {kind:8} paths {n:4d}  changed {changed:4d}  more raw reads {len(more):3d}  "
                f"fewer {len(fewer):3d}" + (f"  unmatched {len(unmatched)}" if unmatched else "")
            )
            for k, x, y in more if args.v else ():
                print(f"    MORE {k}: {x.count('pkt[')} -> {y.count('pkt[')}\n      base: {x}\n      new:  {y}")
    print(f"paths naming fewer fields: {worse}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
