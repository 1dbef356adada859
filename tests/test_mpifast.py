"""The fast paths of ``emu mpirun``'s small messages (issue 40, item 5) change no figure.

- A window in which one element alone would run is run by the domain right after the one before,
  without a round of the synchroniser (``Domain._lone``): the same windows, numbered alike, the
  same figures and frames; only the rounds are fewer.
- A plain NumPy array (C-contiguous, native order, an element code of a predefined type) is a
  message whole: the rank library's fast path packs and fills it as the general buffer
  specification does, errors included.
"""

import numpy as np
import pytest

import emu
from emu import domain, native
from emu.topologies import star

from apps import exchange


async def _run(monkeypatch, stretch_max: int):
    monkeypatch.setattr(domain, "STRETCH_MAX", stretch_max)
    async with emu.Cluster(star(2), run=emu.RunConfig(capture=True)) as net:
        res = await net.run({"h0": (exchange, "h1", 8, 20), "h1": (exchange, "h0", 8, 20)})
        recs = await net.capture_records()
        m = net.metrics
        return (res, m.end_ns, m.frames, m.hop_count, [tuple(r) for r in recs],
                net.windows), net._sync.rounds


@pytest.mark.parametrize("core", ["compiled", "pure"])
async def test_lone_windows_without_a_round_give_the_same_run(core, monkeypatch):
    if core == "pure":
        monkeypatch.setattr(native, "CORE", None)
    merged, rounds = await _run(monkeypatch, domain.STRETCH_MAX)
    alone, plain_rounds = await _run(monkeypatch, 0)
    assert merged == alone  # results, end, frames, hops, every captured frame, windows
    assert plain_rounds == alone[-1]  # without: a round per window
    assert rounds < plain_rounds * 0.7  # a ping-pong: most windows have one element alone


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
