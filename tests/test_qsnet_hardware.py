"""``qsnet:`` defaults as spec 03 describes the hardware: input-queued routers of 35 ns that cut through
at 256-byte segments, 5 ns cables, 32 VCs of one segment each plus a shared pool of 16 per input link,
adaptive routing; and the pool's credits, exact."""

import pytest
import trio

import emu
from emu.config import ConfigError, SwitchSpec
from emu.topologies.registry import QSNET_BEFORE, build
from load_script import load as _load


def test_qsnet_defaults_are_the_hardware_and_qsnet_before_gives_the_old_switch():
    t = build("qsnet:nodes=16")
    sw = {s.spec for s in t.switches}
    assert len(sw) == 1
    s = sw.pop()
    assert (s.model, s.cut_through, s.flit_bytes, s.processing_delay_ns, s.vcs, s.vc_buffer_bytes, s.pool_bytes,
            s.routing) == ("input_queued", True, 256, 35, 32, 256, 4096, "qsnet")
    assert {lk.spec.latency_ns for lk in t.links} == {5}
    old = build("qsnet:nodes=16", settings=QSNET_BEFORE)
    o = old.switches[0].spec
    assert (o.model, o.vcs, o.vc_buffer_bytes, o.routing) == ("output_queued", 1, 0, "static")
    assert {lk.spec.latency_ns for lk in old.links} == {100}
    static = build("qsnet:nodes=16", settings={"switch": {"routing": "static"}})
    assert static.switches[0].spec.routing == "static"


def test_vcs_go_to_32_and_the_pool_is_whole_flits():
    assert SwitchSpec(vcs=32).vcs == 32
    with pytest.raises(ConfigError, match="within 1..32"):
        SwitchSpec(vcs=33)
    with pytest.raises(ConfigError, match="whole number of 256-byte flits"):
        SwitchSpec(model="input_queued", flit_bytes=256, vc_buffer_bytes=256, pool_bytes=100)
    with pytest.raises(ConfigError, match="needs finite VC buffers"):
        SwitchSpec(model="input_queued", pool_bytes=256)


@pytest.mark.parametrize("nodes,size,want", [(32, 8, 1008), (32, 1024, 1669), (512, 8, 1222), (512, 1024, 2049)])
def test_a_lone_put_takes_its_model_exactly(nodes, size, want):
    """Per hop: 5 ns of cable + the head segment's time (8 B put: 48 bytes, 20 ns; 1 KiB: 256 bytes,
    103 ns), 35 ns per router; the packet's other segments once; the adapters, the memory write and the
    ACK's way back (scripts/qsnet_latency.py's model)."""
    r = trio.run(_load("qsnet_latency").measure, f"qsnet:nodes={nodes}", size)
    assert r["put_ns"] == r["model_ns"] == want
    hops = r["hops"]
    head = 20 if size == 8 else 103
    rest = {8: 0, 1024: 432 - 103}[size]
    assert r["cross_ns"] == hops * (5 + head) + (hops - 1) * 35 + rest


def test_qsnet_before_gives_the_old_figures():
    r = trio.run(_load("qsnet_latency").measure, "qsnet:nodes=32", 8, QSNET_BEFORE)
    assert r["put_ns"] == r["model_ns"] == 1768   # store-and-forward, 100 ns links (the old default)


def test_the_latency_script_runs_at_a_tiny_size(capsys):
    assert _load("qsnet_latency").main(["--nodes", "4", "--sizes", "8"]) == 0
    out = capsys.readouterr().out
    assert "put_ns" in out and "model_ns" in out
    assert _load("qsnet_latency").main(["--nodes", "x"]) == 2


async def _bulk(host, to, size):
    host.mem_write(0x1000, bytes(i & 0xFF for i in range(size)))
    r = await host.put(to, 0x1000, 0x8000_0000, size)
    return r.ok


def _engines(net, t):
    return [net._local.by_name[s.name].engine for s in t.switches]


