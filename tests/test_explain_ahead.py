"""rules/ahead.py: the software paths' reasons and conditions worked out by a forked child
while the parent builds the rules (`xdp2tc rules --jobs 2`).

The reference is the one-process command (`--jobs 1`), which every other rules test checks:
the child's reasons and texts must be what it prints, the scripts byte-identical, and a child
that dies must leave the parent to work them out itself. Each case runs in a fresh interpreter
(a forked child of the test process would copy pytest's whole state)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import corpus_object, require

import corpus

#: xdp-filter's Ethernet deny list (map-dependent and atypical-only paths, a counterexample
#: with map entries) and a corpus program with filters and software paths side by side
OBJECTS = ("external:libxdp1/xdpfilt_dny_eth.o", "thesis_static_rules")


def _object(name: str) -> str:
    if name.startswith("external:"):
        path = corpus.EXTERNAL_DIR / name.removeprefix("external:")
        require(path.exists(), f"{path} is missing (run `make external`)")
        return str(path)
    return corpus_object(name)


def _cli(*argv: str, codes: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "offload.cli", *argv], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode in codes, done.stderr
    return done.stdout


def _python(code: str) -> dict:
    """Run `code` in a fresh interpreter; it prints one JSON document last."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


#: explores OBJ and builds its rule set as `rules --dev eth0` does, with an ExplainAhead
#: started in between, then prints the script with the decoder disabled: the parent may
#: render no condition and no map key itself; KILL: the child is killed before the rule set
#: is built (and the decoder is left alone)
AHEAD = """
    import json, os, signal, dataclasses
    from lifter.program import load_object
    from analyzer.explore import Options, explore
    from rules import ruleset
    from rules.ahead import ExplainAhead, needed
    from rules.output import tc_script
    from rules.synthesis import with_defaults
    obj = load_object(OBJ)
    prog = [p for p in obj.programs if p.is_xdp][0]
    e = explore(obj, prog, Options(witnesses=True))
    with ExplainAhead(e, with_defaults(()), texts=True) as ahead:
        child = ahead.pid
        if KILL:
            os.kill(child, signal.SIGKILL)
        rs = ruleset.build(e, (), {}, 512)
        ahead.install(rs)
        after = ahead.pid
    if not KILL:
        import analyzer.fields as fields
        def refuse(*args, **kwargs):
            raise AssertionError("the parent decoded a condition or a map key itself")
        fields.Decoder.render = fields.Decoder.key_fields = refuse
    script = tc_script(e, rs, "eth0", "skip_sw")
    print(json.dumps({
        "child": child, "after": after, "needed": needed(e, rs),
        "reasons": {p: [r.code, r.detail] for p, r in ahead.reasons.items()},
        "texts": ahead.texts, "script": script,
    }))
"""


def _ahead(obj: str, kill: bool = False) -> dict:
    return _python(f"OBJ = {obj!r}\nKILL = {kill!r}\n" + textwrap.dedent(AHEAD))


@pytest.mark.parametrize("name", OBJECTS)
def test_scripts_and_json_are_the_same_with_and_without_the_child(name):
    obj = _object(name)
    for fmt in ("tc", "json"):
        alone = _cli("rules", obj, "--dev", "eth0", "--format", fmt, "--jobs", "1")
        assert _cli("rules", obj, "--dev", "eth0", "--format", fmt, "--jobs", "2") == alone


@pytest.mark.parametrize("name", OBJECTS)
def test_check_reports_are_the_same_with_and_without_the_child(name):
    """`check` has the child decode every path (plain passes too: its report has them all)."""
    obj = _object(name)
    alone = {fmt: _cli("check", obj, "--format", fmt, "--jobs", "1", codes=(0, 1)) for fmt in ("json", "sarif")}
    for fmt, report in alone.items():
        assert _cli("check", obj, "--format", fmt, "--jobs", "2", codes=(0, 1)) == report
    doc = json.loads(alone["json"])
    assert all(p["fields"] for prog in doc["programs"] for p in prog["paths"])  # every path decoded
    # and the parent, once the child's work is in, decodes no condition and no map key itself
    got = _python(
        f"""
        import json
        import analyzer.fields as fields
        from analyzer.explore import Options
        from offload import check
        from rules.ahead import ExplainAhead
        install = ExplainAhead.install
        def refuse(*args, **kwargs):
            raise AssertionError("the parent decoded a condition or a map key itself")
        def installed(self, rs):
            install(self, rs)
            fields.Decoder.render = fields.Decoder.key_fields = refuse
        ExplainAhead.install = installed
        report = check.Report([check.TARGETS[n] for n in check.DEFAULT_TARGETS])
        check.check_object({obj!r}, report, Options(), None, (), 512, jobs=2)
        print(json.dumps(check.json_doc(report, False, ["any"], None)["programs"]))
        """
    )
    assert got == doc["programs"]


@pytest.mark.parametrize("name", OBJECTS)
def test_the_child_sends_the_reasons_and_conditions_the_one_process_command_prints(name):
    obj = _object(name)
    got = _ahead(obj)
    assert got["child"] is not None and got["after"] is None  # it ran, and it was reaped
    assert got["needed"], "no software path: nothing was checked"
    doc = json.loads(_cli("rules", obj, "--dev", "eth0", "--format", "json", "--jobs", "1"))
    fates = {f["path"]: f for f in doc["fates"]}
    script = _cli("rules", obj, "--dev", "eth0", "--jobs", "1")
    for p in got["needed"]:
        code, detail = got["reasons"][str(p)]
        if fates[p]["code"] == code:  # a rule set's own reason goes first where it has one
            assert fates[p]["detail"] == detail
        line = f"# path {p} {fates[p]['verdict']} stays in software ("
        printed = [x for x in script.splitlines() if x.startswith(line)]
        if printed and " when " in printed[0]:
            assert printed[0].endswith(" when " + " ".join(got["texts"][str(p)].split()))
    assert any(" when " in x for x in script.splitlines()), "no condition printed: nothing was compared"
    assert got["script"] == script  # printed by the parent without decoding anything itself


def test_a_dead_child_leaves_the_work_to_the_parent():
    obj = _object(OBJECTS[0])
    got = _ahead(obj, kill=True)
    assert got["reasons"] == {} and got["texts"] == {} and got["after"] is None
    assert got["script"] == _cli("rules", obj, "--dev", "eth0", "--jobs", "1")


def test_no_child_with_another_thread_or_one_job():
    obj = _object(OBJECTS[0])
    got = _python(
        f"""
        import json, threading
        from lifter.program import load_object
        from analyzer.explore import Options, explore
        from rules.ahead import ExplainAhead
        obj = load_object({obj!r})
        e = explore(obj, [p for p in obj.programs if p.is_xdp][0], Options(witnesses=True))
        stop = threading.Event()
        t = threading.Thread(target=stop.wait)
        t.start()
        with ExplainAhead(e, ()) as a:
            threaded = a.pid
        stop.set()
        t.join()
        with ExplainAhead(e, (), start=False) as a:
            one = a.pid
        with ExplainAhead(e, ()) as a:
            alone = a.pid
        print(json.dumps([threaded, one, alone]))
        """
    )
    assert got[0] is None and got[1] is None and got[2] is not None
