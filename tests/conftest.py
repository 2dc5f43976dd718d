"""Shared test policy and fixtures.

Capabilities (a tool such as llvm-objdump-19, root for the kernel, Debian's external
objects): outside CI a missing one skips the test with the reason printed; under CI=true it
fails, because CI here has every capability and a skip would hide a broken set-up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import corpus

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
LLVM_OBJDUMP = os.environ.get("LLVM_OBJDUMP", "llvm-objdump-19")
CLANG = os.environ.get("CLANG", "clang-19")


def require(condition: bool, reason: str) -> None:
    """Skip (outside CI) or fail (under CI=true) when a capability is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"missing capability under CI: {reason}")
    print(f"SKIP: {reason}")
    pytest.skip(reason)


def require_tool(name: str) -> str:
    path = shutil.which(name)
    require(path is not None, f"{name} is not installed (make setup installs it)")
    return path


def require_kernel() -> None:
    """Root with a bpffs-capable kernel: what loading programs needs."""
    require(os.geteuid() == 0, "kernel tests need root (CAP_BPF, CAP_NET_ADMIN)")
    require_tool("bpftool")


def corpus_object(stem: str, toolchain: str = "clang") -> str:
    """A built corpus object's path (missing: a skip, or a failure under CI)."""
    path = corpus.BUILD_DIR / toolchain / f"{stem}.o"
    require(path.exists(), f"{path} is not built (run `make corpus`)")
    return str(path)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`xdp2tc ARGV` in this process: exit code, stdout, stderr."""
    from offload.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def corpus_objects() -> list[Path]:
    objs = corpus.built_objects()
    require(bool(objs), "corpus is not built (run `make corpus`)")
    return objs


def external_objects() -> list[Path]:
    objs = corpus.external_objects()
    require(bool(objs), "external objects are missing (run `make external`)")
    return objs


def all_objects() -> list[Path]:
    """Every object the corpus Makefile plans (every toolchain, built or not: a missing one
    is a failing test under CI, never a shorter list) plus Debian's objects."""
    return corpus.expected_objects() + sorted(corpus.external_objects())


def object_params() -> list:
    """all_objects() as pytest params (ids = relative paths); without Debian's objects one
    `no-external-objects` param, whose test reports them missing."""
    params = [pytest.param(p, id=str(p.relative_to(corpus.CORPUS_DIR))) for p in all_objects()]
    if not corpus.external_objects():  # collection must not fail; the test body reports it
        params.append(pytest.param(None, id="no-external-objects"))
    return params


def need_object(path: Path | None) -> Path:
    """The object, or skip (fail under CI) when it is not built / not fetched."""
    if path is None:
        external_objects()
    require(path.is_file(), f"{path} is not built (run `make corpus`)")
    return path


def explored_with_witnesses(path: Path):
    """The exploration of the object's first program with the paths' witnesses kept, as
    `rules` explores it (the object built, or skip / fail under CI as need_object)."""
    from analyzer.exploration import Options
    from analyzer.explore import explore
    from lifter.program import load_object

    obj = load_object(need_object(path))
    return explore(obj, obj.programs[0], Options(witnesses=True))


def decoded_texts(e, expand_keys: bool = True) -> list[str]:
    """Per path of exploration `e`: its decoded condition and each map key's fields, as
    `rules` prints them (rules/reasons.py reads the key against the simplified condition),
    each worked out from scratch (analyzer.fields.forget() first: no answer kept from
    another rendering). `expand_keys`: the keys over inputs, as reasons has them."""
    import z3

    import analyzer.fields as fields
    from analyzer.fields import Decoder

    out = []
    for p in e.paths:
        fields.forget()
        decoder = Decoder(e.environment(), None, e.summaries)
        out.append(decoder.render(e.condition(p), witness=p.witness))
        cond = z3.simplify(e.condition(p))
        for m in sorted({a.map for a in p.accesses}):
            key = next(a.key for a in p.accesses if a.map == m)
            if key is not None:
                out.append(decoder.key_fields(e.expand(key) if expand_keys else key, cond, witness=p.witness))
    return out


def assemble(source: str, tmp_path: Path, name: str = "asm", mcpu: str = "v4") -> Path:
    """Assemble BPF assembly text with clang into an object under tmp_path."""
    clang = require_tool(CLANG)
    src = tmp_path / f"{name}.s"
    src.write_text(source)
    out = tmp_path / f"{name}.o"
    subprocess.run(
        [clang, "-target", "bpf", f"-mcpu={mcpu}", "-c", str(src), "-o", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


def objdump(path: Path) -> str:
    """llvm-objdump's disassembly (the decoding oracle), with relocations, v4 syntax."""
    tool = require_tool(LLVM_OBJDUMP)
    return subprocess.run([tool, "-dr", "--mcpu=v4", str(path)], check=True, capture_output=True, text=True).stdout


# ------------------------------------------------------------- kernel agreement summary

_KERNEL_CHECKS: list[tuple[str, int]] = []


@pytest.fixture
def kernel_checks() -> list[tuple[str, int]]:
    """Where test_kernel_agrees records (object, packets checked against the kernel)."""
    return _KERNEL_CHECKS


def pytest_terminal_summary(terminalreporter):
    """The issue asks for the number of packets checked: printed once per run."""
    if _KERNEL_CHECKS:
        total = sum(n for _, n in _KERNEL_CHECKS)
        terminalreporter.write_line(
            f"kernel agreement: {total} packets checked against BPF_PROG_TEST_RUN over "
            f"{len(_KERNEL_CHECKS)} objects (every one agreed, or its test failed)"
        )
