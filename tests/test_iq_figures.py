"""The input-queued router's figures under load, pinned: every router and port counter, the last
delivery and the capture bytes of small loaded all-to-alls.

The router's allocation is event-driven (only the heads whose state changed are looked at again);
it must decide exactly what the scan of every waiting head decided before. The figures in
``tests/golden/iq_figures.json`` were computed by that scanning code (main at a897d86, before the
router was made event-driven), regenerated once for issue 44 (one allocation round per instant, and
output VCs released when their tail flit wins switch allocation, BookSim's rule; the ``repeats``
counter: rounds at an instant whose round had run), and once more for the rounds a credit no longer
wakes when they can change nothing (``Rounds._credit_wakes``: ``rounds``, ``repeats`` and the stats'
sha256 moved, nothing else), and must not move: each case's completion, frames, crossings, capture
sha256, the sums over all routers of every router counter (``rounds``, ``va_grants``, ``sa_grants``,
``sa_conflicts``, ``hol_waits``, ...), the sums over all ports of every port counter, and the sha256 of
every element's whole stats (per element, per port, peaks included).

Cases: a 4x4 mesh (round robin, one VC group) and a 4x4 torus (dateline VCs), each host sending 4 KiB
to every other; a 3x3 mesh on the iSLIP allocator; a 32-node QsNet fat tree (four routers, adaptive
routing, 32 VCs and a shared pool per input) at 2 KiB per pair; a chain of three routers of 2, 9 and
3 VCs (a router's receiver may have more VCs than it has), 6 KiB per pair. The QsNet case keeps
the adaptive rule it was pinned with (``adaptive_free=light``, ``adaptive_heavy=least_loaded``: the
defaults before issue 44's free pick), since what it pins is the allocator. Regenerate only for a change meant to
move them: ``EMU_GOLDEN_UPDATE=1 python -m pytest tests/test_iq_figures.py``.
"""

import hashlib
import json
import os
from pathlib import Path

import pytest
import trio

import emu
from emu.config import LinkSpec, SwitchSpec
from emu.topologies import build
from emu.topologies.base import Topology

PINNED = Path(__file__).parent / "golden" / "iq_figures.json"
LINK = "latency_ns=1000,bandwidth_gbps=10,switch_delay_ns=0,nic_delay_ns=0"
CASES = {  # topology, settings, messages of 1 KiB per pair
    "mesh": (f"mesh:k=4,n=2,{LINK}", {}, 4),
    "mesh_islip": (f"mesh:k=3,n=2,{LINK}", {"switch": {"allocator": "islip", "iterations": 2}}, 4),
    "torus": (f"torus:k=4,n=2,{LINK}", {}, 4),
    "qsnet_adaptive": ("qsnet:nodes=32", {"switch": {"routing": "qsnet", "adaptive_free": "light",
                                                     "adaptive_heavy": "least_loaded"}}, 2),
    "mixed_vcs": (None, {}, 6),
}


def mixed_vcs() -> Topology:
    """h0, h1 - s0 (2 VCs) - s1 (9 VCs) - s2 (3 VCs) - h2, h3."""
    def sw(vcs):
        return SwitchSpec(model="input_queued", vcs=vcs, route_ns=7, vc_alloc_ns=5, sw_alloc_ns=3, traversal_ns=2,
                          cut_through=True)
    t = Topology("mixed_vcs")
    for h in range(4):
        t.add_host(f"h{h}")
    for name, vcs in (("s0", 2), ("s1", 9), ("s2", 3)):
        t.add_switch(name, sw(vcs))
    link = LinkSpec(latency_ns=10, bandwidth_bps=8_000_000_000)
    for a, b, ap, bp in (("h0", "s0", 0, 0), ("h1", "s0", 0, 1), ("s0", "s1", 2, 0), ("s1", "s2", 1, 0),
                         ("h2", "s2", 0, 1), ("h3", "s2", 0, 2)):
        t.add_link(a, b, link, a_port=ap, b_port=bp)
    t.routes = {"s0": [0, 1, 2, 2], "s1": [0, 0, 1, 1], "s2": [0, 0, 1, 2]}
    return t


async def alltoall(host, hosts, messages):
    me, n, data = hosts.index(host.name), len(hosts), bytes(1024)
    for k in range(messages):
        for s in range(1, n):
            await host.send(hosts[(me + s) % n], data, tag=k)
    for k in range(messages):
        for s in range(1, n):
            await host.recv(hosts[(me - s) % n], k)


def _sums(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        for k, v in r.items():
            if isinstance(v, int) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))


async def _run(name: str, tmp: Path) -> dict:
    spec, extra, messages = CASES[name]
    t = build(spec, settings={"host": {"send_overhead_ns": 0, "recv_overhead_ns": 0}, **extra}) if spec else mixed_vcs()
    cap = tmp / f"{name}.pcapng"
    async with emu.Cluster(t, run=emu.RunConfig(direct=True, capture=True), capture=cap) as net:
        hosts = net.hosts
        await net.run({h: (alltoall, hosts, messages) for h in hosts})
        m = net.metrics
        stats = await net.stats()
    routers = [s["router"] for s in stats if "router" in s]
    assert len(routers) == len(t.switches)  # every switch is an input-queued router
    return {"completion_ns": m.end_ns - m.start_ns, "frames": m.frames, "crossings": m.hop_count,
            "capture_sha256": hashlib.sha256(cap.read_bytes()).hexdigest(),
            "router_sums": _sums(routers), "port_sums": _sums([p for s in stats for p in s["ports"]]),
            "stats_sha256": hashlib.sha256(json.dumps(stats, sort_keys=True).encode()).hexdigest()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_loaded_input_queued_runs_give_the_pinned_figures(name, tmp_path):
    got = trio.run(_run, name, tmp_path)
    pinned = json.loads(PINNED.read_text()) if PINNED.exists() else {}
    if os.environ.get("EMU_GOLDEN_UPDATE"):
        pinned[name] = got
        PINNED.write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")
    assert got["router_sums"]["sa_grants"] > 0 and got["router_sums"]["sa_conflicts"] > 0  # loaded: contention
    assert got == pinned[name]
