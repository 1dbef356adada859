"""QsNet's adaptive-routing load: pending (unacknowledged) operations per link (spec 03; switch/routing/pending.py)."""

import pytest

import emu
from emu.config import ConfigError, SwitchSpec, parse_settings
from emu.switch.forward import make_switch
from emu.switch.routing.pending import Pending
from emu.topologies.registry import build
from emu.wire import PacketType, build_frame
from emu.wire.qsnet import ACK, AckKind, encode_packet


class _Idle:
    """A port view with every port up and idle (the pending count is the router's own)."""

    def up(self, port, now):
        return True

    def queue(self, port, now, vc=None):
        return (0, 0)

    def waiting(self, port):
        return 0


def _pkt(src, dst, pkt_id):
    return build_frame(src, dst, PacketType.QPKT, encode_packet(b"x" * 64, vc=0, prio=0, dest=dst, tstamp=0,
                                                                pkt_id=pkt_id))


def _ack(src, dst, pkt_id, kind=AckKind.ACK):
    return build_frame(src, dst, PacketType.QACK, ACK.pack(kind, 0, 0, 0, pkt_id, 0), prio=1)


def _router(*settings):
    t = build("fattree:k=4,n=3", settings=parse_settings(["switch.routing=qsnet", *settings]))
    sw = make_switch(t.nodes["s0"], t, {"seed": 0})
    sw.ports = _Idle()
    return sw


def test_a_packet_counts_on_its_link_until_its_ack_comes_back_and_the_ack_retraces_it():
    sw = _router()
    assert sw.spec.adaptive_load == "pending" and sw.candidates[63] == (4, 5, 6, 7)
    outs = [sw.receive(_pkt(1, 63, i), 1, 10 * i)[0][0] for i in range(8)]
    # threshold 2: two pending on 4, then 5, ... first free below the threshold, then the least loaded
    assert outs == [4, 4, 5, 5, 6, 6, 7, 7] and sw.pending.count == {4: 2, 5: 2, 6: 2, 7: 2}
    # the ACK of packet 2 (it left on 5) comes back: out of the port packet 2 came in on, 5 is light again
    back = sw.receive(_ack(63, 1, 2), 6, 100)
    assert back[0][0] == 1 and sw.pending.count[5] == 1
    assert sw.receive(_pkt(0, 63, 50), 0, 110)[0][0] == 5
    # a NACK retraces too; a token this router never saw is routed by the table
    assert sw.receive(_ack(63, 1, 7, AckKind.NACK), 4, 120)[0][0] == 1 and sw.pending.count[7] == 1
    assert sw.receive(_ack(63, 1, 999), 4, 130)[0][0] == sw.routes[1]
    assert sw.extra_stats()["pending"] == {"ops": 9, "acked": 2, "expired": 0}


def test_an_operation_whose_ack_never_comes_leaves_the_count_after_the_expiry():
    p = Pending(1000)
    f = _pkt(3, 9, 77)
    p.sent(f, 0, 5, 0)
    assert p.load(5, 999) == 1 and p.load(5, 1000) == 0 and p.stats["expired"] == 1
    p.sent(f, 0, 5, 2000)
    p.sent(f, 1, 6, 2500)  # the same packet again (a duplicate): it counts once, on its latest port
    assert (p.load(5, 2600), p.load(6, 2600)) == (0, 1)
    assert p.load(6, 3000) == 1 and p.load(6, 3500) == 0  # the first sending's expiry does not take the second
    sw = _router("switch.pending_expiry_ns=500")
    assert sw.receive(_pkt(1, 63, 1), 1, 0)[0][0] == 4 and sw.pending.load(4, 499) == 1 and sw.pending.load(4, 500) == 0


def test_the_queue_stand_in_is_an_option_and_bad_values_are_refused():
    assert _router("switch.adaptive_load=queue").pending is None
    t = build("fattree:k=2,n=2", settings=parse_settings(["switch.routing=static"]))
    assert make_switch(t.nodes["s0"], t, {}).pending is None  # static routing counts nothing
    with pytest.raises(ConfigError, match="adaptive_load 'credits' is not one of pending, queue"):
        SwitchSpec(adaptive_load="credits")
    with pytest.raises(ConfigError, match="pending_expiry_ns must be an integer within 1"):
        SwitchSpec(pending_expiry_ns=0)


async def _hot(model: str, load: str):
    """h0 -> h4 and h1 -> h6 on fattree:k=2,n=3 as QsNet puts: destination-mod-k sends both up s0's port 2."""
    t = build("fattree:k=2,n=3", settings=parse_settings(
        ["switch.routing=qsnet", f"switch.adaptive_load={load}", f"switch.model={model}"]))

    async def put(host, rank):
        host.mem_write(0x1000, b"p" * 32768)
        r = await host.put(rank, 0x1000, 0x100000, 32768)
        return r.ok, host.now

    async with emu.Cluster(t) as net:
        r = await net.run({"h0": (put, 4), "h1": (put, 6)})
        st = {s["name"]: s for s in await net.stats()}
        up = {p: net.metrics.link_frames.get(f"s0-p{p}", 0) for p in (2, 3)}
    assert all(ok for ok, _t in r.values())
    return max(t for _ok, t in r.values()), up, {n: s.get("pending") for n, s in st.items() if s.get("pending")}


