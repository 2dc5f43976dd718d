"""The cost model (analyzer/cost/; `xdp2tc cost`/`calibrate`).

Counts are checked against an independent oracle: tests/oracles/interp.py single-steps the
lifter's IR concretely on each path's witness (packet, ctx fields, map contents and helper
results from the z3 model that `xdp2tc verify` builds) and counts what it executes. No
timing thresholds here: the accuracy of the prices is bench/cost.py's job.
"""

from __future__ import annotations

import json
import math
import platform
from collections import Counter
from pathlib import Path

import pytest
import z3
from conftest import require, require_kernel
from oracles import interp

import corpus
from analyzer import kernel
from analyzer.cost import calibrate, fit, pathtiming
from analyzer.cost.count import INSN_CLASSES, Site, count
from analyzer.cost.price import path_costs, price, taken_tail_calls
from analyzer.cost.profile import DEFAULT_PROFILE, Profile, ProfileError, cpu_model, load_profile
from analyzer.cost.tailgraph import parse_mapping
from analyzer.exploration import UNKNOWN
from analyzer.explore import Observer, explore
from analyzer.helpers import HELPER_BY_ID
from analyzer.symbolic import ctx_field, map_found, map_val, symbols
from analyzer.verify import Verifier
from lifter.maps import is_global_data_section
from lifter.program import load_object
from offload.cli import main

BUILD = corpus.BUILD_DIR


def corpus_params() -> list:
    """Every object the corpus Makefile plans (a missing one fails under CI)."""
    return [pytest.param(p, id=str(p.relative_to(BUILD))) for p in corpus.expected_objects()]


def built(rel: str) -> Path:
    path = BUILD / rel
    require(path.is_file(), f"{path} is not built (run `make corpus`)")
    return path


# --------------------------------------------------------------------------- the oracle


def oracle_inputs(e, v: Verifier, path, model):
    """The witness as the oracle's inputs: the packet, ctx fields, map contents and the
    helper results the model chose (in call order per helper)."""
    ev = lambda x: model.eval(x, model_completion=True)  # noqa: E731
    packet = v.witness_packet(ev)
    maps = {m.name: m for m in e.obj.maps}

    def map_value(name: str, key: bytes) -> bytes | None:
        mdef = maps[name]
        bits = 8 * (mdef.key_size or 4)
        k = z3.BitVecVal(int.from_bytes(key, "little"), bits)
        always = is_global_data_section(mdef.section) or (mdef.type and mdef.type.name in ("array", "percpu_array"))
        if not always and not z3.is_true(ev(map_found(name, bits)(k))):
            return None
        return bytes(ev(map_val(name, bits)(k, z3.BitVecVal(i, 32))).as_long() for i in range(mdef.value_size or 0))

    queues: dict[str, list[int]] = {}
    for name in sorted(
        symbols(e.condition(path)), key=lambda n: int(n.rsplit(".", 1)[1]) if n.startswith("helper.") else 0
    ):
        if name.startswith("helper."):
            queues.setdefault(name.split(".")[1], []).append(ev(z3.BitVec(name, 64)).as_long())

    def helper_value(name: str) -> int:
        q = queues.get(name)
        return q.pop(0) if q else 0

    return packet, {
        "ingress_ifindex": ev(ctx_field("ingress_ifindex")).as_long(),
        "rx_queue_index": ev(ctx_field("rx_queue_index")).as_long(),
        "map_value": map_value,
        "helper_value": helper_value,
    }


def oracle_counts(obj, res: interp.Result) -> Counter:
    """The oracle's counters under the cost model's names."""
    out = Counter({"insns": res.steps})
    for cls in INSN_CLASSES:
        if res.counts.get(cls):
            out[f"insn.{cls}"] = res.counts[cls]
    for hid, n in res.helpers.items():
        h = HELPER_BY_ID.get(hid)
        out[f"helper.{h.name}" if h else "helper.unknown"] += n
    maps = {m.name: m for m in obj.maps}
    for name, n in res.lookups.items():
        mdef = maps[name]
        miss = res.misses[name]
        out[f"lookup.{mdef.type.name}"] += n - miss
        out[f"lookup_miss.{mdef.type.name}"] += miss
        if mdef.type.keyed == "hash":
            out["hash_key_bytes"] += n * (mdef.key_size or 4)
    for name, n in res.updates.items():
        new = res.inserts[name]
        out[f"update.{maps[name].type.name}"] += n - new
        out[f"insert.{maps[name].type.name}"] += new
    for key, name in (
        ("pkt_read_bytes", "pkt.read_bytes"),
        ("pkt_write_bytes", "pkt.write_bytes"),
        ("callback", "callback"),
    ):
        if res.counts.get(key):
            out[name] = res.counts[key]
    return out


