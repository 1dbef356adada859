"""A run's timeline as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing
open: written as the run goes, in bounded memory, up to a size limit.

Layout of the trace (the JSON Object Format: ``{"traceEvents": [...], "displayTimeUnit": "ns",
"otherData": {...}}``):

* one trace *process* per element (host or switch), named after it (``pid`` = 1 + its place in
  the topology's node order, hosts first in the sort order);
* on a host, thread 1 (``rank``) holds nested spans (``B``/``E``): the test, each collective call,
  each step of its algorithm (peer and bytes as ``args``);
* thread 2 (``events``) of every element holds instant events (``i``): faults reached, drops,
  frames lost or corrupted, FCS errors, traps, NACKs, retransmissions;
* counters (``C``) per output port: ``PORT queue`` (frames and bytes handed to the port whose last
  bit has not left) and ``PORT load`` (the fraction of each ``bin_ns`` the port was sending);
* process 0 (``run``) holds global instant events: deadlock reports, the end of the run.

Timestamps are virtual microseconds written with three decimals (nanosecond precision, exact: the
integer ns split, never a float division), so the trace ends where the run ends.

Each process of a run (``--processes``) has its own :class:`Tracer`; those of worker processes
write *part* files of events next to the trace, which the front door appends to the one file at
the end (:func:`merge`): one trace, whatever the spread. Every tracer holds a share of the size
limit; past it, it writes nothing more but the ends of spans it began (so every track stays
properly nested) and counts, by kind, what it left out; the trace's ``otherData.omitted`` and the
command's output say so.

The hot path pays one ``if tracer is not None`` per frame at a port when tracing is off: elements,
ports and engines hold ``tracer = None`` then.
"""

from __future__ import annotations

import json
import os
from typing import Any

DEFAULT_LIMIT_BYTES = 256 << 20
"""Default size limit of a trace file."""
DEFAULT_BIN_NS = 1000
"""Default width of a link-load bin (ns)."""
RANK_TID, EVENTS_TID = 1, 2
OPS_TID = 16
"""First track of a host's completed operations (``Tracer.complete``: a replayed schedule's operations)."""
_SEP = ",\n"


def ts(t: int) -> str:
    """Virtual ns as trace microseconds with three decimals, exactly."""
    if t < 0:
        return "-" + ts(-t)
    return f"{t // 1000}.{t % 1000:03d}"


def _args(args: dict | None) -> str:
    return "" if not args else ',"args":' + json.dumps(args, separators=(",", ":"), default=str)


