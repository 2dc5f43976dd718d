"""Compare two `rules` outputs (saved scripts, or saved outputs: `exit N`, stdout, `--stderr--`, stderr) on what
the proofs decide, not on what z3 happens to pick.

What z3 picks - a counterexample's bytes and decoded fields, the pass path that frame takes,
the rendering of a decoded path condition, a map key term - depends on the z3 context's
history (term ids, earlier queries): the same code run with another import order prints other
frames, and so does a change that only builds an identical term once instead of twice. This
compares the rest line by line: every filter line, proof label, reason code and detail,
the frame's kind and classes, and the suggestions.

    .venv/bin/python bench/rules_normalised.py BEFORE AFTER   (exit 1 when they differ)
"""

from __future__ import annotations

import difflib
import re
import sys

#: (pattern, replacement): the parts of a comment line that are z3's choice.
CHOICES = (
    (r" when .*$", " when <condition>"),
    (r"(differs|witness) packet \(\d+ bytes\): [0-9a-f]+", r"\1 packet <bytes>"),
    (r"map (\S+) keyed by .*$", r"map \1 keyed by <term>"),
    (r"program returns (\S+) \(path \d+\)", r"program returns \1 (path <n>)"),
)
#: A decoded frame line: its fields are z3's choice, its classes ([IP options, ...]) are kept.
FIELDS = re.compile(r"(# path \d+ (?:differs|witness) packet: ).*?((?:\[[^\]]*\])?: (?:flower sees|a packet).*)$")


def normalised(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        for pattern, repl in CHOICES:
            line = re.sub(pattern, repl, line)
        m = FIELDS.match(line)
        out.append(m.group(1) + "<fields> " + m.group(2) if m else line)
    return out


def main() -> int:
    a, b = (normalised(open(p).read()) for p in sys.argv[1:3])
    diff = list(difflib.unified_diff(a, b, sys.argv[1], sys.argv[2], lineterm="", n=0))
    print("\n".join(diff) if diff else "same (up to z3's choices)")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
