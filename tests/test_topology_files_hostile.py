"""Topology files from others are data, never commands (issue 41, items 2, 3, 4 and 6 as they concern
``--topo FILE``): every size a file implies is checked against a spec's limits before anything is
built, loading is linear, a hostile file (deep nesting, huge numbers, a DOCTYPE, a FIFO, a device) is
refused in one line naming the file and the problem, and every number is range-checked naming the
element and the attribute."""

import json
import os
import sys

import pytest

from emu.config import ConfigError
from emu.topologies.files import dumps
from emu.topologies.registry import build

GRAPHML_HEAD = """<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="k" for="node" attr.name="kind" attr.type="string"/>
"""


def _star(n: int = 3, routes: bool = True) -> dict:
    return json.loads(dumps(build(f"star:n={n}"), "json", routes=routes))


def _refused(tmp_path, name: str, text: str | bytes) -> str:
    """The one-line refusal of a file holding ``text``: names the file, stays short."""
    path = tmp_path / name
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    with pytest.raises(ConfigError) as e:
        build(str(path))
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert name in msg, msg
    return msg


def _with(data: dict, change) -> str:
    change(data)
    return json.dumps(data)


# -- item 2: sizes before anything is built ---------------------------------------------------------
def test_a_huge_grid_is_refused_without_computing_k_to_the_n(tmp_path):
    m = _refused(tmp_path, "g.json", _with(_star(), lambda d: d["graph"].update(grid="3,99999999999999,1")))
    assert "graph attribute 'grid'" in m and "n within 1..4" in m
    m = _refused(tmp_path, "g2.json", _with(_star(), lambda d: d["graph"].update(grid=[10**40, 2, 0])))
    assert "k must be within 2..256" in m
    m = _refused(tmp_path, "g3.graphml", dumps(build("mesh:k=3,n=2"), "graphml").replace(">3,2,0<", ">3,2,x<"))
    assert "graph attribute 'grid' must be k,n,wrap" in m


def test_more_nodes_than_elements_allowed_are_refused_before_building(tmp_path, monkeypatch):
    text, graphml = json.dumps(_star(12)), dumps(build("star:n=12"), "graphml")
    monkeypatch.setenv("EMU_MAX_ELEMENTS", "10")
    m = _refused(tmp_path, "big.json", text)
    assert "would have 12 hosts and 1 switches (13 elements)" in m and "over the limit of 10 elements" in m
    assert "choose a smaller topology" in m
    # GraphML: refused as the nodes come, at the limit-th
    m = _refused(tmp_path, "big.graphml", graphml)
    assert "more than 10 nodes: over the limit of 10 elements" in m


def test_routing_tables_past_the_limit_are_refused(tmp_path, monkeypatch):
    text = dumps(build("fattree:k=2,n=2"), "json", routes=False)
    monkeypatch.setenv("EMU_MAX_ROUTE_ENTRIES", "10")
    m = _refused(tmp_path, "ft.json", text)
    assert "over the limit of 10 routing-table entries" in m   # 4 hosts x 4 switches, with or without routes


def test_links_past_memory_are_refused(tmp_path, monkeypatch):
    from emu.topologies import estimate

    monkeypatch.setattr(estimate, "_available_bytes", lambda: 2 * (4 * estimate.BYTES_PER_ELEMENT + 100_000))
    nodes = [{"id": "h0", "kind": "host"}, {"id": "h1", "kind": "host"}, {"id": "s0", "kind": "switch"},
             {"id": "s1", "kind": "switch"}]
    links = [{"source": "h0", "target": "s0"}, {"source": "h1", "target": "s1"}] + \
        [{"source": "s0", "target": "s1"} for _ in range(50)]
    m = _refused(tmp_path, "par.json", json.dumps({"nodes": nodes, "links": links}))
    assert "would have 52 links" in m and "over half of the memory available" in m


# -- item 2: linear ---------------------------------------------------------------------------------
def _events(path: str) -> int:
    """Function calls (Python and C) made while loading ``path``: a count, not a clock."""
    count = 0

    def prof(_frame, _event, _arg):
        nonlocal count
        count += 1

    build(path)  # imports and first-use caches out of the count
    sys.setprofile(prof)
    try:
        build(path)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize("index", [True, False])
