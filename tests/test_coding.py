"""Spec 02: coded frames, plans, the analytic hop counter against frames, decoding bit for bit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.sim import EngineNet
from emu.wire import HDR_LEN, PacketType, build_frame, parse_frame
from emu.wire.coding import NC, NcHeader, NcKind
from emu.nodes.collectives.coding import Scheme, Step, count, plan
from emu.nodes.collectives.coding.hops import all_to_all_closed, tree_all_to_all_closed
from emu.nodes.collectives.coding.planner import best_shape, report
from emu.nodes.collectives.comm import Comm
from emu.config import merge_settings
from emu.topologies import build as _build
from emu.topologies.registry import IDEAL_ROUTER


def build(spec, settings=None, **kw):
    """These tests are of coding, not of routers: meshes and tori get the ideal output-queued switch
    (the engine harness has no other) unless a test's settings say otherwise."""
    return _build(spec, settings=merge_settings(IDEAL_ROUTER, settings), **kw)
from emu.topologies.grid import Grid, box_tree_hops, line_halving


# -- the wire ----------------------------------------------------------------------------------------
def test_the_coding_header_codec_is_the_scapy_declaration_golden_vector():
    from scapy.all import raw

    h = NcHeader(step=Step.D, level=1, kind=NcKind.XOR, group=3, a=4, b=5, root=6, parts=1, stamp=0x01020304)
    assert raw(h).hex() == "0211" "0003" "0004" "0005" "0006" "0001" "01020304"
    assert NC.pack(Step.D, 1, NcKind.XOR, 3, 4, 5, 6, 1, 0x01020304) == raw(h)
    assert NC.unpack(raw(h), 0) == (2, 1, 1, 3, 4, 5, 6, 1, 0x01020304)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=16, max_size=16))
def test_any_16_bytes_decode_the_same_in_scapy_and_the_codec(b):
    from scapy.all import raw

    vals = NC.unpack(b, 0)
    assert NC.pack(*vals) == b == raw(NcHeader(b))


# -- geometry and plans ------------------------------------------------------------------------------
def test_recursive_halving_on_a_line_of_a_power_of_two_costs_k_over_2_log2_k_from_any_root():
    g = Grid(16, 1, False)
    ax = tuple(range(16))
    for root in range(16):
        edges = line_halving(16, root)
        assert len(edges) == 15 and {r for _k, _s, r in edges} == set(range(16)) - {root}
        assert box_tree_hops(g, (ax,), (root,)) == 8 * 4


@pytest.mark.parametrize("k,n,wrap", [(4, 2, False), (4, 2, True), (8, 2, False), (8, 2, True), (16, 2, False),
                                      (16, 2, True), (6, 2, False), (5, 2, True), (4, 3, False), (4, 3, True)])
def test_the_analytic_counter_equals_the_plans_unicasts_for_every_scheme(k, n, wrap):
    """The counter works from closed forms and per-dimension sums; the plan lists every unicast."""
    g = Grid(k, n, wrap)
    schemes = [Scheme("all_at_once"), Scheme("tree"), Scheme("nc"), Scheme("nc", mcast="all_at_once"),
               Scheme("nc_every"), Scheme("combine"), Scheme("nc", sources=(0, 3, k + 1, g.size - 1)),
               Scheme("tree", sources=(1,))]
    if k % 4 == 0:
        schemes += [Scheme("nc_recursive"), Scheme("nc_recursive", sources=(1, 2, k, g.size - 2))]
    for sc in schemes:
        p, c = plan(g, sc), count(g, sc)
        per: dict[str, int] = {}
        for node, rules in p.rules.items():
            for lst in rules.values():
                for step, _lvl, dst, _root in lst:
                    per[Step.NAMES[step]] = per.get(Step.NAMES[step], 0) + g.distance(node, dst)
        assert per == c.hops, (sc, per, c.hops)
        assert p.unicasts == c.total_unicasts
    if not k & (k - 1):
        assert count(g, Scheme("tree")).total == tree_all_to_all_closed(g)
    assert count(g, Scheme("all_at_once")).total == all_to_all_closed(g)


