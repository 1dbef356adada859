"""Faults scheduled during a run: link down/up, switch down, bit-error rate; engines are told."""

import hashlib

import pytest

import apps
import emu
import hub  # noqa: F401  (registers the "hub" engine kind)
from emu.config import ConfigError, LinkSpec
from emu.faults import Fault, parse_time_ns
from emu.sim import EngineNet
from emu.wire import FCS_LEN
from emu.topologies import star

N, SIZE = 60, 900   # one-frame messages h0 -> h1 through s0


def test_fault_strings_parse_and_bad_ones_are_refused():
    assert Fault.parse("at=20us,link=s0-s4,down") == Fault(20_000, "down", ("s0", "s4"))
    assert Fault.parse("at=1.5ms,switch=s3,up") == Fault(1_500_000, "up", switch="s3")
    assert Fault.parse("at=300,link=h0-s0,ber=1e-6") == Fault(300, "ber", ("h0", "s0"), rate=1e-6)
    assert parse_time_ns("2s") == 2 * 10**9
    for bad, why in [("link=s0-s1,down", "needs at=TIME"), ("at=1us,down", "exactly one of"),
                     ("at=1us,link=s0,down", "two nodes"), ("at=-5,link=a-b,down", "within 0"),
                     ("at=1us,switch=s0,ber=0.1", "applies to a link"), ("at=1us,link=a-b,ber=2", "within 0..1"),
                     ("at=1us,link=a-b,sideways", "not understood"), ("at=1e30s,link=a-b,down", r"2\*\*62")]:
        with pytest.raises(ConfigError, match=why):
            Fault.parse(bad)


def _reference():
    """Arrival and start times of the frames on s0 -> h1 in an undisturbed run."""
    topo = star(2)
    net = EngineNet(topo)
    net.start({"h0": (apps.send_to, "h1", SIZE, 0, N)})
    net.step_all()
    link = LinkSpec()
    return [(t - link.latency_ns - link.serialization_ns(len(f) + FCS_LEN), t)
            for t, node, port, f in net.delivered if node == "h1"]


async def test_link_down_mid_run_loses_what_is_on_the_wire_and_drops_what_is_handed_to_it(tmp_path):
    ref = _reference()
    t_down, t_up = ref[10][0] + 3, ref[30][0] + 5      # mid-flight of frame 10 .. just after frame 30 starts
    in_flight = sum(1 for s, a in ref if s < t_down <= a)
    handed_while_down = sum(1 for s, a in ref if t_down <= s < t_up)   # s0's port is never backed up here
    assert in_flight == 1 and handed_while_down == 20
    cap = tmp_path / "down.pcapng"
    async with emu.Cluster(star(2), capture=cap) as net:
        await net.schedule(t_down, "down", link=("s0", "h1"))
        await net.schedule(t_up, "up", link=("h1", "s0"))
        await net.run({"h0": (apps.send_to, "h1", SIZE, 0, N)})
        m = net.metrics
        with pytest.raises(ConfigError, match="in the past"):
            await net.schedule(net.now - 1, "down", link=("s0", "h1"))
        st = {s["name"]: s for s in await net.stats()}
    assert m.lost_in_flight == {"h1-nic0": in_flight}
    assert m.dropped == {"s0-p1": handed_while_down}
    assert st["h1"]["engine"]["messages_received"] == N - in_flight - handed_while_down
    raw = cap.read_bytes()
    assert raw.count(b"lost: link down") == in_flight and raw.count(b"dropped: link down") == handed_while_down


async def test_the_engine_is_told_at_that_virtual_time_and_its_port_view_follows():
    t = star(3)
    t.nodes["s0"].info["engine"] = "hub"
    async with emu.Cluster(t) as net:
        await net.schedule(5_000, "down", link=("s0", "h2"))
        r1 = await net["h0"].ping("h1")            # before: h2 gets a copy too
        hub_el = net._local.by_name["s0"]
        assert hub_el.ports.up(2, 4_999) and not hub_el.ports.up(2, 5_000)
        await net.run({"h0": (apps.sleeper, 6_000)})   # past the change
        r2 = await net["h0"].ping("h1")            # after: the hub skips the down port
        st = {s["name"]: s for s in await net.stats()}
    hs = st["s0"]["engine"]
    assert (hs["link_changes"], hs["last_change_ns"]) == (1, 5_000)
    assert hs["skipped_down"] == 2 and r1 == r2  # request and reply each skipped port 2 once
    assert st["h2"]["engine"]["misdelivered"] == 2