def test_loading_is_linear_with_and_without_index(tmp_path, index):
    """The calls made to load a star of 2n hosts are twice those of n (quadratic: four times), with
    the links' ``index`` attributes or without them (the case that was quadratic)."""
    calls = {}
    for n in (400, 800):
        data = _star(n)
        if not index:
            for lk in data["links"]:
                del lk["index"]
        path = tmp_path / f"s{n}.json"
        path.write_text(json.dumps(data))
        calls[n] = _events(str(path))
    assert calls[800] / calls[400] < 2.2, calls


def test_without_index_the_links_keep_file_order(tmp_path):
    t = build("fattree:k=2,n=3")
    data = json.loads(dumps(t, "json"))
    with_index = tmp_path / "a.json"
    with_index.write_text(json.dumps(data))
    for lk in data["links"]:
        del lk["index"]
    without = tmp_path / "b.json"
    without.write_text(json.dumps(data))
    key = lambda u: ([(lk.a, lk.a_port, lk.b, lk.b_port, lk.spec) for lk in u.links], u.routes)  # noqa: E731
    assert key(build(str(with_index))) == key(build(str(without))) == key(t)
    # a file listing its links out of order, each with its index, is put back in order
    data = json.loads(dumps(t, "json"))
    data["links"].reverse()
    shuffled = tmp_path / "c.json"
    shuffled.write_text(json.dumps(data))
    assert key(build(str(shuffled))) == key(t)


def test_the_loop_check_names_the_loop(tmp_path):
    """The vectorised routing check finds what the walk found: here a loop between two switches."""
    data = json.loads(dumps(build("mesh:k=3,n=1"), "json"))
    nodes = {n["id"]: n for n in data["nodes"]}
    nodes["s0"]["routes"][2] = 2                           # s0 sends frames for h2 up to s1 ...
    nodes["s1"]["routes"][2] = 1                           # ... which sends them back down to s0
    m = _refused(tmp_path, "loop.json", json.dumps(data))
    assert "attribute 'routes' loops toward host h2: s0 -> s1 -> s0" in m


# -- item 3: hostile structure ------------------------------------------------------------------------
def test_deep_xml_is_refused_before_it_is_parsed_into_a_tree(tmp_path):
    deep = GRAPHML_HEAD + "<graph>" + "<desc>" * 5000 + "</desc>" * 5000 + "</graph></graphml>"
    assert "nests deeper than 64 levels" in _refused(tmp_path, "deep.graphml", deep)


def test_doctype_and_entities_are_refused(tmp_path):
    laughs = ('<?xml version="1.0"?><!DOCTYPE g [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
              '<graphml><graph><node id="&b;"/></graph></graphml>')
    assert "DOCTYPE" in _refused(tmp_path, "lol.graphml", laughs)
    undefined = GRAPHML_HEAD + '<graph><node id="&ext;"/></graph></graphml>'
    assert "not GraphML (XML error: undefined entity" in _refused(tmp_path, "ent.graphml", undefined)


def test_graphml_structures_a_topology_never_has_are_refused(tmp_path):
    nested = GRAPHML_HEAD + '<graph><node id="a"><graph/></node></graph></graphml>'
    assert "node 'a' holds a nested <graph>" in _refused(tmp_path, "n.graphml", nested)
    hyper = GRAPHML_HEAD + '<graph><hyperedge/></graph></graphml>'
    assert "<hyperedge>" in _refused(tmp_path, "h.graphml", hyper)
    two = GRAPHML_HEAD + "<graph/><graph/></graphml>"
    assert "more than one <graph>" in _refused(tmp_path, "two.graphml", two)
    nokey = GRAPHML_HEAD + '<graph><node id="a"><data key="zz">1</data></node></graph></graphml>'
    assert "node 'a': <data key='zz'> has no <key>" in _refused(tmp_path, "k.graphml", nokey)
    markup = GRAPHML_HEAD + '<graph><node id="a"><data key="k"><b>host</b></data></node></graph></graphml>'
    assert "a value is text" in _refused(tmp_path, "m.graphml", markup)
    assert "root element is <topo>" in _refused(tmp_path, "r.graphml", "<topo/>")


