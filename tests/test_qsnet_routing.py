"""QsNet's threshold-based adaptive routing (``routing=qsnet``, switch/routing/qsnet.py; spec 03)."""

import json

import pytest

from emu.config import ConfigError, SwitchSpec, parse_settings, settable_fields
from emu.front.cli import main
from emu.wire import MSG, PacketType, build_frame
from emu.wire.fabric import FLAG_SRCRT, RSVD_OFF
from emu.switch.forward import make_switch
from test_routing import _two_flows  # the same two flows the other policies are measured on
from emu.topologies.registry import build


class _View:
    """A port view with set pending frames per port (on the line, and waiting for credit) and ports down."""

    def __init__(self, line=None, waiting=None, down=()):
        self.line, self.wait, self.down = dict(line or {}), dict(waiting or {}), set(down)

    def up(self, port, now):
        return port not in self.down

    def queue(self, port, now, vc=None):
        if vc is not None:
            return (0, 0)
        n = self.line.get(port, 0)
        return (n, 1074 * n)

    def waiting(self, port):
        return self.wait.get(port, 0)


LIGHT = ("switch.adaptive_free=light", "switch.adaptive_heavy=least_loaded")
"""The reading before issue 44: every light link counts as free; none light, the least loaded (the
default reading, free = how busy the link is now: test_qsnet_free.py)."""


def _switch(*settings, name="s0", seed=0):
    """The rule read off a port view: ``adaptive_load=queue`` (the pending count: test_qsnet_pending.py)."""
    t = build("fattree:k=4,n=3", settings=parse_settings(["switch.routing=qsnet", "switch.adaptive_load=queue",
                                                         *LIGHT, *settings]))
    return t, make_switch(t.nodes[name], t, {"seed": seed})


def _frame(dst, route=None):
    f = build_frame(0, dst, PacketType.MSG, MSG.pack(1, 0, 4, 0) + b"abcd",
                    flags=FLAG_SRCRT if route is not None else 0)
    if route is not None:
        f = f[:RSVD_OFF] + bytes((route,)) + f[RSVD_OFF + 1:]
    return f


def _port(sw, dst=63, frame=None, now=0):
    return sw.receive(frame or _frame(dst), 0, now)[0][0]


def test_the_setup_s0_has_four_up_candidates_and_the_table_says_7():
    t, sw = _switch()
    assert sw.candidates[63] == (4, 5, 6, 7) and t.routes["s0"][63] == 7
    assert sw.candidates[1] == (1,)                            # down to its own host: nothing to choose
    assert sw.spec.adaptive_threshold == 2 and sw.spec.adaptive_pick == "first_free"


def test_first_free_takes_the_lowest_port_below_the_threshold():
    _, sw = _switch()
    assert _port(sw) == 7                                       # no port view: the static port
    sw.ports = _View()
    assert _port(sw) == 4                                       # idle: the lowest, not the table's
    sw.ports = _View({4: 2, 5: 1, 6: 0, 7: 0})
    assert _port(sw) == 5                                       # 4 has 2 pending: not below 2
    sw.ports = _View({4: 1}, waiting={4: 1, 5: 3})
    assert _port(sw) == 6                                       # frames waiting for credit count too
    assert _port(sw, 1) == 1                                    # one candidate: the table's


def test_the_threshold_is_a_setting():
    _, sw = _switch("switch.adaptive_threshold=4")
    sw.ports = _View({4: 3, 5: 4})
    assert _port(sw) == 4                                       # 3 < 4: lightly loaded
    _, sw = _switch("switch.adaptive_threshold=0")
    sw.ports = _View({4: 3, 5: 1, 6: 2, 7: 1})
    assert _port(sw) == 7                                       # 0: never light, least loaded (tie: table)


def test_next_free_rotates_per_switch_over_the_light_ports():
    _, sw = _switch("switch.adaptive_pick=next_free")
    sw.ports = _View()
    assert [_port(sw) for _ in range(6)] == [4, 5, 6, 7, 4, 5]
    assert [_port(sw, dst) for dst in (63, 16, 40, 63)] == [6, 7, 4, 5]   # one rotation whatever the destination
    sw.ports = _View({5: 2, 7: 5})
    assert [_port(sw) for _ in range(5)] == [6, 4, 6, 4, 6]     # loaded ports skipped
    _, other = _switch("switch.adaptive_pick=next_free", name="s1")
    other.ports = _View()
    assert _port(other) == 4                                    # its own state


def test_random_repeats_per_seed_and_picks_only_light_ports():
    def draws(seed, name="s0", view=None, n=300):
        _, sw = _switch("switch.adaptive_pick=random", name=name, seed=seed)
        sw.ports = view or _View()
        return [_port(sw, now=i) for i in range(n)]

    a = draws(1)
    assert draws(1) == a and draws(2) != a and draws(1, "s1") != a      # seeded per run and per switch
    assert sorted(set(a)) == [4, 5, 6, 7] and min(a.count(p) for p in range(4, 8)) > 40
    b = draws(1, view=_View({4: 5, 6: 2}))
    assert sorted(set(b)) == [5, 7] and min(b.count(5), b.count(7)) > 100
    assert set(draws(1, view=_View({4: 5, 5: 2, 6: 2}))) == {7}        # one light port: it


