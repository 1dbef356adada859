"""The compiled core's ``start_ready`` (``emu/csrc/flowwake.h``) against ``OutPort.start_ready``, its
specification: two identical ports under credit flow control, the same frames handed over and the
same credits given back, one started by each -- the same frames started (their bytes, times and
tokens), the same next look, and the same port and credit state after every call; and it declines
(None, nothing changed) where it is not the plain case."""

import copy
import random

import pytest

import emu.element  # noqa: F401  (the core's setup: the ports' layout)
import emu.native as native
from emu.buffers import VC_OFF, CreditState
from emu.port import OutPort
from emu.wire.fabric import add_fcs
from emu.wire.framing import PTYPE_OFF, framing

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built")
PRIO_OFF = PTYPE_OFF - 1


def _port(rng: random.Random, name: str, late: bool, prio: bool, fr: str) -> OutPort:
    vcs = rng.choice([1, 2, 4])
    groups = rng.choice([1, 2]) if late else 0
    unit = rng.choice([1, 16, 64])
    fl = CreditState(vcs, [rng.choice([0, 64, 256, 512]) for _ in range(vcs)], pool=rng.choice([0, 128, 1024]),
                     unit=unit, groups=groups, framing=framing(fr), late=late)
    return OutPort(0, "p", 0, 0, "h1", "h1-nic0", rng.choice([0, 50]), rng.choice([10**9, 10**10, 4 * 10**10]),
                   flow=fl, priority=prio, head_bytes=rng.choice([0, 64]), framing=framing(fr))


def _state(p: OutPort) -> tuple:
    fl = p.flow
    return (p.free_at, p.busy_ns, list(p.queued), p.queued_bytes, p.peak_queue_bytes, list(p.pending), p.line,
            list(fl.credits), fl.pool, list(fl.last), fl.stalls, fl.stall_ns, fl.stalled_since,
            [list(q) for q in fl.queues])


@needs_core
@pytest.mark.parametrize("seed", range(12))
def test_start_ready_is_the_twin_of_the_port_s(seed):
    rng = random.Random(seed)
    late, prio, fr = rng.random() < 0.5, rng.random() < 0.5, rng.choice(["ethernet", "flit"])
    a = _port(rng, "a", late, prio, fr)
    b = copy.deepcopy(a)
    core = native.CORE
    now, took, declined = 0, 0, 0
    for step in range(60):
        if rng.random() < 0.6:  # a frame handed over (its VC byte, its priority, its length)
            f = bytearray(rng.randrange(256) for _ in range(rng.randrange(40, 300)))
            f[VC_OFF] = rng.randrange(a.flow.vcs)
            f[PRIO_OFF] = 1 if rng.random() < 0.2 else 0
            f[PTYPE_OFF] = rng.randrange(8)
            at = now + rng.choice([0, 0, 10, 100])
            token = [step] if rng.random() < 0.7 else None
            a.hand_over(bytes(f), at, token)
            b.hand_over(bytes(f), at, token)
        if rng.random() < 0.3:  # a credit back
            vc, n, pool = rng.randrange(a.flow.vcs), rng.choice([16, 64, 256]), rng.random() < 0.2
            a.credit(vc, pool, n)
            b.credit(vc, pool, n)
        r = core.start_ready(a, now)
        if r is None:  # (only a high-priority frame that may cut into the packet on the line: Python's)
            assert a.priority and a.head_bytes and a.free_at > now and a.line[3]
            assert _state(a) == _state(b)
            r = a.start_ready(now)
            declined += 1
        assert r == b.start_ready(now)
        assert _state(a) == _state(b)
        took += len(r[0])
        now += rng.choice([0, 5, 50, 500])
    assert took > 0 or not any(a.flow.queues)
    assert declined < 60  # (the core took some of the calls)


@needs_core
def test_start_ready_declines_what_it_does_not_do():
    """A traced port, class queues or a receiver with ``vc_bytes``: None, the port as it was."""
    rng = random.Random(1)
    p = _port(rng, "p", False, False, "ethernet")
    p.hand_over(bytes(60), 0, None)
    before = _state(p)
    p.flow.vc_bytes = 64
    assert native.CORE.start_ready(p, 0) is None
    p.flow.vc_bytes = 0
    p.tracer = object()
    assert native.CORE.start_ready(p, 0) is None
    assert _state(p) == before
    p.tracer = None
    assert native.CORE.start_ready(p, 0) is not None and _state(p) != before


@needs_core
def test_a_field_set_after_a_call_is_seen():
    """The core keeps the fields it read per version of the flow's dict: a field set, added or taken
    away since is read again (the twin of Python's, which reads them every call)."""
    rng = random.Random(2)
    p = _port(rng, "p", False, False, "ethernet")
    q = copy.deepcopy(p)
    for port in (p, q):
        port.hand_over(bytes(60), 0, None)
    assert native.CORE.start_ready(p, 0) == q.start_ready(0)  # (its fields seen)
    for port in (p, q):
        port.flow.vc_bytes = 64  # (a receiver with vc_bytes: Python's only)
        port.hand_over(bytes(60), 0, None)
    assert native.CORE.start_ready(p, 10 ** 6) is None
    for port in (p, q):
        port.flow.vc_bytes = 0
        port.flow.queues = [type(x)(x) for x in port.flow.queues]  # (new queue objects, the same frames)
    assert native.CORE.start_ready(p, 10 ** 6) == q.start_ready(10 ** 6)
    assert _state(p) == _state(q)
    p.flow.by_prio = {}
    assert native.CORE.start_ready(p, 2 * 10 ** 6) is None
