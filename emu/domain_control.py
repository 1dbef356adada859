"""What the synchroniser and the front door ask of a domain besides its windows (part of
:class:`emu.domain.Domain`, called locally or over a worker's RPC): its CPU times, the peers'
addresses, the applications, figures, link changes and faults, trace marks, credit waits and the
capture."""

from __future__ import annotations

import heapq
import logging
import time
from typing import Any


from .element import INF
from .port import OutPort, Timeline

log = logging.getLogger("emu.domain")  # (its messages are the domain's)


def contention() -> dict[str, float]:
    """How much other processes held this one up so far: ``runqueue_s``, the seconds it was ready to
    run but waited for a core (Linux's schedstat of its main thread), and ``preempted``, the times it
    was taken off a core while it could have gone on (``getrusage``). Either is left out where the
    system does not tell."""
    out: dict[str, float] = {}
    try:
        import resource

        out["preempted"] = float(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)
    except ImportError:  # not Unix
        pass
    try:
        with open("/proc/self/schedstat") as f:
            out["runqueue_s"] = int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):  # not Linux, or no schedstats in this kernel
        pass
    return out


class DomainControl:
    """The control side of :class:`emu.domain.Domain` (a part of it, never used alone)."""

    async def rpc_cpu(self) -> dict[str, float]:
        """CPU seconds of this process so far: all of it, in windows, reading datagrams between them;
        and where the system tells (``contention``) how long it waited for a core and how often.
        Windows are counted from the first call on (the difference of two calls is what a run took)."""
        self.cpu_counting = True
        return {"process_s": time.process_time(), **self.cpu, **contention()}

    async def rpc_cpu_marks(self, record: bool) -> list[float]:
        """This process's CPU seconds at the start of each window since the last call (``record``:
        go on recording them): what each window cost here, the time between windows included."""
        marks, self.cpu_marks = self.cpu_marks or [], [] if record else None
        return marks

    async def rpc_set_addresses(self, addrs: dict[str, tuple[str, int]]) -> None:
        for el in self.elements:
            for p in el.out_ports:
                p.peer_addr = addrs[p.peer]
            for p in el.in_ports:
                p.peer_addr = addrs[p.peer]
        if self.batch is not None:  # (the kernel sorts the peers' datagrams: emu.batch_conn)
            self.batch.connect_peers()

    async def rpc_start_apps(self, t: int, apps: dict[str, tuple[Any, tuple]]) -> int:
        for host, (fn, args) in apps.items():
            self.start_app(t, host, fn, args)
        return self.next_activity()

    def start_app(self, t: int, host: str, fn, args: tuple) -> None:
        """Start an application on ``host`` at ``t`` (also while a window runs, for ``t`` past its end)."""
        self._idle = (-1, INF)
        el = self.by_name[host]
        el.engine.start_app(host, fn, args, t)
        self.schedule(el)

    async def rpc_app_states(self) -> list:
        out = []
        for el in self.elements:
            if hasattr(el.engine, "app_states"):
                out.extend(el.engine.app_states())
        return out

    async def rpc_call(self, fn, *args) -> Any:
        """``fn(*args)`` in this process (``Cluster.each_process``)."""
        return fn(*args)

    async def rpc_process_stats(self) -> dict[str, Any]:
        """This process's socket counters (``Cluster.process_stats``)."""
        out: dict[str, Any] = {"process": self.index, "elements": len(self.elements)}
        if self.batch is not None:
            out.update(socket="batch", **self.batch.stats)
        else:  # a socket per element: what each read or dropped is its own (``Element.stats``)
            out.update(socket="element", udp_sent=sum(el.stats["datagrams_sent"] for el in self.elements),
                       udp_received=sum(el.stats["datagrams_received"] for el in self.elements))
        return out

    async def rpc_stats(self) -> list[dict[str, Any]]:
        return [{"name": el.name, "kind": el.engine.kind, "element": dict(el.stats), "engine": dict(el.engine.stats),
                 **(el.engine.extra_stats() if hasattr(el.engine, "extra_stats") else {}),
                 "ports": el.port_stats()} for el in self.elements]

    async def rpc_set_links(self, link_ids: list[int], up: bool) -> int:
        """Bring the output ports of these link directions up or down; returns how many are here."""
        self._idle = (-1, INF)
        n = 0
        for el in self.elements:
            for lid in link_ids:
                p = el.out_by_link.get(lid)
                if p is not None:
                    p.up = up
                    n += 1
        return n

    async def rpc_set_fault(self, link_ids: list[int], drop: float, corrupt: float, seed: int) -> int:
        """Emulated faults on the output ports of these link directions (0, 0: none)."""
        self._idle = (-1, INF)
        import random

        n = 0
        for el in self.elements:
            for lid in link_ids:
                p = el.out_by_link.get(lid)
                if p is not None:
                    p.fault_drop, p.fault_corrupt = drop, corrupt
                    bers = p.timeline is not None and p.timeline.bers
                    p.fault_rng = random.Random(seed * 1_000_003 + lid) if (drop or corrupt or bers) else None
                    n += 1
        return n

    async def rpc_schedule(self, t: int, changes: list[tuple[int, str, object]], seed: int) -> None:
        """Scheduled changes at virtual time ``t`` of these link directions: ``(link id, "state",
        up)`` or ``(link id, "ber", rate)``. Both ends of a link record them; an engine is told of
        a state change of its port at ``t`` (``on_link_change``); the synchroniser knows the time
        (``Synchroniser.faults``)."""
        self._idle = (-1, INF)
        import random

        for el in self.elements:
            told: dict[int, bool] = {}
            for lid, what, value in changes:
                for p in (el.out_by_link.get(lid), el.in_by_link.get(lid)):
                    if p is None:
                        continue
                    if p.timeline is None:
                        p.timeline = Timeline()
                    if what == "state":
                        p.timeline.add_state(t, bool(value))
                        told[p.index] = bool(value)
                    else:
                        p.timeline.add_ber(t, float(value))
                        if isinstance(p, OutPort) and p.fault_rng is None:
                            p.fault_rng = random.Random(seed * 1_000_003 + lid)
            for port, up in sorted(told.items()):
                heapq.heappush(el.link_events, (t, port, up))
            if told:
                self._with_links.add(el)
                self.schedule(el)

    async def rpc_clear_faults(self, t: int) -> int:
        """Cancel every scheduled change not reached yet (all still waiting in ``link_events``: a
        change at ``t`` itself included) and put each link back up with no bit errors from ``t``:
        an engine last told its port is down is told it is up at ``t``. Returns how many ports."""
        self._idle = (-1, INF)
        told = 0
        for el in self.elements:
            ports = [p for p in (*el.out_ports, *el.in_ports) if p.timeline is not None]
            if not ports:
                continue
            pending = [(time, port, up) for time, port, up in el.link_events]
            down = set()
            for p in ports:
                tl = p.timeline
                ups = list(tl.ups)
                for time, port, up in pending:  # unreached: out of the timeline
                    if port == p.index and (time, up) in ups:
                        ups.remove((time, up))
                if ups and not ups[-1][1]:  # the engine was last told "down"
                    down.add(p.index)
                    ups.append((t, True))
                tl.ups = ups
                if tl.bers:
                    tl.bers = [c for c in tl.bers if c[0] < t]
                    if tl.bers and tl.bers[-1][1]:
                        tl.add_ber(t, 0.0)
            el.link_events = [(t, port, True) for port in sorted(down)]
            heapq.heapify(el.link_events)
            if down:
                told += len(down)
                self._with_links.add(el)
                self.schedule(el)
        return told

    async def rpc_reset_peaks(self, t: int = 0) -> None:
        """Start measuring peaks (and time-weighted occupancy) afresh at virtual time ``t``."""
        for el in self.elements:
            for p in el.out_ports:
                p.peak_queue_frames = p.peak_queue_bytes = 0
            for p in el.in_ports:
                if p.buf is not None:
                    p.buf.reset(t)

    async def rpc_trace_mark(self, kind: str, name: str, t: int, args: dict | None = None) -> None:
        """A span on every host's rank track here (the front door's test): ``kind`` "B" begins it at
        ``t``, "E" ends it (after bringing the ports' counters up to ``t``)."""
        tr = self.tracer
        if tr is None:
            return
        if kind == "E":
            tr.flush_ports(t)
        for el in self.elements:
            if el.name in tr.host_names:
                if kind == "B":
                    tr.begin(el.name, name, t, args, "test")
                else:
                    tr.end(el.name, t, args)

    async def rpc_trace_close(self, t: int, send_data: bool = False):
        """Close this process's part of the trace at ``t``: (part path, None, summary), or with
        ``send_data`` (an MPI rank, maybe on another machine) (None, its bytes, summary)."""
        tr = self.tracer
        if tr is None:
            return None, None, {"events": 0, "bytes": 0, "omitted": {}, "first_omitted_ns": None}
        summary = tr.close(t)
        self.tracer = None
        if not send_data:
            return tr.path, None, summary
        import os

        with open(tr.path, "rb") as f:
            data = f.read()
        os.unlink(tr.path)
        return None, data, summary

    async def rpc_credit_waits(self) -> dict[str, list]:
        """Who waits for whom when frames are stuck (credit deadlock diagnosis): ``blocked``: (node,
        out port, vc, peer node, peer's in port, frames waiting) for every port with frames no credit
        covers; ``held``: (node, in port, vc, out port, out vc) for every frame sitting in an input
        buffer while it waits at an output port of the same node; ``paused``: (node, out port, class) of
        the class queues PFC paused with frames waiting (a PFC ingress's bytes count as its buffer);
        ``heads``: (node, out port, vc, bytes of buffer it takes) of the frame at the head of each such
        queue of an element's port (a frame larger than the buffer it must enter never gets its credit)."""
        blocked, held, paused, heads = [], [], [], []
        for el in self.elements:
            if el.iq:  # the input-queued router keeps its frames and credits itself
                b, h = el.engine.credit_waits()
                blocked += [(el.name, o, vc, el.outs[o].peer, el.outs[o].peer_port_name, n) for o, vc, n in b]
                held += [(el.name, *x) for x in h]
                continue
            for p in el.out_ports:
                fl = p.flow
                if fl is None:
                    continue
                for vc, q in enumerate(fl.queues):
                    if q:
                        blocked.append((el.name, p.index, vc, p.peer, p.peer_port_name, len(q)))
                        heads.append((el.name, p.index, vc, fl.cost(q[0][1])))
                        if fl.by_prio and fl.paused[vc]:  # a class queue PFC paused (emu.pause)
                            paused.append((el.name, p.index, vc))
                        for _, _, token in q:
                            if token is not None:
                                held.append((el.name, token[0].index, token[1], p.index, vc))
        return {"blocked": blocked, "held": held, "paused": paused, "heads": heads}

    def _take_capture(self) -> list[tuple[int, int, int, bytes]]:
        out: list[tuple[int, int, int, bytes]] = []
        for el in self.elements:
            if el.capture:
                out.extend(el.capture)
                el.capture = []
        return out

    def _spill(self) -> None:
        """The frames recorded so far, sorted, to a run file on disk (``RunConfig.capture_spill_records``)."""
        import os
        import tempfile

        from .pcapng import write_run

        recs = self._take_capture()
        if not recs:
            return
        if self._spill_dir is None:  # in the run's folder where this machine has it (the Cluster removes it)
            root = self.run.capture_dir if self.run.capture_dir and os.path.isdir(self.run.capture_dir) else None
            self._spill_dir = tempfile.mkdtemp(prefix=f"emu-capture-{os.getpid()}-", dir=root)
        path = os.path.join(self._spill_dir, f"run{len(self._runs):05d}")
        self._runs.append(path)  # (dropped with the rest if writing it fails half-way)
        try:
            write_run(path, recs)
        except OSError as e:  # a full disk: say where
            raise OSError(e.errno, f"{e.strerror} (spilling the capture to disk)", path) from None

    async def rpc_capture(self) -> list[tuple[int, int, int, bytes]]:
        """Every frame recorded here and not yet taken, in capture order (spilled runs read back)."""
        from .pcapng import capture_order, merged, read_run

        if not self._runs:
            return capture_order(self._take_capture())
        out = list(merged([read_run(p) for p in self._runs] + [capture_order(self._take_capture())]))
        self._drop_runs()
        return out

    async def rpc_capture_runs(self) -> list[str]:
        """Spill what is left and hand over the run files (the caller merges, then deletes them)."""
        self._spill()
        runs, self._runs, self._spill_dir = self._runs, [], None
        return runs

    def _drop_runs(self) -> None:
        import os
        import shutil

        for p in self._runs:
            if os.path.exists(p):
                os.unlink(p)
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)
        self._runs, self._spill_dir = [], None

    async def rpc_link_seqs(self) -> dict[str, dict[int, tuple[str, int]]]:
        return {"out": {p.link_id: (f"{p.name} -> {p.peer_port_name}", p.link.seq) for el in self.elements for p in el.out_ports},
                "in": {p.link_id: (f"{p.peer_port_name} -> {p.name}", p.link.expected) for el in self.elements for p in el.in_ports}}
