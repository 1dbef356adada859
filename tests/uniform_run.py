"""One quiet ``emu run --test uniform`` (BookSim's open-loop traffic, as ``scripts/bench_iq.py`` runs
it), for the twin tests of the compiled router and hosts: its results without wall time."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from emu.front.cli import main

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
from router_curves import FLIT  # noqa: E402


def uniform(out: Path, topo: str, flits: int, load: float, cycles: int, sets: dict, more=()) -> list:
    """``emu run`` of ``topo`` at ``load`` for ``cycles`` warm-up and measured cycles, ``sets`` as
    ``--set`` options and ``more`` as further arguments; its JSON results, each without ``wall_s``."""
    w = max(1, cycles // flits)
    argv = ["run", "--topo", topo, "--test", "uniform", "--direct", "--load", f"{load:.4f}", "--warmup", str(w),
            "--measure", str(w), "--size", f"{FLIT * flits - 24}B", "--to-self", "--drain", "measured",
            "--json", str(out), *more]
    for key, v in sets.items():
        argv += ["--set", f"{key}={v}"]
    with open(os.devnull, "w") as null:
        saved, sys.stdout = sys.stdout, null
        try:
            assert main(argv) == 0
        finally:
            sys.stdout = saved
    res = json.loads(out.read_text())["results"]
    for r in res:
        r.pop("wall_s", None)
    return res


def mesh_watching_rounds(tmp: Path, monkeypatch, use_core: bool, after_round=None, pcap: bool = True):
    """The 4x4 mesh, 8 VCs, 1-flit packets at 90 % of BookSim's saturation for 40 cycles each way,
    as the tests of the compiled round's reuse of objects run it: ``after_round(router, n)`` is called
    after each compiled round ``n`` (1, 2, ...) with the router it ran for. (results, capture bytes or
    None, compiled rounds run)."""
    from bench_iq import SAT
    from emu.switch import iqcore
    from emu.switch.iqcore import CoreRound
    from router_curves import FAITHFUL, OURS

    monkeypatch.setattr(iqcore, "USE_CORE", use_core)
    rounds = [0]
    made = CoreRound._core_state

    def watching(self):
        cs = made(self)
        if not cs or after_round is None:
            return cs
        fn = cs[0]

        def call(*a):
            out = fn(*a)
            rounds[0] += 1
            after_round(self, rounds[0])
            return out
        return (call, *cs[1:])

    monkeypatch.setattr(CoreRound, "_core_state", watching)
    sets = {**OURS, **FAITHFUL, "switch.vcs": 8, "switch.model": "input_queued"}
    cap = tmp / f"c{int(use_core)}.pcapng"
    res = uniform(tmp / f"r{int(use_core)}.json", "mesh:k=4,n=2", 1, SAT[(4, 8, 1)] * 0.9, 40, sets,
                  ["--pcap", str(cap)] if pcap else [])
    return res, cap.read_bytes() if pcap else None, rounds[0]


def at_every_grant(monkeypatch, look) -> None:
    """Each input-queued router's ``_up`` (called by the compiled round at every grant into a credited
    output, inside the compiled timer and window) wrapped: ``look(eng)`` runs first, then the port's
    ``up`` answers as before -- a way to hold, from Python, what the core has made by then."""
    from emu.switch.iq import InputQueuedEngine

    prop = InputQueuedEngine.ports

    def setter(eng, view):
        prop.fset(eng, view)
        up = eng._up

        def spy(o, at):
            look(eng)
            return True if up is None else up(o, at)
        eng._up = spy
    monkeypatch.setattr(InputQueuedEngine, "ports", property(prop.fget, setter))
