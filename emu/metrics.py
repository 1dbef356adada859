"""Per-run figures (spec 00 "Measuring collectives"), all in virtual time or counts.

A run's figures are the difference of the elements' counters before and after it:

* ``completion_ns``: from the run's start (every application starts then) to its last event;
* ``frames`` / ``bytes``: what the hosts injected into the network;
* ``hop_count``: link crossings, summed over frames (aggregate hop count);
* ``link_frames`` / ``link_bytes``: per link direction, named by its sending port;
* ``peak_queue_frames``: per output port, the most frames queued at once during the run;
* ``busy_ns``: per output port, the virtual time it spent sending;
* :meth:`RunMetrics.per_link`: all of it per link direction (``per_link`` of ``emu run --json``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunMetrics:
    start_ns: int
    end_ns: int
    frames: int
    bytes: int
    hop_count: int
    link_frames: dict[str, int] = field(default_factory=dict)
    link_bytes: dict[str, int] = field(default_factory=dict)
    peak_queue_frames: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    """Frames dropped on purpose (link down, emulated loss), per port."""
    corrupted: dict[str, int] = field(default_factory=dict)
    """Frames delivered with a bit flipped by an emulated fault, per sending port."""
    fcs_errors: dict[str, int] = field(default_factory=dict)
    """Frames that failed their frame check sequence and were dropped, per receiving port."""
    lost_in_flight: dict[str, int] = field(default_factory=dict)
    """Frames on the wire while their link was down (a scheduled fault), per receiving port."""
    vc_peak_bytes: dict[str, list[int]] = field(default_factory=dict)
    """With credit flow control: peak input-buffer occupancy per VC, per receiving port (bytes)."""
    vc_mean_bytes: dict[str, list[float]] = field(default_factory=dict)
    """... and its time-weighted mean over the run (bytes)."""
    pool_peak_bytes: dict[str, int] = field(default_factory=dict)
    """... and of its shared pool, where one was used (bytes)."""
    credit_stalls: dict[str, int] = field(default_factory=dict)
    """Times a sending port was free with a frame ready and no credit for it, per sending port."""
    credit_stall_ns: dict[str, int] = field(default_factory=dict)
    """Virtual time sending ports spent so, per sending port."""
    busy_ns: dict[str, int] = field(default_factory=dict)
    """Virtual time each output port spent sending (its frames' times on the line), per port."""
    peak_queue_bytes: dict[str, int] = field(default_factory=dict)
    """Per output port, the most bytes queued at once during the run."""
    cc: dict[str, int] = field(default_factory=dict)
    """The hosts' congestion control counters (``host.cc`` other than none), summed over the hosts:
    segments sent and resent, CNPs, pulls, NACKs, out-of-order arrivals, timeouts, rate changes..."""
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per output port of a switch with ``[queues]`` mechanisms (and a port into one with PFC): its
    counters over the run (``tail_drops``, ``trimmed``, ``ecn_marked``, ``int_stamped``, ``pause_tx``
    -- XOFF and XON sent on it, ``xoff_tx``, ``xon_tx``, ``headroom_drops`` and ``ingress_peak_bytes``
    of the ingress of the same number --, ``pause_rx``, ``paused_ns`` summed over its classes), and per
    class lists of 8 (``class_frames``, ``class_bytes``, ``class_drops``, ``class_marks``,
    ``class_pauses``, ``class_paused_ns``, ``class_xoff_tx``) that ``per_link`` gives as ``classes``."""

    @property
    def completion_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def max_queue_frames(self) -> int:
        return max(self.peak_queue_frames.values(), default=0)

    def summary(self) -> dict[str, Any]:
        """The headline figures, JSON-ready."""
        return {"completion_ns": self.completion_ns, "frames": self.frames, "bytes": self.bytes,
                "hop_count": self.hop_count, "max_queue_frames": self.max_queue_frames,
                "dropped": sum(self.dropped.values()), "corrupted": sum(self.corrupted.values()),
                "fcs_errors": sum(self.fcs_errors.values()), "lost_in_flight": sum(self.lost_in_flight.values()),
                **({"max_vc_peak_bytes": max(max(v) for v in self.vc_peak_bytes.values()),
                    "credit_stalls": sum(self.credit_stalls.values()),
                    "credit_stall_ns": sum(self.credit_stall_ns.values())} if self.vc_peak_bytes else {}),
                **({"cc": dict(self.cc)} if self.cc else {}), **self.queue_totals()}

    def queue_totals(self) -> dict[str, int]:
        """The output-queue mechanisms' counts summed over the ports (none when no mechanism did anything)."""
        out: dict[str, int] = {}
        for v in self.queues.values():
            for k in QUEUE_TOTALS:
                if v.get(k):
                    out[k] = out.get(k, 0) + v[k]
        return out

    def per_link(self) -> dict[str, dict[str, int]]:
        """Per link direction (named by its sending port) that carried, dropped or queued anything
        in the run: frames and bytes sent, ``busy_ns`` (time sending), the largest queue (frames,
        bytes), ``credit_stall_ns`` (free with frames ready and no credit) and ``drops`` (link down,
        emulated loss). Its frames add up to ``hop_count``. Where the port queues by class (a switch
        with ``[queues]``, a port into one with PFC), its queue counters and ``classes``: per traffic
        class that did anything, ``frames`` and ``bytes`` started on the line (their sums are the
        port's), ``drops`` (tail drops), ``marks`` (ECN), ``pauses`` (PAUSEs received for the class),
        ``paused_ns`` and ``xoff_tx`` (XOFFs its ingress of the same number sent upstream)."""
        names = sorted(set(self.link_frames) | set(self.dropped) | set(self.peak_queue_frames)
                       | set(self.credit_stall_ns) | set(self.busy_ns) | set(self.queues), key=_port_order)
        return {p: {"frames": self.link_frames.get(p, 0), "bytes": self.link_bytes.get(p, 0),
                    "busy_ns": self.busy_ns.get(p, 0), "peak_queue_frames": self.peak_queue_frames.get(p, 0),
                    "peak_queue_bytes": self.peak_queue_bytes.get(p, 0),
                    "credit_stall_ns": self.credit_stall_ns.get(p, 0), "drops": self.dropped.get(p, 0),
                    **_by_class(self.queues.get(p, {}))}
                for p in names}

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if not d["queues"]:  # (no queue mechanism on: the figures as they always were)
            del d["queues"]
        d["completion_ns"] = self.completion_ns
        return d


QUEUE_TOTALS = ("tail_drops", "trimmed", "ecn_marked", "int_stamped", "xoff_tx", "xon_tx", "headroom_drops", "paused_ns")
"""The counters of ``RunMetrics.queues`` a run's summary sums (``switch.queues``, ``emu.pause``)."""


CLASS_COUNTERS = (("frames", "class_frames"), ("bytes", "class_bytes"), ("drops", "class_drops"), ("marks", "class_marks"),
                  ("pauses", "class_pauses"), ("paused_ns", "class_paused_ns"), ("xoff_tx", "class_xoff_tx"))
"""``per_link``'s per-class counters and the port counters' lists they come from (``emu.pause``)."""


def _by_class(q: dict) -> dict:
    """A port's queue counters with its per-class lists as ``classes``: {class: {counter: n}} for the
    classes with any count."""
    out = {k: v for k, v in q.items() if not isinstance(v, list)}
    if any(k in q for _n, k in CLASS_COUNTERS):
        lists = [(name, q.get(k) or [0] * 8) for name, k in CLASS_COUNTERS]
        out["classes"] = {str(c): {name: v[c] for name, v in lists} for c in range(8) if any(v[c] for _n, v in lists)}
    return out


def _port_order(name: str) -> tuple[str, int]:
    node, _, port = name.rpartition("-")
    digits = "".join(c for c in port if c.isdigit())
    return node, int(digits) if digits else 0


def port_counters(stats: list[dict[str, Any]]) -> dict[str, tuple]:
    """port name -> (tx_frames, tx_bytes, dropped, is_host_port, peak_queue_frames, corrupted,
    fcs_errors, lost_in_flight, busy_ns, peak_queue_bytes)."""
    out = {}
    for el in stats:
        host = el["kind"] == "host"
        for p in el["ports"]:
            out[p["port"]] = (p["tx_frames"], p["tx_bytes"], p["dropped"] + p["fault_dropped"], host,
                              p["peak_queue_frames"], p["fault_corrupted"], p["fcs_errors"], p["lost_in_flight"],
                              p.get("busy_ns", 0), p["peak_queue_bytes"])
    return out


def diff(before: dict, after: dict, start_ns: int, end_ns: int) -> RunMetrics:
    m = RunMetrics(start_ns, end_ns, 0, 0, 0)
    for port, (f1, b1, d1, host, peak, c1, e1, l1, s1, peak_b) in after.items():
        f0, b0, d0, _, _, c0, e0, l0, s0, _ = before.get(port, (0, 0, 0, host, 0, 0, 0, 0, 0, 0))
        if s1 - s0:
            m.busy_ns[port] = s1 - s0
        if peak_b:
            m.peak_queue_bytes[port] = peak_b
        if l1 - l0:
            m.lost_in_flight[port] = l1 - l0
        if c1 - c0:
            m.corrupted[port] = c1 - c0
        if e1 - e0:
            m.fcs_errors[port] = e1 - e0
        df, db = f1 - f0, b1 - b0
        if df:
            m.link_frames[port] = df
            m.link_bytes[port] = db
            m.hop_count += df
            if host:
                m.frames += df
                m.bytes += db
        if d1 - d0:
            m.dropped[port] = d1 - d0
        if peak:
            m.peak_queue_frames[port] = peak
    return m


def add_flow(m: RunMetrics, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    """Credit flow-control figures of a run: buffer peaks and means per VC, credit stalls."""
    prev = {p["port"]: p for el in before for p in el["ports"]}
    span = max(1, m.end_ns - m.start_ns)
    for el in after:
        for p in el["ports"]:
            name = p["port"]
            if "vc_peak_bytes" in p:
                m.vc_peak_bytes[name] = p["vc_peak_bytes"]
                m.vc_mean_bytes[name] = [round(x / span, 1) for x in p["vc_byte_ns"]]
                if p["pool_peak_bytes"]:
                    m.pool_peak_bytes[name] = p["pool_peak_bytes"]
            if "queues" in p:  # output-queue mechanisms (switch.queues, emu.pause): counts over the run
                old = prev.get(name, {}).get("queues", {})
                d = {k: v if k == "ingress_peak_bytes" else
                     [a - b for a, b in zip(v, old.get(k, [0] * len(v)))] if isinstance(v, list) else v - old.get(k, 0)
                     for k, v in p["queues"].items()}
                if any(any(v) if isinstance(v, list) else v for v in d.values()):
                    m.queues[name] = d
            if "credit_stalls" in p:
                old = prev.get(name, {})
                d = p["credit_stalls"] - old.get("credit_stalls", 0)
                ns = p["credit_stall_ns"] - old.get("credit_stall_ns", 0)
                if d:
                    m.credit_stalls[name] = d
                if ns:
                    m.credit_stall_ns[name] = ns


def add_cc(m: RunMetrics, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    """The congestion control counters of a run (the hosts' ``transport`` stats under ``host.cc``: those
    that count ``segments_sent``), summed over the hosts."""
    prev = {el["name"]: el.get("transport") or {} for el in before}
    for el in after:
        tr = el.get("transport")
        if not tr or "segments_sent" not in tr:
            continue
        old = prev.get(el["name"], {})
        for k, v in tr.items():
            if isinstance(v, int):
                m.cc[k] = m.cc.get(k, 0) + v - old.get(k, 0)
