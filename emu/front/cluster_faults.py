"""What goes wrong in a running cluster: faults put on its links and switches (at once or scheduled),
and the diagnosis of a credit deadlock. ``Cluster``'s methods: the cluster holds the handles,
the lock and the synchroniser they use."""

from __future__ import annotations

import heapq

from ..config import ConfigError
from ..errors import DeadlockError, EmuError


class ClusterFaults:
    """The faults of a running ``Cluster`` and the diagnosis of its credit deadlocks (a mixin of
    ``Cluster``: ``_handles``, ``_lock``, ``_sync``, ``topology`` and ``_trace_instant`` are the cluster's)."""

    # -- faults ---------------------------------------------------------------------------------
    async def link_down(self, a: str, b: str) -> None:
        """Take the link(s) between nodes ``a`` and ``b`` down, both directions, at ``self.now``.
        Frames handed to a down link are dropped, counted (``metrics.dropped``, port stats) and
        written to the capture with the comment "dropped: link down"."""
        await self._set_link(a, b, False)

    async def link_up(self, a: str, b: str) -> None:
        """Bring the link(s) between ``a`` and ``b`` back up."""
        await self._set_link(a, b, True)

    async def set_fault(self, a: str, b: str, *, drop: float = 0.0, corrupt: float = 0.0) -> None:
        """Emulated faults on the link(s) between ``a`` and ``b``, both directions, from ``self.now``:
        each frame is lost with probability ``drop``, else delivered with one bit flipped with
        probability ``corrupt``. Seeded (cluster seed and link), so runs repeat exactly; counted in
        ``metrics.dropped`` / ``metrics.corrupted`` and marked in the capture. 0, 0 clears them.
        Nothing above the link recovers such a loss yet: an application waiting for a lost frame
        ends in DeadlockError."""
        for name, v in (("drop", drop), ("corrupt", corrupt)):
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"set_fault: {name} must be a probability within 0..1, got {v}")
        ids = self._link_ids(a, b)
        async with self._lock:
            for h in self._handles:
                await h.call("set_fault", ids, drop, corrupt, self.run_config.seed)

    async def schedule(self, t_ns: int, action: str, *, link: tuple[str, str] | None = None,
                       switch: str | None = None, rate: float = 0.0) -> None:
        """Schedule a fault at virtual time ``t_ns`` (absolute, ``>= net.now``), to strike during the
        next runs: ``"down"`` / ``"up"`` on ``link=(a, b)`` (both directions) or on every link of
        ``switch=name``, or ``"ber"`` with ``rate`` on a link (a seeded bit-error rate from then on;
        frames that catch an error fail their FCS at the receiver). Frames handed to a link while it
        is down are dropped at the port (``metrics.dropped``); frames on the wire when it goes down
        are lost (``metrics.lost_in_flight``); both are marked in the capture. Engines with an
        ``on_link_change(port, up, now)`` method are told at ``t_ns`` on both ends."""
        from ..faults import Fault

        f = Fault(t_ns, action, link, switch, rate)  # refuses a malformed fault
        if t_ns < self.now:
            raise ConfigError(f"schedule: {t_ns} ns is in the past (the cluster is at {self.now} ns); "
                              "schedule at net.now + delay")
        if switch is not None:
            node = self.topology.nodes.get(switch)
            if node is None or node.kind != "switch":
                raise ConfigError(f"schedule: {switch!r} is not a switch of {self.topology.name}")
            ids = [lid for i, lk in enumerate(self.topology.links) if switch in (lk.a, lk.b)
                   for lid in (2 * i, 2 * i + 1)]
        else:
            ids = self._link_ids(*link)
        changes = [(lid, "ber", f.rate) if action == "ber" else (lid, "state", action == "up") for lid in ids]
        if self._sync is None:
            raise EmuError("the cluster is not running; use 'async with Cluster(...) as net:'")
        async with self._lock:
            for h in self._handles:
                await h.call("schedule", t_ns, changes, self.run_config.seed)
            heapq.heappush(self._sync.faults, t_ns)

    async def clear_faults(self) -> None:
        """Cancel every scheduled change not yet reached (one at ``now`` included) and undo the
        ``schedule``d ones that were: each link up with no bit errors from now on -- what ``emu run``
        does between tests, whose faults are each their own. (``link_down`` and ``set_fault`` are
        not scheduled changes: ``link_up`` and ``set_fault(..., drop=0, corrupt=0)`` undo them.)"""
        if self._sync is None:
            raise EmuError("the cluster is not running; use 'async with Cluster(...) as net:'")
        async with self._lock:
            t = self.now
            told = 0
            for h in self._handles:
                told += await h.call("clear_faults", t)
            self._sync.faults.clear()
            if told:
                heapq.heappush(self._sync.faults, t)

    def _link_ids(self, a: str, b: str) -> list[int]:
        """Both directions of the links ``a``-``b`` names: all the parallel ones, or with ``b``
        written ``B.N`` the N-th (``Topology.links_named``)."""
        ids = [lid for i in self.topology.links_named(a, b) for lid in (2 * i, 2 * i + 1)]
        if not ids:
            raise ConfigError(f"no link between {a!r} and {b!r} in {self.topology.name} (Topology.link_names "
                              "lists the links by name)")
        return ids

    async def _set_link(self, a: str, b: str, up: bool) -> None:
        ids = self._link_ids(a, b)
        async with self._lock:
            n = 0
            for h in self._handles:
                n += await h.call("set_links", ids, up)
        if n != len(ids):
            raise EmuError(f"link {a}<->{b}: {n} of {len(ids)} directions found (a bug)")

    async def _credit_deadlock(self, stuck: int) -> None:
        """Nothing can move but frames wait for credit: name the cyclic wait (elements, ports, VCs)."""
        blocked, held, paused, heads = [], [], set(), []
        for h in self._handles:
            w = await h.call("credit_waits")
            blocked += w["blocked"]
            held += w["held"]
            paused.update(map(tuple, w.get("paused", ())))
            heads += w.get("heads", ())
        t = self.topology
        self._too_large(stuck, heads, {(n, p, v): peer for n, p, v, peer, _pp, _k in blocked})
        # (node, out port, vc) waits for the peer's input buffer (peer, in port, vc), whose frames wait
        # at the peer's output ports: an edge to each of those
        by_buffer: dict[tuple[str, int, int], set] = {}
        for node, inp, vc, outp, ovc in held:
            by_buffer.setdefault((node, inp, vc), set()).add((node, outp, ovc))
        edges: dict[tuple, set] = {}
        for node, outp, vc, peer, peer_port, _ in blocked:
            pin = int(peer_port.rsplit("p", 1)[1]) if t.nodes[peer].kind == "switch" else -1
            edges[(node, outp, vc)] = by_buffer.get((peer, pin, vc), set())
        cycle = _find_cycle(edges)
        if paused:  # queues PFC paused (emu.pause): a cycle of paused classes
            await self._pfc_deadlock(stuck, cycle, blocked, paused)
        where = (" -> ".join(f"{t.port_name(n, p)} vc{v}" for n, p, v in cycle + cycle[:1]) if cycle
                 else "no cycle found; " + ", ".join(f"{t.port_name(n, p)} vc{v} ({k} waiting)"
                                                     for n, p, v, _, _, k in blocked[:8]))
        self._sync.broken = "a credit deadlock"
        self._trace_instant(None, "credit deadlock", {"frames waiting": stuck, "cyclic wait": where})
        raise DeadlockError(f"credit deadlock at {self.now} ns: {stuck} frame(s) wait for credit that can "
                            f"never come; cyclic wait: {where}. Use more VCs with a deadlock-free VC policy "
                            "(--set switch.vcs=2 --set switch.vc_policy=dateline on tori) or larger buffers")


    def _too_large(self, stuck: int, heads: list, peers: dict) -> None:
        """A frame waiting for a switch's buffer that is larger than that buffer whole (its VC's, or
        its shared pool): no credit can ever cover it -- say so, and how large the buffer must be
        (``emu.front.buffers`` refuses such runs before they start, for the frames it knows of)."""
        from ..build import largest_frames

        t = self.topology
        largest = None
        for node, port, vc, need in heads:
            peer = t.nodes.get(peers.get((node, port, vc)))
            if peer is None or peer.kind != "switch" or not hasattr(peer.spec, "buffer_bytes"):
                continue
            largest = largest or largest_frames(t)
            vcb = peer.spec.buffer_bytes(largest[peer.name])  # (the input-queued router's default: two message frames)
            if vcb and need > max(vcb, getattr(peer.spec, "pool_bytes", 0)):
                self._sync.broken = "a credit deadlock"
                raise DeadlockError(f"credit deadlock at {self.now} ns: {stuck} frame(s) wait for credit; the one at "
                                    f"{t.port_name(node, port)} vc{vc} takes {need:,} B of {peer.name}'s buffer, which "
                                    f"holds {vcb:,} B per VC: it can never enter; give switch.vc_buffer_bytes={need} "
                                    "or more, or send smaller frames (a smaller --size)")

    async def _pfc_deadlock(self, stuck: int, cycle: list, blocked: list, paused: set) -> None:
        t = self.topology
        where = (" -> ".join(f"{t.port_name(n, p)} prio{c}" for n, p, c in cycle + cycle[:1]) if cycle
                 else "no cycle found; paused: " + ", ".join(f"{t.port_name(n, p)} prio{c}" for n, p, c in sorted(paused)[:8]))
        self._sync.broken = "a PFC deadlock"
        self._trace_instant(None, "PFC deadlock", {"frames waiting": stuck, "cyclic wait": where})
        raise DeadlockError(f"PFC deadlock at {self.now} ns: {stuck} frame(s) wait in queues paused by PFC that "
                            f"nothing can resume; cyclic wait: {where}. Route without a cycle of buffer dependencies "
                            "(a deadlock-free routing), give the classes that cross the cycle room each (larger "
                            "queues.xoff_bytes) or make the class lossy (queues.pfc_classes)")


def _find_cycle(edges: dict[tuple, set]) -> list[tuple]:
    """A cycle in a wait-for graph (deterministic: nodes in sorted order), or []."""
    state: dict[tuple, int] = {}
    for root in sorted(edges):
        if state.get(root):
            continue
        stack, path = [(root, iter(sorted(edges.get(root, ()))))], [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):]
            if not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(sorted(edges.get(nxt, ())))))
                path.append(nxt)
    return []