def test_coding_meets_the_reception_floor_and_cuts_hops_below_both_baselines():
    for wrap in (False, True):
        g = Grid(16, 2, wrap)
        N = g.size
        nc, tree, aao = (count(g, Scheme(a)) for a in ("nc", "tree", "all_at_once"))
        assert nc.total_unicasts == tree.total_unicasts == aao.total_unicasts == N * (N - 1)  # receptions
        assert N * (N - 1) <= nc.total < tree.total < aao.total


def _planner_rows(text: str) -> dict:
    """shape -> (inner total, between total, hops) from the planner's table."""
    import re

    row = re.compile(r"^\s*(\d+(?:x\d+)+)\s+\d+\s+\d+\s+\[[^]]*\]\s+(\d+)\s+\[[^]]*\]\s+(\d+)\s.*?([\d,]+)\s+[\d,]+(\s+<-.*)?$")
    out = {}
    for line in text.splitlines():
        m = row.match(line)
        if m:
            out[tuple(map(int, m[1].split("x")))] = (int(m[2]), int(m[3]), int(m[4].replace(",", "")))
    return out


def test_the_planner_explains_its_choice_on_the_16_ary_2_mesh():
    g = Grid(16, 2, False)
    shape = best_shape(g)
    text = report(g)
    chosen = [line for line in text.splitlines() if line.endswith("<- chosen")]
    assert len(chosen) == 1 and chosen[0].split()[0] == "x".join(map(str, shape))
    hops = {sh: h for sh, (_i, _b, h) in _planner_rows(text).items()}
    assert hops[shape] == min(hops.values()) == count(g, Scheme("nc", shape)).total
    assert "floor" in text and f"{256 * 255:,}" in text
    # the explanation states the rule and the chosen shape's paths as they are: 16x4, 18 inside and 9 between
    assert shape == (16, 4) and "rule (--by hops): least total hops" in text
    assert "longest path inside a group 18, between INs 9 (9 apart)" in text and "balance best" not in text
    assert "by longest-path instead: 8x4 (8 groups of 32), 112,776 hops, longest paths 10 inside and 10 " in text


def test_the_source_s_rule_balances_the_longest_paths_ties_by_hops():
    g = Grid(16, 2, False)
    text = report(g, by="longest-path")
    rows = _planner_rows(text)
    shape = best_shape(g, by="longest-path")
    gap = {sh: abs(i - b) for sh, (i, b, _h) in rows.items()}
    balanced = [sh for sh in rows if gap[sh] == min(gap.values())]
    assert shape in balanced and rows[shape][2] == min(rows[sh][2] for sh in balanced)
    # 4x8 and 8x4 both balance at 10 and 10; 8x4 has fewer hops; 32-node groups, as the source's Fig. 6
    assert rows[(4, 8)][:2] == rows[(8, 4)][:2] == (10, 10) and shape == (8, 4)
    assert "rule (--by longest-path): the source's rule" in text
    assert "longest path inside a group 10, between INs 10 (balanced)" in text
    assert "by hops instead: 16x4 (4 groups of 64), 105,548 hops" in text


def test_emu_plan_nc_takes_the_rule(capsys):
    from emu.front.cli import main

    assert main(["plan", "nc", "mesh:k=16,n=2", "--by", "longest-path"]) == 0
    assert "chosen: groups of 8x4" in capsys.readouterr().out
    assert main(["plan", "nc", "mesh:k=8,n=2", "--by", "hops"]) == 0
    assert "rule (--by hops)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["plan", "nc", "mesh:k=8,n=2", "--by", "fewest"])


def test_bad_group_shapes_are_refused_with_the_fix():
    from emu.config import ConfigError

    with pytest.raises(ConfigError, match="does not tile 8x8: each side must divide"):
        plan(Grid(8, 2, False), Scheme("nc", (3, 2)))
    with pytest.raises(ConfigError, match="2 groups or more"):
        plan(Grid(8, 2, False), Scheme("nc", (8, 8)))


