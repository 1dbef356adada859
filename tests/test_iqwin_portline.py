"""An output port's ``line`` (``[start, done, n, cuttable, []]``, set at every enqueue into an input-queued
router) written into the port's list in place when nobody else holds it (``iw_port_line``, emu/csrc/common.h),
its ints in place or kept ones (``iw_put_ll``, ``iw_int_new``). Python holding a line, or its list of cut-in
frames, sees it unchanged by the next frames, and every line equals the one Python's enqueue makes."""

import random

import pytest

from emu import native
from emu.port import OutPort, PRIO_OFF, PTYPE_OFF
from emu.wire import build_frame

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")
CORE = native.CORE


def _port() -> OutPort:
    return OutPort(index=0, name="p", iface=0, link_id=0, peer="x", peer_port_name="x-p", latency_ns=100,
                   bandwidth_bps=10_000_000_000, head_bytes=64)


def _frame(rng, k):
    f = bytearray(build_frame(1, 2, 1, bytes(rng.randrange(40, 1500)), prio=0))
    if k % 3 == 0 and len(f) > PRIO_OFF:  # (a QsNet packet of priority 0 now and then: the line's cuttable)
        from emu.port import _QPKT
        f[PTYPE_OFF] = _QPKT
    return bytes(f)


@needs_core
def test_a_ports_line_is_pythons_and_what_python_holds_stays():
    rng = random.Random(11)
    a, b = _port(), _port()
    at = 0
    held = []  # (a line or its list of cut-in frames, which, its items then)
    taken = 0
    cuts = set()
    for k in range(400):
        at += rng.choice([0, 0, 30, 300, 3000])
        frame = _frame(rng, k)
        start = CORE.enqueue(a, frame, at)
        if start is None:
            start = a.enqueue(frame, at)
        else:
            taken += 1
        assert start == b.enqueue(frame, at)
        assert a.line == b.line and type(a.line[3]) is bool
        cuts.add(a.line[3])
        assert all(a.line[4] is not obj for obj, _, _ in held)
        for obj, which, then in held:
            assert (obj[:4] if which == "line" else obj) == then
        if k % 5 == 1:  # the line held, as emu.segcut holds it
            held.append((a.line, "line", a.line[:4]))
        elif k % 5 == 3:  # its list of cut-in frames held and filled
            inner = a.line[4]
            inner.append(("cut in", k))
            held.append((inner, "inner", list(inner)))
        elif k % 5 == 4:  # or held empty (Python may fill it later: never the next line's)
            held.append((a.line[4], "inner", []))
    assert taken > 300 and cuts == {True, False}  # (the core's path, not Python's; lines of both kinds)
