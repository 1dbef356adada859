"""The traffic tests' parts drawn or computed a cheaper way than the plain one, against it: a
schedule drawn a part at a time (``Draws``), the zero-load model walked once per (switch, host)
(``PathModel``), and the routing policies whose UGAL counts are not read (``NO_UGAL``)."""

import pickle

import pytest

from emu.front.traffic_checks import NO_UGAL, destinations, schedule
from emu.front.traffic_draws import Draws
from emu.front.traffic_model import PathModel
from emu.topologies.registry import build


@pytest.mark.parametrize("pattern,n,to_self", [("uniform", 16, True), ("uniform", 9, False), ("hotspot", 8, False),
                                                ("transpose", 16, False), ("randperm", 8, False)])
def test_draws_in_parts_are_the_schedule(pattern, n, to_self):
    for i in (0, 3, n - 1):
        whole = schedule(pattern, n, i, 0.4, 700, 5, None, to_self)
        dr = Draws(pattern, n, i, 0.4, 700, 5, destinations(pattern, n, None, 5), to_self)
        when, dst = dr.upto(100)
        dr = pickle.loads(pickle.dumps(dr))  # (a domain process draws the rest)
        for end in (101, 228, 500, 10_000):
            w, d = dr.upto(end)
            when += w
            dst += d
        assert dr.done and dr.upto(10_000) == ([], []) and (when, dst) == whole
        assert pattern == "transpose" or when


@pytest.mark.parametrize("spec,sets", [("mesh:k=4,n=2", {"switch": {"model": "input_queued", "vcs": 2}}),
                                       ("torus:k=3,n=2", {}), ("fattree:k=4,n=2", {}), ("dragonfly:p=2", {}),
                                       ("mesh:k=3,n=2", {"switch": {"model": "input_queued", "cut_through": False}})])
def test_path_model_by_tails_is_the_route_sum(spec, sets):
    topo = build(spec, settings=sets)
    hosts = topo.host_names()
    model, plain = PathModel(topo, 200), PathModel(topo, 200)
    for a in reversed(hosts):
        for b in hosts:
            assert model(a, b) == plain._by_route(a, b), (a, b)
    assert model.exact and len(model.tails) >= len(topo.switches)


def test_no_ugal_names_real_policies_that_count_nothing():
    from emu.switch.routing import POLICIES

    assert NO_UGAL <= set(POLICIES) and not NO_UGAL & {"ugal_l", "ugal_g", "par"}


@pytest.mark.parametrize("spec,sets", [("mesh:k=3,n=2", {"switch": {"model": "input_queued"}}),
                                       ("fattree:k=4,n=2", {"link": {"framing": "flit"}}),
                                       ("star:n=4", {"link": {"framing": "qsnet"}, "host": {"mtu_bytes": 4000}})])
def test_largest_frames_is_largest_frame_of_each_node(spec, sets):
    """``emu.build.largest_frames`` (every node in one pass, for the routers' set-up) against
    ``largest_frame`` node by node; a link of another framing beside the rest counts at both ends."""
    from emu.build import largest_frame, largest_frames
    from emu.config import LinkSpec

    topo = build(spec, settings=sets)
    a, b = topo.host_names()[0], topo.switches[-1].name
    topo.add_link(a, b, LinkSpec(framing="flit" if "link" not in sets else "ethernet"))
    topo.add_host("lonely")  # (no link: Ethernet's)
    assert largest_frames(topo) == {n: largest_frame(topo, n) for n in topo.nodes}
    assert len(set(largest_frames(topo).values())) > 1
