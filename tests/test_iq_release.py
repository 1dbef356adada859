"""The input-queued router against BookSim2's ``iq`` router (issue 44): when an output VC and a
buffer's credit are released, one allocation round per instant, VCs at the port to a host, buffers
sized in the framing of the links into a router, and the uniform traffic's BookSim options.

The stream tests use the comparison's mapping (``scripts/router_curves.py``): a cycle of 10 ns, one
64-byte flit per cycle on every link (``link.framing=flit``: a 40-byte message is one flit), links of
one cycle, route computation 0, VC and switch allocation one cycle each, no traversal stage. A
1-flit packet then takes VC allocation at t, switch allocation at t + 10, and its tail wins at
t + 20 - 10: released when its tail is granted (BookSim), the VC is given again at t + 20, so one
VC carries a packet every 2 cycles; released when its tail has left the line, every 3."""

import pytest

import emu
from emu.config import ConfigError, HostSpec, LinkSpec, RunConfig, SwitchSpec
from emu.topologies.base import Topology
from emu.topologies.registry import build

CYC, FLIT = 10, 64
BPS = FLIT * 8 * 1_000_000_000 // CYC
LINK = LinkSpec(latency_ns=CYC, bandwidth_bps=BPS, framing="flit")
HOST = HostSpec(send_overhead_ns=0, recv_overhead_ns=0, nic_delay_ns=0, mtu_bytes=4 * FLIT - 24)
ONE, FOUR = FLIT - 24, 4 * FLIT - 24
"""Message bytes of a 1-flit and a 4-flit packet (16 B of message header, 8 of head-flit header)."""


def sw(**kw):
    kw.setdefault("vc_buffer_bytes", 8 * FLIT)
    return SwitchSpec(model="input_queued", route_ns=0, vc_alloc_ns=CYC, sw_alloc_ns=CYC, traversal_ns=0,
                      cut_through=True, flit_bytes=FLIT, **kw)


def chain(k, spec):
    """h0 - s0 - ... - s(k-1) - h1."""
    t = Topology(f"chain{k}")
    t.add_host("h0", HOST)
    t.add_host("h1", HOST)
    for i in range(k):
        t.add_switch(f"s{i}", spec)
    t.add_link("h0", "s0", LINK, a_port=0, b_port=0)
    for i in range(k - 1):
        t.add_link(f"s{i}", f"s{i + 1}", LINK, a_port=1, b_port=0)
    t.add_link(f"s{k - 1}", "h1", LINK, a_port=1, b_port=0)
    t.routes = {f"s{i}": [0, 1] for i in range(k)}
    return t


def star(n, spec):
    t = Topology(f"star{n}")
    for i in range(n):
        t.add_host(f"h{i}", HOST)
    t.add_switch("s0", spec)
    for i in range(n):
        t.add_link(f"h{i}", "s0", LINK, a_port=0, b_port=i)
    t.routes = {"s0": list(range(n))}
    return t


def stream(dst, n, size):
    async def app(host):
        for i in range(n):
            await host.send(dst, bytes(size), tag=1)
    return app


def sink(n):
    async def app(host):
        return [(await host.recv(tag=1)).t_ns for _ in range(n)]
    return app


async def _arrivals(t, apps, at):
    async with emu.Cluster(t, run=RunConfig(direct=True)) as net:
        return (await net.run(apps))[at]


def _gaps(times, last=12):
    return {b - a for a, b in zip(times[-last:], times[-last + 1:])}


@pytest.mark.parametrize("release, gap", [("tail_granted", 2 * CYC), ("tail_sent", 3 * CYC)])
async def test_one_vc_carries_a_packet_every_two_cycles_when_released_as_its_tail_is_granted(release, gap):
    t = chain(3, sw(vcs=1, vc_release=release))
    got = await _arrivals(t, {"h0": stream("h1", 40, ONE), "h1": sink(40)}, "h1")
    assert _gaps(got) == {gap}


async def test_a_vc_released_by_its_tail_s_credit_waits_for_the_credit_round_trip():
    t = chain(3, sw(vcs=1, vc_release="tail_credit"))
    got = await _arrivals(t, {"h0": stream("h1", 40, ONE), "h1": sink(40)}, "h1")
    assert min(_gaps(got)) > 3 * CYC  # (the credit comes back a link and a crossing later)


