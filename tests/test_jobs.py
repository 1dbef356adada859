"""Several jobs on one fabric (``emu run --job``), their placement, their classes, and ``--test gpcnet``."""

import json

import pytest

from emu.config import ConfigError
from emu.front.cli import main
from emu.nodes.workload.placement import parse_hosts, pick, place

HOSTS = [f"h{i}" for i in range(16)]


def hosts(text, read=None):
    return parse_hosts("j", text, HOSTS, read).hosts


def test_host_lists_and_ranges():
    assert hosts("h3") == ("h3",)
    assert hosts("h0+h5+2") == ("h0", "h5", "h2")  # names and indices (address order)
    assert hosts("[h1,h4-h6]") == ("h1", "h4", "h5", "h6")
    assert hosts("0-3+h8") == ("h0", "h1", "h2", "h3", "h8")
    assert hosts("file:x", lambda p: "h9  # a comment\nh10,h11\n") == ("h9", "h10", "h11")
    r = parse_hosts("j", "random:4", HOSTS)
    assert (r.policy, r.count, r.hosts) == ("random", 4, ())


@pytest.mark.parametrize("text, message", [
    ("h7-h2", "runs backwards"), ("h0+h0", "lists h0 twice"), ("h16", "not a host of this topology"),
    ("16", "host index 16 is out of range"), ("scattered:4", "unknown placement 'scattered'"),
    ("packed:0", "packed:N takes a whole number of hosts N >= 1"), ("packed:x", "whole number"), ("", "is empty"),
])
def test_bad_host_specs_are_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        hosts(text)


def test_placement_policies():
    free = HOSTS[:8]
    assert pick("packed", 3, free, 0, "a") == ("h0", "h1", "h2")
    assert pick("interleaved", 4, free, 0, "a") == ("h0", "h2", "h4", "h6")
    r = pick("random", 4, free, 7, "a")
    assert r == pick("random", 4, free, 7, "a") and len(set(r)) == 4 and set(r) <= set(free)
    assert r != pick("random", 4, free, 8, "a")  # the run's seed draws them
    req = lambda job, t: (job, parse_hosts(job, t, HOSTS))  # noqa: E731
    # explicit hosts first, then the policies in order from what is left
    got = place([req("a", "packed:4"), req("b", "h0-h1"), req("c", "interleaved:5")], HOSTS, 0)
    assert got == {"a": ("h2", "h3", "h4", "h5"), "b": ("h0", "h1"),
                   "c": ("h6", "h8", "h10", "h12", "h14")}
    with pytest.raises(ConfigError, match="--job b and --job a both take h3"):
        place([req("a", "h0-h3"), req("b", "h3+h4")], HOSTS, 0)
    with pytest.raises(ConfigError, match="the jobs ask for 18 hosts and the topology has 16"):
        place([req("a", "packed:10"), req("b", "random:8")], HOSTS, 0)


def _run(argv, tmp_path, name="r.json"):
    out = tmp_path / name
    assert main(["run", *argv, "--json", str(out)]) == 0
    return {r["job"]: r for r in json.loads(out.read_text())["results"]}


def test_disjoint_jobs_on_a_non_blocking_tree_do_not_slow_each_other(tmp_path):
    """Whole leaves each: no link carries both jobs' frames, so each takes exactly its time alone."""
    rows = _run(["--topo", "twolevel:ports=4,hosts=16", "--job", "a:hosts=h0-h7,test=allreduce,size=16KiB",
                 "--job", "b:hosts=packed:8,test=alltoall,size=4KiB"], tmp_path)
    assert rows["b"]["host_list"] == "h8,h9,h10,h11,h12,h13,h14,h15"
    for r in rows.values():
        assert r["ok"] and r["slowdown"] == 1.0 and r["completion_ns"] == r["isolated_ns"] > 0


def test_jobs_on_an_oversubscribed_tree_slow_each_other_the_same_over_processes(tmp_path):
    """2:1 (2 spines for 4-host leaves), jobs drawn at random: they share up links; --processes 2
    gives the same figures."""
    argv = ["--topo", "twolevel:ports=4,hosts=16,spines=2", "--job", "a:hosts=random:8,test=allreduce,size=16KiB",
            "--job", "b:hosts=random:8,test=alltoall,size=4KiB"]
    one = _run(argv, tmp_path)
    two = _run([*argv, "--processes", "2"], tmp_path, "two.json")
    assert one["a"]["host_list"] == "h2,h4,h8,h11,h12,h13,h14,h15"
    assert (one["a"]["completion_ns"], one["a"]["isolated_ns"]) == (17166, 17102)
    assert (one["b"]["completion_ns"], one["b"]["isolated_ns"]) == (13794, 13708)
    assert one["a"]["slowdown"] > 1 and one["b"]["slowdown"] > 1
    for job in "ab":
        for k in ("completion_ns", "isolated_ns", "slowdown", "host_list", "frames"):
            assert one[job][k] == two[job][k]


