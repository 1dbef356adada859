"""Run one collective on a cluster and measure it (spec 00 "Measuring collectives").

Every rank enters at the same virtual time t0 (one ``net.run`` episode); the completion time runs
from t0 until the last rank has its result. Inputs are generated inside each rank from the seed, so
the same call gives the same data, figures and capture every time, in one process or several.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emu.config import ConfigError
from emu.metrics import RunMetrics

from . import check as kept_check
from .comm import Comm
from emu.reduce import DTYPES, get_op, reference_streamed
from .offload import errors_text
from .offloads import OFFLOADS, offload_named
from .operands import input_chunks, make_input  # noqa: F401 -- (also this module's: the tests, the scripts)
from .operations import OPERATIONS as OPS
from .select import check

OPERATIONS = tuple(OPS)


def make_sparse_input(seed: int, rank: int, count: int, dtype: str, density: float, overlap: float,
                      bucket: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rank ``rank``'s sparse operand: ``round(density x count)`` non-zeros (at least one when the
    density is above 0), sorted indices and their values. ``overlap``: the share of each rank's
    indices that come from a pool common to all ranks (the same indices on every rank); the rest
    are drawn at random, per rank, from the other indices (two ranks may still meet there by
    chance). Values are non-zero: uniform in [0.5, 1.5) with a random sign, or integers 1..99.

    ``bucket``: the source's gradient-like data instead -- one value per bucket of ``bucket``
    elements (``count // bucket`` buckets; density 1 / bucket), at a random place in its bucket;
    ``overlap``: the share of the buckets whose value sits at the same place on every rank (the
    buckets are chosen, and their places drawn, from the seed alone)."""
    if bucket:
        nb = count // bucket
        common = round(overlap * nb)
        shared = np.random.default_rng([seed, 0x5EED, bucket])
        which = shared.permutation(nb)
        place = np.empty(nb, np.int64)
        place[which[:common]] = shared.integers(0, bucket, common)
        rng = np.random.default_rng([seed, rank, 1])
        place[which[common:]] = rng.integers(0, bucket, nb - common)
        idx = np.arange(nb, dtype=np.int64) * bucket + place
        nnz = nb
    else:
        nnz = 0 if density <= 0 else min(count, max(1, round(density * count)))
        common = round(overlap * nnz)
        pool = np.random.default_rng([seed, 0x5EED]).permutation(count)
        rng = np.random.default_rng([seed, rank, 1])
        rest = pool[common:]
        idx = np.sort(np.concatenate([pool[:common], rng.choice(rest, nnz - common, replace=False)]))
    dt = np.dtype(dtype)
    if dt.kind == "f":
        vals = rng.uniform(0.5, 1.5, nnz) * rng.choice([-1.0, 1.0], nnz)
    else:
        vals = rng.integers(1, 100, nnz)
    return idx.astype(np.int64), vals.astype(dt)


async def setup_app(host, members, fn, *args):
    """What an offload sets up on every rank before the measured call (``Offload.prepare``)."""
    return await fn(Comm(host, members), *args)


async def call(comm: Comm, operation: str, x: np.ndarray, algo: str | None, op: str, root: int,
               offload: str | None = None, branch: int | None = None):
    """``operation`` on this rank's operand ``x`` (shape (size, count) for alltoall)."""
    if operation == "allreduce":
        return await comm.allreduce(x, op, algo, offload=offload, branch=branch)
    if operation == "reduce":
        return await comm.reduce(x, op, root, algo, offload=offload, branch=branch)
    if operation == "bcast":
        return await comm.bcast(x, root, algo, offload=offload)
    if operation == "mcast":
        return await comm.mcast(x, root, algo)
    if operation == "barrier":
        return await comm.barrier(algo, offload=offload, branch=branch)
    if operation in ("allgather", "mcast_all", "alltoall"):
        return await getattr(comm, operation)(x, algo)
    if operation == "reduce_scatter":
        return await comm.reduce_scatter(x, op, algo)
    raise ConfigError(f"unknown collective {operation!r}; known: {', '.join(OPERATIONS)}")


