"""Named tests ``emu run --test NAME`` runs on a cluster (DESIGN.md principle 8).

A test is ``async def test(net, options) -> dict`` of test-specific figures; it raises to fail.
The runner adds the run's common figures (completion time, frames, bytes, hop count) from
``net.metrics``. Register more with :func:`register` (``check_registry``); later mechanisms add
theirs. This module is the front door: it imports every module that registers tests, and hands on
the names the CLI, the estimate and scripts use.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ..errors import AppError, EmuError
from .check_registry import CHECKS, Options, register
from .sizes import parse_size

# The modules that define tests register them as they are imported, so this order is the order of
# CHECKS, the order ``emu run --help`` lists them in: pingall, the collectives, QsNet put and get,
# the open-loop traffic patterns, the flow workloads.
from .ping_checks import pingall  # isort: skip
from .collective_checks import COLLECTIVES, CollectiveOptions, collective_options  # isort: skip
from . import qsnet_checks  # noqa: F401  isort: skip
from . import traffic_checks  # noqa: F401  isort: skip
from . import gpcnet  # noqa: F401  isort: skip
from . import goal_check  # noqa: F401  isort: skip
from . import flow_checks  # noqa: F401  isort: skip

__all__ = ["CHECKS", "COLLECTIVES", "CheckResult", "CollectiveOptions", "Options", "collective_options", "parse_size",
           "pingall", "register", "run_check"]

log = logging.getLogger(__name__)


@dataclass
class CheckResult:
    name: str
    ok: bool
    completion_ns: int | None
    frames: int
    bytes: int
    hop_count: int
    figures: dict[str, Any]
    error: str | None = None
    per_link: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per link direction, keyed by its sending port (``s0-p2``: one key per direction, unique even
    where two links join the same nodes): ``link`` (the link's name, ``A-B`` as ``emu topo`` and
    ``--fault link=`` give it), ``from``, ``to`` (nodes), ``to_port``, then frames, bytes, busy_ns,
    peak queue (frames, bytes), credit_stall_ns, drops over the run (``RunMetrics.per_link``; JSON
    only, too long for a table)."""
    per_port_flow: dict[str, dict[str, Any]] = field(default_factory=dict)
    """With credit flow control (JSON only): per port, input-buffer peak and mean occupancy per VC
    (bytes) and credit stalls (count, ns)."""
    start_ns: int | None = None
    """The test's start on the cluster's clock (virtual ns from the cluster's start, as ``net.now`` and
    a message's ``t_ns``): ``completion_ns`` counts from here."""
    end_ns: int | None = None
    """The run's last event on the cluster's clock: ``end_ns - start_ns >= completion_ns`` (the last
    application's end) by what still trails on the wire then (acknowledgements, credits)."""

    def as_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "ok": self.ok, "completion_ns": self.completion_ns, "frames": self.frames,
             "bytes": self.bytes, "hop_count": self.hop_count, **self.figures}
        if self.start_ns is not None:  # the origin of completion_ns, on the cluster's clock
            d["start_ns"], d["end_ns"] = self.start_ns, self.end_ns
        if self.error:
            d["error"] = self.error
        d["per_link"] = self.per_link
        if self.per_port_flow:
            d["per_port_flow"] = self.per_port_flow
        return d


async def run_check(net, name: str, options: Options) -> CheckResult:
    fn = CHECKS.get(name)
    if fn is None:
        raise EmuError(f"unknown test {name!r}; known: {', '.join(sorted(CHECKS))}")
    await net.trace_mark("B", name)  # the test: the outer span of every host's track in a trace
    try:
        figures = await fn(net, options)
        ok, error = True, None
    except AppError as e:  # one line per distinct error with its hosts; the first traceback with -v
        figures, ok, error = {}, False, f"AppError: application(s) failed: {e.summary}"
        log.info("%s: %s", name, e)
    except EmuError as e:
        figures, ok, error = {}, False, f"{type(e).__name__}: {e}"
    finally:
        try:
            await net.trace_mark("E", name, None)
        except EmuError as e:  # a broken cluster: the trace's end closes the span
            log.info("trace: the end of %s not marked: %s", name, e)
    m = net.metrics
    if m is None:
        return CheckResult(name, ok, None, 0, 0, 0, figures, error)
    completion = figures.pop("completion_ns", m.completion_ns)  # a test may define its own end
    flow: dict[str, dict[str, Any]] = {}
    for p, peaks in m.vc_peak_bytes.items():
        flow.setdefault(p, {}).update(vc_peak_bytes=peaks, vc_mean_bytes=m.vc_mean_bytes.get(p))
    for p, n in m.credit_stalls.items():
        flow.setdefault(p, {}).update(credit_stalls=n, credit_stall_ns=m.credit_stall_ns.get(p, 0))
    summary = m.summary()
    extra = {k: summary[k] for k in ("max_vc_peak_bytes", "credit_stalls", "credit_stall_ns", "cc") if k in summary}
    losses = {k: summary[k] for k in ("dropped", "corrupted", "fcs_errors", "lost_in_flight")}
    return CheckResult(name, ok, completion if ok else None, m.frames, m.bytes, m.hop_count,
                       {**figures, "max_queue_frames": m.max_queue_frames, **losses, **extra}, error,
                       named_links(net.topology, m.per_link()), flow, m.start_ns, m.end_ns)


def named_links(topo, per_port: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    """``per_link`` with each direction's link named: ``link`` (``A-B``, ``A-B.N`` for parallel links,
    as ``emu topo --links`` names it),
    ``from``, ``to`` and ``to_port`` before the figures."""
    ends = {}
    for link, name in zip(topo.links, topo.link_names()):  # parallel links: A-B.0, A-B.1, ...
        pa, pb = topo.port_name(link.a, link.a_port), topo.port_name(link.b, link.b_port)
        ends[pa] = {"link": name, "from": link.a, "to": link.b, "to_port": pb}
        ends[pb] = {"link": name, "from": link.b, "to": link.a, "to_port": pa}
    return {p: {**ends.get(p, {}), **v} for p, v in per_port.items()}


