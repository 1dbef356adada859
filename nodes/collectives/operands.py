"""A rank's operand in a collective test: reproducible random values drawn from the seed and the
rank, in the rank's application (``run.collective_app``) and again, a chunk at a time, by the check of
its result (``check``)."""

from __future__ import annotations

import numpy as np


def make_input(seed: int, rank: int, count: int, dtype: str, op: str, size: int, chunk: int = 1 << 20) -> np.ndarray:
    """Rank ``rank``'s operand: reproducible random values suited to the operator and type."""
    rng = np.random.default_rng([seed, rank])
    dt = np.dtype(dtype)
    shape = (size, count) if op == "alltoall" else (count,)
    if op in ("land", "lor", "lxor"):
        return (rng.random(shape) < 0.6).astype(dt) * rng.integers(1, 3, shape).astype(dt)
    # drawn in chunks into the result: no float64 (or whole-size) temporary of a large operand. The
    # chunk is a multiple of 4 elements, so that the draws (numpy buffers 32-bit words for 8- and
    # 16-bit integers) are the very ones a single call makes (tested)
    out = np.empty(shape, dt)
    flat = out.reshape(-1)
    for i, part in enumerate(input_chunks(rng, dt, op, flat.size, chunk)):
        flat[i * chunk:i * chunk + len(part)] = part
    return out


def input_chunks(rng: np.random.Generator, dt: np.dtype, op: str, n: int, chunk: int = 1 << 20):
    """The ``n`` values of an operand (not of the logical operators), ``chunk`` at a time, as
    :func:`make_input` draws them from ``rng``."""
    if dt.kind == "f":
        lo, hi = (0.5, 1.5) if op == "prod" else (-1.0, 1.0)
    else:
        info = np.iinfo(dt)
    for i in range(0, n, chunk):
        j = min(n, i + chunk)
        if dt.kind == "f":
            yield rng.uniform(lo, hi, j - i).astype(dt, copy=False)
        else:
            yield rng.integers(info.min, info.max, j - i, dtype=dt, endpoint=True)
