"""What ``emu.build`` makes once per domain and shares (each node's flags, ``largest_frames`` in the
engines' cache): two topologies built one after the other in one process each get their own -- the
input-queued routers' VC buffers and the credits of the ports into them sized by their own largest frame."""

from emu.build import Plan, build_domain, largest_frame
from emu.config import RunConfig
from emu.topologies.registry import build


def _buffers(spec: str, mtu: int):
    topo = build(spec, settings={"switch": {"model": "input_queued"}, "host": {"mtu_bytes": mtu}})
    dom = build_domain(Plan.make(topo, RunConfig(), 1), 0)
    try:
        routers = {el.name: el.engine.buffer for el in dom.elements if topo.nodes[el.name].kind == "switch"}
        credits = {p.peer: p.flow.credits[0] for el in dom.elements if topo.nodes[el.name].kind == "host"
                   for p in el.out_ports if p.flow is not None}
        want = {s.name: s.spec.buffer_bytes(largest_frame(topo, s.name)) for s in topo.switches}
        return routers, credits, want
    finally:
        dom.close_sockets()


def test_each_build_sizes_its_routers_by_its_own_largest_frame():
    seen = []
    for spec, mtu in (("mesh:k=2,n=2", 1000), ("mesh:k=3,n=2", 4000), ("mesh:k=2,n=2", 1500)):
        routers, credits, want = _buffers(spec, mtu)
        assert routers == want and credits == want  # (every router here has a host into it)
        seen.append(set(want.values()))
    assert len({frozenset(s) for s in seen}) == 3
