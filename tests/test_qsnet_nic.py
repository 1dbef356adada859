"""The QsNet adapter (spec 03): reliable packets, put/get, atomics -- on engines, step by step."""

import pytest

import emu
from emu.sim import EngineNet
from emu.wire import HDR_LEN, PacketType, parse_frame
from emu.wire.fabric import FLAG_SRCRT
from emu.wire.qsnet import ACK, TXN, TXN_LEN, AckKind, QsOp, Reason, decode_packet, segments
from emu.nodes.nic.qsnet import TX, TxEvent, TxState
from emu.topologies import build

DATA = bytes(i * 7 % 251 for i in range(1100))  # 1100 B + 24 B transaction header: 5 segments


async def put_app(host, rank, data, remote=0x9000):
    host.mem_write(0x1000, data)
    return await host.put(rank, 0x1000, remote, len(data))


async def wait_app(host, n, addr, size):
    arrivals = await host.wait_arrivals(n)
    return arrivals, host.mem_read(addr, size)


def ptype(frame):
    return parse_frame(frame)[4]


def test_a_packet_through_segmentation_a_crc_failure_a_nack_and_a_resend_on_another_route():
    settings = {"switch": {"routing": "dispersive"}, "elan": {"routes": 2, "packet_bytes": 2048}}
    t = build("fattree:k=4,n=2", settings=settings)
    net = EngineNet(t)
    hurt = []

    def tamper(node, port, frame):  # flip one payload bit of h0's first packet on its first link
        if node == "h0" and not hurt and ptype(frame[:-4]) == PacketType.QPKT:
            b = bytearray(frame)
            b[HDR_LEN + 8 + 100] ^= 0x10
            hurt.append(bytes(frame[:-4]))
            return bytes(b)
        return frame
    net.tamper = tamper
    res = net.run({"h0": (put_app, 15, DATA), "h15": (wait_app, 1, 0x9000, len(DATA))})

    # 1. segmentation: one packet of 5 segments, a PUT of the whole transfer, route id 0
    first = hurt[0]
    src, dst, vc, prio, pt, flags, hops, route, _ = parse_frame(first)
    _vc, _p, dest, _ts, payload, pkt_id = decode_packet(first, HDR_LEN)
    assert (src, dst, dest, flags & FLAG_SRCRT, route) == (0, 15, 15, FLAG_SRCRT, 0)
    assert segments(len(payload)) == 5 and len(payload) == TXN_LEN + 1100
    assert TXN.unpack(payload)[0] == QsOp.PUT and payload[TXN_LEN:] == DATA

    # 2. the damaged packet crossed the switches (cut-through) and failed its CRC-32 at h15
    arrivals = [(tm, node, port, f) for tm, node, port, f in net.delivered if ptype(f) == PacketType.QPKT]
    at_h15 = [(tm, f) for tm, node, _p, f in arrivals if node == "h15"]
    assert len(at_h15) == 2 and net.engines["h15"].mechanism("qsnet").stats["crc_errors"] == 1
    assert net.faults["fcs_errors"] == 1  # caught by the first link's FCS too, counted there

    # 3. h15 NACKed it (reason CRC) back to h0
    acks = [(tm, ACK.unpack(f, HDR_LEN)) for tm, node, _p, f in net.delivered if node == "h0" and ptype(f) == PacketType.QACK]
    assert [(a[0], a[1], a[4]) for _t, a in acks] == [(AckKind.NACK, Reason.CRC, pkt_id), (AckKind.ACK, Reason.NONE, pkt_id)]
    assert acks[0][0] < at_h15[1][0]  # the resend left after the NACK came back

    # 4. the resend: the same packet id on route 1, up another link of h0's switch to another top switch
    resend = at_h15[1][1]
    assert parse_frame(resend)[7] == 1 and decode_packet(resend, HDR_LEN)[5] == pkt_id
    tops = [node for tm, node, port, f in arrivals if node in ("s4", "s5", "s6", "s7")]
    assert len(tops) == 2 and tops[0] != tops[1]

    # 5. completion exactly once, every byte right
    r = res["h0"]
    assert r.ok and r.resent == 1
    arrived, mem = res["h15"]
    assert len(arrived) == 1 and mem == DATA
    st = net.engines["h0"].mechanism("qsnet").stats
    assert (st["packets_sent"], st["packets_resent"], st["nacks_crc"], st["timeouts"]) == (2, 1, 1, 0)


def test_the_packet_state_table_is_complete_and_closed():
    assert TX[TxState.SENT][TxEvent.NACK] is TxState.QUEUED
    assert TX[TxState.SENT][TxEvent.TIMEOUT] is TxState.QUEUED
    assert TX[TxState.QUEUED][TxEvent.SEND] is TxState.SENT
    assert TX[TxState.ACKED] == {TxEvent.RECOUNT: TxState.QUEUED} and TX[TxState.FAILED] == {}
    assert set(TX) == set(TxState)


