"""Faults at any virtual time (issue 22, item 1): a scheduled change strikes at exactly its time,
whether that falls before, during, between or after the parts of a multi-part workload, in one or two
processes, with frames in memory or on UDP; a run never processes a change past its own end (the
change waits for the next run), and figures are the same as without the change where it cannot
matter. Then the same sweep through ``emu run --fault`` for every ``--offload``."""

import subprocess
import sys

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import apps
import emu
import hub  # noqa: F401  (registers the "hub" engine kind: it records when it is told of a change)
from emu.topologies import star

D = 10_000
"""The link comes back this long after it went down."""


def _topology():
    t = star(3)
    t.nodes["s0"].info["engine"] = "hub"
    return t


async def _workload(net, check) -> list:
    """Three parts: a ping, 40 messages h0 -> h1, another ping; ``check`` after each."""
    out = [await net["h0"].ping("h1")]
    await check()
    out.append((await net.run({"h0": (apps.send_to, "h1", 900, 0, 40)}))["h0"])
    await check()
    out.append(await net["h0"].ping("h1"))
    await check()
    return out


def _run(t_down: int | None, processes: int, direct: bool) -> tuple[list, list[tuple[int, int, int]]]:
    seen = []

    async def main():
        async with emu.Cluster(_topology(), processes=processes, direct=direct) as net:
            changes = [] if t_down is None else [t_down, t_down + D]
            if changes:
                await net.schedule(changes[0], "down", link=("s0", "h2"))
                await net.schedule(changes[1], "up", link=("s0", "h2"))

            async def check():
                hs = next(s for s in await net.stats() if s["name"] == "s0")["engine"]
                reached = [c for c in changes if c <= net.now]
                seen.append((net.now, hs["link_changes"], hs["last_change_ns"]))
                assert hs["link_changes"] == len(reached), (net.now, changes, hs)
                assert hs["last_change_ns"] == (reached[-1] if reached else -1), (net.now, changes, hs)

            out = await _workload(net, check)
            # past both changes: each was told at exactly its time
            await net.run({"h0": (apps.sleeper, max(0, (changes[-1] if changes else 0) + 1 - net.now))})
            await check()
            return out

    return trio.run(main), seen


REFERENCE = _run(None, 1, True)[0]
SPAN = 20_000  # the workload ends near 15 us: sweep a little past it


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t_down=st.integers(0, SPAN))
def test_a_change_strikes_at_exactly_its_time_whenever_it_falls(t_down):
    out, seen = _run(t_down, 1, True)
    assert out == REFERENCE  # h2's link carries no traffic between h0 and h1: nothing else changes
    assert [n for n, _, _ in seen] == sorted(n for n, _, _ in seen)  # time never runs backwards


@pytest.mark.parametrize("processes,direct", [(2, True), (1, False), (2, False)])
@pytest.mark.parametrize("t_down", [0, 700, 1_500, 5_000, 9_000, 14_000, 18_000])
def test_the_same_over_two_processes_and_on_udp(t_down, processes, direct):
    out, seen = _run(t_down, processes, direct)
    assert out == REFERENCE
    assert seen == _run(t_down, 1, True)[1]  # the same moments, the same changes told


def emu_run(*args):
    return subprocess.run([sys.executable, "-m", "emu", "run", *args], capture_output=True, text=True, timeout=300)


SWEEP = {
    "none": (["--topo", "fattree:k=4,n=2", "--test", "pingall+allreduce", "--size", "16KiB"], "s0-s4"),
    "nic": (["--topo", "fattree:k=2,n=3", "--test", "allreduce", "--offload", "nic", "--size", "1KiB"], "s0-s4"),
    "switch": (["--topo", "fattree:k=4,n=2", "--test", "allreduce", "--offload", "switch", "--size", "16KiB"],
               "s0-s4"),
    "hw": (["--topo", "qsnet:nodes=16", "--test", "bcast+barrier+allreduce+put", "--offload", "hw", "--size", "4KiB"],
           "h3-s0"),
}


@pytest.mark.parametrize("offload", sorted(SWEEP))
@pytest.mark.parametrize("at_us", [0, 1, 3, 8, 40])
def test_emu_run_with_a_fault_at_any_moment_ends_in_a_result_never_a_traceback(offload, at_us):
    args, link = SWEEP[offload]
    r = emu_run(*args, "--fault", f"at={at_us}us,link={link},down", "--fault", f"at={at_us + 5}us,link={link},up")
    text = r.stdout + r.stderr
    if r.returncode == 2:  # refused before anything starts (a host cut off from its group at 0), in one line
        assert text.startswith("refused: ") and text.count("\n") == 1, text
    else:
        assert r.returncode in (0, 1), text
    for bad in ("Traceback", "CausalityError", "EngineError", "never awaited"):
        assert bad not in text, text


def _hub_stats(stats):
    return next(s for s in stats if s["name"] == "s0")["engine"]


async def test_clear_faults_cancels_what_is_not_reached_and_undoes_what_was():
    async with emu.Cluster(_topology()) as net:
        rtt = await net["h0"].ping("h1")
        t = net.now
        await net.schedule(t, "down", link=("s0", "h2"))           # at now itself: not reached yet
        await net.schedule(t + 10**6, "up", link=("s0", "h2"))
        await net.clear_faults()
        assert net._sync.faults == []                               # nothing left for the synchroniser
        assert await net["h0"].ping("h2") == rtt                   # h2's link was never down
        hs = _hub_stats(await net.stats())
        assert (hs["link_changes"], hs["last_change_ns"]) == (0, -1)  # the hub was never told
        # a change reached is undone: down, reached during a ping; cleared: told "up" at that moment
        await net.schedule(net.now, "down", link=("s0", "h2"))
        await net["h0"].ping("h1")
        assert _hub_stats(await net.stats())["link_changes"] == 1
        at = net.now
        await net.clear_faults()
        assert await net["h0"].ping("h2") == rtt
        hs = _hub_stats(await net.stats())
        assert (hs["link_changes"], hs["last_change_ns"]) == (2, at)
        assert net.metrics.summary()["lost_in_flight"] == 0 and net.metrics.summary()["dropped"] == 0


def test_the_next_window_starts_at_a_change_only_within_the_run():
    from emu.element import INF
    from emu.sync import faults_reached, window_start

    assert window_start([500], [300], 0) == 300         # something is left after it: its own window
    assert window_start([300], [300], 0) == 300         # at the same time as an event
    assert window_start([INF], [300], 400) == 300       # before the run's last event: reached
    assert window_start([INF], [300], 299) == INF       # after it, nothing left: waits for the next run
    assert window_start([200], [300], 0) == 200
    heap = [100, 200, 300]
    assert faults_reached(heap, 201) == 200 and heap == [300]
