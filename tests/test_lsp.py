"""`xdp2tc lsp` end to end (issue 15): a real LSP client (pytest-lsp) drives the server over
stdio on corpus sources copied into a temporary workspace with a compile_commands.json, so a
save rebuilds the object with clang. Expected lines come from the source text itself (the line
that holds the map lookup), not from the server; the reason codes from the corpus's
`// expect:` comments and what the program does (a map lookup decides the drop)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from xml.etree import ElementTree

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.conftest import require, require_tool

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
CLANG = "clang-19"
STEM = "thesis_ddos_blacklist"
#: How long one analysis may take on a loaded 2-core machine before a test gives up.
WAIT = 120


def clang_command(name: str) -> list[str]:
    """corpus/Makefile's clang toolchain command (CLANG_BASE -g), as a build database holds it."""
    return [
        CLANG,
        "-O2",
        "-target",
        "bpf",
        "-Wall",
        "-Werror",
        "-I/usr/include/x86_64-linux-gnu",
        "-Iinclude",
        "-g",
        "-c",
        name,
        "-o",
        f"build/{Path(name).stem}.o",
    ]


def workspace(root: Path) -> Path:
    """A copy of one corpus source with the corpus headers and a compile_commands.json."""
    shutil.copytree(CORPUS / "include", root / "include")
    shutil.copy(CORPUS / f"{STEM}.c", root / f"{STEM}.c")
    (root / "build").mkdir()
    db = [{"directory": str(root), "file": f"{STEM}.c", "arguments": clang_command(f"{STEM}.c")}]
    (root / "compile_commands.json").write_text(json.dumps(db))
    return root / f"{STEM}.c"


def line_of(source: Path, needle: str) -> int:
    """0-based line of the first line containing `needle` (LSP lines are 0-based)."""
    return next(i for i, text in enumerate(source.read_text().splitlines()) if needle in text)


def lookup_lines(source: Path) -> set[int]:
    """The lines of the program's two map lookups, each deciding a drop."""
    return {line_of(source, "bpf_map_lookup_elem(&blacklist"), line_of(source, "bpf_map_lookup_elem(&port_blacklist")}


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "offload.cli", "lsp"]),
)
async def client(lsp_client: LanguageClient, tmp_path: Path):
    require_tool(CLANG)
    workspace(tmp_path)

    @lsp_client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params):  # VS Code's capabilities say it refreshes lenses when asked
        return None

    # Each publish is followed by the server's log message naming its stage: keep, beside
    # pytest-lsp's own record, the diagnostics each file had when its message came.
    features = lsp_client.protocol.fm.features
    logged = features[lsp.WINDOW_LOG_MESSAGE]
    lsp_client.published = []

    def log_message(params: lsp.LogMessageParams):
        logged(params)
        lsp_client.published.append((params.message, {u: list(d) for u, d in lsp_client.diagnostics.items()}))

    features[lsp.WINDOW_LOG_MESSAGE] = log_message
    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=pytest_lsp.client_capabilities("visual-studio-code"),
            root_uri=tmp_path.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
        )
    )
    yield
    await lsp_client.shutdown_session()


def stage_of(message: str, uri: str) -> str | None:
    """`first` or `final` for the server's log message of a publish for `uri`, else None."""
    m = re.match(r"xdp2tc: (.+?): (first|final) publish", message)
    return m[2] if m and m[1] == uri.rsplit("/", 1)[-1] else None


async def publishes(client: LanguageClient, uri: str, action, until: str = "final") -> list[tuple[str, list]]:
    """Do `action` (open, save...), then wait for the server's publish of stage `until` for
    `uri`: every publish for `uri` since, in order, as (stage, diagnostics)."""
    start = len(client.published)
    action()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        seen = [
            (stage, diags.get(uri, []))
            for message, diags in client.published[start:]
            if (stage := stage_of(message, uri))
        ]
        if any(stage == until for stage, _ in seen):
            return seen
        assert loop.time() < deadline, f"no {until} publish for {uri} in {WAIT} s"
        await asyncio.sleep(0.05)


async def diagnostics_after(client: LanguageClient, uri: str, action) -> list[lsp.Diagnostic]:
    """Do `action` (open or save), then wait for the final diagnostics it publishes for `uri`."""
    return list((await publishes(client, uri, action))[-1][1])


