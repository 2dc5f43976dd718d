"""What the editor shows for one C source (the language server, offload/lsp.py, serves it).

A source is tied to its object (`bind`): by a `compile_commands.json` entry (the object is
rebuilt with that clang command into a temporary directory), by a `.xdp2tc.toml` in the
workspace, or by an object whose BTF line info names the source. `run` then has the CLI's
own pipeline (offload/editorwork.py `analyse`) run on it in a child process (forked by
`Forker`, its imports done) that a newer save kills, and gets its documents in two stages
(`Result`): `check` (findings with source locations and reason codes), `rules` (filters
and the tc script), `analyze` (branch classes), `cost` (ns per path) and a z3 witness
packet per path. `line_notes` places them on the source's lines. Nothing here is computed
only for the editor. This module imports no analysis (no z3): the server stays small.

`.xdp2tc.toml` (at the workspace root or beside the source; every key optional):

    assume = ["no-ip-options"]      # as `rules --assume`, for every source
    target = ["generic"]            # as `check --target`
    dev = "eth0"                    # the device the copied tc script attaches to
    [[source]]
    file = "prog.c"                 # relative to the .toml's directory
    object = "build/prog.o"
    program = "xdp_main"            # as `--program`
    assume = [...], target = [...], maps_from = "..."   (per source, over the defaults)

`maps_from` is `rules --maps-from`'s source (json:FILE, json:NAME=FILE, pinned:DIR, prog:ID;
file paths relative to the .toml): the rule templates are filled from those entries
(offload/mapfill.py, as `rules --maps-from` does) and the hover of a map-dependent decision
shows the filters its entries gave.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import shlex
import signal
import subprocess
import tempfile
import threading
import tomllib
from dataclasses import dataclass, field, replace
from multiprocessing import reduction
from multiprocessing.connection import Connection
from pathlib import Path

from lifter.errors import LiftError

from .targets import DEFAULT_TARGETS

CONFIG_FILE = ".xdp2tc.toml"
#: Folders never searched for objects or build databases.
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache"}
#: Objects looked at when searching by line info: a workspace holds a few, not thousands.
MAX_OBJECTS = 400


class Cancelled(Exception):
    """A newer save (or a closed document) made this analysis pointless."""


@dataclass(frozen=True)
class Config:
    """The CLI options one source is analysed with (.xdp2tc.toml over the client's settings)."""

    object: str | None = None
    program: str | None = None
    assume: tuple[str, ...] = ()
    targets: tuple[str, ...] = DEFAULT_TARGETS
    dev: str = "eth0"
    maps_from: str | None = None
    code_lens: bool = field(default=True, compare=False)  # the client's setting: not an analysis option


@dataclass(frozen=True)
class Build:
    """One compile_commands.json entry: its argv, directory and the object it writes."""

    argv: tuple[str, ...]
    directory: str
    output: str | None


@dataclass(frozen=True)
class Binding:
    """A source, the object it is built into and how that was found."""

    source: Path
    object: Path | None
    build: Build | None
    config: Config
    how: str
    config_file: Path | None = None


@dataclass(frozen=True)
class CompileMessage:
    """One `file:line:col: error|warning: text` line of clang's stderr."""

    file: str
    line: int
    col: int
    severity: str
    text: str


# --- binding ---------------------------------------------------------------------------------


def _list(value) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)


def read_config(path: Path, source: Path, base: Config) -> Config:
    """`base` overridden by the toml's defaults and by the [[source]] entry for `source`."""
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise LiftError(f"cannot read it: {err}".splitlines()[0], file=str(path)) from None
    cfg = _apply(base, doc, path.parent)
    for entry in doc.get("source", []):
        if isinstance(entry, dict) and "file" in entry and same_file(path.parent / entry["file"], source):
            cfg = _apply(cfg, entry, path.parent)
    return cfg


def _apply(cfg: Config, table: dict, base: Path) -> Config:
    changes: dict = {}
    if "object" in table:
        changes["object"] = str(base / table["object"])
    if "program" in table:
        changes["program"] = str(table["program"])
    if "assume" in table:
        changes["assume"] = _list(table["assume"])
    if "target" in table:
        changes["targets"] = _list(table["target"])
    if "dev" in table:
        changes["dev"] = str(table["dev"])
    if "maps_from" in table:
        changes["maps_from"] = _relative_spec(str(table["maps_from"]), base)
    return replace(cfg, **changes)


