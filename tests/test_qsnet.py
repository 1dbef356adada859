"""The QsNet federated network family (spec 03): node-switch chassis and carved top switches."""

import random

import pytest

import emu
from emu.front.cli import main
from emu.topologies.deadlock import dependency_cycle
from emu.topologies.estimate import estimate
from emu.topologies.registry import build


@pytest.mark.parametrize("spec,chassis,tops,routers", [
    ("qsnet:nodes=128", 1, 0, 0), ("qsnet:nodes=200", 2, 128, 8), ("qsnet:nodes=1024", 8, 128, 32),
    ("qsnet:nodes=1000,bisection=0.5", 8, 64, 16), ("qsnet:nodes=4096", 32, 128, 128),
    ("qsnet:nodes=640", 5, 128, 22)])   # radix-5 top switches: 6 per router, the last router partly used
def test_shape_as_the_source_builds_it(spec, chassis, tops, routers):
    t = build(spec)
    t.validate()
    lower_upper = [s for s in t.switches if "chassis" in s.info]
    top = [s for s in t.switches if s.info.get("stage") == 3]
    assert len({s.info["chassis"] for s in lower_upper}) == chassis and len(lower_upper) == 16 * chassis
    assert len(top) == tops and len({s.info["router"] for s in top}) == routers
    assert all(s.info["ports"] == chassis and t.nports(s.name) == chassis for s in top)
    for s in lower_upper:  # radix-32 routers: 16 down, 16 up (the upper ones of a lone chassis use only 16)
        assert t.nports(s.name) <= 32
    name, raw = spec.split(":")[0], dict(kv.split("=") for kv in spec.split(":")[1].split(","))
    est = estimate(name, {"nodes": int(raw["nodes"]), "bisection": float(raw.get("bisection", 1))})
    assert (est.hosts, est.switches, est.links, est.route_entries) == (
        len(t.hosts), len(t.switches), len(t.links), sum(len(v) for v in t.routes.values()))


@pytest.mark.parametrize("spec", ["qsnet:nodes=100", "qsnet:nodes=300", "qsnet:nodes=1000,bisection=0.5"])
def test_routes_are_up_down_within_the_diameter_and_deadlock_free(spec):
    t = build(spec)
    t.validate()
    rng = random.Random(1)
    hosts = t.host_names()
    longest = 0
    for _ in range(300):
        a, b = rng.sample(hosts, 2)
        path = t.route(a, b)
        longest = max(longest, len(path) - 1)
        stages = [t.nodes[n].info.get("stage", 0) for n in path[1:-1]]
        peak = stages.index(max(stages))
        assert stages[:peak + 1] == sorted(stages[:peak + 1]) and stages[peak:] == sorted(stages[peak:], reverse=True)
    assert longest <= t.diameter
    assert dependency_cycle(t) == []


def test_qsnet_links_carry_20_gbit_of_data_and_routers_take_35_ns_unless_told_otherwise():
    t = build("qsnet:nodes=200")
    assert {lk.spec.bandwidth_bps for lk in t.links} == {20_000_000_000}
    assert {s.spec.processing_delay_ns for s in t.switches} == {35}
    u = build("qsnet:nodes=200,bandwidth_gbps=40", settings={"switch": {"processing_delay_ns": 20}})
    assert {lk.spec.bandwidth_bps for lk in u.links} == {40_000_000_000}
    assert {s.spec.processing_delay_ns for s in u.switches} == {20}
    assert {lk.spec.bandwidth_bps for lk in build("fattree:k=2,n=2").links} == {100_000_000_000}  # others keep theirs


async def test_a_qsnet_runs_and_emu_topo_reports_chassis_and_cables(capsys):
    async with emu.Cluster("qsnet:nodes=200") as net:
        rtt = await net["h0"].ping("h199")    # across chassis: 6 links each way
        assert rtt > 0
    assert main(["topo", "qsnet:nodes=1024"]) == 0
    out = capsys.readouterr().out
    for words in ("node switches (chassis of routers)", "8 x 16", "128 of radix 8", "cables between chassis",
                  "1024", "carved out of routers", "32"):
        assert words in out


def test_bad_qsnet_parameters_are_refused():
    for spec, why in [("qsnet:nodes=5000", "within 2..4096"), ("qsnet:nodes=256,bisection=0.3", "bisection must be 1"),
                      ("qsnet:bisection=0.5", "missing parameter nodes")]:
        with pytest.raises(emu.ConfigError, match=why):
            build(spec)
