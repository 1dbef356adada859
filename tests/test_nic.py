"""Spec 01: the NIC offload engine, step by step, and offloaded collectives against numpy."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emu.config import HostSpec, NicSpec
from emu.wire.coll import ErrBit
from emu.sim import EngineNet
from emu.nodes.nic import alu
from emu.nodes.collectives import Comm
from emu.nodes.collectives import nicmodel
from emu.nodes.collectives.offload import descriptors, kary_tree
from emu.nodes.collectives.run import check_results, run_collective
from emu.topologies import star

NIC_DTYPES = ["float64", "float32", "int64", "uint64", "int32", "uint32"]
NIC_OPS = ["sum", "max", "min", "maxloc", "minloc", "land", "lor", "lxor", "band", "bor", "bxor"]


@pytest.mark.parametrize("dtype", NIC_DTYPES)
def test_alu_packs_both_widths_and_combines_like_numpy(dtype):
    rng = np.random.default_rng(1)
    dt = np.dtype(dtype)
    n = alu.per_descriptor(dt)
    assert n * dt.itemsize == 48
    a = (rng.standard_normal(n) * 100).astype(dt) if dt.kind == "f" else rng.integers(0, 1000, n).astype(dt)
    b = (rng.standard_normal(n) * 100).astype(dt) if dt.kind == "f" else rng.integers(0, 1000, n).astype(dt)
    la, lb = np.zeros(n, np.int64), np.ones(n, np.int64)
    data, loc = alu.pack(a, la)
    assert len(data) == len(loc) == 7 and data[6] == 0      # the seventh pair is never filled
    back, bl = alu.unpack(data, loc, n, dt)
    assert back.tobytes() == a.tobytes() and (bl == la).all()
    rt, rb = alu.type_code(dt)
    assert (alu.combine(alu.op_code("sum", dt), a, la, b, lb)[0] == a + b).all()
    v, l = alu.combine(alu.op_code("maxloc", dt), a, la, b, lb)
    assert (v == np.maximum(a, b)).all() and (l == np.where(b > a, 1, 0)).all()


def test_alu_refuses_what_it_cannot_do():
    from emu.config import ConfigError

    with pytest.raises(ConfigError, match="32- and 64-bit operands"):
        alu.type_code(np.dtype("int16"))
    with pytest.raises(ConfigError, match="integer operands only"):
        alu.op_code("bxor", np.dtype("float32"))
    with pytest.raises(ConfigError, match="no operation 'prod'"):
        alu.op_code("prod", np.dtype("int32"))


def test_kary_trees():
    assert kary_tree(7, 2) == ([-1, 0, 0, 1, 1, 2, 2], [[1, 2], [3, 4], [5, 6], [], [], [], []])
    assert kary_tree(5, 4)[1][0] == [1, 2, 3, 4]
    assert kary_tree(4, 1)[0] == [-1, 0, 1, 2]


async def _offload_app(host, members, x, op, branch):
    comm = Comm(host, members)
    await comm.nic_setup()
    y = await comm.allreduce(x, op, offload="nic", branch=branch)
    return y, comm.last_status, host.now


def test_engine_follows_a_reduce_through_queue_register_and_trigger():
    """Root h0 with leaves h1 and h2 (branch 2), one descriptor of 3 doubles each."""
    net = EngineNet(star(3))
    members = ["h0", "h1", "h2"]
    xs = {h: np.array([i + 1.0, 10.0 * i, -i], np.float64) for i, h in enumerate(members)}
    net.start({h: (_offload_app, members, xs[h], "sum", 2) for h in members})
    root = net.engines["h0"].mechanism("coll")
    spec = HostSpec().nic
    vp = lambda: root.vps[1]  # noqa: E731
    # posting: the reduce descriptor is on the NIC once written (post_ns), the broadcast post_ns later
    t = net.step_until(lambda: 1 in root.vps and vp().reg is not None)
    assert t == spec.post_ns and len(vp().posted) == 1 and vp().reg.rcnt == 0 and vp().reg.branch == 2
    assert net.step_until(lambda: len(vp().posted) == 2) == 2 * spec.post_ns
    # the leaves' reduce descriptors execute at once (Inst); their messages land in the root's queue
    net.step_until(lambda: len(root.queue) == 1)
    assert root.queue[0][1]["swpmp"] == 1 and root.queue[0][1]["branch"] == 2
    # the process unit reads it: Rcnt 1, the register holds h1's operands (no ALU pass yet)
    net.step_until(lambda: vp().reg is not None and vp().reg.rcnt == 1)
    assert vp().reg.values.tolist() in ([2.0, 10.0, -1.0], [3.0, 20.0, -2.0])
    # the second child: Rcnt reaches the degree, the local data is combined, the descriptor fires to
    # the root itself, the CP arrival triggers the broadcast descriptor, which is consumed
    net.step_until(lambda: vp().reg is None and not vp().posted)
    assert vp().cp_counter == 0 and root.stats["alu_ops"] == 2 * 3 and root.stats["queue_peak"] >= 1
    net.step_all()
    for h in members:
        [st] = [s for s in net.engines[h].app_states()]
        y, status, _ = st.result
        assert status == 0 and y.tolist() == [6.0, 30.0, -3.0]
    assert net.engines["h1"].mechanism("coll").stats["messages_sent"] == 1 and root.stats["messages_sent"] == 2


@pytest.mark.parametrize("branch", [1, 2, 3, 8])
def test_offload_equals_software_reduction_bit_for_bit_on_integers(branch):
    net = EngineNet(star(9))
    members = [f"h{i}" for i in (4, 0, 8, 2, 6, 1)]  # a subset, out of order
    rng = np.random.default_rng(branch)
    xs = {h: rng.integers(-2**62, 2**62, 17).astype(np.int64) for h in members}
    res = net.run({h: (_offload_app, members, xs[h], "sum", branch) for h in members})
    want = np.sum(np.stack([xs[h] for h in members]), axis=0, dtype=np.int64)
    for h in members:
        assert res[h][1] == 0 and (res[h][0] == want).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 10), branch=st.integers(1, 6), dtype=st.sampled_from(NIC_DTYPES),
       op=st.sampled_from(NIC_OPS), count=st.integers(1, 40), seed=st.integers(0, 999), data=st.data())
async def test_offloaded_allreduce_and_reduce_equal_numpy(cluster, n, branch, dtype, op, count, seed, data):
    if op in ("land", "lor", "lxor", "band", "bor", "bxor") and dtype.startswith("float"):
        op = "max"
    if not hasattr(cluster, "net"):
        cluster.net = await cluster("fattree:k=2,n=4")
    net = cluster.net
    ranks = data.draw(st.permutations([f"h{i}" for i in range(16)]))[:n]
    kind = data.draw(st.sampled_from(["allreduce", "reduce"]))
    root = data.draw(st.integers(0, n - 1)) if kind == "reduce" else 0
    res = await run_collective(net, kind, count=count, dtype=dtype, op=op, ranks=ranks, root=root, seed=seed,
                               offload="nic", branch=branch)
    check_results(res, count, dtype, op, root, seed)


async def test_offload_has_a_step_above_48_bytes_and_spares_the_host(cluster):
    net = await cluster("fattree:k=4,n=2")
    t = {}
    for nbytes in (8, 16, 24, 32, 40, 48, 56, 96, 104):
        r = await run_collective(net, "allreduce", count=nbytes // 8, dtype="float64", offload="nic", branch=4)
        check_results(r, nbytes // 8, "float64", "sum", 0, 0)
        t[nbytes] = r.completion_ns
        parts = -(-nbytes // 48)
        assert r.cpu_ns_max == 2 * parts * HostSpec().nic.post_ns  # the host only posts descriptors
    within = [t[b] for b in (8, 16, 24, 32, 40, 48)]
    assert max(within) - min(within) < 0.1 * t[48]        # one descriptor: only ALU passes differ
    # a second descriptor is a step, but no second trip: the parts are pipelined on two lanes
    assert 0.03 * t[48] < t[56] - t[48] < 0.2 * t[48]
    assert 0.03 * t[48] < t[104] - t[96] < 0.2 * t[48] and abs((t[96] - t[56]) - (t[48] - t[8])) < 0.1 * t[48]
    # the pipeline model: exact for one part, within 10 ns for two and three
    host, link = net.topology.hosts[0].spec, net.topology.links[0].spec
    cross = nicmodel.on_topology(net.topology, list(net.hosts))
    for nbytes, tol in ((8, 0), (48, 0), (56, 10), (96, 10), (104, 10)):
        nseg = -(-nbytes // 48)
        model = nicmodel.allreduce_ns(16, 4, nseg, min(6, nbytes // 8), nseg, host, link, cross).total_ns
        assert abs(t[nbytes] - model) <= tol, (nbytes, t[nbytes], model)
    sw = await run_collective(net, "allreduce", count=1, dtype="float64")
    assert sw.cpu_ns_max > 5 * 2 * HostSpec().nic.post_ns


async def _crafted(host, members, tamper, late_ns):
    """An offloaded allreduce of 2 int64 whose descriptors ``tamper`` may alter on one rank."""
    comm = Comm(host, members)
    await comm.nic_setup()
    if late_ns:
        await host.sleep(late_ns if comm.rank == 0 else 0)
    x = np.arange(2, dtype=np.int64) + comm.rank
    region, nseg, posted = descriptors(comm, "allreduce", x, "sum", 0, 4, comm.vp)
    if tamper:
        tamper(comm.rank, posted)
    await host.nic_post(comm.vp, posted)
    from emu.nodes.collectives.offload import assemble

    done = await host.nic_wait(region, nseg, 200_000, comm.vp)
    return assemble(comm, done, nseg, 2, "sum", x.dtype), comm.last_status


def _status(res):
    return {h: ErrBit(s) for h, (_, s) in res.items()}


def test_mismatched_rtype_is_reported_to_every_rank():
    def tamper(rank, posted):
        if rank == 2:
            posted[0].desc["rop"] = alu.op_code("max", np.dtype("int64"))
    net = EngineNet(star(4))
    members = ["h0", "h1", "h2", "h3"]
    res = net.run({h: (_crafted, members, tamper, 0) for h in members})
    assert all(s == ErrBit.MISMATCH and y is None for y, s in res.values())
    assert net.engines["h0"].mechanism("coll").stats["mismatch"] == 1


async def _two_at_once(host, members):
    """Two offloaded allreduces on two virtual ports, both posted before waiting; the root late."""
    from emu.nodes.collectives.offload import assemble

    comm = Comm(host, members)
    await host.nic_open(1)
    await host.nic_open(2)
    if comm.rank == 0:
        await host.sleep(5_000)
    x = np.arange(2, dtype=np.int64) + comm.rank
    regions = []
    for vp in (1, 2):
        region, nseg, posted = descriptors(comm, "allreduce", x, "sum", 0, 4, vp)
        await host.nic_post(vp, posted)
        regions.append((vp, region, nseg))
    out = []
    for vp, region, nseg in regions:
        done = await host.nic_wait(region, nseg, 200_000, vp)
        assemble(comm, done, nseg, 2, "sum", x.dtype)
        out.append(comm.last_status)
    return out


def test_queue_overflow_is_an_error_not_a_hang():
    # a queue of 4 holds one branch degree; two reductions' messages arrive before the root posts
    net = EngineNet(star(5, host=HostSpec(nic=NicSpec(queue_capacity=4))))
    members = [f"h{i}" for i in range(5)]
    res = net.run({h: (_two_at_once, members) for h in members})
    assert net.engines["h0"].mechanism("coll").stats["queue_overflow"] == 4
    assert all(a == 0 and b & ErrBit.OVERFLOW for a, b in res.values())  # the first fits, the second does not


def test_unknown_virtual_port_is_counted_answered_and_times_out_elsewhere():
    def tamper(rank, posted):
        if rank == 3:
            for p in posted:
                p.dests = [(d, 0) for d, _ in p.dests]  # VP 0 is not open at the root (nic_setup opens 1..63)
    net = EngineNet(star(4))
    members = ["h0", "h1", "h2", "h3"]
    res = net.run({h: (_crafted, members, tamper, 0) for h in members})
    st = _status(res)
    assert st["h3"] & ErrBit.UNKNOWN_VP                 # the ERROR reply reached the sender
    assert all(st[h] & ErrBit.TIMEOUT for h in ("h0", "h1", "h2"))
    assert net.engines["h0"].mechanism("coll").stats["unknown_vp"] == 1
    # after the timeout the region is gone: the next offloaded allreduce works
    res = net.run({h: (_offload_app, members, np.ones(3, np.int32), "sum", 2) for h in members})
    assert all(s == 0 and (y == 4).all() for y, s, _ in res.values())


def test_branch_degree_must_fit_the_receive_queue():
    net = EngineNet(star(3, host=HostSpec(nic=NicSpec(queue_capacity=2))))
    members = ["h0", "h1", "h2"]
    net.start({h: (_offload_app, members, np.ones(2, np.int64), "sum", 3) for h in members})
    net.step_all()
    [st] = net.engines["h0"].app_states()
    assert "exceeds the NIC's request receive queue of 2 entries" in st.error


@settings(max_examples=300, deadline=None)
@given(body=st.binary(min_size=128, max_size=128), head=st.sampled_from([1, 2, 15, 0, 7]),
       rop=st.integers(0, 15), rdtype=st.integers(0, 15), rbit=st.integers(0, 1), num=st.integers(0, 255),
       swpmp=st.integers(0, 1), vp=st.sampled_from([1, 2, 40]))
def test_nic_survives_any_descriptor_message(body, head, rop, rdtype, rbit, num, swpmp, vp):
    """A malformed or hostile descriptor message is the peer's fault: counted, never an exception."""
    from emu.wire import DESC, PacketType, build_frame

    from emu.nodes.nic.engine import NicEngine
    from emu.nodes.nic.coll import Posted

    h = NicEngine("h1", 1, HostSpec(), None, {"h0": 0, "h1": 1, "h2": 2}, ["h0", "h1", "h2"])
    h.mechanism("coll").open_vp(1)
    h.mechanism("coll").open_vp(2)
    fields = dict(DESC.as_dict(body))
    fields.update(head=head, rop=rop, rdtype=rdtype, rbit=rbit, data_num=num, swpmp=swpmp, dest_vp=vp)
    h.mechanism("coll").post(1, [Posted(dict(fields, head=1, branch=2, inst=0, rflag=1, coll_region=fields["coll_region"],
                                seg=fields["seg"], rdtype=0, rbit=1, rop=0, data_num=1), [(0, 1)])], 0)
    frame = build_frame(0, 1, PacketType.COLL, DESC.pack(*(fields[n] for n in DESC.names)))
    t = 0
    for i in range(3):
        t += 500
        h.receive(frame, 0, t)
        while h.timer is not None and h.timer <= t + 400:
            h.on_timer(h.timer)
    while h.timer is not None:
        h.on_timer(h.timer)
    s = h.mechanism("coll").stats
    assert h.stats["malformed"] + s["messages_received"] >= 3