def test_json_of_the_wrong_shape_is_refused(tmp_path):
    m = _refused(tmp_path, "g.json", _with(_star(), lambda d: d.update(graph=[["name", "x"]])))
    assert '"graph" must be an object of graph attributes' in m and "got a list" in m
    assert "nests deeper than 64 levels" in _refused(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000)
    m = _refused(tmp_path, "d2.json", '{"nodes": [], "graph": {"figures": ' + '{"a": ' * 70 + "1" + "}" * 71 + "}")
    assert "nests deeper than 64 levels" in m
    m = _refused(tmp_path, "id.json", _with(_star(), lambda d: d["nodes"][0].update(id=["h", 0])))
    assert 'nodes[0]: "id" must be a node\'s name (a string), got a list' in m
    m = _refused(tmp_path, "l.json", _with(_star(), lambda d: d.update(links={"source": "h0"})))
    assert '"links" must be a list' in m
    m = _refused(tmp_path, "name.json", _with(_star(), lambda d: d["nodes"][0].update(id="h" * 10_000)))
    assert "is 10,000 characters long; a node's name has at most 256" in m


def test_a_number_of_100000_digits_is_refused_in_one_line(tmp_path):
    digits = "9" * 100_000
    m = _refused(tmp_path, "n.json", json.dumps(_star()).replace('"index": 0', f'"index": {digits}', 1))
    assert "not JSON" in m and "digits" in m
    g = dumps(build("star:n=3"), "graphml")
    first = g.index('<data key="', g.index("<edge "))   # the first link's first value, an integer
    close = g.index("</data>", first)
    m = _refused(tmp_path, "n.graphml", g[:g.index(">", first) + 1] + digits + g[close:])
    assert "link h0-s0: attribute" in m and "must be an integer" in m and "100,002 characters" in m
    m = _refused(tmp_path, "s.json", _with(_star(), lambda d: d["links"][0].update(source_port=digits)))
    assert "attribute 'source_port' must be an integer within 0..65535" in m


# -- item 4: a FIFO, a device --------------------------------------------------------------------------
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "t.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"--topo .*t\.json: is a FIFO \(named pipe\), not a regular file"):
        build(str(fifo))


def test_a_symlink_to_dev_zero_is_refused_without_reading_it(tmp_path):
    link = tmp_path / "z.graphml"
    os.symlink("/dev/zero", link)
    with pytest.raises(ConfigError, match=r"z\.graphml: is a character device, not a regular file"):
        build(str(link))
    with pytest.raises(ConfigError, match="unknown topology '/dev/zero'"):   # no suffix: a spec's name, never opened
        build("/dev/zero")
    with pytest.raises(ConfigError, match="is a directory"):
        os.mkdir(tmp_path / "d.json")
        build(str(tmp_path / "d.json"))


