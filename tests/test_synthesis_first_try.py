"""`_key_values`' question "does the key take every value?" (rules/synthesis.py, issue 14).

On a path that reads maps the claim around the model's map contents is asked within
FIRST_RLIMIT, then the claims with the maps as loaded, then the first claim again within
SHORTCUT_RLIMIT if nothing answered. On xdp-filter's allow-all program the model's claim
about src_mac is one z3 does not settle within 200,000 (60-90 ms) while the loaded contents
answer it in under 1 ms: it must now be answered so.

A claim z3 does not settle at all is not asked for its solutions either (they ran out of
the limit as well: xdp-filter's cvlan_ethtype, 30-70 ms): the path's solver and
`_near_values` find the values.

Either way the blocks must be those of the old order, or of plain enumeration.

Whether z3 settles a claim within a limit depends on the terms the process built before
(hash seeds, earlier tests): a CI run found cvlan_ethtype settled. So the tests make the
claims run out (`give_up`: their checks answer unknown without z3) instead of counting on
z3 to run out, and check what `_key_values` does then.
"""

from __future__ import annotations

import z3

import corpus
from rules import synthesis
from tests.conftest import explored_with_witnesses
from tests.test_synthesis_keys import extracted_blocks


def _exploration(stem: str):
    return explored_with_witnesses(corpus.EXTERNAL_DIR / "libxdp1" / f"{stem}.o")


def _is_claim(constraints) -> bool:
    """Whether a solver is made for "does the key take every value?": Not of a formula over
    `_around`'s fresh variables."""
    return len(constraints) == 1 and z3.is_not(constraints[0]) and "every!" in constraints[0].sexpr()


def _recorded(stem: str, monkeypatch, give_up=lambda rlimit, first: False) -> tuple[dict, list]:
    """The extracted blocks, and per `_key_values` call its answer and the (rlimit, result)
    of every check of a `synthesis.solver` asked meanwhile, and whether it checked a claim
    (`_is_claim`). A claim's check for which
    `give_up(rlimit, whether it is the call's first check)` holds answers unknown, as a
    claim z3 runs out on."""
    asked: list[tuple[list[tuple[int | None, z3.CheckSatResult, bool]], list[int] | None]] = []
    real_solver, real_key_values = synthesis.solver, synthesis._key_values

    def solver(*constraints, rlimit=None, **kw):
        s = real_solver(*constraints, rlimit=rlimit, **kw)
        check, claim = s.check, _is_claim(constraints)

        def recorded(*a):
            first = bool(asked) and not asked[-1][0]
            r = z3.unknown if claim and give_up(rlimit, first) else check(*a)
            if asked:
                asked[-1][0].append((rlimit, r, claim))
            return r

        s.check = recorded
        return s

    def key_values(*a, **kw):
        asked.append(([], None))
        out = real_key_values(*a, **kw)
        asked[-1] = (asked[-1][0], out)
        return out

    monkeypatch.setattr(synthesis, "solver", solver)
    monkeypatch.setattr(synthesis, "_key_values", key_values)
    blocks = extracted_blocks(_exploration(stem))
    monkeypatch.setattr(synthesis, "solver", real_solver)
    monkeypatch.setattr(synthesis, "_key_values", real_key_values)
    return blocks, asked


def test_loaded_contents_answer_first(monkeypatch):
    # the model's claim runs out within FIRST_RLIMIT (src_mac's does, 60-90 ms, in most runs)
    first, asked = _recorded(
        "xdpfilt_alw_all", monkeypatch, give_up=lambda rlimit, first: first and rlimit == synthesis.FIRST_RLIMIT
    )
    assert any(first.values()), "the program has target paths with blocks"
    assert synthesis.FIRST_RLIMIT < synthesis.SHORTCUT_RLIMIT
    early = [
        checks
        for checks, out in asked
        if out is None
        and checks[0] == (synthesis.FIRST_RLIMIT, z3.unknown, True)
        and all(r != z3.unknown for _, r, _ in checks[1:])
    ]
    assert early, "some key takes every value by the loaded contents after the model's claim ran out"
    monkeypatch.setattr(synthesis, "FIRST_RLIMIT", synthesis.SHORTCUT_RLIMIT)  # the old order
    assert first == extracted_blocks(_exploration("xdpfilt_alw_all"))


def test_unsettled_claim_is_not_enumerated(monkeypatch):
    # no claim is settled, whatever its limit (cvlan_ethtype's runs out in most runs)
    blocks, asked = _recorded("xdpfilt_alw_tcp", monkeypatch, give_up=lambda rlimit, first: True)
    assert any(blocks.values()), "the program has target paths with blocks"
    unsettled = [checks for checks, _ in asked if checks and checks[0][2]]
    assert unsettled, "some key's claim was asked"
    for checks in unsettled:  # the claim's solutions (its own solver, SHORTCUT_RLIMIT) not asked
        assert all(claim or limit != synthesis.SHORTCUT_RLIMIT for limit, _, claim in checks), checks
    # the blocks of plain enumeration (both shortcuts off, as test_synthesis_keys)
    monkeypatch.setattr(synthesis, "_around", lambda s, model, term, maps=None: False)
    assert blocks == extracted_blocks(_exploration("xdpfilt_alw_tcp"))
