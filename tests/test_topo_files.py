"""Topologies in and out (issue 31, item 2): ``emu topo --links/--nodes/--format``, ``--topo FILE``,
names refused with the nearest valid ones."""

import json
import re

import pytest

from emu.config import ConfigError
from emu.front.cli import main
from emu.topologies.files import dumps
from emu.topologies.registry import build

FAMILIES = ["star:n=4", "fattree:k=2,n=3", "fattree:k=2,n=2,rails=2", "fattree:k=2,n=2,links=2",
            "clos:radix=4,stages=2", "clos:radix=8,stages=2,nodes=12", "twolevel:ports=4,hosts=8",
            "mesh:k=3,n=2", "mesh:k=2,n=2,ports=2", "torus:k=3,n=2", "qsnet:nodes=8", "qsnet:nodes=200"]
RUN = {"mesh:k=3,n=2": ["--test", "pingall+mcast_all", "--algo", "nc", "--size", "64B"],
       "torus:k=3,n=2": ["--test", "pingall+mcast_all", "--algo", "combine", "--size", "64B"],
       "qsnet:nodes=8": ["--test", "pingall+bcast+barrier", "--offload", "hw"],
       "qsnet:nodes=200": ["--test", "pingall"]}
"""What each family runs in the round-trip test (default: pingall and a 4 KiB allreduce)."""


def _key(t):
    """Everything of a topology a run reads."""
    links = [(lk.a, lk.a_port, lk.b, lk.b_port, lk.spec) for lk in t.links]
    nodes = [(n.name, n.kind, n.id, n.spec, n.info) for n in t.nodes.values()]
    return (t.name, nodes, links, t.routes, t.grid, t.figures, t.diameter, t.bisection)


@pytest.mark.parametrize("spec", FAMILIES)
@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_export_import_gives_the_same_topology(spec, fmt, tmp_path):
    t = build(spec)
    t.validate()
    path = tmp_path / f"t.{fmt}"
    path.write_text(dumps(t, fmt))
    assert _key(build(str(path))) == _key(t)


def _figures(topo: str, extra: list[str], tmp_path, capsys) -> tuple[list, bytes]:
    out, cap = tmp_path / "r.json", tmp_path / "c.pcapng"
    assert main(["run", "--topo", topo, *extra, "--json", str(out), "--pcap", str(cap)]) == 0, capsys.readouterr().out
    rows = json.loads(out.read_text())["results"]
    for r in rows:
        r.pop("wall_s")
        r.pop("topology")
    return rows, cap.read_bytes()


@pytest.mark.parametrize("spec", FAMILIES)
def test_export_then_import_gives_the_same_figures(spec, tmp_path, capsys):
    """Every family, every figure and the capture's bytes: the routes travel in the file (up*/down*,
    dimension order, QsNet's tables), so the file runs what the spec runs."""
    extra = RUN.get(spec, ["--test", "pingall+allreduce", "--size", "4KiB"])
    want = _figures(spec, extra, tmp_path, capsys)
    fmt = "graphml" if FAMILIES.index(spec) % 2 else "json"
    path = tmp_path / f"t.{fmt}"
    assert main(["topo", spec, "--format", fmt, "--out", str(path)]) == 0
    assert _figures(str(path), extra, tmp_path, capsys) == want


@pytest.mark.parametrize("spec,same", [("star:n=4", True), ("mesh:k=3,n=2", True), ("torus:k=3,n=2", True),
                                       ("qsnet:nodes=16", True), ("fattree:k=2,n=3", False),
                                       ("clos:radix=4,stages=2", False), ("twolevel:ports=4,hosts=8", False)])