class Tracer:
    """The trace writer of one process. ``pids``: element name -> trace pid (the same in every
    process); ``header``: this one opens the file (the front door's process) -- the others write
    parts that :func:`merge` appends."""

    def __init__(self, path: str, pids: dict[str, int], *, limit_bytes: int = DEFAULT_LIMIT_BYTES,
                 bin_ns: int = DEFAULT_BIN_NS, header: bool = True, hosts: tuple[str, ...] = ()):
        self.path = path
        self.pids = pids
        self.limit = limit_bytes
        self.bin_ns = bin_ns
        self.header = header
        self.f = open(path, "w", buffering=1 << 16)
        self.size = 0
        self.events = 0
        self.full = False
        self.omitted: dict[str, int] = {}
        """Events left out past the size limit, by kind (span, counter, instant name)."""
        self.first_omitted_ns: int | None = None
        self._stacks: dict[int, list[tuple[bool, str, str]]] = {}  # per pid: (B written, name, cat)
        """Per host pid: the open spans, each True if its B was written (then its E is written too)."""
        self.ports: list[PortTrace] = []
        self._lanes: dict[int, list[int]] = {}
        """Per host pid: when each of its ``ops N`` tracks is free again (``complete``)."""
        self.host_names = set(hosts)
        if header:
            self.f.write('{"displayTimeUnit":"ns","traceEvents":[\n')
            self.f.write('{"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"run"}}')
            self.size += 100
            for name, pid in pids.items():
                host = name in self.host_names
                sort = pid if host else pid + len(pids)
                self._meta(pid, 0, "process_name", {"name": name})
                self._meta(pid, 0, "process_sort_index", {"sort_index": sort})
                if host:
                    self._meta(pid, RANK_TID, "thread_name", {"name": "rank"})
                self._meta(pid, EVENTS_TID, "thread_name", {"name": "events"})

    # -- writing --------------------------------------------------------------------------------
    def _meta(self, pid: int, tid: int, what: str, args: dict) -> None:
        line = f'{_SEP}{{"ph":"M","name":"{what}","pid":{pid},"tid":{tid}{_args(args)}}}'
        self.f.write(line)
        self.size += len(line)

    def _write(self, line: str, kind: str, t: int, force: bool = False) -> bool:
        if self.full and not force:
            self.omitted[kind] = self.omitted.get(kind, 0) + 1
            if self.first_omitted_ns is None or t < self.first_omitted_ns:
                self.first_omitted_ns = t
            return False
        try:
            self.f.write(line)
        except OSError as e:  # a full disk: name the file
            raise OSError(e.errno, f"the trace was not written ({e.strerror})", self.path) from None
        self.size += len(line)
        self.events += 1
        if self.size >= self.limit:
            self.full = True
        return True

    # -- spans on a host's rank track -----------------------------------------------------------
    def begin(self, node: str, name: str, t: int, args: dict | None = None, cat: str = "span") -> None:
        pid = self.pids[node]
        line = (f'{_SEP}{{"ph":"B","name":{json.dumps(name)},"cat":"{cat}","pid":{pid},"tid":{RANK_TID},'
                f'"ts":{ts(t)}{_args(args)}}}')
        self._stacks.setdefault(pid, []).append((self._write(line, "span", t), name, cat))

    def end(self, node: str, t: int, args: dict | None = None) -> None:
        pid = self.pids[node]
        stack = self._stacks.get(pid)
        if not stack:
            return
        written, name, cat = stack.pop()
        if written:  # its B was written: so is its E, past the limit too (the track stays nested)
            self._write(_end(pid, name, cat, t, args), "span", t, force=True)

    def complete(self, node: str, name: str, t0: int, t1: int, args: dict | None = None, cat: str = "op") -> None:
        """A span from ``t0`` to ``t1`` already over (``X``), on the first of ``node``'s ``ops N`` tracks
        free at ``t0`` (spans that overlap go on tracks of their own: every track stays nested)."""
        pid = self.pids[node]
        lanes = self._lanes.setdefault(pid, [])
        lane = next((k for k, end in enumerate(lanes) if end <= t0), None)
        if lane is None:
            lane = len(lanes)
            lanes.append(t1)
            self._meta(pid, OPS_TID + lane, "thread_name", {"name": f"ops {lane}"})
        else:
            lanes[lane] = t1
        line = (f'{_SEP}{{"ph":"X","name":{json.dumps(name)},"cat":"{cat}","pid":{pid},"tid":{OPS_TID + lane},'
                f'"ts":{ts(t0)},"dur":{ts(t1 - t0)}{_args(args)}}}')
        self._write(line, "span", t1)

    def span(self, node: str, name: str, t_of, args: dict | None = None, cat: str = "span") -> "Span":
        """A context manager: B now, E when it ends (``t_of()`` reads the virtual time)."""
        return Span(self, node, name, t_of, args, cat)

    # -- instants and counters --------------------------------------------------------------------
    def instant(self, node: str | None, name: str, t: int, args: dict | None = None, cat: str = "event") -> None:
        """An instant event on ``node``'s events track (``node=None``: global, on the run)."""
        if node is None:
            line = (f'{_SEP}{{"ph":"i","s":"g","name":{json.dumps(name)},"cat":"{cat}","pid":0,"tid":0,'
                    f'"ts":{ts(t)}{_args(args)}}}')
        else:
            line = (f'{_SEP}{{"ph":"i","s":"t","name":{json.dumps(name)},"cat":"{cat}","pid":{self.pids[node]},'
                    f'"tid":{EVENTS_TID},"ts":{ts(t)}{_args(args)}}}')
        self._write(line, name, t)

    def port(self, node: str, port) -> "PortTrace":
        """The counter tracks of output port ``port`` (an ``emu.port.OutPort``) of ``node``."""
        pt = PortTrace(self, self.pids[node], port)
        self.ports.append(pt)
        return pt

    # -- the end ------------------------------------------------------------------------------------
    def flush_ports(self, t: int, final: bool = False) -> None:
        """Bring every port's counters up to ``t`` (the end of a run), :meth:`PortTrace.flush`."""
        for pt in self.ports:
            pt.flush(t, final)

    def close(self, t_end: int) -> dict[str, Any]:
        """Close open spans at ``t_end``, flush the ports; returns what was written and left out."""
        self.flush_ports(t_end, final=True)
        for pid, stack in self._stacks.items():
            while stack:
                written, name, cat = stack.pop()
                if written:
                    self._write(_end(pid, name, cat, t_end, None), "span", t_end, force=True)
        if not self.f.closed:
            self.f.flush()
            if not self.header:
                self.f.close()
        return {"events": self.events, "bytes": self.size, "omitted": dict(self.omitted),
                "first_omitted_ns": self.first_omitted_ns}

    def finish(self, t_end: int, parts: list[tuple[str | None, bytes | None, dict]], other: dict) -> dict:
        """(Front door's tracer) append the other processes' parts, note the end of the run and what
        was left out, and close the file. Returns the summary of the whole trace."""
        mine = self.close(t_end)
        total = {"events": mine["events"], "bytes": mine["bytes"], "omitted": dict(mine["omitted"]),
                 "first_omitted_ns": mine["first_omitted_ns"]}
        for path, data, summary in parts:
            if path is not None:
                with open(path, "rb") as src:
                    while chunk := src.read(1 << 20):
                        self.f.write(chunk.decode())
                os.unlink(path)
            elif data:
                self.f.write(data.decode())
            total["events"] += summary["events"]
            total["bytes"] += summary["bytes"]
            for k, n in summary["omitted"].items():
                total["omitted"][k] = total["omitted"].get(k, 0) + n
            f = summary["first_omitted_ns"]
            if f is not None and (total["first_omitted_ns"] is None or f < total["first_omitted_ns"]):
                total["first_omitted_ns"] = f
        self.f.write(f'{_SEP}{{"ph":"i","s":"g","name":"end of run","cat":"run","pid":0,"tid":0,"ts":{ts(t_end)}}}')
        self.f.write('\n],\n"otherData":' + json.dumps({**other, "end_ns": t_end, "events": total["events"],
                                                       "limit_bytes": self.limit, "omitted": total["omitted"],
                                                       "first_omitted_ns": total["first_omitted_ns"]}) + "}\n")
        self.f.close()
        return total


