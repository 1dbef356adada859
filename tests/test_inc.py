"""In-network allreduce (spec 04): control plane, data plane, retransmission, fallback, reproducibility."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emu.sim import EngineNet
from emu.wire import HDR_LEN, PacketType, parse_frame
from emu.wire.inc import DATA, F_RESULT
from emu.nodes.collectives.comm import Comm
from emu.topologies import build


def managed(spec="fattree:k=4,n=2", **settings):
    t = build(spec, settings=settings or None)
    t.add_manager()
    return t


def inputs(n, count, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return [(rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, count)).astype(dtype) for _ in range(n)]
    return [rng.integers(-1000, 1000, count).astype(dtype) for _ in range(n)]


async def allreduce_app(host, members, xs, op="sum", reproducible=False, schedule=None, algo=None):
    comm = Comm(host, members)
    comm.reproducible = reproducible
    comm.inc_schedule = schedule
    comm.inc_algo = algo
    y = await comm.allreduce(xs[comm.rank], op, offload="switch")
    return y, comm.last_algo


def ptype(f):
    return parse_frame(f)[4]


def test_every_rank_gets_the_reduction_through_the_tree_and_the_load_is_the_tree_model():
    t = managed()
    hosts = t.host_names()
    xs = inputs(16, 5000, np.int32)
    net = EngineNet(t)
    res = net.run({h: (allreduce_app, hosts, xs) for h in hosts})
    ref = np.sum(xs, axis=0, dtype=np.int32)
    for h in hosts:
        y, algo = res[h]
        assert np.array_equal(y, ref) and algo.startswith("switch(tree")
    mgr = net.engines["mgr"]
    assert mgr.stats["inc_grants"] == 16 and mgr.stats["inc_installs"] == 5  # s0..s3 and the top s4
    root, tree = t.spanning_tree(hosts)
    links = 16 + len(tree) - 1
    blocks = -(-5000 // 256)
    inc = [f for _t, _n, _p, f in net.delivered if ptype(f) == PacketType.INC]
    up = [f for f in inc if not DATA.unpack(f, HDR_LEN)[1] & F_RESULT]
    assert len(up) == blocks * links and len(inc) == 2 * blocks * links  # each block: once up, once down each link
    assert sum(net.engines[s].stats.get("inc_blocks", 0) for s in tree) == blocks * len(tree)


@pytest.mark.parametrize("faults", [dict(drop=0.03), dict(duplicate=0.2, reorder=0.3),
                                    dict(drop=0.02, duplicate=0.1, reorder=0.2)])
def test_retransmissions_are_never_aggregated_twice(faults):
    t = managed(elan={"max_tries": 8})
    hosts = t.host_names()
    xs = inputs(16, 3000, np.int64, seed=2)
    net = EngineNet(t, seed=5, **faults)
    res = net.run({h: (allreduce_app, hosts, xs) for h in hosts})
    ref = np.sum(xs, axis=0)
    assert all(np.array_equal(res[h][0], ref) for h in hosts)  # int sums: one packet added twice shows
    dup = sum(e.stats.get("inc_duplicates", 0) for e in net.engines.values() if e.kind == "switch")
    resent = sum(net.engines[h].mechanism("inc").stats["inc_resent"] for h in hosts)
    assert dup > 0 and (resent > 0 or not faults.get("drop"))


def test_a_full_switch_makes_the_manager_try_another_tree_then_reject_and_the_host_falls_back():
    t = managed(pu={"max_allreduces": 2})
    xs = {k: inputs(2, 700, np.int32, seed=k) for k in range(4)}
    comms = [["h0", "h4"], ["h8", "h12"], ["h1", "h9"], ["h2", "h10"]]
    net = EngineNet(t)
    got = {}
    for k, members in enumerate(comms):  # one after the other: each finds what the earlier ones took
        res = net.run({h: (allreduce_app, members, xs[k]) for h in members})
        for h in members:
            y, algo = res[h]
            assert np.array_equal(y, xs[k][0] + xs[k][1])
            got[k] = algo
    acts = [a for _t, a in net.engines["mgr"].actions]
    assert any("s4 refused; another tree without it" in a for a in acts)
    assert any("rooted at s5" in a for a in acts)                              # comm 2 went over s5
    assert got[0].startswith("switch(") and got[2].startswith("switch(")
    assert "switch offload rejected: no reduction tree has room" in got[3]      # s0 and s2 are full
    assert not got[3].startswith("switch(")


async def three_communicators(host, members, xs):
    """Communicator 1 holds its allreduce; 2 (same hosts) finds no room and falls back; 1 frees it;
    3 is granted the room 1 had."""
    algos, ys = [], []
    c1 = Comm(host, members, comm_id=1)
    for comm in (c1, Comm(host, members, comm_id=2)):
        ys.append(await comm.allreduce(xs[comm.rank], "sum", offload="switch"))
        algos.append(comm.last_algo)
    await c1.free()
    c3 = Comm(host, members, comm_id=3)
    ys.append(await c3.allreduce(xs[c3.rank] + 1, "sum", offload="switch"))
    algos.append(c3.last_algo)
    await c3.free()
    return ys, algos


def test_a_freed_communicator_releases_the_switches_memory_for_the_next_one():
    t = managed(pu={"max_allreduces": 1})
    xs = inputs(2, 700, np.int32, seed=3)
    net = EngineNet(t)
    members = ["h0", "h1"]  # both under edge switch s0: one allreduce fills it
    res = net.run({h: (three_communicators, members, xs) for h in members})
    ref = xs[0] + xs[1]
    for h in members:
        ys, algos = res[h]
        assert all(np.array_equal(y, ref + k // 2 * 2) for k, y in enumerate(ys))
        assert algos[0].startswith("switch(") and algos[2].startswith("switch(")
        assert "switch offload rejected: no reduction tree has room" in algos[1]
    mgr = net.engines["mgr"]
    assert mgr.stats["inc_releases"] == 2 and mgr.stats["inc_grants"] == 4 and mgr.stats["inc_rejects"] == 2
    assert not net.engines["s0"].agg.installs  # both released: the switch is empty again
    hosts_done = [net.engines[h].mechanism("inc").stats for h in members]
    assert all(st["inc_stray"] == 0 for st in hosts_done)


def test_the_reproducible_mode_gives_the_same_bits_whatever_the_arrival_order():
    t = managed()
    hosts = t.host_names()
    xs = inputs(16, 2048, np.float32, seed=7)
    bits = {True: set(), False: set()}
    for seed in range(4):
        for repro in (True, False):
            net = EngineNet(t, seed=seed, reorder=0.6, reorder_ns=3000)
            res = net.run({h: (allreduce_app, hosts, xs, "sum", repro) for h in hosts})
            bits[repro].add(res["h3"][0].tobytes())
            np.testing.assert_allclose(res["h3"][0], np.sum(np.array(xs, np.float64), axis=0), rtol=1e-3, atol=1e-2)
    assert len(bits[True]) == 1 and len(bits[False]) > 1


def test_hosts_send_their_blocks_staggered():
    # one cluster of 8 cores a switch, the single buffer: with a block's packets together its unit
    # cannot keep up with its 4 links, so the manager asks the ranks to keep a handler time apart
    t = managed(pu={"clusters": 1})
    hosts = t.host_names()
    xs = inputs(16, 16 * 256, np.float32)
    net = EngineNet(t)
    net.run({h: (allreduce_app, hosts, xs, "sum", False, None, "single") for h in hosts})
    first = {}
    for _t, node, _p, f in net.delivered:
        if ptype(f) == PacketType.INC and not DATA.unpack(f, HDR_LEN)[1] & F_RESULT:
            src = parse_frame(f)[0]
            if src < 16 and src not in first:
                first[src] = DATA.unpack(f, HDR_LEN)[3]
    # the source's staggered sending: 16 blocks, one group (the spacing asks for more), 16 ranks:
    # rank r starts at block r * 16 // 16
    assert first == {r: r for r in range(16)}


def test_hosts_spread_their_starting_blocks_over_the_window_or_rotate_by_name():
    t = managed(pu={"clusters": 1})
    hosts = t.host_names()[:8]
    xs = inputs(8, 32 * 256, np.float32)
    firsts = {}
    for schedule in ("staggered", "rotated", "in order"):
        net = EngineNet(t)
        res = net.run({h: (allreduce_app, hosts, xs, "sum", False, schedule, "single") for h in hosts})
        np.testing.assert_allclose(res["h3"][0], np.sum(np.array(xs, np.float64), axis=0), rtol=1e-4, atol=1e-3)
        first = firsts[schedule] = {}
        for _t, node, _p, f in net.delivered:
            if ptype(f) == PacketType.INC and not DATA.unpack(f, HDR_LEN)[1] & F_RESULT:
                src = parse_frame(f)[0]
                if src < 8 and src not in first:
                    first[src] = DATA.unpack(f, HDR_LEN)[3]
    # 32 blocks over 8 ranks: the source's spreads them 4 blocks apart; rotated 1; in order all at 0
    assert firsts == {"staggered": {r: 4 * r for r in range(8)}, "rotated": {r: r for r in range(8)},
                      "in order": {r: 0 for r in range(8)}}


@pytest.mark.parametrize("dtype,op", [("int8", "max"), ("int16", "min"), ("float16", "sum"), ("float64", "prod"),
                                      ("uint32", "bxor")])
def test_types_and_operators(dtype, op):
    t = managed()
    hosts = t.host_names()[:8]
    xs = inputs(8, 600, dtype, seed=1)
    if op == "prod":
        xs = [np.abs(x) % 2 + 0.5 for x in xs]
    net = EngineNet(t)
    res = net.run({h: (allreduce_app, hosts, xs, op) for h in hosts})
    from emu.reduce import get_op, reference

    ref = reference(get_op(op), xs)
    y = res["h5"][0]
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(y.astype(np.float64), ref.astype(np.float64), rtol=2e-2 if dtype == "float16" else 1e-9,
                                   atol=2.0 if dtype == "float16" else 0)  # float16: ulp 0.5-1 near 1000
    else:
        assert np.array_equal(y, ref)


def test_emu_run_compares_the_offloads_on_the_same_workload():
    exe = str(Path(sys.executable).parent / "emu")
    times = {}
    for off in ("none", "switch"):
        out = subprocess.run([exe, "run", "--topo", "fattree:k=4,n=2", "--test", "allreduce", "--offload", off,
                              "--size", "64KiB"], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and "result=equal" in out.stdout, out.stdout + out.stderr
        times[off] = int(next(ln for ln in out.stdout.splitlines() if "│ allreduce" in ln).split("│")[3].replace(",", ""))
    assert times["switch"] < times["none"]
    bad = subprocess.run([exe, "run", "--topo", "star:n=4", "--test", "allgather", "--offload", "switch"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "cannot be offloaded to the switches; allreduce, reduce, bcast and barrier can" in bad.stdout + bad.stderr


def test_the_manager_picks_the_algorithm_by_size_and_a_full_packet_memory_is_recovered_by_retransmission():
    from emu.switch.aggregate.control import algorithm
    from emu.wire.inc import Algo

    assert [algorithm(n << 10, False) for n in (600, 300, 200, 64)] == [Algo.SINGLE, Algo.MULTI4, Algo.MULTI2,
                                                                         Algo.TREE]
    assert algorithm(600 << 10, True) == Algo.TREE  # reproducible: always the tree
    t = managed(pu={"packet_memory_bytes": 8192, "cores_per_cluster": 1, "subset": 1, "clusters": 1},
                elan={"max_tries": 100, "retransmit_ns": 20_000})
    hosts = t.host_names()
    xs = inputs(16, 4096, np.int32, seed=9)
    net = EngineNet(t)
    res = net.run({h: (allreduce_app, hosts, xs) for h in hosts})
    assert all(np.array_equal(res[h][0], np.sum(xs, axis=0, dtype=np.int32)) for h in hosts)
    drops = sum(e.stats.get("inc_drops", 0) for e in net.engines.values() if e.kind == "switch")
    assert drops > 0 and sum(net.engines[h].mechanism("inc").stats["inc_resent"] for h in hosts) > 0


def test_a_user_defined_operator_runs_in_the_switches():
    from emu.reduce import OPS, Op, register

    register(Op("absmax", lambda a, b: np.where(np.abs(a) >= np.abs(b), a, b)))
    try:
        t = managed()
        hosts = t.host_names()[:4]
        xs = inputs(4, 300, np.int32, seed=4)
        res = EngineNet(t).run({h: (allreduce_app, hosts, xs, "absmax") for h in hosts})
        stack = np.stack(xs)
        ref = stack[np.argmax(np.abs(stack), axis=0), np.arange(300)]
        assert np.array_equal(np.abs(res["h2"][0]), np.abs(ref)) and res["h2"][1].startswith("switch(")
    finally:
        OPS.pop("absmax", None)


async def calls_app(host, members, sizes):
    comm = Comm(host, members)
    out = []
    for k, n in enumerate(sizes):  # several calls on one granted allreduce, of different sizes
        y = await comm.allreduce(np.full(n, comm.rank + k, np.int32), offload="switch")
        out.append(y)
    return out


def test_successive_calls_on_one_allreduce_never_mix_their_blocks():
    t = managed()
    hosts = t.host_names()
    res = EngineNet(t).run({h: (calls_app, hosts, [64, 4096, 64, 1000]) for h in hosts})
    for k, n in enumerate([64, 4096, 64, 1000]):
        assert np.array_equal(res["h0"][k], np.full(n, sum(range(16)) + 16 * k, np.int32)), k


def test_the_measurement_script_matches_its_model_where_the_processing_unit_limits(tmp_path):
    from load_script import load

    mod = load("inc_allreduce")
    rows = mod.main(["--sizes", "64KiB", "--scale", "fattree:k=2,n=3", "--scale-size", "16KiB", "--out", str(tmp_path)])
    star = {(r["algo"], r["dtype"]): r for r in rows if r["topology"].startswith("star")}
    for algo in ("single", "multi2", "multi4", "tree"):
        r = star[(algo, "float32")]
        assert 0.9 * r["model_gbps"] <= r["gbps_per_host"] <= 1.02 * r["model_gbps"], r  # PU-bound: the model holds
    scale = {r["algo"]: r for r in rows if r["topology"] == "fattree:k=2,n=3"}
    assert scale["tree"]["completion_ns"] < scale["host ring"]["completion_ns"]
    assert scale["tree"]["link_bytes"] < scale["host ring"]["link_bytes"]
    assert (tmp_path / "inc_allreduce.png").stat().st_size > 0


def sparse_vec(rank, length, density, dtype=np.int32):
    rng = np.random.default_rng([rank, int(density * 1e6)])
    idx = np.sort(rng.choice(length, int(length * density), replace=False))
    return idx, rng.integers(1, 100, len(idx)).astype(dtype)


async def sparse_app(host, length, density, offload="switch", span=None):
    c = Comm(host)
    idx, v = sparse_vec(c.rank, length, density)
    return await c.allreduce_sparse(idx, v, length, offload=offload, span=span), c.last_algo


@pytest.mark.parametrize("density,faults", [(0.0, {}), (0.01, {}), (0.1, {}), (0.05, dict(drop=0.03))])
def test_sparse_blocks_travel_as_index_value_shards_and_sum_exactly(density, faults):
    t = managed(elan={"max_tries": 20})
    hosts = t.host_names()
    length = 20_000
    net = EngineNet(t, seed=3, **faults)
    # with lost frames, give the span: the default asks a host allreduce, whose messages are not resent
    span = 2560 if faults else None
    res = net.run({h: (sparse_app, length, density, "switch", span) for h in hosts})
    ref = np.zeros(length, np.int32)
    for r in range(16):
        i, v = sparse_vec(r, length, density)
        ref[i] += v
    assert all(np.array_equal(res[h][0], ref) for h in hosts)
    assert res["h0"][1].startswith("switch(sparse")
    inc = [f for _t, _n, _p, f in net.delivered if ptype(f) == PacketType.INC]
    shards = [DATA.unpack(f, HDR_LEN) for f in inc]
    assert all(s[1] & 0x04 for s in shards)  # every INC packet is a sparse one
    if density == 0.0:  # all-zero blocks still go, as one empty shard each, so the counts complete
        assert all(s[6] == 0 for s in shards)
    if not faults:
        dense = net.run({h: (sparse_app, length, density, None) for h in hosts})
        assert np.array_equal(dense["h3"][0], ref)  # the host-software path agrees


async def store_app(host, length, density, store):
    c = Comm(host)
    c.inc_store = store
    idx, v = sparse_vec(c.rank, length, density)
    return await c.allreduce_sparse(idx, v, length, span=2048), c.last_algo


def test_hash_tables_at_the_leaves_spill_extra_traffic_arrays_send_none_and_both_sum_exactly():
    length = 32_768
    traffic = {}
    for density, store in ((0.05, "auto"), (0.05, "array"), (0.12, "auto")):
        ref = np.zeros(length, np.int32)
        for r in range(16):
            i, v = sparse_vec(r, length, density)
            ref[i] += v
        t = managed()
        net = EngineNet(t)
        res = net.run({h: (store_app, length, density, store) for h in t.host_names()})
        assert all(np.array_equal(res[h][0], ref) for h in t.host_names())
        spills = sum(net.engines[s].stats.get("inc_spills", 0) for s in ("s0", "s1", "s2", "s3"))
        up = sum(len(f) for _t, n, _p, f in net.delivered if n == "s4" and ptype(f) == PacketType.INC)
        traffic[(density, store)] = (spills, up)
    assert traffic[(0.05, "array")][0] == 0 and 0 < traffic[(0.05, "auto")][0] < traffic[(0.12, "auto")][0]
    assert traffic[(0.05, "auto")][1] > traffic[(0.05, "array")][1]  # spilled pairs are extra bytes upward


async def barrier_app(host, enter):
    c = Comm(host)
    await host.sleep(enter[c.rank])
    await c.barrier(offload="switch")
    return host.now, c.last_algo


def test_a_barrier_is_an_allreduce_of_zero_bytes_through_the_switches():
    t = managed()
    hosts = t.host_names()
    enter = [(131 * r) % 4000 for r in range(16)]
    net = EngineNet(t)
    res = net.run({h: (barrier_app, enter) for h in hosts})
    assert min(v[0] for v in res.values()) >= max(enter)  # nobody left before the last one came
    assert res["h0"][1].startswith("switch(barrier, ")
    inc = [f for _t, _n, _p, f in net.delivered if ptype(f) == PacketType.INC]
    assert all(DATA.unpack(f, HDR_LEN)[6] == 0 for f in inc)  # packets without data
    root, tree = t.spanning_tree(hosts)
    assert len(inc) == 2 * (16 + len(tree) - 1)  # one block: once up and once down each tree link


async def sparse_host_app(host, length, density, algo=None):
    c = Comm(host)
    idx, v = sparse_vec(c.rank, length, density)
    y = await c.allreduce_sparse(idx, v, length, offload=None, algo=algo)
    return y, c.last_algo


@pytest.mark.parametrize("density", [0.001, 0.3])
def test_the_sparcml_style_host_baseline_sums_exactly_and_sends_pairs_while_sparse(density):
    t = build("fattree:k=2,n=3")
    length = 8192
    ref = np.zeros(length, np.int32)
    for r in range(8):
        i, v = sparse_vec(r, length, density)
        ref[i] += v
    split_bytes = None
    for algo, steps in ((None, 2 * 7), ("recursive_doubling", 3)):
        net = EngineNet(t)
        res = net.run({h: (sparse_host_app, length, density, algo) for h in t.host_names()})
        assert all(np.array_equal(res[h][0], ref) for h in t.host_names())
        assert res["h0"][1] == ("sparse split allgather" if algo is None else "sparse recursive doubling")
        sent = sum(e.stats["messages_sent"] for n, e in net.engines.items() if e.kind == "host")
        msgs = [f for _t, n, _p, f in net.delivered if n.startswith("h") and ptype(f) == PacketType.MSG]
        data = sum(len(f) for f in msgs)
        dense_bytes = 8 * 3 * length * 4 if algo else 2 * 8 * 7 * (length // 8) * 4  # every message dense
        assert sent == 8 * steps and ((data < dense_bytes / 10) if density < 0.01 else (data > dense_bytes / 2))
        split_bytes = data if algo is None else split_bytes
    if density > 0.1:  # split allgather: 30 % of a slice as pairs (8 B each) is less than the dense slice
        # (4 B each): pairs in the split phase; a partition's sum is 94 % full: dense slices in the allgather
        dense_slice = 1 + (length // 8) * 4
        assert 56 * dense_slice < split_bytes < 56 * 2 * dense_slice


def test_a_sparse_slice_goes_as_pairs_until_the_dense_slice_is_smaller():
    from emu.nodes.collectives.sparse import _encode_slice, bounds

    assert bounds(10, 3) == [0, 3, 6, 10]
    vals = np.arange(1, 5, dtype=np.float32)
    assert _encode_slice(np.array([10, 11, 12, 13]), vals, 10, 18)[:1] == b"D"   # 4 x 8 B pairs = 8 x 4 B dense
    assert _encode_slice(np.array([10, 11, 12]), vals[:3], 10, 18)[:1] == b"S"


def test_the_sparse_measurement_script_runs_and_checks_every_result(tmp_path):
    from load_script import load

    mod = load("inc_sparse")
    rows = mod.main(["--densities", "0.1", "--length", "8192", "--scale", "fattree:k=2,n=2", "--scale-length", "16384",
                     "--buckets", "128", "--out", str(tmp_path)])
    by = {(r["topology"], r["method"]): r for r in rows}
    leaves = "fattree:k=4,n=2"
    assert by[(leaves, "sparse switch (hash leaves)")]["spill_bytes"] > 0 == by[(leaves, "sparse switch (arrays)")]["spill_bytes"]
    assert by[(leaves, "sparse switch (arrays)")]["link_bytes"] < by[(leaves, "dense host")]["link_bytes"]
    assert (tmp_path / "inc_sparse.csv").stat().st_size > 0
    # every figure with its index overlap; the leaves' uplinks: arrays meet the ideal, the hash stores' spill adds
    assert all("overlap" in r and 0 <= r["shared"] <= 1 for r in rows)
    hashed, arrays = by[(leaves, "sparse switch (hash leaves)")], by[(leaves, "sparse switch (arrays)")]
    assert arrays["leaf_uplink_bytes"] == arrays["model_leaf_uplink_bytes"] > 0
    assert hashed["leaf_uplink_bytes"] > hashed["model_leaf_uplink_bytes"] == arrays["model_leaf_uplink_bytes"]


async def rooted_app(host, x, root):
    c = Comm(host)
    mine = x if c.rank == root else np.zeros_like(x)
    b = await c.bcast(mine, root, offload="switch")
    r = await c.reduce(np.full(4, c.rank + 1, np.int64), "sum", root, offload="switch")
    return b, r, c.last_algo


def test_reduce_and_bcast_come_the_same_way_bcast_bit_for_bit():
    t = managed()
    hosts = t.host_names()
    x = np.array([np.nan, -0.0, 1e-310, np.inf, -np.pi] * 60, np.float64)  # bits a sum would not keep
    res = EngineNet(t).run({h: (rooted_app, x, 5) for h in hosts})
    for r, h in enumerate(hosts):
        b, red, _algo = res[h]
        assert b.tobytes() == x.tobytes()
        assert (red is None) == (r != 5)
    assert np.array_equal(res["h5"][1], np.full(4, sum(range(1, 17)), np.int64))


def test_emu_run_reduce_and_bcast_offloaded_to_the_switches():
    exe = str(Path(sys.executable).parent / "emu")
    for test in ("reduce", "bcast"):
        out = subprocess.run([exe, "run", "--topo", "fattree:k=4,n=2", "--test", test, "--offload", "switch",
                              "--size", "8KiB", "--root", "3"], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and "algo=switch(" in out.stdout and "result=equal" in out.stdout, \
            out.stdout + out.stderr
