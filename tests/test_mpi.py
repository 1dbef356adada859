"""Clusters over MPI ranks (``mpiexec -n N emu run``): the same figures and capture bytes as one
process, frames between ranks as UDP datagrams, signed control messages, clean refusals."""

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import trio

HERE = pathlib.Path(__file__).resolve().parent
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install 'hpc-emu[parallel]')")
EMU = [sys.executable, "-m", "emu.front.cli"]


def _env(tmp_path):
    env = dict(os.environ, EMU_KEY_FILE=str(tmp_path / "key" / "mpi.key"), PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])))
    for k in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_SIZE"):
        env.pop(k, None)
    return env


def _run(cmd, tmp_path, timeout=240):
    return subprocess.run(cmd, env=_env(tmp_path), capture_output=True, text=True, timeout=timeout)


def _figures(path):
    rows = json.loads(pathlib.Path(path).read_text())["results"]
    for r in rows:
        r.pop("wall_s")
    return rows


@needs_mpi
def test_mpiexec_2_and_3_give_the_figures_and_capture_of_one_process_also_under_cpu_load(tmp_path):
    args = ["run", "--topo", "fattree:k=4,n=2", "--test", "allreduce+alltoall", "--size", "2KiB"]
    out = {}
    for n in (1, 2, 3):
        js, cap = tmp_path / f"r{n}.json", tmp_path / f"r{n}.pcapng"
        pre = [] if n == 1 else [MPIEXEC, "-n", str(n)]
        # three ranks and two CPU hogs on this machine's two cores: slower, never different
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 if n == 3 else 0)]
        try:
            p = _run(pre + EMU + args + ["--json", str(js), "--pcap", str(cap)], tmp_path)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        assert p.returncode == 0, p.stdout + p.stderr
        out[n] = (_figures(js), hashlib.sha256(cap.read_bytes()).hexdigest())
    assert [r["ok"] for r in out[1][0]] == [True, True] and out[1][0][0]["completion_ns"] > 0
    assert out[2] == out[1]
    assert out[3] == out[1]
    assert oct(os.stat(tmp_path / "key" / "mpi.key").st_mode)[-3:] == "600"


