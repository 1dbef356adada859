"""pcapng captures: one interface per port, nanosecond virtual time stamps, raw frames."""

import shutil
import subprocess

import pytest
from scapy.layers.l2 import Ether  # noqa: F401 -- scapy 2.8's rdpcap decodes Ethernet only once this is imported
from scapy.utils import rdpcap

import apps
import emu
from emu.wire import Fabric, MsgSegment, Ping, add_fcs, fcs_ok
from emu.sim import EngineNet
from emu.topologies import star


async def test_capture_holds_every_frame_at_both_ends_of_every_link(tmp_path):
    topo = star(3)
    cap = tmp_path / "run.pcapng"
    scenario = {"h0": (apps.send_to, "h2", 2500), "h2": (apps.recv_n, 1), "h1": (apps.ping, "h2")}
    sim = EngineNet(topo)
    sim.run(scenario)
    async with emu.Cluster(topo, capture=cap) as net:
        await net.run(scenario)
        stats = await net.stats()
    pkts = rdpcap(str(cap))
    tx = sum(p["tx_frames"] for s in stats for p in s["ports"])
    assert len(pkts) == 2 * tx  # each frame: out at the sender's port, in at the receiver's
    # every frame that arrived somewhere appears inbound with its exact virtual arrival time
    inbound = sorted((int(p.time * 10**9 + 0.5), p.sniffed_on, bytes(p)) for p in pkts if p.direction == 1)
    # as they are on the wire: each frame ends with its frame check sequence
    expected = sorted((t, topo.port_name(node, port), add_fcs(frame)) for t, node, port, frame in sim.delivered)
    assert inbound == expected
    assert all(fcs_ok(bytes(p)) for p in pkts)
    names = {p.sniffed_on for p in pkts}
    assert {"h0-nic0", "s0-p0", "s0-p2", "h2-nic0", "h1-nic0", "s0-p1"} <= names
    kinds = {type(p[Fabric].payload) for p in pkts}
    assert kinds == {MsgSegment, Ping}
    times = [p.time for p in pkts]
    assert times == sorted(times)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (apt-get install tshark)")
async def test_tshark_reads_the_capture(tmp_path):
    cap = tmp_path / "run.pcapng"
    async with emu.Cluster(star(2), capture=cap) as net:
        await net.run({"h0": (apps.ping, "h1")})
    out = subprocess.run(["tshark", "-r", str(cap), "-o", "eth.check_fcs:TRUE", "-T", "fields",
                          "-e", "frame.interface_name", "-e", "frame.time_epoch", "-e", "eth.type",
                          "-e", "eth.fcs.status"], capture_output=True, text=True, check=True)
    rows = [line.split("\t") for line in out.stdout.strip().splitlines()]
    assert len(rows) == 8
    assert rows[0][0] == "h0-nic0" and rows[0][2] == "0x88b5"
    assert {r[3] for r in rows} == {"1"}  # Wireshark finds every frame check sequence good
    assert rows[0][1].startswith("0.000000100")  # 100 ns: the NIC delay, nanosecond resolution
