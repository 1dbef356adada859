"""A lone input-queued router for unit tests of its rounds: ``s0`` with hosts h0-h3 on inputs 0-3 and
output 4 to a second router ``s1`` (2 VCs each), every route set, nothing running."""

from emu.config import LinkSpec, SwitchSpec
from emu.switch.iq import make_iq
from emu.topologies.base import Topology


def lone_router():
    """``s0``'s engine (``make_iq``), built alone."""
    t = Topology("star")
    for i in range(4):
        t.add_host(f"h{i}")
    t.add_switch("s0", SwitchSpec(model="input_queued", vcs=2))
    t.add_switch("s1", SwitchSpec(model="input_queued", vcs=2))  # (downstream of output 4: its VCs)
    for i in range(4):
        t.add_link(f"h{i}", "s0", LinkSpec(), a_port=0, b_port=i)
    t.add_link("s0", "s1", LinkSpec(), a_port=4, b_port=0)
    t.routes = {"s0": list(range(4)), "s1": [0] * 4}
    return make_iq(t.nodes["s0"], t, {})