async def collective_app(host, members, operation, algo, count, dtype, op, root, seed, offload=None, branch=None,
                         sparse=None, keep=None):
    comm = Comm(host, members)
    comm.in_place = True  # the input is made here and not needed after: no working copy of it
    late = host.entry_skew_ns(comm.rank)  # ``host.skew``: this rank enters the operation late
    if late:
        await host.sleep(late)
    if sparse is not None:  # (density, overlap, bucket, span): an allreduce of a sparse vector
        density, overlap, bucket, span = sparse
        idx, vals = make_sparse_input(seed, comm.rank, count, dtype, density, overlap, bucket)
        y = await comm.allreduce_sparse(idx, vals, count, op, offload=offload, span=span, algo=algo)
        return y, host.now, host.cpu_ns, comm.last_algo, comm.last_status, None
    x = make_input(seed, comm.rank, count, dtype, op if operation != "alltoall" else "alltoall", comm.size)
    y = await call(comm, operation, x, algo, op, root, offload, branch)
    if keep is not None:  # the result stays in this process, checked here (``check.keep``)
        kept_check.keep(keep, comm.rank, y)
        y = None
    return y, host.now, host.cpu_ns, comm.last_algo, comm.last_status, getattr(comm, "nc_stats", None)


@dataclass
class CollectiveResult:
    operation: str
    algo: str
    ranks: list[str]
    results: dict[str, Any]
    completion_ns: int
    """From the moment every rank entered until the last one had its result."""
    cpu_ns_total: int
    cpu_ns_max: int
    metrics: RunMetrics
    """The run's network figures (frames and bytes the hosts injected, hop count, per link)."""
    errors: dict[str, str] = field(default_factory=dict)
    """Ranks whose offloaded operation reported an error: host -> what (e.g. 'mismatch|timeout')."""
    nc_stats: list | None = None
    """Spec 02's broadcasts run by the NICs: every rank's per-step figures (``coding.timing.figures``)."""
    sparse: tuple[float, float, int | None] | None = None
    """(density, overlap, bucket) of a sparse allreduce's operands (``make_sparse_input``), else None."""
    kept: str | None = None
    """The ranks' results stayed in the processes that ran them (``run_collective(keep=True)``; then
    ``results`` is empty) under this name, until :func:`check_where_run` checks them there."""

    frames = property(lambda self: self.metrics.frames)
    bytes = property(lambda self: self.metrics.bytes)
    hop_count = property(lambda self: self.metrics.hop_count)
    link_frames = property(lambda self: self.metrics.link_frames)
    link_bytes = property(lambda self: self.metrics.link_bytes)

    def figures(self) -> dict[str, Any]:
        return {"completion_ns": self.completion_ns, "frames": self.frames, "bytes": self.bytes,
                "hop_count": self.hop_count, "cpu_ns_total": self.cpu_ns_total, "cpu_ns_max": self.cpu_ns_max}


def expected(operation: str, ranks: int, count: int, dtype: str, op: str, root: int, seed: int) -> list:
    """What numpy says each rank's result should be (None where a rank gets nothing)."""
    spec = OPS.get(operation)
    if spec is None:
        raise ConfigError(f"unknown collective {operation!r}; known: {', '.join(OPS)}")
    kind = "alltoall" if spec.result == "exchanged" else op
    result = spec.result
    if result in ("reduced", "root_reduced", "scattered"):
        # one operand at a time: the running result and one operand in memory, not ranks of them
        ref = reference_streamed(get_op(op), (make_input(seed, r, count, dtype, kind, ranks) for r in range(ranks)))
        if result == "reduced":
            return [ref] * ranks
        if result == "root_reduced":
            return [ref if r == root else None for r in range(ranks)]
        c = count // ranks
        return [ref[r * c:(r + 1) * c] for r in range(ranks)]
    inputs = [make_input(seed, r, count, dtype, kind, ranks) for r in range(ranks)]
    if result == "same":
        return [inputs[root]] * ranks
    if result == "none":
        return [None] * ranks
    if result == "gathered":
        return [np.stack(inputs)] * ranks
    return [np.stack([inputs[s][r] for s in range(ranks)]) for r in range(ranks)]  # exchanged


