"""`rules` prints the same script whatever Python's hash seed.

Python orders a set of strings (the names in a z3 term) by a per-process hash; where such
an order decided in which order z3 terms were built, z3 answered with other models and
`rules` printed other counterexample packets (on main before this test, xdpfilt_dny_tcp
printed 4 different outputs for PYTHONHASHSEED=0..3, with the same filters). The oracle
is the program run twice: two processes with different seeds must print the same bytes
and exit with the same code.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, external_objects


def _rules(obj: str, seed: str) -> tuple[int, str]:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    proc = subprocess.run(
        [sys.executable, "-m", "offload.cli", "rules", obj, "--dev", "eth0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc.returncode, proc.stdout


@pytest.mark.parametrize("stem", ["xdpfilt_dny_tcp"])
def test_rules_output_does_not_depend_on_hash_seed(stem):
    objs = [p for p in external_objects() if p.stem == stem]
    assert objs, f"{stem}.o is not among the external objects"
    first = _rules(str(objs[0]), "0")
    second = _rules(str(objs[0]), "1")
    assert first[0] == second[0]
    assert first[1], "rules printed nothing"
    assert first[1] == second[1]
