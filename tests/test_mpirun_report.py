"""``emu report`` reads ``emu mpirun --json``: the topology with the job's link loads, the time per
rank in MPI calls by kind; a file of another kind, or of an older emu mpirun, is refused in one line."""

from __future__ import annotations

import json

import pytest

from emu.config import ConfigError
from emu.front.mpirun import run_program
from emu.front.report import load_run, report

PROGRAM = """
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
x = np.ones(64)
y = np.empty_like(x)
comm.Allreduce(x, y)
comm.Barrier()
"""


def test_report_draws_an_mpirun_job(tmp_path):
    res = run_program(PROGRAM, n=4, topo="star:n=4", workdir=str(tmp_path))
    assert res.returncode == 0, res
    figs = res.figures
    assert figs["topology"] == "star:n=4" and figs["completion_ns"] == figs["virtual_ns"] > 0
    assert sum(v["frames"] for v in figs["per_link"].values()) == figs["hop_count"]
    path = tmp_path / "job.json"
    path.write_text(json.dumps(figs))
    run, rows = load_run(str(path))
    assert run["ranks"] == 4 and rows[0]["per_rank"][3]["calls"]["Allreduce"]["count"] == 1
    files = report(str(path), None, str(tmp_path / "out"))
    assert sorted(f.rsplit("/", 1)[1] for f in files) == ["mpi_calls.png", "mpi_calls.svg", "topology.png",
                                                           "topology.svg"]
    old = {k: v for k, v in figs.items() if k not in ("topology", "name", "per_link", "completion_ns")}
    path.write_text(json.dumps(old))
    with pytest.raises(ConfigError, match="older than emu report's support"):
        load_run(str(path))