def test_early_acks_for_all_but_the_completing_packet():
    t = build("star:n=2", settings={"elan": {"packet_bytes": 1000}})
    net = EngineNet(t)
    data = bytes(range(200)) * 15  # 3 packets
    net.run({"h0": (put_app, 1, data), "h1": (wait_app, 1, 0x9000, len(data))})
    arrive = {decode_packet(f, HDR_LEN)[5]: tm for tm, node, _p, f in net.delivered
              if node == "h1" and ptype(f) == PacketType.QPKT}
    back = {ACK.unpack(f, HDR_LEN)[4]: (tm, ACK.unpack(f, HDR_LEN)[2]) for tm, node, _p, f in net.delivered
            if node == "h0" and ptype(f) == PacketType.QACK}
    gaps = {p: back[p][0] - arrive[p] for p in arrive}
    spec = t.hosts[0].spec
    early = [gaps[p] for p in sorted(gaps) if not back[p][1]]
    done = [gaps[p] for p in sorted(gaps) if back[p][1]]
    assert len(early) == 2 and len(done) == 1 and len(set(early)) == 1
    assert done[0] - early[0] == spec.elan.mem_write_ns - spec.nic_delay_ns


def test_the_window_bounds_packets_outstanding():
    t = build("star:n=2", settings={"elan": {"window": 4, "packet_bytes": 256}})
    net = EngineNet(t)
    data = bytes(range(256)) * 40  # 40 packets
    res = net.run({"h0": (put_app, 1, data), "h1": (wait_app, 1, 0x9000, len(data))})
    assert res["h0"].ok and res["h1"][1] == data
    assert net.engines["h0"].mechanism("qsnet").stats["peak_outstanding"] == 4


async def mixed_app(host, rank, data):
    host.mem_write(0x1000, data)
    puts = [await host.put(rank, 0x1000, 0x100000 + 0x10000 * i, len(data)) for i in range(3)]
    got = await host.get(rank, 0x100000, 0x500000, len(data))
    olds = [(await host.fadd(rank, 0x40, k + 1)).value for k in range(10)]
    return [p.ok for p in puts], got.ok, host.mem_read(0x500000, len(data)), olds


@pytest.mark.parametrize("faults", [dict(drop=0.05), dict(duplicate=0.2, reorder=0.3), dict(corrupt=0.05),
                                    dict(drop=0.03, duplicate=0.1, reorder=0.2, corrupt=0.03)])
