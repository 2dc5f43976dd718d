"""Software paths explained in a forked child while the parent synthesizes the rules.

`xdp2tc rules` says why each path stays in software (`reasons.path_reason`: the map and the
header fields of its key, ...) and prints its condition in header fields (`fields.decode`).
On the xdp-filter objects the two take 0.3-1.1 s. Both depend on the exploration and the
assumptions alone, while synthesis (1-2 s there) is what decides which paths stay in
software. On a machine with two cores they run at once:

    parent:  explore ─ fork ─ build the rule set ─ send the paths it needs ─ wait ─ print
    child:                └ explain candidate paths in path order, skip those not needed ┘

The candidates are the paths that may stay in software (all but plain passes: a pass with no
rewrite, cut or note goes to the host). Once the rule set is built the parent sends the
candidates it still needs (those no proved filter takes whole); the child skips the others
not yet explained, and the parent puts each reason and text it receives in path_reason's
memo (`reasons.remember`) and in `e.decoded`, decode's.

Why the output is the same. A reason and a decoded text are functions of the path's
condition, the environment and the assumptions: `fields.Decoder` asks each question in a z3
context made for it and works out the layout in another, so they do not depend on the queries
asked before, in which process or in which order (bench/rules_outputs.py: the scripts of the
corpus and external objects are byte-identical with and without). One caveat, the same as
for any two processes: a question z3 answers right at its resource limit may come out
otherwise after another history (fields._Session.solve); none does on those objects. The
parent only waits for the child, never races it, so what it holds after `install` does not
depend on timing.

Where fork is missing, another thread runs, or the child dies or sends something else, the
parent works out what it still needs itself, as without this module; `xdp2tc rules --jobs 1`
(the default on a machine with one CPU: `default_jobs`) asks for no child. The child never
writes to stdout or stderr and dies with its parent (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import ctypes
import os
import pickle
import select
import signal
import struct
import threading

from analyzer.classify import classes
from analyzer.exploration import Exploration
from analyzer.fields import decode

from .reasons import path_reason, remember
from .ruleset import RuleSet

#: prctl(2) option: the signal a child gets when its parent dies
PR_SET_PDEATHSIG = 1
#: A message on either pipe: a 4-byte big-endian length, then that many bytes of pickle.
_HEADER = struct.Struct(">I")


def default_jobs() -> int:
    """The processes `rules` uses by default: 2 where this process may run on two CPUs or
    more (the parent and the child above), else 1."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 2 if cpus > 1 else 1


def candidates(e: Exploration) -> list[int]:
    """The paths whose condition `rules` may print: every path but a plain pass (PASS, not
    truncated, no note, no packet write: reasons.account gives it pass-to-host unless the
    rule set names it) and those a time budget cut (no condition is printed for them)."""
    return [
        p.id
        for p in e.paths
        if not (p.verdict == "PASS" and not p.truncated and not p.notes and not p.writes) and not e.cut_by_budget(p)
    ]


def needed(e: Exploration, rs: RuleSet, every: bool = False) -> list[int]:
    """The candidates still in software once the rule set is built: all but those proved
    non-pass filters take whole (reasons.account's offloaded paths); with `every`, every
    path a time budget did not cut as well (`check` prints every path's condition)."""
    given = {p for paths, _ in rs.software for p in paths}
    taken = {
        p
        for r in rs.rules
        if r.outcome is not None and not r.outcome.is_pass and r.proved
        for p in r.paths
        if p not in given
    }
    if every:
        return [p.id for p in e.paths if not e.cut_by_budget(p)]
    return [p for p in candidates(e) if p not in taken]


