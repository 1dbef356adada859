"""QsNet's pick among the lightly loaded links reads whether a link is free now (issue 44;
``SwitchSpec.adaptive_free=now``, the default; switch/routing/qsnet.py).

The threshold on pending operations (a round trip's worth per busy link) takes the subset; the pick
-- first free, next free, random -- takes a link with nothing on its line and nothing waiting for
it, or, none free, one with the fewest bytes ahead (the first to free)."""

import emu
from emu.config import parse_settings
from emu.switch.forward import make_switch
from emu.topologies.registry import build
from emu.wire import PacketType, build_frame
from emu.wire.qsnet import encode_packet

from test_qsnet_routing import _frame


class _View:
    """Every port up; ``ahead``: bytes on a port's line and waiting for it (0: free)."""

    def __init__(self, ahead=None, down=()):
        self.ahead, self.down = dict(ahead or {}), set(down)

    def up(self, port, now):
        return port not in self.down

    def queue(self, port, now, vc=None):
        b = 0 if vc is not None else self.ahead.get(port, 0)
        return (1 if b else 0, b)

    def waiting(self, port):
        return 0


def _router(*settings):
    t = build("fattree:k=4,n=3", settings=parse_settings(["switch.routing=qsnet", *settings]))
    sw = make_switch(t.nodes["s0"], t, {"seed": 0})
    assert sw.candidates[63] == (4, 5, 6, 7) and sw.routes[63] == 7
    assert (sw.spec.adaptive_free, sw.spec.adaptive_heavy, sw.spec.adaptive_load) == ("now", "pick", "pending")
    return sw


def _pkt(pkt_id, dst=63):
    return build_frame(1, dst, PacketType.QPKT, encode_packet(b"x" * 64, vc=0, prio=0, dest=dst, tstamp=0,
                                                              pkt_id=pkt_id))


def _out(sw, view, pkt_id, now=0):
    sw.ports = view
    return sw.receive(_pkt(pkt_id), 1, now)[0][0]


def test_the_light_subset_then_the_free_link_then_the_first_to_free():
    sw = _router()
    busy = {4: 9000, 6: 9000, 7: 9000}
    assert [_out(sw, _View(busy), i) for i in (0, 1)] == [5, 5]       # light and free: 5, though 4 is lower
    assert sw.pending.count[5] == 2                                   # 5 is heavy now (threshold 2)
    assert _out(sw, _View(busy), 2) == 4                              # free but heavy: out; none light free: first
    assert _out(sw, _View({4: 3000, 6: 1074, 7: 2000}), 3) == 6       # light ones, fewest bytes ahead: the first to free
    assert [_out(sw, _View({q: 500 for q in (4, 5, 6, 7) if q != p}), i) for i, p in ((4, 4), (5, 6), (6, 7), (7, 7))] \
        == [4, 6, 7, 7]
    assert sw.pending.count == {4: 2, 5: 2, 6: 2, 7: 2}
    # every link heavy: the threshold ranks none above another, the pick decides over all of them
    assert _out(sw, _View({4: 1074, 5: 2148, 6: 1074, 7: 0}), 8) == 7     # the free one
    assert _out(sw, _View({4: 1074, 5: 2148, 6: 1074, 7: 50}), 9) == 7    # the first to free (3 pending: no matter)
    assert _out(sw, _View({4: 1074, 5: 2148, 6: 1074, 7: 5000}), 10) == 4
    assert sw.pending.count == {4: 3, 5: 2, 6: 2, 7: 4}


def test_next_free_and_random_choose_among_those_first_to_free():
    sw = _router("switch.adaptive_pick=next_free", "switch.adaptive_threshold=100")
    v = _View({4: 0, 5: 0, 6: 9000, 7: 0})
    assert [_out(sw, v, i) for i in range(5)] == [4, 5, 7, 4, 5]      # round robin over the free ones
    sw = _router("switch.adaptive_pick=random", "switch.adaptive_threshold=100")
    got = [_out(sw, _View({4: 700, 5: 9000, 6: 700, 7: 800}), i) for i in range(60)]
    assert set(got) == {4, 6} and min(got.count(4), got.count(6)) > 15


def test_the_reading_before_is_an_option_and_a_source_route_keeps_its_light_port():
    t = build("fattree:k=4,n=3", settings=parse_settings(["switch.routing=qsnet", "switch.adaptive_free=light"]))
    sw = make_switch(t.nodes["s0"], t, {"seed": 0})
    assert _out(sw, _View({4: 9000, 5: 9000}), 0) == 4                # every light link counts free: the lowest
    sw = _router()
    sw.ports = _View({6: 9000})
    assert sw.receive(_frame(63, route=2), 0, 0)[0][0] == 6           # its route's port is light: taken, busy or not
    assert sw.receive(_frame(63, route=2), 0, 1)[0][0] == 6           # (host messages add no pending operations)


QS = ["link.bandwidth_bps=20000000000", "link.framing=qsnet", "link.latency_ns=5", "switch.model=input_queued",
      "switch.cut_through=true", "switch.flit_bytes=256", "switch.processing_delay_ns=35", "switch.vcs=32",
      "switch.vc_buffer_bytes=256", "switch.pool_bytes=4096"]
"""``qsnet:``'s hardware (``QSNET_DEFAULTS``) on a fat tree small enough for a test."""
PERM = [10, 7, 15, 6, 8, 1, 9, 12, 13, 14, 5, 2, 0, 4, 11, 3]
"""On fattree:k=4,n=2 destination-mod-k sends every leaf's four flows up two of its four up links,
two flows each (the up port is 4 + destination mod 4), and no two flows share a down link."""


async def _put(host):
    host.mem_write(0x1000, b"p" * 16384)
    r = await host.put(PERM[host.rank], 0x1000, 0x100000, 16384)
    return r.ok, host.now


async def _perm(*settings):
    t = build("fattree:k=4,n=2", settings=parse_settings(QS + list(settings)))
    async with emu.Cluster(t, direct=True) as net:
        r = await net.run({h: (_put,) for h in net.hosts})
    assert all(ok for ok, _t in r.values())
    return max(t for _ok, t in r.values()), min(t for _ok, t in r.values())


async def test_adaptive_beats_static_where_static_puts_two_flows_on_a_link():
    """Virtual time, exact: the last and first node to finish 16 KiB. Static's shared up links carry
    two flows each at half rate; the free pick spreads them over the idle links (the reading before,
    ``adaptive_free=light, adaptive_heavy=least_loaded``, gives (12319, 10689): docs/qsnet.md)."""
    static = await _perm("switch.routing=static")
    free = await _perm("switch.routing=qsnet")
    assert static == (15709, 14664) and free == (12388, 10164)
