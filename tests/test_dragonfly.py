"""Dragonfly, HyperX and Slim Fly (issue 48): construction, minimal and Valiant routes, UGAL's rule,
the VC-class deadlock check, and small runs of every policy with the same figures every way."""

import random

import networkx as nx
import pytest

import apps
import emu
from emu.config import ConfigError, SwitchSpec, parse_settings
from emu.switch.routing import lookup
from emu.switch.routing.deadlock import classes, cycle, dependencies, dependencies_by_route
from emu.switch.routing.model import RouteModel
from emu.switch.routing.nonminimal import FLAG_DETOUR
from emu.topologies.estimate import estimate
from emu.topologies.registry import build, parse
from emu.wire import PacketType, build_frame
from emu.wire.fabric import FLAGS_OFF, RSVD_OFF


def _router_graph(t):
    g = nx.Graph()
    g.add_nodes_from(s.name for s in t.switches)
    g.add_edges_from((lk.a, lk.b) for lk in t.links if t.nodes[lk.a].kind == t.nodes[lk.b].kind == "switch")
    return g


def _longest_route(t):
    names = t.host_names()
    return max(len(t.route(a, b)) - 1 for a in names for b in names if a != b)


def _counts(t, spec):
    name, raw = parse(spec)
    est = estimate(name, {k: (v if k == "arrangement" else int(v)) for k, v in raw.items()})
    assert (est.hosts, est.switches, est.links) == (len(t.hosts), len(t.switches), len(t.links))


@pytest.mark.parametrize("spec,p,a,h,g", [("dragonfly:p=2", 2, 4, 2, 9), ("dragonfly:p=1,a=2,h=1", 1, 2, 1, 3),
                                          ("dragonfly:p=2,a=4,h=2,g=5", 2, 4, 2, 5),
                                          ("dragonfly:p=1,a=3,h=2,g=7,arrangement=relative", 1, 3, 2, 7),
                                          ("dragonfly:p=2,a=4,h=2,arrangement=circulant", 2, 4, 2, 9),
                                          ("dragonfly:p=1,a=4,h=1,g=5,arrangement=circulant", 1, 4, 1, 5)])
def test_dragonfly_degrees_links_and_diameter(spec, p, a, h, g):
    t = build(spec)
    t.validate()
    m = a * h // (g - 1)
    rg = _router_graph(t)
    assert len(t.switches) == g * a and len(t.hosts) == g * a * p
    assert all(t.nports(s.name) == p + a - 1 + h for s in t.switches)
    assert all(d == a - 1 + h for _, d in rg.degree())
    glob = [lk for lk in t.links if {t.nodes[lk.a].kind, t.nodes[lk.b].kind} == {"switch"}
            and t.nodes[lk.a].info["group"] != t.nodes[lk.b].info["group"]]
    assert len(glob) == t.figures["cables_global"] == g * a * h // 2
    pairs = {}
    for lk in glob:
        k = frozenset((t.nodes[lk.a].info["group"], t.nodes[lk.b].info["group"]))
        pairs[k] = pairs.get(k, 0) + 1
    assert len(pairs) == g * (g - 1) // 2 and set(pairs.values()) == {m}  # every two groups, m links each
    assert _longest_route(t) == t.diameter == 5                            # l-g-l and the two host links
    assert t.figures["cables_local"] + t.figures["cables_global"] + t.figures["cables_host"] == len(t.links)
    _counts(t, spec)


def test_dragonfly_link_kinds_take_their_own_figures():
    t = build("dragonfly:p=1,a=2,h=1", settings=parse_settings(["link.global_latency_ns=500", "link.local_bandwidth_bps=50000000000"]))
    kinds = {}
    for lk in t.links:
        a, b = t.nodes[lk.a], t.nodes[lk.b]
        kind = "host" if "host" in (a.kind, b.kind) else "local" if a.info["group"] == b.info["group"] else "global"
        kinds.setdefault(kind, set()).add((lk.spec.latency_ns, lk.spec.bandwidth_bps))
    assert kinds == {"host": {(100, 100_000_000_000)}, "local": {(100, 50_000_000_000)}, "global": {(500, 100_000_000_000)}}


