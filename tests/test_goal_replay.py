"""``emu replay FILE.goal``: GOAL schedules replayed by the hosts. MPI matching on crafted schedules,
exact virtual times against LogGP (the configuration of docs/replay.md under which the emulator
is LogGP), the eager/rendezvous frames of emu mpirun, the same figures in memory and on sockets,
and what the command writes."""

from __future__ import annotations

import json

import pytest

from emu.config import ConfigError, RunConfig
from emu.errors import DeadlockError
from emu.front.cli_parser import _parser
from emu.front.replay_goal import replay, run_schedule
from emu.front.replay_path import loggp_of
from emu.nodes.workload.goal import read_schedule
from emu.nodes.workload.goal_write import dissemination_barrier, random_schedule
from emu.nodes.workload.loggp import LogGP, simulate
from emu.topologies.registry import build

LOGGP = {"host": {"send_overhead_ns": 1500, "recv_overhead_ns": 1500, "nic_delay_ns": 0, "eager_limit_bytes": 16000,
                  "mtu_bytes": 16000},
         "switch": {"processing_delay_ns": 0}, "link": {"latency_ns": 1249, "bandwidth_bps": 10**16}}
"""docs/replay.md: the star under which a replay is LogGP with L=2500, o=1500, g=0, G=0 for
messages of one frame (each frame 1 ns on each of the two links, counted in L), eager up to 16000 B."""
SETS = [f"{sec}.{k}={v}" for sec, d in LOGGP.items() for k, v in d.items()]


def run(text: str, topo: str = "star:n=8", settings: dict | None = None, run_config: RunConfig | None = None):
    s = read_schedule(text.splitlines(True), "t.goal")
    t = build(topo, settings=settings or {})
    hosts = t.host_names()[:s.num_ranks]
    results, metrics = run_schedule(t, s, hosts, run_config or RunConfig(direct=True))
    return s, t, hosts, results, metrics


def test_loggopsim_example_reproduced_by_the_emulator():
    """The 16-rank dissemination barrier ends at 22,000 ns on every rank, measured on the fabric,
    as LogGOPSim computes it with L=2500, o=1500 (g=1000 and G=6 play no part: 1-byte messages
    5,500 ns apart)."""
    s, t, hosts, res, _ = run(dissemination_barrier(16), "star:n=16", LOGGP)
    assert [r["end_ns"] for r in res] == [22_000] * 16
    p, _ = loggp_of(t, hosts)
    assert (p.L, p.o, p.g, p.S) == (2500, 1500, 0, 16000)
    assert simulate(s, LogGP(L=2500, o=1500, g=1000, G=6)) == [22_000] * 16


def test_random_schedules_equal_loggp_exactly_where_no_race():
    """Rounds of messages of 1..15,000 bytes between random pairs (wildcards too), calcs between
    them: where no rank's CPU had to choose between a ready operation and a waiting message (``races``,
    which LogGOPSim orders by when its events were made), each rank's end time on the fabric equals
    the LogGP model's with the parameters taken from the topology (docs/replay.md)."""
    clean = 0
    for seed in range(24):
        text = random_schedule(seed, ranks=2 + seed % 6, rounds=1 + seed % 5, max_size=15_000)
        s, t, hosts, res, _ = run(text, "star:n=8", LOGGP)
        if sum(r["races"] for r in res):
            continue
        clean += 1
        p, _ = loggp_of(t, hosts)
        assert [r["end_ns"] for r in res] == simulate(s, LogGP(L=p.L, o=p.o, g=0, G=0, S=p.S)), seed
    assert clean >= 4


def test_ping_pong_closed_form_with_default_settings():
    """With the default settings a ping-pong of k round trips of s bytes takes
    2k (o_s + 2 nic_delay + 2 (latency + ser(frame)) + switch delay + o_r): frame = s + 67 bytes."""
    k, size = 3, 500
    lines = ["num_ranks 2", "rank 0 {"]
    for i in range(k):
        lines += [f"s{i}: send {size}b to 1", f"r{i}: recv {size}b from 1", f"r{i} requires s{i}"] + \
                 ([f"s{i} requires r{i - 1}"] if i else [])
    lines += ["}", "rank 1 {"]
    for i in range(k):
        lines += [f"r{i}: recv {size}b from 0", f"s{i}: send {size}b to 0", f"s{i} requires r{i}"]
    lines += ["}"]
    _, t, _, res, metrics = run("\n".join(lines) + "\n", "star:n=2")
    h = t.nodes["h0"].spec
    link = t.links[0].spec
    one_way = h.send_overhead_ns + 2 * h.nic_delay_ns + 2 * (link.latency_ns + link.serialization_ns(size + 67)) \
        + t.nodes["s0"].spec.processing_delay_ns + h.recv_overhead_ns
    assert res[0]["end_ns"] == 2 * k * one_way
    assert metrics.frames == 2 * k  # each message one frame


