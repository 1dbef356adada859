"""The switch processing unit of spec 04 against its analytic model (switch/aggregate)."""

import numpy as np
import pytest

from emu.config import ConfigError, PUSpec
from emu.switch.aggregate import ProcessingUnit, model, service_time

ADD = np.add


def pu(**kw):
    return ProcessingUnit(PUSpec(**{"clusters": 1, "cores_per_cluster": 4, "subset": 1, "copy_cycles": 0, **kw}))


def stream(p, arrivals, P, algo="single", B=1, nbytes=4, key=lambda b: ("a", b)):
    """Feed (time, block, slot) arrivals; return completions and the peak packets in the switch."""
    peak_in, done = 0, []
    for t, b, slot in arrivals:
        for c in p.advance(t):
            done.append(c)
        ok = p.arrive(t, key(b), slot, np.full(nbytes // 4, b + 1, np.float32), P=P, algo=algo, combine=ADD, B=B)
        assert ok
        queued = sum(len(q) for q in p.queues) + sum(p.core_busy)
        peak_in = max(peak_in, queued)
    done += p.advance(10 ** 9)
    return done, peak_in


def test_the_model_test_vectors():
    a = model(K=4, tau=4, delta=1, delta_c=1, P=4, S=1)
    assert (a.delta_k, a.queue, a.in_switch) == (1, 3, 16)
    assert model(K=4, tau=4, delta=1, delta_c=4, P=4, S=1).queue == 0
    assert service_time("single", 1024, 8, contending=1) == 1024
    assert service_time("single", 1024, 8, contending=8) == 1024 * 9 / 2
    assert service_time("single", 1024, 8, contending=8, delta_c=2000) == 1024
    assert service_time("tree", 1024, 8) == 64 + 7 * 1024 / 8


def test_a_burst_per_block_queues_as_the_model_says():
    """K = 4, tau = 4, delta = 1, P = 4, S = 1: bursts (delta_c = 1) build queues of Q = 3 per core,
    within the model's bound of 16 packets in the switch; spreading a block's packets (delta_c = 4)
    leaves no queue."""
    arrivals = [(4 * b + i, b, i) for b in range(16) for i in range(4)]  # block b's packets back to back
    p = pu()
    done, peak = stream(p, arrivals, P=4)
    m = model(K=4, tau=4, delta=1, delta_c=1, P=4, S=1)
    assert peak == 1 + 2 + 3 + 4 <= m.in_switch == 16  # cores a block apart: 1..Q+1 each; 16 bounds it
    # the longest queue at one core: measure by replaying core 0's blocks
    q = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=4, subset=1, copy_cycles=0))
    longest = 0
    for t, b, slot in arrivals:
        q.arrive(t, ("a", b), slot, np.ones(1, np.float32), P=4, algo="single", combine=ADD)
        longest = max(longest, max(len(x) for x in q.queues))
    assert longest == m.queue == 3
    assert len(done) == 16 and all(r[0] == 4 * (b + 1) for b, r in enumerate(x[2] for x in sorted(done, key=lambda d: d[1])))
    spread = [(b // 4 * 16 + 4 * i + b % 4, b, i) for b in range(16) for i in range(4)]  # delta_c = 4
    r = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=4, subset=1, copy_cycles=0))
    longest = 0
    for t, b, slot in sorted(spread):
        r.arrive(t, ("a", b), slot, np.ones(1, np.float32), P=4, algo="single", combine=ADD)
        longest = max(longest, max(len(x) for x in r.queues))
    assert longest == model(K=4, tau=4, delta=1, delta_c=4, P=4, S=1).queue == 0


def test_contention_at_a_single_buffer_costs_l_times_c_plus_one_over_two():
    c, L = 8, 1024
    p = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=c, subset=c))
    for i in range(c):  # c packets of one block at once, on the c cores of its subset
        p.arrive(0, ("a", 0), i, np.ones(L // 4, np.float32), P=c, algo="single", combine=ADD)
    (t, _k, res), = p.advance(10 ** 9)
    assert t == c * L and res[0] == c
    assert p.stats["handler_ns"] / c == service_time("single", L, c, contending=c) == L * (c + 1) / 2


def test_multiple_buffers_fold_at_the_end_and_the_tree_never_waits():
    L, B = 1024, 4
    p = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=8, subset=8))
    for i in range(B):
        p.arrive(0, ("a", 0), i, np.full(L // 4, i, np.float32), P=B, algo="multi", combine=ADD, B=B)
    (t, _k, res), = p.advance(10 ** 9)
    assert t == L + (B - 1) * L and res[0] == sum(range(B))  # all in parallel, then the fold
    q = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=8, subset=8))
    for i in range(8):
        q.arrive(0, ("a", 0), i, np.full(L // 4, i, np.float32), P=8, algo="tree", combine=ADD)
    (t, _k, res), = q.advance(10 ** 9)
    assert t == 64 + 3 * L and res[0] == 28 and q.stats["busy_wait_ns"] == 0


def test_the_reproducible_tree_gives_the_same_bits_whatever_the_arrival_order():
    rng = np.random.default_rng(3)
    vals = [(rng.standard_normal(64) * 10.0 ** rng.integers(-6, 7, 64)).astype(np.float32) for _ in range(8)]
    bits = {"tree": set(), "single": set()}
    for trial in range(6):
        order = rng.permutation(8)
        times = np.sort(rng.integers(0, 3000, 8))
        for algo in bits:
            p = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=8, subset=8))
            for t, port in zip(times, order):  # the packet from port i takes leaf i (reproducible)
                p.arrive(int(t), ("a", 0), int(port), vals[port], P=8, algo=algo, combine=ADD)
            (_t, _k, res), = p.advance(10 ** 9)
            bits[algo].add(res.tobytes())
    assert len(bits["tree"]) == 1 and len(bits["single"]) > 1


def test_a_full_packet_memory_drops_and_fcfs_pays_for_remote_scratchpads():
    p = ProcessingUnit(PUSpec(clusters=1, cores_per_cluster=1, subset=1, packet_memory_bytes=4096))
    got = [p.arrive(0, ("a", b), 0, np.ones(256, np.float32), P=1, algo="single", combine=ADD) for b in range(6)]
    assert got == [True] * 4 + [False] * 2 and p.stats["drops"] == 2
    times = {}
    for sched in ("hfcfs", "fcfs"):
        q = ProcessingUnit(PUSpec(clusters=4, cores_per_cluster=4, subset=4, scheduler=sched, copy_cycles=0))
        for b in range(8):
            for i in range(4):
                q.arrive(b * 10, ("a", b), i, np.ones(64, np.float32), P=4, algo="single", combine=ADD)
        times[sched] = max(t for t, _k, _r in q.advance(10 ** 9))
        if sched == "fcfs":
            assert q.stats["remote_handlers"] > 0
    assert times["hfcfs"] < times["fcfs"]
    with pytest.raises(ConfigError, match="subset 16 exceeds the 8 cores"):
        PUSpec(subset=16)