def test_bulk_puts_use_the_pool_and_every_credit_comes_back_exactly():
    """Four nodes stream 4 KiB packets (17 segments: one VC buffer + 16 of the pool) at one node: the
    pool fills, frames wait for credit, and at the end every router's VC buffers and pools are empty
    and every sender holds full credit again, per VC and for the pool."""
    t = build("qsnet:nodes=8", settings={"elan": {"packet_bytes": 4072}})

    async def main():
        async with emu.Cluster(t) as net:
            hs = net.hosts
            res = await net.run({h: (_bulk, 0, 32 * 1024) for h in hs[1:5]})
            assert all(res.values())
            engs = _engines(net, t)
            for e in engs:
                assert not any(any(r) for r in e.bufs.occ) and not any(e.bufs.pool)
                for o, cr in enumerate(e.credits):
                    if cr is not None:
                        assert cr == [256] * 32 and e.oc.pool[o] == 4096
            return max(max(e.bufs.pool_peak) for e in engs)

    peak = trio.run(main)
    assert peak == 4096   # a 17-segment packet: its first segment in its VC buffer, 16 in the pool


def test_a_frame_longer_than_a_vc_buffer_and_the_pool_is_refused_in_one_line():
    t = build("qsnet:nodes=4", settings={"switch": {"pool_bytes": 512}})  # 768 bytes < a 1500-byte MTU's frame

    async def main():
        async with emu.Cluster(t):
            pass
    with pytest.raises(ConfigError, match="cannot hold a"):
        trio.run(main)


def test_priority_script_at_a_tiny_size(capsys):
    mod = _load("qsnet_priority")
    m = mod.models("qsnet:nodes=8", None)
    assert (m["bulk_pkt_ns"], m["seg_ns"]) == (432, 103)   # 1080 and 256 bytes at 20 Gbit/s
    lat = {p: trio.run(mod.measure, "qsnet:nodes=8", 3, 16 * 1024, 3000, p)["latency_ns"] for p in (0, 1)}
    assert lat[1] <= lat[0]
    assert lat[1] >= m["idle_ns"]
    assert mod.main(["--nodes", "8", "--bulk", "2", "--bulk-size", "8KiB", "--at", "1000"]) == 0
    assert "priority=1" in capsys.readouterr().out


async def _prio_put(host, to, prio):
    host.mem_write(0x1000, b"\x01" * 8)
    r = await host.put(to, 0x1000, 0x2000, 8, priority=prio)
    return r.ok


def test_a_priority_put_sends_its_packet_at_priority_1_and_a_bad_priority_is_refused():
    from emu.nodes.nic.qsrequests import _check_prio
    from emu.wire import HDR_LEN
    from emu.wire.qsnet import decode_packet

    sent = []

    async def main():
        async with emu.Cluster("qsnet:nodes=4") as net:
            nic = net._local.by_name["h0"].engine
            emit = nic.emit

            def spy(dst, ptype, body, at, **kw):
                sent.append((ptype, kw.get("prio", 0), body))
                return emit(dst, ptype, body, at, **kw)
            nic.emit = spy
            res = await net.run({net.hosts[0]: (_prio_put, 3, 1)})
            assert res[net.hosts[0]]
    trio.run(main)
    pkts = [(prio, decode_packet(HDR_LEN * b"\0" + body, HDR_LEN)[1]) for ptype, prio, body in sent if ptype == 5]
    assert pkts == [(1, 1)]   # fabric header prio 1, segment header prio bit 1
    with pytest.raises(ValueError, match="priority must be 0"):
        _check_prio("put", 2)


async def _small_at(host, to, at, prio):
    host.mem_write(0x1000, b"\x5a" * 8)
    await host.sleep(at)
    t0 = host.now
    r = await host.put(to, 0x1000, 0x7000_0000, 8, priority=prio)
    return r.ok, r.t_ns - t0


