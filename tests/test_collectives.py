"""Host software collectives: results equal numpy's, times equal the closed-form model."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import emu
from emu.config import HostSpec, LinkSpec, SwitchSpec
from emu.nodes.collectives import ALGORITHMS, DTYPES, OPS, model
from emu.nodes.collectives.run import OPERATIONS, check_results, run_collective
from emu.nodes.collectives.select import GRID_ONLY, POWER_OF_TWO_ONLY
from emu.topologies import build

HOSTS = 10


@st.composite
def scenarios(draw, operation):
    n = draw(st.integers(1, HOSTS))
    ranks = draw(st.permutations([f"h{i}" for i in range(HOSTS)]))[:n]
    algos = [a for a in ALGORITHMS[operation] if not ((operation, a) in POWER_OF_TWO_ONLY and n & (n - 1))
             and (operation, a) not in GRID_ONLY]  # spec 02's coded schemes: tests/test_coding.py
    algo = draw(st.sampled_from(algos))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    ops = [o for o in OPS if not (OPS[o].integer_only and dtype.startswith("float"))]
    op = draw(st.sampled_from(ops))
    count = draw(st.integers(0, 600))
    if operation == "reduce_scatter":
        count -= count % n
    root = draw(st.integers(0, n - 1))
    return ranks, algo, dtype, op, count, root, draw(st.integers(0, 2**16))


async def shared(cluster, spec):
    if not hasattr(cluster, "net"):
        cluster.net = await cluster(spec)
    return cluster.net


@pytest.mark.parametrize("operation", OPERATIONS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
async def test_every_algorithm_agrees_with_numpy(cluster, operation, data):
    net = await shared(cluster, "fattree:k=2,n=4")  # one cluster for all of hypothesis's examples
    ranks, algo, dtype, op, count, root, seed = data.draw(scenarios(operation))
    res = await run_collective(net, operation, count=count, dtype=dtype, op=op, algo=algo, root=root,
                               ranks=ranks, seed=seed)
    assert res.algo.split(" ")[0] == algo  # mcast_all tree off a grid: "tree (binomial over rank order ...)"
    check_results(res, count, dtype, op, root, seed)


H, L, S = HostSpec(), LinkSpec(), SwitchSpec()


@pytest.mark.parametrize("n", [2, 4, 8])
async def test_closed_form_model_to_the_nanosecond(cluster, n):
    net = await cluster(f"star:n={n}")
    for count in (n, 16 * n, 256 * n, 1024 * n):       # ring: equal chunks of 4..4096 bytes
        r = await run_collective(net, "allreduce", count=count, dtype="float32", algo="ring")
        assert r.completion_ns == model.ring_allreduce_ns(n, count * 4, H, L, S)
        c = count * 4 // n
        assert r.cpu_ns_max == (n - 1) * (2 * (H.send_overhead_ns + H.recv_overhead_ns) + H.reduce_ns(c))
    for count in (1, 100, 256, 4000):
        r = await run_collective(net, "allreduce", count=count, dtype="float64", algo="recursive_doubling")
        assert r.completion_ns == model.recursive_doubling_allreduce_ns(n, count * 8, H, L, S)
    for count in (0, 10, 250):                           # single-frame messages: no queueing at a sender
        r = await run_collective(net, "bcast", count=count, dtype="int32", algo="binomial")
        assert r.completion_ns == model.binomial_bcast_ns(n, count * 4, H, L, S)


async def test_model_follows_other_parameters(cluster):
    spec = "star:n=8,latency_ns=250,bandwidth_gbps=25,switch_delay_ns=80,nic_delay_ns=40,mtu_bytes=512"
    net = await cluster(spec)
    t = build(spec)
    h, l, s = t.hosts[0].spec, t.links[0].spec, t.switches[0].spec
    r = await run_collective(net, "allreduce", count=8 * 300, dtype="int16", algo="ring", op="max")
    assert r.completion_ns == model.ring_allreduce_ns(8, 8 * 300 * 2, h, l, s)
    r = await run_collective(net, "allreduce", count=3000, dtype="uint8", algo="recursive_doubling", op="bxor")
    assert r.completion_ns == model.recursive_doubling_allreduce_ns(8, 3000, h, l, s)


async def test_same_collective_twice_gives_identical_figures(cluster):
    net = await cluster("fattree:k=2,n=3")
    a = await run_collective(net, "allreduce", count=5000, dtype="float32", algo="rabenseifner", seed=7)
    b = await run_collective(net, "allreduce", count=5000, dtype="float32", algo="rabenseifner", seed=7)
    assert a.figures() == b.figures() and a.link_frames == b.link_frames and a.link_bytes == b.link_bytes
    assert all((a.results[h] == b.results[h]).all() for h in a.ranks)


async def test_figures_count_frames_bytes_links_and_cpu(cluster):
    net = await cluster("star:n=4")
    r = await run_collective(net, "bcast", count=2000, dtype="int8", algo="flat", root=2)
    # the root sends 3 messages of 2000 bytes: 2 frames each (1024 + 976 bytes of data)
    assert (r.frames, r.bytes) == (6, 3 * (2000 + 2 * 50))  # 46 header bytes + FCS per frame
    assert r.hop_count == 12 and r.link_frames["h2-nic0"] == 6
    assert r.cpu_ns_max == 3 * H.send_overhead_ns and r.cpu_ns_total == 3 * H.send_overhead_ns + 3 * H.recv_overhead_ns


async def test_bad_requests_are_refused_before_anything_runs(cluster):
    net = await cluster("star:n=6")
    with pytest.raises(emu.ConfigError, match="needs a power-of-two number of ranks, not 6; use ring"):
        await run_collective(net, "allgather", algo="recursive_doubling")
    with pytest.raises(emu.ConfigError, match="operator band is defined on integer types only, not float32"):
        await run_collective(net, "allreduce", op="band", dtype="float32")
    with pytest.raises(emu.ConfigError, match="unknown allreduce algorithm 'magic'; known: ring, recursive_doubling"):
        await run_collective(net, "allreduce", algo="magic")
    with pytest.raises(emu.ConfigError, match="unknown operator 'avg'"):
        await run_collective(net, "allreduce", op="avg")
    assert net.now == 0  # nothing ran


# -- regressions found in review ---------------------------------------------------------------------

def test_all_to_all_multicast_tree_beyond_256_ranks():
    from emu.sim import EngineNet
    from emu.nodes.collectives.run import collective_app, expected

    net = EngineNet(build("star:n=260"))
    members = [f"h{i}" for i in range(260)]
    res = net.run({h: (collective_app, members, "mcast_all", "binomial", 1, "int32", "sum", 0, 1) for h in members})
    want = expected("mcast_all", 260, 1, "int32", "sum", 0, 1)
    assert all((res[h][0] == want[i]).all() for i, h in enumerate(members))


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                   "float16", "float32", "float64"])
def test_operands_drawn_in_chunks_are_the_draws_of_one_call(dtype):
    """make_input fills a large operand a chunk at a time (no float64 temporary of the whole); the
    values must be those a single draw gives, whatever the chunk (a multiple of 4)."""
    from emu.nodes.collectives.run import make_input

    for op in ("sum", "prod", "alltoall"):
        whole = make_input(3, 1, 1001, dtype, op, 3, chunk=1 << 30)
        for chunk in (4, 64, 1 << 10):
            assert np.array_equal(make_input(3, 1, 1001, dtype, op, 3, chunk=chunk), whole)
    rng = np.random.default_rng([3, 1])
    if np.dtype(dtype).kind == "f":
        assert np.array_equal(make_input(3, 1, 999, dtype, "sum", 3), rng.uniform(-1, 1, 999).astype(dtype))
    else:
        info = np.iinfo(dtype)
        assert np.array_equal(make_input(3, 1, 999, dtype, "sum", 3),
                              rng.integers(info.min, info.max, 999, dtype=dtype, endpoint=True))


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor",
                                "minloc", "maxloc"])
def test_the_streamed_oracle_is_the_stacked_one(op):
    from emu.reduce import get_op, reference, reference_streamed
    from emu.nodes.collectives.run import make_input

    o = get_op(op)
    for dtype in (["int32", "uint8"] if o.integer_only else ["int32", "float32", "float64"]):
        xs = [make_input(5, r, 777, dtype, op, 5) for r in range(5)]
        assert np.array_equal(reference_streamed(o, iter(xs)), reference(o, xs)), dtype
