"""``emu mpirun``: unchanged mpi4py programs, one OS process per rank, on the emulated cluster.

The programs of tests/mpi/ check their own results (each rank prints 'ok <rank>'); they are valid
MPI programs, which MPICH confirms where the mpich wheel is installed. The figures are virtual and
deterministic (``--compute zero``) and checked against the closed forms of
``emu.nodes.collectives.model``.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

import pytest

from emu.nodes.collectives.model import _step
from emu.topologies.registry import build

HERE = pathlib.Path(__file__).parent / "mpi"
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable))


def _oks(res, n):
    assert res.returncode == 0, res
    assert sorted(res.stdout.split("\n")[:-1]) == sorted(f"ok {r}" for r in range(n)), res


@pytest.mark.parametrize("program", ["p2p", "collectives", "comms"])
def test_the_surface_on_the_fabric(mpirun, program):
    res = mpirun(HERE / f"{program}.py", n=4, topo="star:n=4")
    _oks(res, 4)
    figs = res.figures
    assert figs["frames"] > 0 and figs["hop_count"] == 2 * figs["frames"]  # a star: two links per frame
    assert sum(f["count"] for f in res.calls(0).values()) > 20


@pytest.mark.skipif(MPIEXEC is None, reason="MPICH's mpiexec is not installed (the mpi extra)")
def test_same_output_as_mpich(mpirun):
    prog = HERE / "compare_surface.py"
    res = mpirun(prog, n=4, topo="fattree:k=2,n=2")
    ref = subprocess.run([MPIEXEC, "-n", "4", sys.executable, str(prog)], capture_output=True, text=True, timeout=120)
    assert res.returncode == ref.returncode == 0, (res, ref.stderr[-400:])
    assert sorted(res.stdout.splitlines()) == sorted(ref.stdout.splitlines())


@pytest.mark.skipif(MPIEXEC is None, reason="MPICH's mpiexec is not installed (the mpi extra)")
@pytest.mark.parametrize("program", ["p2p", "collectives", "comms"])
def test_the_test_programs_are_valid_mpi(program):
    ref = subprocess.run([MPIEXEC, "-n", "3", sys.executable, str(HERE / f"{program}.py")], capture_output=True,
                         text=True, timeout=120)
    # mpiexec's relay may cut and join the ranks' lines: find the words wherever they are
    assert ref.returncode == 0 and sorted(re.findall(r"ok (\d)", ref.stdout)) == ["0", "1", "2"], ref.stderr[-400:]


PINGPONG = str(HERE / "pingpong.py")


@pytest.mark.parametrize("nbytes", [8, 4000])
def test_wtime_is_virtual_and_a_message_takes_the_model(mpirun, nbytes):
    res = mpirun(PINGPONG, n=2, topo="star:n=2", args=(nbytes, 50))
    assert res.returncode == 0, res
    t = build("star:n=2")
    one_way = _step(nbytes + 17, t.nodes["h0"].spec, t.links[0].spec, t.nodes["s0"].spec, 1)  # 17: the MPI header
    assert int(res.stdout) == 2 * 50 * one_way
    again = mpirun(PINGPONG, n=2, topo="star:n=2", args=(nbytes, 50))
    assert again.stdout == res.stdout and again.figures["virtual_ns"] == res.figures["virtual_ns"]
    assert again.figures["frames"] == res.figures["frames"]
    assert res.calls(0)["Send"] == {"count": 50, "bytes": 50 * nbytes, "virtual_ns": 50 * 300}  # send overhead


def test_cpu_time_counts_with_cpu_scale(mpirun):
    busy = """
from mpi4py import MPI
import time
t0, c0 = MPI.Wtime(), time.process_time()
while time.process_time() - c0 < 0.05:
    pass