@pytest.mark.parametrize("bad,msg", [("dragonfly:p=2,g=4", "g - 1 = 3 must divide a\\*h = 8"),
                                     ("dragonfly:p=2,arrangement=twisted", "arrangement must be one of"),
                                     ("slimfly:q=9", "q must be an odd prime"), ("hyperx:S=1,L=2", "S must be")])
def test_bad_parameters_are_refused_in_one_line(bad, msg):
    with pytest.raises(ConfigError, match=msg):
        build(bad)


@pytest.mark.parametrize("spec,S,L,K,T", [("hyperx:S=4,L=2,K=1,T=2", 4, 2, 1, 2), ("hyperx:S=3,L=3", 3, 3, 1, 1),
                                          ("hyperx:S=3,L=2,K=2,T=1", 3, 2, 2, 1)])
def test_hyperx_degrees_and_dimension_order(spec, S, L, K, T):
    t = build(spec)
    t.validate()
    assert len(t.switches) == S ** L and all(t.nports(s.name) == T + L * (S - 1) * K for s in t.switches)
    assert _longest_route(t) == t.diameter == L + 2
    assert t.figures["cables_switch"] + t.figures["cables_host"] == len(t.links)
    _counts(t, spec)


@pytest.mark.parametrize("q", [5, 7])
def test_slimfly_is_the_mms_graph_of_diameter_two(q):
    t = build(f"slimfly:q={q}")
    rg = _router_graph(t)
    k = (3 * q - (1 if q % 4 == 1 else -1)) // 2
    assert len(t.switches) == 2 * q * q and {d for _, d in rg.degree()} == {k}
    assert nx.diameter(rg) == 2 and t.diameter == 4
    p = -(-k // 2)
    assert len(t.hosts) == 2 * q * q * p and t.figures["cables_router"] == q * q * k
    _counts(t, f"slimfly:q={q}")


@pytest.mark.parametrize("spec,minimal,detour", [("dragonfly:p=2", 3, 5), ("dragonfly:p=1,a=4,h=1,g=5", 3, 5),
                                                 ("hyperx:S=3,L=2", 2, 4), ("slimfly:q=5,p=1", 2, 4)])
def test_minimal_and_valiant_route_lengths(spec, minimal, detour):
    t = build(spec)
    m = RouteModel(t)
    rg = _router_graph(t)
    rng = random.Random(3)
    dist = dict(nx.all_pairs_shortest_path_length(rg))
    for _ in range(300):
        dst = rng.randrange(len(t.hosts))
        s = rng.randrange(m.R)
        tgt = m.of_host[dst]
        path = m.path(s, None, dst)
        assert path[-1] == (tgt, m.host_port[dst])
        hops = len(path) - 1
        assert hops <= minimal
        if not m.dragonfly:
            assert hops == dist[m.names[s]][m.names[tgt]]  # shortest
        inter = rng.randrange(m.inters)
        if m.intermediate_useful(s, inter, tgt):
            v = m.path(s, inter, dst)
            assert len(v) - 1 <= detour and any(m.arrived(r, inter) for r, _ in v)
            if m.dragonfly:  # two global links: to the intermediate group and out of it
                assert sum(m.group[r] != m.group[m.peer[r][p]] for r, p in v[:-1]) == 2


def test_router_intermediates_end_the_detour_at_that_router():
    """switch.ugal_intermediate=router (BookSim's node): the detour reaches the drawn router itself,
    one local hop more in its group when it enters elsewhere, and a 4th VC class for that local turn."""
    t = build("dragonfly:p=2", settings=parse_settings(["switch.routing=valiant", "switch.ugal_intermediate=router"]))
    m, g = RouteModel(t), RouteModel(build("dragonfly:p=2"))
    assert (m.inters, g.inters) == (36, 9)
    longer = 0
    for dst in (16, 40, 71):
        tgt = m.of_host[dst]
        for s in range(m.R):
            for inter in range(m.R):
                useful = m.intermediate_useful(s, inter, tgt)
                assert useful == (m.group[inter] not in (m.group[s], m.group[tgt])) == g.intermediate_useful(
                    s, m.group[inter], tgt)
                if not useful:
                    continue
                v = m.path(s, inter, dst)
                assert inter in [r for r, _ in v] and v[-1] == (tgt, m.host_port[dst])
                assert sum(m.group[r] != m.group[m.peer[r][p]] for r, p in v[:-1]) == 2
                via_group = g.path(s, m.group[inter], dst)
                assert len(via_group) <= len(v) <= len(via_group) + 2
                longer += len(v) > len(via_group)
    assert longer
    assert classes(t, "valiant") == classes(t, "ugal_l") == 4 and classes(build("dragonfly:p=2"), "valiant") == 3
    assert cycle(t, "valiant", 3) and not cycle(t, "valiant", 4)
    with pytest.raises(ConfigError, match="ugal_intermediate 'node' is not one of group, router"):
        SwitchSpec(ugal_intermediate="node")
    par = build("dragonfly:p=2", settings=parse_settings(["switch.ugal_intermediate=router", "switch.vcs=5"]))
    assert classes(par, "par") == 5 and cycle(par, "par", 4) and not cycle(par, "par")
    with pytest.raises(ConfigError, match="routing=par with ugal_intermediate=router takes 5 VC classes .* "
                                          "switch.vcs=4: set switch.vcs=5"):
        build("dragonfly:p=2", settings=parse_settings(["switch.routing=par", "switch.ugal_intermediate=router"]))


@pytest.mark.parametrize("spec,need", [("dragonfly:p=1,a=2,h=1", {"minimal": 2, "valiant": 3, "ugal_l": 3, "par": 4}),
                                       ("dragonfly:p=1,a=4,h=1,g=5", {"minimal": 2, "valiant": 3, "par": 4})])
def test_vc_classes_make_every_policy_deadlock_free_and_too_few_do_not(spec, need):
    for policy, n in need.items():
        t = build(spec)
        assert cycle(t, policy) == [] and classes(t, policy) == n      # the family's 4 VCs suffice
        assert cycle(t, policy, vcs=n - 1)                              # one class short: a cycle
        assert cycle(build(spec, settings=parse_settings(["switch.vc_policy=by_class"])), policy)


@pytest.mark.parametrize("spec,policies,vcs", [("dragonfly:p=2,a=4,h=1,g=5", ("minimal", "valiant", "ugal_l", "par"), (None, 2, 32)),
                                                ("hyperx:S=2,L=3,K=1,T=2", ("minimal", "valiant"), (None, 2, 32)),
                                                ("slimfly:q=5,p=1", ("valiant",), (None,))])
def test_the_fast_dependency_walk_gives_the_graph_of_every_route(spec, policies, vcs):
    """The deadlock check's walk (shared suffixes, hosts of a router walked once, Slim Fly/HyperX
    detours from where they reach their intermediate) builds exactly the graph of following every
    route one by one, with the family's VCs, too few and plenty."""
    t = build(spec)
    for policy in policies:
        for n in vcs:
            a, b = dependencies(t, policy, n), dependencies_by_route(t, policy, n)
            assert set(a.nodes) == set(b.nodes) and set(a.edges) == set(b.edges) and a.number_of_edges() > 0


def test_hyperx_dimension_order_needs_no_class_but_valiant_does():
    assert cycle(build("hyperx:S=3,L=2"), "valiant") == [] and classes(build("hyperx:S=3,L=2"), "valiant") == 4
    t = build("hyperx:S=3,L=2", settings=parse_settings(["switch.vc_policy=by_class"]))
    assert cycle(t, "minimal") == [] and cycle(t, "valiant")


def test_without_the_dragonfly_classes_minimal_routing_has_a_cycle():
    t = build("dragonfly:p=2", settings=parse_settings(["switch.vc_policy=by_class"]))
    c = cycle(t, "minimal")
    assert c and len({r for r, _p, _v in c}) > 1 and {v for _r, _p, v in c} == {0}


class _View:
    def __init__(self, q):
        self.q = q

    def queue(self, port, now, vc=None):
        return (1, self.q.get(port, 0)) if vc is None else (0, 0)

    def up(self, port, now):
        return True


class _Eng:
    def __init__(self, t, name, threshold=0, **spec):
        self.network, self.name, self.node_id = (t, {}), name, t.nodes[name].id
        self.spec = SwitchSpec(ugal_threshold_bytes=threshold, **spec)
        self.ports, self.retag, self.held, self.stats = None, None, set(), {}


class _Credits:
    """An input-queued router's credits of the next routers' buffers (``OutCredits``): 3 VCs of
    ``cap`` bytes per port, ``used[port]`` bytes of them held (taken from VC 0 up)."""

    def __init__(self, used, ports=8, cap=4096):
        self.cap = [(cap, 0)] * ports
        self.vc = [[cap - min(cap, max(0, used.get(p, 0) - v * cap)) for v in range(3)] for p in range(ports)]


@pytest.mark.parametrize("threshold,inter", [(0, "group"), (1000, "group"), (0, "router")])
def test_ugal_l_takes_the_detour_exactly_when_its_rule_says(threshold, inter):
    t = build("dragonfly:p=2", settings=parse_settings([f"switch.ugal_intermediate={inter}"]))
    m = RouteModel(t)
    src, dst = "g0r1", 16  # host 16: group 2, router g2r0
    me, tgt = m.index[src], m.of_host[16]
    static = t.routes[src][dst]
    seen = {True: 0, False: 0}
    for qmin in (0, 300, 600, 900, 3000):
        for qnon in (0, 300, 1200):
            eng = _Eng(t, src, threshold)
            choose = lookup("ugal_l")(eng, 7)
            rng = random.Random(7 * 1_000_003 + eng.node_id)   # the policy's own draws, replayed
            frame = build_frame(2, dst, PacketType.MSG, b"x" * 64)
            for _ in range(6):
                inter = rng.randrange(m.inters)
                non = m.step(me, inter, tgt) if m.intermediate_useful(me, inter, tgt) else None
                eng.ports = _View({static: qmin} if non is None or non == static else {static: qmin, non: qnon})
                out = choose(dst, static, frame, 0)
                tagged = eng.retag(frame, out)
                if non is None:
                    assert out == static and tagged == frame
                    continue
                q_non = qmin if non == static else qnon
                detour = qmin * m.hops(me, None, dst) > q_non * m.hops(me, inter, dst) + threshold
                seen[detour] += 1
                assert out == (non if detour else static)
                assert bool(tagged[FLAGS_OFF] & FLAG_DETOUR) == detour and (not detour or tagged[RSVD_OFF] == inter)
    assert seen[True] and seen[False]


@pytest.mark.parametrize("queue", ["depth", "credits"])
def test_ugal_l_weighs_the_queue_its_setting_names_and_counts_its_decisions(queue):
    """depth: the bytes waiting here plus the credit held downstream; credits: the credit alone
    (BookSim's GetUsedCredit). Crafted so that the two rules disagree both ways."""
    t = build("dragonfly:p=2")
    m = RouteModel(t)
    src, dst = "g0r1", 16
    me, tgt = m.index[src], m.of_host[16]
    static = t.routes[src][dst]
    want = {"ugal_minimal": 0, "ugal_detour": 0, "ugal_no_detour": 0}
    eng = _Eng(t, src, model="input_queued", ugal_queue=queue)
    choose = lookup("ugal_l")(eng, 3)
    rng = random.Random(3 * 1_000_003 + eng.node_id)
    frame = build_frame(2, dst, PacketType.MSG, b"x" * 64)
    for row in [(9000, 0, 0, 2048), (0, 9000, 9000, 2048), (0, 0, 0, 0), (5000, 6000, 0, 0)]:
        for _ in range(6):
            local_min, held_min, local_non, held_non = row
            inter = rng.randrange(m.inters)
            if not m.intermediate_useful(me, inter, tgt):
                want["ugal_no_detour"] += 1
                eng.ports, eng.oc = _View({}), _Credits({})
                assert choose(dst, static, frame, 0) == static
                eng.retag(frame, static)
                continue
            non = m.step(me, inter, tgt)
            if non == static:  # the detour starts on the minimal port: the same queue both ways
                local_non, held_non = local_min, held_min
            eng.ports = _View({non: local_non, static: local_min})
            eng.oc = _Credits({non: held_non, static: held_min})
            q_min, q_non = (held_min, held_non) if queue == "credits" else (local_min + held_min, local_non + held_non)
            detour = q_min * m.hops(me, None, dst) > q_non * m.hops(me, inter, dst)
            want["ugal_detour" if detour else "ugal_minimal"] += 1
            out = choose(dst, static, frame, 0)
            assert out == (non if detour else static)
            assert bool(eng.retag(frame, out)[FLAGS_OFF] & FLAG_DETOUR) == detour
    assert eng.stats == {k: v for k, v in want.items() if v}
    assert want["ugal_detour"] and want["ugal_minimal"]


def test_ugal_queue_credits_needs_the_input_queued_router():
    with pytest.raises(ConfigError, match="ugal_queue=credits .* needs switch.model=input_queued"):
        SwitchSpec(ugal_queue="credits")
    with pytest.raises(ConfigError, match="ugal_queue 'bytes' is not one of depth, credits"):
        SwitchSpec(model="input_queued", ugal_queue="bytes")


async def _adversarial(spec, routing, processes=1, direct=False, more=()):
    """Every host sends 3 messages of 600 B to the host ``n/2`` on (some cross the network's middle)
    and receives the 3 sent to it."""
    t = build(spec, settings=parse_settings([f"switch.routing={routing}", *more]))
    names = t.host_names()
    n = len(names)
    async with emu.Cluster(t, seed=5, processes=processes, direct=direct) as net:
        r = await net.run({h: (_send_then_recv, names[(i + n // 2) % n]) for i, h in enumerate(names)})
        return sorted(r.items()), net.metrics.frames, net.metrics.hop_count


async def _send_then_recv(host, dst):
    await apps.send_to(host, dst, 600, 0, 3)
    return await apps.recv_count(host, 3)


@pytest.mark.parametrize("spec,routing", [(s, r) for s in ("dragonfly:p=1,a=2,h=1", "hyperx:S=3,L=2")
                                          for r in ("minimal", "valiant", "ugal_l", "par")]
                         + [("slimfly:q=5,p=1", "valiant"), ("slimfly:q=5,p=1", "ugal_l")])
async def test_every_policy_runs_with_the_same_figures_in_one_and_two_processes_and_in_memory(spec, routing):
    one = await _adversarial(spec, routing)
    assert one == await _adversarial(spec, routing, processes=2)
    assert one == await _adversarial(spec, routing, direct=True)
    if routing == "valiant" and spec.startswith("dragonfly"):
        assert one[2] > (await _adversarial(spec, "minimal"))[2]   # detours cross more routers


async def test_router_intermediates_run_alike_every_way_and_cross_more_routers():
    spec, more = "dragonfly:p=1,a=4,h=1,g=5", ("switch.ugal_intermediate=router",)
    one = await _adversarial(spec, "valiant", more=more)
    assert one == await _adversarial(spec, "valiant", processes=2, more=more)
    assert one == await _adversarial(spec, "valiant", direct=True, more=more)
    assert one[2] > (await _adversarial(spec, "valiant"))[2]  # mostly a local hop more in the intermediate group


async def test_ugal_g_is_an_oracle_of_one_process():
    one = await _adversarial("dragonfly:p=1,a=2,h=1", "ugal_g")
    assert one == await _adversarial("dragonfly:p=1,a=2,h=1", "ugal_g", direct=True)
    with pytest.raises(BaseException) as info:
        await _adversarial("dragonfly:p=1,a=2,h=1", "ugal_g", processes=2)
    assert "ugal_g is an oracle" in _messages(info.value)


def _messages(e) -> str:
    return str(e) + "".join(_messages(x) for x in getattr(e, "exceptions", ()))


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_a_dragonfly_file_keeps_its_groups_and_its_vc_classes_check(tmp_path, fmt):
    from emu.topologies.files import write

    t = build("dragonfly:p=1,a=2,h=1", settings=parse_settings(["switch.routing=valiant"]))
    path = str(tmp_path / f"d.{fmt}")
    write(t, fmt, path)
    back = build(path)
    assert [s.info["group"] for s in back.switches] == [s.info["group"] for s in t.switches]
    assert back.figures == t.figures and back.diameter == t.diameter
    assert list(RouteModel(back).path(0, 1, 5)) == list(RouteModel(t).path(0, 1, 5))
    with pytest.raises(ConfigError, match="routing=valiant with vc_policy=dragonfly has a cyclic channel dependency"):
        build(path, settings=parse_settings(["switch.vcs=2"]))


def test_par_decides_again_after_a_minimal_local_hop_and_only_there():
    from emu.switch.routing.nonminimal import FLAG_REDECIDE
    from emu.wire import HOPS_OFF

    t = build("dragonfly:p=2")
    m = RouteModel(t)
    dst = 16                                                  # group 2, router g2r0
    src = next(n for n in m.names if m.group[m.index[n]] == 0
               and m.peer[m.index[n]][t.routes[n][dst]] is not None
               and m.group[m.peer[m.index[n]][t.routes[n][dst]]] == 0)  # a router whose minimal hop is local
    eng = _Eng(t, src)
    choose = lookup("par")(eng, 1)
    eng.ports = _View({})                                     # idle: minimal, to be decided again next hop
    frame = build_frame(4, dst, PacketType.MSG, b"x" * 64)
    out = choose(dst, t.routes[src][dst], frame, 0)
    tagged = bytearray(eng.retag(frame, out))
    assert out == t.routes[src][dst] and tagged[FLAGS_OFF] & FLAG_REDECIDE and not tagged[FLAGS_OFF] & FLAG_DETOUR
    nxt = m.names[m.peer[m.index[src]][out]]
    tagged[HOPS_OFF] = 1
    eng2 = _Eng(t, nxt)
    choose2 = lookup("par")(eng2, 1)
    static = t.routes[nxt][dst]
    eng2.ports = _View({static: 10_000})                       # its global link is full: a detour
    detours = 0
    for _ in range(8):
        out2 = choose2(dst, static, bytes(tagged), 0)
        again = eng2.retag(bytes(tagged), out2)
        assert not again[FLAGS_OFF] & FLAG_REDECIDE          # decided once more, never again
        if again[FLAGS_OFF] & FLAG_DETOUR:
            detours += 1
            assert out2 != static
        else:                                                 # a draw of its own group or the destination's
            assert out2 == static
    assert detours >= 4
    eng3 = _Eng(t, nxt)                                       # a frame without REDECIDE past its source: no decision
    choose3 = lookup("par")(eng3, 1)
    eng3.ports = _View({static: 10_000})
    plain = bytearray(frame)
    plain[HOPS_OFF] = 1
    assert choose3(dst, static, bytes(plain), 0) == static and eng3.retag(bytes(plain), static) == bytes(plain)


async def _worst_case(routing):
    from emu.front.checks import Options, run_check

    t = build("dragonfly:p=1,a=2,h=1", settings=parse_settings([f"switch.routing={routing}", "host.send_overhead_ns=0"]))
    async with emu.Cluster(t, seed=3, direct=True) as net:
        r = await run_check(net, "worst_case", Options(seed=3, extra={"load": "0.2,0.4", "warmup": 30,
                                                                      "measure": 60}))
    return r.figures


async def test_the_traffic_rows_count_ugal_decisions_of_every_packet_and_only_under_ugal():
    """Every worst-case packet leaves its group: UGAL decides each one once, at its source router."""
    fig = await _worst_case("ugal_l")
    rows = fig["curve"]
    sent = [sum(r[k] for k in ("ugal_minimal", "ugal_detour", "ugal_no_detour")) for r in rows]
    assert sum(sent) == fig["frames_all_loads"] and sent[1] > sent[0] > 0
    assert all(r["ugal_detour"] + r["ugal_minimal"] > 0 for r in rows)
    plain = await _worst_case("minimal")
    assert not any(k.startswith("ugal_") for r in plain["curve"] for k in r)
