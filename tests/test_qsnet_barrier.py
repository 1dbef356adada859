"""Hardware barriers and the tree reduction of the QsNet adapters (spec 03, nodes.nic.qsbarrier)."""

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import emu
from emu.sim import EngineNet
from emu.nodes.collectives.comm import Comm
from emu.nodes.collectives.hw import BARRIER_BASE, BARRIER_STRIDE, HW_GROUP
from emu.nodes.collectives.model import hw_polled_barrier_ns, hw_tree_barrier_ns
from emu.nodes.nic.qsbarrier import DONE, POLLED, TREE, Polled, PolledEvent, Tree, TreeEvent, tree_links
from emu.topologies import build


def star(n, settings=None):
    t = build(f"star:n={n}", settings=settings)
    t.add_group(HW_GROUP, t.host_names())
    return t


async def barrier_app(host, algo, branch, enter):
    c = Comm(host)
    await host.sleep(enter[c.rank])
    await c.barrier(offload="hw", algo=algo, branch=branch)
    return host.now


def skews(n):
    rng = random.Random(n)
    late_root = [rng.randrange(0, 5000) for _ in range(n)]
    late_root[0] = 9000
    return {"together": [0] * n, "skewed": [rng.randrange(0, 5000) for _ in range(n)], "late root": late_root}


@pytest.mark.parametrize("n", [5, 8, 13])
@pytest.mark.parametrize("skew", ["together", "skewed", "late root"])
def test_barrier_leave_times_equal_the_model_to_the_nanosecond(n, skew):
    t = star(n)
    host, link, sw = t.hosts[0].spec, t.links[0].spec, t.nodes["s0"].spec
    enter = skews(n)[skew]
    for algo, branch in [("tree", 1), ("tree", 2), ("tree", 3), ("tree", n - 1), ("polled", 4)]:
        net = EngineNet(t)
        res = net.run({h: (barrier_app, algo, branch, enter) for h in t.host_names()})
        got = [res[f"h{i}"] for i in range(n)]
        model = (hw_tree_barrier_ns(enter, branch, host, link, sw) if algo == "tree"
                 else hw_polled_barrier_ns(enter, host, link, sw))
        assert got == model, (algo, branch, got, model)
        assert min(got) >= max(enter) + host.elan.issue_ns  # nobody left before the last one entered
        polls = net.engines["h0"].mechanism("qsnet").stats["barrier_polls"]
        if algo == "polled":  # skewed arrival: the root's adapter polled until the last had entered
            assert (polls > 1) == any(e > enter[0] for e in enter[1:]), polls
        else:  # the tree: every adapter counted each of its children exactly once
            for v in range(n):
                kids = len(tree_links(n, branch, v)[1])
                assert net.engines[f"h{v}"].mechanism("qsnet").stats["barrier_events"] == kids


def test_the_barrier_state_tables_are_closed_and_terminal_states_have_no_exit():
    for table, states, events, terminal in [(POLLED, Polled, PolledEvent, {Polled.FAILED}),
                                            (TREE, Tree, TreeEvent, {Tree.DONE, Tree.FAILED})]:
        assert set(table) == set(states)
        for s, moves in table.items():
            assert set(moves) <= set(events) and set(moves.values()) <= set(states)
            assert (not moves) == (s in terminal)
        reachable, todo = set(), [next(iter(states))]
        while todo:
            s = todo.pop()
            if s not in reachable:
                reachable.add(s)
                todo.extend(table[s].values())
        assert reachable == set(states)  # no state the protocol can never be in
    # the polled root: poll, false, back off, retry, true, release, idle again
    s = Polled.IDLE
    for ev in (PolledEvent.POLL, PolledEvent.FALSE, PolledEvent.RETRY, PolledEvent.TRUE, PolledEvent.RELEASED):
        s = POLLED[s][ev]
    assert s is Polled.IDLE
    assert PolledEvent.RELEASED not in POLLED[Polled.POLLING]  # no release without a true conditional


