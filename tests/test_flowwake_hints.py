"""The compiled ``start_ready`` reads its CreditState's fields at the indices in the flow's dict where
it found them last (``emu/csrc/common.h``'s ``fw_dict_values``), one set of indices for every flow:
checked against the key there on every read, so that a field written, replaced by another kind of
value, deleted or added, a dict in another key order, with a key not interned, with a key not a str,
or a flow of another class are all seen as Python's ``OutPort.start_ready`` (the specification) sees
them -- the core's result and state the twin of Python's, or None (declined) before anything changed."""

import copy
import random

import pytest

import emu.element  # noqa: F401  (the core's setup: the ports' layout)
import emu.native as native
from emu.buffers import CreditState
from emu.port import OutPort
from emu.wire.framing import framing

needs_core = pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built")


def _port(vcs: int = 2, credit: int = 256, pool: int = 0) -> OutPort:
    fl = CreditState(vcs, [credit] * vcs, pool=pool, framing=framing("ethernet"))
    return OutPort(0, "p", 0, 0, "h1", "h1-nic0", 50, 10**10, flow=fl, framing=framing("ethernet"))


def _state(p: OutPort) -> tuple:
    fl = p.flow
    return (p.free_at, p.busy_ns, list(p.queued), p.queued_bytes, list(p.pending), list(fl.credits), fl.pool,
            fl.stalls, fl.stall_ns, fl.stalled_since, [list(q) for q in fl.queues])


def _frame(vc: int, n: int = 100) -> bytes:
    from emu.buffers import VC_OFF

    f = bytearray(n)
    f[VC_OFF] = vc
    return bytes(f)


class _Pair:
    """A port run by the core and its copy run by Python, the same frames handed to both."""

    def __init__(self, **kw):
        self.a = _port(**kw)
        self.b = copy.deepcopy(self.a)
        self.now = 0

    def both(self, f):
        f(self.a)
        f(self.b)

    def step(self, frames: int = 1, expect_core: bool = True):
        for _ in range(frames):
            vc = self.now % self.a.flow.vcs
            self.both(lambda p: p.hand_over(_frame(vc), self.now, [self.now]))
        r = native.CORE.start_ready(self.a, self.now)
        if r is None:
            assert not expect_core, "the core declined a plain case"
            assert _state(self.a) == _state(self.b)  # (declined before anything changed)
            r = self.a.start_ready(self.now)
        else:
            assert expect_core, "the core took a case that is not plain"
        assert r == self.b.start_ready(self.now)
        assert _state(self.a) == _state(self.b)
        self.now += 10**5
        return r


@needs_core
def test_values_written_between_calls_are_read_anew():
    """No credit (credits and pool replaced by new objects from Python): nothing starts; then credit."""
    t = _Pair()
    assert t.step()[0]  # (a frame started: the fields' indices found)
    t.both(lambda p: setattr(p.flow, "credits", [0] * p.flow.vcs))
    r = t.step()
    assert r[0] == [] and t.a.flow.stalled_since is not None
    t.both(lambda p: setattr(p.flow, "pool", 10**6))
    assert t.step()[0]  # (the pool's credit seen)
    t.both(lambda p: setattr(p.flow, "unit", 64))
    t.step()


@needs_core
def test_a_field_deleted_replaced_or_added_is_seen():
    t = _Pair()
    t.step()
    t.both(lambda p: setattr(p.flow, "pool", 1.5))  # (not an int: Python's)
    t.step(expect_core=False)
    t.both(lambda p: setattr(p.flow, "pool", 0))
    t.step()
    t.both(lambda p: delattr(p.flow, "unit"))  # (the class's unit, 1, then: Python's)
    t.step(expect_core=False)
    t.both(lambda p: setattr(p.flow, "unit", 1))
    t.step()
    t.both(lambda p: setattr(p.flow, "by_prio", False))  # (an instance's by_prio: Python's)
    t.step(expect_core=False)
    t.both(lambda p: delattr(p.flow, "by_prio"))
    t.step()
    t.both(lambda p: setattr(p.flow, "held_bytes", 0))  # (a field more: by_prio still known absent)
    t.step()


@needs_core
def test_another_key_order_another_class_odd_keys():
    """Flows whose dicts hold the fields at other indices, read in turn with the same hints."""
    plain, other, odd, general = _Pair(), _Pair(), _Pair(), _Pair()
    for p in (other.a, other.b):  # (a combined dict, its keys in the reverse order)
        p.flow.__dict__ = dict(reversed(list(p.flow.__dict__.items())))
    for p in (odd.a, odd.b):  # (a key equal to "credits" but not the interned str)
        d = dict(p.flow.__dict__)
        v = d.pop("credits")
        d["".join(["cred", "its"])] = v
        p.flow.__dict__ = d
    for p in (general.a, general.b):  # (a key not a str: a dict of the general kind)
        p.flow.__dict__[1] = 2
    for _ in range(3):
        for t in (plain, other, odd, general, plain):
            t.step()
    for t in (other, odd):  # (no credit: a stale value would start the frame)
        t.both(lambda p: setattr(p.flow, "credits", [0] * p.flow.vcs))
        assert t.step()[0] == []
        plain.step()

    class Sub(CreditState):
        pass

    plain.both(lambda p: setattr(p.flow, "__class__", Sub))
    plain.step(expect_core=False)
    plain.both(lambda p: setattr(p.flow, "__class__", CreditState))
    plain.step()
