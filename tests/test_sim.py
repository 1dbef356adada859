"""The engine test harness users get (emu.sim.EngineNet): seeded drop, duplicate, reorder, corrupt."""

import pytest

import apps
from emu.config import ConfigError, HostSpec
from emu.sim import EngineNet
from emu.wire import HDR_LEN, MSG
from emu.topologies import star


def _send(net, size=20_000):
    net.start({"h0": (apps.send_to, "h1", size, 3), "h1": (apps.recv_n, 1)})
    net.step_all()
    return net


def _offsets(net, node):
    return [MSG.unpack(f, HDR_LEN)[3] for t, n, p, f in net.delivered if n == node]


def test_no_faults_delivers_every_frame_once_in_order():
    net = _send(EngineNet(star(2, host=HostSpec(mtu_bytes=1000))))
    assert _offsets(net, "h1") == list(range(0, 20_000, 1000))
    assert net.faults == {"dropped": 0, "duplicated": 0, "reordered": 0, "corrupted": 0, "fcs_errors": 0}


def test_faults_are_seeded_and_counted():
    runs = [_send(EngineNet(star(2, host=HostSpec(mtu_bytes=500)), seed=s, drop=0.1, duplicate=0.1, reorder=0.2,
                            corrupt=0.1)) for s in (4, 4, 5)]
    assert runs[0].delivered == runs[1].delivered != runs[2].delivered
    f = runs[0].faults
    assert all(f[k] > 0 for k in f) and f["fcs_errors"] == f["corrupted"]


def test_drop_everything_delivers_nothing():
    net = _send(EngineNet(star(2), drop=1.0))
    assert net.delivered == [] and net.faults["dropped"] == 20  # 20,000 bytes in 1 KiB frames


def test_duplicate_delivers_twice():
    net = _send(EngineNet(star(2, host=HostSpec(mtu_bytes=1000)), duplicate=1.0), size=3000)
    # h0 -> s0 -> h1: each of the 3 frames doubled on the first link, each copy doubled again
    assert sorted(_offsets(net, "h1")) == sorted([0, 1000, 2000] * 4)
    assert net.faults["duplicated"] == 3 + 6


def test_reorder_lets_later_frames_overtake():
    net = _send(EngineNet(star(2, host=HostSpec(mtu_bytes=500)), seed=2, reorder=0.3, reorder_ns=5000))
    got = _offsets(net, "h1")
    assert sorted(got) == list(range(0, 20_000, 500)) and got != sorted(got)


def test_corrupt_is_caught_by_the_fcs_unless_the_check_is_off():
    caught = _send(EngineNet(star(2), corrupt=1.0), size=100)
    assert caught.delivered == [] and caught.faults["fcs_errors"] == caught.faults["corrupted"] == 1
    raw = _send(EngineNet(star(2), corrupt=1.0, check_fcs=False), size=100)
    assert len(raw.delivered) == 2 and raw.faults["fcs_errors"] == 0  # damaged bytes reach the engines


def test_bad_fault_parameters_are_refused():
    with pytest.raises(ConfigError, match="duplicate must be a probability"):
        EngineNet(star(2), duplicate=2)