def expected_sparse(ranks: int, count: int, dtype: str, seed: int, density: float, overlap: float,
                    bucket: int | None = None) -> np.ndarray:
    """The sum of the ranks' sparse operands, dense (as numpy adds them, in rank order)."""
    out = np.zeros(count, np.dtype(dtype))
    for r in range(ranks):
        idx, vals = make_sparse_input(seed, r, count, dtype, density, overlap, bucket)
        out[idx] += vals
    return out


def _check_by_chunks(res: CollectiveResult, count: int, dtype: str, op: str, root: int, seed: int,
                     chunk: int = kept_check.CHUNK) -> bool:
    """A reduction's results against numpy's, computed ``chunk`` elements at a time: each rank's
    operand is drawn a chunk at a time (:func:`input_chunks`, the very values :func:`make_input`
    makes) and folded (``reference_streamed``), so the check holds no operand nor reference
    whole -- only the results. The check of :func:`check_where_run` with every rank in one part
    (``check.Part``). False when the operation or operator cannot go by chunks (its operands are
    not drawn by chunks: logical operators; paired ones)."""
    if not kept_check.checkable(res.operation, op):
        return False
    part = kept_check.Part({r: res.results[h] for r, h in enumerate(res.ranks)},
                           (res.operation, len(res.ranks), count, dtype, op, root, seed, chunk))
    assert part.problem is None, kept_check.problem_text(part.problem, res.ranks)
    for i in range(0, count, chunk):
        r = part.compare(i, part.fold())
        assert r is None, kept_check.differs_text(res, op, dtype, r)
    return True


def check_results(res: CollectiveResult, count: int, dtype: str, op: str, root: int, seed: int) -> None:
    """Raise AssertionError naming the first rank whose result differs from numpy's. A reduction
    is checked a chunk at a time (:func:`_check_by_chunks`): no second copy of any rank's data."""
    if res.kept is not None:
        raise ValueError("the results stayed where their ranks ran (run_collective(keep=True)): check them there "
                         "with check_where_run")
    assert not res.errors, f"{res.operation}/{res.algo}: the NICs reported errors: {res.errors}"
    if res.sparse is None and _check_by_chunks(res, count, dtype, op, root, seed):
        return
    if res.sparse is not None:
        want = [expected_sparse(len(res.ranks), count, dtype, seed, *res.sparse)] * len(res.ranks)
    else:
        want = expected(res.operation, len(res.ranks), count, dtype, op, root, seed)
    dt = np.dtype(dtype)
    for r, host in enumerate(res.ranks):
        got, ref = res.results[host], want[r]
        if ref is None:
            assert got is None, f"rank {r} ({host}) got a result, expected none"
            continue
        got = np.asarray(got).reshape(ref.shape)
        if dt.kind == "f" and res.operation in ("allreduce", "reduce", "reduce_scatter") and op in ("sum", "prod"):
            rtol = {2: 2e-2, 4: 1e-4, 8: 1e-10}[dt.itemsize] * max(1, len(res.ranks))
            g, f = got.reshape(-1), ref.reshape(-1)
            step = 1 << 20  # compared in float64 a chunk at a time: no 8-byte copies of the whole
            ok = all(np.allclose(g[i:i + step].astype(np.float64), f[i:i + step].astype(np.float64),
                                 rtol=rtol, atol=rtol) for i in range(0, g.size, step))
        else:
            ok = np.array_equal(got, ref)
        assert ok, f"{res.operation}/{res.algo} {op} {dtype}: rank {r} ({host}) differs from numpy"


