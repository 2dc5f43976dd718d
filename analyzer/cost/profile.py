"""Profiles: ns per counted thing, measured on one machine (`xdp2tc calibrate`, calibrate.py).

A profile gives ns per instruction class, per helper, per lookup by map type (4-byte keys,
plus ns per extra hashed key byte; hits, and misses in `lookup_miss`), per map update by map
type (overwrites in `update`, inserts of a new key in `insert`), per tail call
(constant/variable, taken/missed), per bpf-to-bpf call and bpf_loop callback, and the fixed
per-run overhead of BPF_PROG_TEST_RUN (not part of a path's cost). A fitted profile adds
`path_ns` once per path (fit.py). The default one, analyzer/profiles/default.json, was
measured on the machine it names (it stays there: its path is part of every `cost` report).
"""

from __future__ import annotations

import json
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path as FsPath

PROFILE_SCHEMA = "xdp2tc.profile/1"
DEFAULT_PROFILE = FsPath(__file__).resolve().parent.parent / "profiles" / "default.json"


class ProfileError(Exception):
    """A profile file that cannot be used (message names the file and the problem)."""


@dataclass
class Profile:
    """ns per counted thing, measured on one machine (see analyzer/cost/calibrate.py)."""

    kernel: str
    cpu: str
    machine: str
    created: str
    overhead_ns: float
    insn: dict[str, float]
    helper: dict[str, float]
    lookup: dict[str, float]
    hash_key_byte: float
    tail_call: dict[str, float]  # constant, variable, constant_miss, variable_miss
    call: dict[str, float]  # bpf2bpf, callback
    method: dict = field(default_factory=dict)
    spread: dict = field(default_factory=dict)  # entry -> [min, max] over rounds
    notes: list[str] = field(default_factory=list)
    source: str = ""
    path_ns: float = 0.0  # per path, fitted on real programs (analyzer/cost/fit.py)
    fit: dict = field(default_factory=dict)  # how the instruction prices were fitted, and the fit's error
    update: dict[str, float] = field(default_factory=dict)  # map_update_elem overwrites by map type
    insert: dict[str, float] = field(default_factory=dict)  # map_update_elem of a new key by map type
    lookup_miss: dict[str, float] = field(default_factory=dict)  # lookups that find nothing, by map type

    TAIL_KINDS = ("constant", "variable", "constant_miss", "variable_miss")

    def to_json(self) -> dict:
        return {
            "schema": PROFILE_SCHEMA,
            "kernel": self.kernel,
            "cpu": self.cpu,
            "machine": self.machine,
            "created": self.created,
            "overhead_ns": self.overhead_ns,
            "insn": self.insn,
            "helper": self.helper,
            "lookup": self.lookup,
            "hash_key_byte": self.hash_key_byte,
            "tail_call": self.tail_call,
            "call": self.call,
            "method": self.method,
            "spread": self.spread,
            "notes": self.notes,
            "path_ns": self.path_ns,
            "fit": self.fit,
            "update": self.update,
            "insert": self.insert,
            "lookup_miss": self.lookup_miss,
        }

    @classmethod
    def from_json(cls, doc: dict, source: str = "") -> Profile:
        where = source or "profile"
        if not isinstance(doc, dict) or doc.get("schema") != PROFILE_SCHEMA:
            raise ProfileError(f"{where}: not an xdp2tc profile (schema {PROFILE_SCHEMA!r} expected)")

        def number(value, what):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ProfileError(f"{where}: {what} must be a finite number, got {value!r}")
            return float(value)

        def table(name):
            value = doc.get(name)
            if not isinstance(value, dict):
                raise ProfileError(f"{where}: missing table {name!r}")
            return {str(k): number(v, f"{name}.{k}") for k, v in value.items()}

        for key in ("kernel", "cpu"):
            if not isinstance(doc.get(key), str):
                raise ProfileError(f"{where}: missing {key!r}")
        prof = cls(
            doc["kernel"],
            doc["cpu"],
            str(doc.get("machine", "")),
            str(doc.get("created", "")),
            number(doc.get("overhead_ns"), "overhead_ns"),
            table("insn"),
            table("helper"),
            table("lookup"),
            number(doc.get("hash_key_byte", 0.0), "hash_key_byte"),
            table("tail_call"),
            table("call"),
            doc.get("method") or {},
            doc.get("spread") or {},
            list(doc.get("notes") or []),
            source,
            number(doc.get("path_ns", 0.0), "path_ns"),
            doc.get("fit") or {},
            table("update") if "update" in doc else {},
            table("insert") if "insert" in doc else {},
            table("lookup_miss") if "lookup_miss" in doc else {},
        )
        missing = [f"tail_call.{k}" for k in cls.TAIL_KINDS if k not in prof.tail_call]
        missing += [f"call.{k}" for k in ("bpf2bpf", "callback") if k not in prof.call]
        if missing:
            raise ProfileError(f"{where}: missing {', '.join(missing)}")
        return prof

    def lookup_price(self, map_type: str, hit: bool = True) -> float | None:
        """A lookup in a map of `map_type`: a miss at its own price where measured, else
        at the hit's (profiles before misses were timed)."""
        if not hit and map_type in self.lookup_miss:
            return self.lookup_miss[map_type]
        return self.lookup.get(map_type)

    def update_price(self, map_type: str, insert: bool = False) -> float | None:
        """map_update_elem on a map of `map_type`: an insert of a new key at its own price
        where measured, else the overwrite's, else the hash overwrite's
        (`helper.map_update_elem`)."""
        if insert and map_type in self.insert:
            return self.insert[map_type]
        return self.update.get(map_type, self.helper.get("map_update_elem"))

    def save(self, path: str | FsPath) -> None:
        FsPath(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")


def cpu_model() -> str:
    """The running machine's CPU model, as profiles name it (/proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("model name", "Model", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def foreign_profile(profile: Profile) -> str | None:
    """What differs between the machine the profile was measured on and this one (CPU
    model, kernel release), or None when they match."""
    here_cpu, here_kernel = cpu_model(), platform.release()
    diffs = []
    if profile.cpu != here_cpu:
        diffs.append(f"CPU {profile.cpu!r}, this machine {here_cpu!r}")
    if profile.kernel != here_kernel:
        diffs.append(f"kernel {profile.kernel}, this machine {here_kernel}")
    return "; ".join(diffs) or None


def load_profile(path: str | FsPath | None = None) -> Profile:
    """The profile at `path`, or the default one shipped in the package."""
    path = FsPath(path) if path is not None else DEFAULT_PROFILE
    try:
        doc = json.loads(path.read_text())
    except OSError as err:
        raise ProfileError(f"{path}: cannot read the profile: {err.strerror or err}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ProfileError(f"{path}: not JSON ({err})") from None
    return Profile.from_json(doc, str(path))