@pytest.mark.parametrize("path", corpus_params())
def test_counts_match_the_concrete_oracle(path):
    """Per path: the explorer's instruction count (Path.steps) and the cost model's
    counters, at the witness, equal what the concrete interpreter counts on that witness."""
    require(path.is_file(), f"{path} is not built (run `make corpus`)")
    obj = load_object(path)
    compared = skipped = 0
    # corpus `// load-<toolchain>: no` objects (gcc/globals.o: libbpf's ld_imm64 offset lands
    # past .data, as the oracle computes too) may access out of bounds; no other may.
    rejected = corpus.expected_load_failures(path.stem).get(path.parent.name)
    for prog in obj.programs:
        if not prog.is_xdp:
            continue
        plain = explore(obj, prog)
        counted = count(obj, prog)
        e = counted.exploration
        assert len(plain.paths) == len(e.paths)
        v = Verifier(e, None)
        for p, q, cond in zip(e.paths, plain.paths, v.conditions):
            if p.verdict == UNKNOWN or p.notes or v.unfillable(p):
                skipped += 1
                continue
            model = v.witness(cond)
            if model is None:
                skipped += 1
                continue
            packet, inputs = oracle_inputs(e, v, p, model)
            try:
                res = interp.run(obj, prog, packet, **inputs)
            except interp.Unsupported:  # a feature the oracle does not model
                skipped += 1
                continue
            except interp.BadAccess:  # fails, unless the kernel refuses the object for it
                if not rejected:
                    raise
                skipped += 1
                continue
            predicted_ret = model.eval(z3.Extract(31, 0, p.retval), model_completion=True).as_long()
            if (res.retval & 0xFFFFFFFF) != predicted_ret:
                # Only a path that depends on helper results may diverge (their order in
                # the witness is a guess); anything else is a bug in one of the two.
                assert v.nondeterministic[p.id], f"{prog.name} path #{p.id}: oracle returned {res.retval}"
                skipped += 1
                continue
            steps = (
                q.steps
                if isinstance(q.steps, int)
                else model.eval(plain.expand(q.steps), model_completion=True).as_long()
            )
            assert res.steps == steps, f"{prog.name} path #{p.id}: oracle {res.steps} insns, explorer {steps}"
            assert res.sites <= p.sites, f"{prog.name} path #{p.id}: branch sites"
            mine = Counter(counted.counts_at(p, model))
            mine = Counter({k: n for k, n in mine.items() if not k.startswith("tail.") and k != "chain"})
            assert mine == +oracle_counts(obj, res), f"{prog.name} path #{p.id}"
            assert [(c, m, t) for c, m, _, t in res.tail_calls] == [(t.caller, t.map, t.target) for t in p.tail_calls]
            compared += 1
    print(f"{path.name}: {compared} paths compared, {skipped} not comparable")
    # Every planned object has a comparable path (measured: all 191 do).
    assert compared > 0, f"{path.name}: no path compared ({skipped} skipped)"


def test_oracle_covers_the_corpus():
    """The comparison above is not vacuous: most corpus paths are compared."""
    objs = corpus.built_objects()
    require(bool(objs), "corpus is not built (run `make corpus`)")
    obj = load_object(built("clang/tailcall_dispatch.o"))
    prog = obj.program("xdp_dispatch")
    counted = count(obj, prog)
    v = Verifier(counted.exploration, None)
    done = 0
    for p, cond in zip(counted.exploration.paths, v.conditions):
        model = v.witness(cond)
        packet, inputs = oracle_inputs(counted.exploration, v, p, model)
        res = interp.run(obj, prog, packet, **inputs)
        assert res.steps == counted.counts_at(p, model)["insns"]
        done += 1
    assert done == len(counted.exploration.paths) == 12


# --------------------------------------------------------------------------- counting


def test_tail_call_sites_as_the_kernel_sees_them():
    """clang merges the dispatcher's three constant-index calls into one site (the kernel
    runs it as a variable-index tail call); the handlers end the chain."""
    obj = load_object(built("clang/tailcall_dispatch.o"))
    counted = count(obj, obj.program("xdp_dispatch"))
    sites = [s for s, keys in counted.site_keys.items() if keys]
    assert sites == [Site("xdp_dispatch", 53)]
    assert counted.site_keys[sites[0]] == {("jmp_table", 0), ("jmp_table", 1), ("jmp_table", 2)}
    assert counted.site_kind(sites[0]) == "variable"
    taken = [p for p in counted.exploration.paths if p.tail_calls]
    assert len(taken) == 9 and all(len(p.tail_calls) == 1 for p in taken)