# -- emulated: frames, hops, decoding ----------------------------------------------------------------
def payload(rank: int, size: int = 37) -> np.ndarray:
    return np.random.default_rng([rank, 2]).integers(0, 256, size, dtype=np.uint8)


async def bcast_app(host, algo, shape=None, mcast="tree"):
    c = Comm(host)
    c.nc_shape, c.nc_mcast = shape, mcast
    y = await c.mcast_all(payload(c.rank), algo)
    return y, c.last_algo, getattr(c, "nc_stats", None)


def run_grid(spec, algo, **kw):
    t = build(spec)
    net = EngineNet(t)
    res = net.run({h: (bcast_app, algo, kw.get("shape"), kw.get("mcast", "tree")) for h in t.host_names()})
    return t, net, res


def router_hops(net, ptypes=(PacketType.NC,)) -> tuple[int, int]:
    """(router hops, unicasts) from the frames: every delivery is a link crossing; a frame that
    reaches a host ends a unicast, whose two host links are not router hops."""
    crossings = unicasts = 0
    for _t, node, _p, f in net.delivered:
        if parse_frame(f)[4] in ptypes:
            crossings += 1
            unicasts += net.t.nodes[node].kind == "host"
    return crossings - 2 * unicasts, unicasts


@pytest.mark.parametrize("spec", ["mesh:k=4,n=2", "torus:k=4,n=2", "mesh:k=8,n=2", "torus:k=8,n=2",
                                  "mesh:k=16,n=2", "torus:k=16,n=2"])
@pytest.mark.parametrize("algo", ["nc", "tree"])
def test_measured_router_hops_equal_the_analytic_count(spec, algo):
    t, net, res = run_grid(spec, algo)
    g = Grid(*t.grid)
    hops, unicasts = router_hops(net)
    c = count(g, Scheme(algo))
    assert (hops, unicasts) == (c.total, c.total_unicasts)
    ref = np.stack([payload(r) for r in range(g.size)])
    assert all(np.array_equal(res[h][0], ref) for h in t.host_names())


@pytest.mark.parametrize("spec", ["mesh:k=4,n=2", "torus:k=4,n=2", "mesh:k=8,n=2", "torus:k=8,n=2",
                                  "mesh:k=16,n=2", "torus:k=16,n=2"])
def test_the_all_at_once_baseline_s_router_hops_equal_the_closed_form(spec):
    t, net, res = run_grid(spec, "all_at_once")
    g = Grid(*t.grid)
    hops, unicasts = router_hops(net)  # coded frames: the NICs run the baseline too, from its plan
    assert (hops, unicasts) == (all_to_all_closed(g), g.size * (g.size - 1))
    assert router_hops(net, (PacketType.MSG,)) == (0, 0) and res["h0"][1] == "all_at_once(NICs)"


@pytest.mark.parametrize("spec,algo,shape,mcast", [
    ("mesh:k=4,n=2", "nc_every", None, "tree"), ("torus:k=4,n=2", "nc_recursive", None, "tree"),
    ("mesh:k=4,n=2", "combine", (2, 2), "all_at_once"), ("torus:k=5,n=2", "nc", (5, 1), "all_at_once"),
    ("mesh:k=6,n=2", "nc", (3, 2), "tree"), ("mesh:k=4,n=3", "nc", (2, 2, 2), "tree"),
    ("torus:k=4,n=3", "nc_every", (4, 1, 1), "tree"), ("mesh:k=8,n=2", "nc_recursive", (4, 4), "tree")])
def test_every_node_decodes_every_payload_bit_for_bit(spec, algo, shape, mcast):
    t, net, res = run_grid(spec, algo, shape=shape, mcast=mcast)
    g = Grid(*t.grid)
    ref = np.stack([payload(r) for r in range(g.size)])
    for h in t.host_names():
        y, _algo, stats = res[h]
        assert y.tobytes() == ref.tobytes()
        assert stats["duplicates"] == 0
    hops, unicasts = router_hops(net)
    c = count(g, Scheme(algo, shape, mcast))
    assert (hops, unicasts) == (c.total, c.total_unicasts)
    xors = sum(net.engines[h].mechanism("coding").stats["nc_xors"] for h in t.host_names())
    assert (xors > 0) == (algo != "combine")