@pytest.mark.parametrize("routing", ["static", "qsnet"])
def test_a_priority_put_goes_into_bulk_packets_at_segment_boundaries_and_credits_stay_exact(routing):
    """Static routing puts the bulk stream h1 -> h31 and the small put h0 -> h31 on the same links
    (router to router: cut and stretched; router to host: cut): at priority 1 the put waits at most a
    segment a hop; at priority 0 more. Every credit comes back, per VC, per pool, per frame."""
    mod = _load("qsnet_priority")
    settings = {"switch": {"routing": routing}}
    m = mod.models("qsnet:nodes=32", settings)
    out = {}
    for prio in (0, 1):
        t = build("qsnet:nodes=32", settings=settings)

        async def main():
            async with emu.Cluster(t) as net:
                hs = net.hosts
                res = await net.run({hs[1]: (_bulk, 31, 64 * 1024), hs[2]: (_bulk, 31, 64 * 1024),
                                     hs[0]: (_small_at, 31, 3000, prio)})
                engs = _engines(net, t)
                for e in engs:
                    assert not any(any(r) for r in e.bufs.occ) and not any(e.bufs.pool)
                    for o, cr in enumerate(e.credits):
                        if cr is not None:
                            assert cr == [256] * 32 and e.oc.pool[o] == 4096 and not any(e.oc.frames[o])
                stats = [e.iq_stats for e in engs]
                return res, sum(s.get("cut_in", 0) for s in stats), sum(s.get("stretched", 0) for s in stats)

        res, cuts, stretched = trio.run(main)
        ok, lat = res[t.hosts[0].name] if t.hosts[0].name in res else next(v for k, v in res.items() if str(k) == "h0")
        assert ok
        out[prio] = (lat, cuts, stretched)
    (lat0, _c0, _s0), (lat1, cuts1, stretched1) = out[0], out[1]
    assert m["idle_ns"] <= lat1 <= m["idle_ns"] + m["hops"] * m["seg_ns"] < lat0
    if routing == "static":
        assert cuts1 > 0 and stretched1 > 0


def _line_port():
    """An output port into an input-queued router (head delivery), QsNet framing, 10 Gbit/s."""
    from emu.port import OutPort
    from emu.wire.framing import framing

    return OutPort(index=0, name="s0-p0", iface=0, link_id=1, peer="s1", peer_port_name="s1-p0", latency_ns=0,
                   bandwidth_bps=10_000_000_000, head_bytes=256, framing=framing("qsnet"))


def _qs_frame(size: int, prio: int) -> bytes:
    from emu.wire import PacketType, build_frame

    f = bytearray(build_frame(1, 2, PacketType.QPKT, bytes(size)))
    from emu.port import PRIO_OFF

    f[PRIO_OFF] = prio
    return bytes(f)


def test_two_frames_cut_into_one_packet_never_overlap_and_a_stretch_leaves_started_frames_alone():
    # a frame cut in at a boundary moves only the boundaries after it: the next one goes after it
    port = _line_port()
    port.enqueue(_qs_frame(4000, 0), 0)
    bulk_done = port.line[1]
    a = port.enqueue(_qs_frame(1500, 1), 1000)
    a_end = a + port._ser(port.framing.length_wire(port.pending[-1][2]))
    b = port.enqueue(_qs_frame(1500, 1), 1000)
    assert 1000 <= a < a_end <= b                        # one after the other on the line
    assert port.line[1] == bulk_done + 2 * (a_end - a)   # the packet's rest follows both
    # a stretch from upstream at a later time moves what starts after it, not what already started
    from emu.segcut import stretch

    before = [(s, arr) for s, arr, _f, _p in port.pending]
    assert stretch(port, port.line[0], 500, a_end - 1)
    after = [(s, arr) for s, arr, _f, _p in port.pending]
    assert after[:2] == before[:2]                       # the packet and the first cut-in stay
    assert after[2] == (before[2][0] + 500, before[2][1] + 500)