def test_observer_sees_the_start_every_instruction_and_every_path_end():
    """The engine's hook (explore.Observer) that counting uses: one start, one call per
    executed instruction, each path handed over as it ends, in the result's order; an
    observer that changes nothing leaves the exploration as it was."""

    class Watch(Observer):
        def __init__(self):
            self.starts, self.insns, self.ended = 0, 0, []

        def on_start(self, state):
            self.starts += 1

        def on_instruction(self, state, insn):
            self.insns += 1

        def on_path_end(self, state, path):
            self.ended.append(path)

    obj = load_object(built("clang/tailcall_dispatch.o"))
    watch = Watch()
    e = explore(obj, obj.program("xdp_dispatch"), observer=watch)
    assert watch.starts == 1 and watch.insns == e.insns_executed > 0
    assert [p.id for p in watch.ended] == [p.id for p in e.paths] and all(a is b for a, b in zip(watch.ended, e.paths))
    plain = explore(obj, obj.program("xdp_dispatch"))
    assert [(p.verdict, str(p.steps)) for p in plain.paths] == [(p.verdict, str(p.steps)) for p in e.paths]


def test_merged_paths_list_only_feasible_subpaths():
    """A merged path's vectors are its feasible sub-paths (checked), not every combination."""
    obj = load_object(built("clang/or_stress_k2.o"))
    counted = count(obj, obj.program("xdp_or_stress"))
    plain = explore(obj, obj.program("xdp_or_stress"))
    from analyzer.report import insn_range

    for p, q in zip(counted.exploration.paths, plain.paths):
        vectors, exact = counted.vectors(p)
        assert exact and vectors
        lo, hi = insn_range(q.steps)
        assert lo <= min(v["insns"] for v in vectors) <= max(v["insns"] for v in vectors) <= hi


def test_a_cut_walk_leaves_the_solver_clean():
    """Issue 14: a walk stopped by its budget left its pushed scopes on the shared solver,
    so every later path of the program got no feasible sub-path ("0 insns ?", exact)."""
    obj = load_object(built("clang/or_stress_k2.o"))
    counted = count(obj, obj.program("xdp_or_stress"))
    merged = [p for p in counted.exploration.paths if not z3.is_bv_value(p.steps)]
    require(merged, "or_stress_k2 has no merged path to cut")
    expected = [counted.vectors(p) for p in merged]
    solver = counted.exploration.solver
    for p in merged:
        vectors, exact = counted.vectors(p, budget=1)
        assert vectors and not exact
        assert solver.num_scopes() == 0
    assert [counted.vectors(p) for p in merged] == expected
    assert all(exact and vectors for vectors, exact in expected)


# --------------------------------------------------------------------------- profiles


def made_profile(**change) -> Profile:
    """A profile with made-up prices (not a measurement) for every entry calibration
    measures (calibrate.benches), on this machine's CPU and kernel, fitted-style (a chain
    price and a per-path term): the tests of the model's logic price with it and derive
    their expectations from its numbers, so the shipped profile can be regenerated
    without touching them. Entry i costs 0.5 + 0.25 i ns: distinct, and a variable-index
    tail call costs more than a constant one and than a goto."""
    entries = [b.entry for b in calibrate.benches()]

    def table(kind: str) -> dict[str, float]:
        return {e.split(".", 1)[1]: 0.5 + 0.25 * i for i, e in enumerate(entries) if e.startswith(kind + ".")}

    doc = {
        "kernel": platform.release(),
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "created": "made up by tests/test_cost.py",
        "overhead_ns": 3.0,
        "insn": table("insn") | {"exit": 0.0, "call_helper": 0.0, fit.CHAIN: 0.125},
        "helper": table("helper") | {"loop": 1.25},
        "lookup": {k: v for k, v in table("lookup").items() if k != "hash16"},
        "hash_key_byte": 0.125,
        "tail_call": table("tail_call"),
        "call": table("call") | {"callback": 0.75},
        "update": table("update"),
        "insert": table("insert"),
        "lookup_miss": table("lookup_miss"),
        "path_ns": 1.5,
    }
    return Profile.from_json({"schema": "xdp2tc.profile/1"} | doc | change, "made_profile")


