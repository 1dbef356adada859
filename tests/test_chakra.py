"""``emu replay TRACE --format chakra``: Chakra execution traces (one .et file per rank). The
generated protobuf module against its schema, the framing, a trace's collectives against the same
collectives run by ``emu run`` (exact virtual time, frames, bytes; --algo and --offload), its
messages against the same GOAL schedule, process groups, the window that bounds what a rank holds,
and bad input refused in one line naming the file and the node."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from emu.config import ConfigError
from emu.front.cli import main
from emu.front.cli_parser import _parser
from emu.front.replay_goal import replay
from emu.nodes.workload import chakra_et_pb2 as pb
from emu.nodes.workload.chakra import WINDOW, ChakraError, Feed, check_file, iter_ops, read_metadata
from emu.nodes.workload.chakra_write import coll, comp, node_bytes, recv, send, write_rank, write_trace

HERE = os.path.join(os.path.dirname(__file__), "..", "nodes", "workload")
PROTO = os.path.join(HERE, "chakra_et.proto")


def args_for(*argv):
    a = _parser().parse_args(["replay", *argv])
    a.argv = ["replay", *argv]
    return a


def replayed(path, *argv):
    doc, _ = replay(args_for(str(path), *argv))
    return doc["results"][0]


def ran(tmp_path, *argv):
    out = tmp_path / "run.json"
    assert main(["run", "--direct", "--json", str(out), *argv]) == 0
    return json.loads(out.read_text())["results"][0]


# -- the schema and its generated module ---------------------------------------------------------------
def test_generated_module_has_every_field_and_value_of_the_proto():
    """Each message's fields (name, number, type, repeated) and each enum's values, read from the
    .proto text, are those of the committed module's descriptor, and nothing more."""
    text = re.sub(r"//[^\n]*", "", open(PROTO).read())
    fd = pb.DESCRIPTOR
    scalar = {"double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7, "bool": 8,
              "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16, "sint32": 17, "sint64": 18}
    messages = dict(re.findall(r"message (\w+) \{(.*?)\n?\}(?=\s*(?:message|enum|$))", text, re.S))
    assert set(messages) == set(fd.message_types_by_name)
    for name, body in messages.items():
        fields = re.findall(r"(repeated )?(\w+) (\w+) = (\d+);", body)
        d = fd.message_types_by_name[name]
        assert {f[2] for f in fields} == set(d.fields_by_name), name
        for rep, typ, fname, num in fields:
            f = d.fields_by_name[fname]
            assert f.number == int(num), (name, fname)
            assert f.is_repeated == bool(rep), (name, fname)
            if typ in scalar:
                assert f.type == scalar[typ], (name, fname)
            else:
                assert (f.message_type or f.enum_type).name == typ, (name, fname)
    enums = dict(re.findall(r"enum (\w+) \{(.*?)\}", text, re.S))
    assert set(enums) == set(fd.enum_types_by_name)
    for name, body in enums.items():
        values = {k: int(v) for k, v in re.findall(r"(\w+) = (\d+);", body)}
        assert values == {v.name: v.number for v in fd.enum_types_by_name[name].values}


def test_generated_module_is_what_protoc_makes_of_the_proto(tmp_path):
    """protoc (grpcio-tools 1.85.1, a test dependency pinned: its libprotoc 35.1 made the module)
    makes the committed module byte for byte."""
    pytest.importorskip("grpc_tools")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{HERE}", f"--python_out={tmp_path}", PROTO],
                   check=True)
    assert (tmp_path / "chakra_et_pb2.py").read_bytes() == open(os.path.join(HERE, "chakra_et_pb2.py"), "rb").read()


def test_nodes_read_back_as_written(tmp_path):
    """Framing (varint lengths, multi-byte ones too), attributes of each kind, deps of both lists."""
    p = tmp_path / "t.0.et"
    big = {"id": 7, "type": "comp", "name": "x" * 300, "duration_us": 3, "deps": [1], "data_deps": [2]}
    write_rank(str(p), [comp(1, 1), comp(2, 2), big, send(8, 1, 4096, tag=5, deps=[7]), recv(9, 1, 10, deps=[8]),
                        coll(10, "alltoall", 64, deps=[9])])
    with open(p, "rb") as f:
        assert read_metadata(f, str(p)).version == "0.0.4"
        ops = list(iter_ops(f, str(p), 0, 2, None))
    assert [(o.id, o.kind, o.size, o.deps) for o in ops] == [
        (1, 2, 1000, ()), (2, 2, 2000, ()), (7, 2, 3000, (1, 2)), (8, 0, 4096, (7,)), (9, 1, 10, (8,)), (10, 3, 64, (9,))]
    assert (ops[3].peer, ops[3].tag, ops[5].coll, ops[5].peer) == (1, 5, "alltoall", (0, 1))
    assert len(node_bytes(big)) > 300 + 2  # a two-byte length prefix


