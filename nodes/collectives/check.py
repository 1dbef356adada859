"""A reduction's results checked against numpy where its ranks ran (issue 45).

The check of a reduction (allreduce, reduce, reduce_scatter) folds every rank's operand, drawn again
from the seed, into numpy's result, and compares each rank's result with its part of it. Done in the
main process alone, that process drew all the ranks' operands and received every rank's result from
the workers (16 MiB for the 256-rank allreduce of 64 KiB) while the workers waited.

Here each process takes the ranks it ran (``run_collective(..., keep=True)`` leaves each rank's
result in its process, :func:`keep`): it draws their operands and folds them (its *part* of the
reference), the main process folds the parts into the reference, and each process compares its own
ranks' results with it. A chunk of elements at a time, as before (no operand nor reference held
whole). The same comparisons in the same order: the first rank found wrong, and the words of the
error, are those of the check in one place (:func:`emu.nodes.collectives.run.check_results`), which
runs the same code with every rank in one part.

The reference is the same fold of the same operands. Only its grouping differs with more than one
process: each process's ranks first, in rank order, then the parts in process order. The operators
checked so are exact and associative on integers (sums and products wrap) and min/max/bitwise ones,
whose reference is then the same bits; a float sum or product grouped otherwise differs by rounding
alone, far inside the tolerance the comparison allows for the algorithms' own order (``_tolerance``).
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

from emu.reduce import get_op, reference_streamed

from .operands import input_chunks
from .operations import OPERATIONS as OPS

CHUNK = 1 << 20
"""Elements of the reference made and compared at a time."""

_KEPT: dict[str, dict[int, Any]] = {}
"""Results kept in this process where their ranks ran: run token -> {rank: result}."""

_PARTS: dict[str, "Part"] = {}
"""The checks under way in this process: run token -> its part."""


def checkable(operation: str, op: str) -> bool:
    """Whether ``operation`` with ``op`` is checked by chunks (a reduction by an operator that is
    neither paired nor logical: their operands are not drawn by chunks)."""
    spec = OPS.get(operation)
    return spec is not None and spec.result in ("reduced", "root_reduced", "scattered") and \
        not get_op(op).paired and op not in ("land", "lor", "lxor")


def new_token() -> str:
    """A name for one run's kept results, unique across the cluster's processes."""
    return secrets.token_hex(8)


def keep(token: str, rank: int, result: Any) -> None:
    """Keep ``rank``'s result in this process (called by the rank's application)."""
    _KEPT.setdefault(token, {})[rank] = result


def release(token: str) -> None:
    """Forget a run's kept results and its check in this process."""
    _KEPT.pop(token, None)
    _PARTS.pop(token, None)


def _tolerance(dt: np.dtype, operation: str, op: str, ranks: int) -> float | None:
    """The comparison of a result with numpy's: within this tolerance (relative and absolute) for
    float sums and products (the algorithms add in another order), else exact (None)."""
    if dt.kind == "f" and operation in ("allreduce", "reduce", "reduce_scatter") and op in ("sum", "prod"):
        return {2: 2e-2, 4: 1e-4, 8: 1e-10}[dt.itemsize] * max(1, ranks)
    return None


class _Near:
    """Results against one chunk of the reference ``ref``: ``np.allclose`` in float64 with ``tol`` as
    both tolerances, or equal (``tol`` None). What allclose makes of the reference alone (its float64
    copy, the bound ``atol + rtol * |ref|``, whether it is finite) is made once for every rank: a
    result within the bound everywhere, against a finite reference, is what allclose accepts; any
    other goes to allclose itself. The same answers, the reference's share of the work once."""

    def __init__(self, ref: np.ndarray, tol: float | None):
        self.ref, self.tol = ref, tol
        if tol is not None:
            self.ref64 = ref.astype(np.float64)
            self.bound = tol + tol * np.abs(self.ref64)  # (allclose's atol + rtol * abs(y), as it adds them)
            self.finite = bool(np.isfinite(self.ref64).all())

    def __call__(self, g: np.ndarray, a: int, b: int) -> bool:
        """Whether ``g`` is close to the reference's elements ``a:b``."""
        if self.tol is None:
            return bool(np.array_equal(g, self.ref[a:b]))
        x = g.astype(np.float64)
        f = self.ref64[a:b]
        if self.finite:
            d = np.subtract(x, f)
            if bool(np.less_equal(np.abs(d, out=d), self.bound[a:b]).all()):
                return True
        return bool(np.allclose(x, f, rtol=self.tol, atol=self.tol))


