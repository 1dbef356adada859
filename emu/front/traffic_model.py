"""The traffic tests' zero-load model (``emu.front.traffic_checks``): a packet's latency from host a
to host b by the topology, with nothing else in the network."""

from __future__ import annotations

from itertools import chain

import numpy as np

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
    a float among them is summed in the route's order, per pair, as :meth:`Topology.route` gives it.)
    A load point's measured packets at once: :meth:`totals` (every route walked together, numpy)."""

    def __init__(self, topo, size: int):
        self.topo, self.size = topo, size
        self.links = {}
        for lk in topo.links:
            self.links[(lk.a, lk.b)] = self.links[(lk.b, lk.a)] = lk.spec
        self.cache: dict[tuple[str, str], int] = {}
        self.hops: dict[tuple[str, str], int] = {}  # per link direction (u, w): its part of v
        self.tails: dict[tuple[str, str], int] = {}  # (switch s, host b): the part of v from s on, b's NIC included
        self.stages: dict[str, int] = {}  # per switch: its part of v
        self.nbytes: dict[int, int] = {}  # per link spec (its id): the packet's modelled length on it
        self.exact = True  # every part an int so far (sums in any order the same)
        self._arrays = None  # (``_walk``'s tables of the topology, made on its first call)

    def totals(self, groups) -> tuple[int | float, int | float]:
        """The sum and the largest of v over packets given by destination, ``groups`` = [(b, [a of each
        packet to b])]: the sum as ``sum(v)`` per destination added up in order, the largest 0 where
        there is no packet. Every packet's route walked at once (numpy, :meth:`_walk`) where every part
        is an int (any order the same sum); else, or where a route is not plain, per pair in order."""
        srcs, dsts = [], []
        for b, ss in groups:
            srcs += ss
            dsts += [b] * len(ss)
        v = self._walk(srcs, dsts) if self.exact and srcs else None
        if v is not None:
            return int(v.sum()), int(v.max())
        total, top = 0, 0
        for b, ss in groups:
            zs = [self(a, b) for a in ss]
            total += sum(zs)
            top = max([top, *zs])
        return total, top

    def _tables(self):
        """``_walk``'s view of the topology: node name -> row; per row whether it is a host, its
        address (-1: not a host), the send overhead and NIC delay at the start and the NIC delay at
        the end and whether both are ints (hosts; else not), the port toward every address
        (``Topology.out_port`` as a matrix: ``NO_ROUTE`` where none), the next node there (-1: none),
        and per (row, port) the hop's part where known."""
        topo = self.topo
        names = list(topo.nodes)
        index = {name: i for i, name in enumerate(names)}
        nodes = [topo.nodes[name] for name in names]
        is_host = [nd.kind == "host" for nd in nodes]
        host = np.array(is_host, dtype=bool)
        addr = np.array([nd.id if h else -1 for nd, h in zip(nodes, is_host)], dtype=np.int64)
        heads, ends, ok = [], [], []
        for nd, h in zip(nodes, is_host):
            x = y = 0
            if h:
                x, y = nd.spec.send_overhead_ns + nd.spec.nic_delay_ns, nd.spec.nic_delay_ns
            good = h and type(x) is int and type(y) is int
            heads.append(x if good else 0)
            ends.append(y if good else 0)
            ok.append(good)
        naddr = int(addr.max()) + 1
        ports = np.where(host, 0, NO_ROUTE)[:, None].repeat(naddr, axis=1)  # (no table: a host's port 0, else none)
        tables = [topo.routes.get(name) for name in names]
        whole = [i for i, t in enumerate(tables) if t is not None and len(t) == naddr]
        if whole:
            ports[whole] = np.fromiter(chain.from_iterable(tables[i] for i in whole), dtype=np.int64,
                                       count=len(whole) * naddr).reshape(len(whole), naddr)
        for i, t in enumerate(tables):
            if t is not None and len(t) != naddr:
                row = np.asarray(t, dtype=np.int64)[:naddr]
                ports[i, :len(row)] = row
                ports[i, len(row):] = NO_ROUTE
        peers = topo.peers()
        width = 1 + max((p for nb in peers.values() for p in nb), default=0)
        at, to = [], []
        for name, nb in peers.items():
            i = index[name]
            for p, (other, _) in nb.items():
                if p >= 0:
                    at.append(i * width + p)
                    to.append(index[other])
        peer = np.full(len(nodes) * width, -1, dtype=np.int64)
        peer[at] = to
        bad = (ports < 0) | (ports >= width)
        key = np.arange(len(nodes))[:, None] * width + np.where(bad, 0, ports)  # (row, port) as row * width + port
        nxt = np.where(bad, -1, peer[key])
        part = np.zeros(peer.size, dtype=np.int64)
        return (names, index, host, is_host, addr, naddr, np.array(heads, dtype=np.int64),
                np.array(ends, dtype=np.int64), np.array(ok, dtype=bool), key.ravel(), nxt.ravel(), width,
                peer.tolist(), part, np.zeros(part.size, dtype=bool))

    def _walk(self, srcs: list[str], dsts: list[str]):
        """v of each packet ``srcs[i]`` -> ``dsts[i]`` (an int64 array), every route followed at once
        by the tables, a hop per step: each hop's part (the link's and the next switch's, :meth:`_hop`
        and :meth:`_stage`) taken per (node, port) once. None where a part is not an int or a route is
        not plain (a missing port, another host, a loop: ``_by_route`` says what is wrong)."""
        if self._arrays is None:
            self._arrays = self._tables()
        names, index, host, is_host, addr, naddr, heads, ends, ok, keys, nxts, width, peer, part, known = self._arrays
        a = np.array([index[s] for s in srcs], dtype=np.int64)
        b = np.array([index[s] for s in dsts], dtype=np.int64)
        if not (ok[a].all() and ok[b].all()):
            return None
        v = heads[a] + ends[b]
        live = np.arange(len(a))  # the packets not in yet, where they are, where they go
        here, to, d = a, b, addr[b]
        for _ in range(2 * len(names) + 2):
            at = here * naddr + d
            nxt = nxts[at]
            if (nxt < 0).any() or (host[nxt] & (nxt != to)).any():
                return None
            key = keys[at]
            unknown = ~known[key]
            if unknown.any():
                new = np.unique(key[unknown])
                parts = []
                for k in new.tolist():
                    w = peer[k]
                    h = self._hop(names[k // width], names[w])
                    s = 0 if is_host[w] else self._stage(names[w])
                    if type(h) is not int or type(s) is not int:
                        return None
                    parts.append(h + s)
                part[new] = parts
                known[new] = True
            v[live] += part[key]
            on = nxt != to
            if not on.any():
                return v
            live, here, to, d = live[on], nxt[on], to[on], d[on]
        return None

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
            nbytes = self.nbytes.get(id(spec))  # its modelled length on this link (per spec: links share
            if nbytes is None:  # theirs; each held by ``links`` as long as the model: its id is its own)
                nbytes = self.nbytes[id(spec)] = frame_bytes(spec, self.size)
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