async def nonblocking_app(host, algo, enter):
    c = Comm(host)
    await host.sleep(enter[c.rank])
    seqs = [await c.ibarrier(algo, branch=2) for _ in range(3)]  # three barriers entered, none waited for
    entered = host.now
    await host.compute(500)  # overlap: the adapters progress the barriers meanwhile
    await c.barrier_wait(seqs[2])  # wait until every process reached sequence 3
    after3 = host.now
    await c.barrier_wait(seqs[0])  # an older sequence: already complete
    return seqs, entered, after3, host.now


@pytest.mark.parametrize("algo", ["tree", "polled"])
def test_non_blocking_barriers_and_waiting_until_every_process_reached_sequence_n(algo):
    n = 8
    t = star(n)
    enter = [300 * ((5 * r) % n) for r in range(n)]
    net = EngineNet(t)
    res = net.run({h: (nonblocking_app, algo, enter) for h in t.host_names()})
    last_entry = max(r[1] for r in res.values())
    for seqs, entered, after3, after1 in res.values():
        assert seqs == [1, 2, 3]
        assert after3 >= last_entry and after1 == after3
    # the words the adapters wrote: done = 3 everywhere
    base = BARRIER_BASE + Comm(_Fake("h0", t)).id * BARRIER_STRIDE
    assert all(net.engines[h].mechanism("qsnet").mem.read_u64(base + DONE) == 3 for h in t.host_names())


class _Fake:
    """Just enough of a host for a Comm's id."""

    def __init__(self, name, t):
        self.name, self.hosts = name, t.host_names()


async def stuck_app(host, skip):
    c = Comm(host)
    if c.rank == skip:
        return "never entered"
    seq = await c.ibarrier("tree", branch=2)
    try:
        await c.barrier_wait(seq, timeout_ns=200_000)
    except RuntimeError as e:
        return str(e)
    return "left"


def test_a_barrier_a_rank_never_enters_times_out_with_where_it_stands_not_a_hang():
    t = star(6)
    res = EngineNet(t).run({h: (stuck_app, 4) for h in t.host_names()})
    assert res["h4"] == "never entered"
    for h in ("h0", "h1", "h2", "h3", "h5"):
        assert "hardware barrier 1 did not complete" in res[h] and "< 1 after 200000 ns" in res[h], res[h]


async def allreduce_app(host, x, op):
    c = Comm(host)
    return await c.allreduce(x[c.rank], op, offload="hw", branch=3)


@pytest.mark.parametrize("dtype,op", [("int32", "sum"), ("int64", "max"), ("int16", "min"), ("float64", "prod")])
def test_the_adapters_tree_reduces_data_with_the_barrier(dtype, op):
    n = 11
    t = star(n)
    rng = np.random.default_rng(5)
    x = [rng.integers(-1000, 1000, 50).astype(dtype) if dtype[0] == "i" else rng.uniform(0.5, 1.5, 50).astype(dtype)
         for _ in range(n)]
    res = EngineNet(t).run({h: (allreduce_app, x, op) for h in t.host_names()})
    ref = x[0]
    for v in x[1:]:
        ref = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}[op](ref, v)
    for h in t.host_names():
        if dtype[0] == "i":
            assert np.array_equal(res[h], ref)
        else:
            np.testing.assert_allclose(res[h], ref, rtol=1e-12)
        assert res[h].tobytes() == res["h0"].tobytes()  # every rank the same bits


def test_a_float_reduction_gives_the_same_bits_whatever_order_packets_race_in():
    n = 16
    t = build("fattree:k=4,n=2", settings={"switch": {"routing": "adaptive"}, "elan": {"max_tries": 40}})
    t.add_group(HW_GROUP, t.host_names())
    rng = np.random.default_rng(1)
    x = [(rng.standard_normal(200) * 10.0 ** rng.integers(-4, 5, 200)).astype(np.float32) for _ in range(n)]
    bits, orders = set(), set()
    for seed in range(4):
        net = EngineNet(t, seed=seed, reorder=0.5, duplicate=0.2, drop=0.02)
        res = net.run({h: (allreduce_app, x, "sum") for h in t.host_names()})
        bits.add(res["h7"].tobytes())
        orders.add(tuple(node for _t, node, _p, _f in net.delivered[:60]))
    assert len(orders) > 1  # the seeds did change what arrived when
    assert len(bits) == 1   # ... and not one bit of the result
    naive = x[0].copy()
    for v in reversed(x[1:]):  # another summation order does give other bits: the check can fail
        naive = naive + v
    assert naive.tobytes() not in bits


