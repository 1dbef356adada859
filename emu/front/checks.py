"""Named tests ``emu run --test NAME`` runs on a cluster (DESIGN.md principle 8).

A test is ``async def test(net, options) -> dict`` of test-specific figures; it raises to fail.
The runner adds the run's common figures (completion time, frames, bytes, hop count) from
``net.metrics``. Register more with :func:`register`; later mechanisms add theirs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ..errors import EmuError
from .check_registry import CHECKS, CheckFn, Options, register
from .sizes import parse_size

__all__ = ["CHECKS", "COLLECTIVES", "CheckResult", "CollectiveOptions", "Options", "collective_options", "parse_size",
           "pingall", "register", "run_check"]


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
    per_link: dict[str, list[int]] = field(default_factory=dict)
    per_port_flow: dict[str, dict[str, Any]] = field(default_factory=dict)
    """With credit flow control (JSON only): per port, input-buffer peak and mean occupancy per VC
    (bytes) and credit stalls (count, ns)."""
    """Sending port -> [frames, bytes] over the run (JSON only; too long for a table)."""

    def as_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "ok": self.ok, "completion_ns": self.completion_ns, "frames": self.frames,
             "bytes": self.bytes, "hop_count": self.hop_count, **self.figures}
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
    try:
        figures = await fn(net, options)
        ok, error = True, None
    except EmuError as e:
        figures, ok, error = {}, False, f"{type(e).__name__}: {e}"
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
    extra = {k: summary[k] for k in ("max_vc_peak_bytes", "credit_stalls", "credit_stall_ns") if k in summary}
    return CheckResult(name, ok, completion if ok else None, m.frames, m.bytes, m.hop_count,
                       {**figures, "max_queue_frames": m.max_queue_frames, **extra}, error,
                       {p: [f, m.link_bytes[p]] for p, f in m.link_frames.items()}, flow)


async def _ping_list(host, peers):
    return [await host.ping(p) for p in peers]


@register("pingall")
async def pingall(net, options: Options) -> dict[str, Any]:
    """Every host pings every other host, all starting together (beyond 64 hosts: 4 random peers each).

    Each host pings its peers one after the other; ``pingall_full_max_hosts`` and ``pingall_peers``
    set when and how it samples."""
    hosts = net.hosts
    n = len(hosts)
    if n <= options.pingall_full_max_hosts:
        peers = {h: [p for p in hosts if p != h] for h in hosts}
        sampled = None
    else:
        rng = random.Random(options.seed)
        k = min(options.pingall_peers, n - 1)
        peers = {}
        for i, h in enumerate(hosts):
            others = rng.sample(range(n - 1), k)
            peers[h] = [hosts[j if j < i else j + 1] for j in others]
        sampled = f"{k} random peers per host ({n} hosts > {options.pingall_full_max_hosts})"
    res = await net.run({h: (_ping_list, ps) for h, ps in peers.items()})
    rtts = [r for h in hosts for r in res[h]]
    out = {"pairs": len(rtts), "rtt_min_ns": min(rtts), "rtt_max_ns": max(rtts),
           "rtt_mean_ns": round(sum(rtts) / len(rtts), 1)}
    if sampled:
        out["sampled"] = sampled
    return out


@dataclass(frozen=True)
class CollectiveOptions:
    dtype: str
    size: int
    count: int
    op: str
    root: int
    algo: str | None
    ranks: list[str] | None
    offload: str | None = None
    branch: int | None = None
    """The offload tree's degree (None without an offload); given, or ``offload.default_branch``."""


