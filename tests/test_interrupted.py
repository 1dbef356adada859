"""Interrupted runs leave nothing and lose nothing (issue 22, item 6): a worker killed while the
capture spills to disk, SIGTERM to ``emu run``, a full disk under ``--pcap``, a worker that stops
answering."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import trio

import apps
import emu
from emu.config import RunConfig
from emu.errors import EmuError, leaves
from emu.front import cli
from emu.topologies import star

LONG = {"h0": (apps.send_to, "h3", 1000, 0, 10**6), "h3": (apps.recv_count, 10**6)}


def _in_temp(monkeypatch, tmp_path) -> None:
    """The system's temporary folder is ``tmp_path`` here and in the workers started from here."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _spill_files(tmp_path, pid: int | str = "*") -> list:
    return list(tmp_path.glob(f"emu-capture-*/emu-capture-{pid}-*/run*"))


async def _run_until(net, attack) -> BaseException:
    """Run LONG on ``net`` with ``attack(net)`` beside it; returns what stopped the run."""
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(attack, net)
            await net.run(LONG)
    except BaseException as e:  # noqa: BLE001 -- the test looks at it
        return e
    raise AssertionError("the run was not stopped")


def _one(e: BaseException, kind=EmuError) -> BaseException:
    found = [x for x in leaves(e) if isinstance(x, kind)]
    assert found, repr(e)
    return found[0]


async def test_a_worker_killed_while_the_capture_spills_leaves_no_spill_files(tmp_path, monkeypatch):
    _in_temp(monkeypatch, tmp_path)

    async def kill_when_spilling(net):
        worker = net.worker_pids[0]
        while not _spill_files(tmp_path, worker):
            await trio.sleep(0.02)
        os.kill(worker, signal.SIGKILL)

    run = RunConfig(processes=2, capture=True, capture_spill_records=50)
    with trio.fail_after(30):
        try:
            async with emu.Cluster(star(4), run=run) as net:
                err = await _run_until(net, kill_when_spilling)
        except BaseException as e:  # noqa: BLE001
            err = e
    assert "went away" in str(_one(err))
    assert not list(tmp_path.iterdir()), list(tmp_path.rglob("*"))  # no spill folder, no run file


async def test_a_worker_that_stops_answering_is_named_with_its_pid_and_killed(tmp_path):
    stopped = {}

    async def stop_it(net):
        await trio.sleep(0.3)
        stopped["pid"], stopped["at"] = net.worker_pids[0], time.monotonic()
        os.kill(stopped["pid"], signal.SIGSTOP)

    run = RunConfig(processes=2, worker_timeout_s=2.0)
    with trio.fail_after(25):
        try:
            async with emu.Cluster(star(4), run=run) as net:
                err = await _run_until(net, stop_it)
        except BaseException as e:  # noqa: BLE001
            err = e
    waited = time.monotonic() - stopped["at"]
    msg = str(_one(err))
    assert f"domain 1 (pid {stopped['pid']})" in msg and "stopped" in msg, msg
    assert waited < 2.0 + 3.0  # the timeout, a look or two, and the teardown
    assert not os.path.exists(f"/proc/{stopped['pid']}")  # killed and reaped, not left stopped


def test_a_full_disk_under_pcap_keeps_the_json_and_names_the_path(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = cli.main(["run", "--topo", "star:n=4", "--test", "pingall+barrier", "--pcap", "/dev/full",
                     "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 1
    line = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(line) == 1 and "/dev/full" in line[0] and "No space left" in line[0], text
    assert [r["name"] for r in json.loads(out.read_text())["results"]] == ["pingall", "barrier"]


def test_sigterm_tears_emu_run_down_in_one_line_and_keeps_the_finished_tests(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    res = tmp_path / "out"
    res.mkdir()
    cmd = [sys.executable, "-m", "emu", "run", "--topo", "star:n=8", "--test", "pingall", "--test", "allreduce",
           "--algo", "ring", "--size", "64MiB", "--processes", "2", "--pcap", str(res / "r.pcapng"),
           "--json", str(res / "r.json")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 180  # waits on the event; the deadline only ends a hung run (a busy machine is slow)
        while not _spill_files(tmp_path) and time.monotonic() < deadline:  # the allreduce is under way
            time.sleep(0.05)
        assert _spill_files(tmp_path), "the allreduce never spilled its capture"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 143, (out, err)
    lines = [ln for ln in (out + err).splitlines() if ln.strip() and not ln.startswith(("a large run", "(ring"))]
    assert len(lines) == 1 and lines[0].startswith("terminated (SIGTERM); the cluster was torn down"), out + err
    assert [r["name"] for r in json.loads((res / "r.json").read_text())["results"]] == ["pingall"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no spill folder left
    assert not (res / "r.pcapng").exists()


def test_a_capture_that_fills_a_small_disk_is_removed_and_the_json_kept(tmp_path, capsys):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                                                   capture_output=True).returncode == 0
    if not mounted:
        pytest.skip("needs root to mount a 64 KiB tmpfs")
    try:
        code = cli.main(["run", "--topo", "star:n=4", "--test", "allreduce", "--size", "64KiB",
                         "--pcap", str(disk / "r.pcapng"), "--json", str(tmp_path / "r.json")])
        text = capsys.readouterr().out
        left = list(disk.iterdir())
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    assert code == 1 and f"{disk / 'r.pcapng'}" in text and "No space left" in text, text
    assert left == []  # the incomplete capture does not hold the disk full
    assert [r["name"] for r in json.loads((tmp_path / "r.json").read_text())["results"]] == ["allreduce"]


async def test_a_spill_folder_that_cannot_be_made_is_refused_in_one_line(tmp_path):
    with pytest.raises(emu.ConfigError, match="spill folder cannot be made in .*name a writable folder"):
        async with emu.Cluster("star:n=2", run=RunConfig(capture=True, capture_dir=str(tmp_path / "absent"))):
            pass


def test_sigterm_ends_emu_run_in_a_long_stretch_without_an_await(tmp_path):
    """SIGTERM lands where trio cannot cancel (no await for minutes): ended there at once, as
    Ctrl-C would be, not when the stretch is over."""
    cmd = [sys.executable, str(Path(__file__).parent / "sigterm_stalled.py"), "run", "--topo", "star:n=4",
           "--test", "pingall", "--processes", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        assert proc.stdout.readline().strip() == "stalled"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)  # (the stretch is 300 s: only the signal ends it sooner)
    finally:
        proc.kill()
    assert proc.returncode == 143, (out, err)
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert lines == ["terminated (SIGTERM); the cluster was torn down"], out + err
    assert list(tmp_path.iterdir()) == []