def test_import_without_routes_is_shortest_path(spec, same, tmp_path, capsys):
    """Without routes a file is routed by shortest paths, the lowest port first. On a mesh or torus
    that is dimension order (ports are numbered dimension by dimension), on a star and QsNet (whose
    routers choose adaptively) the family's own: every figure is the same. On the trees each route is
    as short as the family's (pingall's RTTs and hop counts are the same) but the up port differs
    (the lowest, not destination mod k), so loaded figures differ."""
    extra = ["--test", "pingall+allreduce", "--size", "4KiB"]
    want = _figures(spec, extra, tmp_path, capsys)
    path = tmp_path / "t.json"
    assert main(["topo", spec, "--format", "json", "--out", str(path), "--no-routes"]) == 0
    assert "routes" not in path.read_text()
    got = _figures(str(path), extra, tmp_path, capsys)
    ping = [{k: v for k, v in r.items() if k != "per_link"} for r in (want[0][0], got[0][0])]
    assert ping[0] == ping[1]
    assert (got[0] == want[0]) is same


def test_hand_written_json_and_graphml_run(tmp_path, capsys):
    """A file with only what it needs: kinds and links (ports, specs and routes by default)."""
    nodes = [{"id": f"h{i}", "kind": "host"} for i in range(3)] + [{"id": "sw", "kind": "switch"}]
    links = [{"source": f"h{i}", "target": "sw", "link.latency_ns": 250} for i in range(3)]
    (tmp_path / "tri.json").write_text(json.dumps({"nodes": nodes, "links": links}))
    graphml = """<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="k" for="node" attr.name="kind" attr.type="string"/>
  <key id="lat" for="edge" attr.name="link.latency_ns" attr.type="int"/>
  <graph edgedefault="undirected">
    <node id="a"><data key="k">host</data></node>
    <node id="b"><data key="k">host</data></node>
    <node id="x"><data key="k">switch</data></node>
    <node id="y"><data key="k">switch</data></node>
    <edge source="x" target="a"><data key="lat">250</data></edge>
    <edge source="y" target="x"/>
    <edge source="b" target="y"/>
  </graph>
</graphml>"""
    (tmp_path / "line.graphml").write_text(graphml)
    t = build(str(tmp_path / "line.graphml"))
    assert [(lk.a, lk.a_port, lk.b, lk.b_port) for lk in t.links] == [("x", 0, "a", 0), ("y", 0, "x", 1), ("b", 0, "y", 1)]
    assert t.diameter == 3 and t.route("a", "b") == ["a", "x", "y", "b"]
    for name, rtt in (("tri.json", None), ("line.graphml", None)):
        rows, _ = _figures(str(tmp_path / name), ["--test", "pingall"], tmp_path, capsys)
        assert rows[0]["ok"]
    # one-way latency of h0 -> h1 on the star: two links of 250 ns, the switch, the NIC (model beside it)
    t = build(str(tmp_path / "tri.json"))
    assert t.links[0].spec.latency_ns == 250 and t.diameter == 2


def test_settings_layers_over_a_file(tmp_path):
    """--config under the file's values, --set over them, as for a spec's own parameters."""
    path = tmp_path / "s.json"
    path.write_text(dumps(build("star:n=2,latency_ns=70"), "json"))
    t = build(str(path), defaults={"link": {"latency_ns": 5, "priority": False}}, settings={"host": {"xor_ns": 3}})
    assert {lk.spec.latency_ns for lk in t.links} == {70} and not t.links[0].spec.priority
    assert t.hosts[0].spec.xor_ns == 3
    t = build(str(path), settings={"link": {"latency_ns": 9}})
    assert {lk.spec.latency_ns for lk in t.links} == {9}