def test_every_transfer_completes_exactly_once_with_every_byte_right_under_seeded_faults(faults):
    t = build("fattree:k=4,n=2", settings={"switch": {"routing": "dispersive"}})
    data = bytes(i * 13 % 256 for i in range(5000))
    net = EngineNet(t, seed=11, **faults)
    res = net.run({"h0": (mixed_app, 9, data), "h9": (wait_app, 3, 0x100000, len(data))})
    puts, got_ok, got, olds = res["h0"]
    assert puts == [True] * 3 and got_ok and got == data
    assert olds == [k * (k + 1) // 2 for k in range(10)]  # each add applied exactly once, in order
    assert net.engines["h9"].mechanism("qsnet").mem.read_u64(0x40) == 55
    arrived, mem = res["h9"]
    assert len(arrived) == 3 and mem == data
    assert net.engines["h9"].mechanism("qsnet").stats["arrivals"] == 3  # replays were never counted again
    hurt = sum(net.faults[k] for k in ("dropped", "corrupted"))
    if hurt:
        assert net.engines["h0"].mechanism("qsnet").stats["packets_resent"] + net.engines["h9"].mechanism("qsnet").stats["packets_resent"] > 0


def test_a_transfer_that_cannot_get_through_fails_with_its_reason_not_a_hang():
    t = build("star:n=2", settings={"elan": {"max_tries": 3, "retransmit_ns": 2000}})
    net = EngineNet(t, drop=1.0)
    res = net.run({"h0": (put_app, 1, b"x" * 100)})
    r = res["h0"]
    assert not r.ok and "no acknowledgement after 3 sends" in r.error
    assert net.engines["h0"].mechanism("qsnet").stats["transfers_failed"] == 1


async def test_static_routing_loses_a_destination_behind_a_broken_link_adaptive_goes_around():
    """A packet that meets a dead link on its static route is NACKed by that router (invalid-
    destination trap) and fails after max_tries; adaptive routers avoid the link packet by packet."""
    out = {}
    for routing in ("static", "adaptive"):
        t = build("fattree:k=4,n=2", settings={"switch": {"routing": routing},
                                               "elan": {"max_tries": 4, "retransmit_ns": 5000}})
        async with emu.Cluster(t) as net:
            for top in ("s4", "s5", "s6", "s7"):
                await net.link_down("s0", top) if top == "s7" else None
            data = bytes(range(256)) * 16
            res = await net.run({f"h{i}": (put_app, 12 + i, data) for i in range(4)})
            stats = {s["name"]: s for s in await net.stats()}
        out[routing] = ([res[f"h{i}"].ok for i in range(4)], stats)
    static_ok, st = out["static"]
    assert not all(static_ok)
    assert st["s0"]["engine"].get("invalid_dest", 0) > 0 and st["s0"]["engine"].get("traps_invalid_dest", 0) > 0
    assert out["adaptive"][0] == [True] * 4


MEMBERS = ["h1", "h5", "h6", "h22", "h40", "h63"]  # scattered: an arbitrary subset, not a range


def bcast_net(settings=None, **faults):
    t = build("fattree:k=4,n=3", settings=settings)
    t.add_group(7, MEMBERS)
    return t, EngineNet(t, seed=faults.pop("seed", 0), **faults)


async def bcast_root(host, data):
    host.mem_write(0, data)
    return await host.bcast_put(7, len(MEMBERS) - 1, 0, 0x7000, len(data))


def test_hardware_broadcast_to_an_arbitrary_subset_combines_acks_in_the_switches():
    data = bytes(i % 253 for i in range(5000))  # 5 packets
    t, net = bcast_net()
    res = net.run({"h1": (bcast_root, data), **{m: (wait_app, 1, 0x7000, len(data)) for m in MEMBERS[1:]}})
    assert res["h1"].ok
    for m in MEMBERS[1:]:
        arrived, mem = res[m]
        assert len(arrived) == 1 and mem == data
    # the source hears one ACK per packet, whatever the number of members
    acks = [f for _t, node, _p, f in net.delivered if node == "h1" and ptype(f) == PacketType.QACK]
    assert len(acks) == 5 and net.engines["h1"].mechanism("qsnet").stats["acks"] == 5
    assert sum(ACK.unpack(f, HDR_LEN)[5] for f in acks) == len(MEMBERS) - 1  # every member counted done once
    # each member sent 5 ACKs; every switch of the tree combined the ACKs of its branches
    sent = sum(1 for _t, node, _p, f in net.delivered if ptype(f) == PacketType.QACK and node.startswith("s"))
    assert sent > 0
    combined = {n: e.stats.get("acks_combined", 0) for n, e in net.engines.items() if e.kind == "switch"}
    tree = t.group_ports
    for sw, n in combined.items():
        branches = len(tree.get(sw, {}).get(7, ())) - 1  # ports of the tree but the one toward the source
        assert n == (5 * branches if branches > 0 else 0), (sw, n, branches)
    non_members = [h for h in t.host_names() if h not in MEMBERS]
    assert all(net.engines[h].mechanism("qsnet").stats["arrivals"] == 0 for h in non_members)


@pytest.mark.parametrize("faults", [dict(duplicate=0.3, reorder=0.3), dict(drop=0.05),
                                    dict(drop=0.02, corrupt=0.02, duplicate=0.1, reorder=0.2)])
def test_hardware_broadcast_completes_once_everywhere_under_seeded_faults(faults):
    data = bytes(i % 249 for i in range(5000))
    _t, net = bcast_net({"elan": {"max_tries": 40}}, seed=3, **faults)
    res = net.run({"h1": (bcast_root, data), **{m: (wait_app, 1, 0x7000, len(data)) for m in MEMBERS[1:]}})
    assert res["h1"].ok
    for m in MEMBERS[1:]:
        assert net.engines[m].mechanism("qsnet").stats["arrivals"] == 1 and res[m][1] == data


async def test_bcast_offloaded_to_the_hardware_from_the_collective_api():
    import numpy as np

    from emu.nodes.collectives.hw import HW_GROUP
    from emu.nodes.collectives.run import check_results, run_collective

    t = build("fattree:k=4,n=2")
    t.add_group(HW_GROUP, t.host_names())
    async with emu.Cluster(t) as net:
        res = await run_collective(net, "bcast", count=3000, dtype="float64", root=5, offload="hw")
        soft = await run_collective(net, "bcast", count=3000, dtype="float64", root=5)
    check_results(res, 3000, np.dtype("float64"), "sum", 5, 0)
    assert res.algo == "hw" and res.completion_ns < soft.completion_ns


def test_emu_run_bcast_offload_hw_and_what_it_refuses():
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "emu")
    out = subprocess.run([exe, "run", "--topo", "fattree:k=4,n=3", "--test", "bcast", "--offload", "hw", "--size", "16KiB"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "algo=hw" in out.stdout and "result=equal to" in out.stdout, out.stdout + out.stderr
    bad = subprocess.run([exe, "run", "--topo", "star:n=4", "--test", "allgather", "--offload", "hw"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "allgather cannot be offloaded to the network hardware" in bad.stdout + bad.stderr