MPI.COMM_WORLD.Barrier()
print(MPI.Wtime() - t0 >= 0.05 * 3)
"""
    res = mpirun(busy, n=2, topo="star:n=2", compute=None, cpu_scale=3.0)
    assert res.returncode == 0 and res.stdout.split() == ["True", "True"], res


ALLREDUCE = """
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
x = np.arange(8, dtype="float64") + comm.rank
y = np.empty_like(x)
comm.Allreduce(x, y, op=MPI.SUM)
assert (y == 4 * np.arange(8) + 6).all()
b = np.arange(4, dtype="int32") if comm.rank == 0 else np.zeros(4, "int32")
comm.Bcast(b, root=0)
assert (b == np.arange(4)).all()
comm.Barrier()
print(f"ok {comm.rank}", flush=True)
"""


@pytest.mark.parametrize("offload, expect", [
    (None, {"Allreduce": "recursive_doubling"}),
    ("nic", {"Allreduce": "nic("}),
    ("hw", {"Allreduce": "hw(", "Bcast": "hw", "Barrier": "hw("}),
    ("switch", {"Allreduce": "switch(", "Bcast": "switch(bcast", "Barrier": "switch(barrier"}),
])
def test_offloads_carry_the_calls_they_support(mpirun, offload, expect):
    res = mpirun(ALLREDUCE, n=4, topo="fattree:k=2,n=2", offload=offload)
    _oks(res, 4)
    for call, algo in expect.items():
        assert any(a.startswith(algo) for a in res.calls(1)[call]["algorithms"]), (call, res.calls(1)[call])


def test_like_mpiexec_stdin_tags_hosts_and_module(mpirun, tmp_path):
    echo = """
