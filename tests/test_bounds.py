"""Issue 41, items 5-7: input that is data, held to bounds before anything starts.

Sweeps are counted before a point is made (item 5); numbers are decimal wherever they are text, a
fault is one change, a message size must fit the machine's memory (item 6); virtual time ends at
2**62 ns, the pure-Python element loop ends a window there as the compiled core does, and times
past it are refused (item 7).
"""

import argparse

import pytest

import apps
import emu
from emu import native
from emu.config import HORIZON_NS, ConfigError, load_settings, parse_settings
from emu.faults import Fault, parse_time_ns
from emu.front import sweepargs
from emu.front.cli import main
from emu.front.sizes import parse_size
from emu.topologies.registry import build

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here")


def _refused(argv, capsys) -> str:
    assert main(argv) == 2
    out = capsys.readouterr().out
    assert out.startswith("refused:") and out.count("\n") == 1, out
    return out


# -- item 5: sweeps counted before a point is made ----------------------------------------------
def _args(**kw):
    d = {"topo": "star:n=4", "set": None, "offload": None, "algo": None, "size": None}
    d.update(kw)
    return argparse.Namespace(**d)


def test_a_sweep_of_a_billion_points_is_refused_by_its_count_without_making_one(monkeypatch):
    def no_points(*_):
        raise AssertionError("a point was made")

    monkeypatch.setattr(sweepargs.itertools, "product", no_points)
    thousand = ",".join(str(i) for i in range(1, 1001))
    args = _args(set=[f"host.rto_ns={thousand}", f"host.xor_ns={thousand}", f"nic.alu_ns={thousand}"])
    with pytest.raises(ConfigError, match=r"this sweep has 1,000,000,000 points \(1,000 host.rto_ns x 1,000 "
                                          r"host.xor_ns x 1,000 nic.alu_ns values\), over the limit of 10,000"):
        sweepargs.sweep(args)


@pytest.mark.parametrize("kw", [{"size": ",".join(f"{i}B" for i in range(1, 10**6 + 1))},
                                {"set": ["host.rto_ns=" + ",".join(str(i) for i in range(1, 10**6 + 1))]}])
def test_one_huge_list_is_refused_by_its_count(kw):
    with pytest.raises(ConfigError, match=r"1,000,000 points \(1,000,000 (size|host.rto_ns) values\)"):
        sweepargs.sweep(_args(**kw))


def test_the_limit_is_the_documented_one_and_the_points_are_made_as_they_are_used():
    n = sweepargs.MAX_POINTS
    sweepargs.sweep(_args(size=",".join(f"{i}B" for i in range(1, n + 1))))  # at the limit: taken
    with pytest.raises(ConfigError, match=f"{n + 1:,} points"):
        sweepargs.sweep(_args(size=",".join(f"{i}B" for i in range(1, n + 2))))
    swept, points = sweepargs.sweep(_args(topo="star:n=4,star:n=8", set=["host.rto_ns=5,6,7"], size="1KiB,2KiB"))
    assert len(points) == 12 and list(swept) == ["topo", "host.rto_ns", "size"]
    made = list(points)
    assert [points[i] for i in range(-12, 12)] == made + made
    assert made[0] == {"topo": "star:n=4", "host.rto_ns": "5", "offload": None, "algo": None, "size": "1KiB"}
    assert made[-1] == {"topo": "star:n=8", "host.rto_ns": "7", "offload": None, "algo": None, "size": "2KiB"}
    with pytest.raises(IndexError):
        points[12]


def test_a_value_twice_is_refused_in_a_set_list_too_and_long_lists_stay_one_line():
    with pytest.raises(ConfigError, match="--set host.rto_ns names 5 twice"):
        sweepargs.sweep(_args(set=["host.rto_ns=5,6,5"]))
    with pytest.raises(ConfigError, match=r"--size names 1B, 2B, 3B, 4B, 5B and 995 more twice"):
        sweepargs.sweep(_args(size=",".join(f"{i % 1000 + 1}B" for i in range(2000))))
    with pytest.raises(ConfigError, match=r"--size '1B,2B,3B.*\.\.\.' has an empty item"):
        sweepargs.sweep(_args(size=",".join(f"{i}B" for i in range(1, 100)) + ","))