def _relative_spec(spec: str, base: Path) -> str:
    """A --maps-from spec with its file or directory taken relative to `base` (the .toml's
    folder); `prog:ID` and absolute paths as they are."""
    kind, sep, where = spec.partition(":")
    if not sep or kind not in ("json", "pinned"):
        return spec
    name, eq, file = where.partition("=") if kind == "json" and "=" in where else ("", "", where)
    return f"{kind}:{name}{eq}{base / file if file else file}"


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (by path when either does not exist)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _upwards(source: Path, root: Path, name: str) -> Path | None:
    """`name` in the source's folder or one above it, up to the workspace root."""
    d = source.parent
    while True:
        if (d / name).is_file():
            return d / name
        if d == root or d.parent == d or root not in d.parents:
            return None
        d = d.parent


def compile_entry(source: Path, root: Path) -> Build | None:
    """The compile_commands.json entry (at the root, beside the source or in build/) for `source`."""
    for db in (_upwards(source, root, "compile_commands.json"), root / "build" / "compile_commands.json"):
        if db is None or not db.is_file():
            continue
        try:
            entries = json.loads(db.read_text())
        except (OSError, ValueError) as err:
            raise LiftError(f"cannot read it: {err}".splitlines()[0], file=str(db)) from None
        for e in entries if isinstance(entries, list) else []:
            directory = Path(e.get("directory", db.parent))
            if "file" in e and same_file(directory / e["file"], source):
                argv = e.get("arguments") or shlex.split(e.get("command", ""))
                out = e.get("output")
                if out is None and "-o" in argv[:-1]:
                    out = argv[argv.index("-o") + 1]
                return Build(tuple(argv), str(directory), out)
    return None


def objects_naming(source: Path, root: Path) -> list[Path]:
    """Objects under `root` whose BTF line info names the source (same file name), sorted."""
    from lifter.program import load_object  # here: the server itself stays light (no z3)

    found = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            if not name.endswith(".o"):
                continue
            seen += 1
            if seen > MAX_OBJECTS:
                return found
            path = Path(dirpath) / name
            if source.name.encode() not in path.read_bytes():  # cheap filter before lifting
                continue
            try:
                files = load_object(str(path)).source_files
            except LiftError:
                continue
            if any(os.path.basename(f) == source.name for f in files):
                found.append(path)
    return found


def bind(source: Path, root: Path, settings: Config) -> Binding | None:
    """How `source` is tied to an object; None when nothing ties it (see the module doc)."""
    cfg_file = _upwards(source, root, CONFIG_FILE)
    cfg = read_config(cfg_file, source, settings) if cfg_file else settings
    build = compile_entry(source, root)
    if build is not None:
        return Binding(source, None, build, cfg, "compile_commands.json", cfg_file)
    if cfg.object:
        return Binding(source, Path(cfg.object), None, cfg, CONFIG_FILE, cfg_file)
    objects = objects_naming(source, root)
    if objects:
        return Binding(source, objects[0], None, cfg, f"line info of {objects[0]}", cfg_file)
    return None


# --- rebuild ---------------------------------------------------------------------------------

_MESSAGE = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>fatal error|error|warning): (?P<text>.*)$"
)


def compile_messages(stderr: str) -> list[CompileMessage]:
    """clang's located messages (notes and context lines are left out)."""
    return [
        CompileMessage(
            m["file"], int(m["line"]), int(m["col"]), "error" if "error" in m["sev"] else "warning", m["text"]
        )
        for m in map(_MESSAGE.match, stderr.splitlines())
        if m
    ]