class ExplainAhead:
    """A forked child explaining `candidates(e)` under `assumed` (the rule set's assumptions,
    synthesis.with_defaults) when `start` (see the module docstring): each path's reason and,
    with `texts`, its decoded condition; with `every`, the condition of every path a time
    budget did not cut too, plain passes included (`check`'s report has them all). `install`
    takes them; leaving the `with` block ends the child whatever happened. `pid` is None
    where no child runs (not started, no fork, another thread in this process, or it is
    over)."""

    def __init__(
        self, e: Exploration, assumed: tuple[str, ...], texts: bool = True, start: bool = True, every: bool = False
    ):
        self.e, self.assumed, self.map_classes, self.every = e, assumed, classes(e)[1], every
        self.software = set(candidates(e))
        self.pid: int | None = None
        self.reasons: dict[int, object] = {}
        self.texts: dict[int, str] = {}
        # fork copies only the calling thread: another one's locks would stay held in the child
        ids = [p.id for p in e.paths if p.id in self.software or (every and not e.cut_by_budget(p))]
        ids = ids if start and threading.active_count() == 1 else []
        if not hasattr(os, "fork") or not ids:
            return
        down_r, down_w = os.pipe()  # parent -> child: the paths needed
        up_r, up_w = os.pipe()  # child -> parent: (path id, reason, text) per path, then None
        try:
            pid = os.fork()
        except OSError:
            for fd in (down_r, down_w, up_r, up_w):
                os.close(fd)
            return
        if pid == 0:  # the child: never returns
            os.close(down_w)
            os.close(up_r)
            self._child(ids, texts or every, down_r, up_w)
        os.close(down_r)
        os.close(up_w)
        self.pid, self._down, self._up = pid, down_w, up_r

    def install(self, rs: RuleSet) -> None:
        """Send the child the paths the printed script needs, wait for what it works out of
        them, put that in path_reason's and decode's memos, and end the child. What it did
        not send is left to them."""
        if self.pid is None:
            return
        want = needed(self.e, rs, self.every)
        try:
            _send(self._down, want)
        except OSError:
            pass  # the child has decoded every candidate and is gone: its texts are in the pipe
        try:
            left = set(want)
            while left:
                item = _receive(self._up)
                if item is None:
                    break
                pid, reason, text = item
                if reason is not None:
                    self.reasons[pid] = reason
                if text is not None:
                    self.texts[pid] = text
                left.discard(pid)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError):
            pass  # the child is gone: decode works out what is missing
        finally:
            self.close()
        env = self.e.environment()
        for path in self.e.paths:
            if path.id not in want:
                continue
            if path.id in self.reasons:
                remember(self.e, path, self.map_classes, self.assumed, self.reasons[path.id])
            if path.id in self.texts:
                self.e.decoded[path.id] = (path, env, self.texts[path.id])

    def _child(self, ids: list[int], texts: bool, down: int, up: int) -> None:
        """The child's whole life: explain the paths `ids` in order, each sent as soon as
        it is done; once the parent's list of needed paths arrives, only those. Exits with
        os._exit (no atexit handler, no flush of buffers the parent also holds)."""
        status = 1
        try:
            try:
                ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            except (OSError, AttributeError):
                pass
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            want: set[int] | None = None
            by_id = {p.id: p for p in self.e.paths}
            for pid in ids:
                if want is None and select.select([down], [], [], 0)[0]:
                    got = _receive(down)
                    want = set(got) if got is not None else set()
                if want is not None and pid not in want:
                    continue
                path = by_id[pid]
                reason = path_reason(self.e, path, self.map_classes, self.assumed) if pid in self.software else None
                _send(up, (pid, reason, decode(self.e, path) if texts else None))
            _send(up, None)
            status = 0
        finally:
            os._exit(status)

    def __enter__(self) -> ExplainAhead:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """End the child (if any) and reap it."""
        if self.pid is None:
            return
        for fd in (self._down, self._up):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = None


def _send(fd: int, obj) -> None:
    data = pickle.dumps(obj)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read(fd: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise EOFError("the decoding child is gone")
        out += chunk
    return out


def _receive(fd: int):
    (n,) = _HEADER.unpack(_read(fd, _HEADER.size))
    return pickle.loads(_read(fd, n))