class Span:
    __slots__ = ("tracer", "node", "name", "t_of", "args", "cat", "end_args")

    def __init__(self, tracer: Tracer, node: str, name: str, t_of, args: dict | None, cat: str):
        self.tracer, self.node, self.name, self.t_of, self.args, self.cat = tracer, node, name, t_of, args, cat
        self.end_args: dict | None = None
        """Arguments known only at the end (the algorithm chosen), merged into the span's."""

    def __enter__(self) -> "Span":
        self.tracer.begin(self.node, self.name, self.t_of(), self.args, self.cat)
        return self

    def __exit__(self, *exc) -> None:
        self.tracer.end(self.node, self.t_of(), self.end_args)


def _end(pid: int, name: str, cat: str, t: int, args: dict | None) -> str:
    """The E event of a span: it names the span as its B does (viewers other than Perfetto match
    an unnamed E to nothing and draw the span to the profile's end)."""
    return (f'{_SEP}{{"ph":"E","name":{json.dumps(name)},"cat":"{cat}","pid":{pid},"tid":{RANK_TID},'
            f'"ts":{ts(t)}{_args(args)}}}')


class _NoSpan:
    """What a span is when tracing is off: nothing, and shared."""

    __slots__ = ("end_args",)

    def __init__(self) -> None:
        self.end_args = None

    def __enter__(self) -> "_NoSpan":
        return self

    def __exit__(self, *exc) -> None:
        self.end_args = None


NO_SPAN = _NoSpan()


