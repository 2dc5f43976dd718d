"""Kernel confirmation: every prediction of the explorer checked against the running kernel.

For each path z3 builds a witness: a packet, the xdp_md fields and the map entries the
path looks up (from the model of the path condition). The object is loaded once
(analyzer/kernel/), the entries are written, the packet is run with BPF_PROG_TEST_RUN,
and the kernel's return code and output packet are compared with the path's verdict and
rewritten bytes evaluated in the same model. Then random packets (mutated witnesses and
noise) are run with empty maps, and for each the one path whose condition holds is looked
up by evaluating every path condition on the concrete input.

What the test run imposes (see analyzer/kernel/): packets of 14..3520 bytes, ingress on an
existing device's queue 0, no fragments, .rodata fixed at load (a different value means a
reload). A path that needs something else is reported as not witnessable, with the reason.
Paths whose outcome depends on helper results (time, random numbers) or on values xdp2tc
does not model are checked for consistency: the kernel's answer must be the answer of
some path that the concrete input allows.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import z3

from lifter.maps import is_global_data_section

from . import kernel
from .classify import classes
from .entries import looked_up
from .exploration import INVALID, UNKNOWN, VERDICTS, Exploration, Path
from .symbolic import FREE_PREFIXES, PACKET, PACKET_FRAGS, PACKET_LEN, ctx_field, map_val, symbols
from .xdp import ETH_HLEN, MAX_LINEAR_PACKET

#: Map kinds whose entries a witness cannot create (they need sockets, CPUs...).
UNFILLABLE = {
    "xskmap": "an AF_XDP socket",
    "cpumap": "a CPU map entry",
    "sockmap": "a socket",
    "sockhash": "a socket",
    "array_of_maps": "an inner map",
    "hash_of_maps": "an inner map",
}
#: Length limits the kernel's test run imposes.
MIN_TEST_LEN, MAX_TEST_LEN = ETH_HLEN, MAX_LINEAR_PACKET


@dataclass
class Mismatch:
    path: int | None
    kind: str  # "witness" | "random"
    packet: bytes
    expected: str
    got: str

    def __str__(self) -> str:
        where = f"path #{self.path}" if self.path is not None else "random packet"
        return f"{where}: expected {self.expected}, kernel gave {self.got} (packet {self.packet.hex()})"


@dataclass
class VerifyReport:
    program: str
    witnesses: int = 0  # paths run with their witness packet
    consistent: int = 0  # of which: nondeterministic paths where the kernel's answer was allowed
    random: int = 0  # random packets run
    unwitnessable: list[tuple[int, str]] = field(default_factory=list)  # (path, why)
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def packets(self) -> int:
        return self.witnesses + self.random


def existing_ifindexes() -> list[int]:
    """Devices of this network namespace (a test run may only name those)."""
    out = []
    for name in os.listdir("/sys/class/net"):
        try:
            out.append(int(open(f"/sys/class/net/{name}/ifindex").read()))
        except (OSError, ValueError):
            continue
    return sorted(out) or [1]


def short_model(constraints: list[z3.BoolRef]) -> z3.ModelRef | None:
    """A model of `constraints` with the shortest packet bound that allows one (64, 256 bytes,
    then any): short witnesses are faster to build, run and read."""
    solver = z3.Solver()
    solver.add(*constraints)
    for limit in (64, 256, None):
        solver.push()
        if limit is not None:
            solver.add(z3.ULE(PACKET_LEN, limit))
        if solver.check() == z3.sat:
            model = solver.model()
            solver.pop()
            return model
        solver.pop()
    return None


def packet_of(ev) -> bytes:
    """The packet a model holds (`ev` evaluates a term in it, completing the model)."""
    n = ev(PACKET_LEN).as_long()
    return bytes(ev(z3.Select(PACKET, i)).as_long() for i in range(n))


def witness_packet(e: Exploration, path: Path) -> bytes | None:
    """A packet that takes `path` (maps and helpers as the model chooses), or None when z3
    finds none: the counterexample the editor shows for a decision (offload/editor.py)."""
    model = short_model([*e.base_constraints(), e.condition(path)])
    if model is None:
        return None
    return packet_of(lambda x: model.eval(x, model_completion=True))


class Verifier:
    def __init__(self, e: Exploration, loaded: kernel.LoadedObject, seed: int = 0):
        self.e = e
        self.obj = e.obj
        self.loaded = loaded
        self.rng = random.Random(seed)
        self.maps = {m.name: m for m in e.obj.maps}
        self.ifindexes = existing_ifindexes()
        self.env = self._environment()
        self.report = VerifyReport(e.program.name)
        self.conditions = [e.condition(p) for p in e.paths]
        self._expanded: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}  # id -> (expanded, term)
        self.seeds: list[bytes] = []  # witness packets, mutated by the random phase
        self._touched: set[tuple[str, bytes]] = set()  # map entries witnesses wrote
        self.nondeterministic = [self._nondeterministic(p, c) for p, c in zip(e.paths, self.conditions)]

    def _environment(self) -> list[z3.BoolRef]:
        max_len = min(self.e.options.max_len, MAX_TEST_LEN)
        ifindex = ctx_field("ingress_ifindex")
        env = [
            z3.UGE(PACKET_LEN, MIN_TEST_LEN),
            z3.ULE(PACKET_LEN, max_len),
            PACKET_FRAGS == 0,
            z3.Or(*[ifindex == i for i in self.ifindexes]),
            ctx_field("rx_queue_index") == 0,
            ctx_field("egress_ifindex") == 0,
        ]
        # .rodata is frozen at load: witnesses use the values it was loaded with.
        for mdef in self.obj.maps:
            if is_global_data_section(mdef.section) and mdef.read_only and mdef.name in self.e.read_maps:
                bits = 8 * (mdef.key_size or 4)
                data = mdef.initial or bytes(mdef.value_size)
                val = map_val(mdef.name, bits)
                env += [val(z3.BitVecVal(0, bits), z3.BitVecVal(i, 32)) == b for i, b in enumerate(data)]
        return env

    def _nondeterministic(self, path: Path, cond: z3.BoolRef) -> bool:
        names = symbols(cond) | (symbols(path.retval) if path.retval is not None else frozenset())
        return bool(path.notes) or any(n.startswith(FREE_PREFIXES) for n in names)

    # --- witnesses ------------------------------------------------------------------

    def run_witnesses(self) -> None:
        for path, cond in zip(self.e.paths, self.conditions):
            if path.verdict == UNKNOWN:
                self.report.unwitnessable.append((path.id, path.truncated or "outcome unknown to xdp2tc"))
                continue
            why = self.unfillable(path)
            if why:
                self.report.unwitnessable.append((path.id, why))
                continue
            model = self.witness(cond)
            if model is None:
                self.report.unwitnessable.append(
                    (
                        path.id,
                        "not feasible under test-run conditions "
                        "(packet 14..3520 bytes, ingress on an existing device, queue 0)",
                    )
                )
                continue
            self._check_witness(path, model)

    def unfillable(self, path: Path) -> str | None:
        """Why no witness can be set up for `path` (a map the test run cannot fill), or None."""
        for access in path.accesses:
            mdef = self.maps[access.map]
            if mdef.type is not None and mdef.type.name in UNFILLABLE:
                return f"needs {UNFILLABLE[mdef.type.name]} in {mdef.name}"
        return None

    def witness(self, cond: z3.BoolRef) -> z3.ModelRef | None:
        """A model of `cond` under test-run conditions, short packets first (None: none)."""
        return short_model([*self.e.base_constraints(), *self.env, cond])

    def _check_witness(self, path: Path, model: z3.ModelRef) -> None:
        ev = lambda x: model.eval(x, model_completion=True)  # noqa: E731
        packet = self.witness_packet(ev)
        self.seeds.append(packet)
        try:
            self.set_maps(path, ev)
        except kernel.KernelRunError as err:
            self.report.unwitnessable.append((path.id, f"map entry rejected by the kernel: {err}"))
            return
        ctx = kernel.XdpCtx(ev(ctx_field("ingress_ifindex")).as_long(), 0)
        result = self.loaded.run(self.e.program.name, packet, ctx=ctx)
        expected = self.prediction(path, ev)
        got = (result.retval, result.packet_out)
        self.report.witnesses += 1
        if got == expected:
            return
        free = self.free_bytes(path, lambda x: ev(x).as_long())
        if free and _agrees(expected, got, free):
            self.report.consistent += 1
            return
        if self.nondeterministic[path.id] and self._consistent(packet, ctx, got):
            self.report.consistent += 1
            return
        self.report.mismatches.append(Mismatch(path.id, "witness", packet, _show(expected), _show(got)))

    def free_bytes(self, path: Path, ev) -> frozenset[int]:
        """Positions of the output packet whose predicted byte depends on a helper result
        that is truly arbitrary (time, random numbers, a helper without a model) or on a
        value xdp2tc does not model: there any byte the kernel writes is right."""
        head = _signed(ev(path.head))
        out = set()
        for w in path.writes:
            off = _signed(ev(w))
            term = z3.simplify(self.e.expand(z3.Select(path.pkt, z3.BitVecVal(off % (1 << 64), 64))))
            if any(n.startswith(FREE_PREFIXES) for n in symbols(term)):
                out.add(off - head)
        return frozenset(out)

    def witness_packet(self, ev) -> bytes:
        """The packet bytes of a model (`ev` evaluates terms in it)."""
        return packet_of(ev)

    def prediction(self, path: Path, ev) -> tuple[int, bytes]:
        """(verdict, output packet) the analyzer predicts for `path` on the model's input."""
        return output_of(path, lambda x: ev(x).as_long(), self.witness_packet(ev))

    def set_maps(self, path: Path, ev) -> None:
        """Fill the loaded maps with the entries `path` reads in the model (entries.py)."""
        # Hash-like maps start empty for every witness; arrays get the entries read.
        for name in {a.map for a in path.accesses}:
            mdef = self.maps[name]
            if mdef.type and mdef.type.keyed in ("hash", "lpm"):
                self.loaded.map_clear(name)
        for entry in looked_up(self.e, path, ev):
            mdef = self.maps[entry.map]
            if is_global_data_section(mdef.section):
                if not mdef.read_only:  # read-only: the loaded bytes (witnesses are asked with them)
                    self.loaded.map_update(self.loaded.map(mdef.section).name, entry.key, entry.value)
                continue
            if entry.value is None:
                if mdef.type.keyed not in ("hash", "lpm"):
                    self._reset_entry(mdef.name, entry.key)
                continue
            self.loaded.map_update(mdef.name, entry.key, self._per_cpu(mdef, entry.value))
            self._touched.add((mdef.name, entry.key))

    def _per_cpu(self, mdef, value: bytes) -> bytes:
        if not (mdef.type and mdef.type.percpu):
            return value
        slot = value + bytes((-len(value)) % 8)
        return slot * kernel.possible_cpus()

    def _consistent(self, packet: bytes, ctx: kernel.XdpCtx, got: tuple[int, bytes]) -> bool:
        """Is there a path whose condition the input allows (helpers free) with this result?"""
        solver = z3.Solver()
        solver.add(*self.e.base_constraints(), *self._concrete_input(packet, ctx))
        for path, cond in zip(self.e.paths, self.conditions):
            if path.verdict == UNKNOWN or path.retval is None:
                return True  # an unknown outcome allows anything
            solver.push()
            solver.add(cond, z3.Extract(31, 0, path.retval) == got[0])
            ok = solver.check() == z3.sat
            solver.pop()
            if ok:
                return True
        return False

    def _concrete_input(self, packet: bytes, ctx: kernel.XdpCtx) -> list[z3.BoolRef]:
        out = [
            PACKET_LEN == len(packet),
            PACKET_FRAGS == 0,
            ctx_field("ingress_ifindex") == (ctx.ingress_ifindex or 1),
            ctx_field("rx_queue_index") == 0,
        ]
        out += [z3.Select(PACKET, i) == b for i, b in enumerate(packet)]
        return out

    # --- random packets -------------------------------------------------------------

    def run_random(self, count: int, seeds: list[bytes]) -> None:
        """Random packets with every map empty (arrays zero, globals as loaded). Maps the
        program both writes and decides on are emptied again before every packet, so each
        packet meets the state the prediction assumes."""
        for name, key in self._touched:
            self._reset_entry(name, key)
        self._touched.clear()
        for name in self.e.read_maps | self.e.written_maps:
            mdef = self.maps[name]
            if mdef.type and mdef.type.keyed in ("hash", "lpm") and not is_global_data_section(mdef.section):
                self.loaded.map_clear(name)
        stateful = [self.maps[n] for n, c in classes(self.e)[1].items() if c == "data-plane"]
        # Large arrays cannot be re-zeroed per packet: paths reading them are only checked
        # for consistency in this phase.
        big = {m.name for m in stateful if m.type and m.type.keyed == "index" and (m.max_entries or 0) > 256}
        stateful = [m for m in stateful if m.name not in big]
        loose = [bool(big & {a.map for a in p.accesses}) for p in self.e.paths]
        empty = self._empty_maps()
        conds = [z3.simplify(z3.substitute_funs(c, *empty)) if empty else c for c in self.conditions]
        for _ in range(count):
            packet = self._random_packet(seeds)
            for mdef in stateful:
                self._empty(mdef)
            result = self.loaded.run(self.e.program.name, packet)
            self.report.random += 1
            got = (result.retval, result.packet_out)
            subst = self._substitution(packet)
            matches, open_ = [], []
            for path, cond in zip(self.e.paths, conds):
                v = z3.simplify(z3.substitute(cond, *subst))
                if z3.is_true(v):
                    matches.append(path)
                elif not z3.is_false(v):
                    open_.append(path)
            if len(matches) == 1 and not open_:
                path = matches[0]
                if path.verdict == UNKNOWN:
                    continue
                expected = self._evaluate_prediction(path, subst, empty, packet)
                if expected == got:
                    continue
                agrees = self._agrees_open(path, subst, empty, packet, got) if expected is None else False
                if agrees is not False or self.nondeterministic[path.id] or loose[path.id]:
                    self.report.consistent += 1
                    continue
                self.report.mismatches.append(Mismatch(path.id, "random", packet, _show(expected), _show(got)))
                continue
            elif not matches and not open_:
                self.report.mismatches.append(Mismatch(None, "random", packet, "some path (none matched)", _show(got)))
            elif len(matches) > 1:
                self.report.mismatches.append(
                    Mismatch(
                        None, "random", packet, f"one path (paths {[p.id for p in matches]} all matched)", _show(got)
                    )
                )
            else:  # the outcome depends on helper results or unmodelled values
                candidates = matches + open_
                if any(
                    p.verdict == UNKNOWN
                    or self.nondeterministic[p.id]
                    or loose[p.id]
                    or (pred := self._evaluate_prediction(p, subst, empty, packet)) is None
                    or pred[0] == got[0]
                    for p in candidates
                ):
                    self.report.consistent += 1
                else:
                    self.report.mismatches.append(
                        Mismatch(None, "random", packet, f"one of paths {[p.id for p in candidates]}", _show(got))
                    )

    def _reset_entry(self, name: str, key: bytes) -> None:
        mdef = self.maps[name]
        if mdef.type and mdef.type.always_present:
            self.loaded.map_update(name, key, self._per_cpu(mdef, bytes(mdef.value_size)))
        else:
            self.loaded.map_delete(name, key)

    def _empty(self, mdef) -> None:
        if is_global_data_section(mdef.section):
            if not mdef.read_only:
                self.loaded.map_update(
                    self.loaded.map(mdef.section).name,
                    bytes(mdef.key_size or 4),
                    mdef.initial or bytes(mdef.value_size),
                )
        elif mdef.type and mdef.type.always_present:
            for i in range(mdef.max_entries or 0):
                self._reset_entry(mdef.name, i.to_bytes(mdef.key_size, "little"))
        else:
            self.loaded.map_clear(mdef.name)

    def _empty_maps(self) -> list[tuple]:
        """Map contents for the random phase, as z3 functions: hash maps empty, arrays zero
        (the first 256 slots are zeroed; others never hold anything but zero here),
        global data as loaded (Exploration.maps_as_loaded, writable globals read back)."""
        return self.e.maps_as_loaded(self._global_bytes)

    def _global_bytes(self, mdef) -> bytes:
        if mdef.read_only:
            return mdef.initial or bytes(mdef.value_size)
        value = self.loaded.map_lookup(self.loaded.map(mdef.section).name, bytes(mdef.key_size or 4))
        return value or bytes(mdef.value_size)

    def _substitution(self, packet: bytes) -> list[tuple]:
        array = z3.K(z3.BitVecSort(64), z3.BitVecVal(0, 8))
        for i, b in enumerate(packet):
            array = z3.Store(array, z3.BitVecVal(i, 64), z3.BitVecVal(b, 8))
        return [
            (PACKET, array),
            (PACKET_LEN, z3.BitVecVal(len(packet), 64)),
            (PACKET_FRAGS, z3.BitVecVal(0, 64)),
            (ctx_field("ingress_ifindex"), z3.BitVecVal(1, 32)),
            (ctx_field("rx_queue_index"), z3.BitVecVal(0, 32)),
            (ctx_field("egress_ifindex"), z3.BitVecVal(0, 32)),
        ]

    def _evaluator(self, subst, empty):
        """A term's value on the concrete input (`subst`, maps `empty`); _Open when it still
        depends on something the input does not fix (helper results, unmodelled values)."""

        def ev(x):
            key = x.get_id()
            if key not in self._expanded:  # merged values mention branch literals
                y = self.e.expand(x)
                self._expanded[key] = (z3.substitute_funs(y, *empty) if empty else y, x)
            v = z3.simplify(z3.substitute(self._expanded[key][0], *subst))
            if not z3.is_bv_value(v):
                raise _Open
            return v.as_long()

        return ev

    def _evaluate_prediction(self, path: Path, subst, empty, packet: bytes) -> tuple[int, bytes]:
        try:
            return output_of(path, self._evaluator(subst, empty), packet)
        except _Open:
            return None

    def _agrees_open(self, path: Path, subst, empty, packet: bytes, got: tuple[int, bytes]) -> bool | None:
        """Does the kernel's result equal the prediction on every byte the input determines
        (the others depend on arbitrary helper results: any value)? None when the return
        code, the packet's bounds or a write's place is itself open."""
        ev = self._evaluator(subst, empty)
        try:
            retval, head, end = ev(z3.Extract(31, 0, path.retval)), _signed(ev(path.head)), _signed(ev(path.end))
            offsets = [_signed(ev(w)) for w in path.writes]
        except _Open:
            return None
        if head < 0 or end > len(packet):
            return None  # grown bytes come from the model: left to the witness check
        if retval != got[0] or end - head != len(got[1]):
            return False
        buf: dict[int, int | None] = {i: b for i, b in enumerate(packet)}
        for off in offsets:
            try:
                buf[off] = ev(z3.Select(path.pkt, z3.BitVecVal(off % (1 << 64), 64)))
            except _Open:
                buf[off] = None  # any value
        return all(buf.get(head + i, 0) in (None, b) for i, b in enumerate(got[1]))

    def _random_packet(self, seeds: list[bytes]) -> bytes:
        max_len = min(self.e.options.max_len, MAX_TEST_LEN, 256)
        if seeds and self.rng.random() < 0.8:
            p = bytearray(self.rng.choice(seeds))
            for _ in range(self.rng.randint(1, 3)):
                if p:
                    p[self.rng.randrange(len(p))] = self.rng.randrange(256)
            if self.rng.random() < 0.2:
                p = p[: self.rng.randint(MIN_TEST_LEN, max(len(p), MIN_TEST_LEN))]
        else:
            p = bytearray(self.rng.randrange(256) for _ in range(self.rng.randint(MIN_TEST_LEN, max_len)))
        while len(p) < MIN_TEST_LEN:
            p.append(self.rng.randrange(256))
        return bytes(p)