def test_a_higher_class_protects_a_job_under_strict_priority(tmp_path):
    """One spine for two 4-host leaves; a 6-rank alltoall of 32 KiB queues frames at the leaves' up
    links while a 2-rank allreduce of 1 KiB (h3, h7) crosses them 6 us in. Class 0: its frames wait
    behind the queue (2,188 ns late, x2.12); class 1: they overtake it and wait only for the frames
    already on a line (38 ns late) -- the bulk job pays those few frames (86 ns) either way."""
    base = ["--topo", "twolevel:ports=4,hosts=8,spines=1", "--job", "bulk:hosts=h0-h2+h4-h6,test=alltoall,size=32KiB"]
    low = _run([*base, "--job", "small:hosts=h3+h7,test=allreduce,size=1KiB,start=6us"], tmp_path)
    high = _run([*base, "--job", "small:hosts=h3+h7,test=allreduce,size=1KiB,start=6us,class=1"], tmp_path, "h.json")
    assert low["small"]["isolated_ns"] == high["small"]["isolated_ns"] == 1950
    assert (low["small"]["completion_ns"], low["small"]["slowdown"]) == (4138, 2.1221)
    assert (high["small"]["completion_ns"], high["small"]["slowdown"]) == (1988, 1.0195)
    assert low["small"]["job_start_ns"] == 6000 and high["small"]["class"] == 1
    assert low["bulk"]["completion_ns"] == high["bulk"]["completion_ns"] == 30342
    two = _run([*base, "--job", "small:hosts=h3+h7,test=allreduce,size=1KiB,start=6us,class=1", "--processes", "2"],
               tmp_path, "two.json")
    assert two["small"]["completion_ns"] == 1988  # the class travels with the hosts' spec to the worker processes


def test_jobs_from_a_config_file_and_no_isolated(tmp_path):
    cfg = tmp_path / "jobs.toml"
    cfg.write_text('[link]\nlatency_ns = 100\n\n[[job]]\nname = "x"\nhosts = ["h0", "h1"]\ntest = "pingall"\n\n'
                   '[[job]]\nname = "y"\nhosts = "packed:2"\ntest = "allreduce"\nsize = "2KiB"\n')
    rows = _run(["--topo", "star:n=4", "--config", str(cfg), "--no-isolated"], tmp_path)
    assert rows["x"]["name"] == "x:pingall" and rows["y"]["host_list"] == "h2,h3"
    assert "slowdown" not in rows["x"] and rows["y"]["size_bytes"] == 2048


@pytest.mark.parametrize("argv, message", [
    (["--job", "a:hosts=h0-h2", "--job", "b:hosts=h2+h3"], "--job b and --job a both take h2"),
    (["--job", "a:hosts=packed:5"], "the jobs ask for 5 hosts and the topology has 4"),
    (["--job", "a:hosts=spread:2"], "unknown placement 'spread'"),
    (["--job", "a:hosts=h0+h1,test=allreduce", "--test", "allreduce"], "give each job's test and its options inside it"),
    (["--job", "a:hosts=h0+h1,class=2"], "--job a: class=2 is prio 2, and with no class queues"),
    (["--job", "a:hosts=h0+h1,class=8"], "--job a: class=8: the traffic classes are 0..7"),
    (["--job", "a:hosts=h0+h1,class=1", "--set", "queues.class_map=0+4"], "--job a: class=1 is prio 4"),
    (["--job", "a:hosts=h0+h1,colour=red"], "--job a: unknown key 'colour'"),
    (["--job", "a:hosts=h0+h1,test=pingall,size=1KiB"], "--job a: --size apply to collective tests only"),
    (["--job", "a:hosts=h0+h1", "--job", "a:hosts=h2"], "--job a is given twice"),
    (["--no-isolated"], "--no-isolated applies to runs of --job only"),
    (["--test", "gpcnet"], "gpcnet needs at least 2 victim hosts and 8 congestor hosts"),
])
def test_bad_jobs_are_refused_in_one_line_before_anything_starts(argv, message, capsys):
    assert main(["run", "--topo", "star:n=4", *argv]) == 2
    err = capsys.readouterr()
    text = err.out + err.err
    assert message in text and "Traceback" not in text, text


