"""The fast paths of ``emu mpirun``'s small messages (issue 40, item 5) change no figure.

- The synchroniser's one domain runs the windows after a window itself, without a round each
  (``Domain._following``: its frames collected as the next round would collect them): the same
  windows, numbered alike, the same figures and frames, a lost datagram recovered; only the rounds
  are fewer.
- A plain NumPy array (C-contiguous, native order, an element code of a predefined type) is a
  message whole: the rank library's fast path (``emu.rank.plain``) packs and fills it as the general
  buffer specification does, errors included -- in point to point, reductions and broadcasts.
- The channel's binary heads decode by a function per form as the general decoder does.
"""

import numpy as np
import pytest

import emu
from emu import domain, native
from emu.topologies import star

from apps import exchange, recv_n, send_to


SCENES = {  # a ping-pong (one element at a time), and three senders into one host at once (a queue)
    "pingpong": (2, lambda: {"h0": (exchange, "h1", 8, 20), "h1": (exchange, "h0", 8, 20)}),
    "incast": (4, lambda: {"h0": (send_to, "h3", 3000, 0, 4), "h1": (send_to, "h3", 700, 0, 6),
                           "h2": (send_to, "h3", 64, 0, 9), "h3": (recv_n, 19)}),
}


async def _run(monkeypatch, stretch_max: int, scene: str, direct: bool):
    monkeypatch.setattr(domain, "STRETCH_MAX", stretch_max)
    n, apps = SCENES[scene]
    async with emu.Cluster(star(n), run=emu.RunConfig(capture=True, direct=direct)) as net:
        res = await net.run(apps())
        recs = await net.capture_records()
        m = net.metrics
        return (res, m.end_ns, m.frames, m.hop_count, [tuple(r) for r in recs],
                net.windows), net._sync.rounds


@pytest.mark.parametrize("direct", [False, True], ids=["udp", "direct"])
@pytest.mark.parametrize("scene", sorted(SCENES))
@pytest.mark.parametrize("core", ["compiled", "pure"])
async def test_windows_without_a_round_give_the_same_run(core, scene, direct, monkeypatch):
    if core == "pure":
        monkeypatch.setattr(native, "CORE", None)
    limit = domain.STRETCH_MAX
    merged, rounds = await _run(monkeypatch, limit, scene, direct)
    alone, plain_rounds = await _run(monkeypatch, 0, scene, direct)
    assert merged == alone  # results, end, frames, hops, every captured frame, windows
    assert plain_rounds == alone[-1]  # without: a round per window
    assert rounds <= plain_rounds // limit + 2  # with: a round per STRETCH_MAX windows


async def test_merged_windows_recover_datagrams_the_os_dropped(monkeypatch):
    """Windows run without a round still recover a lost datagram (their requests to retransmit go
    at once, not held for the next window's datagram): the run is the one without merging."""
    n, apps = SCENES["incast"]
    runs = []
    for stretch in (domain.STRETCH_MAX, 0):
        monkeypatch.setattr(domain, "STRETCH_MAX", stretch)
        run = emu.RunConfig(socket_drop_rate=0.2, stall_timeout_s=0.02, seed=3)
        async with emu.Cluster(star(n), run=run) as net:
            res = await net.run(apps())
            stats = await net.stats()
            runs.append((res, net.metrics.end_ns, net.windows))
        assert sum(s["element"]["retransmitted"] for s in stats) > 0
    assert runs[0] == runs[1]


