"""The compiled core's host calls (emu/csrc/hostapi.h: HostAPI.send, sleep and now) are the twins of
the Python in ``emu.nodes.host.api._PYTHON``: the same request (its class and every slot) or the same
error, for the plain cases the core takes and for everything it hands back."""

import sys

import pytest

import emu
import emu.native as native
import emu.nodes.nic.engine  # noqa: F401  (installs the core's host calls)
from emu.nodes.host import api as api_mod
from emu.nodes.host.api import HostAPI
from emu.topologies import build

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here")
PY = api_mod._PYTHON

SEND_CASES = [
    ("h", b"abc"), ("h", b"abc", 7), ("h", b"", 0xFFFFFFFF, 255), ("h", b"x", 3, 0), ("h", b"x", True),
    ("h", bytearray(b"ab")), ("h", memoryview(b"ab"), 1), ("h", b"x", -1), ("h", b"x", 1 << 32), ("h", b"x", 1, 256),
    ("h", b"x", 1, -1), ("h", b"x", 1, 1.0), ("h", "text"), ("nobody", b"x"), (0, b"x"), (1, b"x", 2, 3), ("h", b"x", 1, 2, 3),
    ("h", b"x", 1, 2, 9), ("h",), (), ("h", b"x", 1, 2, 3, 4), ("h", b"x", 1 << 70),
]
SEND_KW = [{"tag": 4}, {"vc": 2}, {"prio": None}, {"tag": 1, "vc": 1}, {"vc": 3, "tag": 2}, {"bogus": 1},
           {"tag": -1}, {"vc": 300}, {"tag": 2, "prio": 1}, {"data": b"x"}]
RECV_CASES = [((), {}), ((None,), {}), ((None, 3), {}), ((), {"tag": 3}), ((), {"src": None}), ((), {"tag": None}),
              (("h",), {}), (("h", 2), {}), ((), {"src": "h", "tag": 1}), ((None, "x"), {}), ((), {"bogus": 1}),
              ((None, 1, 2), {}), ((None,), {"src": None}), ((), {"src": "nobody"})]
ARRIVED_CASES = [((), {}), ((3,), {}), ((), {"tag": 3}), ((3.0,), {}), ((None,), {}), ((1, 2), {}), ((), {"bogus": 1}),
                 ((3,), {"tag": 3}), ((99,), {})]
SLEEP_CASES = [(0,), (5,), (10 ** 6,), (-1,), (2.5,), (True,), (2 ** 62,), (2 ** 62 - 1,), (2 ** 80,), ("5",), (), (1, 2)]


def outcome(fn, *args, **kw):
    """What a call gives: the request's class and slots, or its error's class and text."""
    try:
        r = fn(*args, **kw)
    except Exception as e:  # (the same error, the same words)
        return ("error", type(e).__name__, str(e))
    if isinstance(r, api_mod.Op):
        return (type(r).__name__, tuple((s, getattr(r, s, "<unset>")) for c in type(r).__mro__
                                        for s in getattr(c, "__slots__", ())))
    return ("value", r)


def compare(host, names):
    """Every case, the core's call beside Python's: the mismatches (none)."""
    bad = []
    for args in SEND_CASES:
        args = tuple(names[1] if isinstance(a, str) and a == "h" else a for a in args)
        a, b = outcome(PY["send"], host, *args), outcome(host.send, *args)
        if a != b:
            bad.append(("send", args, a, b))
    for kw in SEND_KW:
        a, b = outcome(PY["send"], host, names[1], b"k", **kw), outcome(host.send, names[1], b"k", **kw)
        if a != b:
            bad.append(("send", kw, a, b))
    a, b = outcome(PY["send"], host, names[1], b"k", 1, tag=2), outcome(host.send, names[1], b"k", 1, tag=2)
    if a != b:  # (the tag twice: Python's TypeError)
        bad.append(("send", "tag twice", a, b))
    for args in SLEEP_CASES:
        a, b = outcome(PY["sleep"], host, *args), outcome(host.sleep, *args)
        if a != b:
            bad.append(("sleep", args, a, b))
    for name in ("recv", "try_recv"):
        for args, kw in RECV_CASES:
            args = tuple(names[1] if isinstance(x, str) and x == "h" else x for x in args)
            a, b = outcome(PY[name], host, *args, **kw), outcome(getattr(host, name), *args, **kw)
            if name == "recv" and args == () and not kw:
                assert getattr(host, name)() is host._recv_any
            if a != b:
                bad.append((name, args, kw, a, b))
    for args, kw in ARRIVED_CASES:
        a, b = outcome(PY["arrived_ns"], host, *args, **kw), outcome(host.arrived_ns, *args, **kw)
        if a != b:
            bad.append(("arrived_ns", args, kw, a, b))
    a, b = outcome(PY["now"].fget, host), outcome(lambda: host.now)
    if a != b:
        bad.append(("now", a, b))
    return bad


def python_calls(fn, *args) -> int:
    """How many calls of the Python host calls ``fn(*args)`` made (0: the core took it)."""
    codes = {PY[n].__code__ for n in ("send", "sleep", "recv", "try_recv", "arrived_ns")} | {PY["now"].fget.__code__}
    seen = []
    sys.setprofile(lambda frame, event, arg: seen.append(1) if event == "call" and frame.f_code in codes else None)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return len(seen)