async def hover_at(client: LanguageClient, uri: str, line: int) -> str:
    """The hover text of a line (after its final publish)."""
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=line, character=8)
        )
    )
    assert hover is not None, f"no hover on line {line}"
    return hover.contents.value


def open_doc(client: LanguageClient, source: Path) -> None:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=source.as_uri(), language_id="c", version=1, text=source.read_text())
        )
    )


def save_doc(client: LanguageClient, source: Path) -> None:
    client.text_document_did_save(
        lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=source.as_uri()))
    )


@pytest.mark.asyncio
async def test_diagnostics_hover_save_rebuild_and_broken_build(client: LanguageClient, tmp_path: Path):
    source = tmp_path / f"{STEM}.c"
    uri = source.as_uri()
    diags = await diagnostics_after(client, uri, lambda: open_doc(client, source))
    # the two drops decided by a map lookup stay in software: map-dependent (XT001)
    expected = lookup_lines(source)
    found = {d.range.start.line for d in diags if d.code == "XT001"}
    assert found == expected, [(d.range.start.line, d.message) for d in diags]
    assert all("map-dependent" in d.message and "DROP" in d.message for d in diags if d.code == "XT001")
    assert all(d.severity == lsp.DiagnosticSeverity.Warning for d in diags if d.code == "XT001")

    # hover on the blacklist lookup: class, the drop path's header fields, why no filter, a packet
    line = line_of(source, "bpf_map_lookup_elem(&blacklist")
    text = await hover_at(client, uri, line)
    assert "map: blacklist" in text and "**DROP**" in text
    assert "ipv4.saddr" in text and "map-dependent" in text and "counterexample packet" in text
    # the packet's verdict is the program's with the entries it looks up: none in blacklist
    assert re.search(r"with map entries .*: blacklist\[[0-9a-f]{8}\] absent", text), text

    # inlay hints carry the class per decision line
    hints = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=10_000, character=0)),
        )
    )
    assert any(h.position.line == line and "map: blacklist" in h.label and "DROP" in h.label for h in hints)

    # code lenses: one DROP path decided on each lookup line (the source returns XDP_DROP right
    # after it), with its predicted ns as min/median/max
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    drops = {n.range.start.line for n in lenses if n.command.title.startswith("xdp2tc: DROP×1 ")}
    assert drops == expected, [(n.range.start.line, n.command.title) for n in lenses]
    assert all(n.command.title.endswith(" ns (min/median/max)") for n in lenses if "DROP" in n.command.title)

    # save after inserting three lines: the object is rebuilt by clang and the findings move
    source.write_text("\n\n\n" + source.read_text())
    diags = await diagnostics_after(client, uri, lambda: save_doc(client, source))
    assert {d.range.start.line for d in diags if d.code == "XT001"} == {n + 3 for n in expected}

    # a broken build: clang's error on its line, and the server still answers afterwards
    text = source.read_text().splitlines()
    text.append("#error deliberately broken")
    source.write_text("\n".join(text) + "\n")
    diags = await diagnostics_after(client, uri, lambda: save_doc(client, source))
    broken = len(text) - 1
    assert [(d.range.start.line, d.severity, d.source) for d in diags] == [
        (broken, lsp.DiagnosticSeverity.Error, "clang")
    ]
    assert "deliberately broken" in diags[0].message

    # code actions: copy tc rules (the `rules` script) and show CFG
    del text[broken]
    source.write_text("\n".join(text) + "\n")
    diags = await diagnostics_after(client, uri, lambda: save_doc(client, source))
    assert {d.range.start.line for d in diags if d.code == "XT001"} == {n + 3 for n in expected}
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0)),
            context=lsp.CodeActionContext(diagnostics=[]),
        )
    )
    copy = next(a for a in actions if a.title == "xdp2tc: copy tc rules")
    assert copy.command == "xdp2tc.copyRules" and list(copy.arguments) == [uri]
    script = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="xdp2tc.rules", arguments=[uri])
    )
    assert script.startswith("# xdp2tc rules for ") and "flower" in script
    assert any(a.title == "xdp2tc: show CFG" for a in actions)
    require_tool("dot")
    svg = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="xdp2tc.cfg", arguments=[uri]))
    assert ElementTree.fromstring(svg).tag.endswith("svg")  # graphviz's SVG, parsed back