# -- collectives: the same as emu run ------------------------------------------------------------------
@pytest.mark.parametrize("operation,size,extra", [
    ("allreduce", 4096, []), ("allreduce", 4096, ["--algo", "ring"]), ("allreduce", 4096, ["--offload", "nic"]),
    ("allreduce", 4096, ["--offload", "switch"]), ("allgather", 1024, []), ("reduce_scatter", 4096, []),
    ("bcast", 2048, []), ("barrier", 0, []), ("alltoall", 512, [])])
def test_a_trace_collective_equals_emu_run(tmp_path, operation, size, extra):
    """One collective per rank, comm_size bytes of input: completion, frames and bytes equal to the
    nanosecond those of ``emu run --test OP --size`` (alltoall: comm_size is the whole send buffer,
    emu run's --size one rank's part of it)."""
    write_trace(str(tmp_path / "t"), [[coll(0, operation, size)] for _ in range(4)])
    row = replayed(tmp_path, "--topo", "star:n=4", "--direct", *extra)
    run_size = size // 4 if operation == "alltoall" else size
    want = ran(tmp_path, "--topo", "star:n=4", "--test", operation, *(["--size", str(run_size)] if size else []),
               *extra)
    assert (row["completion_ns"], row["frames"], row["bytes"]) == (want["completion_ns"], want["frames"], want["bytes"])
    assert row["completion_ns"] > 0
    if extra[:1] == ["--offload"]:
        assert all(k.startswith(f"{operation}/{extra[1]}") for k in row["collectives"]), row["collectives"]


def test_collectives_of_process_groups_run_side_by_side(tmp_path):
    """Groups {0,1} and {2,3} (--comm-groups) each allreduce at once, then every rank allreduces:
    each pair ends as a two-rank emu run; the world collective follows."""
    groups = tmp_path / "g.json"
    groups.write_text(json.dumps({"a": [0, 1], "b": [2, 3]}))
    write_trace(str(tmp_path / "t"), [[coll(0, "allreduce", 8192, pg="a" if r < 2 else "b"),
                                      coll(1, "allreduce", 64, deps=[0])] for r in range(4)])
    row = replayed(tmp_path / "t.0.et", "--topo", "star:n=4", "--direct", "--comm-groups", str(groups))
    pair = ran(tmp_path, "--topo", "star:n=4", "--test", "allreduce", "--size", "8192", "--ranks", "h0,h1")
    assert row["totals"]["coll"]["count"] == 8
    assert row["critical_path"]["steps"][0]["end_ns"] == pair["completion_ns"]
    assert row["completion_ns"] > pair["completion_ns"]
    with pytest.raises(ChakraError, match=r"t\.0\.et: node 0: process group 'a' is not in the --comm-groups file"):
        groups.write_text(json.dumps({"b": [2, 3]}))
        replayed(tmp_path, "--topo", "star:n=4", "--direct", "--comm-groups", str(groups))


# -- messages and calcs: the same as a GOAL schedule ------------------------------------------------------
def ring_trace(prefix, ranks, rounds, size, tail: str | None = None):
    """Rounds of compute 1 us, send to r + 1, receive from r - 1; then the collective ``tail``."""
    nodes = []
    for r in range(ranks):
        out, prev = [], None
        for k in range(rounds):
            b = 3 * k
            out += [comp(b, 1, deps=[prev] if prev is not None else []), send(b + 1, (r + 1) % ranks, size, k, [b]),
                    recv(b + 2, (r - 1) % ranks, size, k)]
            prev = b + 2
        if tail:
            out.append(coll(3 * rounds, tail, 1024, deps=[prev]))
        nodes.append(out)
    return write_trace(prefix, nodes)


def ring_goal(ranks, rounds, size) -> str:
    lines = [f"num_ranks {ranks}"]
    for r in range(ranks):
        lines.append(f"rank {r} {{")
        for k in range(rounds):
            lines += [f"c{k}: calc 1000", f"s{k}: send {size}b to {(r + 1) % ranks} tag {k}",
                      f"r{k}: recv {size}b from {(r - 1) % ranks} tag {k}", f"s{k} requires c{k}"]
            if k:
                lines.append(f"c{k} requires r{k - 1}")
        lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("size", [100, 40_000])
def test_messages_and_calcs_equal_the_same_goal_schedule(tmp_path, size):
    """COMP/COMM_SEND/COMM_RECV nodes are replayed as GOAL's calc/send/recv: per rank end times,
    frames and bytes equal (eager and rendezvous)."""
    ring_trace(str(tmp_path / "t"), 4, 5, size)
    (tmp_path / "ring.goal").write_text(ring_goal(4, 5, size))
    row = replayed(tmp_path, "--topo", "star:n=4", "--direct")
    goal = replayed(tmp_path / "ring.goal", "--topo", "star:n=4", "--direct")
    assert [r["end_ns"] for r in row["per_rank"]] == [r["end_ns"] for r in goal["per_rank"]]
    assert (row["frames"], row["bytes"]) == (goal["frames"], goal["bytes"])
    assert row["totals"] == goal["totals"]