async def twin_app(host, names):
    """Inside a run (a plain Host, its NicEngine): the comparisons, at two times; the plain cases the
    core's (no Python call), the others Python's."""
    bad = compare(host, names)
    taken = [python_calls(host.send, names[1], b"x", 5, 1), python_calls(lambda: host.send(names[1], b"x", tag=5)),
             python_calls(host.sleep, 10),
             python_calls(lambda: host.now), python_calls(host.recv), python_calls(lambda: host.recv(tag=3)),
             python_calls(lambda: host.try_recv(tag=3)), python_calls(host.arrived_ns, 3),
             python_calls(host.send, names[1], bytearray(b"x")), python_calls(host.sleep, True),
             python_calls(host.recv, names[1])]
    assert taken == [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1], taken
    await host.sleep(1234)
    await host.send(names[(names.index(host.name) + 1) % len(names)], b"hello", 3)
    await host.sleep(5000)  # (the neighbours' messages in the inbox: arrived_ns and the receives find them)
    assert host.arrived_ns(3) is not None and host.arrived_ns(99) is None and host.arrived_ns() is not None
    bad += compare(host, names)
    m = await host.recv()
    return bad, host.now, m.src, m.tag


@needs_core
async def test_host_calls_are_pythons_in_a_run():
    assert type(HostAPI.__dict__["send"]).__name__ == "method_descriptor"  # (the core's: installed)
    t = build("star:n=3")
    async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
        res = await net.run({h: (twin_app, net.hosts) for h in net.hosts})
    for h, (bad, now, src, tag) in res.items():
        assert bad == [], (h, bad)
        assert now > 6234 and tag == 3


class _Nic:
    loaded = ()
    tracer = None
    now = 77

    def verb_names(self):
        return []

    def verb_owner(self, name):
        return None


class _Engine:
    """Not a Host: every call is Python's (through the core's methods)."""

    def __init__(self):
        self.nic, self.name, self.host_ids, self._inbox, self.current = _Nic(), "a", {"a": 0, "b": 1}, [], None

    @property
    def now(self):
        return 77

    def resolve(self, host):
        if host not in self.host_ids:
            raise ValueError(f"unknown host {host!r}")
        return self.host_ids[host]


@needs_core
def test_the_core_s_calls_have_python_s_docs_and_signatures():
    import inspect

    for name in ("send", "sleep", "recv", "try_recv", "arrived_ns"):
        assert PY[name].__doc__ in getattr(HostAPI, name).__doc__
        assert list(inspect.signature(getattr(HostAPI, name)).parameters)[1:] == \
            list(inspect.signature(PY[name]).parameters)[1:]
    assert HostAPI.now.__doc__ == PY["now"].__doc__


@needs_core
def test_another_engine_is_pythons():
    api = HostAPI(_Engine())
    assert compare(api, ["a", "b"]) == []
    assert api.now == 77 and api.sleep(3).ns == 3 and api.send("b", b"x", 2).dst == 1


@needs_core
async def test_a_changed_module_global_is_pythons(monkeypatch):
    """api.Send replaced (as a plug-in or test may): the core declines, Python's sends the new class."""

    class MySend(api_mod.Send):
        __slots__ = ()

    async def app(host, names):
        monkeypatch.setattr(api_mod, "Send", MySend)
        monkeypatch.setattr(api_mod, "HORIZON_NS", 1000)
        got = type(host.send(names[0], b"x")).__name__
        try:
            host.sleep(5000)
        except ValueError as e:
            err = str(e)
        monkeypatch.undo()
        return got, err, type(host.send(names[0], b"x")).__name__, host.sleep(5000).ns

    t = build("star:n=2")
    async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
        res = await net.run({net.hosts[0]: (app, net.hosts)})
    got, err, after, ns = res[net.hosts[0]]
    assert got == "MySend" and "at or past the end of virtual time" in err
    assert after == "Send" and ns == 5000


@needs_core
def test_a_second_setup_keeps_python_s_specification():
    """api_setup again (the core's methods installed already): the Python ones it falls back on are
    still ``_PYTHON``'s, not its own."""
    CORE.api_setup(HostAPI, vars(api_mod))
    api = HostAPI(_Engine())
    assert compare(api, ["a", "b"]) == []
    assert api.sleep(4).ns == 4


@needs_core
def test_the_await_slot_of_the_api_s_requests():
    """A request class of the API awaits through the core's slot (OpWait straight); a subclass made
    later, or one given an ``__await__`` of its own, awaits as Python says."""

    class Later(api_mod.Sleep):
        __slots__ = ()

    class Own(api_mod.Sleep):
        __slots__ = ()

    def own_await(self):
        got = yield ("own", self)
        return ("own got", got)

    Own.__await__ = own_await

    async def app():
        a = await api_mod.Sleep(5)
        b = await Later(6)
        c = await Own(7)
        return a, b, c

    coro = app()
    first = coro.send(None)
    assert type(first) is api_mod.Sleep and first.ns == 5
    second = coro.send("A")
    assert type(second) is Later and second.ns == 6
    third = coro.send("B")
    assert third[0] == "own" and third[1].ns == 7
    try:
        coro.send("C")
    except StopIteration as stop:
        assert stop.value == ("A", "B", ("own got", "C"))
    else:
        raise AssertionError("the app did not end")
    assert type(api_mod.Send.__await__).__name__ == "method_descriptor"
