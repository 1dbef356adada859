"""Spec 03, second reading: the top switches carved out of one router are one element with port
groups; a packet that enters on one carved switch's link may leave on another's, chosen adaptively."""

import pytest

import emu
from emu.topologies.registry import build

DATA = bytes(i * 7 % 251 for i in range(16 * 1024))


async def put_to(host, rank):
    host.mem_write(0x1000, DATA)
    r = await host.put(rank, 0x1000, 0x100000 + host.rank * 0x10000, len(DATA))
    return r.ok


async def crossings(routing: str):
    """Per port group of the first top router: (bytes in, bytes out) after nodes of chassis 0 put
    16 KiB to nodes of chassis 2. A packet goes in and out of the same group, or in on one and out on
    another (its ACK then back the other way: the bytes differ)."""
    # the ideal output-queued switch with unbounded buffers: the routing is what is compared, and the
    # input-queued default's credit frames (which cover a varying number of frames each) would make a
    # group's bytes in and out differ even when every packet leaves on the group it came in on
    t = build("qsnet:nodes=257", settings={"switch": {"routing": routing, "model": "output_queued",
                                                      "vc_buffer_bytes": 0, "pool_bytes": 0}})
    box = next(s for s in t.switches if s.info.get("stage") == 3)
    n, groups = box.info["radix"], box.info["carved"]
    assert (n, groups, box.info["ports"]) == (3, 10, 30) and box.info["router"] == "R0"
    async with emu.Cluster(t) as net:
        res = await net.run({f"h{i}": (put_to, 256 - i % 2) for i in range(0, 128, 9)})
        st = {s["name"]: s for s in await net.stats()}
    assert all(res.values())
    ports = st[box.name]["ports"]
    return [(sum(ports[g * n + c]["rx_bytes"] for c in range(n)), sum(ports[g * n + c]["tx_bytes"] for c in range(n)))
            for g in range(groups)]


async def test_static_keeps_a_packet_in_its_carved_switch_adaptive_moves_it_to_another():
    static = await crossings("static")
    assert sum(i for i, _o in static) > 0 and all(i == o for i, o in static)   # in on group g, out on group g
    adaptive = await crossings("qsnet")
    assert sum(i for i, _o in adaptive) == sum(o for _i, o in adaptive) > 0
    assert any(i != o for i, o in adaptive)                                   # in on one group, out on another


@pytest.mark.parametrize("spec", ["qsnet:nodes=1024", "qsnet:nodes=640", "qsnet:nodes=8192"])
def test_every_port_of_a_top_box_toward_the_chassis_is_a_minimal_next_hop(spec):
    t = build(spec)
    t.compute_candidates()
    for box in (s for s in t.switches if s.info.get("stage") == 3):
        n, g = box.info["radix"], box.info["carved"]
        row, table = t.candidates[box.name], t.routes[box.name]
        for d in (0, len(t.hosts) // 2, len(t.hosts) - 1):
            c = t.nodes[f"h{d}"].id // 128
            assert row[d] == tuple(k * n + c for k in range(g)) and table[d] in row[d]


@pytest.mark.parametrize("routing", ["static", "qsnet"])
def test_hardware_broadcast_and_barrier_run_over_the_carved_top_routers(routing, tmp_path):
    import json

    from emu.front.cli import main

    out = tmp_path / "r.json"
    assert main(["run", "--topo", "qsnet:nodes=300", "--test", "bcast+barrier", "--offload", "hw", "--size", "2KiB",
                 "--set", f"switch.routing={routing}", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["ok"] for r in rows] == [True, True] and rows[0]["result"] == "equal to numpy"