def test_default_profile_ships_and_is_complete():
    """The shipped profile has a price for everything calibration measures (its numbers
    are a measurement and are not checked) and says how its instruction prices were fitted."""
    prof = load_profile()
    assert Path(prof.source) == DEFAULT_PROFILE
    assert prof.kernel and prof.cpu and prof.overhead_ns > 0
    made = made_profile()
    for table in ("insn", "helper", "lookup", "tail_call", "call", "update", "insert", "lookup_miss"):
        assert set(getattr(made, table)) <= set(getattr(prof, table)), table
        assert all(math.isfinite(x) and x >= 0 for x in getattr(prof, table).values()), table
    assert prof.fit["cross_validation"]["paths"] >= 2 * fit.MIN_PATHS and prof.path_ns >= 0


def test_profile_round_trip(tmp_path):
    prof = load_profile()
    out = tmp_path / "p.json"
    prof.save(out)
    again = load_profile(out)
    assert again.to_json() == prof.to_json()


@pytest.mark.parametrize(
    "text, what",
    [
        ("not json", "not JSON"),
        ('{"schema": "other"}', "not an xdp2tc profile"),
        ('{"schema": "xdp2tc.profile/1", "kernel": "k", "cpu": "c", "overhead_ns": "x"}', "finite number"),
    ],
)
def test_bad_profiles(tmp_path, text, what):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ProfileError, match=what):
        load_profile(path)


def test_price_is_the_sum_of_its_parts():
    prof = made_profile()
    obj = load_object(built("clang/lpm_src_block.o"))
    counted = count(obj, obj.program(None))
    for pc in path_costs(counted, prof):
        for vec, pr in zip(pc.vectors, pc.prices):
            assert pr.ns == pytest.approx(sum(pr.parts.values()))
            expect = sum(n * prof.insn[k.split(".", 1)[1]] for k, n in vec.items() if k.startswith("insn."))
            expect += prof.path_ns + vec.get("chain", 0) * prof.insn[fit.CHAIN]
            assert pr.parts["insns"] == pytest.approx(expect)
            hits, misses = vec.get("lookup.lpm_trie", 0), vec.get("lookup_miss.lpm_trie", 0)
            assert pr.parts["lookups"] == pytest.approx(
                hits * prof.lookup["lpm_trie"] + misses * prof.lookup_miss["lpm_trie"]
            )


def test_lookup_misses_and_inserts_priced_at_their_own_prices():
    """hash_counter.c looks its key up and, on a miss, inserts it: the miss and the insert
    are counted as such (the oracle test checks every path), and priced at the profile's
    miss and insert prices -- or at the hit and overwrite prices, for a profile without them."""
    obj = load_object(built("clang/hash_counter.o"))
    counted = count(obj, obj.program(None))
    vectors = [v for p in counted.exploration.paths for v in counted.vectors(p)[0]]
    missed = [v for v in vectors if v.get("lookup_miss.hash")]
    hit = [v for v in vectors if v.get("lookup.hash")]
    assert missed and hit
    assert all(v.get("insert.hash") == 1 and not v.get("update.hash") for v in missed)
    assert all(not v.get("insert.hash") for v in hit)
    old = made_profile()
    old.lookup, old.update, old.insert, old.lookup_miss = {"hash": 10.0}, {"hash": 100.0}, {}, {}
    new = Profile.from_json(old.to_json() | {"lookup_miss": {"hash": 7.0}, "insert": {"hash": 300.0}})
    v = missed[0]
    a, b = price(v, Counter(), counted, old), price(v, Counter(), counted, new)
    assert b.parts["lookups"] - a.parts["lookups"] == pytest.approx(7.0 - 10.0)
    assert b.parts["helpers"] - a.parts["helpers"] == pytest.approx(300.0 - 100.0)
    assert price(hit[0], Counter(), counted, new).parts == price(hit[0], Counter(), counted, old).parts


class _FakeState:
    depth = 0


def test_dependency_chain_by_hand():
    """The chain counter on hand-timed code (LATENCY: load 4, stack reload 5, ALU 1):
    a load, a shift of it, a constant added in, a spill and reload, a call (a barrier),
    then one ALU step -- 4 + 1 + 1 + (1 + 5) + 1 = 13 cycles; six independent loads: 4."""
    from analyzer.cost.count import Chains
    from lifter.asm import add, alu, mov
    from lifter.insn import AluOp, Call, Imm, Load, Reg, Store
    from lifter.opcodes import CallSrc

    chains, s = Chains(), _FakeState()
    chains.start(s)
    code = [
        Load(0, 2, 7, 0, 1),
        alu(AluOp.LSH, 2, Imm(8)),
        mov(3, Imm(1)),
        add(3, 2),
        Store(0, 10, -8, 8, Reg(3)),
        Load(0, 4, 10, -8, 8),
        Call(0, CallSrc.HELPER, 5),
        add(0, Imm(1)),
    ]
    assert [chains.step(s, i) for i in code] == [4, 1, 0, 1, 0, 6, 0, 1]
    t = _FakeState()
    chains.start(t)
    assert sum(chains.step(t, Load(0, r, 7, r, 1)) for r in (0, 2, 3, 4, 5, 9)) == 4