def test_emu_run_refuses_a_sweep_past_the_limit_in_one_line(capsys):
    sizes = ",".join(f"{i}B" for i in range(1, 10_002))
    out = _refused(["run", "--topo", "star:n=4", "--test", "allreduce", "--size", sizes], capsys)
    assert "10,001 points" in out and "split the study" in out


# -- item 6: numbers are decimal wherever they are text -----------------------------------------
@pytest.mark.parametrize("value,hint", [("0x10", "write 16, not 0x10"), ("0o20", "write 16, not 0o20"),
                                        ("0b10000", "write 16, not 0b10000"), ("1_6", "without '_': 16, not 1_6")])
def test_set_refuses_non_decimal_numbers_with_the_decimal_spelling(value, hint):
    with pytest.raises(ConfigError, match=f"host.rto_ns must be an integer, got '{value}'; .*{hint}"):
        parse_settings([f"host.rto_ns={value}"])
    with pytest.raises(ConfigError, match=f"link.latency_ns must be an integer.*{hint}"):
        parse_settings([f"link.latency_ns={value}"])
    assert parse_settings(["host.rto_ns=16", "host.xor_ns=1e1", "link.bandwidth_bps=2.5e10"]) == {
        "host": {"rto_ns": 16, "xor_ns": 10}, "link": {"bandwidth_bps": 25_000_000_000}}


