"""A frame damaged by an emulated bit error on a credit-flow link gives its credit back exactly.

The receiver of a frame that fails its FCS cannot trust the header that names the VC (and the POOL
flag) the frame's credit was charged to; the sender, which applied the fault, knows. So the sender
gives that credit back itself, one round trip later (as for a frame a fault lost), and the receiver
returns none for a frame that fails its FCS. The faults here are rigged to flip the VC byte's low
bit or the POOL flag: before, the credit went back to the VC the damaged header named (one VC short
for good, another over its buffer)."""

import random

import pytest
import trio

import emu
from emu.config import LinkSpec, SwitchSpec
from emu.buffers import VC_OFF
from emu.topologies.base import Topology
from emu.topologies.registry import build
from emu.wire.fabric import FLAG_POOL, FLAGS_OFF

L = 10
BPS = 8_000_000_000
VC_BIT = VC_OFF * 8 + 7  # the VC byte's low bit (``Element._fault`` flips 0x80 >> bit % 8)
POOL_BIT = FLAGS_OFF * 8 + (7 - FLAG_POOL.bit_length() + 1)
assert 0x80 >> (POOL_BIT % 8) == FLAG_POOL


class Rigged(random.Random):
    """A fault generator that corrupts every frame, flipping the given bits in turn."""

    def __init__(self, bits):
        super().__init__(0)
        self.bits, self.i = bits, 0

    def random(self):
        return 0.5  # no drop (probability 0), a corruption (probability 1)

    def randrange(self, n):
        bit = self.bits[self.i % len(self.bits)]
        self.i += 1
        assert bit < n
        return bit


def chain(sw, sw1=None):
    """h0 - s0 - s1 - h1, each router port 0 toward h0, port 1 toward h1 (``sw1``: s1's, if not ``sw``)."""
    link = LinkSpec(latency_ns=L, bandwidth_bps=BPS)
    t = Topology("chain2")
    t.add_host("h0")
    t.add_host("h1")
    t.add_switch("s0", sw)
    t.add_switch("s1", sw1 or sw)
    t.add_link("h0", "s0", link, a_port=0, b_port=0)
    t.add_link("s0", "s1", link, a_port=1, b_port=0)
    t.add_link("s1", "h1", link, a_port=1, b_port=0)
    t.routes = {"s0": [0, 1], "s1": [0, 1]}
    return t


def sender(n, size, vcs):
    async def app(host):
        for i in range(n):
            await host.send("h1", bytes(size), tag=i, vc=vcs[i % len(vcs)])
    return app


def receiver(n):
    async def app(host):
        return [len((await host.recv()).data) for _ in range(n)]
    return app


def _credits(net, name, port):
    """(per-VC credit, pool credit) the sending end of ``name``'s port holds now."""
    el = net._local.by_name[name]
    p = el.outs[port]
    if p.flow is not None:
        return list(p.flow.credits), p.flow.pool
    cr = getattr(el.engine, "credits", [None] * (port + 1))[port]
    return None if cr is None else (list(cr), el.engine.oc.pool[port])


def _rig(net, a, port, bits):
    p = net._local.by_name[a].outs[port]
    assert p.fault_rng is not None
    p.fault_rng = Rigged(bits)


IQ = SwitchSpec(model="input_queued", vcs=2, vc_buffer_bytes=1152, pool_bytes=2304, route_ns=7, vc_alloc_ns=5,
                sw_alloc_ns=3, traversal_ns=2)
OQ = SwitchSpec(vcs=2, vc_buffer_bytes=1152, pool_bytes=2304)


LINKS = {  # (routers s0, s1; the faulty link and its sending port)
    "nic-into-iq": (IQ, IQ, "h0", "s0", 0), "nic-into-oq": (OQ, OQ, "h0", "s0", 0),
    "iq-into-iq": (IQ, IQ, "s0", "s1", 1), "oq-into-oq": (OQ, OQ, "s0", "s1", 1),
    "iq-into-oq": (IQ, OQ, "s0", "s1", 1), "oq-into-iq": (OQ, IQ, "s0", "s1", 1)}


