"""``emu mpirun``'s point-to-point protocol: eager up to ``host.eager_limit_bytes``, rendezvous above
(request-to-send, clear-to-send once a receive matched it, then the data), for the program's own
messages and for the collectives' (``emu.front.mpiserve``, ``emu.front.mpicomm``, ``emu.wire.mpi``)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emu.nodes.collectives.model import _step
from emu.topologies.registry import build

HERE = pathlib.Path(__file__).parent / "mpi"
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable))

PINGPONG = str(HERE / "pingpong.py")


def _one_way(nbytes: int) -> int:
    t = build("star:n=2")
    return _step(nbytes, t.nodes["h0"].spec, t.links[0].spec, t.nodes["s0"].spec, 1)


@pytest.mark.parametrize("nbytes, limit, rendezvous", [
    (16384, None, False),   # the default limit: at most 16 KiB goes eagerly
    (16385, None, True),    # one byte more: request-to-send, clear-to-send, data
    (100_000, None, True),
    (100_000, 100_000, False),  # host.eager_limit_bytes moves the line
])
def test_a_message_over_the_eager_limit_takes_the_rendezvous_round_trip(mpirun, nbytes, limit, rendezvous):
    settings = [f"host.eager_limit_bytes={limit}"] if limit else []
    res = mpirun(PINGPONG, n=2, topo="star:n=2", args=(nbytes, 3), settings=settings)
    assert res.returncode == 0, res
    data = _one_way(nbytes + 17)  # 17: the envelope
    # rendezvous: the request-to-send (envelope and the 8-byte size), the clear-to-send (an envelope),
    # then the data, one after the other: the receiver is waiting in Recv each time
    one_way = _one_way(17 + 8) + _one_way(17) + data if rendezvous else data
    assert int(res.stdout) == 2 * 3 * one_way
    send = res.calls(0)["Send"]
    # a rendezvous Send returns when its data went: the round trip, then the send overhead of the data
    assert send["virtual_ns"] == 3 * ((_one_way(17 + 8) + _one_way(17) + 300) if rendezvous else 300)


def test_rendezvous_keeps_mpi_matching_and_the_collectives_work(mpirun):
    res = mpirun(HERE / "rendezvous.py", n=3, topo="star:n=3")
    assert res.returncode == 0, res
    assert sorted(res.stdout.split()) == sorted(f"{w}" for r in range(3) for w in ("ok", r)), res
    calls = res.calls(0)
    assert calls["Bcast"]["count"] == 1 and calls["Alltoallv"]["algorithms"] == ["pairwise"]
    assert res.calls(1)["Probe"]["count"] == 1 and calls["Ssend"]["count"] == 1


@pytest.mark.skipif(MPIEXEC is None, reason="MPICH's mpiexec is not installed (the mpi extra)")
@pytest.mark.parametrize("program", ["rendezvous", "nonblocking", "rma"])
def test_the_programs_are_valid_mpi(program):
    ref = subprocess.run([MPIEXEC, "-n", "3", sys.executable, str(HERE / f"{program}.py")], capture_output=True,
                         text=True, timeout=120)
    assert ref.returncode == 0 and sorted(re.findall(r"ok (\d)", ref.stdout)) == ["0", "1", "2"], ref.stderr[-400:]


@pytest.mark.parametrize("n", [3, 4])
def test_nonblocking_and_persistent_collectives(mpirun, n):
    """Outstanding at once and waited out of order, beside point-to-point traffic that needs the
    other ranks to pass a nonblocking barrier first, persistent ones started twice (each Start an
    Iallreduce, ...), Alltoallw."""
    res = mpirun(HERE / "nonblocking.py", n=n, topo=f"star:n={n}")
    assert res.returncode == 0, res
    assert sorted(res.stdout.split("\n")[:-1]) == sorted(f"ok {r}" for r in range(n)), res
    calls = res.calls(0)
    assert calls["Iallreduce"]["count"] == 2 + 2 and calls["Ialltoallw"]["count"] == calls["Alltoallw"]["count"] == 1
    assert res.calls(0)["Wait"]["count"] >= 20


BCAST = """
import sys
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
size, n = int(sys.argv[1]), int(sys.argv[2])
buf = np.zeros(size, "u1")
comm.Barrier()
t0 = MPI.Wtime()
for _ in range(n):
    comm.Bcast(buf, 0)
if comm.rank == 0:
    print(round((MPI.Wtime() - t0) * 1e9))
"""


@pytest.mark.parametrize("nbytes", [256 * 1024])
def test_a_long_bcast_at_the_root_takes_the_transfer(mpirun, nbytes):
    """osu_bcast's loop: a root whose Bcast returned when its data was handed over would run ahead of
    the wire; with the rendezvous each Bcast waits for the receiver, so the loop takes at least the
    data's time on the 100 Gb/s link."""
    res = mpirun(BCAST, n=2, topo="star:n=2", args=(nbytes, 4))
    assert res.returncode == 0, res
    wire_ns = nbytes * 8 / 100e9 * 1e9
    assert int(res.stdout) >= 3 * wire_ns, res.stdout