def collective_options(operation: str, extra: dict[str, Any], hosts: list[str],
                       queue_capacity: int | None = None, elan=None) -> CollectiveOptions:
    """Validate the collective options of ``emu run`` against the cluster's hosts (ConfigError)."""
    import numpy as np

    from nodes.collectives import DTYPES, get_op
    from nodes.collectives.select import check

    from ..config import ConfigError

    dtype = extra.get("dtype") or "float32"
    if dtype not in DTYPES:
        raise ConfigError(f"unknown element type {dtype!r}; known: {', '.join(DTYPES)}")
    size = parse_size(extra.get("size") or "1KiB")
    itemsize = np.dtype(dtype).itemsize
    if size % itemsize:
        raise ConfigError(f"size {size} B is not a whole number of {dtype} elements ({itemsize} B)")
    ranks = extra.get("ranks") or None
    if ranks and len(set(ranks)) != len(ranks):
        raise ConfigError(f"--ranks lists a host twice: {','.join(ranks)}")
    unknown = [h for h in ranks or [] if h not in hosts]
    if unknown:
        raise ConfigError(f"--ranks: {', '.join(unknown)} not hosts of this topology (h0..h{len(hosts) - 1})")
    n = len(ranks) if ranks else len(hosts)
    op = extra.get("op") or "sum"
    get_op(op).check(np.dtype(dtype))
    root = int(extra.get("root") or 0)
    if not 0 <= root < n:
        raise ConfigError(f"--root {root} is not a rank of the {n}-rank communicator")
    count = size // itemsize
    if operation == "reduce_scatter" and count % n:
        raise ConfigError(f"reduce_scatter: {count} elements do not split evenly over {n} ranks")
    offload = extra.get("offload") or None
    if extra.get("algo") and offload != "hw":
        check(operation, extra["algo"], n)
    branch = None if extra.get("branch") is None else int(extra["branch"])
    if offload is not None:
        from nodes.collectives.offload import default_branch, parts, validate

        from ..config import NicSpec

        if offload == "hw":  # --algo names the hardware algorithm (nodes.collectives.hw.HW_ALGOS)
            validate(operation, np.dtype(dtype), op, branch or 1, offload, count, algo=extra.get("algo"), elan=elan)
            return CollectiveOptions(dtype, size, count, op, root, extra.get("algo"), ranks, offload, branch)
        if offload == "switch":
            if extra.get("algo") or branch is not None:
                raise ConfigError("--algo and --branch do not apply to --offload switch (the manager picks the tree "
                                  "and the aggregation algorithm)")
            validate(operation, np.dtype(dtype), op, 1, offload)
            return CollectiveOptions(dtype, size, count, op, root, None, ranks, offload, None)
        if extra.get("algo"):
            raise ConfigError("--algo names a host software algorithm; leave it out with --offload nic")
        if branch is None:
            branch = default_branch(operation, n, parts(count, np.dtype(dtype)),
                                    NicSpec().queue_capacity if queue_capacity is None else queue_capacity)
        validate(operation, np.dtype(dtype), op, branch, offload, count, queue_capacity)
    return CollectiveOptions(dtype, size, count, op, root, extra.get("algo"), ranks, offload, branch)


def _collective_check(operation: str) -> CheckFn:
    async def check(net, options: Options) -> dict[str, Any]:
        from nodes.collectives.run import check_results, run_collective

        spec = net.topology.hosts[0].spec
        o = collective_options(operation, options.extra, net.hosts, spec.nic.queue_capacity, spec.elan)
        res = await run_collective(net, operation, count=o.count, dtype=o.dtype, op=o.op, algo=o.algo,
                                   root=o.root, ranks=o.ranks, seed=options.seed, offload=o.offload,
                                   branch=o.branch)
        if res.errors:
            raise EmuError(f"the NICs reported errors: {res.errors}")
        try:
            check_results(res, o.count, o.dtype, o.op, o.root, options.seed)
        except AssertionError as e:
            raise EmuError(f"wrong result: {e}") from None
        return {"completion_ns": res.completion_ns, "algo": res.algo, "ranks": len(res.ranks), "size_bytes": o.size,
                "dtype": o.dtype, "op": o.op, "cpu_ns_total": res.cpu_ns_total, "cpu_ns_max": res.cpu_ns_max,
                "result": "equal to numpy"}
    check.__doc__ = (f"{COLLECTIVES[operation]}.\n\nThe result is checked against numpy; options: algo, size, "
                     "dtype, op, root, ranks, offload, branch.")
    return check


def _collectives() -> dict[str, str]:
    from nodes.collectives.operations import OPERATIONS

    return {name: op.summary for name, op in OPERATIONS.items()}


COLLECTIVES = _collectives()
"""The collective tests (``nodes.collectives.operations``), each with the line ``emu run --help`` shows."""

for _name in COLLECTIVES:
    register(_name)(_collective_check(_name))

from . import qsnet_checks  # noqa: E402,F401  (registers put and get)