def test_cost_json_counts_misses_and_inserts(capsys):
    """The report shows what each path does to the map (hash_counter.c: a miss inserts)."""
    code, out, err = run_cli(capsys, "cost", "--json", built("clang/hash_counter.o"))
    assert code == 0, err
    paths = json.loads(out)["programs"][0]["paths"]
    missed = [p for p in paths if p["counts"]["lookup_miss"]]
    assert missed and all(p["counts"]["lookup_miss"] == {"hash": 1} for p in missed)
    assert all(p["counts"]["insert"] == {"hash": 1} and not p["counts"]["update"] for p in missed)
    assert any(p["counts"]["lookup"] == {"hash": 1} and not p["counts"]["insert"] for p in paths)


def test_savings_of_the_dispatcher():
    prof = made_profile()
    obj = load_object(built("clang/tailcall_dispatch.o"))
    counted = count(obj, obj.program("xdp_dispatch"))
    for pc in path_costs(counted, prof):
        pr = pc.prices[pc.worst]
        if pc.path.tail_calls:
            assert pr.parts["tail_calls"] == pytest.approx(prof.tail_call["variable"])
            assert pr.saving_const == pytest.approx(prof.tail_call["variable"] - prof.tail_call["constant"])
            assert pr.saving_merge == pytest.approx(max(prof.tail_call["variable"] - prof.insn["goto"], 0))
        else:
            assert pr.parts["tail_calls"] == pr.saving_merge == pr.saving_const == 0


# --------------------------------------------------------------------------- the command


FOREIGN = "warning: the profile is from another machine"