class Part:
    """One process's share of a check: the ranks it ran, their operands drawn a chunk at a time,
    their results. ``what``: (operation, ranks in all, count, dtype, op, root, seed, chunk)."""

    def __init__(self, results: dict[int, Any], what: tuple):
        operation, n, count, dtype, op, root, seed, chunk = what
        self.chunk, self.op = chunk, get_op(op)
        dt = np.dtype(dtype)
        result = OPS[operation].result
        self.span = {"reduced": lambda r: (0, count), "root_reduced": lambda r: (0, count) if r == root else None,
                     "scattered": lambda r: (r * (count // n), (r + 1) * (count // n))}[result]
        self.ranks = sorted(results)
        self.problem: tuple | None = None
        """The first rank (in rank order) whose result has not the shape asked: ``("none", r)`` or
        ``("size", r, elements, expected)``."""
        self.got: dict[int, np.ndarray] = {}
        for r in self.ranks:
            want, g = self.span(r), results[r]
            if want is None:
                if g is not None:
                    self.problem = self.problem or ("none", r)
                continue
            g = np.asarray(g).reshape(-1)
            if g.size != want[1] - want[0]:
                self.problem = self.problem or ("size", r, g.size, want[1] - want[0])
            self.got[r] = g
        self.tol = _tolerance(dt, operation, op, n)
        self.draws = [input_chunks(np.random.default_rng([seed, r]), dt, op, count, chunk) for r in self.ranks]

    def fold(self) -> np.ndarray | None:
        """The next chunk of this part of the reference: its ranks' operands folded in rank order."""
        return reference_streamed(self.op, (next(d) for d in self.draws)) if self.draws else None

    def compare(self, i: int, ref: np.ndarray) -> int | None:
        """The first of this part's ranks whose result differs from ``ref``, the reference's
        elements from ``i`` on; None if none does."""
        j = i + len(ref)
        near = _Near(ref, self.tol)
        for r, g in self.got.items():
            lo, hi = self.span(r)
            a, b = max(i, lo), min(j, hi)
            if a < b and not near(g[a - lo:b - lo], a - i, b - i):
                return r
        return None


def problem_text(problem: tuple, ranks: list[str]) -> str:
    """The words of a result of the wrong shape (``Part.problem``)."""
    if problem[0] == "none":
        return f"rank {problem[1]} ({ranks[problem[1]]}) got a result, expected none"
    _, r, size, want = problem
    return f"rank {r} ({ranks[r]}): {size} elements in its result, {want} expected"


def differs_text(res, op: str, dtype: str, r: int) -> str:
    return f"{res.operation}/{res.algo} {op} {dtype}: rank {r} ({res.ranks[r]}) differs from numpy"


def combine(op: str, parts: list) -> np.ndarray:
    """The reference's chunk from the processes' parts (None: a process that ran no rank)."""
    return reference_streamed(get_op(op), (p for p in parts if p is not None))


# -- in each process, called by the main process (``Cluster.each_process``) --------------------------
def begin(token: str, what: tuple) -> tuple[int, tuple | None]:
    """Start checking this process's kept results: (how many ranks it ran, their first problem)."""
    part = _PARTS[token] = Part(_KEPT.pop(token, {}), what)
    return len(part.ranks), part.problem


def fold(token: str) -> np.ndarray | None:
    return _PARTS[token].fold()


def compare(token: str, i: int, ref: np.ndarray) -> int | None:
    return _PARTS[token].compare(i, ref)
