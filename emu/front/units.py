"""Figures in the units the field reports: nccl-tests' algorithm and bus bandwidth.

nccl-tests (``src/*.cu``, each ``*GetBw``) divides the operation's *size* -- as it prints it in its
``size`` column -- by the time for the algorithm bandwidth, and multiplies that by a factor for the
bus bandwidth, so that a figure near the link rate means the links are busy whatever the number of
ranks. With this tool's ``size_bytes`` (bytes per rank; alltoall: per destination):

=================  ==========================  ==================
operation          nccl-tests' size            bus factor
=================  ==========================  ==================
allreduce          size_bytes                  2 (n - 1) / n
reduce_scatter     size_bytes (the input)      (n - 1) / n
allgather          n x size_bytes (the output) (n - 1) / n
alltoall           n x size_bytes              (n - 1) / n
bcast, reduce      size_bytes                  1
=================  ==========================  ==================

GB/s are 10^9 bytes per second of virtual time: bytes per virtual ns.
"""

from __future__ import annotations

from typing import Any

SIZE_TIMES_RANKS = {"allgather", "alltoall"}
BUS_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
              "allgather": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
              "bcast": lambda n: 1.0, "reduce": lambda n: 1.0}


def nccl_bandwidth(row: dict[str, Any]) -> tuple[float, float] | None:
    """(algbw, busbw) in GB/s of a collective's row, as nccl-tests computes them; None when the row
    is not one of the operations above, or lacks its size, ranks or completion."""
    name, size, n, t = row.get("name"), row.get("size_bytes"), row.get("ranks"), row.get("completion_ns")
    if name not in BUS_FACTOR or not isinstance(size, (int, float)) or not isinstance(n, int) or n < 1 \
            or not isinstance(t, (int, float)) or t <= 0:
        return None
    algbw = size * (n if name in SIZE_TIMES_RANKS else 1) / t
    return algbw, algbw * BUS_FACTOR[name](n)
