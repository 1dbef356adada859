"""The zero-load model's totals over a load point's measured packets (``PathModel.totals``: every route
walked at once with numpy) against the plain sum along ``Topology.route``, pair by pair; and its falls
back to the pairs where a part is not an int or a route is broken."""

import dataclasses
import random

import pytest

from emu.config import ConfigError
from emu.front.traffic_model import PathModel
from emu.topologies.base import NO_ROUTE
from emu.topologies.registry import build


def _groups(topo, count: int, seed: int):
    hosts = topo.host_names()
    r = random.Random(seed)
    return [(b, [r.choice(hosts) for _ in range(r.randrange(count))]) for b in hosts]


def _plain(topo, size, groups):
    plain = PathModel(topo, size)
    total, top = 0, 0
    for b, ss in groups:
        zs = [plain._by_route(a, b) for a in ss]
        total += sum(zs)
        top = max([top, *zs])
    return total, top


@pytest.mark.parametrize("spec,sets", [("mesh:k=4,n=2", {"switch": {"model": "input_queued", "vcs": 2}}),
                                       ("mesh:k=3,n=2", {"switch": {"model": "input_queued", "cut_through": False}}),
                                       ("torus:k=3,n=2", {}), ("fattree:k=4,n=2", {}), ("dragonfly:p=2", {}),
                                       ("hyperx:S=3,L=2", {}), ("qsnet:nodes=16", {})])
def test_totals_are_the_route_sums(spec, sets):
    topo = build(spec, settings=sets)
    model = PathModel(topo, 200)
    for seed in range(3):  # (several load points of one model: the parts it took once serve the next)
        groups = _groups(topo, 12, seed)
        got = model.totals(groups)
        assert got == _plain(topo, 200, groups) and all(type(x) is int for x in got)
    assert model._arrays is not None and not model.cache  # walked at once, not pair by pair
    assert model.totals([(b, []) for b in topo.host_names()]) == (0, 0)


def test_totals_of_two_sizes_and_two_topologies_are_their_own():
    """One model per (topology, size): nothing of one is read by another."""
    small, big = build("mesh:k=3,n=2"), build("mesh:k=4,n=2", settings={"link": {"latency_ns": 7}})
    for topo in (small, big, small):
        for size in (64, 1000):
            groups = _groups(topo, 6, size)
            assert PathModel(topo, size).totals(groups) == _plain(topo, size, groups)
    g = [(small.host_names()[0], small.host_names()[1:])]
    assert PathModel(small, 64).totals(g) != PathModel(small, 1000).totals(g)


def test_a_float_part_is_summed_pair_by_pair_in_order():
    topo = build("torus:k=3,n=2")
    lk = topo.links[-1]
    object.__setattr__(lk, "spec", dataclasses.replace(lk.spec))  # (its own spec: the others keep theirs)
    object.__setattr__(lk.spec, "latency_ns", 10.1)  # (refused as a setting: only a float reaches this way)
    groups = _groups(topo, 20, 1)
    model = PathModel(topo, 100)
    total, top = model.totals(groups)
    assert (total, top) == _plain(topo, 100, groups) and type(total) is float and not model.exact


def test_a_broken_route_is_refused_as_the_route_is():
    topo = build("mesh:k=3,n=2")
    hosts = topo.host_names()
    topo.routes["s4"] = list(topo.routes["s4"])
    topo.routes["s4"][topo.nodes[hosts[5]].id] = NO_ROUTE
    with pytest.raises(ConfigError) as plain:
        topo.route(hosts[3], hosts[5])
    with pytest.raises(ConfigError) as walked:
        PathModel(topo, 100).totals([(hosts[5], [hosts[0], hosts[3]])])
    assert str(walked.value) == str(plain.value)
    assert PathModel(topo, 100).totals([(hosts[5], [hosts[5], hosts[2]])]) == _plain(topo, 100, [(hosts[5], [hosts[5], hosts[2]])])