from mpi4py import MPI
line = input() if MPI.COMM_WORLD.rank == 0 else None
print(MPI.COMM_WORLD.bcast(line), MPI.Get_processor_name())
"""
    res = mpirun(echo, n=3, topo="star:n=8", stdin="hello\n", tag_output=True, hosts=["h5", "h2", "h7"])
    assert res.returncode == 0, res
    assert [res.lines(r) for r in range(3)] == [["hello h5"], ["hello h2"], ["hello h7"]]
    (tmp_path / "mod_prog.py").write_text("from mpi4py import MPI\nprint(MPI.COMM_WORLD.size)\n")
    p = subprocess.run([sys.executable, "-m", "emu", "mpirun", "-n", "2", "--topo", "star:n=2", "--compute", "zero",
                        "-m", "mod_prog"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.split() == ["2", "2"], p.stderr


def test_a_raising_rank_ends_the_job_with_its_traceback_once(mpirun):
    res = mpirun("from mpi4py import MPI\nc = MPI.COMM_WORLD\nc.Barrier()\nif c.rank == 2:\n"
                 "    raise ValueError('rank two gives up')\nc.recv(source=2)\n", n=4)
    assert res.returncode == 1
    assert res.stderr.count("Traceback") == 1 and res.stderr.count("ValueError: rank two gives up") == 2
    assert "rank 2 (h2) failed: ValueError: rank two gives up; the job was ended" in res.stderr


def test_systemexit_and_abort_as_mpiexec(mpirun):
    res = mpirun("from mpi4py import MPI\nraise SystemExit('needs 2' if MPI.COMM_WORLD.rank == 0 else None)\n", n=3)
    assert res.returncode == 1 and res.stderr.count("needs 2") == 1
    res = mpirun("from mpi4py import MPI\nif MPI.COMM_WORLD.rank == 1:\n    MPI.COMM_WORLD.Abort(7)\n"
                 "MPI.COMM_WORLD.Barrier()\n", n=3)
    assert res.returncode == 7 and "MPI_Abort(MPI_COMM_WORLD, 7) on rank 1" in res.stderr


def test_a_deadlock_names_the_call_each_rank_waits_in(mpirun):
    res = mpirun("from mpi4py import MPI\nc = MPI.COMM_WORLD\nif c.rank < 2:\n    c.recv(source=1 - c.rank, tag=5)\n"
                 "else:\n    c.Barrier()\n", n=3)
    assert res.returncode == 1
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("emu mpirun: error: deadlock: every rank waits")
    assert "rank 0 (h0) in recv(comm=WORLD, source=1, tag=5)" in line and "rank 2 (h2) in Barrier(comm=WORLD)" in line


def test_bad_input_is_refused_in_one_line(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("print(1)\n")
    for args, words in ((["-n", "5", "--topo", "star:n=4", str(prog)], "-n 5 ranks but 4 hosts"),
                        (["-n", "2", "--topo", "star:n=4", str(tmp_path / "missing.py")], "no such file"),
                        (["-n", "2", "--topo", "star:n=4", "--hosts", "h0,h9", str(prog)], "h9 not a host"),
                        (["-n", "2", "--topo", "star:q=4", str(prog)], "star")):
        p = subprocess.run([sys.executable, "-m", "emu", "mpirun", *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and len(p.stdout.strip().splitlines()) == 1 and words in p.stdout, (args, p.stdout)


def test_sigterm_ends_every_rank(tmp_path):
    prog = tmp_path / "spin.py"
    prog.write_text("from mpi4py import MPI\nimport sys\nprint('ready', flush=True)\nwhile True:\n    pass\n")
    p = subprocess.Popen([sys.executable, "-m", "emu", "mpirun", "-n", "2", "--topo", "star:n=2", str(prog)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 143 and "interrupted (SIGTERM); the 2 ranks were ended" in err
    assert not [d for d in os.listdir("/proc") if d.isdigit() and _is_rank_of(d, str(prog))]


def _is_rank_of(pid: str, prog: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return prog.encode() in f.read() and b"emu.rank" in open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False


def test_json_has_figures_per_rank_and_call(mpirun, tmp_path):
    res = mpirun(ALLREDUCE, n=4, topo="star:n=4")
    figs = res.figures
    assert figs["ranks"] == 4 and figs["hosts"] == ["h0", "h1", "h2", "h3"] and figs["mpi_calls"] == 4 * 3
    assert [r["exit"] for r in figs["per_rank"]] == [0, 0, 0, 0]
    row = figs["per_rank"][3]["calls"]["Allreduce"]
    assert row["count"] == 1 and row["bytes"] == 2 * 64 and row["virtual_ns"] > 0
    json.dumps(figs)


def test_the_readme_example_prints_what_it_says(tmp_path):
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if b.startswith("# allreduce.py"))
    (tmp_path / "allreduce.py").write_text(code)
    shell = next(b for b in re.findall(r"```bash\n(.*?)```", readme, re.S) if "emu mpirun -n 8" in b)
    lines, checked = shell.splitlines(), 0
    for i, line in enumerate(lines):
        if not line.startswith("$ emu mpirun"):
            continue
        argv = line[2:].split("#")[0].split()
        out = subprocess.run([sys.executable, "-m", "emu", *argv[1:]], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        claimed = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("$") else None
        if claimed and not claimed.startswith("emu mpirun:"):
            assert out.stdout.strip() == claimed
            checked += 1
    assert checked == 4 and (tmp_path / "r.pcapng").stat().st_size > 0
    calls = json.loads((tmp_path / "r.json").read_text())["per_rank"][0]["calls"]["Allreduce"]
    assert calls == {"count": 1, "bytes": 8192, "virtual_ns": 11068, "algorithms": ["rabenseifner"]}


def test_the_demos_script_at_a_tiny_size(tmp_path):
    # the mpi4py repository's demo/helloworld.py, as it is there (13 lines)
    (tmp_path / "helloworld.py").write_text('#!/usr/bin/env python\n"""\nParallel Hello World\n"""\n\n'
                                            'from mpi4py import MPI\n\nsize = MPI.COMM_WORLD.Get_size()\n'
                                            'rank = MPI.COMM_WORLD.Get_rank()\nname = MPI.Get_processor_name()\n\n'
                                            'print(f"Hello, World! I am process {rank} of {size} on {name}.", '
                                            'flush=True)\n')
    script = pathlib.Path(__file__).parent.parent / "scripts" / "mpi4py_demos.py"
    args = [sys.executable, str(script), "--demos", str(tmp_path), "--only", "helloworld"]
    out = subprocess.run(args + ([] if MPIEXEC else ["--no-mpich"]), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "all agree" in out.stdout, out.stdout + out.stderr
    assert "helloworld     -n 4 star:n=4         exit 0" in out.stdout
    assert ("agrees with MPICH's" in out.stdout) == bool(MPIEXEC)


@pytest.mark.parametrize("values", [(0, 0, 0, 0, 0), (1, 7, 3, -1, 2**32 - 1), (2, 2**32 - 1, -2, 2**31 - 1, 5)])
def test_the_envelope_codec_is_its_declaration(values):
    from emu.wire.mpi import ENVELOPE, MpiEnvelope

    raw = ENVELOPE.pack(*values)
    assert raw == bytes(MpiEnvelope(**dict(zip(("kind", "context", "source", "tag", "seq"), values))))
    assert ENVELOPE.unpack(raw) == values and len(raw) == 17


def test_a_traced_job_writes_a_valid_timeline_with_the_ranks_collectives(tmp_path):
    from test_trace import check_trace

    prog, trace = tmp_path / "prog.py", tmp_path / "job.json"
    prog.write_text(ALLREDUCE)
    res = subprocess.run([sys.executable, "-m", "emu", "mpirun", "-n", "4", "--topo", "fattree:k=2,n=2",
                          "--compute", "zero", "--trace", str(trace), str(prog)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    spans = check_trace(json.loads(trace.read_text()))["spans"]
    names = {s[3] for track in spans.values() for s in track}
    assert any("allreduce" in n.lower() for n in names), sorted(names)[:20]
