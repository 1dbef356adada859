"""The collective tests (``emu run --test allreduce`` and the rest of
``emu.nodes.collectives.operations``): their options, validated against the cluster, and one test per
operation that runs it and checks the result against numpy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import EmuError
from .check_registry import CheckFn, Options, register
from .sizes import parse_size


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
    density: float | None = None
    """A sparse allreduce's share of non-zeros (``--density``; None: dense)."""
    overlap: float = 0.0
    """The share of a sparse operand's indices common to all ranks (``--overlap``)."""
    bucket: int | None = None
    """One non-zero per bucket of this many elements (``--bucket``; density 1 / bucket)."""


def collective_options(operation: str, extra: dict[str, Any], hosts: list[str],
                       queue_capacity: int | None = None, elan=None) -> CollectiveOptions:
    """Validate the collective options of ``emu run`` against the cluster's hosts (ConfigError)."""
    import numpy as np

    from emu.nodes.collectives import DTYPES, get_op
    from emu.nodes.collectives.select import check

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
        from .topo_cmd import nearest

        raise ConfigError(f"--ranks: {', '.join(unknown)} not hosts of this topology ({hosts[0]}..{hosts[-1]})"
                          f"{nearest(unknown[0], hosts, 'hosts')}")
    n = len(ranks) if ranks else len(hosts)
    op = extra.get("op") or "sum"
    get_op(op).check(np.dtype(dtype))
    root = int(extra.get("root") or 0)
    if not 0 <= root < n:
        raise ConfigError(f"--root {root} is not a rank of the {n}-rank communicator")
    count = size // itemsize
    if operation == "reduce_scatter" and count % n:
        raise ConfigError(f"reduce_scatter: {count} elements do not split evenly over {n} ranks")
    from emu.nodes.collectives.offloads import canonical_offload, offload_named

    offload = canonical_offload(extra.get("offload") or None)  # None: host software
    density, overlap, bucket = extra.get("density"), extra.get("overlap"), extra.get("bucket")
    if bucket is not None:
        from emu.nodes.collectives.run import bucket_density

        density = bucket_density(bucket, count, density)
    if overlap is not None and density is None:
        raise ConfigError("--overlap is the share of common non-zero indices of a sparse allreduce: give --density too")
    if density is not None:
        if not 0 <= density <= 1:
            raise ConfigError(f"--density {density} must be within 0..1 (the share of non-zero elements)")
        if density < 1:  # a sparse allreduce: its own checks (nodes.collectives.run._sparse_setup)
            from emu.nodes.collectives.run import _sparse_setup

            if extra.get("branch") is not None:
                raise ConfigError("--branch does not apply to a sparse allreduce")
            _sparse_setup(operation, op, offload, extra.get("algo"), density, overlap or 0.0, count, dtype, bucket)
            return CollectiveOptions(dtype, size, count, op, root, extra.get("algo"), ranks, offload, None, density,
                                     overlap or 0.0, bucket)
        density = None
    off = offload_named(offload)
    if extra.get("algo") and not off.own_algos:
        check(operation, extra["algo"], n)
    branch = None if extra.get("branch") is None else int(extra["branch"])
    algo, branch = off.options(operation, np.dtype(dtype), op, count, n, extra.get("algo"), branch, queue_capacity, elan)
    return CollectiveOptions(dtype, size, count, op, root, algo, ranks, offload, branch)


def _collective_check(operation: str) -> CheckFn:
    async def check(net, options: Options) -> dict[str, Any]:
        from emu.nodes.collectives.run import check_where_run, run_collective

        spec = net.topology.hosts[0].spec
        o = collective_options(operation, options.extra, net.hosts, spec.nic.queue_capacity, spec.elan)
        # (keep: each process checks the results of the ranks it ran, issue 45)
        res = await run_collective(net, operation, count=o.count, dtype=o.dtype, op=o.op, algo=o.algo,
                                   root=o.root, ranks=o.ranks, seed=options.seed, offload=o.offload,
                                   branch=o.branch, density=None if o.bucket else o.density, overlap=o.overlap,
                                   bucket=o.bucket, keep=True)
        try:
            await check_where_run(net, res, o.count, o.dtype, o.op, o.root, options.seed)
        except AssertionError as e:
            if res.errors:  # (the check says so first)
                raise EmuError(f"the NICs reported errors: {res.errors}") from None
            raise EmuError(f"wrong result: {e}") from None
        from emu.nodes.collectives.operations import OPERATIONS

        kind = OPERATIONS[operation]
        data = {} if kind.result == "none" else {"size_bytes": o.size, "dtype": o.dtype}
        if kind.reduces:
            data["op"] = o.op
        out = {"completion_ns": res.completion_ns, "algo": res.algo, "ranks": len(res.ranks), **data,
               "cpu_ns_total": res.cpu_ns_total, "cpu_ns_max": res.cpu_ns_max,
               # a barrier moves no data: what is checked is that every rank left it
               "result": "every rank left" if kind.result == "none" else "equal to numpy",
               **_sparse_figures(res), **_offload_model(net, res, o)}
        if res.nc_stats:  # spec 02 on the NICs: execution time (measured and modelled) and packet latency
            from emu.nodes.collectives.coding.timing import figures

            out.update(figures(net.topology, res.nc_stats))
        return out
    check.__doc__ = (f"{COLLECTIVES[operation]}.\n\nThe result is checked against numpy; options: algo, size, "
                     "dtype, op, root, ranks, offload, branch, density, overlap, bucket.")
    return check


def _offload_model(net, res, o) -> dict[str, Any]:
    """The offload's model beside the measurement (on the NICs: the pipeline model's completion)."""
    from emu.nodes.collectives.offloads import offload_named

    return offload_named(o.offload).figures(net.topology, res, o)


def _sparse_figures(res) -> dict[str, Any]:
    """A sparse allreduce's operands and its traffic: bytes over every link (``link_bytes``)."""
    if res.sparse is None:
        return {}
    return {"density": res.sparse[0], "overlap": res.sparse[1], **({"bucket": res.sparse[2]} if res.sparse[2] else {}),
            "link_bytes": sum(res.link_bytes.values())}


def _collectives() -> dict[str, str]:
    from emu.nodes.collectives.operations import OPERATIONS

    return {name: op.summary for name, op in OPERATIONS.items()}


COLLECTIVES = _collectives()
"""The collective tests (``emu.nodes.collectives.operations``), each with the line ``emu run --help`` shows."""

for _name in COLLECTIVES:
    register(_name)(_collective_check(_name))
