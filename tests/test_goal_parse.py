"""GOAL schedules (LogGOPSim's text grammar): whole, truncated and random inputs; refusals in one
line naming the file, the line and the fix; the LogGP model against LogGOPSim's published example."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from emu.config import ConfigError
from emu.nodes.workload.goal import ANY, CALC, RECV, SEND, GoalError, check_matching, iter_ranks, read_schedule
from emu.nodes.workload.goal_write import dissemination_barrier, random_schedule
from emu.nodes.workload.loggp import LogGP, simulate


def parse(text: str, path: str = "s.goal"):
    return read_schedule(text.splitlines(True), path)


EXAMPLE = """// a comment
num_ranks 3
rank 0 {
l1: send 8b to 1 tag 5 cpu 0 nic 0
l2: calc 100
l2 requires l1   /* a block
comment */
recv 4b from -1 tag -1
}
rank 1 {
a: recv 8b from 0 tag 5
b: send 4b to 0
b irequires a
}
rank 2 {
}
"""


def test_whole_schedule_every_field():
    s = parse(EXAMPLE)
    assert s.num_ranks == 3 and s.ops == 5
    r0, r1, r2 = s.ranks
    assert r0.kind == [SEND, CALC, RECV] and r0.size == [8, 100, 4] and r0.peer == [1, 0, ANY]
    assert r0.tag == [5, 0, ANY] and r0.labels == ["l1", "l2", None] and r0.line == [4, 5, 8]
    assert r0.after_done == {0: [1]} and r0.needs == [0, 1, 0]
    assert r1.after_start == {0: [1]} and r1.after_done == {} and r1.needs == [0, 1]
    assert len(r2) == 0
    check_matching(s)


def test_ranks_come_one_block_at_a_time():
    """The reader hands each rank block on as soon as it is closed (what it keeps is compiled)."""
    lines = iter(EXAMPLE.splitlines(True))
    it = iter_ranks(lines, "s.goal")
    assert next(it) == 3
    first = next(it)
    assert first.rank == 0
    assert next(lines).startswith("rank 1")  # the reader had not read past rank 0's block


@pytest.mark.parametrize("text, where, words", [
    ("num_ranks 2\nrank 0 {\nl1: send 8 to 1\n}\n", "s.goal:3:", "'b' expected"),
    ("num_ranks 2\nrank 0 {\nl1: send 8b 1\n}\n", "s.goal:3:", "'to' expected"),
    ("num_ranks 2\nrank 0 {\nl1: send 8b to 2\n}\n", "s.goal:3:", "out of range 0..1"),
    ("num_ranks 2\nrank 0 {\nl1: send 8b to -1\n}\n", "s.goal:3:", "the rank expected"),
    ("num_ranks 2\nrank 0 {\nl1: jump 8\n}\n", "s.goal:3:", "'jump' is not an operation"),
    ("num_ranks 2\nrank 0 {\nl1: calc 5\nl1 requires l9\n}\n", "s.goal:4:", "label 'l9' names no operation"),
    ("num_ranks 2\nrank 0 {\nl1: calc 5\nl1: calc 6\n}\n", "s.goal:4:", "defined twice"),
    ("num_ranks 2\nrank 0 {\nl1: calc 5 nic 1\n}\n", "s.goal:3:", "only 'cpu <c>'"),
    ("num_ranks 2\nrank 0 {\nl1: send 8b to 1 nic 1 tag 3\n}\n", "s.goal:3:", "in that order"),
    ("num_ranks 1\nrank 0 {\nl1: calc 5\n", "s.goal:4:", "ends inside the block of rank 0"),
    ("rank 0 {\n}\n", "s.goal:1:", "before num_ranks"),
    ("num_ranks 2\nrank 0 {\n}\n", "s.goal:", "rank 1 of num_ranks 2 has no block"),
    ("num_ranks 2\nrank 0 {\n}\nrank 0 {\n}\n", "s.goal:4:", "second block"),
    ("num_ranks 1\nrank 0 {\na: send 1b to 0 tag 2147483648\n}\n", "s.goal:3:", "out of range"),
])
def test_refusals_name_file_line_and_fix(text, where, words):
    with pytest.raises(GoalError) as e:
        parse(text)
    msg = str(e.value)
    assert msg.startswith(where) and words in msg and "; " in msg and "\n" not in msg


def test_cycle_and_unmatchable_receive_refused_before_a_run():
    with pytest.raises(GoalError, match=r"rank 0: a dependency cycle: a \(line 3\), b \(line 4\)"):
        parse("num_ranks 1\nrank 0 {\na: calc 1\nb: calc 2\na requires b\nb requires a\n}\n")
    s = parse("num_ranks 2\nrank 0 {\nsend 8b to 1 tag 1\n}\nrank 1 {\nr: recv 8b from 0 tag 2\n}\n")
    with pytest.raises(GoalError, match=r"s.goal:6: rank 1's r: recv 8b from 0 tag 2 can match no send"):
        check_matching(s)
    s = parse("num_ranks 2\nrank 0 {\n}\nrank 1 {\nr: recv 8b from -1 tag -1\n}\n")
    with pytest.raises(GoalError, match="rank 1 posts 1 receives but 0 messages are sent to it"):
        check_matching(s)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 8), st.integers(1, 6))
def test_random_schedules_parse_whole(seed, ranks, rounds):
    text = random_schedule(seed, ranks=ranks, rounds=rounds)
    s = parse(text)
    body = [ln for ln in text.splitlines() if ":" in ln]
    assert s.ops == len(body) and s.num_ranks == ranks
    check_matching(s)  # every receive has its send


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 500), st.data())
def test_truncated_schedules_parse_or_refuse_in_one_line(seed, data):
    text = random_schedule(seed, ranks=4, rounds=3)
    cut = data.draw(st.integers(0, len(text) - 1))
    try:
        s = parse(text[:cut])
    except GoalError as e:
        assert str(e).startswith("s.goal") and "\n" not in str(e)
    else:  # a cut that leaves whole blocks of every rank (only after the last '}')
        assert s.num_ranks == 4


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("num_ranks rank{}:sendrecvcalcfromtotag-1 0123456789b\n/*lx")), max_size=200))
def test_random_text_never_raises_anything_else(text):
    try:
        parse("num_ranks 2\n" + text)
    except GoalError as e:
        assert "\n" not in str(e)


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=120))
def test_random_bytes_decoded_never_raise_anything_else(raw):
    try:
        parse(raw.decode("latin-1"))
    except GoalError:
        pass


def test_goal_error_is_a_refusal():
    assert issubclass(GoalError, ConfigError)  # the CLI prints it as 'refused:' in one line, exit 2


def test_loggopsim_published_example_dissemination_barrier():
    """LogGOPSim's example: a 16-rank dissemination barrier, L=2500, o=1500, g=1000, G=6 ends at
    22,000 ns on every rank (its defaults; 4 rounds of o + L + o)."""
    s = parse(dissemination_barrier(16))
    assert simulate(s, LogGP(L=2500, o=1500, g=1000, G=6)) == [22_000] * 16


def test_loggp_closed_forms():
    """Ping-pong of k round trips of s bytes: 2k (2o + L + (s-1)G); a gap g > o spaces one rank's sends."""
    k, s_b = 3, 1001
    lines = ["num_ranks 2", "rank 0 {"]
    for i in range(k):
        lines += [f"s{i}: send {s_b}b to 1", f"r{i}: recv {s_b}b from 1"] + ([f"s{i} requires r{i - 1}"] if i else []) \
            + [f"r{i} requires s{i}"]
    lines += ["}", "rank 1 {"]
    for i in range(k):
        lines += [f"r{i}: recv {s_b}b from 0", f"s{i}: send {s_b}b to 0", f"s{i} requires r{i}"] \
            + ([f"r{i} requires s{i - 1}"] if i else [])
    lines += ["}"]
    p = LogGP(L=700, o=100, g=0, G=2, S=10**6)
    ends = simulate(parse("\n".join(lines) + "\n"), p)
    assert ends[0] == 2 * k * (2 * p.o + p.L + (s_b - 1) * p.G)
    # three sends in a row with g > o: the third leaves at 2g; it arrives o + L later, taken in o + (s-1)G
    text = "num_ranks 2\nrank 0 {\nsend 1b to 1\nsend 1b to 1\nsend 1b to 1\n}\nrank 1 {\nrecv 1b from 0\nrecv 1b from 0\nrecv 1b from 0\n}\n"
    p = LogGP(L=1000, o=10, g=500, G=0)
    assert simulate(parse(text), p) == [2 * 500 + 10, 2 * 500 + 10 + 1000 + 10]


def test_loggp_names_what_never_completes():
    from emu.nodes.workload.loggp import Stuck

    text = "num_ranks 2\nrank 0 {\na: send 100b to 1 tag 1\nb: calc 5\nb requires a\n}\nrank 1 {\nr: recv 100b from 0 tag 2\n}\n"
    with pytest.raises(Stuck, match=r"1 operation never completes: rank 1 in r: recv 100b from 0 tag 2 \(line 8\)"):
        simulate(parse(text), LogGP())
    with pytest.raises(Stuck, match=r"3 operations never complete: rank 0 in a: send 100b to 1 tag 1 \(line 3\); rank 0 in b"):
        simulate(parse(text), LogGP(S=10))  # rendezvous: the send waits for a receive, b for the send