def _refusal(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        build(str(path))
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def _star(**changes):
    data = json.loads(dumps(build("star:n=3"), "json"))
    for where, fn in changes.items():
        fn(data)
    return json.dumps(data)


def test_bad_files_are_refused_naming_the_element_and_attribute(tmp_path):
    def node(i, **kv):
        return lambda d: d["nodes"][i].update(kv)

    with pytest.raises(ConfigError, match="no such file"):
        build(str(tmp_path / "none.graphml"))
    assert "not JSON" in _refusal(tmp_path, "a.json", "{nodes: ")
    assert "not GraphML" in _refusal(tmp_path, "a.graphml", "<graphml><graph>")
    assert "node-link data" in _refusal(tmp_path, "b.json", "[1, 2]")
    m = _refusal(tmp_path, "c.json", _star(x=node(0, kind="router")))
    assert "node 'h0': attribute 'kind' must be host or switch, got 'router'" in m
    m = _refusal(tmp_path, "d.json", _star(x=node(3, **{"switch.vsc": 2})))
    assert "switch 's0': unknown attribute 'switch.vsc'; did you mean switch.vcs" in m
    m = _refusal(tmp_path, "e.json", _star(x=node(3, **{"switch.vcs": "many"})))
    assert "switch 's0': attribute switch.vcs must be an integer" in m
    m = _refusal(tmp_path, "f.json", _star(x=node(0, **{"switch.vcs": 2})))
    assert "host 'h0': unknown attribute 'switch.vcs'" in m
    m = _refusal(tmp_path, "g.json", _star(x=node(3, routes=[0, 1])))
    assert "switch 's0': attribute 'routes' has 2 ports, one per host wanted (3)" in m
    m = _refusal(tmp_path, "h.json", _star(x=node(3, routes=[0, 1, 7])))
    assert "switch 's0': attribute 'routes' names port 7, which has no link" in m
    m = _refusal(tmp_path, "i.json", _star(x=lambda d: d["links"][1].update(target_port=0)))
    assert "port 0 of s0 is already linked" in m
    m = _refusal(tmp_path, "j.json", _star(x=lambda d: d["links"][0].update({"link.latency_ns": -5})))
    assert "link h0-s0:" in m and "latency" in m
    m = _refusal(tmp_path, "k.json", _star(x=lambda d: d["links"].pop(), y=lambda d: d["nodes"][3].pop("routes")))
    assert "node 'h2' has no links" in m
    two = json.loads(_star())
    two["nodes"].append({"id": "s1", "kind": "switch"})
    two["nodes"].append({"id": "h9", "kind": "host"})
    two["links"].append({"source": "h9", "target": "s1"})
    two["nodes"][3].pop("routes")
    m = _refusal(tmp_path, "l.json", json.dumps(two))
    assert "host 'h9' cannot reach h0" in m
    m = _refusal(tmp_path, "m.json", _star(x=lambda d: d["graph"].update(grdi="3,2,0")))
    assert "unknown graph attribute 'grdi'; did you mean grid" in m
    m = _refusal(tmp_path, "n.json", _star(x=lambda d: d["graph"].update(grid="3,2,x")))
    assert "graph attribute 'grid' must be k,n,wrap" in m
    m = _refusal(tmp_path, "o.json", _star(x=lambda d: d["graph"].update(grid="3,2,0")))
    assert "graph attribute 'grid' '3,2,0': a k-ary n-mesh or torus has k**n hosts" in m


def test_routes_in_a_file_are_checked_for_loops(tmp_path):
    data = json.loads(dumps(build("fattree:k=2,n=2"), "json"))
    sw = {n["id"]: n for n in data["nodes"]}
    up = sw["s0"]["routes"][2]            # s0's way to h2 goes up to a top switch
    top = next(lk for lk in data["links"] if lk["source"] == "s0" and lk["source_port"] == up)["target"]
    back = next(lk["target_port"] for lk in data["links"] if lk["source"] == "s0" and lk["target"] == top)
    sw[top]["routes"][2] = back           # ... which sends it back down to s0
    path = tmp_path / "loop.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=f"switch '(s0|{top})': attribute 'routes' loops toward host h2"):
        build(str(path))


def _ring(n: int, model: str) -> str:
    nodes = [{"id": f"h{i}", "kind": "host"} for i in range(n)]
    nodes += [{"id": f"s{i}", "kind": "switch", "switch.model": model} for i in range(n)]
    links = [{"source": f"h{i}", "target": f"s{i}"} for i in range(n)]
    links += [{"source": f"s{i}", "target": f"s{(i + 1) % n}"} for i in range(n)]
    return json.dumps({"nodes": nodes, "links": links})


def test_deadlock_check_on_import(tmp_path):
    """A ring routed by shortest paths has a cyclic channel dependency: refused with finite buffers
    (input-queued routers), accepted with the output-queued switch, whose buffers are unbounded."""
    m = _refusal(tmp_path, "ring.json", _ring(6, "input_queued"))
    assert "cyclic channel dependency (" in m and "finite buffers" in m and "switch.model=output_queued" in m
    path = tmp_path / "ring_oq.json"
    path.write_text(_ring(6, "output_queued"))
    assert len(build(str(path)).hosts) == 6
    from emu.topologies.deadlock import dependency_cycle

    assert dependency_cycle(build(str(path)))


def test_emu_topo_lists_links_and_nodes(capsys):
    assert main(["topo", "fattree:k=2,n=2", "--links"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["link", "port", "peer", "port", "latency_ns", "bandwidth"]
    t = build("fattree:k=2,n=2")
    rows = [line.split() for line in out[1:] if line]
    assert [r[0] for r in rows] == [f"{lk.a}-{lk.b}" for lk in t.links]
    assert rows[4] == ["s0-s2", "s0-p2", "s2-p0", "100", "100", "Gbit/s"]
    assert main(["topo", "mesh:k=2,n=2", "--nodes"]) == 0
    out = capsys.readouterr().out.splitlines()
    s0 = next(line for line in out if line.startswith("s0 "))
    assert s0.split()[:5] == ["s0", "switch", "0x80000", "5", "coords=0,0"] and "switch.model=input_queued" in s0


def test_emu_topo_format_to_stdout(capsys):
    assert main(["topo", "star:n=2", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [n["kind"] for n in data["nodes"]] == ["host", "host", "switch"]
    assert data["links"][0]["link.latency_ns"] == 100 and data["nodes"][2]["switch.model"] == "output_queued"
    assert main(["topo", "star:n=2", "--format", "graphml"]) == 0
    assert 'attr.name="switch.processing_delay_ns"' in capsys.readouterr().out
    assert main(["topo", "star:n=2", "--format", "json", "--links"]) == 2
    assert main(["topo", "star:n=2", "--out", "x.json"]) == 2
    assert "give --format" in capsys.readouterr().out


def test_json_figures_of_emu_topo_still_there(capsys):
    assert main(["topo", "qsnet:nodes=256", "--json", "-"]) == 0
    figs = json.loads(capsys.readouterr().out)
    assert figs["cables"] == 384 and figs["hosts"] == 256


def test_unknown_names_refused_with_the_nearest(capsys):
    assert main(["run", "--topo", "fattree:k=4,n=3", "--fault", "at=20us,link=s0-s4,down"]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert re.search(r"no link between s0 and s4 in fattree:k=4,n=3; nearest links: s0-s1\d", out)
    assert "emu topo fattree:k=4,n=3 --links" in out
    assert main(["run", "--topo", "fattree:k=4,n=3", "--fault", "at=20us,link=s0-s99,down"]) == 2
    assert "no node 's99' in fattree:k=4,n=3; nearest nodes: s9, s39" in capsys.readouterr().out
    assert main(["run", "--topo", "fattree:k=4,n=2", "--fault", "at=0,switch=s77,down"]) == 2
    assert "no switch 's77' in fattree:k=4,n=2; nearest switches: s7" in capsys.readouterr().out
    assert main(["run", "--topo", "star:n=8", "--test", "allreduce", "--ranks", "h0,h12"]) == 2
    assert "--ranks: h12 not hosts of this topology (h0..h7); nearest hosts: h2, h1" in capsys.readouterr().out
    from emu.front.topo_cmd import check_host_names

    with pytest.raises(ConfigError, match=r"--hosts: hh3 not a host of star:n=4 \(hosts h0..h3\); nearest hosts: h3"):
        check_host_names("--hosts", ["h0", "hh3"], ["h0", "h1", "h2", "h3"], "star:n=4")
