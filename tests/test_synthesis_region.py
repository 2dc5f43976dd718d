"""`Synthesizer.region` (rules/synthesis.py, issue 14): while `prove` works on a block, the
block's formula it built is handed to the shield loop (`shield`, `widen`, `_good_check`)
instead of being built again each round (15-25 ms a build for or_stress_k48's block).

It must change nothing the loop finds: the same shields and the same outcome as when every
caller builds the formula itself. or_stress_k2's DROP block goes through all MAX_SHIELDS
rounds without an assumption (IPv4 options move the ports flower reads), so every caller
of the formula is exercised: with the options-twin proof switched off, which would give the
block up before its first shield (rules/optiontwins.py, tests/test_optiontwins.py).
"""

from __future__ import annotations

import corpus
from analyzer.exploration import Options
from analyzer.explore import explore
from lifter.program import load_object
from rules import synthesis
from rules.synthesis import MAX_SHIELDS, Block, Outcome, Synthesizer
from tests.conftest import need_object


def _block_proved(monkeypatch, memo: bool) -> tuple[Block, int]:
    """or_stress_k2's first target block after `prove`, and how often its formula was built
    while prove ran (`memo` off: `region` builds it on every call, as before)."""
    obj = load_object(need_object(corpus.BUILD_DIR / "clang" / "or_stress_k2.o"))
    e = explore(obj, obj.programs[0], Options(witnesses=True))
    s = Synthesizer(e, (), {})
    p = next(p for p in e.paths if isinstance(o := s.outcomes[p.id], Outcome) and not o.is_pass)
    b = s.extract_all(p, s.outcomes[p.id])[0]
    built = []
    real = Block.formula

    def formula(self, d):
        if self is b:
            built.append(1)
        return real(self, d)

    monkeypatch.setattr(Block, "formula", formula)
    monkeypatch.setattr(synthesis, "no_shield_helps", lambda *a: False)
    if not memo:
        monkeypatch.setattr(Synthesizer, "region", lambda self, block: block.formula(self.d))
    s.prove(b, [])
    monkeypatch.undo()
    return b, len(built)


def test_region_built_once_same_shields(monkeypatch):
    once, built_once = _block_proved(monkeypatch, memo=True)
    every, built_every = _block_proved(monkeypatch, memo=False)
    assert not once.proved and once.why is not None
    assert len(once.refused) == 1 and sum(once.refused.values()) == MAX_SHIELDS, "every round made a shield"
    assert built_once == 1
    assert built_every > MAX_SHIELDS, "without the memo each round builds it again"
    found = [(b.shields, b.refused, b.proved, b.why) for b in (once, every)]
    assert found[0] == found[1]
