"""The compiled core keeps a few OpWaits (Op.__await__'s iterator, emu/csrc/host.h) that were let go
and makes the next awaits' from them: one made from a kept one behaves as a new one (not started,
its own request, its own answer), whatever state the one let go was in, and a kept one is never seen
by Python (not among the GC's objects; the ones still held are untouched)."""

import gc

import pytest

import emu.native as native
from emu.nodes.host.api import Op

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here")


class Req(Op):
    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n


def walk(it, op, answer):
    """A fresh await's iterator: not started, the request yielded once, the answer returned once."""
    with pytest.raises(TypeError, match="just-started"):
        it.send(1)
    assert it.send(None) is op
    with pytest.raises(StopIteration) as stop:
        it.send(answer)
    assert stop.value.value == answer
    with pytest.raises(StopIteration) as stop:
        it.send(answer)
    assert stop.value.value is None


@needs_core
def test_an_await_made_from_a_kept_one_is_as_new_whatever_state_it_was_let_go_in():
    assert type(Req.__await__).__name__ == "method_descriptor"  # (the core's)
    ops = [Req(i) for i in range(40)]
    # let go not started, after the request, after the answer, after a throw and after a close
    for k, op in enumerate(ops[:20]):
        it = op.__await__()
        if k % 5 >= 1:
            next(it)
        if k % 5 == 2:
            with pytest.raises(StopIteration):
                it.send("x")
        elif k % 5 == 3:
            with pytest.raises(KeyError):
                it.throw(KeyError("t"))
        elif k % 5 == 4:
            it.close()
        del it
    held = [op.__await__() for op in ops[20:32]]  # (more than are kept: some kept, some made anew)
    for op, it in zip(ops[20:32], held):
        walk(it, op, ("answer", op.n))
    del held
    for op in ops[32:]:
        walk(op.__await__(), op, op.n)
    # a request a kept one held is let go with it (nothing keeps it alive)
    import weakref

    class Weak(Op):
        __slots__ = ("__weakref__",)

    w = Weak()
    ref = weakref.ref(w)
    it = w.__await__()
    del w
    assert ref() is not None
    del it
    assert ref() is None


@needs_core
def test_a_kept_await_is_never_among_the_objects_python_sees():
    its = [Req(i).__await__() for i in range(16)]
    del its  # (some kept now)
    assert not any(type(o).__name__ == "OpWait" for o in gc.get_objects())
    held = Req(99).__await__()
    assert not any(o is held for o in gc.get_objects())  # (not tracked by the GC at all, held or not)
    assert held.send(None).n == 99


@needs_core
def test_apps_awaiting_in_turn_get_their_own_answers():
    """Two coroutines that await in turn (each await's iterator let go and made again, from the kept
    ones): each gets the answers sent to it, in order."""

    async def app(tag, n):
        got = []
        for i in range(n):
            got.append(await Req(i))
        return tag, got

    a, b = app("a", 30), app("b", 30)
    ra, rb = a.send(None), b.send(None)
    out = {}
    while len(out) < 2:
        for name, co, r in (("a", a, ra), ("b", b, rb)):
            if name in out:
                continue
            try:
                nxt = co.send((name, r.n))
            except StopIteration as stop:
                out[name] = stop.value
                continue
            if name == "a":
                ra = nxt
            else:
                rb = nxt
    assert out["a"] == ("a", [("a", i) for i in range(30)])
    assert out["b"] == ("b", [("b", i) for i in range(30)])
