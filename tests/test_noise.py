"""OS noise (detours of the host CPU) and arrival skew at a collective's entry: seeded, deterministic,
and exactly what the detours overlapping the work give."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.config import ConfigError, HostSpec
from emu.nodes.collectives.run import run_collective
from emu.nodes.host.noise import Noise, entry_skew_ns
from emu.topologies import build


def brute(noise: Noise, t: int, work: int) -> int:
    """Walk nanosecond by nanosecond: the work progresses only outside detours."""
    busy = set()
    for s, e in noise.detours(t, t + (work + 2) * (noise.P + noise.d) + 50 * (work + 1)):  # past any end
        busy.update(range(s, e))
    while work > 0:
        if t not in busy:
            work -= 1
        t += 1
    return t


def periodic(P, d, phase="aligned", seed=0, node=0):
    return Noise(HostSpec(noise="periodic", noise_interval_ns=P, noise_duration_ns=d, noise_phase=phase), seed, node)


def test_a_periodic_detour_adds_exactly_the_detours_the_compute_overlaps():
    n = periodic(1000, 100)                              # detours [0,100), [1000,1100), [2000,2100), ...
    assert n.finish(50, 2500) == 2800                    # waits to 100, 900 + 900 + 700 of work
    assert n.finish(100, 900) == 1000                    # ends as a detour starts: not delayed by it
    assert n.finish(100, 901) == 1101
    assert n.finish(300, 10_000) == 300 + 10_000 + 11 * 100  # overlaps the 11 detours at 1000..11000


@settings(max_examples=80, deadline=None)
@given(P=st.integers(2, 300), data=st.data())
def test_periodic_against_a_nanosecond_walk(P, data):
    d = data.draw(st.integers(1, P - 1))
    n = periodic(P, d, phase="random", seed=data.draw(st.integers(0, 99)), node=data.draw(st.integers(0, 9)))
    t, w = data.draw(st.integers(0, 3 * P)), data.draw(st.integers(0, 4 * P))
    assert n.finish(t, w) == brute(n, t, w)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 999), t=st.integers(0, 2000), w=st.integers(0, 2000))
def test_random_detours_against_a_nanosecond_walk(seed, t, w):
    spec = HostSpec(noise="random", noise_interval_ns=300, noise_duration_ns=40)
    n = Noise(spec, seed, 3)
    assert n.finish(t, w) == brute(Noise(spec, seed, 3), t, w)
    assert n.finish(t, w) == Noise(spec, seed, 3).finish(t, w)      # deterministic per seed


def test_the_phase_is_drawn_per_host_and_seed_unless_aligned():
    phases = {periodic(10_000, 50, "random", seed=1, node=h).phase for h in range(16)}
    assert len(phases) > 8 and periodic(10_000, 50, "random", 1, 3).phase == periodic(10_000, 50, "random", 1, 3).phase
    assert {periodic(10_000, 50, "aligned", seed=1, node=h).phase for h in range(16)} == {0}


def test_skew_kinds():
    fixed = HostSpec(skew="fixed", skew_ns=700)
    assert [entry_skew_ns(fixed, 5, 0, r) for r in range(4)] == [0, 700, 1400, 2100]
    uni = HostSpec(skew="uniform", skew_ns=1000)
    draws = [entry_skew_ns(uni, 5, h, 0) for h in range(200)]
    assert all(0 <= x <= 1000 for x in draws) and len(set(draws)) > 100
    assert draws == [entry_skew_ns(uni, 5, h, 0) for h in range(200)]
    exp = HostSpec(skew="exponential", skew_ns=1000)
    mean = sum(entry_skew_ns(exp, 7, h, 0) for h in range(4000)) / 4000
    assert 900 < mean < 1100


def test_bad_noise_settings_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="noise_duration_ns < host.noise_interval_ns"):
        HostSpec(noise="periodic", noise_interval_ns=100, noise_duration_ns=100)
    with pytest.raises(ConfigError, match="noise must be none, periodic or random"):
        HostSpec(noise="gauss")
    with pytest.raises(ConfigError, match="skew must be"):
        HostSpec(skew="late")
    with pytest.raises(ConfigError, match="noise_interval_ns > 0"):
        HostSpec(noise="random", noise_duration_ns=5)


async def _compute(host, ns):
    await host.compute(ns)
    return host.now


async def test_a_detour_delays_a_host_process_in_the_emulator(cluster):
    t = build("star:n=2", settings={"host": {"noise": "periodic", "noise_interval_ns": 1000,
                                             "noise_duration_ns": 100, "noise_phase": "aligned"}})
    net = await cluster(t)
    t0 = net.now
    out = await net.run({"h0": (_compute, 10_000), "h1": (_compute, 0)})
    want = periodic(1000, 100).finish(t0, 10_000)
    assert out["h0"] == want and want - t0 - 10_000 == 100 * len(periodic(1000, 100).detours(t0, want))
    assert out["h1"] == t0


async def test_skew_and_noise_move_a_collective_deterministically(cluster):
    base = await run_collective(await cluster("star:n=8"), "allreduce", count=64, algo="recursive_doubling")
    skewed = build("star:n=8", settings={"host": {"skew": "fixed", "skew_ns": 1000}})
    r = await run_collective(await cluster(skewed), "allreduce", count=64, algo="recursive_doubling")
    assert r.completion_ns > 7000 and r.completion_ns > base.completion_ns  # the last rank enters 7 us late
    noisy = build("star:n=8", settings={"host": {"noise": "random", "noise_interval_ns": 2000,
                                                 "noise_duration_ns": 500}})
    a = await run_collective(await cluster(noisy), "allreduce", count=64, algo="recursive_doubling")
    b = await run_collective(await cluster(noisy), "allreduce", count=64, algo="recursive_doubling")
    assert a.completion_ns == b.completion_ns > base.completion_ns


def test_noise_sweep_script_at_a_tiny_size(capsys):
    from load_script import load

    rows = load("noise_sweep").main(["--nodes", "4", "--durations", "0,1000", "--seeds", "1"])
    quiet, noisy = rows
    assert quiet["sw_growth"] == quiet["nic_growth"] == 1.0
    assert noisy["sw_mean"] > quiet["sw_mean"] and noisy["nic_cpu_ns"] < noisy["sw_cpu_ns"]
    assert "OS noise periodic every 10000 ns" in capsys.readouterr().out