def test_the_cli_refuses_a_fifo_in_one_line(tmp_path, capsys):
    from emu.front.cli import main

    fifo = tmp_path / "t.graphml"
    os.mkfifo(fifo)
    assert main(["topo", str(fifo)]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "is a FIFO" in out


# -- item 6: every number range-checked, naming the element and the attribute --------------------------
@pytest.mark.parametrize("change,expect", [
    (lambda d: d["links"][0].update(source_port=10**12),
     "link h0-s0: attribute 'source_port' must be an integer within 0..65535, got 1000000000000"),
    (lambda d: d["links"][1].update(target_port=-1), "link h1-s0: attribute 'target_port' must be an integer within 0..65535"),
    (lambda d: d["links"][2].update(index=10**12), "link h2-s0: attribute 'index' must be an integer within 0..2"),
    (lambda d: d["links"][2].update(index=0), "link h2-s0: attribute 'index' 0 is link h0-s0's too"),
    (lambda d: d["links"][0].update(index="three"), "link h0-s0: attribute 'index' must be an integer"),
    (lambda d: d["nodes"][3]["routes"].__setitem__(1, 10**30),
     "switch 's0': attribute 'routes' must be an integer within -1..65535 (entry 1; -1: no route)"),
    (lambda d: d["nodes"][3]["routes"].__setitem__(1, True), "switch 's0': attribute 'routes' must be an integer"),
    (lambda d: d["graph"].update(diameter=10**15), "graph: attribute 'diameter' must be an integer within 0..3"),
    (lambda d: d["graph"].update(bisection=-4), "graph: attribute 'bisection' must be an integer within 0..3"),
    (lambda d: d["nodes"][0].update(info={"coords": [10**40]}), "host 'h0': attribute 'info' holds an integer of about 41 digits"),
    (lambda d: d["graph"].update(figures={"cables": 1e400}), "attribute 'figures' holds inf"),
    (lambda d: d["links"][0].update({"link.latency_ns": 10**15}), "link h0-s0: LinkSpec.latency_ns must be an integer within"),
    (lambda d: d["nodes"][3].update({"switch.vcs": 10**12}), "switch 's0': SwitchSpec.vcs must be within 1..32"),
    (lambda d: d["nodes"][3].update({"switch.model": "x" * 5000}), "attribute switch.model is 5,000 characters long"),
    (lambda d: d["nodes"][0].update(kind="r" * 5000), "node 'h0': attribute 'kind' must be host or switch, got 'rrr"),
    (lambda d: d["nodes"][3].update({"switch.vcs": [1] * 100_000}), "attribute switch.vcs must be an integer, got [1, 1,"),
    (lambda d: d["links"][0].update({"link.priority": {"a": "b" * 5000}}), "attribute link.priority must be true or false"),
])
def test_numbers_out_of_range_are_refused_as_such(tmp_path, change, expect):
    assert expect in _refused(tmp_path, "t.json", _with(_star(), change))


def test_ports_far_past_the_links_are_refused(tmp_path):
    """A port number drives an allocation at run time (every port up to the highest): a node may leave
    at most max(256, its links) ports unlinked."""
    data = _star(routes=False)
    data["links"][0]["target_port"] = 60_000
    m = _refused(tmp_path, "p.json", json.dumps(data))
    assert "switch 's0': its ports are numbered up to 60,000" in m and "number its ports from 0" in m
    data["links"][0]["target_port"] = 200   # a few unlinked ports are a node's own business (a mesh's border)
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(data))
    assert build(str(path)).nports("s0") == 201


@pytest.mark.parametrize("spec", ["twolevel:ports=16,hosts=17", "mesh:k=2,n=4,ports=8", "qsnet:nodes=130",
                                  "clos:radix=8,stages=3"])
def test_every_family_exports_within_the_port_rule(spec, tmp_path):
    t = build(spec)
    path = tmp_path / "t.graphml"
    path.write_text(dumps(t, "graphml"))
    assert build(str(path)).routes == t.routes


# -- GraphML values ----------------------------------------------------------------------------------
def test_graphml_types_and_defaults(tmp_path):
    text = GRAPHML_HEAD + """  <key id="lat" for="edge" attr.name="link.latency_ns" attr.type="int"><default>250</default></key>
  <key id="pri" for="edge" attr.name="link.priority" attr.type="boolean"/>
  <graph edgedefault="undirected">
    <node id="a"><data key="k">host</data></node>
    <node id="b"><data key="k">host</data></node>
    <node id="x"><data key="k">switch</data></node>
    <edge source="a" target="x"><data key="pri">FALSE</data></edge>
    <edge source="b" target="x"><data key="lat">75</data></edge>
  </graph>
</graphml>"""
    path = tmp_path / "d.graphml"
    path.write_text(text)
    t = build(str(path))
    assert [(lk.spec.latency_ns, lk.spec.priority) for lk in t.links] == [(250, False), (75, True)]
    bad = text.replace(">FALSE<", ">maybe<")
    assert "link a-x: attribute 'link.priority' must be true or false" in _refused(tmp_path, "b.graphml", bad)
    arabic = text.replace(">75<", ">٧٥<")
    assert "must be an integer written in ASCII" in _refused(tmp_path, "c.graphml", arabic)


