"""The core's forgetting (emu/csrc/fpool.h: forget_elements, forget_ports, retained_release) is the
twin of Python's ``el.forget(w)`` (Element.forget, LinkSender.forget): after every window's forget
each link keeps exactly the retained entries Python keeps, and an entry or a datagram someone holds
from Python keeps its contents through the rest of the run (only what nobody else holds is taken
for use again: the entry by the next take, the datagram's buffer by the pool)."""

import pathlib
import secrets
import subprocess
import sys
from collections import deque

import pytest
import trio

import emu
import emu.domain
import emu.native as native
from emu.link import LinkSender
from emu.port import OutPort

CORE = native.CORE
FORGET = emu.domain.Domain._forget  # (Domain._window's, watched below)
needs_core = pytest.mark.skipif(CORE is None, reason="the compiled core is not built here")


async def chatter(host, hosts, n):
    """Two hosts sending to each other in turn, messages of lengths the pool keeps (over 512 bytes)."""
    peer = hosts[1 - hosts.index(host.name)]
    for k in range(n):
        await host.send(peer, bytes([k]) * (600 + 40 * (k % 3)), tag=k)
        await host.recv()
    return host.now


def _snap(entry):
    """A copy of a retained entry that shares nothing with it (its group's bytes copied)."""
    w, first, last, g = entry
    group = [bytes(bytearray(x)) for x in g] if isinstance(g, list) else bytes(bytearray(g))
    return (int(str(w)), int(str(first)), int(str(last)), group)


async def _run(pure: bool, monkeypatch):
    """A sockets run of 2 hosts: after each window's forget, every link's retained entries (copied);
    every third forget, one port's first entry and another's datagram held here, checked at the end."""
    monkeypatch.setattr(native, "CORE", None if pure else CORE)
    log, held = [], []

    def watched(self, w):
        ports = [p for el in self.elements for p in el.out_ports if p.link.retained]
        if len(log) % 3 == 0 and len(ports) >= 2:
            held.append((ports[0].link.retained[0], _snap(ports[0].link.retained[0])))  # (the entry)
            g = ports[-1].link.retained[0][3]
            held.append((g, _snap((0, 0, 0, g))[3]))  # (its datagram alone)
        FORGET(self, w)
        log.append((w, [[_snap(e) for e in p.link.retained] for el in self.elements for p in el.out_ports]))

    monkeypatch.setattr(emu.domain.Domain, "_forget", watched)
    monkeypatch.setattr(secrets, "randbits", lambda k: 0x5EED0001)  # (the cluster id in every record: one)
    async with emu.Cluster("star:n=2", run=emu.RunConfig(direct=False)) as net:
        await net.run({h: (chatter, net.hosts, 60) for h in net.hosts})
    for obj, copy in held:  # (nothing held from Python was emptied, used again or written over)
        assert (_snap(obj) if isinstance(obj, tuple) else _snap((0, 0, 0, obj))[3]) == copy
    return log, len(held)


def check_each_windows_forget_keeps_what_pythons_keeps():
    with pytest.MonkeyPatch.context() as mp:
        pure, n_pure = trio.run(_run, True, mp)
        reused = CORE.counts()["reused"]
        compiled, n_compiled = trio.run(_run, False, mp)
    assert CORE.counts()["reused"] > reused + 100  # (buffers let go taken again: the pool was used)
    assert len(pure) > 20 and n_pure >= 10 and n_compiled == n_pure
    assert any(any(k) for _, k in pure)  # (entries retained across forgets: some left each time)
    assert compiled == pure


def _sender(k: int) -> tuple[OutPort, LinkSender]:
    a = LinkSender(0xC0FFEE, k)
    return OutPort(index=0, name="p", iface=0, link_id=k, peer="x", peer_port_name="x-p", latency_ns=100,
                   bandwidth_bps=10**10, link=a), a