def run_cli(capsys, *argv, foreign_warning: bool = False) -> tuple[int, str, str]:
    """Run the CLI; the shipped profile is from another machine, so its one-line warning
    is dropped from stderr unless `foreign_warning` (test_foreign_profile_warns_once)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    if not foreign_warning:
        err = "".join(line for line in err.splitlines(keepends=True) if FOREIGN not in line)
    return code, out, err


def here_profile(tmp_path, **change) -> Path:
    """The made-up profile (on this machine's CPU and kernel, not fitted), with `change`."""
    doc = made_profile().to_json() | {"path_ns": 0.0} | change
    path = tmp_path / "here.json"
    path.write_text(json.dumps(doc))
    return path


def test_cost_text(capsys, tmp_path):
    code, out, err = run_cli(
        capsys, "cost", "--profile", str(here_profile(tmp_path)), str(built("clang/tailcall_dispatch.o"))
    )
    assert code == 0 and not err
    assert "worst: path #" in out and "% of it in tail calls" in out
    assert "merging the tail-called programs saves up to" in out
    assert "tail-call site xdp_dispatch:53: variable index in the kernel (3 different constant indices" in out


def test_cost_json(capsys):
    code, out, _ = run_cli(capsys, "cost", "--json", str(built("clang/tailcall_dispatch.o")))
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "xdp2tc.cost/1" and not doc["errors"]
    disp = next(p for p in doc["programs"] if p["program"] == "xdp_dispatch")
    assert disp["summary"]["paths"] == 12
    tcp = [p for p in disp["paths"] if p["programs"] == ["xdp_dispatch", "xdp_handle_tcp"]]
    assert tcp and all(p["chain_depth"] == 1 and p["tail_calls"][0]["kind"] == "variable" for p in tcp)
    assert all(p["ns"]["min"] <= p["ns"]["median"] <= p["ns"]["max"] for p in disp["paths"])
    assert {e["to"].rsplit(":", 1)[1] for e in doc["graph"]["edges"]} == {
        "xdp_handle_tcp",
        "xdp_handle_udp",
        "xdp_handle_icmp",
    }


def test_prog_array_mapping_composes_costs(capsys):
    var, disp = built("clang/tailcall_variable.o"), built("clang/tailcall_dispatch.o")
    code, out, _ = run_cli(capsys, "cost", "--json", str(var), "--prog-array", f"dscp_progs=0:{disp}:xdp_handle_tcp")
    assert code == 0
    doc = json.loads(out)
    prog = next(p for p in doc["programs"] if p["program"] == "xdp_tailcall_variable")
    handler = next(p for p in doc["programs"] if p["program"] == "xdp_handle_tcp")
    assert handler["root"] is False
    cont = [p["continues"] for p in prog["paths"] if p["continues"] and p["continues"]["targets"]]
    assert cont, "the variable-index tail call continues in the mapped handler"
    hmin, hmax = handler["summary"]["ns"]["min"], handler["summary"]["ns"]["max"]
    for c, p in ((p["continues"], p) for p in prog["paths"] if p["continues"] and p["continues"]["ns"]):
        assert c["ns"]["min"] == pytest.approx(p["ns"]["min"] + hmin, abs=1e-3)
        assert c["ns"]["max"] == pytest.approx(p["ns"]["max"] + hmax, abs=1e-3)
        assert c["chain_depth"] == 1
    edges = [e for e in doc["graph"]["edges"] if e["source"] == "prog-array"]
    assert len(edges) == 1 and edges[0]["kind"] == "variable" and edges[0]["index"] == 0


def test_tail_call_cycle_is_an_error(capsys):
    var = built("clang/tailcall_variable.o")
    code, out, err = run_cli(capsys, "cost", str(var), "--prog-array", f"dscp_progs=3:{var}:xdp_tailcall_variable")
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xdp2tc: cost: tail-call cycle ")
    assert "Traceback" not in err and out  # the report is still printed


def test_chain_deeper_than_33_is_an_error():
    """A synthetic graph of 35 programs in a row (34 tail calls), without 35 objects."""
    import networkx as nx

    from analyzer.cost.tailgraph import Node, TailGraph

    g = TailGraph.__new__(TailGraph)
    g.graph = nx.DiGraph()
    nx.add_path(g.graph, [Node("chain.o", f"p{i}") for i in range(35)])
    errors = g._check()
    assert len(errors) == 1 and errors[0].startswith("tail-call chain of 34 calls from chain.o:p0")
    assert "deeper than the kernel's limit of 33" in errors[0]
    g.graph.remove_node(Node("chain.o", "p34"))
    assert g._check() == []  # 33 tail calls: what the kernel allows


def test_graph_dot_and_svg(capsys):
    disp = built("clang/tailcall_dispatch.o")
    code, out, _ = run_cli(capsys, "cost", "--graph", str(disp))
    assert code == 0 and out.startswith('digraph "tail calls"')
    assert out.count("->") == 3 and "jmp_table[?] variable" in out
    import shutil

    require(shutil.which("dot") is not None, "graphviz's dot is not installed (make setup installs it)")
    code, out, _ = run_cli(capsys, "cost", "--graph", "--svg", str(disp))
    assert code == 0 and "<svg" in out


@pytest.mark.parametrize(
    "args, what",
    [
        (["--prog-array", "nonsense"], "expected MAP=IDX:FILE:PROG"),
        (["--prog-array", "nomap=0:x.o:p"], "no map 'nomap'"),
        (["--profile", "/nonexistent/p.json"], "cannot read the profile"),
        (["--svg"], "--svg needs --graph"),
        (["--program", "nope"], "no program named 'nope'"),
    ],
)
def test_cost_bad_input(capsys, args, what):
    code, out, err = run_cli(capsys, "cost", str(built("clang/tailcall_variable.o")), *args)
    assert code == 2
    assert err.count("\n") == 1 and what in err and "Traceback" not in err


def test_cost_bad_object(capsys, tmp_path):
    bad = tmp_path / "bad.o"
    bad.write_bytes(b"not an elf")
    code, _, err = run_cli(capsys, "cost", str(bad))
    assert code == 2 and err.startswith("xdp2tc: ") and err.count("\n") == 1


def test_parse_mapping():
    m = parse_mapping("jmp=3:dir/a.o:xdp_b")
    assert (m.map, m.index, m.file, m.program) == ("jmp", 3, "dir/a.o", "xdp_b")
    with pytest.raises(ValueError):
        parse_mapping("jmp=x:a.o:b")


# --------------------------------------------------------------------------- calibration


@pytest.mark.kernel
def test_calibrate_writes_a_profile(capsys, tmp_path):
    """A quick calibration (few repeats, one round): every entry present and finite; the
    numbers themselves are not checked (no timing thresholds in unit tests)."""
    require_kernel()
    try:
        kernel.check_kernel()
    except kernel.KernelUnavailable as err:
        require(False, str(err))
    out = tmp_path / "p.json"
    fit_on = [str(built(f"clang/{n}.o")) for n in ("tailcall_dispatch", "bounded_loop", "thesis_static_rules")]
    code, text, err = run_cli(
        capsys,
        "calibrate",
        "--out",
        str(out),
        "--repeat",
        "200",
        "--rounds",
        "1",
        "--scale",
        "0.1",
        "--fit-repeat",
        "50",
        "--fit-rounds",
        "1",
        *[a for f in fit_on for a in ("--fit", f)],
    )
    assert code == 0, err
    prof = load_profile(out)
    made = made_profile()
    # a helper the running kernel refuses in XDP programs has no price, and says why (Linux
    # 6.18.44 refuses bpf_xdp_adjust_meta); every other entry is measured
    unmeasured = prof.method["unmeasured"]
    for entry, why in unmeasured.items():
        assert entry.startswith("helper.") and any(w in why for w in calibrate.NO_SUCH_HELPER), (entry, why)
        assert f"{entry} not measured" in text and any(entry in note for note in prof.notes)
    gone = {e.split(".", 1)[1] for e in unmeasured}
    for table in ("insn", "helper", "lookup", "tail_call", "call"):
        want = set(getattr(made, table)) - {fit.CHAIN} - (gone if table == "helper" else set())
        assert set(getattr(prof, table)) - {fit.CHAIN} == want, table
        assert all(math.isfinite(x) and x >= 0 for x in getattr(prof, table).values())
    assert set(prof.update) == set(calibrate.UPDATE_MAPS)
    assert set(prof.insert) == set(calibrate.INSERT_MAPS)
    assert set(prof.lookup_miss) == set(calibrate.LOOKUP_MAPS)
    for table in (prof.update, prof.insert, prof.lookup_miss):
        assert all(math.isfinite(x) and x >= 0 for x in table.values())
    assert prof.kernel == __import__("platform").release()
    assert "profile for kernel" in text and "instruction prices fitted on" in text
    assert prof.fit["cross_validation"]["paths"] >= 16 and prof.fit["fitted_on"] == sorted(fit_on)
    # the profile prices paths
    obj = load_object(built("clang/tailcall_dispatch.o"))
    counted = count(obj, obj.program("xdp_dispatch"))
    for p in counted.exploration.paths:
        for vec in counted.vectors(p)[0]:
            assert price(vec, taken_tail_calls(p), counted, prof).ns >= 0


@pytest.mark.parametrize("field", ["cpu", "kernel"])
def test_foreign_profile_warns_once(capsys, tmp_path, field):
    """Prices from another machine: one line on stderr naming what differs and suggesting
    calibrate; the report says so too. None with this machine's CPU and kernel."""
    other = here_profile(tmp_path, **{field: "something else"})
    code, out, err = run_cli(
        capsys, "cost", "--profile", str(other), str(built("clang/tailcall_dispatch.o")), foreign_warning=True
    )
    assert code == 0
    lines = err.splitlines()
    assert len(lines) == 1 and "another machine" in lines[0] and "something else" in lines[0]
    assert "xdp2tc calibrate" in lines[0]
    assert "MEASURED ON ANOTHER MACHINE" in out
    here = str(here_profile(tmp_path))
    code, out, err = run_cli(capsys, "cost", "--profile", here, str(built("clang/icmp_filter.o")), foreign_warning=True)
    assert code == 0 and err == "" and "ANOTHER MACHINE" not in out
    assert "from micro-programs only" in out


def test_cost_json_machine_independent_figures(capsys, tmp_path):
    code, out, _ = run_cli(
        capsys, "cost", "--json", "--profile", str(here_profile(tmp_path)), str(built("clang/thesis_static_rules.o"))
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["profile"]["foreign"] is None and doc["profile"]["fit"] is None
    for prog in doc["programs"]:
        ratios = [p["ratio_to_cheapest"] for p in prog["paths"]]
        assert min(ratios) == pytest.approx(1.0, abs=0.01) and all(r >= 0.99 for r in ratios)
        for p in prog["paths"]:
            assert sum(p["counts"]["insn"].values()) == p["insns"]["max"] or not p["exact"] or p["subpaths"] > 1


def test_nnls_recovers_known_prices():
    """Synthetic paths priced with known per-class prices (one zero) plus noise-free
    path term: NNLS gives them back; a price that would go negative stays at 0."""
    import random

    rng = random.Random(7)
    truth = [0.05, 0.3, 0.0, 1.2]
    rows = [[rng.randint(0, 40) for _ in truth] for _ in range(60)]
    target = [sum(a * b for a, b in zip(r, truth)) for r in rows]
    assert fit.nnls(rows, target) == pytest.approx(truth, abs=1e-6)
    # a least-squares price below zero is clamped: y = 2*x0 - 1*x1 fits x1 = 0 under NNLS
    rows2 = [[i, i % 3] for i in range(1, 30)]
    got = fit.nnls(rows2, [2 * a - b for a, b in rows2])
    assert got[1] == 0 and got[0] > 0


def _synthetic_rows(prices: dict[str, float], path_ns: float, overhead: float, n: int, seed: int) -> list[dict]:
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        counts = {f"insn.{c}": rng.randint(1, 60) for c in prices}
        fixed = rng.choice([0.0, 4.5, 9.0])
        measured = overhead + path_ns + fixed + sum(prices[c] * counts[f"insn.{c}"] for c in prices)
        rows.append(
            {"object": f"build/clang/prog{i % 12}.o", "counts": counts, "fixed_ns": fixed, "measured_ns": measured}
        )
    return rows


def test_fit_profile_recovers_prices_and_reports_its_error():
    prof = made_profile()
    truth = {"alu": 0.02, "jump": 0.11, "load_pkt": 0.07, "store_stack": 0.3}
    rows = _synthetic_rows(truth, 6.0, prof.overhead_ns, 80, 1)
    fitted = fit.fit_profile(prof, rows)
    for c, v in truth.items():
        assert fitted.insn[c] == pytest.approx(v, abs=1e-3)
    assert fitted.path_ns == pytest.approx(6.0, abs=1e-2)
    assert fitted.insn["div"] == prof.insn["div"]  # never executed: keeps its micro price
    cv = fitted.fit["cross_validation"]
    assert cv["paths"] == 80 and cv["within_20pct"] == 1.0 and cv["median_abs_error"] < 1e-3
    assert fitted.fit["classes"] == sorted(truth)
    again = Profile.from_json(json.loads(json.dumps(fitted.to_json())))
    assert again.path_ns == fitted.path_ns and again.fit == fitted.fit
    # the per-path term is part of every path's price
    obj = load_object(built("clang/icmp_filter.o"))
    counted = count(obj, obj.program(None))
    p = counted.exploration.paths[0]
    vec = counted.vectors(p)[0][0]
    assert price(vec, taken_tail_calls(p), counted, fitted).parts["insns"] == pytest.approx(
        fitted.path_ns
        + sum(n * fitted.insn[k[5:]] for k, n in vec.items() if k.startswith("insn."))
        + vec.get("chain", 0) * fitted.insn[fit.CHAIN]
    )


def test_micro_profile_undoes_the_fit():
    """The held-back check starts from the micro prices a fit kept, not the fitted ones."""
    prof = made_profile()
    fitted = fit.fit_profile(prof, _synthetic_rows({"alu": 0.02, "jump": 0.11}, 6.0, prof.overhead_ns, 80, 1))
    assert fitted.insn["alu"] != prof.insn["alu"]
    back = fit.micro_profile(fitted)
    assert back.insn["alu"] == prof.insn["alu"] and back.insn["jump"] == prof.insn["jump"]
    assert back.path_ns == 0.0 and not back.fit and fit.CHAIN not in back.insn
    assert fit.micro_profile(prof) is prof


def test_fit_needs_enough_paths():
    prof = made_profile()
    with pytest.raises(ValueError, match="too few"):
        fit.fit_profile(prof, _synthetic_rows({"alu": 0.1}, 1.0, prof.overhead_ns, 5, 2))


def test_calibrate_bad_options(capsys):
    code, _, err = run_cli(capsys, "calibrate", "--repeat", "0")
    assert code == 2 and "at least 1" in err
    code, _, err = run_cli(capsys, "calibrate", "--no-fit", "--fit", "x.o")
    assert code == 2 and "contradict" in err


def test_path_time_estimators_by_hand():
    """A path's rounds and the empty program's beside them made one time, each estimator
    worked out by hand: the mean of the fastest half of each (the default), the fastest
    round, the medians, the median of the per-round differences; without rounds of the
    empty program, the profile's overhead."""
    runs, base = [30, 28, 35, 29], [21, 22, 21, 25]
    assert pathtiming.ESTIMATOR == "fastest_half"
    # fastest halves: 28, 29 -> 28.5; 21, 21 -> 21
    assert pathtiming.estimate(runs, base, 99.0) == (28.5, 21.0, 7.5)
    assert pathtiming.estimate(runs, base, 99.0, "minimum") == (28, 21, 7)
    assert pathtiming.estimate(runs, base, 99.0, "median") == (29.5, 21.5, 8.0)
    # differences 9, 6, 14, 4: median 7.5 beside the path's median 29.5
    assert pathtiming.estimate(runs, base, 99.0, "paired_median") == (29.5, 22.0, 7.5)
    assert pathtiming.estimate(runs, [], 20.0) == (28.5, 20.0, 8.5)
    assert pathtiming.gross_time([27, 26, 40]) == 26  # one round of three is the fastest half
    with pytest.raises(ValueError):
        pathtiming.estimate([], [], 20.0)