ARRAYS = [np.arange(5, dtype=t) for t in ("f8", "f4", "i8", "i4", "i2", "i1", "u1", "u8")] + [
    np.zeros((3, 4)), np.zeros(0), np.array(7.5), np.arange(12.0).reshape(3, 4)[:, 1],  # (not contiguous)
    np.zeros(3, ">f8"), np.zeros(2, "c16"), np.zeros(3, bool), np.asfortranarray(np.zeros((2, 3)))]


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: f"{a.dtype.str}{a.shape}{'C' if a.flags.c_contiguous else ''}")
def test_a_plain_array_packs_and_fills_as_its_buffer_specification(arr):
    from emu.rank.buffers import Msg
    from emu.rank.intracomm import _into, _out
    from emu.rank.types import Exception as MpiException

    def general(fn):
        try:
            return "ok", fn()
        except (MpiException, BufferError, KeyError, ValueError, TypeError) as e:
            return type(e).__name__, str(e)

    assert general(lambda: _out(arr, 1)) == general(lambda: Msg(arr).pack())
    for n in sorted({0, 1, arr.nbytes // 2, arr.nbytes, arr.nbytes + 1, arr.nbytes + 8}):
        data = bytes(range(1, n + 1))
        a, b = arr.copy(), arr.copy()
        if not arr.flags.c_contiguous:
            a, b = np.asfortranarray(arr) if arr.flags.f_contiguous else arr, arr  # (the general way either way)
        got = general(lambda: _into(a, 0).unpack(data))
        want = general(lambda: Msg(b, writable=True).unpack(data))
        assert got == want
        assert a.tobytes() == b.tobytes()


class _Wire:
    """The rank's channel, recorded: each call's op, payload and head; the answer's bytes are
    ``fill`` (its length the payload's), ``none`` for a rank that gets nothing."""

    def __init__(self, none: bool = False):
        self.calls, self.none = [], none

    def call(self, op, payload=b"", **head):
        self.calls.append((op, bytes(payload), list(head.items())))
        if self.none:
            return {"none": True}, b""
        n = len(payload) if payload else head.get("n", 0)
        return {}, bytes((7 * i + 3) & 0xFF for i in range(max(n, 0)))


def _both_ways(monkeypatch, fn, make, none=False):
    """``fn(comm, *make())`` by the plain arrays' fast path and by the general way: what each sent,
    answered (or raised) and left in the buffers."""
    from emu.rank import blockcoll
    from emu.rank.intracomm import Comm
    from emu.rank.types import Exception as MpiException

    out = []
    for fast in (True, False):
        wire = _Wire(none)
        monkeypatch.setattr(blockcoll, "CHANNEL", wire)
        if not fast:
            monkeypatch.setattr(blockcoll, "plain", lambda buf: False)
        bufs = make()
        try:
            res = ("ok", fn(Comm._make(0, 2, 0), *bufs))
        except (MpiException, BufferError, KeyError, ValueError, TypeError, NotImplementedError) as e:
            res = (type(e).__name__, str(e))
        out.append((res, wire.calls, [b.tobytes() if isinstance(b, np.ndarray) else b for b in bufs]))
        monkeypatch.undo()
    return out


PAIRS = [  # (send buffer, receive buffer)
    lambda: (np.arange(3.0), np.zeros(3)), lambda: (np.arange(4, dtype="i4"), np.zeros(4, "i4")),
    lambda: (np.array(2.5), np.zeros(1)), lambda: (np.zeros(0), np.zeros(0)),
    lambda: (np.arange(3.0), np.zeros(4)),  # counts differ
    lambda: (np.arange(3.0), np.zeros(3, "f4")),  # types differ
    lambda: (np.arange(3, dtype="u1"), np.zeros(3, "i1")),
    lambda: (np.arange(6.0).reshape(2, 3), np.zeros((3, 2))),
    lambda: (np.arange(3.0), np.zeros(3, ">f8")), lambda: (np.zeros(3, ">f8"), np.zeros(3)),
    lambda: (np.arange(3.0), np.zeros(6)[::2]),
    lambda: (np.arange(3.0), np.frombuffer(bytes(24), np.float64)),  # read-only
    lambda: (None, np.arange(3.0)), lambda: (None, np.frombuffer(bytes(24), np.float64)),
    lambda: (np.arange(3.0), None),
]


@pytest.mark.parametrize("pair", range(len(PAIRS)))
@pytest.mark.parametrize("call", ["Allreduce", "Reduce", "Reduce_other", "Allreduce_max", "Allreduce_replace"])
def test_a_plain_reduction_sends_and_fills_as_the_general_way(monkeypatch, pair, call):
    from emu.rank.types import OPS

    op = OPS["MAX"] if call.endswith("max") else OPS["REPLACE"] if call.endswith("replace") else OPS["SUM"]
    if call == "Reduce_other":  # a rank other than the root: nothing comes back
        fast, general = _both_ways(monkeypatch, lambda c, s, r: c.Reduce(s, r, op, root=1), PAIRS[pair], none=True)
    elif call == "Reduce":
        fast, general = _both_ways(monkeypatch, lambda c, s, r: c.Reduce(s, r, op, root=0), PAIRS[pair])
    else:
        fast, general = _both_ways(monkeypatch, lambda c, s, r: c.Allreduce(s, r, op), PAIRS[pair])
    assert fast == general


@pytest.mark.parametrize("pair", range(len(PAIRS)))
@pytest.mark.parametrize("root", [0, 1])
def test_a_plain_bcast_sends_and_fills_as_the_general_way(monkeypatch, pair, root):
    fast, general = _both_ways(monkeypatch, lambda c, s, r: c.Bcast(r, root=root), PAIRS[pair])
    assert fast == general


def _sample(form, cpu: bool) -> dict:
    """A head of ``form`` with values of each field's kind (then ``op``, and ``cpu`` when asked)."""
    from emu.rank import wire

    vals = {"q": -(2 ** 40) - 3, "?": True, "d": 2.5, "n": "Allreduce"}
    head = {name: vals[kind] for name, kind in form.fields}
    if form.op is not None:
        head["op"] = form.op
        if cpu:
            head["cpu"] = 1.25e-06
    return head


def test_a_plain_head_decodes_by_its_own_function_as_the_general_decoder():
    """The decoders written out per form (``wire._Form._plain_decoder``) give the general decoder's
    dict -- the same keys in the same order, which a binary form needs -- and its errors."""
    import struct

    from emu.rank import wire

    plain = [f for f in wire._BY_CODE.values() if f.plain]
    assert len(plain) >= 12 and all("decode" in vars(f) for f in plain)  # (each has its own)
    for form in plain:
        for cpu in ((False, True) if form.op is not None else (False,)):
            head = _sample(form, cpu)
            b = wire.encode_head(head)
            assert b[0] & 0x7F == form.code
            got, want = form.decode(b), wire._Form.decode(form, b)
            assert list(got.items()) == list(want.items()) == list(head.items())
            if form.fixed.size > 1:
                for bad in (b[:-9] if cpu else b[:-1], bytes([b[0]]) + b"\xff" * (len(b) - 1)):
                    errors = []
                    for fn in (form.decode, lambda x: wire._Form.decode(form, x)):
                        try:
                            fn(bad)
                            errors.append(None)
                        except (struct.error, IndexError) as e:
                            errors.append(type(e))
                    assert errors[0] == errors[1]