def test_a_forged_coded_frame_is_counted_and_dropped_and_the_run_still_decodes():
    t = build("mesh:k=4,n=2")
    net = EngineNet(t)
    net.start({h: (bcast_app, "nc") for h in t.host_names()})
    # "h5" sends h0 the chain packet (1, 2) while the run goes on: the plan sends h0 no such thing from h5
    forged = build_frame(5, 0, PacketType.NC, NC.pack(Step.E, 0, NcKind.XOR, 0, 1, 2, 5, 1, 0) + bytes(37))
    net.send("s0", 0, forged, at=300)
    net.step_all()
    ref = np.stack([payload(r) for r in range(16)])
    for h in t.host_names():
        (st,) = net.engines[h].app_states()
        assert st.done and st.result[0].tobytes() == ref.tobytes()
    assert net.engines["h0"].mechanism("coding").stats["nc_unexpected"] == 1
    assert sum(net.engines[h].mechanism("coding").stats["nc_unexpected"] for h in t.host_names()) == 1


def test_coded_broadcast_off_a_grid_runs_on_the_rank_line_or_is_refused_with_the_fix():
    t = build("star:n=4")  # indirect: groups of consecutive ranks, XOR at host INs (tests/test_coding_indirect.py)
    res = EngineNet(t).run({h: (bcast_app, "nc") for h in t.host_names()})
    assert all(np.array_equal(res[h][0], np.stack([payload(r) for r in range(4)])) for h in t.host_names())
    t = build("star:n=5")  # 5 hosts cannot be cut into groups
    with pytest.raises(AssertionError, match="5 has no divisor between 2 and 4.*not prime"):
        EngineNet(t).run({h: (bcast_app, "nc") for h in t.host_names()})


# -- the router model ----------------------------------------------------------------------------------
ROUTER = {"switch": {"processing_delay_ns": 3, "vcs": 4}, "link": {"latency_ns": 1, "bandwidth_bps": 64 * 8 * 10**9},
          "host": {"nic_delay_ns": 1}}


async def one_message(host):
    if host.name == "h0":
        await host.send("h3", b"x" * 200, tag=1)
    elif host.name == "h3":
        await host.recv("h0", 1)