@pytest.mark.asyncio
async def test_bad_input_is_a_diagnostic(client: LanguageClient, tmp_path: Path):
    # a source nothing builds and no object names
    orphan = tmp_path / "orphan.c"
    orphan.write_text("int x;\n")
    diags = await diagnostics_after(client, orphan.as_uri(), lambda: open_doc(client, orphan))
    assert [d.message for d in diags] == ["xdp2tc: orphan.c: no object for this source"]

    # an object that fails to lift, named by .xdp2tc.toml: its one-line error
    junk = tmp_path / "junk.c"
    junk.write_text("int y;\n")
    (tmp_path / "junk.o").write_bytes(b"not an ELF file at all")
    (tmp_path / ".xdp2tc.toml").write_text('[[source]]\nfile = "junk.c"\nobject = "junk.o"\n')
    diags = await diagnostics_after(client, junk.as_uri(), lambda: open_doc(client, junk))
    assert len(diags) == 1 and diags[0].severity == lsp.DiagnosticSeverity.Error
    assert diags[0].message.startswith("xdp2tc: ") and "junk.o" in diags[0].message
    assert "\n" not in diags[0].message


def test_neovim_headless_reads_the_diagnostics(tmp_path: Path):
    """Neovim's own LSP client (Debian's `neovim`, `nvim --headless`): no pytest-lsp, no pygls
    on the client side; it reads back the same findings on the same lines."""
    require_tool(CLANG)
    nvim = require_tool("nvim")
    source = workspace(tmp_path)
    out = tmp_path / "diagnostics.json"
    env = {
        **os.environ,
        "XDP2TC_SOURCE": str(source),
        "XDP2TC_OUT": str(out),
        "XDP2TC_PYTHON": sys.executable,
        "XDP2TC_WAIT": str(WAIT),
    }
    script = Path(__file__).parent / "data" / "nvim_diagnostics.lua"
    proc = subprocess.run(
        [nvim, "--headless", "--clean", "-n", "-c", f"luafile {script}"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=WAIT + 60,
        stdin=subprocess.DEVNULL,
    )
    assert out.is_file(), proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["done"], doc
    rows = [d for d in doc["diagnostics"] if d["code"] == "XT001"]
    expected = lookup_lines(source)
    assert {d["lnum"] for d in rows} == expected, doc
    assert all("map-dependent" in d["message"] and d["severity"] == 2 and d["source"] == "xdp2tc" for d in rows)


@pytest.mark.asyncio
async def test_config_binding_and_assume_quick_fix(client: LanguageClient, tmp_path: Path):
    """ipv4_options.c bound by .xdp2tc.toml to its corpus object. Its header comment says the
    `ihl < 5` drops stay in XDP (no flower match) and the UDP 5353 drop is a flower rule; with
    IP options possible (the UDP header at ihl*4) that rule is only sound under
    `--assume no-ip-options`, which the quick fix adds; after it only the ihl line is left."""
    obj = CORPUS / "build" / "clang" / "ipv4_options.o"
    require(obj.is_file(), "corpus is not built (run `make corpus`)")
    source = tmp_path / "ipv4_options.c"
    shutil.copy(CORPUS / "ipv4_options.c", source)
    config = tmp_path / ".xdp2tc.toml"
    config.write_text(f'dev = "eth1"\n\n[[source]]\nfile = "ipv4_options.c"\nobject = "{obj}"\n')
    uri = source.as_uri()
    ihl, mdns = line_of(source, "iph->ihl < 5"), line_of(source, "bpf_htons(5353)")
    diags = await diagnostics_after(client, uri, lambda: open_doc(client, source))
    assert {d.range.start.line for d in diags} == {ihl, mdns}, [(d.range.start.line, d.message) for d in diags]
    assert next(d for d in diags if d.range.start.line == ihl).code == "XT006"  # atypical-packets

    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(start=lsp.Position(line=mdns, character=0), end=lsp.Position(line=mdns, character=0)),
            context=lsp.CodeActionContext(diagnostics=diags),
        )
    )
    fix = next(a for a in actions if isinstance(a, lsp.CodeAction) and "no-ip-options" in a.title)
    (edit,) = [c for c in fix.edit.document_changes if isinstance(c, lsp.TextDocumentEdit)]
    assert edit.text_document.uri == config.as_uri()
    # apply it as an editor would: the text edit on the file's lines, then the file is saved
    lines = config.read_text().splitlines(keepends=True)
    (change,) = edit.edits
    start, end = change.range.start.line, change.range.end.line
    config.write_text("".join(lines[:start]) + change.new_text + "".join(lines[end:]))
    assert tomllib.loads(config.read_text())["assume"] == ["no-ip-options"]

    def changed():
        client.workspace_did_change_watched_files(
            lsp.DidChangeWatchedFilesParams(
                changes=[lsp.FileEvent(uri=config.as_uri(), type=lsp.FileChangeType.Changed)]
            )
        )

    diags = await diagnostics_after(client, uri, changed)
    assert [(d.range.start.line, d.code) for d in diags] == [(ihl, "XT006")]


