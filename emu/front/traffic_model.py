"""The traffic tests' zero-load model (``emu.front.traffic_checks``): a packet's latency from host a
to host b by the topology, with nothing else in the network."""

from __future__ import annotations

from emu.topologies.base import NO_ROUTE


def frame_bytes(link, size: int) -> int:
    """The modelled length on ``link`` of a one-frame message of ``size`` data bytes (``FRAME_OVERHEAD``
    more on an Ethernet-framed link; its framing's otherwise)."""
    return link.frame_bytes(1, 16 + size)  # ptype MSG: a 16-byte message segment header


class PathModel:
    """Zero-load latency of a packet from host a to host b by the topology (cached per pair): the send
    overhead and NIC delay at both ends, each link's serialisation and latency, each switch's
    processing delay (an input-queued router's pipeline stages).

    The route follows the switches' tables, which go by destination alone: from a switch on, the
    rest of the route to b -- and its part of the latency, ``tails`` -- is the same whichever host the
    packet came from, so it is walked once per (switch, b), not once per pair. (Integer parts only:
    a float among them is summed in the route's order, per pair, as :meth:`Topology.route` gives it.)"""

    def __init__(self, topo, size: int):
        self.topo, self.size = topo, size
        self.links = {}
        for lk in topo.links:
            self.links[(lk.a, lk.b)] = self.links[(lk.b, lk.a)] = lk.spec
        self.cache: dict[tuple[str, str], int] = {}
        self.hops: dict[tuple[str, str], int] = {}  # per link direction (u, w): its part of v
        self.tails: dict[tuple[str, str], int] = {}  # (switch s, host b): the part of v from s on, b's NIC included
        self.stages: dict[str, int] = {}  # per switch: its part of v
        self.exact = True  # every part an int so far (sums in any order the same)

    def __call__(self, a: str, b: str) -> int:
        key = (a, b)
        v = self.cache.get(key)
        if v is None:
            ha = self.topo.nodes[a].spec
            head = ha.send_overhead_ns + ha.nic_delay_ns
            tail = self._tail(a, b) if self.exact and type(head) is int else None
            v = self.cache[key] = self._by_route(a, b) if tail is None else head + tail
        return v

    def _hop(self, u: str, w: str):
        h = self.hops.get((u, w))
        if h is None:
            spec = self.links[(u, w)]
            rx = self.topo.nodes[w].spec
            # into an input-queued router with cut-through, its head flit is what the pipeline waits for
            nbytes = frame_bytes(spec, self.size)  # its modelled length on this link
            head = rx.flit_bytes if getattr(rx, "input_queued", False) and rx.cut_through else nbytes
            h = self.hops[(u, w)] = spec.serialization_ns(min(head, nbytes)) + spec.latency_ns
        return h

    def _stage(self, s: str):
        v = self.stages.get(s)
        if v is None:
            rs = self.topo.nodes[s].spec
            v = self.stages[s] = sum(rs.stages_ns) if rs.input_queued else rs.processing_delay_ns
        return v

    def _tail(self, a: str, b: str) -> int | None:
        """The part of v from host ``a`` on (its own overhead and NIC delay left out), by the tables;
        None where the walk meets anything but a plain route of ints (``_by_route`` then, which also
        says what is wrong with a route that is)."""
        topo, tails = self.topo, self.tails
        nodes, peers = topo.nodes, topo.peers()
        d = nodes[b].id
        walked, here = [a], a
        t = None
        for _ in range(2 * len(nodes) + 2):
            port = topo.out_port(here, d)
            nxt = peers.get(here, {}).get(port) if port != NO_ROUTE else None
            if nxt is None:
                return None
            here = nxt[0]
            if here == b:
                t = nodes[b].spec.nic_delay_ns
                break
            if nodes[here].kind == "host":
                return None
            t = tails.get((here, b))
            if t is not None:
                break
            walked.append(here)
        if t is None or type(t) is not int:
            return None
        for u in reversed(walked):  # (each switch walked: its stage, the link on, the rest)
            h = self._hop(u, here)
            s = self._stage(here) if here != b else 0
            if type(h) is not int or type(s) is not int:
                self.exact = False
                return None
            t += h + s
            if u != a:
                tails[(u, b)] = t
            here = u
        return t

    def _by_route(self, a: str, b: str):
        """v summed along ``Topology.route`` (which raises on a missing route or a loop)."""
        nodes = self.topo.nodes
        path = self.topo.route(a, b)
        ha, hb = nodes[a].spec, nodes[b].spec
        v = ha.send_overhead_ns + ha.nic_delay_ns + hb.nic_delay_ns
        for u, w in zip(path, path[1:]):
            v += self._hop(u, w)
        for s in path[1:-1]:
            v += self._stage(s)
        return v