def rebuild(build: Build, outdir: str, cancel: threading.Event | None = None) -> tuple[Path | None, str]:
    """Run the entry's command with its output in `outdir`: (object or None, clang's stderr)."""
    argv = list(build.argv)
    out = Path(outdir) / (Path(build.output).name if build.output else "out.o")
    if "-o" in argv[:-1]:
        argv[argv.index("-o") + 1] = str(out)
    else:
        argv += ["-o", str(out)]
    try:
        proc = subprocess.Popen(argv, cwd=build.directory, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    except OSError as err:
        raise LiftError(f"cannot run {argv[0]}: {err.strerror}") from None
    while True:
        try:
            _, stderr = proc.communicate(timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                proc.kill()
                proc.wait()
                raise Cancelled() from None
    return (out if proc.returncode == 0 and out.is_file() else None), stderr


# --- analysis --------------------------------------------------------------------------------


@dataclass
class ProgramResult:
    """One entry program's documents (plain data: it comes from the analysis process).
    Before the COMPLETE stage `rules` is None, `tc` empty and the witnesses not yet found;
    at EXPLORED `analyze` and `cost` are None too."""

    name: str
    rules: dict | None  # xdp2tc.rules/1
    analyze: dict | None  # xdp2tc.analyze/1
    cost: dict | None  # xdp2tc.cost/1 program entry; None without a cost profile
    tc: str  # the tc -batch script `rules` prints
    decided: dict[int, dict | None]  # path id -> where its verdict is decided (check.decided_at)
    tail_sites: dict[int, dict | None]  # tail-call pc -> location
    witnesses: dict[int, bytes | None]  # path id -> a packet taking it (z3), None: none found
    maps: dict | None = None  # the rules JSON's `maps` member, when maps_from gave map contents


#: Result stages: what exploration alone settles (the first publish), the documents that
#: need only the exploration (analyze, cost: hover and lenses), then everything.
EXPLORED, DOCUMENTED, COMPLETE = "explored", "documented", "complete"
#: What the editor says of a path synthesis has not decided yet.
PENDING = "offload pending: filters are being synthesized and proved"


@dataclass
class Result:
    """Everything the editor shows for one object. `check` is the CLI's xdp2tc.check/1
    document; before COMPLETE it holds only what synthesis cannot change (`settled`): its
    findings are a subset of the final ones, word for word, and the paths synthesis decides
    are listed with `"pending": true` (`pending` counts them); at EXPLORED the header fields
    of paths without a finding are None. `timings`: seconds per
    stage of the analysis (bench/lsp.py reports them)."""

    object: str
    digest: str
    check: dict
    programs: list[ProgramResult] = field(default_factory=list)
    stage: str = COMPLETE
    pending: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.stage == COMPLETE


class AnalysisError(Exception):
    """The analysis of an object failed: the one-line error (a LiftError's text)."""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fork_server(ctrl) -> None:
    """The fork server process' entry (editorwork.serve): the analysis' imports happen there,
    never in the language server."""
    from .editorwork import serve

    serve(ctrl)


class Forker:
    """The analysis processes: a fork server spawned when the language server starts (its
    imports, about 1 s, paid once) forks a fresh child per job in milliseconds. A newer
    save kills the running child (`Job.stop`); the child's memory goes with it when done, and
    the fork server itself never analyses, so neither grows. Spawned, not forked from the
    server: a fork of the threaded server deadlocked on a lock another thread held."""

    def __init__(self):
        self.lock = threading.Lock()
        self.start()

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.ctrl, there = ctx.Pipe(duplex=True)  # a socket pair: it carries file descriptors
        self.proc = ctx.Process(target=fork_server, args=(there,), daemon=True)
        self.proc.start()
        there.close()

    def job(self, path: Path, cfg: Config) -> Job:
        """A forked child analysing `path`; its results come out of `Job.results`."""
        with self.lock:
            if not self.proc.is_alive():
                self.close()
                self.start()
            results, into = multiprocessing.Pipe(duplex=False)
            self.ctrl.send((str(path), cfg))
            reduction.send_handle(self.ctrl, into.fileno(), self.proc.pid)
            into.close()
            return Job(self.ctrl.recv(), results)

    def close(self) -> None:
        self.ctrl.close()
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()


@dataclass
class Job:
    """One forked analysis: its pid and the server's end of its results pipe
    ((EXPLORED | COMPLETE | "error", payload) come out)."""

    pid: int
    results: Connection
    ended: bool = False  # its last message came (the fork server reaps it: its pid is not ours)

    def stop(self) -> None:
        self.results.close()
        if not self.ended:
            os.kill(self.pid, signal.SIGKILL)  # alive until the fork server has waited for it


def run(
    path: Path, cfg: Config, cancel: threading.Event | None = None, on_explored=None, on_documented=None, forker=None
) -> Result:
    """`editorwork.analyse` in a forked child (`Forker`), killed when `cancel` is set (the rule synthesis
    has no cancellation point of its own) and gone when done, so the server's memory stays
    what it was. `on_explored(result)` gets the EXPLORED stage, `on_documented(result)` the
    DOCUMENTED one, before synthesis starts; the COMPLETE result is returned. Without a
    `forker` one is started here (and pays the imports)."""
    own = forker is None
    forker = forker or Forker()
    job = forker.job(path, cfg)
    try:
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            if not job.results.poll(0.02):
                continue
            try:
                kind, payload = job.results.recv()
            except EOFError:
                job.ended = True
                raise AnalysisError(f"{path}: the analysis process ended without a result") from None
            job.ended = kind in ("error", COMPLETE)
            if kind == "error":
                raise AnalysisError(payload)
            if kind == EXPLORED and on_explored is not None:
                on_explored(payload)
            elif kind == DOCUMENTED and on_documented is not None:
                on_documented(payload)
            elif kind == COMPLETE:
                return payload
    finally:
        job.stop()
        if own:
            forker.close()


class Cache:
    """Complete results per (object digest, options): a rebuild that changes nothing costs a hash."""

    def __init__(self, size: int = 8):
        self.size = size
        self.items: dict[tuple[str, Config], Result] = {}
        self.lock = threading.Lock()

    def get(self, path: Path, cfg: Config) -> Result | None:
        with self.lock:
            return self.items.get((digest(path), cfg))

    def put(self, cfg: Config, result: Result) -> None:
        with self.lock:
            self.items[(result.digest, cfg)] = result
            while len(self.items) > self.size:
                self.items.pop(next(iter(self.items)))


# --- on the source's lines ---------------------------------------------------------------------


@dataclass
class LineNote:
    """What one source line gets: decision classes, the paths decided there, tail calls."""

    line: int  # 1-based
    classes: list[str] = field(default_factory=list)
    paths: list[tuple[ProgramResult, dict]] = field(default_factory=list)  # (program, check path doc)
    tail_calls: list[tuple[ProgramResult, dict]] = field(default_factory=list)  # (program, cost site)


def _here(loc_file: str | None, source: Path) -> bool:
    return bool(loc_file) and os.path.basename(loc_file) == source.name


def class_label(branch: dict) -> str:
    """`stateless`, `map: blacklist`, `helper: ktime_get_ns`...: a branch's class as a hint."""
    cls = branch["class"]
    if cls == "control-plane-map" and branch["detail"]:
        return "map: " + ", ".join(branch["detail"])
    if cls in ("helper", "ctx", "data-plane-state") and branch["detail"]:
        return f"{cls}: " + ", ".join(branch["detail"])
    return cls


def line_notes(result: Result, source: Path) -> dict[int, LineNote]:
    """The notes of `source`'s lines (1-based) from a result of either stage."""
    notes: dict[int, LineNote] = {}

    def at(line: int) -> LineNote:
        return notes.setdefault(line, LineNote(line))

    check_paths = {p["program"]: {q["id"]: q for q in p["paths"]} for p in result.check["programs"]}
    for pr in result.programs:
        for b in pr.analyze["branches"] if pr.analyze else ():
            if _here(b["file"], source) and b["line"]:
                label = class_label(b)
                if label not in at(b["line"]).classes:
                    at(b["line"]).classes.append(label)
        for pid, loc in pr.decided.items():
            if loc and _here(loc["file"], source):
                at(loc["line"]).paths.append((pr, check_paths[pr.name][pid]))
        for site in (pr.cost or {}).get("sites", []):
            loc = pr.tail_sites.get(site["pc"]) if site["program"] == pr.name else None
            if loc and _here(loc["file"], source):
                at(loc["line"]).tail_calls.append((pr, site))
    return notes


def path_ns(pr: ProgramResult, path_id: int) -> dict | None:
    """The cost document's ns {min, median, max} of one path (None: not priced)."""
    if pr.cost is None:
        return None
    return next((p["ns"] for p in pr.cost["paths"] if p["id"] == path_id), None)


def verdict_texts(note: LineNote) -> list[str]:
    """Per verdict of the paths decided on a line: `DROP×2 (1 on NIC) 12.1/14.0/20.3 ns`
    (the count, how many the NIC takes or are pending synthesis, and the cost document's
    min/median/max ns)."""
    by_verdict: dict[str, list] = {}
    for pr, p in note.paths:
        by_verdict.setdefault(p["verdict"], []).append((pr, p))
    out = []
    for verdict, items in sorted(by_verdict.items()):
        off = sum(1 for _, p in items if p["offloaded"])
        waiting = sum(1 for _, p in items if p.get("pending"))
        text = f"{verdict}×{len(items)}" + (f" ({off} on NIC)" if off else "")
        text += f" ({waiting} pending)" if waiting else ""
        spans = [ns for pr, p in items if (ns := path_ns(pr, p["id"]))]
        if spans:
            lo = min(s["min"] for s in spans)
            hi = max(s["max"] for s in spans)
            med = sorted(s["median"] for s in spans)[len(spans) // 2]
            text += f" {lo:.1f}/{med:.1f}/{hi:.1f} ns"
        out.append(text)
    return out


def tail_call_texts(note: LineNote) -> list[str]:
    """Per tail call on a line: `tail call constant 35.2 ns` (constant or variable target)."""
    out = []
    for pr, site in note.tail_calls:
        ns = tail_call_ns(pr, site["pc"])
        out.append(f"tail call {site['kind']}" + (f" {ns:.1f} ns" if ns is not None else ""))
    return out


def hint_text(note: LineNote) -> str:
    """The inlay hint at the end of a line: classes, verdict counts with ns, tail calls."""
    return " · ".join(list(note.classes) + verdict_texts(note) + tail_call_texts(note))


def lens_texts(note: LineNote) -> list[str]:
    """The code lenses above a line: one per verdict decided there (count, ns min/median/max)
    and one per tail call (constant or variable, its ns)."""
    out = [t.replace(" ns", " ns (min/median/max)") if "/" in t else t for t in verdict_texts(note)]
    return out + tail_call_texts(note)


def tail_call_ns(pr: ProgramResult, pc: int) -> float | None:
    """The cost document's price of the tail call at `pc` (the same on every path taking it)."""
    for p in (pr.cost or {}).get("paths", []):
        for t in p["tail_calls"]:
            if t["pc"] == pc and t["ns"] is not None:
                return t["ns"]
    return None


def hover_text(note: LineNote) -> str:
    """Markdown for a decision line: class, path conditions in header fields, filters or the
    reason none, the counterexample packet, the cost."""
    from rules.frametext import frame_inputs
    from rules.reasons import REASONS  # here: the server itself stays light until a hover

    out = []
    if note.classes:
        out.append("**xdp2tc** decision: " + ", ".join(f"`{c}`" for c in note.classes))
    for pr, p in note.paths:
        head = f"- path {p['id']} (program `{pr.name}`) **{p['verdict']}**"
        ns = path_ns(pr, p["id"])
        if ns:
            head += f", {ns['min']:.1f}/{ns['median']:.1f}/{ns['max']:.1f} ns predicted (min/median/max)"
        out.append(head)
        if p["fields"] is not None:
            out.append(f"  - when `{p['fields']}`")
        if p.get("pending"):
            out.append(f"  - {PENDING}")
            continue
        if p["offloaded"]:
            fate = next(f for f in pr.rules["fates"] if f["path"] == p["id"])
            for i in fate["filters"]:
                out.append(f"  - filter: `{pr.rules['rules'][i]['tc']}`")
        elif filled_filters(pr, p["id"]):
            for line in filled_filters(pr, p["id"]):
                out.append(f"  - filter from the map entries (maps_from): `{line}`")
        elif p["code"] == "pass-to-host":
            out.append("  - passes to the host (no filter needed: the program runs there anyway)")
        else:
            out.append(f"  - stays in software: {p['code']}: {p['detail'] or REASONS[p['code']].text}")
        example = p.get("counterexample")  # check's: the frame showing why (counterexample.py)
        packet = pr.witnesses.get(p["id"])
        if example is not None:
            out.append(
                f"  - counterexample packet ({example['length']} bytes, {example['kind']}): "
                f"`{example['hex'][:128]}`: {example['why']}"
            )
            out += [f"    - {text}" for text in frame_inputs(example)]
        elif packet is not None:
            out.append(f"  - counterexample packet ({len(packet)} bytes): `{packet[:64].hex()}`")
    for pr, site in note.tail_calls:
        ns = tail_call_ns(pr, site["pc"])
        out.append(f"- tail call: {site['kind']} ({site['why']})" + (f", {ns:.1f} ns" if ns is not None else ""))
    return "\n".join(out)


def filled_filters(pr: ProgramResult, path_id: int) -> list[str]:
    """The tc lines the map entries gave for a path's templates (maps_from), in print order."""
    if not pr.maps:
        return []
    mine = {t["index"] for t in pr.maps["templates"] if path_id in t["paths"]}
    return [f["tc"] for f in pr.maps["filters"] if f["template"] in mine and f["role"] != "goto"]


def cfg_svg(result: Result) -> str:
    """The CFG of each of the object's analysed programs as SVG (`cfg --format svg`)."""
    from lifter.program import load_object

    from .console import svg
    from .render import cfg_dot

    obj = load_object(result.object)
    return "".join(svg(cfg_dot(obj, obj.program(pr.name)), "show CFG") for pr in result.programs)


def temp_dir() -> str:
    return tempfile.mkdtemp(prefix="xdp2tc-lsp-")