async def run_collective(net, operation: str, *, count: int = 1024, dtype: str = "float32", op: str = "sum",
                         algo: str | None = None, root: int = 0, ranks: list[str] | None = None,
                         seed: int = 0, offload: str | None = None, branch: int | None = None,
                         density: float | None = None, overlap: float = 0.0,
                         bucket: int | None = None, keep: bool = False) -> CollectiveResult:
    """Run ``operation`` on ``ranks`` (default: every host, in address order) and measure it.

    ``offload="nic"`` (allreduce and reduce) first sets the communicator up on the NICs in an
    episode of its own, so that the measured one starts with every rank entering the operation;
    ``branch`` is the offload tree's degree (default: ``offload.default_branch``). ``density``
    below 1: a sparse allreduce (a sum) of operands with that share of non-zeros, ``overlap`` of
    their indices common to all ranks (``make_sparse_input``), in host software (``algo``:
    split_allgather, the default, or recursive_doubling) or aggregated in the switches (blocks of
    the span whose average non-zeros fill a packet, ``inswitch.sparse_span``). ``bucket``: one
    non-zero per bucket of that many elements (the source's gradient-like data; density
    1 / bucket, ``make_sparse_input``). ``keep``: where the check goes by chunks (a dense reduction,
    ``check.checkable``), the results stay in the processes that ran the ranks, for
    :func:`check_where_run` to check there (``CollectiveResult.kept``; ``results`` is empty): no
    process receives nor checks every rank's (issue 45)."""
    sparse = None
    if bucket is not None:
        density = bucket_density(bucket, count, density)
    if density is not None and density < 1:
        sparse = _sparse_setup(operation, op, offload, algo, density, overlap, count, dtype, bucket)
    elif density is not None and not 0 < density <= 1:
        raise ConfigError(f"density {density} is not within (0, 1]")
    if operation not in OPERATIONS:
        raise ConfigError(f"unknown collective {operation!r}; known: {', '.join(OPERATIONS)}")
    if dtype not in DTYPES:
        raise ConfigError(f"unknown element type {dtype!r}; known: {', '.join(DTYPES)}")
    members = list(ranks) if ranks is not None else list(net.hosts)
    if operation == "reduce_scatter" and count % len(members):
        raise ConfigError(f"reduce_scatter: count {count} must be a multiple of the {len(members)} ranks")
    op_obj = get_op(op)
    op_obj.check(np.dtype(dtype))
    off = offload_named(offload)
    if algo is not None and not off.own_algos and sparse is None:
        check(operation, algo, len(members))
    if sparse is not None and algo == "recursive_doubling" and len(members) & (len(members) - 1):
        raise ConfigError(f"the sparse recursive doubling needs a power-of-two number of ranks, not {len(members)}; "
                          "leave --algo out (split_allgather runs on any number)")
    if sparse is not None:
        setup = off.sparse_setup(dtype, sparse[3])
    else:  # validated on this network; the communicator's setup (the NICs', the manager's tree) in an episode of its own
        branch, setup = await off.prepare(net, operation, members, dtype, op, count, root, branch, algo)
    if setup is not None:
        fn, args = setup
        await net.run({h: (setup_app, members, fn, *args) for h in members})
    t0 = net.now
    token = kept_check.new_token() if keep and sparse is None and kept_check.checkable(operation, op) else None
    apps = {h: (collective_app, members, operation, algo, count, dtype, op, root, seed, offload, branch, sparse, token)
            for h in members}
    try:
        out = await net.run(apps)
    except BaseException:
        kept_check.release(token)  # (this process's; a worker's go with it as the cluster ends)
        raise
    m = net.metrics
    errors = {h: errors_text(out[h][4]) for h in members if out[h][4]}
    return CollectiveResult(
        operation, out[members[0]][3], members, {} if token else {h: out[h][0] for h in members},
        max(out[h][1] for h in members) - t0, sum(out[h][2] for h in members), max(out[h][2] for h in members),
        m, errors, [out[h][5] for h in members] if out[members[0]][5] is not None else None,
        None if sparse is None else sparse[:3], token)