async def test_a_switch_down_cuts_every_link_until_it_comes_back():
    async with emu.Cluster("star:n=3") as net:
        await net.schedule(0, "down", switch="s0")
        with pytest.raises(emu.DeadlockError, match="ping"):
            await net["h0"].ping("h2")
        await net.schedule(net.now, "up", switch="s0")
        assert await net["h0"].ping("h2") == 816
        with pytest.raises(ConfigError, match="not a switch"):
            await net.schedule(net.now, "down", switch="h0")


async def _ber_run(seed):
    async with emu.Cluster(star(2), seed=seed) as net:
        await net.schedule(0, "ber", link=("h0", "s0"), rate=1e-4)
        await net.run({"h0": (apps.send_to, "h1", SIZE, 0, N)})
        return net.metrics, {s["name"]: s for s in await net.stats()}


async def test_a_bit_error_rate_corrupts_frames_the_fcs_catches_deterministically():
    (m1, st1), (m2, _), (m3, _) = await _ber_run(3), await _ber_run(3), await _ber_run(4)
    bad = m1.corrupted["h0-nic0"]
    # P(frame hit) = 1 - (1 - 1e-4)^(8 * 950) = 0.53: between 15 and 45 of 60 with overwhelming odds
    assert 15 <= bad <= 45 and m1.fcs_errors == {"s0-p0": bad}
    assert m1 == m2 and m1 != m3  # another seed hits other frames
    assert st1["h1"]["engine"]["messages_received"] == N - bad


async def test_a_change_scheduled_after_the_apps_end_does_not_stretch_the_run():
    async with emu.Cluster("star:n=2") as net:
        base = await net["h0"].ping("h1")
        await net.schedule(net.now + 10**9, "down", link=("s0", "h1"))
        t0 = net.now
        assert await net["h0"].ping("h1") == base and net.metrics.completion_ns == base


def test_parallel_links_have_distinct_names_and_a_bare_pair_takes_them_all_saying_so():
    # issue 42: qsnet:nodes=64 joins s0 and s8 by two links; emu topo --links listed s0-s8 twice
    from emu.front.topo_cmd import check_fault_names
    from emu.topologies import build

    t = build("qsnet:nodes=64")
    names = t.link_names()
    assert len(set(names)) == len(names)  # every link by a name of its own
    assert [n for n in names if n.startswith("s0-s8")] == ["s0-s8.0", "s0-s8.1"]
    assert "h0-s0" in names  # a pair joined once keeps its plain name
    both = t.links_named("s0", "s8")
    assert len(both) == 2 and t.links_named("s8", "s0") == both
    assert t.links_named("s0", "s8.1") == [both[1]] and t.links_named("s8", "s0.0") == [both[0]]
    assert t.links_named("s0", "s8.2") == [] and t.links_named("h0", "s0.0") == []
    notes = check_fault_names(t, [Fault.parse("at=1us,link=s0-s8,down")], "qsnet:nodes=64")
    assert notes == ["--fault link=s0-s8: 2 parallel links join s0 and s8 (s0-s8.0, s0-s8.1); the fault takes "
                     "all of them (link=s0-s8.0 names one)"]
    assert check_fault_names(t, [Fault.parse("at=1us,link=s0-s8.1,down")], "qsnet:nodes=64") == []
    with pytest.raises(ConfigError, match=r"no link s0-s8\.2 in qsnet:nodes=64; nearest links: s0-s8\.\d"):
        check_fault_names(t, [Fault.parse("at=1us,link=s0-s8.2,down")], "qsnet:nodes=64")


async def test_a_fault_on_one_of_two_parallel_links_takes_that_one_only():
    t = emu.topologies.build("qsnet:nodes=64")
    both = t.links_named("s0", "s8")
    async with emu.Cluster(t) as net:
        assert net._link_ids("s0", "s8.1") == [2 * both[1], 2 * both[1] + 1]
        assert net._link_ids("s0", "s8") == [2 * both[0], 2 * both[0] + 1, 2 * both[1], 2 * both[1] + 1]
        with pytest.raises(ConfigError, match="no link between 's0' and 's8.5'"):
            net._link_ids("s0", "s8.5")