@pytest.mark.parametrize("cut_through", [False, True])
def test_virtual_cut_through_pays_the_serialisation_once_store_and_forward_per_hop(cut_through):
    settings = {**ROUTER, "switch": {**ROUTER["switch"], "cut_through": cut_through}}
    net = EngineNet(build("mesh:k=4,n=1", settings=settings))
    net.run({"h0": one_message, "h3": one_message})
    arrivals = [t for t, _n, _p, f in net.delivered if parse_frame(f)[4] == PacketType.MSG]
    ser = -(-(246 + 4) // 64)  # a 246-byte frame and its FCS at 64 bytes per ns
    per_hop = 3 + 1 + (0 if cut_through else ser)  # header cycles + link, and the tail's wait without VCT
    assert [b - a for a, b in zip(arrivals, arrivals[1:])] == [per_hop] * 4


@pytest.mark.trio
async def test_cut_through_runs_the_same_in_a_real_cluster_as_in_the_engine_harness():
    import emu

    settings = {**ROUTER, "switch": {**ROUTER["switch"], "cut_through": True}}
    t = build("mesh:k=4,n=2", settings=settings)
    net = EngineNet(t)
    ref = net.run({h: (bcast_app, "nc") for h in t.host_names()})
    async with emu.Cluster(build("mesh:k=4,n=2", settings=settings)) as cl:
        res = await cl.run({h: (bcast_app, "nc") for h in cl.hosts})
        assert all(res[h][0].tobytes() == ref[h][0].tobytes() for h in t.host_names())
        assert [res[h][2]["done_ns"] for h in t.host_names()] == [ref[h][2]["done_ns"] for h in t.host_names()]


def test_each_step_has_its_vc_and_tori_add_the_dateline_bit():
    from emu.switch.vc import selector

    t = build("torus:k=4,n=2", settings={"switch": {"vcs": 8, "vc_policy": "class_dateline"}})
    net = EngineNet(t)
    res = net.run({h: (bcast_app, "nc") for h in t.host_names()})
    assert all(res[h][0].tobytes() == np.stack([payload(r) for r in range(16)]).tobytes() for h in t.host_names())
    seen = {}
    for _t, node, _p, f in net.delivered:
        if parse_frame(f)[4] == PacketType.NC:
            step = NC.unpack(f, HDR_LEN)[0]
            seen.setdefault(step, set()).add(parse_frame(f)[2])
    # each step keeps its class pair 2c, 2c + 1 (B 0, F 1, D 2, E 3); some frames crossed a dateline
    assert all(v // 2 == Step.VC[s] for s, vs in seen.items() for v in vs)
    assert any(v % 2 for vs in seen.values() for v in vs)
    sel = selector("class_dateline", t.nodes["s3"], 8)  # s3 sits at (3, 0): ports 2 (x up) and 3 (y down) wrap
    assert sel(1, 2, 4) == 5 and sel(2, 4, 5) == 4 and sel(0, 4, 6) == 6 and sel(0, 3, 2) == 3  # port 3 wraps in y


def test_the_experiment_script_runs_every_part_and_checks_measured_against_analytic(tmp_path):
    from load_script import load

    mod = load("nc_broadcast")
    res = mod.main(["--analytic-k", "4,8", "--measured-k", "4", "--sweep-k", "4", "--flits", "1,2", "--xor", "0,5",
                    "--sources", "2,16", "--sources-measured", "2", "--variants-k", "4", "--why-k", "4",
                    "--out", str(tmp_path)])
    size = {(r["family"], r["k"]): r for r in res["size"]}
    assert size[("mesh", 4)]["nc_measured"] == size[("mesh", 4)]["nc"] == 286  # the frames equal the count
    assert size[("mesh", 4)]["tree_measured"] == 320
    t = {(r["algo"], r["flits"], r["xor_cycles"]): r for r in res["time"] if r["family"] == "mesh"}
    # longer packets take longer, and store-and-forward pays the serialisation at every hop
    assert t[("nc", 2, 1)]["exec_ns"] > t[("nc", 1, 1)]["exec_ns"]
    assert t[("tree (store-and-forward)", 4, 1)]["exec_ns"] > t[("tree", 2, 1)]["exec_ns"]
    v = {r["algo"]: r for r in res["variants"] if r["k"] == 4}
    assert v["combine"]["unicasts"] < v["nc"]["unicasts"] == v["nc"]["floor"]
    assert (tmp_path / "nc_hops_by_size.csv").stat().st_size > 0
    why = {(r["scheme"], r["ports"]): r for r in res["why"]}
    assert set(why) >= {("tree", 1), ("all_at_once", 1), ("nc/tree", 1), ("nc/all_at_once", 1), ("combine/tree", 1),
                        ("nc_every/tree", 1), ("tree", 4), ("nc/tree", 4)}
    for r in why.values():  # the measured execution time is its steps' sum, beside the model's
        assert r["exec_ns"] == sum(r["steps"].values()) and r["model_ns"] == sum(r["model_steps"].values())
    # four injection channels per node: the coded broadcast's IN no longer queues its chain packets on one
    assert why[("nc/tree", 4)]["end_to_end_ns"] < why[("nc/tree", 1)]["end_to_end_ns"]


# -- execution time: measured, and the model beside it ------------------------------------------------
OQ = {"switch": {"model": "output_queued", "cut_through": True}}  # the router the model's exact case is of


def _figures(spec, operation, algo, settings=OQ, root=None, size=16):
    """An emulated mcast/mcast_all and spec 02's figures of it (``timing.figures``)."""
    from emu.nodes.collectives.coding.timing import figures
    from emu.nodes.collectives.run import collective_app

    t = build(spec, settings=settings)
    net = EngineNet(t)
    hosts = t.host_names()
    res = net.run({h: (collective_app, hosts, operation, algo, size // 4, "float32", "sum", root or 0, 3)
                   for h in hosts})
    return t, res, figures(t, [res[h][5] for h in hosts])


def test_one_root_all_at_once_on_a_line_is_the_model_to_the_nanosecond():
    """mcast from h0 on a line of 4: three packets leave h0 one after another; the last, to h3 (3 router
    hops), waits two serialisations at the injection channel -- nothing else is shared."""
    t, res, f = _figures("mesh:k=4,n=1", "mcast", "all_at_once")
    host, link, sw = t.hosts[0].spec, t.links[0].spec, t.switches[0].spec
    frame = 8 + 16 + 16                     # modelled (link.framing=flit): head-flit header, coding header, 16 B
    ser = -(-8 * frame * 10**9 // link.bandwidth_bps)
    last = host.nic_delay_ns + 4 * sw.processing_delay_ns + 5 * link.latency_ns + ser + 2 * ser
    assert f["steps"] == {"all_at_once r0": last} == f["model_steps"]
    assert f["execution_ns"] == f["model_execution_ns"] == f["end_to_end_ns"] == last
    # the mean: the three packets' own latencies (1, 2, 3 hops; 0, 1, 2 serialisations queued)
    lat = [host.nic_delay_ns + (h + 1) * sw.processing_delay_ns + (h + 2) * link.latency_ns + ser + i * ser
           for i, h in enumerate((1, 2, 3))]
    assert f["packet_latency_mean_ns"] == round(sum(lat) / 3, 1)
    assert f["model_binds"]["all_at_once r0"] == "injection at node 0 (3 packets)"


def test_a_tree_takes_log2_n_rounds_and_its_execution_time_is_their_sum():
    t, res, f = _figures("mesh:k=4,n=2", "mcast_all", "tree")
    assert list(f["steps"]) == [f"tree r{r}" for r in range(4)]        # log2(16) sequential rounds
    assert f["execution_ns"] == sum(f["steps"].values())
    assert list(f["model_steps"]) == list(f["steps"])
    # one root, nothing shared but the root's injection channel: each round is its unloaded path, and
    # a round whose unicast leaves the root behind another waits that one's serialisation
    t, res, one = _figures("mesh:k=4,n=2", "mcast", "tree", root=5)
    assert list(one["steps"]) == [f"tree r{r}" for r in range(4)] and one["model_binds"]["tree r0"] == "unloaded"
    assert one["steps"]["tree r0"] == one["model_steps"]["tree r0"]


@pytest.mark.parametrize("algo", ["tree", "all_at_once", "all-at-once", "nc", "nc_every", "combine"])
@pytest.mark.parametrize("operation", ["mcast_all", "mcast"])
def test_every_scheme_runs_on_the_nics_and_reports_execution_time(operation, algo):
    t, res, f = _figures("mesh:k=4,n=2", operation, algo, root=6 if operation == "mcast" else None)
    want = np.stack([np.random.default_rng([3, r]).uniform(-1, 1, 4).astype(np.float32) for r in range(16)])
    for r, h in enumerate(t.host_names()):
        got = np.asarray(res[h][0])
        assert np.array_equal(got, want[6] if operation == "mcast" else want)
        assert res[h][5] is not None  # every rank ran the plan on its NIC
    assert f["execution_ns"] == sum(f["steps"].values()) > 0 and f["model_execution_ns"] > 0
    assert f["end_to_end_ns"] <= f["execution_ns"] or algo in ("nc", "nc_every", "combine")
    phases = {name.rsplit(" r", 1)[0] for name in f["steps"]}
    if algo in ("tree", "all_at_once", "all-at-once"):
        assert phases == {algo.replace("-", "_")}
    elif operation == "mcast_all":  # B with F, C+D, E, G (every node encodes: no E)
        assert phases == ({"B+F", "C+D", "G"} if algo == "nc_every" else {"B+F", "C+D", "E", "G"})
    else:  # one source: nothing to XOR; its packet reaches the other groups in F (combine: through the INs)
        assert phases == ({"B+F", "C+D", "E", "G"} if algo == "combine" else {"B+F", "G"})


def test_the_model_names_what_binds_coding_and_what_the_source_s_assumptions_change():
    """Coded all-to-all on the 8-ary 2-mesh, 8x4 groups: step E is a multicast of the (G-1)(M-1) = 31
    chain packets from one IN into its group, every round to one child over one link, so more
    injection channels, or coding in the router, do not shorten it: the link binds then."""
    from emu.nodes.collectives.coding.timing import model

    g = Grid(8, 2, False)
    t = build("mesh:k=8,n=2", settings=OQ)
    specs = (t.hosts[0].spec, t.links[0].spec, t.switches[0].spec)
    p = plan(g, Scheme("nc", (8, 4)))
    base = model(p, specs, 66)
    assert all(base["binds"][f"E r{r}"].startswith("injection at node") and "(31 packets)" in base["binds"][f"E r{r}"]
               for r in range(5))
    more = model(p, specs, 66, inject_ports=4)
    assert all(more["binds"][f"E r{r}"].startswith(("router link", "ejection")) for r in range(5))
    assert more["steps"]["E r0"] == base["steps"]["E r0"]  # the same 31 packets now queue on the link
    inr = model(p, specs, 66, in_router=True)
    assert inr["execution_ns"] < base["execution_ns"]   # the host links of the INs are not crossed ...
    assert inr["steps"]["E r0"] >= 30 * base["ser_ns"]  # ... but the 31 chain packets still share a link


def test_where_the_source_s_coded_hop_counts_cannot_hold():
    """Any unicast all-to-all broadcast needs N(N-1) receptions and as many hops: coding cuts hops, never
    below that; a count under it cannot be of unicasts."""
    for k in (16, 32):
        g = Grid(k, 2, False)
        N = g.size
        for shape in ((k, 4), (8, 4), (k // 2, 2)):
            c = count(g, Scheme("nc", shape))
            assert c.total >= N * (N - 1) and c.total_unicasts == N * (N - 1)


def test_a_node_with_several_links_into_its_router_injects_on_them_in_turn():
    """mesh:...,ports=3: h0's three packets leave on three links at once, and meet at s0's link toward
    s1 instead: the same last arrival, now bound by the router link (exact, against the model)."""
    t, res, f = _figures("mesh:k=4,n=1,ports=3", "mcast", "all_at_once")
    assert t.nports("h0") == 3 and t.nports("s0") == 5   # 0 the host, 1 and 2 the line (1 unlinked here), 3..4 the host
    host, link, sw = t.hosts[0].spec, t.links[0].spec, t.switches[0].spec
    ser = -(-8 * link.frame_bytes(PacketType.NC, 16 + 16) * 10**9 // link.bandwidth_bps)  # 40 B (flit framing)
    last = host.nic_delay_ns + 4 * sw.processing_delay_ns + 5 * link.latency_ns + ser + 2 * ser
    assert f["steps"] == {"all_at_once r0": last} == f["model_steps"]
    assert f["model_binds"]["all_at_once r0"] == "router link 0->1 (3 packets)"
    # and the whole all-to-all still decodes, its hops the analytic count
    net = EngineNet(build("mesh:k=4,n=2,ports=4"))
    res = net.run({h: (bcast_app, "nc") for h in net.t.host_names()})
    ref = np.stack([payload(r) for r in range(16)])
    assert all(res[h][0].tobytes() == ref.tobytes() for h in net.t.host_names())
    assert router_hops(net) == (count(Grid(4, 2, False), Scheme("nc")).total, 240)
