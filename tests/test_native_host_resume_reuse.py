"""A resume the core runs from a timer (emu/csrc/host.h: nic_on_timer) hands its bound ``host.resume``
and its (proc, value) tuple to the app's next timer (resume_at) when they are the same: the next
resume's value is still its own -- a receive with an overhead right after a sleep gets its message, a
send's overhead its None -- and every figure is pure Python's."""

import pytest

import emu
import emu.native as native
from emu.topologies import build

CORE = native.CORE
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here")


async def sleepy_app(host, hosts):
    me = hosts.index(host.name)
    right = hosts[(me + 1) % len(hosts)]
    out = []
    for k in range(3):
        await host.send(right, bytes([k, me]) * 30, tag=k)  # (a send overhead: resumed with None)
        await host.sleep(5000)  # (the left's message arrives meanwhile: a timer's (proc, None) resume)
        m = await host.recv(tag=k)  # (in the inbox: resumed after the overhead with the message)
        out.append((m.src, m.tag, m.data, host.now))
        await host.sleep(7 + k)
        out.append(await host.try_recv() is None)
    return out


async def _run(pure: bool, monkeypatch):
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    t = build("star:n=3", settings={"host": {"send_overhead_ns": 150, "recv_overhead_ns": 90}})
    async with emu.Cluster(t, run=emu.RunConfig(direct=True)) as net:
        res = await net.run({h: (sleepy_app, net.hosts) for h in net.hosts})
        return res, net.metrics.end_ns - net.metrics.start_ns


@needs_core
async def test_a_resume_after_a_sleep_gets_its_own_value_in_the_core(monkeypatch):
    pure = await _run(True, monkeypatch)
    before = CORE.counts()
    compiled = await _run(False, monkeypatch)
    assert CORE.counts()["host_steps"] > before["host_steps"]  # (the core stepped the apps)
    assert compiled == pure
    assert all(len(r) == 6 and r[0][2] for r in pure[0].values())