# -- the deadlock check, linear ------------------------------------------------------------------------
def test_the_vectorised_deadlock_check_agrees_with_the_channel_dependency_graph():
    """``file_deadlock.acyclic`` (linear in the tables) says what ``deadlock.dependency_cycle`` says, on
    the families and on random graphs with random tables (loops and missing routes included)."""
    import random

    from emu.topologies.base import NO_ROUTE, Topology
    from emu.topologies.deadlock import dependency_cycle
    from emu.topologies.file_deadlock import acyclic

    cases = [build(s) for s in ("mesh:k=3,n=2", "torus:k=4,n=2", "fattree:k=2,n=3", "qsnet:nodes=130",
                                "twolevel:ports=4,hosts=10")]
    for spec in ("mesh:k=4,n=2", "torus:k=5,n=2", "fattree:k=2,n=3"):
        cases.append(build(spec))
        cases[-1].compute_routes()                      # shortest paths, lowest port first
    for seed in range(300):
        r = random.Random(seed)
        S, H = r.randint(2, 6), r.randint(2, 6)
        t = Topology("random")
        for i in range(H):
            t.add_host(f"h{i}")
        for i in range(S):
            t.add_switch(f"s{i}")
        for i in range(H):
            t.add_link(f"h{i}", f"s{i % S}")
        for i in range(S - 1):
            t.add_link(f"s{i}", f"s{i + 1}")
        for _ in range(r.randint(0, 2 * S)):
            a, b = r.sample(range(S), 2)
            t.add_link(f"s{a}", f"s{b}")
        nb = t.neighbours()
        for i in range(S):
            ports = [p for p, _v, _vp, _l in nb[f"s{i}"]] + [NO_ROUTE]
            t.routes[f"s{i}"] = [r.choice(ports) for _ in range(H)]
        cases.append(t)
    verdicts = [(acyclic(t), dependency_cycle(t) == []) for t in cases]
    assert all(a == b for a, b in verdicts)
    assert {a for a, _b in verdicts} == {True, False}


@pytest.mark.parametrize("routes,expect", [
    ("0,1,", "attribute 'routes' must be an integer within -1..65535 (entry 2; -1: no route), got ''"),
    ("0,,1", "(entry 1; -1: no route), got ''"),
    ("0,1,99999999999999999999", "(entry 2; -1: no route), got '99999999999999999999'"),
    ("0,1,x", "(entry 2; -1: no route), got 'x'"),
    ("0,1,--2", "(entry 2; -1: no route), got '--2'"),
    ("0,1", "attribute 'routes' has 2 ports, one per host wanted (3)"),
    ("0,1,7", "attribute 'routes' names port 7, which has no link"),
])
def test_graphml_routes_text_is_read_exactly(tmp_path, routes, expect):
    text = dumps(build("star:n=3"), "graphml").replace(">0,1,2<", f">{routes}<")
    assert expect in _refused(tmp_path, "r.graphml", text)
    spaced = tmp_path / "s.graphml"   # what the fast path leaves to the slow one, read the same
    spaced.write_text(dumps(build("star:n=3"), "graphml").replace(">0,1,2<", "> 0, 1 ,2<"))
    assert build(str(spaced)).routes["s0"] == [0, 1, 2]


def test_the_diameter_is_the_longest_shortest_path_between_hosts():
    """``file_routes.diameter`` (a matrix over the hosts' switches) says what a breadth-first search
    from every host says, through switches only, hosts linked to hosts included."""
    import random
    from collections import deque

    from emu.topologies.base import Topology
    from emu.topologies.file_routes import diameter

    def bfs(t):
        nb, best = t.neighbours(), 0
        for h in t.hosts:
            dist, q = {h.name: 0}, deque([h.name])
            while q:
                u = q.popleft()
                if u != h.name and t.nodes[u].kind == "host":
                    continue
                for _p, v, _vp, _l in nb[u]:
                    if v not in dist:
                        dist[v] = dist[u] + 1
                        q.append(v)
            best = max([best] + [d for v, d in dist.items() if t.nodes[v].kind == "host"])
        return best

    cases = [build(s) for s in ("star:n=4", "fattree:k=2,n=3", "mesh:k=3,n=2", "torus:k=4,n=2", "qsnet:nodes=130")]
    for seed in range(200):
        r = random.Random(seed)
        S, H = r.randint(0, 5), r.randint(2, 6)
        t = Topology("random")
        for i in range(H):
            t.add_host(f"h{i}")
        for i in range(S):
            t.add_switch(f"s{i}")
        for i in range(H):
            if S and r.random() < 0.8:
                t.add_link(f"h{i}", f"s{r.randrange(S)}")
            if r.random() < 0.3 and (j := r.randrange(H)) != i:
                t.add_link(f"h{i}", f"h{j}")
        for _ in range(r.randint(0, 2 * S) if S > 1 else 0):
            a, b = r.sample(range(S), 2)
            t.add_link(f"s{a}", f"s{b}")
        cases.append(t)
    got = [(diameter(t), bfs(t)) for t in cases]
    assert all(a == b for a, b in got) and len({a for a, _b in got}) > 3