MATCH = """num_ranks 3
rank 0 {
a: send 10b to 2 tag 1
b: send 20b to 2 tag 2
c: send 30b to 2 tag 1
}
rank 1 {
w: calc 50000
d: send 40b to 2 tag 7
d requires w
}
rank 2 {
x: calc 20000
r1: recv 30b from 0 tag 2
r2: recv 30b from 0 tag -1
r3: recv 30b from -1 tag -1
r4: recv 30b from -1 tag 1
r1 requires x
r2 requires r1
r3 requires r2
r4 requires r3
}
"""


def test_mpi_matching_order_tags_and_wildcards():
    """Rank 2 posts its receives late (the messages wait unexpected): a receive for tag 2 takes the
    second message of rank 0, a wildcard tag then the first (the oldest of that source), any source
    and any tag the third (rank 0's, there before rank 1's), and a receive for tag 1 from anyone
    nothing more of rank 0: rank 1's message has tag 7 -- it waits for ever."""
    s, t, hosts, res, _ = None, None, None, None, None
    with pytest.raises(DeadlockError, match="h2 blocked in recv"):
        run(MATCH)
    fixed = MATCH.replace("r4: recv 30b from -1 tag 1", "r4: recv 30b from -1 tag 7")
    s, t, hosts, res, _ = run(fixed)
    m = {s.ranks[2].labels[i]: v for i, v in res[2]["matched"].items()}
    assert m == {"r1": (0, 1), "r2": (0, 0), "r3": (0, 2), "r4": (1, 0)}
    assert res[2]["unmatched"] == 0


def test_non_overtaking_and_any_source_takes_the_first_to_arrive():
    """Any source matches the message that arrived first (rank 1's; rank 0 computes first); two
    messages of one sender with the same tag match in the order sent."""
    text = """num_ranks 3
rank 0 {
w: calc 30000
a: send 8b to 2 tag 3
b: send 8b to 2 tag 3
a requires w
b requires a
}
rank 1 {
c: send 8b to 2 tag 3
}
rank 2 {
r1: recv 8b from -1 tag 3
r2: recv 8b from 0 tag 3
r3: recv 8b from -1 tag -1
}
"""
    s, _, _, res, _ = run(text)
    m = {s.ranks[2].labels[i]: v for i, v in res[2]["matched"].items()}
    assert m == {"r1": (1, 0), "r2": (0, 0), "r3": (0, 1)}


def test_rendezvous_above_the_eager_limit_same_frames_as_mpirun():
    """A message over host.eager_limit_bytes goes as request-to-send, clear-to-send, data (three
    messages, emu mpirun's protocol): one round trip more than an eager one."""
    text = "num_ranks 2\nrank 0 {\nsend {n}b to 1 tag 4\n}\nrank 1 {\nrecv {n}b from 0 tag 4\n}\n"
    eager = {"host": {"eager_limit_bytes": 1000, "mtu_bytes": 4000}}
    *_, res_e, m_e = run(text.replace("{n}", "1000"), "star:n=2", eager)
    *_, res_r, m_r = run(text.replace("{n}", "1001"), "star:n=2", eager)
    assert m_e.frames == 1 and m_r.frames == 3
    t = build("star:n=2", settings=eager)
    h, link, sw = t.nodes["h0"].spec, t.links[0].spec, t.nodes["s0"].spec.processing_delay_ns

    def way(body):  # one message's trip, overheads included
        return h.send_overhead_ns + 2 * h.nic_delay_ns + 2 * (link.latency_ns + link.serialization_ns(body + 67)) + sw \
            + h.recv_overhead_ns
    assert res_e[1]["end_ns"] == way(1000)
    assert res_r[1]["end_ns"] == way(8) + way(0) + way(1001)  # rts (its size: 8 bytes), cts, data
    assert res_r[0]["end_ns"] == way(8) + way(0) - h.recv_overhead_ns + h.recv_overhead_ns + h.send_overhead_ns