@pytest.mark.parametrize("faults", [dict(drop=0.05), dict(duplicate=0.3, reorder=0.3), dict(corrupt=0.05),
                                    dict(drop=0.02, duplicate=0.1, reorder=0.2, corrupt=0.02)])
@pytest.mark.parametrize("algo", ["tree", "polled"])
def test_barriers_complete_under_seeded_faults_with_each_event_counted_once(algo, faults):
    t = build("fattree:k=4,n=2", settings={"elan": {"max_tries": 40, "retransmit_ns": 5000}})
    t.add_group(HW_GROUP, t.host_names())
    n = 16
    enter = [(97 * r) % 1500 for r in range(n)]
    net = EngineNet(t, seed=7, **faults)
    res = net.run({h: (barrier_app, algo, 3, enter) for h in t.host_names()})
    assert min(res.values()) >= max(enter)
    if algo == "tree":
        for v in range(n):
            assert net.engines[f"h{v}"].mechanism("qsnet").stats["barrier_events"] == len(tree_links(n, 3, v)[1])
    hurt = net.faults["dropped"] + net.faults["corrupted"]
    if hurt:
        assert sum(net.engines[h].mechanism("qsnet").stats["packets_resent"] for h in t.host_names()) > 0


def emu_run(*args, timeout=300):
    exe = str(Path(sys.executable).parent / "emu")
    return subprocess.run([exe, "run", *args], capture_output=True, text=True, timeout=timeout)


def test_emu_run_barrier_and_allreduce_offloaded_to_the_hardware():
    for algo in ("tree", "polled"):
        out = emu_run("--topo", "fattree:k=4,n=3", "--test", "barrier", "--offload", "hw", "--algo", algo)
        assert out.returncode == 0 and f"algo=hw({algo})" in out.stdout, out.stdout + out.stderr
    out = emu_run("--topo", "fattree:k=4,n=2", "--test", "allreduce", "--offload", "hw", "--size", "40KiB",
                  "--dtype", "int32")  # 41 blocks of 1008 bytes, up to 16 in flight
    assert out.returncode == 0 and "algo=hw(tree)" in out.stdout and "result=equal" in out.stdout, out.stdout


@pytest.mark.parametrize("args,says", [
    (["--test", "barrier", "--offload", "hw", "--algo", "dissemination"], "runs as tree, polled, not 'dissemination'"),
    (["--test", "allreduce", "--offload", "hw", "--set", "elan.packet_bytes=12", "--dtype", "float64"],
     "leaves no room for one float64"),
    (["--test", "allreduce", "--offload", "hw", "--op", "minloc"], "minloc cannot be reduced by the adapters"),
    (["--test", "allgather", "--offload", "hw"], "allgather cannot be offloaded to the network hardware"),
])
def test_what_the_hardware_cannot_run_is_refused_in_one_line(args, says):
    out = emu_run("--topo", "star:n=4", *args, timeout=60)
    text = out.stdout + out.stderr
    assert out.returncode == 2 and says in text and "Traceback" not in text, text


async def two_comms_app(host):
    for _ in range(2):  # a new communicator object over the same ranks: the adapter's sequence goes on
        c = Comm(host)
        await c.barrier(offload="hw", algo="tree")
        y = await c.allreduce(np.full(3, c.rank, np.int64), offload="hw")
    return host.now, y.tolist()


def test_a_new_communicator_over_the_same_ranks_goes_on_with_the_adapters_sequence():
    t = star(4)
    res = EngineNet(t).run({h: (two_comms_app,) for h in t.host_names()})
    assert all(v[1] == [6, 6, 6] for v in res.values())
