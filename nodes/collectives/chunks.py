"""How a vector is cut into chunks, shared by the allreduce and the rooted collectives."""

from __future__ import annotations


def chunk_bounds(length: int, parts: int) -> list[int]:
    """Boundaries of ``parts`` near-equal chunks (the first ``length % parts`` one element longer)."""
    q, r = divmod(length, parts)
    out = [0]
    for i in range(parts):
        out.append(out[-1] + q + (1 if i < r else 0))
    return out
