"""Lossy sockets (issue 22, item 7): datagrams the OS drops change how long a run takes, never what
it computes. The wall-clock goal (within 5x the lossless time at 5 % loss) is in
``scripts/bench_lossy.py``; here only virtual figures and capture bytes are compared."""

import hashlib

import pytest

import emu
from emu.config import RunConfig
from emu.front.checks import Options, run_check


async def _ring(tmp_path, rate: float, processes: int):
    cap = tmp_path / f"r{rate}-{processes}.pcapng"
    run = RunConfig(direct=False, socket_drop_rate=rate, capture=True, processes=processes, seed=5)
    async with emu.Cluster("star:n=8", run=run, capture=cap) as net:
        r = await run_check(net, "allreduce", Options(extra={"algo": "ring", "size": "64KiB"}))
        st = await net.stats()
    assert r.ok, r.error
    dropped = sum(s["element"]["sock_dropped"] for s in st)
    return (r.completion_ns, r.frames, r.bytes, r.hop_count, r.per_link,
            hashlib.sha256(cap.read_bytes()).hexdigest()), dropped


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_ring_allreduce_over_lossy_sockets_has_the_lossless_figures_and_capture(tmp_path, processes):
    clean, none = await _ring(tmp_path, 0.0, processes)
    lossy, dropped = await _ring(tmp_path, 0.05, processes)
    assert none == 0 and dropped > 20  # the OS really "dropped" datagrams, and they were recovered
    assert lossy == clean