def test_cpu_streams_run_beside_each_other():
    text = "num_ranks 1\nrank 0 {\na: calc 1000\nb: calc 700 cpu 1\nc: calc 10\nc requires a\nc requires b\n}\n"
    _, _, _, res, _ = run(text, "star:n=2")
    assert res[0]["end_ns"] == 1010  # b on CPU 1 during a on CPU 0
    _, _, _, res, _ = run("num_ranks 1\nrank 0 {\nx: calc 100 cpu 2\n}\n", "star:n=2")  # nothing on CPU 0
    assert res[0]["end_ns"] == 100


def test_same_figures_in_memory_on_sockets_and_over_two_processes():
    text = random_schedule(7, ranks=8, rounds=4, max_size=40_000)  # (rendezvous and several frames too)
    figs = []
    for rc in (RunConfig(direct=True), RunConfig(direct=False), RunConfig(processes=2, direct=False)):
        _, _, _, res, m = run(text, "fattree:k=2,n=3", {}, rc)
        figs.append(([r["end_ns"] for r in res], [r["kinds"] for r in res], m.frames, m.bytes, m.end_ns - m.start_ns))
    assert figs[0] == figs[1] == figs[2]


def args_for(*argv):
    a = _parser().parse_args(["replay", *argv])
    a.argv = ["replay", *argv]
    return a


def test_cli_json_rows_name_the_file_and_its_sha256_and_emu_report_reads_them(tmp_path):
    import hashlib

    from emu.front.report import load_run

    g = tmp_path / "b.goal"
    g.write_text(dissemination_barrier(8))
    out, trace = tmp_path / "r.json", tmp_path / "t.json"
    doc, _ = replay(args_for(str(g), "--topo", "star:n=8", "--direct", "--model", "loggp", "--trace", str(trace)))
    row = doc["results"][0]
    assert row["sha256"] == hashlib.sha256(g.read_bytes()).hexdigest() and row["schedule"] == str(g)
    assert row["model"]["completion_ns"] == row["completion_ns"]  # a barrier on a star: no contention
    assert row["totals"]["send"]["count"] == 24 and len(row["per_rank"]) == 8
    assert row["critical_path"]["steps"][-1]["end_ns"] == row["completion_ns"]
    assert [st["kind"] for st in row["critical_path"]["steps"]] == ["send", "recv"] * 3
    out.write_text(json.dumps(doc))
    run_rec, rows = load_run(str(out))
    assert rows[0]["per_rank"][0]["calls"]["recv"]["count"] == 3 and run_rec["sha256"] == row["sha256"]
    events = json.loads(trace.read_text())["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X"]
    assert len(ops) == 48 and {e["name"] for e in ops} == {"send", "recv"}


def test_cli_refusals(tmp_path):
    g = tmp_path / "b.goal"
    g.write_text(dissemination_barrier(8))
    with pytest.raises(ConfigError, match="has 8 ranks but star:n=4 has 4 hosts"):
        replay(args_for(str(g), "--topo", "star:n=4"))
    with pytest.raises(ConfigError, match="no such file"):
        replay(args_for(str(tmp_path / "none.goal"), "--topo", "star:n=4"))
    bad = tmp_path / "bad.goal"
    bad.write_text("num_ranks 2\nrank 0 {\nsend 8b to 1\n")
    with pytest.raises(ConfigError, match=r"bad.goal:4: the file ends inside the block of rank 0"):
        replay(args_for(str(bad), "--topo", "star:n=4"))
    rndv = tmp_path / "r.goal"  # a rendezvous send no receive matches: named when the run stops
    rndv.write_text("num_ranks 2\nrank 0 {\nsend 90000b to 1 tag 1\n}\nrank 1 {\n}\n")
    with pytest.raises(DeadlockError, match=r"r.goal: the replay cannot go on \(1 operation never completes: rank 0 in "
                                            r"#0: send 90000b to 1 tag 1 \(line 3\)\): .* rank 0 \(h0\) blocked"):
        replay(args_for(str(rndv), "--topo", "star:n=2", "--direct"))


