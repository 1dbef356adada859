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