@pytest.mark.parametrize("eject, gap", [(False, CYC), (True, 2 * CYC)])
async def test_vcs_at_the_port_to_a_host_are_allocated_with_eject_vcs(eject, gap):
    """Two streams into one host over one router, each input able to send every 2 cycles: with no VC
    at the host's port they share its line, a packet a cycle; with one VC there (BookSim's ejection
    port), a packet every 2 cycles in all."""
    t = star(3, sw(vcs=1, eject_vcs=eject))
    got = await _arrivals(t, {"h0": stream("h2", 40, ONE), "h1": stream("h2", 40, ONE), "h2": sink(80)}, "h2")
    assert _gaps(got[20:60], 40) == {gap}


@pytest.mark.parametrize("rule, gap", [("tail_left", 10 * CYC), ("per_flit", 10 * CYC), ("head_left", 6 * CYC)])
async def test_a_buffer_one_4_flit_packet_deep_streams_at_the_credit_loop(rule, gap):
    """A VC buffer exactly one 4-flit packet deep (refused before: sized by the Ethernet envelope)
    streams one packet per credit loop between two routers: switch allocation (1 cycle), the head
    flit on the link (1 + 1), VC and switch allocation at the next router (2), then the packet's
    credit -- when its tail has left (4 flits: tail_left; per_flit gives its last flit's credit then
    too, and cut-through waits for all four) or when its head left (head_left: 0) -- and the link
    back (1): 10 cycles, or 6."""
    t = chain(2, sw(vcs=1, vc_buffer_bytes=4 * FLIT, credit_release=rule))
    got = await _arrivals(t, {"h0": stream("h1", 30, FOUR), "h1": sink(30)}, "h1")
    assert _gaps(got) == {gap}


def test_a_flit_framed_buffer_one_packet_deep_is_accepted_and_one_flit_less_refused(tmp_path, capsys):
    from emu.front.cli import main

    base = ["run", "--topo", "mesh:k=2,n=2", "--test", "uniform", "--load", "0.2", "--warmup", "20", "--measure", "20",
            "--size", f"{FOUR}B", "--direct", "--set", f"host.mtu_bytes={FOUR}", "--set", "switch.vcs=1"]
    assert main([*base, "--set", f"switch.vc_buffer_bytes={4 * FLIT}", "--json", str(tmp_path / "a.json")]) == 0
    capsys.readouterr()
    assert main([*base, "--set", f"switch.vc_buffer_bytes={3 * FLIT}"]) != 0
    out = capsys.readouterr()
    said = (out.out + out.err).strip()
    assert said.count("\n") == 0 and f"switch.vc_buffer_bytes={4 * FLIT} or more" in said


async def test_no_copy_asks_an_allocator_twice_in_one_instant():
    """The round at an instant runs once; what arrives at that instant after it (frames and credits
    come after the timer) asks with what the round left, and nothing that asked asks again."""
    from emu.switch.iq import InputQueuedEngine

    seen, dup, kept = set(), [], []
    va, sep = InputQueuedEngine._va_output, InputQueuedEngine._separable

    def va_output(self, o, reqs, now):
        for c in reqs:
            if c.ovc < 0:
                key = (id(self), now, id(c), "va")
                (dup if key in seen else kept).append(c)
                seen.add(key)
        return va(self, o, reqs, now)

    def separable(self, req):
        for rq in req.values():
            for _v, c in rq:
                key = (id(self), self._rnow, id(c), "sa")
                (dup if key in seen else kept).append(c)
                seen.add(key)
        return sep(self, req)

    InputQueuedEngine._va_output, InputQueuedEngine._separable = va_output, separable
    try:
        t = build("mesh:k=4,n=2", settings={"host": {"send_overhead_ns": 0, "recv_overhead_ns": 0},
                                            "switch": {"vcs": 2}})
        async with emu.Cluster(t, run=RunConfig(direct=True)) as net:
            hosts = net.hosts

            async def alltoall(host):
                me = hosts.index(host.name)
                for s in range(1, len(hosts)):
                    await host.send(hosts[(me + s) % len(hosts)], bytes(2048))
                for s in range(1, len(hosts)):
                    await host.recv()

            await net.run({h: alltoall for h in hosts})
            stats = await net.stats()
    finally:
        InputQueuedEngine._va_output, InputQueuedEngine._separable = va, sep
    repeats = sum(s["router"]["repeats"] for s in stats if "router" in s)
    assert kept and repeats > 0  # loaded, and frames or credits did come after an instant's round
    assert dup == []


def test_bad_release_settings_are_refused_in_one_line():
    for field in ("vc_release", "credit_release"):
        with pytest.raises(ConfigError, match=field):
            SwitchSpec(model="input_queued", **{field: "never"})
    with pytest.raises(ConfigError, match="inject_vc"):
        HostSpec(inject_vc="any")
