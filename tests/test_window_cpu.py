"""Where a run over several processes spends its time (issue 27, scripts/bench_processes.py): every
process records its CPU at the start of each window while asked (``Cluster.window_cpu``), the bench
sums the busiest process's CPU window by window (the critical path), and ``Cluster.cpu_times`` says
how long each process waited for a core."""

import sys

import emu
from emu.domain_control import contention
from emu.topologies import star
from load_script import load


async def test_every_process_marks_the_start_of_each_window_while_recording():
    async with emu.Cluster(star(4), processes=2) as net:
        assert await net.window_cpu(record=True) == [[], []]  # (nothing recorded before)
        w0 = net.windows
        await net["h0"].ping("h3")
        marks = await net.window_cpu(record=False)
        windows = net.windows - w0
        await net["h1"].ping("h2")
        assert net.windows > w0 + windows
        assert await net.window_cpu(record=False) == [[], []]  # no longer recorded
        cpu = await net.cpu_times()
    assert windows > 0 and [len(m) for m in marks] == [windows, windows]
    assert all(a <= b for m in marks for a, b in zip(m, m[1:]))
    assert all(c["process_s"] >= m[-1] for c, m in zip(cpu, marks))
    if sys.platform == "linux":
        assert all(c["runqueue_s"] >= 0 and c["preempted"] >= 0 for c in cpu)


def test_contention_is_what_the_system_tells_and_only_that():
    got = contention()
    assert set(got) <= {"runqueue_s", "preempted"}
    if sys.platform == "linux":
        with open("/proc/self/schedstat") as f:
            waited = int(f.read().split()[1]) / 1e9
        assert set(got) == {"runqueue_s", "preempted"} and 0 <= got["runqueue_s"] <= waited


def test_the_critical_path_takes_the_busiest_process_window_by_window():
    bench = load("bench_processes")
    # process 0 busier in the first window, process 1 in the second, 0 again in the last stretch
    before, marks, after = [0.0, 0.0], [[1.0, 3.0], [2.0, 2.5]], [4.0, 3.5]
    assert bench.critical_path(before, marks, after) == 2.0 + 2.0 + 1.0
    assert bench.critical_path([0.0], [[1.0, 3.0]], [4.0]) == 4.0  # one process: its own CPU


def test_each_process_waits_for_the_busiest_one_window_by_window():
    from emu.timeline import critical_path, waits

    # spans: process 0 takes 1, 2, 1; process 1 takes 2, 0.5, 1 (a tie in the last: the first counts)
    before, marks, after = [0.0, 0.0], [[1.0, 3.0], [2.0, 2.5]], [4.0, 3.5]
    windows, waited, slowest = waits(before, marks, after)
    assert windows == 3 and slowest == [2, 1]
    assert waited == [1.0, 1.5]
    # the critical path is each process's own CPU plus its wait, whichever process is taken
    assert all(critical_path(before, marks, after) == (a - b) + w for a, b, w in zip(after, before, waited))
    assert waits([0.0], [[1.0, 3.0]], [4.0]) == (3, [0.0], [3])  # one process: never waits
