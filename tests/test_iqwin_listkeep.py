"""The frames lists an element window lets go (``iw_list_keep``, emu/csrc/common.h; csrc/window.h) are kept
for a router's next round only when the window held their last reference. An engine of the user's own that
keeps every list its ``receive`` returns sees each as Python's Element._emit leaves it (each frame taken: None in its place), never emptied and
made again, and the
run is the same with the compiled core and without it."""

import pytest

import apps
import emu
import hub
from emu import native
from emu.build import register_engine
from emu.topologies import build

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here (no C compiler?)")

N, SIZE = 40, 300


class KeepingHub(hub.Hub):
    """A hub that keeps each list of frames it returns, with its items then."""
    kept: list = []

    def receive(self, frame: bytes, port: int, now: int):
        out = super().receive(frame, port, now)
        KeepingHub.kept.append((out, list(out)))
        return out


register_engine("keeping_hub", lambda node, topology, cache: KeepingHub(
    node.name, topology.nports(node.name), node.spec.processing_delay_ns),
    min_delay=lambda spec: spec.processing_delay_ns)


async def _run(core, monkeypatch):
    monkeypatch.setattr(native, "CORE", core)
    KeepingHub.kept = []
    t = build("star:n=3", settings={"host": {"send_overhead_ns": 0, "recv_overhead_ns": 0}})
    t.nodes["s0"].info["engine"] = "keeping_hub"
    before = core.counts() if core is not None else None
    async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
        await net.run({"h0": (apps.send_to, "h1", SIZE, 0, N)})
        st = {s["name"]: s for s in await net.stats()}
    windows = core.counts()["element_windows"] - before["element_windows"] if core is not None else 0
    return st["h1"]["engine"]["messages_received"], st["h2"]["engine"]["messages_received"], net.now, windows


@needs_core
async def test_lists_an_engine_keeps_are_never_made_again(monkeypatch):
    pure = await _run(None, monkeypatch)
    comp = await _run(CORE, monkeypatch)
    kept = KeepingHub.kept
    then_all = all(len(then) == 2 for out, then in kept)  # (a frame of h0's to each other host)
    assert comp[3] > 0 and len(kept) >= N  # (the compiled windows ran the hub's receive)
    assert then_all and [out for out, then in kept if out != [None] * len(then)] == []  # (as Element._emit leaves it)
    assert comp[:3] == pure[:3] and pure[0] == N