@pytest.mark.parametrize("sw,sw1,a,b,port", list(LINKS.values()), ids=list(LINKS))
@pytest.mark.parametrize("bits", [[VC_BIT], [POOL_BIT], [VC_BIT, POOL_BIT, 100]], ids=["vc", "pool", "mixed"])
async def test_damaged_frames_give_every_credit_back_to_where_it_was_charged(sw, sw1, a, b, port, bits):
    async with emu.Cluster(chain(sw, sw1)) as net:
        before = _all_credits(net)  # every sending end's credit, every buffer's occupancy
        assert before[a, port] is not None
        await net.set_fault(a, b, corrupt=1.0)
        _rig(net, a, port, bits)
        # long frames on both VCs: some into a VC buffer and the pool, some wholly into the pool
        await net.run({"h0": sender(8, 1000, [0, 1, 0, 0])})
        fcs = {s["name"]: sum(p["fcs_errors"] for p in s["ports"]) for s in await net.stats()}
        assert fcs[b] == 8  # every frame damaged and dropped at the receiver (not a QsNet packet)
        await net.set_fault(a, b)
        res = await net.run({"h0": sender(6, 1000, [0, 1]), "h1": receiver(6)})
        assert res["h1"] == [1000] * 6
        assert _all_credits(net) == before


def _qsnet_put(src, dst, n):
    async def app(host):
        host.mem_write(0x1000, bytes(range(256)) * (n // 256))
        r = await host.put(dst, 0x1000, 0x7000_0000, n)
        return r.ok
    return app


def _all_credits(net):
    """Every sending end's credit (per VC, pool) and every input-queued router's buffer occupancy."""
    out = {}
    for el in net._local.elements:
        for p in el.out_ports:
            out[el.name, p.index] = _credits(net, el.name, p.index)
        if hasattr(el.engine, "bufs"):
            out[el.name, "occupancy"] = ([list(r) for r in el.engine.bufs.occ], list(el.engine.bufs.pool))
        for p in el.in_ports:
            if p.buf is not None:
                out[el.name, "occupancy", p.index] = (list(p.buf.occ), p.buf.pool_occ)
    return out


@pytest.mark.parametrize("model", ["input_queued", "output_queued"])
@pytest.mark.parametrize("bits", [[VC_BIT], [POOL_BIT], [VC_BIT, POOL_BIT, 300]], ids=["vc", "pool", "mixed"])
def test_damaged_qsnet_packets_a_router_passes_on_take_no_counted_room(bits, model):
    """QsNet packets are handed on by the routers even when their FCS fails (their own CRCs protect
    them end to end): the router files such a packet without charging its buffers, and its sender
    gives the credit back; every credit is home at the end, every buffer empty."""
    t = build("qsnet:nodes=4", settings={"switch": {"model": model}})

    async def main():
        async with emu.Cluster(t) as net:
            hs = net.hosts
            h0 = net._local.by_name[hs[0]]
            before = _all_credits(net)
            await net.set_fault(hs[0], h0.outs[0].peer, corrupt=1.0)
            p = h0.outs[0]
            p.fault_rng = Rigged(bits)
            await net.run({hs[0]: _qsnet_put(hs[0], 3, 8192)})
            damaged = p.fault_corrupted
            await net.set_fault(hs[0], h0.outs[0].peer)
            assert await net.run({hs[0]: _qsnet_put(hs[0], 3, 8192)}) == {hs[0]: True}
            assert damaged > 0 and p.flow is not None
            assert _all_credits(net) == before

    trio.run(main)


@pytest.mark.parametrize("sw", [IQ, OQ], ids=["input_queued", "output_queued"])
async def test_a_seeded_bit_error_rate_on_credit_links_leaves_every_credit_home(sw):
    """Bit errors where they fall (seeded): the damaged frames are dropped at the receiver, the rest
    delivered, and once the links are quiet every credit is back where it started."""
    async with emu.Cluster(chain(sw)) as net:
        before = _all_credits(net)
        await net.schedule(0, "ber", link=("h0", "s0"), rate=1e-4)
        await net.schedule(0, "ber", link=("s0", "s1"), rate=1e-4)
        await net.run({"h0": sender(40, 1000, [0, 1, 1])})
        stats = {s["name"]: s for s in await net.stats()}
        fcs = sum(p["fcs_errors"] for s in stats.values() for p in s["ports"])
        delivered = stats["h1"]["engine"]["messages_received"]
        assert fcs > 0 and delivered == 40 - fcs  # every frame damaged once at the most, none lost otherwise
        assert _all_credits(net) == before