def test_gpcnet_prints_its_table(tmp_path, capsys):
    """GPCNeT's layout: 80 columns, the three victims isolated and congested, the impact factors."""
    out = tmp_path / "g.json"
    assert main(["run", "--topo", "twolevel:ports=4,hosts=16,spines=2", "--test", "gpcnet", "--gpcnet",
                 "bw_size=8KiB,lat_iters=4,ar_iters=4,bw_iters=1,rings=1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    [r] = json.loads(out.read_text())["results"]
    assert (r["victims"], r["congestors"]) == (4, 12)  # floor(0.8 * 16) congest, as GPCNeT
    table = r["gpcnet_table"].splitlines()
    assert table[0] == "NetworkLoad Tests v1.3" and "Key Results" in r["gpcnet_table"]
    bars = [ln for ln in table if ln.startswith(("|", "+"))]
    assert bars and all(len(ln) == 80 for ln in bars)
    assert "|   RR Two-sided BW+Sync (8192 B) |" in r["gpcnet_table"] and "Congestion Impact Factor" in text
    for row in r["rows"]:
        lat = row["units"] == "usec"
        a, b = round(row["isolated_avg"], 1), round(row["congested_avg"], 1)
        assert row["impact_avg"] == round(b / a if lat else a / b, 1)
        assert all(int(n) >= 1 for n in row["congestor_iterations"].split("/"))


def test_a_goal_schedule_as_a_job_takes_alone_what_emu_replay_takes(tmp_path):
    """A ping-pong of 64 KiB in GOAL's text beside an alltoall on the same two leaves: alone it ends when
    ``emu replay`` says; beside the alltoall the shared links slow both."""
    from emu.front.replay_goal import read_goal, run_schedule
    from emu.topologies import build

    goal = tmp_path / "pp.goal"
    goal.write_text("num_ranks 2\nrank 0 {\nl1: send 65536b to 1 tag 0\nl2: recv 8b from 1 tag 1\nl2 requires l1\n}\n"
                    "rank 1 {\nl1: recv 65536b from 0 tag 0\nl2: send 8b to 0 tag 1\nl2 requires l1\n}\n")
    topo = "twolevel:ports=2,hosts=4,spines=1"
    rows = _run(["--topo", topo, "--job", f"g:hosts=h0+h2,goal={goal}", "--job", "b:hosts=h1+h3,test=alltoall,size=64KiB"],
                tmp_path)
    schedule, _ = read_goal(str(goal))
    alone, _m = run_schedule(build(topo), schedule, ["h0", "h2"])
    assert rows["g"]["name"] == "g:goal" and rows["g"]["isolated_ns"] == max(r["end_ns"] for r in alone) == 11240
    assert rows["g"]["completion_ns"] == 13996 and rows["b"]["slowdown"] > 1
    assert main(["run", "--topo", topo, "--job", f"g:hosts=h0-h2,goal={goal}"]) == 2  # 3 hosts, 2 ranks


def test_an_open_loop_traffic_job_sends_among_its_own_hosts(tmp_path):
    """uniform on 8 of 16 hosts, two loads (load=0.3+0.5): every packet stays within the job; its hosts
    alone send without the host's send overhead, as emu run --test uniform sets it."""
    rows = _run(["--topo", "twolevel:ports=4,hosts=16,spines=2", "--job", "a:hosts=random:8,test=allreduce",
                 "--job", "b:hosts=random:8,test=uniform,load=0.3+0.5,warmup=100,measure=100"], tmp_path)
    b = rows["b"]
    assert b["ok"] and b["sources"] == 8 and [r["offered"] for r in b["curve"]] == [0.3, 0.5]
    assert rows["a"]["isolated_ns"] == 5850  # the allreduce's hosts keep their 300 ns send overhead


def test_an_mpi4py_program_as_a_job_takes_alone_what_emu_mpirun_takes(tmp_path, capfd):
    """tests/mpi/pingpong.py (64 KiB, 2 round trips) on h0, h2 beside an alltoall on h1, h3: alone its
    virtual time is emu mpirun's for the same hosts (40,830 ns; the program prints 39,464 for its
    loop), beside the alltoall it is slower."""
    import pathlib

    prog = pathlib.Path(__file__).parent / "mpi" / "pingpong.py"
    rows = _run(["--topo", "twolevel:ports=2,hosts=4,spines=1", "--job", f"m:hosts=h0+h2,mpirun=[{prog},65536,2]",
                 "--job", "b:hosts=h1+h3,test=alltoall,size=64KiB"], tmp_path)
    m = rows["m"]
    assert (m["name"], m["isolated_ns"], m["mpi_calls"]) == ("m:mpirun", 40830, 10)
    assert m["completion_ns"] > m["isolated_ns"] and rows["b"]["slowdown"] > 1
    assert "[0] 39464" in capfd.readouterr().out  # the alone run's own figure, as emu mpirun prints it