async def check_where_run(net, res: CollectiveResult, count: int, dtype: str, op: str, root: int, seed: int) -> None:
    """:func:`check_results` for results kept where their ranks ran (``res.kept``; else that check
    itself): each process checks its own ranks' (``check``), the main process makes the reference
    of the parts the processes fold. Raises AssertionError naming the first rank whose result
    differs from numpy's, in the same words. The kept results are released whatever the outcome."""
    if res.kept is None:
        return check_results(res, count, dtype, op, root, seed)
    token, res.kept = res.kept, None
    try:
        assert not res.errors, f"{res.operation}/{res.algo}: the NICs reported errors: {res.errors}"
        what = (res.operation, len(res.ranks), count, dtype, op, root, seed, kept_check.CHUNK)
        began = await net.each_process(kept_check.begin, lambda d: (token, what))
        if sum(n for n, _ in began) != len(res.ranks):
            raise RuntimeError(f"the processes kept {sum(n for n, _ in began)} results of {len(res.ranks)} ranks")
        problems = [p for _, p in began if p is not None]
        assert not problems, kept_check.problem_text(min(problems, key=lambda p: p[1]), res.ranks)
        for i in range(0, count, kept_check.CHUNK):
            ref = kept_check.combine(op, await net.each_process(kept_check.fold, lambda d: (token,)))
            wrong = [r for r in await net.each_process(kept_check.compare, lambda d: (token, i, ref)) if r is not None]
            assert not wrong, kept_check.differs_text(res, op, dtype, min(wrong))
    finally:
        await net.each_process(kept_check.release, lambda d: (token,))


def bucket_density(bucket: int, count: int, density: float | None = None) -> float:
    """The density of one value per bucket of ``bucket`` elements, or ConfigError naming what does
    not fit (``--bucket``)."""
    if isinstance(bucket, bool) or not isinstance(bucket, int) or bucket < 2:
        raise ConfigError(f"--bucket {bucket}: the elements per bucket, an integer >= 2 (the source: 512)")
    if density is not None:
        raise ConfigError("--bucket sets the density (one value per bucket: 1 / bucket); leave --density out")
    if count % bucket:
        raise ConfigError(f"--bucket {bucket}: {count} elements are not a whole number of buckets; give a size of a "
                          f"multiple of {bucket} elements")
    return 1 / bucket


def _sparse_setup(operation: str, op: str, offload: str | None, algo: str | None, density: float, overlap: float,
                  count: int, dtype: str, bucket: int | None = None) -> tuple[float, float, int | None, int]:
    """(density, overlap, bucket, span) of a sparse allreduce, or ConfigError naming what does not fit."""
    if operation != "allreduce":
        raise ConfigError(f"--density applies to allreduce, not {operation}")
    if op != "sum":
        raise ConfigError(f"a sparse allreduce sums (absent elements are zeros), not {op}; leave --op out")
    off = offload_named(offload)
    if not off.sparse:
        raise ConfigError(f"a sparse allreduce runs in host software or the switches (--offload "
                          f"{'|'.join(n for n, o in OFFLOADS.items() if o.sparse)}), not --offload {offload}")
    if not 0 <= density < 1:
        raise ConfigError(f"--density {density} must be within 0..1 (the share of non-zero elements)")
    if not 0 <= overlap <= 1:
        raise ConfigError(f"--overlap {overlap} must be within 0..1 (the share of each rank's indices common to all)")
    if algo not in (None, "split_allgather", "recursive_doubling") or (algo and not off.hosted):
        raise ConfigError(f"--algo {algo}: a sparse allreduce in host software runs as split_allgather (default) "
                          "or recursive_doubling; with --offload switch leave --algo out")
    from .inswitch import sparse_span

    return density, overlap, bucket, sparse_span(density, count, dtype)
