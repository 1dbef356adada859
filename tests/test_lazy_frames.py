"""Long messages go to the port as lazy frames, made from the sender's buffer as the port sends them
(issue 27): the same figures and capture bytes as frames made at once, a bounded number of them made
ahead of the receiver, and send completion (``isend``/``wait``) that gives a sender its buffer back."""

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import emu
from emu.nodes.collectives.run import check_results, run_collective
from emu.nodes.nic import engine as nic_engine
from emu.nodes.nic import outgoing
from emu.topologies import build

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


async def _collective(tmp_path, name, spec, operation, count, **kw):
    cap = tmp_path / f"{name}.pcapng"
    async with emu.Cluster(build(spec), capture=cap, direct=kw.pop("direct", False)) as net:
        res = await run_collective(net, operation, count=count, **kw)
        check_results(res, count, "float32", "sum", 0, 0)
        figures = (res.figures(), res.link_frames, res.link_bytes)
        stats = await net.stats()
    return figures, hashlib.sha256(cap.read_bytes()).hexdigest(), stats


async def test_lazy_frames_give_the_same_figures_and_capture_bytes(tmp_path, monkeypatch):
    runs = [("rab", "star:n=2", "allreduce", {"algo": "rabenseifner"}),
            ("ring", "star:n=3", "allreduce", {"algo": "ring", "direct": True}),
            ("rd", "fattree:k=2,n=2", "allreduce", {"algo": "recursive_doubling"}),
            ("bcast", "mesh:k=2,n=2", "bcast", {})]  # credit flow control: frames made at hand-over
    count = 96 * 1024 // 4  # 96 KiB per rank: messages of 48 to 96 KiB
    for name, spec, operation, kw in runs:
        monkeypatch.setattr(nic_engine.NicEngine, "lazy_bytes", 1 << 62)  # every frame made at once
        eager = await _collective(tmp_path, name + "-eager", spec, operation, count, **dict(kw))
        monkeypatch.setattr(nic_engine.NicEngine, "lazy_bytes", 1024)
        lazy = await _collective(tmp_path, name + "-lazy", spec, operation, count, **dict(kw))
        assert lazy[:2] == eager[:2], name
        assert sum(s.get("frames_sent", 0) for s in lazy[2]) == sum(s.get("frames_sent", 0) for s in eager[2])


async def _exchange(host, peer, n, log):
    """Send ``n`` bytes to ``peer`` and receive theirs; report what this rank's message was made of."""
    data = np.arange(n, dtype=np.uint8)
    req = await host.isend(peer, memoryview(data), tag=1)
    log.append(("after isend", host.name, req.done))
    msg = await host.recv(peer, 1)
    await host.wait(req)
    return bytes(msg.data) == np.arange(n, dtype=np.uint8).tobytes(), req.done


@pytest.mark.parametrize("direct", [False, True])  # (in memory and uncaptured: the element's fast hand-over)
async def test_frames_are_made_as_the_port_sends_them(monkeypatch, direct):
    """No frame of a long message exists as bytes when the NIC takes it; at any moment the frames
    made and not yet reassembled at the receiver are a few windows' worth, not the message."""
    made, got = [0], [0]
    ahead = []
    build_wire = outgoing.Outgoing.build_wire
    on_segment = nic_engine.NicEngine._on_segment

    def counting_build(self, off, fcs):
        made[0] += 1
        ahead.append(made[0] - got[0])
        return build_wire(self, off, fcs)

    def counting_segment(self, src, hops, frame):
        got[0] += 1
        return on_segment(self, src, hops, frame)

    monkeypatch.setattr(outgoing.Outgoing, "build_wire", counting_build)
    monkeypatch.setattr(nic_engine.NicEngine, "_on_segment", counting_segment)
    n = 1 << 20  # 1024 frames of 1 KiB each way
    log = []
    async with emu.Cluster(build("star:n=2"), direct=direct) as net:
        out = await net.run({"h0": (_exchange, "h1", n, log), "h1": (_exchange, "h0", n, log)})
        lookahead = net.plan.lookahead_ns
        bps = net.topology.links[0].spec.bandwidth_bps
    assert out == {"h0": (True, True), "h1": (True, True)}
    assert log == [("after isend", "h0", False), ("after isend", "h1", False)]  # nothing made yet
    assert made[0] == got[0] == 2 * 1024
    # a frame is made in the window before it arrives over its first link, and is in the switch or
    # on the second link for at most two more: per message, per line, the frames one port sends
    # in a window (lookahead / time on the line, plus one), twice -- not the message's 1024
    per_window = -(-lookahead * bps // (8 * 1_000_000_000 * (1024 + 34 + 20 + 4))) + 1
    assert max(ahead) <= 2 * 2 * 2 * per_window < 1024, (max(ahead), per_window)


async def _send_then_overwrite(host, peer, n, use_isend):
    data = bytearray(b"\xab" * n)
    if use_isend:
        req = await host.isend(peer, data)
        await host.wait(req)  # the buffer is ours again: what is not sent yet was copied
    else:
        await host.send(peer, data)  # send: the buffer is free when it returns
    data[:] = b"\x00" * n
    return None


async def _recv_one(host, peer):
    msg = await host.recv(peer)
    return bytes(msg.data) == b"\xab" * len(msg.data), len(msg.data)


async def test_a_buffer_given_back_early_does_not_change_what_is_sent():
    n = 300_000
    for use_isend in (True, False):
        async with emu.Cluster(build("star:n=2")) as net:
            out = await net.run({"h0": (_send_then_overwrite, "h1", n, use_isend), "h1": (_recv_one, "h0")})
        assert out["h1"] == (True, n)


def test_bench_memory_runs_at_a_tiny_size():
    from importlib import util

    spec = util.spec_from_file_location("bench_memory", SCRIPTS / "bench_memory.py")
    bm = util.module_from_spec(spec)
    spec.loader.exec_module(bm)
    assert bm.ratio(3 << 20, 2, 1 << 20) == 1.5 and bm.parse_size("64MiB") == 64 << 20
    p = subprocess.run([sys.executable, str(SCRIPTS / "bench_memory.py"), "--sizes", "128KiB"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "cores" in p.stdout and "ratio" in p.stdout and "equal to numpy" in p.stdout

