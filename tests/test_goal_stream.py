"""GOAL schedules streamed: each rank reads its own block as the run consumes it. Figures equal to
those of the whole schedule read first (end times, races, frames, the critical path) wherever the
window held nothing back; what it holds is bounded; what it cannot do is refused in one line."""

from __future__ import annotations

import pytest

from emu.config import ConfigError, RunConfig
from emu.front.replay_chakra import PathView
from emu.front.replay_goal import read_goal, run_schedule
from emu.front.replay_path import critical_path
from emu.front.replay_stream import run_streamed, scan_goal
from emu.nodes.workload.goal_stream import GoalFeed
from emu.nodes.workload.goal_write import dissemination_barrier, random_schedule
from emu.topologies.registry import build

IRQ = """num_ranks 3
rank 0 {
a: calc 700 cpu 1
b: send 20000b to 1 tag 4
c: calc 300
b irequires a
c requires b
d: send 10b to 2
}
rank 1 {
x: recv 20000b from -1 tag -1
y: calc 50
y requires x
z: send 10b to 2 tag 9
z irequires y
}
rank 2 {
r1: recv 10b from -1 tag 9
r2: recv 10b from 0
}
"""


def both(path, window=1024, topo="star:n=8", **settings):
    whole, _ = read_goal(str(path))
    index = scan_goal(str(path))
    assert index is not None and index.ops == whole.ops and index.num_ranks == whole.num_ranks
    t = build(topo, settings=settings)
    hosts = t.host_names()[:whole.num_ranks]
    a, ma = run_schedule(t, whole, hosts, RunConfig(direct=True))
    b, mb = run_streamed(build(topo, settings=settings), index, hosts, RunConfig(direct=True), window=window)
    return whole, a, ma, b, mb


def same(whole, a, ma, b, mb) -> None:
    assert [r["end_ns"] for r in a] == [r["end_ns"] for r in b]
    assert [r["races"] for r in a] == [r["races"] for r in b]
    assert [r["kinds"] for r in a] == [r["kinds"] for r in b]
    assert (ma.frames, ma.bytes) == (mb.frames, mb.bytes)
    assert critical_path(whole, a) == critical_path(PathView(b, goal=True), b)


@pytest.mark.parametrize("seed", range(12))
def test_streamed_equals_whole_on_random_schedules(tmp_path, seed):
    p = tmp_path / "s.goal"
    p.write_text(random_schedule(seed, ranks=2 + seed % 6, rounds=2 + seed % 4, max_size=40_000))
    whole, a, ma, b, mb = both(p)
    assert sum(r["window_delays"] for r in b) == 0
    same(whole, a, ma, b, mb)


def test_irequires_cpu_streams_wildcards_and_rendezvous(tmp_path):
    p = tmp_path / "i.goal"
    p.write_text(IRQ)
    same(*both(p))


def test_a_small_window_equals_the_whole_where_it_held_nothing_back_and_says_so_otherwise(tmp_path):
    """The dissemination barrier (a chain per rank) through a window of 8 operations: nothing held
    back, the same figures. Independent receives through a window of 4: held back, and counted."""
    p = tmp_path / "b.goal"
    p.write_text(dissemination_barrier(16))
    whole, a, ma, b, mb = both(p, window=8, topo="star:n=16")
    assert sum(r["window_delays"] for r in b) == 0
    same(whole, a, ma, b, mb)
    q = tmp_path / "r.goal"
    q.write_text("num_ranks 2\nrank 0 {\n" + "".join(f"s{k}: send 8b to 1 tag {k}\n" for k in range(12)) + "}\n"
                 "rank 1 {\n" + "".join(f"r{k}: recv 8b from 0 tag {k}\n" for k in range(12)) + "}\n")
    *_, b, _ = both(q, window=4)
    assert sum(r["window_delays"] for r in b) > 0 and b[0]["first_delay"].startswith("rank ")


def test_a_rank_holds_at_most_window_operations(tmp_path):
    p = tmp_path / "c.goal"
    n = 2000
    p.write_text("num_ranks 1\nrank 0 {\n" + "".join(f"c{k}: calc 1\n" + (f"c{k} requires c{k - 1}\n" if k else "")
                                                   for k in range(n)) + "}\n")
    index = scan_goal(str(p))
    with open(p, "rb") as f:
        f.seek(index.blocks[0][0])
        feed = GoalFeed(f, str(p), 0, 1, index.blocks[0][1], 32)
        most, taken = 0, []
        while True:
            taken += [i for i, _, nd, _, _ in feed.more(0) if nd == 0]
            most = max(most, feed.in_flight)
            if not taken:
                break
            taken += [j for j in feed.finished(taken.pop(), 0)]
    assert (most, feed.count, len(feed.cur.kind.d), len(feed.labels) <= 4 * 32) == (32, n, 0, True)


def test_a_dependency_line_too_far_from_its_operation_is_refused_in_one_line(tmp_path):
    p = tmp_path / "far.goal"
    p.write_text("num_ranks 1\nrank 0 {\nfirst: calc 5\n" + "".join(f"c{k}: calc 1\n" for k in range(40))
                 + "first requires c39\n}\n")
    whole, _ = read_goal(str(p))
    t = build("star:n=2")
    with pytest.raises(ConfigError, match=r"far.goal:44: 'first requires c39' comes more than 4 operations after "
                                          r"first, .* raise --window"):
        run_streamed(t, scan_goal(str(p)), t.host_names()[:1], RunConfig(direct=True), window=16)
    _, a, ma, b, mb = both(p, window=256)  # a window large enough: the same as whole
    same(whole, a, ma, b, mb)


def test_blocks_sharing_a_line_are_read_whole(tmp_path):
    p = tmp_path / "j.goal"
    p.write_text("num_ranks 2\nrank 0 { \nx: send 8b to 1\n} rank 1 {\ny: recv 8b from 0\n}\n")
    assert scan_goal(str(p)) is None


def test_the_command_streams_with_the_same_figures(tmp_path):
    """``emu replay --read stream`` writes the row ``--read whole`` writes, but for the wall clock and
    the window's own fields."""
    from emu.front.cli_parser import _parser
    from emu.front.replay_goal import replay

    p = tmp_path / "s.goal"
    p.write_text(random_schedule(3, ranks=5, rounds=4, max_size=30_000))
    rows = []
    for how in ("whole", "stream"):
        a = _parser().parse_args(["replay", str(p), "--topo", "star:n=8", "--direct", "--read", how, "--json", "-"])
        a.argv = []
        row = replay(a)[0]["results"][0]
        for k in ("wall_s", "ops_per_wall_s", "window", "window_delays", "first_delay"):
            row.pop(k, None)
        rows.append(row)
    assert rows[0] == rows[1] and rows[0]["critical_path"]["steps"]
    with pytest.raises(ConfigError, match="--model loggp takes the whole schedule"):
        replay(_parser().parse_args(["replay", str(p), "--topo", "star:n=8", "--read", "stream", "--model", "loggp"]))