@pytest.mark.asyncio
async def test_tail_call_lenses_and_maps_from(client: LanguageClient, tmp_path: Path):
    """tailcall_variable.c tail-calls through `dscp_progs` at `iph->tos >> 2`, an index read
    from the packet, on one line: a `tail call variable` lens with its ns there.
    thesis_ddos_blacklist.c with `maps_from` (the seed's §6.6 entries, 192.168.1.40 and port
    50, as a bpftool dump): the hover of each lookup shows the filters those entries give,
    the seed's three rules (hand-derived there, as in test_templates)."""
    objs = {stem: CORPUS / "build" / "clang" / f"{stem}.o" for stem in ("tailcall_variable", STEM)}
    require(all(o.is_file() for o in objs.values()), "corpus is not built (run `make corpus`)")
    for stem in objs:
        shutil.copy(CORPUS / f"{stem}.c", tmp_path / f"{stem}.c")
    dump = {
        "blacklist": [{"key": ["0xc0", "0xa8", "0x01", "0x28"], "value": ["0x01", "0x00", "0x00", "0x00"]}],
        "port_blacklist": [{"key": ["0x32", "0x00"], "value": ["0x01", "0x00", "0x00", "0x00"]}],
    }
    (tmp_path / "maps.json").write_text(json.dumps(dump))
    (tmp_path / ".xdp2tc.toml").write_text(
        f'[[source]]\nfile = "tailcall_variable.c"\nobject = "{objs["tailcall_variable"]}"\n'
        f'[[source]]\nfile = "{STEM}.c"\nobject = "{objs[STEM]}"\nassume = ["no-ip-options"]\n'
        'maps_from = "json:maps.json"\n'
    )
    source = tmp_path / "tailcall_variable.c"
    uri = source.as_uri()
    call = line_of(source, "bpf_tail_call(ctx, &dscp_progs, iph->tos >> 2)")
    await diagnostics_after(client, uri, lambda: open_doc(client, source))
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    tails = [n for n in lenses if "tail call" in n.command.title]
    assert [n.range.start.line for n in tails] == [call], [(n.range.start.line, n.command.title) for n in lenses]
    assert re.fullmatch(r"xdp2tc: tail call variable [0-9.]+ ns", tails[0].command.title), tails

    ddos = tmp_path / f"{STEM}.c"
    await diagnostics_after(client, ddos.as_uri(), lambda: open_doc(client, ddos))
    text = await hover_at(client, ddos.as_uri(), line_of(ddos, "bpf_map_lookup_elem(&blacklist"))
    assert "flower skip_sw src_ip 192.168.1.40 action drop`" in text
    text = await hover_at(client, ddos.as_uri(), line_of(ddos, "bpf_map_lookup_elem(&port_blacklist"))
    assert "flower skip_sw ip_proto tcp dst_port 50 action drop`" in text
    assert "flower skip_sw ip_proto udp dst_port 50 action drop`" in text


def add_source(root: Path, stem: str) -> Path:
    """Another corpus source in the workspace, with its entry in compile_commands.json."""
    shutil.copy(CORPUS / f"{stem}.c", root / f"{stem}.c")
    db = root / "compile_commands.json"
    entries = json.loads(db.read_text())
    entries.append({"directory": str(root), "file": f"{stem}.c", "arguments": clang_command(f"{stem}.c")})
    db.write_text(json.dumps(entries))
    return root / f"{stem}.c"


def cli_check(root: Path, stem: str) -> dict:
    """`xdp2tc check --format json` in its own process on the object clang builds from the
    workspace's source with the build database's command."""
    subprocess.run(clang_command(f"{stem}.c"), cwd=root, check=True)
    proc = subprocess.run(
        [sys.executable, "-m", "offload.cli", "check", "--format", "json", f"build/{stem}.o"],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(CORPUS.parent)},
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def pending_hint(d: lsp.Diagnostic) -> bool:
    return d.severity == lsp.DiagnosticSeverity.Hint and "pending" in d.message


