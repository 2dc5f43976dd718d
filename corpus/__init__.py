"""The xdp2tc corpus of XDP test programs, as data for tests and benchmarks.

Dependency-free (standard library only).  Nothing here builds anything: run
``make -C corpus`` (and ``make -C corpus external``) first.

Layout::

    corpus/<stem>.c                    hand-written XDP programs
    corpus/include/xdp2tc_corpus.h     shared header (no conditional code)
    corpus/build/<toolchain>/<obj>.o   built objects, toolchain in TOOLCHAINS
    corpus/external/<package>/<name>.o eBPF objects from Debian packages

Every source starts with a machine-readable header comment::

    /* xdp2tc corpus: <stem>
     * What: ...
     * Seed: ...
     * Verdicts: DROP PASS
     * Offload: ...
     */

followed by optional directive lines (``// build: FLAGS``, ``// gcc: no REASON``,
``// gcc-build: FLAGS``, ``// nobtf: yes``, ``// variants: SUFFIX MACRO V...``,
``// load-<toolchain>: no REASON``).  Each ``if``/loop condition line ends with
``// expect: <class> [note]`` and each map definition line carries
``// expect-map: <map> <stats-only|control-plane|data-plane>``.

Main API: :data:`CORPUS_DIR`, :data:`BUILD_DIR`, :data:`EXTERNAL_DIR`,
:func:`sources`, :func:`built_objects`, :func:`external_objects`,
:func:`header`, :func:`line_expectations`, :func:`map_expectations`.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "CORPUS_DIR",
    "BUILD_DIR",
    "EXTERNAL_DIR",
    "INCLUDE_DIR",
    "TOOLCHAINS",
    "EXPECT_CLASSES",
    "MAP_CLASSES",
    "VERDICTS",
    "sources",
    "stems",
    "source_of",
    "directives",
    "variants",
    "toolchains_for",
    "expected_objects",
    "built_objects",
    "external_objects",
    "header",
    "line_expectations",
    "line_expectation_details",
    "map_expectations",
    "expected_load_failures",
]

CORPUS_DIR = Path(__file__).resolve().parent
BUILD_DIR = CORPUS_DIR / "build"
EXTERNAL_DIR = CORPUS_DIR / "external"
INCLUDE_DIR = CORPUS_DIR / "include"

#: Build toolchains, i.e. the sub-directories of BUILD_DIR.
TOOLCHAINS = ("clang", "clang-v4", "gcc", "nobtf")

#: Allowed ``// expect:`` classes (see README.md for their meaning).
EXPECT_CLASSES = frozenset(
    {
        "stateless",
        "constant",
        "stats-only",
        "control-plane-map",
        "data-plane-state",
        "ctx",
        "helper",
        "unsupported",
    }
)
#: Allowed ``// expect-map:`` classes.
MAP_CLASSES = frozenset({"stats-only", "control-plane", "data-plane"})
#: Verdict names used in the ``Verdicts:`` header field (XDP_ prefix dropped).
VERDICTS = frozenset({"ABORTED", "DROP", "PASS", "TX", "REDIRECT"})

_HEADER_FIELDS = ("What", "Seed", "Verdicts", "Offload")
_EXPECT_RE = re.compile(r"//\s*expect:\s*([A-Za-z-]+)\s*(.*?)\s*$")
_EXPECT_MAP_RE = re.compile(r"//\s*expect-map:\s*(\S+)\s+([A-Za-z-]+)\s*(.*?)\s*$")
_DIRECTIVE_RE = re.compile(r"^//\s*([a-z][a-z0-9-]*):\s*(.*?)\s*$")
_DIRECTIVE_NAMES = ("build", "gcc", "gcc-build", "nobtf", "variants")


def sources() -> list[Path]:
    """All corpus C sources (``corpus/*.c``), sorted by name."""
    return sorted(CORPUS_DIR.glob("*.c"))


def stems() -> list[str]:
    """Stems of :func:`sources` (file names without ``.c``)."""
    return [p.stem for p in sources()]


def source_of(name: str | Path) -> Path:
    """Source file for a stem, a variant stem (``nested_if_n3``) or an object path."""
    base = Path(name).name
    if base.endswith(".o") or base.endswith(".c"):
        base = base[:-2]
    cand = base
    while cand:
        p = CORPUS_DIR / f"{cand}.c"
        if p.is_file():
            return p
        if "_" not in cand:
            break
        cand = cand.rsplit("_", 1)[0]
    raise KeyError(f"no corpus source for {name!r}")


def _lines(stem: str) -> list[str]:
    return source_of(stem).read_text().splitlines()


def directives(stem: str) -> dict[str, str]:
    """Build/load directives of a source: ``{"build": "-mcpu=v4", "load-gcc": "no ...", ...}``.

    Only the first occurrence of each directive counts (as in the Makefile).
    """
    out: dict[str, str] = {}
    for line in _lines(stem):
        m = _DIRECTIVE_RE.match(line)
        if not m:
            continue
        key, val = m.groups()
        if (key in _DIRECTIVE_NAMES or key.startswith("load-")) and key not in out:
            out[key] = val
    return out


def variants(stem: str) -> list[tuple[str, list[str]]]:
    """Object stems built from a source with their extra ``-D`` flags.

    ``nested_if`` -> ``[("nested_if_n1", ["-DNESTED=1"]), ...]``; a source without
    ``// variants:`` gives ``[(stem, [])]``.
    """
    src = source_of(stem).stem
    spec = directives(src).get("variants", "").split()
    if not spec:
        return [(src, [])]
    suffix, macro, values = spec[0], spec[1], spec[2:]
    return [(f"{src}_{suffix}{v}", [f"-D{macro}={v}"]) for v in values]


def toolchains_for(stem: str) -> list[str]:
    """Toolchains the Makefile builds this source with."""
    d = directives(stem)
    tcs = ["clang", "clang-v4"]
    if d.get("gcc", "").split()[:1] != ["no"]:
        tcs.append("gcc")
    if d.get("nobtf", "").split()[:1] == ["yes"]:
        tcs.append("nobtf")
    return tcs


def expected_objects(toolchain: str | None = None) -> list[Path]:
    """Objects ``make -C corpus`` produces (whether or not they exist yet)."""
    tcs = TOOLCHAINS if toolchain is None else (toolchain,)
    out = []
    for tc in tcs:
        if tc not in TOOLCHAINS:
            raise ValueError(f"unknown toolchain {tc!r}")
        for src in sources():
            if tc in toolchains_for(src.stem):
                out += [BUILD_DIR / tc / f"{obj}.o" for obj, _ in variants(src.stem)]
    return sorted(out)


def built_objects(toolchain: str | None = None) -> list[Path]:
    """Existing built objects, sorted; stale files not in the build plan are skipped."""
    return [p for p in expected_objects(toolchain) if p.is_file()]


def external_objects() -> list[Path]:
    """eBPF objects fetched by ``make -C corpus external``, sorted (empty if not fetched)."""
    return sorted(EXTERNAL_DIR.glob("*/*.o"))


def header(stem: str) -> dict:
    """Parse the header comment.

    Returns ``{"stem", "what", "seed", "verdicts", "offload"}``; ``verdicts`` is a
    sorted list of verdict names (e.g. ``["DROP", "PASS"]``), ``seed`` is ``None``
    for "none".  Raises ValueError if the header is malformed.
    """
    src = source_of(stem)
    lines = src.read_text().splitlines()
    if not lines or lines[0].strip() != f"/* xdp2tc corpus: {src.stem}":
        raise ValueError(f"{src.name}: first line must be '/* xdp2tc corpus: {src.stem}'")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "*/":
            break
        m = re.match(r"^\s*\*\s*(\w+):\s*(.*?)\s*$", line)
        if not m or m.group(1) not in _HEADER_FIELDS:
            raise ValueError(f"{src.name}: unexpected header line {line!r}")
        fields[m.group(1)] = m.group(2)
    else:
        raise ValueError(f"{src.name}: unterminated header comment")
    missing = [f for f in _HEADER_FIELDS if f not in fields]
    if missing:
        raise ValueError(f"{src.name}: header lacks {missing}")
    verdicts = sorted(fields["Verdicts"].split())
    bad = set(verdicts) - VERDICTS
    if bad:
        raise ValueError(f"{src.name}: unknown verdicts {sorted(bad)}")
    seed = fields["Seed"]
    return {
        "stem": src.stem,
        "what": fields["What"],
        "seed": None if seed.lower() == "none" else seed,
        "verdicts": verdicts,
        "offload": fields["Offload"],
    }


def line_expectation_details(stem: str) -> dict[int, tuple[str, str]]:
    """``{line: (class, note)}`` for every ``// expect:`` comment (1-based lines)."""
    out = {}
    for no, line in enumerate(_lines(stem), start=1):
        m = _EXPECT_RE.search(line)
        if m:
            cls, note = m.group(1), m.group(2)
            if cls not in EXPECT_CLASSES:
                raise ValueError(f"{source_of(stem).name}:{no}: unknown class {cls!r}")
            out[no] = (cls, note.strip("() "))
    return out


def line_expectations(stem: str) -> dict[int, str]:
    """``{source line number (1-based): class}`` from the ``// expect:`` comments."""
    return {no: cls for no, (cls, _) in line_expectation_details(stem).items()}


def map_expectations(stem: str) -> dict[str, str]:
    """``{map name: "stats-only" | "control-plane" | "data-plane"}``.

    Global-variable maps are named by their section: ``.rodata``, ``.data``, ``.bss``.
    """
    out = {}
    for no, line in enumerate(_lines(stem), start=1):
        m = _EXPECT_MAP_RE.search(line)
        if m:
            name, cls = m.group(1), m.group(2)
            if cls not in MAP_CLASSES:
                raise ValueError(f"{source_of(stem).name}:{no}: unknown map class {cls!r}")
            out[name] = cls
    return out


def expected_load_failures(stem: str) -> dict[str, str]:
    """``{toolchain: reason}`` for objects known not to pass the verifier."""
    out = {}
    for key, val in directives(stem).items():
        if key.startswith("load-") and val.split()[:1] == ["no"]:
            out[key[len("load-") :]] = val[2:].strip()
    return out


def overview() -> None:
    """Print one line per source: verdicts, annotated conditions, maps, toolchains.

    ``python -c 'import corpus; corpus.overview()'`` (from the repository root).
    """
    for s in stems():
        h = header(s)
        print(
            f"{s:24} {' '.join(h['verdicts']):16} {len(line_expectations(s)):3} conds "
            f"maps={map_expectations(s) or '-'} tc={','.join(toolchains_for(s))}"
        )