@pytest.mark.parametrize("model", ["output_queued", "input_queued"])
async def test_both_router_models_spread_a_hot_link_by_pending_operations_and_every_ack_comes_home(model):
    ns, up, pend = await _hot(model, "pending")
    assert min(up.values()) > 4, up                           # both up links carry packets
    assert pend["s0"]["ops"] == 64 and all(p["ops"] == p["acked"] and p["expired"] == 0 for p in pend.values()), pend
    qns, qup, qpend = await _hot(model, "queue")
    assert qpend == {} and min(qup.values()) >= 0


def test_with_adaptive_heavy_route_no_light_link_keeps_the_packets_route():
    """Issue 44: the threshold sorts links into light or not; ``route`` ranks no heavy link above another."""
    outs = {}
    for heavy in ("least_loaded", "route"):
        sw = _router(f"switch.adaptive_heavy={heavy}")
        assert sw.routes[63] == 7 and sw.spec.adaptive_heavy == heavy
        outs[heavy] = [sw.receive(_pkt(1, 63, i), 1, 10 * i)[0][0] for i in range(11)]
        # 4's two ops are acknowledged: 4 is light again (0 pending), and taken under both
        for i in (0, 1):
            assert sw.receive(_ack(63, 1, i), 4, 200 + i)[0][0] == 1
        outs[heavy] += [sw.receive(_pkt(1, 63, 20 + i), 1, 210 + i)[0][0] for i in range(3)]
    # below the threshold both pick first free; above it least_loaded spreads packet by packet on
    # counts of 2 and 3, route keeps the table's port 7 whatever the others hold
    assert outs["least_loaded"] == [4, 4, 5, 5, 6, 6, 7, 7, 7, 4, 5, 4, 4, 6]
    assert outs["route"] == [4, 4, 5, 5, 6, 6, 7, 7, 7, 7, 7, 4, 4, 7]


def test_adaptive_heavy_route_gives_way_when_the_route_is_down_and_follows_a_source_route():
    sw = _router("switch.adaptive_heavy=route")
    for i in range(8):
        sw.receive(_pkt(1, 63, i), 1, i)
    assert sw.pending.count == {4: 2, 5: 2, 6: 2, 7: 2}
    sw.held.add(7)  # the table's port out of service: the least loaded live one, as least_loaded
    assert sw.receive(_pkt(1, 63, 8), 1, 10)[0][0] == 4
    sw.held.discard(7)
    assert sw.receive(_pkt(1, 63, 9), 1, 11)[0][0] == 7
    with pytest.raises(ConfigError, match="adaptive_heavy 'lightest' is not one of pick, least_loaded, route"):
        SwitchSpec(adaptive_heavy="lightest")


async def _mirror_put(host):
    host.mem_write(0x1000, b"m" * 16384)
    r = await host.put((host.rank + 8) % 16, 0x1000, 0x100000, 16384)
    return r.ok, host.now


async def _mirror(*settings, **kw):
    """Every node of fattree:k=4,n=2 puts 16 KiB to node i + 8 on input-queued routers: a
    permutation that destination-mod-k routes with no two flows on one link. ``settings``: qsnet's
    (none: static routing)."""
    t = build("fattree:k=4,n=2", settings=parse_settings(
        ["switch.model=input_queued"] + (["switch.routing=qsnet", *settings] if settings else ["switch.routing=static"])))

    async with emu.Cluster(t, **kw) as net:
        r = await net.run({h: (_mirror_put,) for h in net.hosts})
    assert all(ok for ok, _t in r.values())
    return max(t for _ok, t in r.values())


async def test_on_a_permutation_static_routes_cleanly_and_the_free_pick_keeps_it():
    """Issue 44: with every light link counted free (``adaptive_free=light``, the reading before),
    least_loaded moves packets between links whose pending counts differ by one or two (each
    carries a round trip's worth at line rate), so flows that had a link each meet; keeping the
    route loses less. Picking the link free now (the default) finds static's clean assignment."""
    light = "switch.adaptive_free=light"
    got = {"static": await _mirror(direct=True),
           "least_loaded": await _mirror(light, "switch.adaptive_heavy=least_loaded", direct=True),
           "route": await _mirror(light, "switch.adaptive_heavy=route", direct=True),
           "free": await _mirror("switch.adaptive_pick=first_free", direct=True)}
    assert got == {"static": 8576, "least_loaded": 10734, "route": 9866, "free": 8576}
    assert await _mirror(light, "switch.adaptive_heavy=route", processes=2) == got["route"]
