"""What every plot of ``emu report`` shares: saving a figure as PNG and SVG."""

from __future__ import annotations

import os


def save(fig, out: str, stem: str) -> list[str]:
    """Write ``fig`` as ``out/stem.png`` and ``out/stem.svg``, close it; returns the paths."""
    import matplotlib.pyplot as plt

    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(out, f"{stem}.{ext}")
        fig.savefig(p, dpi=120)
        paths.append(p)
    plt.close(fig)
    return paths
