"""Spec 01's experiments as the source ran them (issue 30): the reduce of 8 bytes per type, the
non-blocking offload a host computes under, and the flat tree a 6-bit CpCnt cannot post."""

import numpy as np
import pytest
import trio

import emu
from emu.config import ConfigError
from emu.nodes.collectives.offload import MAX_CPCNT, validate

from load_script import load


def test_the_reduce_experiment_at_a_tiny_size_matches_its_model_exactly():
    sweep = load("nic_offload_sweep")

    class Quiet:
        def update(self, _text):
            pass

    rows = trio.run(sweep.measure_reduce, [4, 8], 8, ["float64", "float32", "int64", "uint64"], None, Quiet())
    assert len(rows) == 8
    for r in rows:
        assert r["nic_ns"] == r["model_ns"], r  # one part up the tree: the model is exact
        assert r["nic_ns"] < r["sw_ns"]
    f64 = {r["nodes"]: r for r in rows if r["dtype"] == "float64"}
    f32 = {r["nodes"]: r for r in rows if r["dtype"] == "float32"}
    assert f32[8]["nic_ns"] > f64[8]["nic_ns"]  # two float32 operands: one more ALU pass per fold


def test_overlap_script_completion_is_max_of_compute_and_reduce_with_the_offload_and_the_sum_without():
    rows = load("nic_overlap").main(["--nodes", "4", "--compute", "0,30000"])
    for r in rows:
        assert r["nic_ns"] == r["nic_model_ns"] and r["sw_ns"] == r["sw_model_ns"], r
    big = [r for r in rows if r["compute_ns"] == 30000]
    assert {r["kind"] for r in big} == {"reduce", "allreduce"}
    for r in big:
        assert r["nic_ns"] < 30000 + 1000 < r["sw_ns"]


def test_ireduce_returns_before_the_nics_are_done_and_wait_gives_the_result():
    async def setup(host):
        from emu.nodes.collectives.comm import Comm

        await Comm(host).nic_setup()

    async def app(host):
        from emu.nodes.collectives.comm import Comm

        comm = Comm(host)
        x = np.array([comm.rank + 1.5, -comm.rank], np.float64)
        req = await comm.iallreduce(x, offload="nic")
        posted_at = host.now
        y = await req.wait()
        return posted_at, host.now, y, await req.wait()

    async def main():
        async with emu.Cluster("star:n=4") as net:
            await net.run({h: (setup,) for h in net.hosts})
            return await net.run({h: (app,) for h in net.hosts})

    out = trio.run(main)
    for posted, done, y, again in out.values():
        assert posted < done
        assert np.array_equal(y, [1.5 + 2.5 + 3.5 + 4.5, -6.0]) and again is y


def test_a_flat_tree_on_256_nodes_is_refused_in_one_line_naming_cpcnt():
    with pytest.raises(ConfigError) as e:
        validate("reduce", np.dtype("float64"), "sum", 255)
    assert "CpCnt has 6 bits" in str(e.value) and "\n" not in str(e.value)
    validate("reduce", np.dtype("float64"), "sum", MAX_CPCNT)  # 63 children: a flat tree on 64 nodes



def test_the_wider_counter_of_the_source_s_flat_tree_takes_255_children_and_never_more():
    validate("reduce", np.dtype("float64"), "sum", 255, counter_bits=8)
    with pytest.raises(ConfigError, match="counter_bits=8"):
        validate("reduce", np.dtype("float64"), "sum", 127, counter_bits=6)
    with pytest.raises(ConfigError, match="BranchDegree has 8 bits"):
        validate("reduce", np.dtype("float64"), "sum", 256, counter_bits=8)
    with pytest.raises(ConfigError, match="6..8"):
        from emu.config import NicSpec

        NicSpec(counter_bits=9)


def test_a_flat_tree_on_128_nodes_runs_with_the_wide_counter_says_so_and_drops_a_level():
    sweep = load("nic_offload_sweep")

    class Quiet:
        def update(self, _text):
            pass

    kary = trio.run(sweep.measure_reduce, [128], 8, ["float64"], None, Quiet(), "kary")[0]
    flat = trio.run(sweep.measure_reduce, [128], 8, ["float64"], None, Quiet(), "flat")[0]
    assert kary["branch"] <= MAX_CPCNT and flat["branch"] == 127          # the root counts every leaf
    assert "CpCnt 6 bits" in kary["reading"] and "wide counter 8 bits" in flat["reading"]
    assert flat["nic_ns"] == flat["model_ns"] and kary["nic_ns"] == kary["model_ns"]  # one part: exact
    # one fabric crossing less, 127 children folded at one root instead of 11 + 11 at two levels
    assert flat["nic_ns"] < kary["nic_ns"]


def test_the_flat_tree_s_descriptor_counts_in_branchdegree_and_leaves_cpcnt_zero():
    from emu.nodes.collectives.offload import descriptors

    class Host:
        spec = emu.config.HostSpec(nic=emu.config.NicSpec(counter_bits=8, queue_capacity=255))

        def address(self, name):
            return int(name[1:])

    class Comm:
        size, rank, id, _seq, host = 256, 0, 1, 0, Host()
        members = [f"h{i}" for i in range(256)]

    _region, _nseg, posted = descriptors(Comm(), "reduce", np.ones(1), "sum", 0, 255, 1)
    d = posted[0].desc
    assert (d["branch"], d["cpcnt"]) == (255, 0)
    from emu.wire.coll import DESC

    back = dict(zip(DESC.names, DESC.unpack(DESC.pack(*(d[n] for n in DESC.names)))))  # real bytes: the fields fit
    assert (back["branch"], back["cpcnt"]) == (255, 0)
