"""Issue 45: ``emu run --processes N`` forks its workers as the command starts (``emu.forked``), so
that their start-up overlaps the topology's; a library cluster starts them before it builds its own
elements (``emu.control.launch_workers``). The figures are those of one process; a refused command
leaves no worker behind; a launch meant for another cluster is refused in one line."""

import os
import re
import subprocess
import sys
import time

import pytest
import trio

import emu
from emu.control import launch_workers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = ["run", "--topo", "fattree:k=4,n=2", "--test", "allreduce", "--algo", "recursive_doubling", "--size", "4KiB"]


def _emu(args, tmp_path, name):
    tl = tmp_path / name
    env = {**os.environ, "EMU_TIMELINE": str(tl)}
    p = subprocess.run([sys.executable, "-m", "emu", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=240)
    steps = [line.split(None, 3) for line in tl.read_text().splitlines()] if tl.exists() else []
    return p, steps


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_forked_workers_give_the_figures_of_one_process(tmp_path):
    one, _ = _emu([*RUN, "--processes", "1"], tmp_path, "one")
    two, steps = _emu([*RUN, "--processes", "2"], tmp_path, "two")
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    same = lambda out: re.sub(r"wall_s=[0-9.]+", "", out)  # noqa: E731
    assert same(one.stdout) == same(two.stdout) and "result=equal to numpy" in two.stdout
    main = {s[3] for s in steps if s[3] == "imported"}
    forked = [s for s in steps if s[3] == "worker-forked"]
    assert main and len(forked) == 1  # a worker of its own, forked (not started as python -m emu.worker)
    pid = int(forked[0][0])
    by_pid = [s[3] for s in steps if int(s[0]) == pid]
    assert by_pid.index("worker-preloaded") < by_pid.index("worker-plan") < by_pid.index("worker-built")
    # the worker made the partition while the main process checked the input (the plan came after),
    # asked as soon as the main process had its topology (before or after the worker's imports)
    assert by_pid.index("worker-imported") < by_pid.index("worker-asked") < by_pid.index("worker-partitioned") \
        < by_pid.index("worker-plan")
    assert [s[3] for s in steps if s[3] in ("partition-asked", "prepared")] == ["partition-asked", "prepared"]
    assert "worker-done" in by_pid and _gone(pid)


def test_a_refused_command_leaves_no_forked_worker(tmp_path):
    p, steps = _emu([*RUN[:4], "nosuchtest", "--processes", "3"], tmp_path, "refused")
    assert p.returncode == 2 and p.stdout.count("\n") == 1 and "refused" in p.stdout and "Traceback" not in p.stderr
    forked = [int(s[0]) for s in steps if s[3] == "worker-forked"]
    assert len(forked) == 2 and all(_gone(pid) for pid in forked)


async def test_a_launch_for_another_cluster_is_refused():
    async with trio.open_nursery() as nursery:
        launch = await launch_workers(nursery, 2)
        try:
            with pytest.raises(emu.ConfigError, match="for a cluster of processes=3"):
                emu.Cluster("star:n=4", processes=2, workers=launch)
        finally:
            await launch.aclose()
    assert all(w.proc.returncode is not None for w in launch.workers)


async def test_a_cluster_takes_workers_launched_before_it():
    async with trio.open_nursery() as nursery:
        launch = await launch_workers(nursery, 1)
        async with emu.Cluster("star:n=4", processes=2, workers=launch) as net:
            assert net.worker_pids == [launch.workers[0].pid]
            assert await net.ping("h0", "h3") > 0
        assert launch.workers[0].proc.returncode is not None  # ended with its cluster


async def _ready(launch) -> None:
    with trio.fail_after(60):
        while not launch.ready:
            await trio.sleep(0.02)


async def test_the_first_worker_makes_the_partition_the_plan_would_make():
    from emu.partition import graph_of, partition_used
    from emu.topologies import build

    t = build("fattree:k=4,n=2")
    async with trio.open_nursery() as nursery:
        launch = await launch_workers(nursery, 1)
        await _ready(launch)
        await launch.ask_partition(graph_of(t), 2, "metis")
        await launch.partition_answer()
        known = launch.known_partition(graph_of(t), 2, "metis")
        assert known == partition_used(t, 2, "metis") and set(known[0].values()) == {0, 1}
        assert launch.known_partition(graph_of(t), 2, "order") is None  # (made for another method: not used)
        async with emu.Cluster(t, processes=2, workers=launch) as net:
            assert net.plan.owner == known[0] and net.plan.partition_used == known[1]
            assert await net.ping("h0", "h7") > 0


async def test_a_partition_the_worker_cannot_make_is_made_here():
    from emu.partition import graph_of, partition_used
    from emu.topologies import build

    t = build("star:n=4")
    names, links, hosts = graph_of(t)
    async with trio.open_nursery() as nursery:
        launch = await launch_workers(nursery, 1)
        await _ready(launch)
        await launch.ask_partition((names, [*links, ("h0", "nowhere")], hosts), 2, "metis")  # (its worker fails)
        await launch.partition_answer()
        assert launch.known_partition((names, [*links, ("h0", "nowhere")], hosts), 2, "metis") is None
        async with emu.Cluster(t, processes=2, workers=launch) as net:  # (the answer read: its plan comes next)
            assert net.plan.owner == partition_used(t, 2, "metis")[0]
            assert await net.ping("h0", "h3") > 0


async def test_a_worker_that_never_connects_is_named_within_the_connect_timeout():
    """``RunConfig.connect_timeout_s`` (``launch_workers``' ``connect_timeout_s``): a worker that
    starts but never connects back ends the wait at that deadline, in one line naming the domain
    and the setting that gives it longer (bench_processes.py --instructions raises it for valgrind)."""
    from emu.errors import EmuError

    def silent(host, port, index):
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    async with trio.open_nursery() as nursery:
        t0 = trio.current_time()
        launch = await launch_workers(nursery, 1, silent, connect_timeout_s=1.0)
        try:
            with pytest.raises(EmuError, match=r"0 of 1 worker processes connected within 1 s "
                                               r"\(missing domains \[1\]; RunConfig.connect_timeout_s"):
                await launch.admit(lambda chan, d: None)
            assert trio.current_time() - t0 < 30
        finally:
            await launch.aclose()
        nursery.cancel_scope.cancel()
    assert emu.RunConfig().connect_timeout_s == 60.0


PROBE = """
import json, os, runpy, sys
import emu.timeline as tl
first = tl.mark
def mark(what):
    first(what)
    if what == "worker-forked":  # (in each forked worker: which of the engines' modules it has already)
        with open(os.environ["PROBE_OUT"], "a") as f:
            f.write(json.dumps([m for m in json.loads(os.environ["PROBE_MODULES"]) if m in sys.modules]) + "\\n")
tl.mark = mark
sys.argv = ["emu", *json.loads(sys.argv[1])]
runpy.run_module("emu", run_name="__main__", alter_sys=True)
"""


def test_workers_after_the_first_are_forked_with_the_engines_imported(tmp_path):
    """Worker 1 is forked at once (it makes the partition first); the main process then imports the
    engines it builds its own domain with, and the other workers are forked with them: they import
    nothing before their plan."""
    import json

    from emu.front import WORKER_PRELOAD

    engines = [*WORKER_PRELOAD, "emu.nodes.nic.engine", "emu.switch.router"]
    out = tmp_path / "probe"
    env = {**os.environ, "PROBE_OUT": str(out), "PROBE_MODULES": json.dumps(engines)}
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps([*RUN, "--processes", "3"])], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=240)
    assert p.returncode == 0 and "result=equal to numpy" in p.stdout, p.stderr
    had = sorted(json.loads(line) for line in out.read_text().splitlines())
    assert had == [[], engines]