def test_same_figures_on_sockets_over_two_processes_and_without_the_path(tmp_path):
    ring_trace(str(tmp_path / "t"), 4, 3, 2000, tail="allreduce")
    base = replayed(tmp_path, "--topo", "star:n=4", "--direct")
    sock = replayed(tmp_path, "--topo", "star:n=4", "--processes", "2")
    bare = replayed(tmp_path, "--topo", "star:n=4", "--direct", "--path", "0")
    for row in (sock, bare):
        assert [r["end_ns"] for r in row["per_rank"]] == [r["end_ns"] for r in base["per_rank"]]
        assert row["frames"] == base["frames"]
    assert bare["critical_path"]["steps"] == [] and len(base["critical_path"]["steps"]) > 3
    assert base["totals"]["coll"]["count"] == 4


# -- the window --------------------------------------------------------------------------------------------
def test_a_rank_holds_at_most_window_nodes(tmp_path):
    """A chain of 3,000 nodes read through a window of 16: never more than 16 in flight. A node that
    waits for one 40 nodes later, the 39 between waiting for it: that fits a window of 64, not of 16."""
    p = str(tmp_path / "c.0.et")
    write_rank(p, [comp(i, 1, deps=[i - 1] if i else []) for i in range(3000)])
    with open(p, "rb") as f:
        read_metadata(f, p)
        feed = Feed(iter_ops(f, p, 0, 1, None), p, 16)
        most, ready = 0, []
        while not feed.exhausted or feed.ids:
            ready += [i for i, _, n, _, _ in feed.more() if n == 0]
            most = max(most, len(feed.ids))
            ready += feed.finished(ready.pop())
    assert (most, feed.count) == (16, 3000)
    write_rank(p, [comp(0, 1, deps=[40])] + [comp(i, 1, deps=[0]) for i in range(1, 40)] + [comp(40, 1)])
    with open(p, "rb") as f:
        assert check_file(f, p, 0, 1, None, 64) == 41
    with open(p, "rb") as f, pytest.raises(ChakraError, match=r"c\.0\.et: node 0 depends on node 40, not within the "
                                                               r"16 nodes .*raise --window"):
        check_file(f, p, 0, 1, None, 16)


# -- bad input -------------------------------------------------------------------------------------------
def refusal(capsys, *argv) -> str:
    assert main(["replay", *argv, "--topo", "star:n=4", "--direct"]) == 2
    out = capsys.readouterr()
    text = (out.out + out.err).strip()
    assert "\n" not in text and "Traceback" not in text and text.startswith("refused: ")
    return text


def test_bad_traces_are_refused_in_one_line_naming_file_and_node(tmp_path, capsys):
    t = str(tmp_path / "t")
    write_trace(t, [[comp(0, 1), comp(1, 1, deps=[2]), comp(2, 1, deps=[1])], [comp(0, 1)]])
    assert re.search(r"t\.0\.et: a dependency cycle: nodes 1, 2 wait for each other", refusal(capsys, t))
    write_trace(t, [[comp(0, 1, deps=[9])], [comp(0, 1)]])
    assert "t.0.et: node 0 depends on node 9, which the file does not have" in refusal(capsys, t)
    write_trace(t, [[send(3, 7, 10)], [comp(0, 1)]])
    assert "t.0.et: node 3: comm_dst 7 is not an integer within 0..1" in refusal(capsys, t)
    write_trace(t, [[coll(4, "gather", 8)], [comp(0, 1)]])
    assert "t.0.et: node 4: comm_type 3 (GATHER) is not replayed" in refusal(capsys, t)
    write_trace(t, [[comp(0, 1), comp(0, 2)], [comp(0, 1)]])
    assert "t.0.et: node 0 appears twice" in refusal(capsys, t)
    data = open(t + ".0.et", "rb").read()
    open(t + ".0.et", "wb").write(data[:-3])
    assert re.search(r"t\.0\.et: byte \d+: the file ends inside a message", refusal(capsys, t))
    open(t + ".0.et", "wb").write(data[:-3] + b"\x03\xff\xff\xff")
    assert re.search(r"t\.0\.et: byte \d+: node message #\d does not decode", refusal(capsys, t))
    write_trace(t, [[comp(0, 1)]] * 3)
    os.remove(t + ".1.et")
    assert "t.1.et is missing: the trace has ranks up to 2; give every rank's file" in refusal(capsys, t + ".0.et")
    assert "no such trace" in refusal(capsys, str(tmp_path / "nothing"), "--format", "chakra")
    assert "--algo applies to a Chakra trace" in refusal(capsys, str(tmp_path / "x.goal"), "--algo", "ring")


def test_a_receive_no_send_matches_is_named_when_the_run_stops(tmp_path):
    write_trace(str(tmp_path / "t"), [[recv(5, 1, 100)], [comp(0, 1)]])
    from emu.errors import DeadlockError

    with pytest.raises(DeadlockError, match=r"the replay cannot go on.*rank 0"):
        replayed(tmp_path, "--topo", "star:n=2", "--direct")


def test_window_option_is_checked():
    with pytest.raises(ConfigError, match="--window 0"):
        replay(args_for("x.et", "--window", "0", "--topo", "star:n=2"))
    assert WINDOW == 1024
