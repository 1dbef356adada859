"""Topologies: counts against their formulas, routes loop-free and minimal, refused bad specs."""

from collections import deque

import pytest

from emu.config import ConfigError
from emu.topologies import build
from emu.topologies.direct import distance


def counts(spec):
    t = build(spec)
    t.validate()
    return len(t.hosts), len(t.switches), len(t.links)


@pytest.mark.parametrize("k,n", [(2, 1), (2, 3), (4, 2), (4, 3), (3, 3), (8, 2)])
def test_fattree_counts(k, n):
    # k^n hosts, n stages of k^(n-1) switches, n*k^n links (k^n host links + (n-1)k^n between stages)
    assert counts(f"fattree:k={k},n={n}") == (k ** n, n * k ** (n - 1), n * k ** n)


@pytest.mark.parametrize("r,s", [(4, 1), (4, 2), (8, 2), (8, 3), (32, 2)])
def test_clos_counts(r, s):
    k = r // 2
    hosts = r * k ** (s - 1)
    switches = (2 * s - 1) * k ** (s - 1)
    assert counts(f"clos:radix={r},stages={s}") == (hosts, switches, s * hosts)


def test_clos_carves_small_top_switches_out_of_routers():
    t = build("clos:radix=32,stages=2,nodes=128")
    node_sw = [s for s in t.switches if not s.info["top"]]
    top = [s for s in t.switches if s.info["top"]]
    assert (len(t.hosts), len(node_sw), len(top)) == (128, 8, 16)
    assert {s.info["ports"] for s in top} == {8}
    routers = {}
    for s in top:
        routers.setdefault(s.info["router"], []).append(s.name)
    assert len(routers) == 4 and all(len(v) == 4 for v in routers.values())  # 4 x 8-way in one router
    # a top radix that is not a power of two
    t = build("clos:radix=32,stages=2,nodes=96")
    assert {s.info["ports"] for s in t.switches if s.info["top"]} == {6}


