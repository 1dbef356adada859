"""Compare collective algorithms across message sizes and node counts: a table and a PNG plot."""

from __future__ import annotations

from dataclasses import dataclass

from emu.nodes.collectives.run import check_results, run_collective


@dataclass(frozen=True)
class SweepRow:
    topology: str
    requested_bytes: int
    nodes: int
    operation: str
    algo: str
    size_bytes: int
    completion_ns: int
    frames: int
    bytes: int
    hop_count: int
    cpu_ns_max: int


async def sweep(specs: list[str], sizes: list[int], algos: list[str], operation: str = "allreduce",
                dtype: str = "float32", seed: int = 0, progress=None) -> list[SweepRow]:
    """Every (topology, size, algorithm); results are checked against numpy on the way."""
    import numpy as np

    from .cluster import Cluster

    rows = []
    itemsize = np.dtype(dtype).itemsize
    for spec in specs:
        async with Cluster(spec, seed=seed) as net:
            for size in sizes:
                for algo in algos:
                    count = max(1, size // itemsize)
                    res = await run_collective(net, operation, count=count, dtype=dtype, algo=algo, seed=seed)
                    check_results(res, count, dtype, "sum", 0, seed)
                    rows.append(SweepRow(spec, size, len(net.hosts), operation, algo, count * itemsize, res.completion_ns,
                                         res.frames, res.bytes, res.hop_count, res.cpu_ns_max))
                    if progress:
                        progress(rows[-1])
    return rows


def plot(rows: list[SweepRow], path: str, title: str = "") -> None:
    """Completion time against message size, one panel per node count, one line per algorithm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = sorted({r.nodes for r in rows})
    algos = sorted({r.algo for r in rows})
    fig, axes = plt.subplots(1, len(nodes), figsize=(4.5 * len(nodes), 4), squeeze=False, sharey=True)
    for ax, n in zip(axes[0], nodes):
        for a in algos:
            pts = sorted((r.size_bytes, r.completion_ns / 1000) for r in rows if r.nodes == n and r.algo == a)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=a)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{n} nodes ({next(r.topology for r in rows if r.nodes == n)})", fontsize=9)
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("completion time (us, virtual)")
    axes[0][-1].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