# -- regressions found in review ---------------------------------------------------------------------

async def test_an_offloaded_run_ends_when_the_operation_ends(cluster):
    net = await cluster("fattree:k=2,n=3")
    r = await run_collective(net, "allreduce", count=5, dtype="float64", offload="nic", branch=2)
    # the wait's timeout timer is cancelled on completion: it no longer stretches the run to 10 ms
    assert net.metrics.completion_ns == r.completion_ns < 100_000


async def _lengths_app(host, members):
    comm = Comm(host, members)
    await comm.nic_setup()
    x = np.ones(3 if comm.rank != 1 else 1, np.float64)
    y = await comm.allreduce(x, "sum", offload="nic", branch=2)
    return y, comm.last_status


def test_contributions_of_different_lengths_are_a_mismatch_not_a_crash():
    net = EngineNet(star(3))
    res = net.run({h: (_lengths_app, ["h0", "h1", "h2"]) for h in ("h0", "h1", "h2")})
    assert all(y is None and s & ErrBit.MISMATCH for y, s in res.values())


async def _timeout_app(host, members, timeout):
    from emu.nodes.collectives.offload import assemble

    comm = Comm(host, members)
    await comm.nic_setup()
    x = np.arange(3.0)
    region, nseg, posted = descriptors(comm, "allreduce", x, "sum", 0, 2, comm.vp)
    await host.nic_post(comm.vp, posted)
    done = await host.nic_wait(region, nseg, timeout if comm.rank == 0 else 1_000_000, comm.vp)
    assemble(comm, done, nseg, 3, "sum", x.dtype)
    return comm.last_status


