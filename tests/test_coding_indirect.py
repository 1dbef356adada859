"""Spec 02 on indirect networks (hosts on switches): the coded broadcast on the hosts' rank line with the
XOR at host INs, its hops along the topology's routes, the model beside it; and the experiment
scripts of spec 02 at a tiny size (group shapes measured, every scheme at scale, indirect networks)."""

import numpy as np
import pytest

from emu.config import ConfigError
from emu.nodes.collectives.coding import Scheme, plan
from emu.nodes.collectives.coding.indirect import default_shape, hops, line, route_links
from emu.sim import EngineNet
from emu.topologies import build
from emu.wire import PacketType, parse_frame


def payload(rank: int, size: int = 24) -> np.ndarray:
    return np.random.default_rng([rank, 5]).integers(0, 256, size, dtype=np.uint8)


async def app(host, scheme):
    from emu.nodes.collectives.coding.run import broadcast
    from emu.nodes.collectives.comm import Comm

    c = Comm(host)
    y = await broadcast(c, payload(c.rank), scheme)
    return y, c.nc_stats, c.last_algo


def _run(spec, scheme):
    from emu.nodes.collectives.coding.timing import figures

    t = build(spec)
    net = EngineNet(t)
    names = t.host_names()
    res = net.run({h: (app, scheme) for h in names})
    crossings = unicasts = 0
    for _t, node, _p, f in net.delivered:
        if parse_frame(f)[4] == PacketType.NC:
            crossings += 1
            unicasts += t.nodes[node].kind == "host"
    return t, res, figures(t, [res[h][1] for h in names]), crossings - 2 * unicasts, unicasts


@pytest.mark.parametrize("spec", ["star:n=16", "fattree:k=4,n=2", "fattree:k=2,n=3"])
@pytest.mark.parametrize("algo", ["nc", "all_at_once_coded", "combine", "tree", "all_at_once"])
def test_coding_on_an_indirect_network_decodes_and_its_hops_follow_the_routes(spec, algo):
    t, res, f, router_hops, unicasts = _run(spec, Scheme(algo))
    n = len(t.hosts)
    ref = np.stack([payload(r) for r in range(n)])
    assert all(np.array_equal(res[h][0], ref) for h in t.host_names())
    coded = algo not in ("tree", "all_at_once")
    p = plan(line(n), Scheme(algo, default_shape(n) if coded else None))
    assert (router_hops, unicasts) == (hops(t, p), p.unicasts)
    if coded:
        assert "XOR at host INs" in res["h0"][2] and f"groups {default_shape(n)[0]} " in res["h0"][2]
    assert f["execution_ns"] == sum(f["steps"].values()) > 0 and f["model_execution_ns"] > 0
    if spec.startswith("star"):
        assert router_hops == 0  # one switch: no switch-to-switch link


def test_the_rank_line_s_groups_are_a_fat_tree_s_leaves():
    t = build("fattree:k=4,n=2")
    assert default_shape(16) == (4,)
    walk = route_links(t)
    for g in range(4):  # the four hosts of a group share a leaf: no switch-to-switch link between them
        assert all(walk(4 * g + i, 4 * g + j) == [] for i in range(4) for j in range(4))
    assert len(walk(0, 15)) == 2  # across leaves: up to a spine and down


def test_one_root_all_at_once_on_a_star_is_the_model_to_the_nanosecond():
    """h0's 15 packets leave its host link one after another and meet nothing else: the injection
    channel binds, the model's case exactly."""
    t, res, f, router_hops, unicasts = _run("star:n=16", Scheme("all_at_once", sources=(0,)))
    assert unicasts == 15 and router_hops == 0
    assert f["steps"] == f["model_steps"] and f["execution_ns"] == f["model_execution_ns"]
    assert f["model_binds"]["all_at_once r0"] == "injection at node 0 (15 packets)"


def test_a_prime_host_count_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="7 has no divisor between 2 and 6.*not prime"):
        default_shape(7)


def test_coding_on_a_fat_tree_from_the_command_line(capsys):
    from emu.front.cli import main

    assert main(["run", "--topo", "fattree:k=4,n=2", "--test", "mcast_all", "--algo", "nc"]) == 0
    out = capsys.readouterr().out
    assert "algo=nc(tree, groups 4 of consecutive ranks, XOR at host INs)" in out
    assert "execution_ns=" in out and "model_execution_ns=" in out and "result=equal to numpy" in out
    assert main(["run", "--topo", "star:n=7", "--test", "mcast_all", "--algo", "nc"]) != 0
    err = capsys.readouterr()
    assert "7 has no divisor" in err.out + err.err and "Traceback" not in err.out + err.err


# -- the scripts, at a tiny size ---------------------------------------------------------------------
def test_nc_groups_measures_every_group_shape(tmp_path):
    from load_script import load

    rows = load("nc_groups").main(["--k", "4", "--jobs", "1", "--out", str(tmp_path)])
    assert {r["shape"] for r in rows} == {"1x2", "2x1", "1x4", "2x2", "4x1", "2x4", "4x2"}
    for r in rows:  # measured hops are the analytic count (asserted in the script), time measured per shape
        assert r["hops"] == r["analytic"] == r["hops_B"] + r["hops_D"] + r["hops_E"] + r["hops_F"]
        assert r["exec_ns"] == sum(int(x) for x in r["phase_ns"].split("/")) > 0 and r["model_ns"] > 0
    assert len({r["exec_ns"] for r in rows}) > 1
    assert (tmp_path / "nc_groups_k4_nc_tree.csv").stat().st_size > 0


def test_nc_scale_runs_every_scheme_side_by_side(tmp_path):
    from load_script import load

    rows = load("nc_scale").main(["--k", "4", "--jobs", "2", "--out", str(tmp_path)])
    by = {r["scheme"]: r for r in rows}
    assert list(by) == ["tree", "all_at_once", "nc", "all_at_once_coded", "nc_every", "nc_recursive", "combine"]
    for r in rows:
        assert r["hops"] == r["analytic"] and r["floor"] == 16 * 15 and r["exec_ns"] > 0 and r["model_ns"] != ""
    assert by["all_at_once"]["hops"] == 16 * 4 * (4 ** 3 - 4) // 3 * 2 // 4  # n k^(2(n-1)) L1 = 2 * 16 * 20


def test_nc_indirect_compares_coding_with_the_baselines_on_the_same_nics(tmp_path, capsys):
    from load_script import load

    rows = load("nc_indirect").main(["--topos", "fattree:k=4,n=2", "--schemes", "tree,all_at_once,nc",
                                     "--groups", "0,8", "--out", str(tmp_path)])
    by = {(r["scheme"], r["GxM"]): r for r in rows}
    assert set(by) == {("tree", ""), ("all_at_once", ""), ("nc", "4x4"), ("nc", "2x8")}
    assert all(r["hops"] == r["route_hops"] and r["unicasts"] == r["floor"] == 240 for r in rows)
    assert by[("nc", "4x4")]["hops"] < by[("all_at_once", "")]["hops"]  # coding cuts the switch hops
    assert "fattree:k=4,n=2: fastest coded nc" in capsys.readouterr().out