def check_long_retained_lists_and_held_entries_as_python():
    """More entries than one cut takes (16), more left behind than are moved by hand, entries the
    core's take made and Python's, an entry and a datagram held here: the core's forget of each
    window leaves what LinkSender.forget leaves, and what is held keeps its contents."""
    ports = [_sender(k)[0] for k in range(3)]
    twins = [LinkSender(0xC0FFEE, k) for k in range(3)]
    for w in range(12):
        for k, (p, t) in enumerate(zip(ports, twins)):
            for j in range(3 + 7 * k):  # (3, 10 and 17 entries a window)
                frames = [bytes([w, j, k]) * (200 + 50 * (j % 2))]  # (600 and 750 bytes: few lengths)
                CORE.take(p.link, deque((0, 5 + i, bytes(bytearray(f)), False) for i, f in enumerate(frames)), 100, w)
                t.take(deque((0, 5 + i, bytes(bytearray(f)), False) for i, f in enumerate(frames)), 100, w)
            p.link.retained.append((w, -1, -1, [b"part", bytes(700)]))  # (Python's entry: a group of parts)
            t.retained.append((w, -1, -1, [b"part", bytes(700)]))
    assert [list(p.link.retained) for p in ports] == [list(t.retained) for t in twins]
    held = [(ports[2].link.retained[40], _snap(ports[2].link.retained[40]))]
    dg = ports[1].link.retained[11][3]
    held_dg = bytes(bytearray(dg))
    cuts = set()
    for r, upto in enumerate((-1, 0, 2, 3, 7, 9, 11, 12, 16, 20, 30)):
        for t in twins:  # (what each cut is: some entries, and how many left behind)
            n = sum(1 for e in t.retained if e[0] <= upto)
            cuts.add((n > 16, n > 0, len(t.retained) - n > 16, len(t.retained) - n > 0))
        CORE.forget_elements([_Holder(list(ports))], upto)
        for t in twins:
            t.forget(upto)
        assert [[_snap(e) for e in p.link.retained] for p in ports] == [[_snap(e) for e in t.retained] for t in twins]
        for j in range(3):  # (each cut's entries and buffers taken again by the next datagrams)
            n = 3 * (200 + 50 * (j % 2))
            for p in ports:
                CORE.take(p.link, deque([(0, 1, bytes([j]) * n, False)]), 100, 13 + r)
            for t in twins:
                t.take(deque([(0, 1, bytes([j]) * n, False)]), 100, 13 + r)
    assert cuts == {(True, True, True, True),  # (more than one cut of 16, more than 16 moved by memmove)
                    (False, True, True, True), (False, True, False, True),  # (a few, the rest moved: either way)
                    (False, True, False, False), (False, False, True, True)}  # (all; nothing)
    assert [len(t.retained) for t in twins] == [3, 3, 3]  # (window 23's: the rest forgotten)
    assert [_snap(x) for x, _ in held] == [c for _, c in held] and dg == held_dg
    assert CORE.counts()["reused"] > 50  # (the pool was used: datagrams let go, taken again)


class _Holder:
    """Not an Element: forget_elements calls its method, which hands its ports to the core's forget."""

    def __init__(self, ports):
        self.ports = ports

    def forget(self, w):
        CORE.forget(self.ports, w)


@needs_core
@pytest.mark.parametrize("check", ["check_each_windows_forget_keeps_what_pythons_keeps",
                                   "check_long_retained_lists_and_held_entries_as_python"])
def test_forget(check):
    """Each check in a process of its own: a pool nothing else has used (it keeps 8 lengths: other
    tests' would leave it no room for these)."""
    code = f"import sys; sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r}); import test_forget_twin as t; t.{check}()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


@needs_core
@pytest.mark.parametrize("kind", [list, deque])
@pytest.mark.parametrize("bad", [("w", 1, 2, b""), (), "not a tuple"])
def test_a_retained_entry_not_of_a_window_is_refused(kind, bad):
    """An entry whose first item is not a window's int: a TypeError naming it, from the list's
    path and from any other sequence's; the entry stays (the list's path checks a cut's entries
    before it cuts: the one before it stays too)."""
    p, a = _sender(0)
    a.retained = kind([(1, -1, -1, bytes(64)), bad])
    with pytest.raises(TypeError, match=r"a retained entry is not \(window, \.\.\.\)"):
        CORE.forget([p], 5)
    assert list(a.retained)[-1] == bad and len(a.retained) == (2 if kind is list else 1)