def test_toml_integers_are_numbers_and_toml_strings_are_text(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text("[host]\nrto_ns = 0x10\n[link]\nbandwidth_bps = 25_000_000_000\nlatency_ns = 0o20\n")
    assert load_settings(str(good)) == {"host": {"rto_ns": 16}, "link": {"bandwidth_bps": 25 * 10**9, "latency_ns": 16}}
    for text, hint in (('"0x10"', "write 16, not 0x10"), ('"1_0"', "without '_': 10, not 1_0")):
        bad = tmp_path / "bad.toml"
        bad.write_text(f"[host]\nrto_ns = {text}\n")
        with pytest.raises(ConfigError, match=f"host.rto_ns must be an integer.*{hint}"):
            load_settings(str(bad))


@pytest.mark.parametrize("argv,words", [
    (["run", "--topo", "star:n=0x4"], "star: n must be an integer, got '0x4'; numbers are decimal: write 4"),
    (["run", "--topo", "star:n=1_0"], "star: n must be an integer, got '1_0'; numbers are written without '_': 10"),
    (["run", "--topo", "star:n=4,bandwidth_gbps=1_0"], "bandwidth_gbps must be a finite positive number below 1e7, got '1_0'; numbers are written without '_'"),
    (["run", "--topo", "star:n=4", "--set", "host.rto_ns=0x10"], "write 16, not 0x10"),
    (["run", "--topo", "star:n=4", "--test", "allreduce", "--size", "0x10"], "write 16, not 0x10"),
    (["run", "--topo", "star:n=4", "--test", "allreduce", "--size", "1_024"], "without '_': 1024"),
    (["run", "--topo", "star:n=4", "--fault", "at=1_000,link=h0-s0,down"], "without '_': 1000"),
    (["run", "--topo", "star:n=4", "--fault", "at=0x10,link=h0-s0,down"], "write 16, not 0x10"),
    (["run", "--topo", "star:n=4", "--test", "uniform", "--load", "0.1,0.2_5"], "'0.2_5' is not a number"),
])
def test_every_number_given_as_text_is_decimal(argv, words, capsys):
    out = _refused(argv, capsys)
    assert words in out


@pytest.mark.parametrize("argv,words", [
    (["--seed", "1_0"], "--seed: '1_0' is not an integer; numbers are written without '_': 10, not 1_0"),
    (["--seed", "0x10"], "--seed: '0x10' is not an integer; numbers are decimal: write 16, not 0x10"),
    (["--realtime", "1_000"], "--realtime: '1_000' is not a number; numbers are written without '_'"),
    (["--density", "inf"], "--density: 'inf' is not a number"),
])
def test_the_numeric_options_are_decimal_too(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--topo", "star:n=4", *argv])
    assert e.value.code == 2 and words in capsys.readouterr().err


@pytest.mark.parametrize("raw,words", [("1_000", "without '_': 1000"), ("0x10", "write 16"),
                                       ("1e9999", "")])  # (1e9999: an OverflowError's traceback before)
def test_the_limits_in_the_environment_are_decimal_too(monkeypatch, raw, words):
    monkeypatch.setenv("EMU_MAX_ELEMENTS", raw)
    with pytest.raises(ConfigError, match=f"EMU_MAX_ELEMENTS='{raw}' is not a number.*{words}"):
        build("star:n=4")


def test_decimal_numbers_still_read_as_before():
    assert parse_size("1024") == parse_size("1KiB") == 1024
    assert build("star:n=4,bandwidth_gbps=2.5e1").links[0].spec.bandwidth_bps == 25 * 10**9
    assert parse_time_ns("1.5us") == 1500 and parse_time_ns("1e3") == 1000
    assert parse_time_ns(str(HORIZON_NS - 1)) == HORIZON_NS - 1  # exact, not rounded through a float to 2**62


# -- item 6: a fault is one change ----------------------------------------------------------------
@pytest.mark.parametrize("text,words", [
    ("at=1us,link=a-b,down,up", "gives two changes, down and up; one --fault is one change"),
    ("at=1us,link=a-b,ber=1e-6,down", "gives two changes, ber=1e-6 and down"),
    ("at=1us,link=a-b,down,down", "gives down twice"),
    ("at=1us,at=2us,link=a-b,down", "gives at= twice (at=1us, at=2us)"),
    ("at=1us,link=a-b,link=c-d,down", "gives link= twice"),
    ("at=1us,switch=s0,switch=s1,down", "gives switch= twice"),
    ("at=1us,link=a-b,ber=1e-6,ber=1e-5", "gives two changes, ber=1e-6 and ber=1e-5"),
])
def test_a_fault_with_two_changes_or_a_key_twice_is_refused(text, words):
    with pytest.raises(ConfigError, match="^fault .*" + words.replace("(", r"\(").replace(")", r"\)")):
        Fault.parse(text)


def test_emu_run_refuses_a_contradictory_fault_in_one_line(capsys):
    out = _refused(["run", "--topo", "star:n=4", "--fault", "at=1us,link=h0-s0,down,up"], capsys)
    assert "two changes, down and up" in out


# -- item 7: the end of virtual time ---------------------------------------------------------------
async def sleep_then_wait(host, ns):
    await host.sleep(ns)
    await host.recv(src="h1", tag=99)


async def _at_the_horizon(monkeypatch, pure: bool) -> str:
    monkeypatch.setattr(native, "CORE", None if pure else native.CORE)
    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
        with pytest.raises(emu.DeadlockError) as e:
            await net.run({"h0": (sleep_then_wait, HORIZON_NS - 1)})
        return str(e.value)


async def test_pure_python_ends_a_window_at_the_horizon_with_the_deadlock(monkeypatch):
    """At 2**62 - 1 the hosts' element has nothing left: Element.run_window used to pop its empty
    heap (IndexError); it stops there, as the compiled core's loop does, and the run reports the
    deadlock."""
    pure = await _at_the_horizon(monkeypatch, True)
    assert pure.startswith(f"no events left at {HORIZON_NS - 1} ns but 1 application still waits: "
                           f"h0 blocked in recv(src=h1, tag=99) since {HORIZON_NS - 1} ns")


@needs_core
async def test_the_compiled_core_gives_the_same_answer_at_the_horizon(monkeypatch):
    assert await _at_the_horizon(monkeypatch, False) == await _at_the_horizon(monkeypatch, True)


def test_run_window_with_a_window_past_the_horizon_and_nothing_left_stops():
    """The window's end may lie past INF (its start near the horizon plus the lookahead): with no
    frame, timer or port event left, the loop stops instead of popping an empty heap."""
    from emu.element import INF, Element

    class Idle:
        timer = None
        min_delay_ns = 0
        stats: dict = {}

    el = Element.__new__(Element)
    for name, value in (("heap", []), ("engine", Idle()), ("link_events", []), ("pevents", []),
                        ("capture", None), ("ins", []), ("outs", []), ("busy", {}), ("now", INF - 1),
                        ("active_ns", INF - 1), ("lookahead", 100)):
        setattr(el, name, value)
    assert el.run_window(INF + 99, 0) == INF
    el.link_events.append((INF - 10, 0, True))  # a link change for a later window: the loop stops before it
    assert el.run_window(INF + 99, 0, INF - 20) == INF and el.safe_time == INF - 10


@pytest.mark.parametrize("call", ["sleep", "compute"])
async def test_a_host_time_past_the_horizon_is_refused_in_one_line(call):
    async def app(host):
        await getattr(host, call)(HORIZON_NS)

    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=True)) as net:
        with pytest.raises(emu.AppError, match=rf"{call}\({HORIZON_NS} ns\) at 0 ns would end at {HORIZON_NS} ns, "
                                               r"at or past the end of virtual time \(2\*\*62"):
            await net.run({"h0": app})
        assert (await net.run({"h0": (apps.sleeper, 1000)}))["h0"] == 1000  # the cluster goes on