@pytest.mark.parametrize("timeout", range(520, 580, 3))
def test_a_timeout_racing_the_reduce_never_crashes_the_host(timeout):
    net = EngineNet(star(3))
    res = net.run({h: (_timeout_app, ["h0", "h1", "h2"], timeout) for h in ("h0", "h1", "h2")})
    assert res["h0"] in (0, ErrBit.TIMEOUT)
    assert net.engines["h0"].mechanism("coll").vps[1].reg is None and not net.engines["h0"].mechanism("coll").vps[1].posted


async def _two_comms(host, members):
    ca, cb = Comm(host, members, comm_id=7), Comm(host, members, comm_id=9)
    await ca.nic_setup(1)
    await cb.nic_setup(2)
    x = np.arange(3.0)
    ra, na, pa = descriptors(ca, "allreduce", x, "sum", 0, 2, 1)
    rb, nb, pb = descriptors(cb, "allreduce", x, "sum", 0, 2, 2)
    await host.nic_post(1, pa)
    await host.nic_post(2, pb)
    da = await host.nic_wait(ra, na, 1_000_000, 1)
    db = await host.nic_wait(rb, nb, 1_000_000, 2)
    return [c.err_vec for c in da], [c.err_vec for c in db]


def test_overflow_while_the_register_counts_is_reported_as_overflow():
    # slow queue reads: the second reduction's register exists when its second message overflows
    net = EngineNet(star(3, host=HostSpec(nic=NicSpec(queue_capacity=2, queue_ns=2000))))
    res = net.run({h: (_two_comms, ["h0", "h1", "h2"]) for h in ("h0", "h1", "h2")})
    assert net.engines["h0"].mechanism("coll").stats["queue_overflow"] == 1
    assert all(a == [0] and b == [ErrBit.OVERFLOW] for a, b in res.values())


