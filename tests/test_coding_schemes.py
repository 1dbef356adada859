"""Spec 02: the named "all-at-once coded" scheme, and why our hop count and the source's pick
different group sizes (the planner's countings)."""

import numpy as np
import pytest

from emu.config import merge_settings
from emu.nodes.collectives.coding import Scheme, count, plan
from emu.nodes.collectives.coding.countings import COUNTINGS, best_by_counting
from emu.nodes.collectives.coding.counter import count_settled
from emu.nodes.collectives.coding.planner import report, shapes
from emu.sim import EngineNet
from emu.topologies import build as _build
from emu.topologies.grid import Grid
from emu.topologies.registry import IDEAL_ROUTER

OQ = merge_settings(IDEAL_ROUTER, {"switch": {"cut_through": True}})


def _run(spec, operation, algo, shape=None, mcast="tree", root=0):
    """A mcast_all/mcast by the CLI's app, with spec 02's figures and the router hops from the frames."""
    from emu.nodes.collectives.coding.timing import figures
    from emu.nodes.collectives.run import collective_app
    from emu.wire import PacketType, parse_frame

    t = _build(spec, settings=OQ)
    net = EngineNet(t)
    hosts = t.host_names()

    from emu.nodes.collectives.comm import Comm

    Comm.nc_shape, Comm.nc_mcast = shape, mcast  # what every rank's communicator reads (scheme_of)
    try:
        res = net.run({h: (collective_app, hosts, operation, algo, 4, "float32", "sum", root, 3) for h in hosts})
    finally:
        del Comm.nc_shape, Comm.nc_mcast
    cross = uni = 0
    for _t, node, _p, f in net.delivered:
        if parse_frame(f)[4] == PacketType.NC:
            cross += 1
            uni += net.t.nodes[node].kind == "host"
    return t, res, figures(t, [res[h][5] for h in hosts]), cross - 2 * uni


@pytest.mark.parametrize("spelling", ["all_at_once_coded", "all-at-once-coded"])
@pytest.mark.parametrize("operation", ["mcast_all", "mcast"])
def test_all_at_once_coded_is_nc_with_all_at_once_multicasts_figure_for_figure(spelling, operation):
    t, res, f, hops = _run("mesh:k=4,n=2", operation, spelling, root=5)
    t2, res2, f2, hops2 = _run("mesh:k=4,n=2", operation, "nc", mcast="all_at_once", root=5)
    assert f == f2 and hops == hops2  # bit-exact: the same run
    for h in t.host_names():
        assert np.array_equal(res[h][0], res2[h][0])
        assert res[h][3].startswith("all_at_once_coded = nc(all_at_once, groups ")
    sources = (5,) if operation == "mcast" else None
    g = Grid(4, 2, False)
    assert hops == count(g, Scheme("all_at_once_coded", sources=sources)).total \
        == count(g, Scheme("nc", mcast="all_at_once", sources=sources)).total
    assert f["execution_ns"] == sum(f["steps"].values()) > 0 and f["packet_latency_mean_ns"] > 0
    if operation == "mcast_all":  # one round per phase: all-at-once multicasts inside
        assert list(f["steps"]) == ["B+F r0", "C+D r0", "E r0", "G"]
        # and it differs from nc with tree multicasts and from plain all-at-once
        assert hops != count(g, Scheme("nc")).total and hops < count(g, Scheme("all_at_once")).total


def test_all_at_once_coded_from_the_command_line(capsys):
    from emu.front.cli import main

    assert main(["run", "--topo", "mesh:k=4,n=2", "--test", "mcast_all", "--algo", "all-at-once-coded"]) == 0
    out = capsys.readouterr().out
    assert "algo=all_at_once_coded = nc(all_at_once, groups" in out and "execution_ns=" in out
    assert "packet_latency_mean_ns=" in out and "completion" in out
    p = plan(Grid(4, 2, False), Scheme("all_at_once_coded"))
    assert p.scheme.algo == "nc" and p.scheme.mcast == "all_at_once"


def test_in_placement_what_if_counts_from_the_group_s_middle():
    g = Grid(16, 2, False)
    ours = count_settled(g, "nc", (16, 4))
    mid = count_settled(g, "nc", (16, 4), in_at="group")
    assert ours.hops["B"] == mid.hops["B"] and ours.hops["F"] == mid.hops["F"]  # no IN in B and F
    # the middle of a 16x4 group at y 0..3 is (7, 1); ours sits at (7, 3), toward the centre: the INs
    # are farther apart (D); the tree's hops into a power-of-two box are the same from any root (E)
    assert mid.hops["D"] > ours.hops["D"] and mid.hops["E"] == ours.hops["E"]
    ours, mid = (count_settled(g, "nc", (16, 4), "all_at_once", in_at=w) for w in ("network", "group"))
    assert mid.hops["E"] < ours.hops["E"] and mid.hops["D"] > ours.hops["D"]  # all-at-once: E from the middle


def test_why_our_count_and_the_source_s_pick_different_group_sizes():
    g = Grid(16, 2, False)
    rows = {c.name: best_by_counting(g, shapes(g), c) for c in COUNTINGS}
    ours = rows[COUNTINGS[0].name]
    assert ours["shape"] == "16x4" and ours["hops"] == count(g, Scheme("nc", (16, 4))).total
    # neither the IN placement nor the torus links bring 32-node groups; counting E once per chain does
    assert rows["INs at their group's own middle node"]["members"] == 64
    assert rows["on the torus (wrap-around links)"]["members"] == 64
    per_chain = rows["step E once per chain (one message per other group)"]
    assert per_chain["members"] == 32 and per_chain["below_floor"]
    # per chain: E over (M-1), checked against the per-step count
    c = count_settled(g, "nc", (16, 2))
    assert per_chain["hops"] == c.hops["B"] + c.hops["D"] + c.hops["F"] + c.hops["E"] // 31
    text = report(g)
    assert "the source reports 32-node groups as the fewest hops here; ours picks 16x4 (64 nodes)." in text
    assert "only these countings pick 32-node groups: step E once per chain" in text
    assert "the difference is in which unicasts are counted" in text
    # another grid: the countings, no claim about the source
    small = report(Grid(8, 2, False))
    assert "why counts differ" in small and "the source reports" not in small


def test_emu_plan_nc_plans_all_at_once_coded(capsys):
    from emu.front.cli import main

    assert main(["plan", "nc", "mesh:k=8,n=2", "--scheme", "all_at_once_coded"]) == 0
    out = capsys.readouterr().out
    assert "hierarchical coding (nc, all_at_once multicast)" in out
    g = Grid(8, 2, False)
    shape = plan(g, Scheme("all_at_once_coded")).scheme.shape
    assert f"chosen: groups of {'x'.join(map(str, shape))}" in out
    assert f"{count(g, Scheme('all_at_once_coded')).total:,} hops against" in out
