"""The compiled core keeps the Send, Sleep and TryRecv requests the host carried out and held the last
reference to, and makes the host API's next ones from them (emu/csrc/host.h ho_op_drop/ho_op_take):
an application sees nothing of it -- a request it holds is never taken and never changes, a kept one
is never among the objects Python sees, every request made from a kept one has exactly the slots it
was given, and the run's figures are pure Python's."""

import gc

import pytest

import emu
import emu.native as native
from emu.nodes.host.api import Send, Sleep, TryRecv
from emu.topologies import build

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here")


def slots(op) -> tuple:
    return tuple(getattr(op, s, "<unset>") for c in type(op).__mro__ for s in getattr(c, "__slots__", ()))


def unset_requests() -> int:
    """Requests Python can see with a slot unset (a kept one would be: none)."""
    return sum(1 for o in gc.get_objects() if type(o) in (Send, Sleep, TryRecv) and "<unset>" in slots(o))


async def keeping_app(host, names):
    me = names.index(host.name)
    right = names[(me + 1) % len(names)]
    held = [host.send(right, bytes([me, i]) * 3, 40 + i, i % 2) for i in range(3)]
    held += [host.sleep(7 + i) for i in range(2)] + [host.try_recv(tag=99)]
    before = [slots(op) for op in held]
    log = []
    for i in range(12):  # (none held by the app: each kept after it is carried out, and made again)
        await host.sleep(13 + i)
        await host.send(right, bytes([me, 100 + i]) * 2, 1 + i % 3)
        m = await host.try_recv(tag=1 + (i + 1) % 3)
        log.append((host.now, None if m is None else (m.src, m.tag, m.data)))
        log.append(slots(host.send(right, bytes([i]), i, 1)))  # (made, read and let go by Python)
        log.append(slots(host.sleep(i)) + slots(host.try_recv(tag=i)))
    unset = unset_requests()
    assert [slots(op) for op in held] == before  # (held: never taken, never changed)
    for op in held:  # (and they still work)
        log.append((await op) is None)
    while (m := await host.try_recv()) is not None:
        log.append((m.src, m.tag, m.data, m.t_ns))
    await host.sleep(3000)
    while (m := await host.try_recv()) is not None:
        log.append((m.src, m.tag, m.data, m.t_ns))
    return log, unset, host.now


async def run(pure: bool, monkeypatch):
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    t = build("star:n=3", settings={"host": {"send_overhead_ns": 0, "recv_overhead_ns": 0}})
    async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
        res = await net.run({h: (keeping_app, net.hosts) for h in net.hosts})
        m = net.metrics
        return res, (m.hop_count, m.frames, m.end_ns - m.start_ns)


@needs_core
async def test_kept_requests_are_out_of_sight_and_the_run_is_pure_pythons(monkeypatch):
    pure = await run(True, monkeypatch)
    steps = CORE.counts()["host_steps"]
    compiled = await run(False, monkeypatch)
    assert CORE.counts()["host_steps"] > steps  # (the core stepped the apps)
    assert compiled == pure
    for log, unset, _now in compiled[0].values():
        assert unset == 0
        assert sum(1 for x in log if isinstance(x, tuple) and len(x) == 4) > 0  # (messages received)