class PortTrace:
    """One output port's counter tracks: queue depth at each change, link load per bin. Called by
    ``emu.port.OutPort`` only when tracing is on."""

    __slots__ = ("tracer", "pid", "port", "qname", "lname", "bin_start", "bin_busy", "open_bin")

    def __init__(self, tracer: Tracer, pid: int, port):
        self.tracer, self.pid, self.port = tracer, pid, port
        self.qname = json.dumps(f"{port.name} queue")
        self.lname = json.dumps(f"{port.name} load")
        self.bin_start = 0
        self.bin_busy = 0
        self.open_bin = False

    def queue(self, t: int, frames: int, nbytes: int) -> None:
        self.tracer._write(f'{_SEP}{{"ph":"C","name":{self.qname},"pid":{self.pid},"tid":0,"ts":{ts(t)},'
                           f'"args":{{"frames":{frames},"bytes":{nbytes}}}}}', "counter", t)

    def _load(self, t: int, busy: int) -> None:
        self.tracer._write(f'{_SEP}{{"ph":"C","name":{self.lname},"pid":{self.pid},"tid":0,"ts":{ts(t)},'
                           f'"args":{{"load":{round(busy / self.tracer.bin_ns, 6)}}}}}', "counter", t)

    def drain(self, t: int) -> None:
        """Frames whose last bit left by ``t`` leave the port's occupancy (a counter value each)."""
        port = self.port
        q = port.queued
        while q and q[0][0] <= t:
            done, n = q.popleft()
            port.queued_bytes -= n
            self.queue(done, len(q), port.queued_bytes)

    def sending(self, start: int, done: int) -> None:
        """The port sends from ``start`` to ``done``: its time goes into the load bins (a frame that
        went ahead of others, out of order, counts from the current bin)."""
        b = self.tracer.bin_ns
        if start < self.bin_start:
            start = self.bin_start
        while start < done:
            if start >= self.bin_start + b:
                self._next_bin(start)
            end = min(done, self.bin_start + b)
            self.bin_busy += end - start
            self.open_bin = True
            start = end

    def _next_bin(self, t: int) -> None:
        """Write the open bin and move to the bin holding ``t`` (0 in between, if any was skipped)."""
        b = self.tracer.bin_ns
        nxt = t - t % b
        if self.open_bin:
            self._load(self.bin_start, self.bin_busy)
            if nxt > self.bin_start + b:
                self._load(self.bin_start + b, 0)
        self.bin_start, self.bin_busy, self.open_bin = nxt, 0, False

    def flush(self, t: int, final: bool = False) -> None:
        """The end of a run at ``t``: frames done leave the queue; a load bin over by then (or any,
        when ``final``) is written, and the load falls back to 0 after it."""
        self.drain(t)
        b = self.tracer.bin_ns
        if self.open_bin and (final or self.bin_start + b <= t):
            self._load(self.bin_start, self.bin_busy)
            self._load(max(self.bin_start, min(self.bin_start + b, t)), 0)
            self.bin_start, self.bin_busy, self.open_bin = self.bin_start + b, 0, False


def part_path(trace: str, index: int) -> str:
    """Where process ``index`` of a run writes its part of ``trace``: beside it, or in the temporary
    folder where this machine has no such folder (an MPI rank elsewhere)."""
    import tempfile

    folder = os.path.dirname(os.path.abspath(trace))
    if not os.path.isdir(folder):
        folder = tempfile.gettempdir()
    return os.path.join(folder, f".{os.path.basename(trace)}.{os.getpid()}.part{index}")


def attach(domain, plan) -> Tracer:
    """Give every element, engine and output port of ``domain`` (an ``emu.domain.Domain``) this
    process's tracer: process 0 writes the trace file itself, the others a part of it."""
    run = plan.run
    t = plan.topology
    pids = {name: i + 1 for i, name in enumerate(t.nodes)}
    hosts = tuple(n.name for n in t.nodes.values() if n.kind == "host")
    header = domain.index == 0
    tracer = Tracer(run.trace if header else part_path(run.trace, domain.index), pids,
                    limit_bytes=max(4096, run.trace_limit_bytes // run.processes), bin_ns=run.trace_bin_ns,
                    header=header, hosts=hosts)
    for el in domain.elements:
        el.tracer = tracer
        try:
            el.engine.tracer = tracer
        except AttributeError:  # an engine with __slots__ and no tracer: its own events are not traced
            pass
        for p in el.out_ports:
            p.tracer = tracer.port(el.name, p)
    domain.tracer = tracer
    return tracer