def test_emu_schedule_writes_the_collective_that_emu_run_runs(tmp_path, capsys):
    """``emu schedule allreduce --algo ring`` records the host-software algorithm: replayed, it
    moves the same messages as ``emu run`` runs (each 17 bytes longer: the MPI envelope) and ends
    no sooner."""
    from emu.front.cli import main

    g = tmp_path / "ar.goal"
    assert main(["schedule", "allreduce", "--algo", "ring", "--ranks", "4", "--size", "256", "-o", str(g)]) == 0
    s = read_schedule(g.read_text().splitlines(True), str(g))
    assert [len(r) for r in s.ranks] == [5 * 3] * 4  # 3 reduce-scatter steps (send, recv, calc), 3 allgather steps
    assert s.ranks[0].describe(0) == "l0: send 64b to 1" and s.ranks[0].describe(1) == "l1: recv 64b from 3"
    assert s.ranks[0].size[2] == 16  # a calc of 64 bytes at 250 ps/B
    doc, _ = replay(args_for(str(g), "--topo", "star:n=4", "--direct"))
    row = doc["results"][0]
    out = tmp_path / "run.json"
    assert main(["run", "--topo", "star:n=4", "--test", "allreduce", "--algo", "ring", "--size", "256", "--direct",
                 "--json", str(out)]) == 0
    ran = json.loads(out.read_text())["results"][0]
    assert row["frames"] == ran["frames"] == 24
    assert row["bytes"] - ran["bytes"] == 17 * 24
    assert row["completion_ns"] > ran["completion_ns"]
    assert main(["schedule", "allreduce", "--ranks", "4", "--offload", "nic"]) == 2
    assert "not expressible" in capsys.readouterr().out


def test_os_noise_stretches_calcs():
    """host.noise applies to a schedule's calcs: periodic detours of 100 ns every 1,000 ns, aligned,
    stretch a calc of 10,000 ns by the detours it meets (CPU work does not progress during one)."""
    text = "num_ranks 1\nrank 0 {\na: calc 10000\n}\n"
    _, _, _, res, _ = run(text, "star:n=2")
    assert res[0]["end_ns"] == 10_000
    noisy = {"host": {"noise": "periodic", "noise_interval_ns": 1000, "noise_duration_ns": 100, "noise_phase": "aligned"}}
    _, t, _, res, _ = run(text, "star:n=2", noisy)
    from emu.nodes.host.noise import Noise

    assert res[0]["end_ns"] == Noise(t.nodes["h0"].spec, 0, t.nodes["h0"].id).finish(0, 10_000) > 10_000


MPI_PROGRAM = """import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
if c.Get_rank() == 0:
    c.Send(np.zeros(100, np.uint8), dest=1, tag=5)
    c.Send(np.zeros(20000, np.uint8), dest=1, tag=6)
else:
    b = np.empty(100, np.uint8); c.Recv(b, source=0, tag=5)
    b = np.empty(20000, np.uint8); c.Recv(b, source=0, tag=6)
"""
SAME_GOAL = """num_ranks 2
rank 0 {
a: send 100b to 1 tag 5
b: send 20000b to 1 tag 6
b requires a
}
rank 1 {
c: recv 100b from 0 tag 5
d: recv 20000b from 0 tag 6
d requires c
}
"""


def test_same_sends_same_frames_as_an_mpi_program(tmp_path):
    """An eager and a rendezvous message: the schedule and the mpi4py program making the same sends
    put byte-identical frames on the wire, in the same order, and end at the same virtual time."""
    from scapy.utils import rdpcap

    from emu.front.mpirun import run_program

    mpi_cap, goal_cap, g = tmp_path / "mpi.pcapng", tmp_path / "goal.pcapng", tmp_path / "same.goal"
    res = run_program(MPI_PROGRAM, n=2, topo="star:n=2", pcap=str(mpi_cap))
    assert res.returncode == 0, res.stderr
    g.write_text(SAME_GOAL)
    doc, _ = replay(args_for(str(g), "--topo", "star:n=2", "--pcap", str(goal_cap)))
    row = doc["results"][0]
    assert row["completion_ns"] == res.figures["virtual_ns"] and row["frames"] == res.figures["frames"] == 23
    frames = [[bytes(p) for p in rdpcap(str(c))] for c in (mpi_cap, goal_cap)]
    assert len(frames[0]) == 92 and frames[0] == frames[1]