def test_late_messages_of_an_aborted_region_are_dropped():
    net = EngineNet(star(3))
    members = ["h0", "h1", "h2"]
    # the root gives up at once; the leaves' messages arrive afterwards and must not linger
    net.run({h: (_timeout_app, members, 1) for h in members})
    nic = net.engines["h0"].mechanism("coll")
    assert nic.stats["late_after_abort"] >= 2 and not nic.queue and not nic.vps[1].swaps


def test_a_segment_cannot_make_the_host_allocate_without_bound():
    from emu.wire import MSG, PacketType, build_frame
    from emu.nodes.nic.engine import NicEngine

    h = NicEngine("h1", 1, HostSpec(), None, {"h0": 0, "h1": 1}, ["h0", "h1"])
    h.receive(build_frame(0, 1, PacketType.MSG, MSG.pack(1, 0, 0xFFFFFFF0, 0) + b"x"), 0, 10)
    h.receive(build_frame(0, 1, PacketType.MSG, MSG.pack(2, 5, 100, 0) + b"y" * 10), 0, 11)
    h.receive(build_frame(0, 1, PacketType.MSG, MSG.pack(2, 6, 100, 10) + b"y" * 10), 0, 12)  # other tag
    assert h.stats["malformed"] == 2 and not h._partial.get((0, 1))