@given(st.sampled_from([0, 1, 2, 3, 4, 5]), st.integers(0, 2**32 - 1), st.integers(-2**31, 2**31 - 1),
       st.integers(-2**31, 2**31 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1))
def test_the_rendezvous_header_is_its_declaration(kind, ctx, src, tag, seq, size):
    from emu.wire.mpi import ENVELOPE, RENDEZVOUS, MpiEnvelope, MpiRendezvous

    head = MpiEnvelope(kind=kind, context=ctx, source=src, tag=tag, seq=seq)
    raw = ENVELOPE.pack(kind, ctx, src, tag, seq)
    assert raw == bytes(head)
    if kind == 3:  # a request-to-send: its size follows, a layer of its own
        raw += RENDEZVOUS.pack(size)
        assert raw == bytes(head / MpiRendezvous(size=size))
        assert MpiEnvelope(raw)[MpiRendezvous].size == size
    assert ENVELOPE.unpack(raw[:17]) == (kind, ctx, src, tag, seq)


def test_the_eager_limit_is_checked():
    from emu.config import ConfigError
    from emu.config.host import HostSpec

    assert HostSpec().eager_limit_bytes == 16384
    with pytest.raises(ConfigError, match="eager_limit_bytes"):
        HostSpec(eager_limit_bytes=-1)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_one_sided_communication(mpirun, n):
    res = mpirun(HERE / "rma.py", n=n, topo="star:n=4")
    assert res.returncode == 0, res
    assert sorted(res.stdout.split("\n")[:-1]) == sorted(f"ok {r}" for r in range(n)), res
    calls = res.calls(0)
    assert calls["Win_fence"]["count"] == 12 and calls["Put"]["count"] == 3 and calls["Win_post" if n > 1 else
                                                                                       "Win_wait"]["count"] == 1


PUT = """
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
mem = np.zeros(4, "i4")
win = MPI.Win.Create(mem, 4, comm=comm)
win.Fence()
if comm.rank == 0:
    win.Put(np.array([5, 6], "i4"), 1, 1)
win.Fence()
assert comm.rank == 0 or list(mem) == [0, 5, 6, 0], mem
win.Free()
"""


def test_a_put_is_one_message_there_and_its_answer_back(mpirun):
    """The origin's Put: its request (the envelope, the 22-byte MpiRma header, 8 bytes of data) to
    the target, waiting in its Fence, and the target's empty reply (an envelope)."""
    res = mpirun(PUT, n=2, topo="star:n=2")
    assert res.returncode == 0, res
    assert res.calls(0)["Put"]["virtual_ns"] == _one_way(17 + 22 + 8) + _one_way(17)
    assert res.calls(0)["Put"]["bytes"] == 8


@given(st.sampled_from(range(10)), st.integers(0, 255), st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1),
       st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_the_rma_header_is_its_declaration(op, rop, disp, nbytes, npos, etype):
    from emu.wire.mpi import ENVELOPE, RMA, MpiEnvelope, MpiRma

    raw = ENVELOPE.pack(6, 7, 1, 0, 9) + RMA.pack(op, rop, disp, nbytes, npos, etype)
    pkt = MpiEnvelope(kind=6, context=7, source=1, tag=0, seq=9) / MpiRma(op=op, rop=rop, disp=disp, nbytes=nbytes,
                                                                          npos=npos, etype=etype)
    assert raw == bytes(pkt) and len(raw) == 17 + 22
    assert MpiEnvelope(raw)[MpiRma].disp == disp


def test_the_rendezvous_is_on_the_wire(mpirun, tmp_path):
    """In the capture: each long message is a request-to-send (25 bytes: the envelope and the size),
    a clear-to-send (17), then the data (its envelope and 20,000 bytes); no eager data message."""
    from collections import Counter

    from scapy.utils import rdpcap

    from emu.wire import HDR_LEN, MSG
    from emu.wire.mpi import P2P_TAG

    pcap = tmp_path / "r.pcapng"
    res = mpirun(PINGPONG, n=2, topo="star:n=2", args=(20_000, 1), pcap=str(pcap))
    assert res.returncode == 0, res
    seen = Counter()
    for p in rdpcap(str(pcap)):
        b = bytes(p)
        if len(b) > HDR_LEN + MSG.size:
            _, tag, total, off = MSG.unpack(b[HDR_LEN:HDR_LEN + MSG.size])
            if tag == P2P_TAG and off == 0:
                seen[(b[HDR_LEN + MSG.size], total)] += 1
    assert set(seen) == {(3, 25), (4, 17), (5, 20_017)}, seen
    assert len(set(seen.values())) == 1  # one of each per message (every frame seen at as many ports)