def test_fault_times_past_the_horizon_are_refused():
    with pytest.raises(ConfigError, match=r"must be within 0 and 2\*\*62 ns \(the end of virtual time\)"):
        parse_time_ns(str(HORIZON_NS))
    with pytest.raises(ConfigError, match="before the end of virtual time"):
        Fault(HORIZON_NS, "down", ("a", "b"))


# -- item 6: a message size must fit the machine's memory ---------------------------------------
def _need(spec, test, size, **extra):
    from emu.front.memory import message_bytes

    return message_bytes([test], build(spec), {"size": size, **extra})


def test_the_memory_estimate_follows_the_measured_factor_of_the_algorithm_run():
    mib = 1 << 20
    n = _need("star:n=8", "allreduce", "64MiB")  # chosen by size: rabenseifner, 1.72 measured per host
    assert (n.how, n.per_host, n.ranks, n.bytes) == ("rabenseifner", 1.8, 8, int(1.8 * 64 * mib * 8))
    assert _need("star:n=8", "allreduce", "64MiB", algo="recursive_doubling").per_host == 3.6
    assert _need("star:n=8", "allreduce", "64MiB", ranks=["h0", "h1"]).bytes == int(1.8 * 64 * mib * 2)
    # each host of an alltoall holds a part from every rank: four times the memory on twice the ranks
    a8, a16 = _need("star:n=8", "alltoall", "1MiB"), _need("star:n=16", "alltoall", "1MiB")
    assert a16.bytes == pytest.approx(4 * a8.bytes, rel=1e-6)
    # an algorithm not measured takes the largest factor of its test
    assert _need("star:n=8", "mcast", "1MiB", algo="nc").per_host == 3.3
    from emu.front.memory import message_bytes

    assert message_bytes(["pingall", "barrier"], build("star:n=8"), {"size": "1GiB"}) is None


def test_a_size_past_half_the_memory_available_is_refused_with_the_size_the_estimate_and_the_memory():
    from emu.front.memory import check_memory

    topo = build("star:n=8")
    extra = {"size": "64MiB"}
    check_memory(["allreduce"], topo, extra, available_bytes=4 << 30)  # 0.9 GiB of 2 GiB: taken
    with pytest.raises(ConfigError) as e:
        check_memory(["pingall", "allreduce"], topo, extra, available_bytes=1 << 30)
    assert str(e.value).startswith("--size 64MiB (67,108,864 B per rank): allreduce (rabenseifner) on 8 ranks needs "
                                   "about 921.9 MiB of memory (1.8 x the size per host, measured, and 351.6 KiB for "
                                   "the topology), over half of the 1.0 GiB this machine has available")


def test_emu_run_refuses_the_size_before_any_cluster_starts(monkeypatch, capsys):
    import emu.topologies.estimate as estimate
    from emu.front import cluster

    async def never(self):
        raise AssertionError("a cluster started")

    monkeypatch.setattr(estimate, "_available_bytes", lambda: 1 << 30)
    monkeypatch.setattr(cluster.Cluster, "__aenter__", never)
    out = _refused(["run", "--topo", "star:n=8", "--test", "allreduce", "--size", "64MiB"], capsys)
    assert "--size 64MiB" in out and "about 921.9 MiB" in out and "the 1.0 GiB this machine has available" in out
    monkeypatch.setattr(estimate, "_available_bytes", lambda: None)  # unknown: no refusal
    with pytest.raises(AssertionError, match="a cluster started"):
        main(["run", "--topo", "star:n=8", "--test", "allreduce", "--size", "64MiB"])