def test_none_below_the_threshold_takes_the_least_loaded_ties_to_the_table():
    for pick in ("first_free", "next_free", "random"):
        _, sw = _switch(f"switch.adaptive_pick={pick}")
        sw.ports = _View({4: 3, 5: 2, 6: 2, 7: 4})
        assert _port(sw) == 5, pick                             # least loaded, then the lowest
        sw.ports = _View({4: 3, 5: 2, 6: 3, 7: 2})
        assert _port(sw) == 7, pick                             # a tie goes to the static port
        sw.ports = _View({4: 3, 5: 4}, waiting={6: 2, 7: 3})
        assert _port(sw) == 6, pick


def test_down_ports_are_never_light_and_taken_only_when_all_are_down():
    for pick in ("first_free", "next_free", "random"):
        _, sw = _switch(f"switch.adaptive_pick={pick}")
        sw.ports = _View(down={4, 5})
        assert _port(sw) in (6, 7), pick
        sw.ports = _View({5: 9, 6: 9, 7: 9}, down={4})
        assert _port(sw) == 7, pick                             # idle but down: avoided; tie to the table
        sw.ports = _View({6: 4, 7: 9}, down={4, 5})
        assert _port(sw) == 6, pick
        sw.ports = _View(down={4, 5, 6, 7})
        assert _port(sw) == 7, pick                             # all down: the table's port


def test_a_source_chosen_route_is_taken_when_its_port_is_light():
    _, sw = _switch()
    sw.ports = _View()
    assert _port(sw, frame=_frame(63, route=2)) == 6            # route id digit 0 in base 4: the third
    assert _port(sw, frame=_frame(63, route=7)) == 7
    sw.ports = _View({6: 2})
    assert _port(sw, frame=_frame(63, route=2)) == 4            # not light: the pick decides


def test_settings_from_the_cli_and_refusals(tmp_path, capsys):
    names = {f for f, *_ in settable_fields()}
    assert {"switch.adaptive_threshold", "switch.adaptive_pick"} <= names
    s = parse_settings(["switch.adaptive_threshold=4", "switch.adaptive_pick=random"])
    assert s == {"switch": {"adaptive_threshold": 4, "adaptive_pick": "random"}}
    t = build("fattree:k=2,n=2", settings=s)
    assert {(n.spec.adaptive_threshold, n.spec.adaptive_pick) for n in t.switches} == {(4, "random")}
    with pytest.raises(ConfigError, match="adaptive_pick 'zigzag' is not one of first_free, next_free, random"):
        SwitchSpec(adaptive_pick="zigzag")
    for bad in (-1, 2**21, True):
        with pytest.raises(ConfigError, match="adaptive_threshold must be an integer within 0..2\\*\\*20"):
            SwitchSpec(adaptive_threshold=bad)
    with pytest.raises(ConfigError, match="must be an integer"):
        parse_settings(["switch.adaptive_threshold=two"])
    out = tmp_path / "r.json"
    assert main(["run", "--topo", "fattree:k=2,n=2", "--test", "pingall", "--set", "switch.routing=qsnet",
                 "--set", "switch.adaptive_threshold=4", "--set", "switch.adaptive_pick=random",
                 "--json", str(out)]) == 0
    (r,) = json.loads(out.read_text())["results"]
    assert r["ok"] and r["pairs"] == 12
    assert main(["run", "--topo", "star:n=2", "--test", "pingall", "--set", "switch.adaptive_pick=zigzag"]) == 2
    assert "refused: SwitchSpec.adaptive_pick 'zigzag' is not one of first_free, next_free, random" in capsys.readouterr().out


async def test_qsnet_in_a_cluster_spreads_a_hot_up_link():
    """Host messages (no per-packet ACK): the queue stand-in is the load that sees them."""
    static_ns, static_up = await _two_flows("static")
    q = "switch.adaptive_load=queue"
    assert static_up[3] == 0
    got = {}
    for pick in ("first_free", "next_free", "random"):
        ns, up = await _two_flows("qsnet", 1, 1, f"switch.adaptive_pick={pick}", q, *LIGHT)
        assert min(up.values()) > 8 and ns < static_ns, (pick, ns, static_ns, up)
        got[pick] = ns
    # virtual time, so exact: 64 frames in a row on one up link vs 32 and 32
    assert static_ns == 7584 and got == {"first_free": 4918, "next_free": 4832, "random": 4918}
    r1 = await _two_flows("qsnet", 1, 1, "switch.adaptive_pick=random", q, *LIGHT)
    assert await _two_flows("qsnet", 1, 2, "switch.adaptive_pick=random", q, *LIGHT) == r1
    # a huge threshold makes every link light: first_free then sends everything up the lowest port
    ns, up = await _two_flows("qsnet", 0, 1, "switch.adaptive_threshold=100000", q, *LIGHT)
    assert up[3] == 0 and up[2] == static_up[2] and ns == static_ns