@needs_mpi
def test_frames_between_ranks_are_udp_datagrams_and_every_rank_holds_a_domain(tmp_path):
    res = {}
    for n in (1, 3):
        pre = [] if n == 1 else [MPIEXEC, "-n", str(n)]
        p = _run(pre + [sys.executable, str(HERE / "mpi_cluster.py"), str(tmp_path / f"{n}.json")], tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        res[n] = json.loads((tmp_path / f"{n}.json").read_text())
    one, three = res[1], res[3]
    for k in ("rtt", "end_ns", "frames", "hops", "records", "windows"):
        assert three[k] == one[k], k
    assert sorted(set(three["owner"].values())) == [0, 1, 2]
    assert one["datagrams"] == [0]  # one process: every frame handed over in memory
    assert len(three["datagrams"]) == 3 and all(n > 0 for n in three["datagrams"])  # every rank's socket received
    # frames from other ranks over UDP


@needs_mpi
def test_bad_input_under_mpiexec_is_refused_on_one_line_and_every_rank_ends(tmp_path):
    p = _run([MPIEXEC, "-n", "2"] + EMU + ["run", "--topo", "fattree:k=4,n=9"], tmp_path, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "refused:" in p.stdout and "Traceback" not in p.stdout + p.stderr
    p = _run([MPIEXEC, "-n", "2"] + EMU + ["run", "--topo", "star:n=2", "--test", "pingall", "--processes", "3"],
             tmp_path, timeout=60)
    assert p.returncode == 2 and "leave --processes out" in p.stdout, p.stdout + p.stderr
    p = _run([MPIEXEC, "-n", "2"] + EMU + ["run", "--topo", "star:n=2", "--test", "pingall", "--bind", "nosuchif0"],
             tmp_path, timeout=60)
    assert p.returncode == 2 and "neither an IPv4 address nor a network interface" in p.stdout, p.stdout + p.stderr


class _Comm:
    """Just enough of an MPI communicator for a channel's send side."""

    def __init__(self, rank):
        self.rank, self.sent = rank, []

    def Get_rank(self):
        return self.rank

    def Isend(self, buf, dest, tag):
        self.sent.append(bytes(buf))

        class Done:
            def Test(self):
                return True
        return Done()


def _pair(key_a, key_b):
    from emu.mpi import MpiChan

    a, b = MpiChan(_Comm(0), 1, key_a), MpiChan(_Comm(1), 0, key_b)
    inbox = []

    async def receive():
        return bytearray(inbox.pop(0))
    b._receive = receive
    return a, b, inbox


async def test_control_messages_are_unpickled_only_when_their_signature_holds():
    key = bytes(range(32))
    a, b, inbox = _pair(key, key)
    await a.send(("start_apps", (1, {"h0": None})))
    inbox.append(a.comm.sent[-1])
    assert await b.recv() == ("start_apps", (1, {"h0": None}))
    inbox.append(a.comm.sent[-1])  # the same message again: a replay
    with pytest.raises(PermissionError, match="signature"):
        await b.recv()
    await a.send(("stats", ()))
    bad = bytearray(a.comm.sent[-1])
    bad[-1] ^= 1  # one bit of the payload altered
    inbox.append(bad)
    with pytest.raises(PermissionError, match="signature"):
        await b.recv()
    inbox.append(b"short")
    with pytest.raises(PermissionError, match="no signature"):
        await b.recv()
    a2, b2, inbox2 = _pair(key, bytes(32))  # a rank with another key file
    await a2.send(("stop", ()))
    inbox2.append(a2.comm.sent[-1])
    with pytest.raises(PermissionError):
        await b2.recv()


def test_the_key_file_is_made_private_and_refused_when_others_may_read_it(tmp_path, monkeypatch):
    from emu.config import ConfigError
    from emu.mpi import load_key

    path = tmp_path / "k" / "mpi.key"
    monkeypatch.setenv("EMU_KEY_FILE", str(path))
    with pytest.raises(ConfigError, match="no MPI key file"):
        load_key(create=False, wait_s=0)
    key = load_key(create=True)
    assert len(key) == 32 and load_key(create=False) == key
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_key(create=False)


def test_partition_balances_expected_load_and_cuts_less_than_node_order():
    from emu.partition import by_order, cut_share, partition
    from emu.topologies import build

    t = build("fattree:k=4,n=3")
    for parts in (2, 3):
        owner = partition(t, parts)
        cut, work = cut_share(t, owner)
        cut_o, work_o = cut_share(t, by_order(list(t.nodes), parts))
        assert sorted(set(owner.values())) == list(range(parts))
        assert max(work) <= 1.1 * sum(work) / parts  # within 10 % of an even share
        assert max(work_o) > 1.5 * sum(work_o) / parts  # node order piles the switches up
        assert cut < cut_o / 2


def test_partition_without_pymetis_bisects_with_networkx_or_falls_back_to_node_order(monkeypatch):
    import sys as _sys

    from emu.partition import by_order, cut_share, partition
    from emu.topologies import build

    monkeypatch.setitem(_sys.modules, "pymetis", None)  # as on a machine without it: import fails
    t = build("fattree:k=4,n=3")
    two = partition(t, 2)
    cut, work = cut_share(t, two)
    assert sorted(set(two.values())) == [0, 1] and cut < cut_share(t, by_order(list(t.nodes), 2))[0]
    assert max(work) <= 1.2 * sum(work) / 2
    assert partition(t, 3) == by_order(list(t.nodes), 3)  # no power of two: blocks of the node order


@needs_mpi
def test_ctrl_c_under_mpiexec_ends_every_rank_on_one_line(tmp_path):
    import signal
    import time

    cmd = [MPIEXEC, "-n", "2"] + EMU + ["run", "--topo", "fattree:k=4,n=4", "--test", "allreduce", "--size", "1MiB"]
    p = subprocess.Popen(cmd, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        key = tmp_path / "key" / "mpi.key"
        deadline = time.monotonic() + 120
        while not key.exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)  # the ranks made the job's key: past their imports (slow on a busy machine)
        time.sleep(3)  # well into the run (it takes tens of seconds)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, out
    assert "interrupted; the cluster was torn down" in out and "Traceback" not in out, out
    assert not _processes_with(f"EMU_KEY_FILE={tmp_path / 'key' / 'mpi.key'}"), "a rank outlived the interrupted run"


def _processes_with(env_entry: str) -> list[int]:
    """Processes whose environment holds ``env_entry`` (this test's own key-file path, so a run of the
    same command by another test session on the machine is not mistaken for a survivor)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    if env_entry.encode() in f.read().split(b"\0"):
                        found.append(int(d))
            except OSError:
                continue
    return found
