"""Spec 01: an offloaded allreduce of several 48-byte parts, pipelined over lanes (virtual ports),
against the analytic pipeline model (``emu.nodes.collectives.nicmodel``) and host software."""

import numpy as np
import pytest

from emu.config import HostSpec, LinkSpec, NicSpec, SwitchSpec
from emu.nodes.collectives import Comm, nicmodel
from emu.nodes.collectives.offload import descriptors, lanes
from emu.nodes.collectives.run import check_results, run_collective
from emu.sim import EngineNet
from emu.topologies import star
from load_script import load


def test_lanes_are_bounded_by_parts_virtual_ports_and_the_receive_queue():
    assert lanes("allreduce", 2, 86, 64, 63) == 32      # a parent holds one message per lane from each child
    assert lanes("allreduce", 1, 86, 64, 63) == 63      # ... and the communicator has 63 VPs from VP 1 on
    assert lanes("allreduce", 4, 3, 64, 63) == 3        # no more lanes than parts
    assert lanes("allreduce", 31, 86, 64, 63) == 2
    assert lanes("allreduce", 64, 86, 64, 63) == 1
    assert lanes("reduce", 2, 86, 64, 63) == 1          # a reduce's parts are all in flight on one VP


async def _posted(host, members, count, branch):
    comm = Comm(host, members)
    await comm.nic_setup()
    region, nseg, posted = descriptors(comm, "allreduce", np.arange(count, dtype=np.float64), "sum", 0, branch, 1)
    return [(p.desc["head"], p.desc["seg"], p.desc["src_vp"], p.desc["dest_vp"]) for p in posted]


def test_descriptors_go_on_lanes_in_the_order_the_nic_needs_them():
    net = EngineNet(star(5))
    members = [f"h{i}" for i in range(5)]
    res = net.run({h: (_posted, members, 6 * 5, 2) for h in members})  # 5 parts, branch 2: lanes min(5, 32) = 5
    heads = [(h, s, vp) for h, s, vp, _d in res["h0"]]
    assert [(s, vp) for h, s, vp in heads if h == 1] == [(s, 1 + s) for s in range(5)]        # reduces on lanes 1..5
    assert [h for h, _s, _vp in heads] == [1] * 5 + [2] * 5                                   # all lanes open at once
    net = EngineNet(star(5, host=HostSpec(nic=NicSpec(queue_capacity=4))))                   # 4 // 2 = 2 lanes
    res = net.run({h: (_posted, members, 6 * 5, 2) for h in members})
    order = [(h, s, vp) for h, s, vp, _d in res["h1"]]
    # reduces of parts 0, 1; then each part's broadcast followed by the reduce of the part two later
    assert order == [(1, 0, 1), (1, 1, 2), (2, 0, 1), (1, 2, 1), (2, 1, 2), (1, 3, 2), (2, 2, 1), (1, 4, 1),
                     (2, 3, 2), (2, 4, 1)]
    assert all(d == vp for _h, _s, vp, d in res["h1"])


@pytest.mark.parametrize("nbytes,branch", [(96, 2), (480, 3), (480, 7), (2400, 2)])
def test_pipelined_allreduce_on_a_star_follows_the_model(nbytes, branch):
    async def app(host, members):
        comm = Comm(host, members)
        await comm.nic_setup()
        x = np.arange(nbytes // 8, dtype=np.float64) * (comm.rank + 1)
        t0 = host.now
        y = await comm.allreduce(x, offload="nic", branch=branch)
        return y, comm.last_status, host.now - t0

    t = star(8)
    net = EngineNet(t)
    members = [f"h{i}" for i in range(8)]
    res = net.run({h: (app, members) for h in members})
    want = np.arange(nbytes // 8, dtype=np.float64) * sum(range(1, 9))
    assert all(s == 0 and (y == want).all() for y, s, _ in res.values())
    measured = max(ns for _y, _s, ns in res.values())
    host, link = HostSpec(), LinkSpec()
    nseg = -(-nbytes // 48)
    model = nicmodel.allreduce_ns(8, branch, nseg, 6, lanes("allreduce", branch, nseg, 64, 63), host, link,
                                  nicmodel.uniform(1, host, link, SwitchSpec()))
    assert abs(measured - model.total_ns) <= 0.02 * model.total_ns, (measured, model.explain())
    assert max(net.engines[h].mechanism("coll").stats["queue_peak"] for h in members) <= 64
    assert sum(net.engines[h].mechanism("coll").stats["queue_overflow"] for h in members) == 0


def test_one_part_is_the_models_critical_path_exactly():
    host, link = HostSpec(), LinkSpec()
    cross = nicmodel.uniform(1, host, link, SwitchSpec())
    # 8 ranks, branch 7, 6 doubles: leaf fires at post + descriptor = 120; crossing 2 nic + 2 (ser + L) + d
    c = nicmodel.crossing_ns(1, host, link, SwitchSpec())
    assert c == 2 * 100 + 2 * (link.serialization_ns(162) + 100) + 50
    up = 120 + c
    unit = up + 2 * 10 + 6 * (10 + 6 * 4)  # seven messages at once: the first written and read, six read and folded
    fired = unit + 6 * 4 + 40           # own data, then the message to itself
    bcast = fired + 10 + 7 * 40         # the CP arrival, then seven broadcast messages one after another
    assert nicmodel.one_part_ns(8, 7, 6, host, cross) == bcast + c + 150 == 1800  # the last leaf's completion


async def test_4KiB_on_32_hosts_is_within_twice_software_and_small_sizes_stay_ahead(cluster):
    """Issue 23's goal for spec 01 on fattree:k=2,n=5 (the figures of the report, exact)."""
    net = await cluster("fattree:k=2,n=5")
    got = {}
    for nbytes in (48, 4096):
        sw = await run_collective(net, "allreduce", count=nbytes // 8, dtype="float64", seed=1)
        nic = await run_collective(net, "allreduce", count=nbytes // 8, dtype="float64", seed=1, offload="nic")
        check_results(nic, nbytes // 8, "float64", "sum", 0, 1)
        got[nbytes] = (sw.completion_ns, nic.completion_ns, nic.algo)
    assert got[48] == (8550, 5698, "nic(branch=31)")
    assert got[4096] == (21560, 39386, "nic(branch=2)")            # was 440,272 ns with the parts one after another
    assert got[4096][1] <= 2 * got[4096][0]


def test_sweep_script_prints_the_model_and_where_software_overtakes(capsys, tmp_path, monkeypatch):
    import sys

    import trio

    mod = load("nic_offload_sweep")
    png = tmp_path / "nic.png"
    monkeypatch.setattr(sys, "argv", ["nic_offload_sweep.py", "--nodes", "4", "--types", "float64", "--sizes",
                                      "8,48,96,480,4096", "--png", str(png), "--crossover",
                                      "--reduce-types", "float64,float32"])
    trio.run(mod.main)
    out = capsys.readouterr().out
    assert "NIC/model" in out and "software overtakes the NIC at" in out and png.stat().st_size > 0
    assert "experiment 1: MPI_Reduce of 8 B per rank" in out and "speed-up" in out
