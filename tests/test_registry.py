"""Engine kinds by name: the runtime builds whatever kind a node names, also in worker processes."""

import pytest

import apps
import emu
import hub  # noqa: F401  (registers the "hub" engine kind)
from emu.build import ENGINES, make_engine
from emu.sim import EngineNet
from topologies import star


def hub_star(n):
    t = star(n)
    t.nodes["s0"].info["engine"] = "hub"
    return t


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_registered_engine_kind_runs_in_every_process(processes):
    t = hub_star(4)
    async with emu.Cluster(t, processes=processes) as net:
        rtt = await net["h0"].ping("h2")
        stats = {s["name"]: s for s in await net.stats()}
    assert stats["s0"]["kind"] == "hub" and stats["s0"]["engine"]["repeated"] == 2 * 3
    # the hosts the hub should not have reached count what they got as misdelivered
    assert stats["h1"]["engine"]["misdelivered"] == 2 and stats["h3"]["engine"]["misdelivered"] == 2
    assert rtt == EngineNet(t).run({"h0": (apps.ping, "h2")})["h0"]
    assert "hub" in net.plan.engine_modules and len(net.plan.engine_modules) == 2  # the hub, the hosts


def test_an_unknown_kind_is_refused_before_anything_starts():
    t = star(2)
    t.nodes["s0"].info["engine"] = "nosuch"
    with pytest.raises(emu.ConfigError, match="no engine kind 'nosuch' is registered"):
        emu.Cluster(t)
    assert make_engine(star(2), "s0").kind == "switch" and {"host", "switch", "hub"} <= set(ENGINES)
