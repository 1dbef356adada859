"""The control channel of multi-process clusters, against a local attacker and failing workers."""

import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest
import trio

import emu
from emu import control
from emu.errors import EmuError

HERE = os.path.dirname(__file__)


class Evil:
    """Unpickling this runs code: it creates the file it names."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _listening_ports() -> set[int]:
    """TCP ports this process listens on at 127.0.0.1, found as an attacker would: /proc/net/tcp
    (sockets in state LISTEN) matched against the socket inodes among our file descriptors."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state == "0A" and local.startswith("0100007F:") and inode in inodes:
                ports.add(int(local.split(":")[1], 16))
    return ports


async def _attack(payloads: list[bytes], seen: set[int], conns: list, stop: trio.Event) -> None:
    """Connect to every new control listener and send each payload (or nothing, for b'')."""
    while not stop.is_set():
        for port in _listening_ports() - seen:
            seen.add(port)
            for data in payloads:
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=1)
                except OSError:
                    continue
                conns.append(s)
                if data:
                    try:
                        s.sendall(data)
                    except OSError:
                        pass
        await trio.sleep(0.001)


async def test_a_stranger_on_the_control_listener_runs_no_code_and_holds_nothing_up(tmp_path, monkeypatch):
    monkeypatch.setattr(control, "HANDSHAKE_TIMEOUT_S", 3600)  # a silent stranger would hold a naive server for an hour
    pwned = tmp_path / "pwned"
    blob = pickle.dumps(Evil(str(pwned)), protocol=2)
    payloads = [struct.pack("!Q", len(blob)) + blob,          # the old wire format: a length and a pickle
                blob * 4,                                     # a bare pickle
                struct.pack("!I", 1) + b"\0" * 64,            # a well-formed hello with a wrong proof
                b""]                                          # a silent connection
    seen, conns, stop = set(_listening_ports()), [], trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_attack, payloads, seen, conns, stop)
            with trio.fail_after(60):
                async with emu.Cluster("star:n=4", processes=3) as net:
                    stop.set()
                    assert await net["h0"].ping("h3") == 816
    finally:
        for s in conns:
            s.close()
    assert len(seen) > len(set()) and conns, "the attacker never found the control listener"
    assert not pwned.exists(), "a pickle from an unauthenticated peer was loaded"


def test_handshake_accepts_only_the_secret_holder_and_checks_the_server_too():
    secret = os.urandom(control.SECRET)

    async def pair(client_secret, server_secret, index=1, expected=frozenset({1})):
        a, b = trio.testing.memory_stream_pair()
        out = {}

        async def server():
            try:
                out["server"] = await control.server_handshake(a, server_secret, set(expected))
            except PermissionError as e:
                out["server"] = e
                await a.aclose()

        async def client():
            try:
                await control.client_handshake(b, client_secret, index)
                out["client"] = "ok"
            except (PermissionError, EOFError, trio.BrokenResourceError) as e:
                out["client"] = e

        async with trio.open_nursery() as n:
            n.start_soon(server)
            n.start_soon(client)
        return out

    import trio.testing

    ok = trio.run(pair, secret, secret)
    assert ok == {"server": 1, "client": "ok"}
    wrong = trio.run(pair, os.urandom(control.SECRET), secret)
    assert isinstance(wrong["server"], PermissionError) and not isinstance(wrong["client"], str)
    twice = trio.run(pair, secret, secret, 2)
    assert isinstance(twice["server"], PermissionError) and "not expected" in str(twice["server"])


async def test_the_secret_is_neither_on_the_command_line_nor_in_the_environment(monkeypatch):
    secrets_seen = []
    real = control.secrets.token_bytes

    def spy(n):
        b = real(n)
        secrets_seen.append(b)
        return b

    monkeypatch.setattr(control.secrets, "token_bytes", spy)
    async with emu.Cluster("star:n=3", processes=2) as net:
        [pid] = net.worker_pids
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    secret = secrets_seen[0]
    for form in (secret, secret.hex().encode(), secret.hex().upper().encode()):
        assert form not in cmdline and form not in environ


async def test_a_worker_that_dies_before_connecting_is_reported_at_once_with_its_status():
    def dying(host, port, index):
        return [sys.executable, "-c", "import sys; sys.stderr.write('cannot start: no such thing\\n'); sys.exit(3)"]

    net = emu.Cluster("star:n=3", processes=2)
    net._worker_command = dying
    with trio.fail_after(30):  # not the 60 s connect timeout
        with pytest.raises(EmuError, match=r"domain 1 exited with status 3 before connecting: cannot start: no such thing"):
            async with net:
                pass


