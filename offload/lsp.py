"""`xdp2tc lsp`: the language server (stdio, pygls) behind the editor annotations (issue 15).

On open and save of a C source the server ties it to its object (offload/editor.py `bind`),
rebuilds it when a compile_commands.json entry says how, and publishes the `check` findings
on the source's lines, in two steps: first what exploration settles (compile errors, paths
not understood, side effects, redirect devices: the final findings for those paths, word for
word) with a hint that the other paths are pending, then, once the rules are synthesized and
proved, the final findings, which replace them. Hover, inlay hints, code lenses and code
actions show the same documents (`check`, `rules`, `analyze`, `cost`), pending paths marked so.
The analysis runs in a child process forked per save (editor.Forker: imports done once),
driven from one worker thread off the protocol's event loop and killed by a newer save (clang
too); complete results are cached per object digest. Bad input of any kind becomes a
diagnostic with the one-line error, never a crashed server.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from lifter.errors import LiftError

from . import editor

SOURCE = "xdp2tc"
SEVERITY = {
    "error": lsp.DiagnosticSeverity.Error,
    "warning": lsp.DiagnosticSeverity.Warning,
    "note": lsp.DiagnosticSeverity.Information,
    "hint": lsp.DiagnosticSeverity.Hint,
}
#: Commands the server runs (workspace/executeCommand) with the document's URI.
COMMAND_RULES = "xdp2tc.rules"
COMMAND_CFG = "xdp2tc.cfg"
#: Commands of the editor's extension the code actions name (they copy or open the text).
CLIENT_COPY = "xdp2tc.copyRules"
CLIENT_CFG = "xdp2tc.showCfg"
ASSUME_IP_OPTIONS = "no-ip-options"


@dataclass
class Document:
    """What the server knows of one open source."""

    uri: str
    binding: editor.Binding | None = None
    result: editor.Result | None = None
    notes: dict[int, editor.LineNote] = field(default_factory=dict)
    cancel: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task | None = None  # held here: the event loop keeps only a weak reference
    generation: int = 0


class Server(LanguageServer):
    """The xdp2tc language server."""

    def __init__(self):
        super().__init__("xdp2tc", _version())
        self.settings = editor.Config()
        self.documents: dict[str, Document] = {}
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xdp2tc-analysis")
        self.cache = editor.Cache()
        self.forker = editor.Forker()  # forks an analysis process per save, imports done
        self.outdir = editor.temp_dir()

    # --- scheduling -------------------------------------------------------------------------

    def root(self, source: Path) -> Path:
        root = self.workspace.root_path
        return Path(root) if root else source.parent

    def schedule(self, uri: str) -> None:
        doc = self.documents.setdefault(uri, Document(uri))
        doc.cancel.set()  # the running analysis of this document is killed (editor.run)
        doc.cancel = threading.Event()
        doc.generation += 1
        doc.task = asyncio.get_running_loop().create_task(self.refresh(doc, doc.generation, doc.cancel))

    async def refresh(self, doc: Document, generation: int, cancel: threading.Event) -> None:
        loop = asyncio.get_running_loop()

        def publish(binding, result, diagnostics):  # from the worker thread, onto the loop
            loop.call_soon_threadsafe(self.publish, doc, generation, cancel, binding, result, diagnostics)

        try:
            await loop.run_in_executor(self.worker, self.work, doc.uri, cancel, publish)
        except editor.Cancelled:
            self.log(f"{Path(to_fs_path(doc.uri)).name}: analysis cancelled (a newer save)")

    def log(self, message: str) -> None:
        self.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Log, message=f"xdp2tc: {message}"))

    def publish(self, doc: Document, generation: int, cancel, binding, result, diagnostics) -> None:
        """On the loop: show what the worker has, unless a newer save made it stale. Each
        publish is followed by a log message naming its stage (`first publish`, N paths
        pending, or `final publish`) and the analysis' seconds per stage. `diagnostics` None:
        the documents behind hover and lenses (analyze, cost), the findings unchanged."""
        if generation != doc.generation or cancel.is_set():
            return
        doc.binding, doc.result = binding, result
        name = Path(to_fs_path(doc.uri)).name
        doc.notes = editor.line_notes(result, Path(to_fs_path(doc.uri))) if result is not None else {}
        if diagnostics is None:  # the same findings, now with the documents behind hover and lenses
            self.log(f"{name}: hover and lenses documented ({_timings(result)})")
        elif result is not None and not result.completed:
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=doc.uri, diagnostics=diagnostics))
            self.log(f"{name}: first publish, {_paths(result.pending)} pending ({_timings(result)})")
        else:
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=doc.uri, diagnostics=diagnostics))
            obj = binding.build.output if binding and binding.build else binding.object if binding else None
            how = f" ({obj}, {binding.how})" if binding else ""
            self.log(f"{name}: final publish{how}" + (f" ({_timings(result)})" if result else ""))
        if result is not None and _inlay_refresh(self.client_capabilities):
            self.workspace_inlay_hint_refresh(None)
        if result is not None and _lens_refresh(self.client_capabilities):
            self.workspace_code_lens_refresh(None)

    def work(self, uri: str, cancel: threading.Event, publish) -> None:
        """On the worker thread: bind, rebuild, analyse (in a process), `publish` as it goes:
        first what exploration settles (`pending` marks the rest), then everything."""
        source = Path(to_fs_path(uri))
        lines = self._lines(uri)
        binding = None
        try:
            binding = editor.bind(source, self.root(source), self.settings)
            if binding is None:
                msg = f"xdp2tc: {source.name}: no object for this source"
                return publish(None, None, [_line_zero(msg, "warning")])
            obj, diagnostics, build_s = binding.object, [], 0.0
            if binding.build is not None:
                outdir = os.path.join(self.outdir, hashlib.sha256(uri.encode()).hexdigest()[:16])
                os.makedirs(outdir, exist_ok=True)
                start = time.perf_counter()
                obj, stderr = editor.rebuild(binding.build, outdir, cancel)
                build_s = round(time.perf_counter() - start, 4)
                diagnostics += _compile_diagnostics(stderr, source, binding.build.directory, lines)
                if obj is None:
                    first = stderr.strip().splitlines()[:1] or ["(no message)"]
                    msg = f"xdp2tc: build failed: {first[0]}"
                    return publish(binding, None, diagnostics or [_line_zero(msg, "error")])

            def shown(result: editor.Result) -> editor.Result:
                return replace(result, timings={"build": build_s, **result.timings})

            cached = self.cache.get(obj, binding.config)
            if cached is not None:
                cached = replace(cached, timings={"build": build_s, "cached": 0.0})
                return publish(binding, cached, diagnostics + _findings(cached, source, lines))
            result = editor.run(
                obj,
                binding.config,
                cancel,
                on_explored=lambda r: publish(binding, shown(r), diagnostics + _early(r, source, lines)),
                on_documented=lambda r: publish(binding, shown(r), None),
                forker=self.forker,
            )
            self.cache.put(binding.config, result)
            publish(binding, shown(result), diagnostics + _findings(result, source, lines))
        except editor.Cancelled:
            raise
        except (LiftError, editor.AnalysisError) as err:
            publish(binding, None, [_line_zero(f"xdp2tc: {err}".splitlines()[0], "error")])
        except Exception as err:  # never a crashed server: the one-line error on the file
            msg = f"xdp2tc: internal error: {type(err).__name__}: {err}".splitlines()[0]
            publish(binding, None, [_line_zero(msg, "error")])

    def _lines(self, uri: str) -> list[str]:
        try:
            return self.workspace.get_text_document(uri).lines
        except Exception:
            return []


# --- diagnostics -----------------------------------------------------------------------------


def _paths(n: int) -> str:
    """ "1 path", "3 paths" (this process imports no analysis code, so not analyzer.report.counted)."""
    return "1 path" if n == 1 else f"{n} paths"


def _line_zero(message: str, level: str) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0)),
        message=message,
        severity=SEVERITY[level],
        source=SOURCE,
    )


def _span(line: int, col: int, lines: list[str]) -> lsp.Range:
    """From the 1-based line:col to the end of that line."""
    text = lines[line - 1].rstrip("\r\n") if 0 < line <= len(lines) else ""
    start = max(col - 1, 0)
    return lsp.Range(
        start=lsp.Position(line=max(line - 1, 0), character=start),
        end=lsp.Position(line=max(line - 1, 0), character=max(len(text), start)),
    )


def _findings(result: editor.Result, source: Path, lines: list[str]) -> list[lsp.Diagnostic]:
    """One diagnostic per `check` finding located in this source (the CLI's text line, as SARIF
    words it: rule id, reason code, target, path, verdict, detail, header fields)."""
    out = []
    for f in result.check["findings"]:
        loc = f["location"]
        if not loc or os.path.basename(loc["file"]) != source.name:
            continue
        what = f"path {f['path']} {f['verdict']}" if f["path"] is not None else f"program {f['program']}"
        message = f"{f['code']} [{f['target']}] {what} stays in software: {f['detail']}"
        if f["fields"]:
            message += f" (when {f['fields']})"
        out.append(
            lsp.Diagnostic(
                range=_span(loc["line"], loc["col"], lines),
                message=message,
                severity=SEVERITY[f["level"]],
                code=f["rule"],
                source=SOURCE,
                data={"code": f["code"], "detail": f["detail"]},
            )
        )
    return out


def _early(result: editor.Result, source: Path, lines: list[str]) -> list[lsp.Diagnostic]:
    """The first publish: the findings exploration settles (the final ones, word for word)
    and, while some paths wait for synthesis, one hint on line 1 saying how many."""
    out = _findings(result, source, lines)
    if result.pending:
        out.append(_line_zero(f"xdp2tc: {_paths(result.pending)} {editor.PENDING}", "hint"))
    return out


def _timings(result: editor.Result) -> str:
    return ", ".join(f"{k} {v:.2f} s" for k, v in result.timings.items())


def _compile_diagnostics(stderr: str, source: Path, directory: str, lines: list[str]) -> list[lsp.Diagnostic]:
    """clang's messages as they are: on their line when they concern this source, else on
    line 1 naming the file they concern (a header)."""
    out = []
    for m in editor.compile_messages(stderr):
        here = editor.same_file(Path(directory) / m.file, source) if m.file else False
        rng = _span(m.line, m.col, lines) if here else _span(1, 1, lines)
        text = m.text if here else f"{m.file}:{m.line}:{m.col}: {m.text}"
        out.append(lsp.Diagnostic(range=rng, message=text, severity=SEVERITY[m.severity], source="clang"))
    return out


# --- the protocol ----------------------------------------------------------------------------


def make_server() -> Server:
    ls = Server()

    @ls.feature(lsp.INITIALIZE)
    def initialize(ls: Server, params: lsp.InitializeParams):
        ls.settings = _settings(params.initialization_options, ls.settings)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: Server, params: lsp.DidOpenTextDocumentParams):
        ls.schedule(params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: Server, params: lsp.DidSaveTextDocumentParams):
        ls.schedule(params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: Server, params: lsp.DidCloseTextDocumentParams):
        doc = ls.documents.pop(params.text_document.uri, None)
        if doc is not None:
            doc.cancel.set()
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def watched(ls: Server, params: lsp.DidChangeWatchedFilesParams):
        for uri in list(ls.documents):  # a rebuilt object or a changed config: analyse again
            ls.schedule(uri)

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration(ls: Server, params: lsp.DidChangeConfigurationParams):
        settings = params.settings.get("xdp2tc", params.settings) if isinstance(params.settings, dict) else None
        ls.settings = _settings(settings, ls.settings)
        for uri in list(ls.documents):
            ls.schedule(uri)

    @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(ls: Server, params: lsp.HoverParams):
        doc = ls.documents.get(params.text_document.uri)
        note = doc.notes.get(params.position.line + 1) if doc else None
        if note is None:
            return None
        text = editor.hover_text(note)
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text))

    @ls.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
    def inlay_hints(ls: Server, params: lsp.InlayHintParams):
        doc = ls.documents.get(params.text_document.uri)
        if doc is None:
            return []
        lines = ls._lines(doc.uri)
        out = []
        for n, note in sorted(doc.notes.items()):
            if not params.range.start.line <= n - 1 <= params.range.end.line:
                continue
            label = editor.hint_text(note)
            if label:
                end = len(lines[n - 1].rstrip("\r\n")) if n <= len(lines) else 0
                out.append(
                    lsp.InlayHint(position=lsp.Position(line=n - 1, character=end), label=label, padding_left=True)
                )
        return out

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
    def code_lenses(ls: Server, params: lsp.CodeLensParams):
        doc = ls.documents.get(params.text_document.uri)
        if doc is None or not ls.settings.code_lens:
            return []
        # title only (command ""): the numbers are the point; hover has the details
        return [
            lsp.CodeLens(
                range=lsp.Range(start=lsp.Position(line=n - 1, character=0), end=lsp.Position(line=n - 1, character=0)),
                command=lsp.Command(title=f"xdp2tc: {text}", command=""),
            )
            for n, note in sorted(doc.notes.items())
            for text in editor.lens_texts(note)
        ]

    @ls.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.Empty, lsp.CodeActionKind.QuickFix]),
    )
    def code_actions(ls: Server, params: lsp.CodeActionParams):
        doc = ls.documents.get(params.text_document.uri)
        if doc is None or doc.result is None:
            return []
        # plain commands (the protocol allows them beside code actions): the extension asks
        # the server for the text (COMMAND_RULES, COMMAND_CFG) and copies or opens it
        out: list = [
            lsp.Command(title="xdp2tc: copy tc rules", command=CLIENT_COPY, arguments=[doc.uri]),
            lsp.Command(title="xdp2tc: show CFG", command=CLIENT_CFG, arguments=[doc.uri]),
        ]
        edit = assume_edit(doc, ls.root(Path(to_fs_path(doc.uri))))
        if edit is not None:
            out.append(
                lsp.CodeAction(
                    title=f"xdp2tc: add --assume {ASSUME_IP_OPTIONS} to {editor.CONFIG_FILE}",
                    kind=lsp.CodeActionKind.QuickFix,
                    edit=edit,
                )
            )
        return out

    @ls.command(COMMAND_RULES)
    async def rules_command(ls: Server, uri: str):
        doc = ls.documents.get(uri)
        if not doc or not doc.result or not doc.result.completed:
            return None
        return "".join(pr.tc for pr in doc.result.programs)

    @ls.command(COMMAND_CFG)
    async def cfg_command(ls: Server, uri: str):
        doc = ls.documents.get(uri)
        if not doc or not doc.result:
            return None
        try:
            return await asyncio.get_running_loop().run_in_executor(None, editor.cfg_svg, doc.result)
        except LiftError as err:
            ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"xdp2tc: {err}"))
            return None

    return ls


def depends_on_ip_options(finding: dict) -> bool:
    """A finding whose path reads the IPv4 header length (its header fields name
    ipv4.ver_ihl) or whose reason names IP options: `--assume no-ip-options` may change it."""
    return "ipv4.ver_ihl" in (finding["fields"] or "") or "IP options" in (finding["detail"] or "")


def assume_edit(doc: Document, root: Path) -> lsp.WorkspaceEdit | None:
    """Adding `no-ip-options` to the top-level `assume` of .xdp2tc.toml, offered when a
    finding depends on IP options (depends_on_ip_options) and it is not assumed yet."""
    result, binding = doc.result, doc.binding
    if result is None or binding is None or ASSUME_IP_OPTIONS in binding.config.assume:
        return None
    if not any(depends_on_ip_options(f) for f in result.check["findings"]):
        return None
    path = binding.config_file or root / editor.CONFIG_FILE
    uri = from_fs_path(str(path))
    text = path.read_text() if path.is_file() else ""
    lines = text.splitlines()
    top = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("[")), len(lines))
    found = next((i for i in range(top) if re.match(r"\s*assume\s*=", lines[i])), None)
    assumed = sorted({*binding.config.assume, ASSUME_IP_OPTIONS})
    new = "assume = [" + ", ".join(f'"{a}"' for a in assumed) + "]\n"
    if found is None:
        rng = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
    else:
        rng = lsp.Range(start=lsp.Position(line=found, character=0), end=lsp.Position(line=found + 1, character=0))
    changes: list = []
    if not path.is_file():
        changes.append(lsp.CreateFile(uri=uri))
    changes.append(
        lsp.TextDocumentEdit(
            text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
            edits=[lsp.TextEdit(range=rng, new_text=new)],
        )
    )
    return lsp.WorkspaceEdit(document_changes=changes)


def _settings(options, base: editor.Config) -> editor.Config:
    """The client's settings (initializationOptions or didChangeConfiguration): target,
    assume, mapsFrom; unknown keys are ignored, empty values keep the defaults."""
    if not isinstance(options, dict):
        return base
    changes: dict = {}
    if options.get("target"):
        t = options["target"]
        changes["targets"] = tuple(x.strip() for x in t.split(",")) if isinstance(t, str) else tuple(t)
    if options.get("assume") is not None:
        changes["assume"] = tuple(options["assume"])
    if options.get("codeLens") is not None:
        changes["code_lens"] = bool(options["codeLens"])
    if options.get("mapsFrom"):
        changes["maps_from"] = str(options["mapsFrom"])
    return replace(base, **changes)


def _lens_refresh(caps: lsp.ClientCapabilities | None) -> bool:
    """Whether the client asks to be told when code lenses change."""
    ws = caps.workspace if caps else None
    return bool(ws and ws.code_lens and ws.code_lens.refresh_support)


def _inlay_refresh(caps: lsp.ClientCapabilities | None) -> bool:
    """Whether the client asks to be told when inlay hints change."""
    ws = caps.workspace if caps else None
    return bool(ws and ws.inlay_hint and ws.inlay_hint.refresh_support)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("xdp2tc")
    except metadata.PackageNotFoundError:
        return "0"


def run() -> int:
    """`xdp2tc lsp`: serve on stdin/stdout until the client exits."""
    ls = make_server()
    try:
        ls.start_io()
    finally:
        ls.forker.close()
        shutil.rmtree(ls.outdir, ignore_errors=True)
    return 0


if __name__ == "__main__":  # `xdp2tc lsp` (offload/commands/lsp.py) runs this module
    sys.exit(run())
