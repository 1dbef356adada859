"""The golden runs: figures and capture bytes of a handful of runs across the mechanisms, pinned.

Restructuring (issue 24) and speed work must not change what the emulator computes: every figure of
the JSON results (completion, frames, bytes, hops, per-link counts, the tests' own figures) and the
sha256 of the pcapng capture of each run below are held against ``tests/golden/figures.json``.
Wall-clock figures (``wall_s``) are left out. After a change that is meant to alter figures,
regenerate with ``EMU_GOLDEN_UPDATE=1 python -m pytest tests/test_golden.py`` and say why in the commit.
"""

import hashlib
import json
import os
from pathlib import Path

import pytest

from emu.front.cli import main

GOLDEN = Path(__file__).parent / "golden" / "figures.json"

RUNS = {
    "software": ["--topo", "fattree:k=4,n=2", "--test", "pingall+allreduce+alltoall", "--size", "2KiB"],
    "nic_48B": ["--topo", "fattree:k=2,n=5", "--test", "allreduce", "--offload", "nic", "--size", "48B"],
    "nic_4KiB": ["--topo", "fattree:k=2,n=5", "--test", "allreduce", "--offload", "nic", "--size", "4KiB"],
    "qsnet_hw": ["--topo", "qsnet:nodes=16", "--test", "bcast+barrier+allreduce", "--offload", "hw", "--size", "2KiB"],
    "qsnet_putget": ["--topo", "qsnet:nodes=16", "--test", "put+get", "--size", "8KiB"],
    "switch": ["--topo", "fattree:k=4,n=2", "--test", "allreduce", "--offload", "switch", "--size", "8KiB"],
    "coding_mesh": ["--topo", "mesh:k=4,n=2", "--test", "mcast_all", "--algo", "nc", "--size", "64B"],
    "coding_torus": ["--topo", "torus:k=4,n=2", "--test", "mcast_all", "--algo", "combine", "--size", "64B"],
    "two_processes": ["--topo", "fattree:k=4,n=2", "--test", "alltoall", "--processes", "2", "--size", "2KiB"],
    "manager_fault": ["--topo", "fattree:k=4,n=2", "--test", "put", "--size", "16KiB", "--manager",
                      "--fault", "at=1us,link=s0-s4,down"],
}


def _run(name: str, tmp_path: Path) -> dict:
    out, cap = tmp_path / f"{name}.json", tmp_path / f"{name}.pcapng"
    assert main(["run", *RUNS[name], "--json", str(out), "--pcap", str(cap)]) == 0
    rows = json.loads(out.read_text())["results"]
    for row in rows:
        row.pop("wall_s", None)
    return {"results": rows, "capture_sha256": hashlib.sha256(cap.read_bytes()).hexdigest()}


def _pinned_part(got, want):
    """``got`` cut to the keys ``want`` has (recursively): figures added since the pinning -- the
    loss counters of every row, ``start_ns``/``end_ns``, the link names of ``per_link`` -- are not
    compared, every pinned one is."""
    if isinstance(got, dict) and isinstance(want, dict):
        return {k: _pinned_part(got[k], want[k]) if k in got else "<missing>" for k in want}
    return got


@pytest.mark.parametrize("name", sorted(RUNS))
def test_golden(name, tmp_path):
    got = _run(name, tmp_path)
    pinned = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("EMU_GOLDEN_UPDATE"):
        pinned[name] = got
        GOLDEN.write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")
    assert name in pinned, f"no golden figures for {name!r}: run with EMU_GOLDEN_UPDATE=1 once"
    want = pinned[name]
    assert len(got["results"]) == len(want["results"])
    for g, w in zip(got["results"], want["results"]):  # every pinned figure is the same; added ones are new keys
        assert _pinned_part(g, w) == w
    assert got["capture_sha256"] == want["capture_sha256"]