class _Open(Exception):
    """A prediction still depends on something the concrete input does not fix."""


def output_of(path: Path, ev, packet: bytes) -> tuple[int, bytes]:
    """(return code, output packet) of `path` on input `packet`; `ev` evaluates a z3 term
    to an int. Only bytes the path wrote are evaluated; the rest is the input."""
    retval = ev(z3.Extract(31, 0, path.retval))
    head, end = _signed(ev(path.head)), _signed(ev(path.end))
    buf = {i: b for i, b in enumerate(packet)}
    for w in path.writes:  # offsets from the original first byte, as `buf`'s keys
        off = _signed(ev(w))
        buf[off] = ev(z3.Select(path.pkt, z3.BitVecVal(off % (1 << 64), 64)))
    if head < 0 or end > len(packet):  # grown by adjust_head/tail: new bytes from the model
        for i in range(head, end):
            if i not in buf:
                buf[i] = ev(z3.Select(path.pkt, z3.BitVecVal(i % (1 << 64), 64)))
    return retval, bytes(buf.get(i, 0) for i in range(head, end))


def _agrees(expected: tuple[int, bytes], got: tuple[int, bytes], free: frozenset[int]) -> bool:
    """Same return code and length, and the same bytes outside the positions in `free`."""
    (r1, p1), (r2, p2) = expected, got
    return r1 == r2 and len(p1) == len(p2) and all(a == b for i, (a, b) in enumerate(zip(p1, p2)) if i not in free)


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _show(result: tuple[int, bytes]) -> str:
    retval, out = result
    return f"{VERDICTS.get(retval, INVALID)}({retval}) with {len(out)}-byte packet {out[:64].hex()}"


def verify(e: Exploration, loaded: kernel.LoadedObject, random_packets: int = 200, seed: int = 0) -> VerifyReport:
    """Run every path's witness and `random_packets` random packets; see the module doc."""
    v = Verifier(e, loaded, seed)
    v.run_witnesses()
    v.run_random(random_packets, v.seeds[:64])
    return v.report