def _run_cluster_in_subprocess():
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "interrupt_me.py")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=os.path.dirname(HERE))
    line = proc.stdout.readline().split()
    assert line and line[0] == "pids", proc.stderr.read()
    return proc, int(line[1])


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_worker_ends_quietly_on_a_signal(sig):
    proc, worker = _run_cluster_in_subprocess()
    try:
        time.sleep(0.5)
        os.kill(worker, sig)
        assert _gone(worker)
        proc.wait(timeout=30)  # the parent notices its worker went away and stops with an error
        err = proc.stderr.read()
    finally:
        proc.kill()
    assert "emu/worker.py" not in err and "went away" in err, err[-2000:]


def test_workers_end_quietly_when_their_parent_dies():
    proc, worker = _run_cluster_in_subprocess()
    try:
        time.sleep(0.5)
        proc.kill()  # SIGKILL: the parent gets no chance to clean up
        proc.wait(timeout=10)
        assert _gone(worker), "the worker outlived its parent"
    finally:
        proc.kill()


async def test_workers_outlive_the_thread_that_started_them(monkeypatch):
    """trio starts processes from a cached worker thread that retires after IDLE_TIMEOUT (10 s)
    idle; a worker tied to that thread (PR_SET_PDEATHSIG) died then, killing every run over 10 s.
    Here the thread retires after 1.5 s (once the worker is up); the workers must not care."""
    import trio._core._thread_cache as cache

    monkeypatch.setattr(cache, "IDLE_TIMEOUT", 1.5)
    async with emu.Cluster("star:n=3", processes=2) as net:
        first = await net["h0"].ping("h2")
        await trio.sleep(3.5)  # wall clock: the thread that started the worker is gone by now
        assert await net["h0"].ping("h2") == first
        assert all(_alive(pid) for pid in net.worker_pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_an_application_a_worker_cannot_import_is_refused_with_the_fix():
    async def app(host):  # pretend it was written in the script being run
        return host.now

    app.__module__ = "__main__"
    async with emu.Cluster("star:n=3", processes=2) as net:
        remote = next(h for h in net.hosts if net.plan.owner[h])
        with pytest.raises(emu.ConfigError, match="which a worker process cannot import"):
            await net.run({remote: app})
        local = next((h for h in net.hosts if not net.plan.owner[h]), None)
        if local is not None:  # in the main process it runs as it is
            assert await net.run({local: app}) == {local: 0}


def test_a_worker_runs_numpys_math_library_on_one_thread_unless_told(monkeypatch):
    """Workers are meant to have a core each: BLAS/OpenMP pools of one thread by default, the
    user's own setting kept."""
    from emu.control import worker_env

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    env = worker_env()
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    env = worker_env()
    assert env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["OMP_NUM_THREADS"] == "4"
    assert env["PATH"] == os.environ["PATH"]


@pytest.mark.skipif(not hasattr(os, "getsid"), reason="sessions are POSIX")
async def test_a_worker_runs_in_a_session_of_its_own():
    """Where the kernel shares the cores between sessions (Linux's autogroup), a worker in the main
    process's session would split that session's one share with it: --processes 2 gained nothing
    while another session kept a core busy. Its own session gets it a share of its own."""
    async with emu.Cluster("star:n=3", processes=2) as net:
        [pid] = net.worker_pids
        assert os.getsid(pid) == pid != os.getsid(0)
        assert await net["h0"].ping("h2") > 0


def test_ctrl_c_at_a_terminal_ends_the_workers_too():
    """A terminal's Ctrl-C goes to its foreground process group, where a worker in a session of its
    own no longer is: the main process gets it and ends its workers."""
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "interrupt_me.py")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=os.path.dirname(HERE), start_new_session=True)
    try:
        line = proc.stdout.readline().split()
        assert line and line[0] == "pids", proc.stderr.read()
        worker = int(line[1])
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the whole foreground group
        proc.wait(timeout=30)
        assert _gone(worker), "the worker outlived a Ctrl-C"
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in proc.stderr.read()


def test_the_emu_command_runs_numpys_math_library_on_one_thread_unless_told():
    """``python -m emu`` (and the ``emu`` script, ``emu.__main__:main``) sets it before numpy is
    imported: the pool's threads spinning as numpy is imported took a worker's core."""
    code = ("import os, sys\nimport emu.__main__ as m\nsys.argv = ['emu', '--help']\ntry:\n    m.main()\n"
            "except SystemExit:\n    pass\nimport numpy\nprint(os.environ.get('OPENBLAS_NUM_THREADS'), "
            "os.environ.get('OMP_NUM_THREADS'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60).stdout
    assert out.splitlines()[-1] == "1 1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**env, "OMP_NUM_THREADS": "3"}).stdout
    assert out.splitlines()[-1] == "1 3"