@pytest.mark.parametrize("p,h", [(8, 64), (8, 20), (4, 16), (4, 3)])
def test_twolevel_counts(p, h):
    leaves = -(-h // p)
    spines = p if leaves > 1 else 0
    links = h + (leaves * spines if leaves > 1 else 0)
    assert counts(f"twolevel:ports={p},hosts={h}") == (h, leaves + spines, links)


@pytest.mark.parametrize("k,n", [(2, 1), (3, 2), (8, 2), (4, 3), (5, 3)])
def test_mesh_and_torus_counts(k, n):
    assert counts(f"mesh:k={k},n={n}") == (k ** n, k ** n, k ** n + n * (k - 1) * k ** (n - 1))
    if k >= 3:
        assert counts(f"torus:k={k},n={n}") == (k ** n, k ** n, k ** n + n * k ** n)


def shortest(t, src, dst):
    nb = t.neighbours()
    dist = {src: 0}
    q = deque([src])
    while q:
        u = q.popleft()
        if u == dst:
            return dist[u]
        if u != src and t.nodes[u].kind == "host":
            continue
        for _, v, _, _ in nb[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                q.append(v)
    raise AssertionError("unreachable")


SMALL = ["star:n=5", "fattree:k=2,n=3", "fattree:k=3,n=2", "fattree:k=4,n=3", "clos:radix=4,stages=3",
         "clos:radix=8,stages=2", "clos:radix=8,stages=2,nodes=12", "twolevel:ports=4,hosts=14",
         "twolevel:ports=4,hosts=13,spines=2", "mesh:k=4,n=2", "mesh:k=3,n=3", "torus:k=5,n=2",
         "torus:k=4,n=3"]


@pytest.mark.parametrize("spec", SMALL)
def test_routes_are_loop_free_and_minimal(spec):
    t = build(spec)
    hosts = t.host_names()
    for a in hosts:
        for b in hosts:
            if a != b:
                path = t.route(a, b)   # raises on a loop or a missing route
                assert len(path) - 1 == shortest(t, a, b), (a, b, path)
    assert max(len(t.route(a, b)) - 1 for a in hosts for b in hosts if a != b) == t.diameter


@pytest.mark.parametrize("spec,wrap", [("mesh:k=5,n=2", False), ("mesh:k=3,n=3", False), ("torus:k=5,n=2", True),
                                      ("torus:k=4,n=3", True), ("torus:k=6,n=2", True)])
def test_dimension_order_hops_are_the_manhattan_or_torus_distance(spec, wrap):
    t = build(spec)
    k, n = int(spec.split("k=")[1].split(",")[0]), int(spec.split("n=")[1])
    for a in range(k ** n):
        for b in range(k ** n):
            if a != b:
                path = t.route(f"h{a}", f"h{b}")
                assert len(path) - 3 == distance(a, b, k, n, wrap)
                # dimension order: coordinates change in dimension 0 first, then 1, ...
                dims = [next(d for d in range(n) if t.nodes[x].info["coords"][d] != t.nodes[y].info["coords"][d])
                        for x, y in zip(path[1:-2], path[2:-1])]
                assert dims == sorted(dims)


def test_fattree_up_choice_is_destination_mod_k():
    t = build("fattree:k=4,n=3")
    top_of = {}
    for b in t.host_names():
        tops = {next(x for x in t.route(a, b) if t.nodes[x].info.get("top"))
                for a in t.host_names() if t.nodes[t.route(a, b)[len(t.route(a, b)) // 2]].info.get("top")}
        assert len(tops) == 1      # every source reaches b through the same top switch
        top_of[b] = tops.pop()
    assert len(set(top_of.values())) == 16  # and destinations spread over all 16 top switches


def test_link_and_element_figures_from_the_spec():
    t = build("fattree:k=4,n=2,latency_ns=100,bandwidth_gbps=25,switch_delay_ns=30,nic_delay_ns=70,mtu_bytes=2048")
    assert {(l.spec.latency_ns, l.spec.bandwidth_bps) for l in t.links} == {(100, 25_000_000_000)}
    assert {s.spec.processing_delay_ns for s in t.switches} == {30}
    assert {(h.spec.nic_delay_ns, h.spec.mtu_bytes) for h in t.hosts} == {(70, 2048)}
    t = build("mesh:k=3,n=2", latency_ns=7)
    assert {l.spec.latency_ns for l in t.links} == {7}


@pytest.mark.parametrize("spec,message", [
    ("hypercube:n=4", r"unknown topology 'hypercube'; known: clos, dragonfly, fattree, hyperx, mesh, qsnet, slimfly, star, torus, twolevel"),
    ("fattree:k=4", r"fattree: missing parameter n; fattree needs k \(.*\), n \(stages\), e.g. fattree:k=4,n=3"),
    ("fattree:k=1,n=2", r"fattree: k must be an integer within 2..64, got 1"),
    ("fattree:k=4,n=9", r"fattree: n must be an integer within 1..8, got 9"),
    ("fattree:k=64,n=3", r"fattree: k\*\*n = 262144 hosts exceeds 65536"),
    ("fattree:k=four,n=2", r"fattree: k must be an integer, got 'four'"),
    ("fattree:k=4,n=2,m=3", r"fattree: unknown parameter 'm'; accepted: k, n, rails, links, latency_ns, bandwidth_gbps"),
    ("fattree:k=4,k=2,n=2", r"parameter 'k' is given twice"),
    ("fattree:k4,n=2", r"'k4' is not PARAM=VALUE"),
    ("clos:radix=7,stages=2", r"clos: radix must be even"),
    ("clos:radix=8,stages=3,nodes=20", r"nodes= builds a two-stage federated network; use stages=2"),
    ("clos:radix=8,stages=2,nodes=40", r"clos: nodes must be an integer within 2..32, got 40"),
    ("twolevel:ports=8,hosts=65", r"twolevel: hosts must be an integer within 2..64, got 65"),
    ("torus:k=2,n=3", r"torus: k must be at least 3"),
    ("mesh:k=8,n=2,latency_ns=0", r"latency_ns must be an integer within 1.."),
    ("star:n=1", r"star: n must be an integer within 2..4096"),
    ("", r"a topology spec is NAME:PARAM=VALUE"),
    ("star:n=4,bandwidth_gbps=nan", r"bandwidth_gbps must be a finite positive number"),
    ("star:n=4,bandwidth_gbps=inf", r"bandwidth_gbps must be a finite positive number"),
    ("star:n=4,bandwidth_gbps=1e300", r"bandwidth_gbps must be a finite positive number"),
    ("star:n=4,n =5", r"parameter 'n' is given twice"),
])
def test_bad_specs_are_refused_with_the_fix(spec, message):
    with pytest.raises(ConfigError, match=message):
        build(spec)


def test_the_closest_tree_of_8_port_switches_to_the_sources_64_hosts():
    from emu.topologies import build
    from emu.topologies.trees import closest_tree

    spec, why = closest_tree(8, 64)
    assert spec == "fattree:k=4,n=3" and "at most 32 hosts at full bisection" in why and "56 at all" in why
    t = build(spec)
    ports = {s.name: t.nports(s.name) for s in t.switches}
    assert len(t.hosts) == 64 and len(ports) == 48 and max(ports.values()) == 8  # real 8-port switches
    assert t.bisection == 32                                                   # full: half the hosts' links
    # what two levels of 8-port switches hold at full bisection, and the project's radix-16 reading
    assert closest_tree(8, 32)[0] == "clos:radix=8,stages=2" and len(build("clos:radix=8,stages=2").hosts) == 32
    assert max(build("clos:radix=8,stages=2").nports(s.name) for s in build("clos:radix=8,stages=2").switches) == 8
    assert max(build("twolevel:ports=8,hosts=64").nports(f"s{i}") for i in range(8)) == 16
    assert closest_tree(8, 20)[0] == "clos:radix=8,stages=2,nodes=20" and closest_tree(8, 65)[0] == "fattree:k=4,n=4"