@pytest.mark.asyncio
async def test_two_phase_publish_equals_the_cli_json(client: LanguageClient, tmp_path: Path):
    """flag_counter.c: its SYN path updates a counter map the program reads back (a
    data-plane-state drop: known from exploration, before any synthesis), and its other
    drop waits for the rules. The first publish has the settled finding and a pending hint;
    the final one replaces it: the first's findings all in it word for word, the pending
    hint gone, and the same findings as `check --format json` run on its own."""
    source = add_source(tmp_path, "flag_counter")
    uri = source.as_uri()
    seen = await publishes(client, uri, lambda: open_doc(client, source))
    assert [stage for stage, _ in seen] == ["first", "final"], seen
    first, final = seen[0][1], seen[1][1]
    hints = [d for d in first if pending_hint(d)]
    assert len(hints) == 1 and hints[0].range.start.line == 0 and "1 path " in hints[0].message, first
    assert not any(pending_hint(d) for d in final)
    settled = [d for d in first if not pending_hint(d)]
    assert settled and all(d in final for d in settled), (first, final)
    assert any(d.data["code"] == "data-plane-state" for d in settled)

    doc = cli_check(tmp_path, "flag_counter")
    rows = [f for f in doc["findings"] if f["location"] and Path(f["location"]["file"]).name == source.name]
    expected = sorted((f["location"]["line"] - 1, f["rule"], f["code"], f["detail"]) for f in rows)
    got = sorted((d.range.start.line, d.code, d.data["code"], d.data["detail"]) for d in final)
    assert got == expected, (got, expected)
    for f in rows:  # target, path, verdict and header fields as the JSON has them
        d = next(d for d in final if d.range.start.line == f["location"]["line"] - 1 and d.code == f["rule"])
        assert f"[{f['target']}] path {f['path']} {f['verdict']} " in d.message and f["fields"] in d.message
    # the hover of a finding's line shows the JSON's counterexample packet
    example = next(f for f in rows if f["counterexample"])
    text = await hover_at(client, uri, example["location"]["line"] - 1)
    assert example["counterexample"]["hex"][:128] in text


@pytest.mark.asyncio
async def test_a_save_cancels_the_analysis_it_makes_stale(client: LanguageClient, tmp_path: Path):
    """A save that comes while the rules of the previous version are being synthesized (after
    that version's first publish) cancels that work: the server says so, and the only final
    publish is the new version's (its findings one line lower)."""
    source = tmp_path / f"{STEM}.c"
    uri = source.as_uri()
    start = len(client.published)
    await publishes(client, uri, lambda: open_doc(client, source), until="first")
    source.write_text("\n" + source.read_text())
    seen = await publishes(client, uri, lambda: save_doc(client, source))
    messages = [m for m, _ in client.published[start:]]
    cancelled = [i for i, m in enumerate(messages) if m == f"xdp2tc: {source.name}: analysis cancelled (a newer save)"]
    finals = [i for i, m in enumerate(messages) if stage_of(m, uri) == "final"]
    assert len(cancelled) == 1 and len(finals) == 1 and cancelled[0] < finals[0], messages
    assert [stage for stage, _ in seen] == ["first", "final"]
    assert {d.range.start.line for d in seen[-1][1] if d.code == "XT001"} == lookup_lines(source)


@pytest.mark.parametrize("stem", ["atomics", "redirect_ifindex", "tx_mac_swap", "tailcall_variable"])
def test_settled_findings_are_the_final_ones(stem: str):
    """What the first publish shows before synthesis (editorwork.settled: side effects, a
    redirect device nothing names, a tail call through a variable index, a rewrite tc cannot
    redo) is, finding for finding, what `check` (its own synthesis) finds at the end."""
    from offload import editor, editorwork
    from tests.conftest import corpus_object

    sent = []
    editorwork.analyse(Path(corpus_object(stem)), editor.Config(), sent.append)
    assert [kind for kind, _ in sent] == [editor.EXPLORED, editor.DOCUMENTED, editor.COMPLETE]

    def rows(result):
        return [
            {k: v for k, v in f.items() if k not in ("fingerprint", "counterexample")} for f in result.check["findings"]
        ]

    first, final = rows(sent[0][1]), rows(sent[-1][1])
    assert first and all(f in final for f in first), (first, final)
