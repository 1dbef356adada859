"""Smaller rough edges a new user met (issue 42, item 4)."""

import os
import subprocess
import sys

from emu.front.runrecord import record


def test_import_emu_then_a_subpackage_by_attribute():
    # a fresh interpreter: nothing has imported emu.topologies yet
    code = "import emu; t = emu.topologies.build('star:n=3'); print(len(t.hosts), emu.switch.__name__)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["3", "emu.switch"]


def test_version_and_run_record_say_which_element_loop_runs():
    env = {**os.environ, "EMU_PURE": "1"}
    p = subprocess.run([sys.executable, "-m", "emu", "--version"], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and "element loop: pure Python (EMU_PURE is set)" in p.stdout, p.stdout + p.stderr
    from emu import native

    rec = record(["run"], topo=["star:n=2"], offload=[None], seed=0, processes=1, mpi=False, partition=None,
                 settings=[{}])
    assert rec["element_loop"] == ("compiled" if native.CORE is not None else "pure-python")


def test_a_row_says_only_what_its_operation_has(tmp_path):
    import json

    from emu.front.cli import main

    out = tmp_path / "r.json"
    assert main(["run", "--topo", "star:n=4", "--test", "barrier+alltoall+allreduce", "--json", str(out)]) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert rows["barrier"]["result"] == "every rank left"
    assert not {"size_bytes", "dtype", "op"} & set(rows["barrier"])  # a barrier moves no data
    assert rows["alltoall"]["dtype"] == "float32" and "op" not in rows["alltoall"]  # and reduces nothing
    assert rows["allreduce"]["op"] == "sum" and rows["allreduce"]["result"] == "equal to numpy"