async def test_offload_limits_are_refused_before_anything_runs(cluster):
    from emu.config import ConfigError

    net = await cluster("star:n=4")
    with pytest.raises(ConfigError, match=r"reduce keeps all its 86 parts in flight.*2 x 86 messages, over its queue of 64"):
        await run_collective(net, "reduce", count=1024, dtype="float32", offload="nic", branch=2)
    with pytest.raises(ConfigError, match="need 342 descriptors; at most 255 per call"):
        await run_collective(net, "allreduce", count=4096, dtype="float32", offload="nic")
    with pytest.raises(ConfigError, match="branch degree 65 needs CpCnt = 65, but CpCnt has 6 bits"):
        await run_collective(net, "allreduce", count=4, dtype="float32", offload="nic", branch=65)
    assert net.now == 0
    r = await run_collective(net, "reduce", count=12 * 30, dtype="float32", offload="nic", branch=2, root=1)
    check_results(r, 360, "float32", "sum", 1, 0)   # 30 parts x branch 2 fit the queue


async def test_slow_links_and_long_messages_do_not_time_out(cluster):
    # 255 parts one after another (a receive queue of one entry leaves one lane) over a chain (branch 1)
    # of 16 hosts and 500 ns links: ~10 ms of model time
    from emu.config import LinkSpec

    net = await cluster(star(16, link=LinkSpec(latency_ns=500), host=HostSpec(nic=NicSpec(queue_capacity=1))))
    r = await run_collective(net, "allreduce", count=3060, dtype="float32", offload="nic", branch=1)
    check_results(r, 3060, "float32", "sum", 0, 0)
    assert r.completion_ns > 10_000_000
