"""The frames lists an element window lets go (``iw_list_keep``, emu/csrc/common.h; csrc/window.h) are kept
for a router's next round only when the window held their last reference. An engine of the user's own that
keeps every list its ``receive`` returns (and the hosts' NICs' lists it holds) sees each as Python's Element._emit leaves it (each frame taken: None in its place), never emptied and
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
    """A hub that keeps each list of frames it returns, with its items then -- and each host NIC's list of
    frames to send (``_out``, a new one at each of its timers: csrc/host.h's ``nic_on_timer`` empties and
    keeps the one nobody else holds), with its length then."""
    kept: list = []
    nics: list = []
    nic_lists: list = []
    last: dict = {}
    reused = 0

    def receive(self, frame: bytes, port: int, now: int):
        out = super().receive(frame, port, now)
        KeepingHub.kept.append((out, list(out)))
        for e in KeepingHub.nics:  # (a list Python held through the NIC's next timer or frame: never its next)
            held = KeepingHub.last.get(e.name)
            if held is not None and held[1] != e.now and e._out is held[0]:
                KeepingHub.reused += 1
            KeepingHub.last[e.name] = (e._out, e.now)
            KeepingHub.nic_lists.append((e._out, len(e._out)))
        return out


register_engine("keeping_hub", lambda node, topology, cache: KeepingHub(
    node.name, topology.nports(node.name), node.spec.processing_delay_ns),
    min_delay=lambda spec: spec.processing_delay_ns)


async def _run(core, monkeypatch):
    monkeypatch.setattr(native, "CORE", core)
    KeepingHub.kept, KeepingHub.nic_lists, KeepingHub.last, KeepingHub.reused = [], [], {}, 0
    t = build("star:n=3", settings={"host": {"send_overhead_ns": 0, "recv_overhead_ns": 0}})
    t.nodes["s0"].info["engine"] = "keeping_hub"
    before = core.counts() if core is not None else None
    async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
        KeepingHub.nics = [el.engine for el in net._local.elements if hasattr(el.engine, "_out")]
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
    held = KeepingHub.nic_lists
    assert sum(n > 0 for _, n in held) > 10  # (lists with frames in them then)
    assert [out for out, n in held if len(out) != n] == []  # (never emptied while Python held them)
    assert KeepingHub.reused == 0


@needs_core
def test_a_nic_list_python_holds_is_never_its_next(tmp_path, monkeypatch):
    """The 4x4 mesh of input-queued routers (tests/uniform_run.py): at every grant (its ``_up``, called inside
    the compiled window) every host NIC's ``_out`` is held; after the NIC's next timer or frame (its ``now``
    moved on) its ``_out`` must be another list -- Python's ``self._out = []`` -- not the held one emptied."""
    import gc
    import sys
    from pathlib import Path

    from emu.switch.iq import InputQueuedEngine
    sys.path.insert(0, str(Path(__file__).parent))
    from uniform_run import at_every_grant, mesh_watching_rounds

    nics, last, seen = [], {}, {"reused": 0, "moved": 0}
    prop = InputQueuedEngine.ports

    def look(eng):
        if not nics:
            nics.extend(x for x in gc.get_objects() if type(x).__name__ == "NicEngine")
        for e in nics:
            held = last.get(id(e))
            if held is not None and held[1] != e.now:
                seen["moved"] += 1
                seen["reused"] += e._out is held[0]
            last[id(e)] = (e._out, e.now)
    at_every_grant(monkeypatch, look)
    before = CORE.counts()
    comp, _, _ = mesh_watching_rounds(tmp_path, monkeypatch, True, None, pcap=False)
    assert CORE.counts()["iq_timers"] > before["iq_timers"] and nics
    assert seen["moved"] > 1000 and seen["reused"] == 0
    monkeypatch.setattr(InputQueuedEngine, "ports", prop)
    pure, _, _ = mesh_watching_rounds(tmp_path, monkeypatch, False, None, pcap=False)
    assert comp == pure
