"""Spec 02's vocabulary, shared by the plans (``plan``), the hop counter (``counter``) and the
planner (``planner``): the scheme and multicast names, the step codes, the checks of a group shape,
and the boxes (groups) a grid is cut into with their centres (step A's IN placement)."""

from __future__ import annotations

from dataclasses import dataclass

from emu.config import ConfigError
from emu.topologies.grid import Grid

ALGOS = ("all_at_once", "tree", "nc", "nc_every", "nc_recursive", "combine", "all_at_once_coded")
NAMED = {"all_at_once_coded": ("nc", "all_at_once")}
"""Schemes named for what the source compares: (the coded scheme, the multicast of its steps B, D, E).
"All-at-once coded" is ``nc`` whose multicasts inside (B, D, E) are all-at-once."""
MCASTS = ("tree", "all_at_once")
BASELINES = ("all_at_once", "tree")
"""The schemes without groups (no shape)."""


class Step:
    """Step codes in the coding header (spec 02's letters)."""

    BASE = 0  # a baseline's unicast (all-at-once, tree)
    B = 1     # intra-group broadcast
    D = 2     # inter-IN multicast of encoded packets
    E = 3     # intra-group delivery of encoded packets
    F = 4     # inter-group unicast of plain packets
    NAMES = {0: "base", 1: "B", 2: "D", 3: "E", 4: "F"}
    VC = {0: 0, 1: 0, 4: 1, 2: 2, 3: 3}
    """Each step its own VC: four steps, four VCs (spec 02's deadlock freedom on meshes)."""


def check_names(grid: Grid, algo: str, mcast: str, sources: tuple[int, ...] | None) -> None:
    """Refuse an unknown scheme or multicast, or sources that are not distinct nodes of ``grid``."""
    if algo not in ALGOS:
        raise ConfigError(f"coding scheme {algo!r} is not one of {', '.join(ALGOS)}")
    if mcast not in MCASTS:
        raise ConfigError(f"multicast {mcast!r} is not one of {', '.join(MCASTS)}")
    if sources is not None:
        if not sources or len(set(sources)) != len(sources) or not all(0 <= s < grid.size for s in sources):
            raise ConfigError(f"sources must be distinct nodes within 0..{grid.size - 1}")


def settle(grid: Grid, algo: str, shape, inner=None) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """A coded scheme's group shape, checked, and its inner shape (``nc_recursive``: the one given or
    the shape halved, checked against the shape; other schemes: as given)."""
    check_shape(grid, shape)
    if algo == "nc_recursive":
        inner = inner or halved(shape)
        check_shape(Grid(max(shape), len(shape), False), inner, within=shape)
    return tuple(shape), inner


def check_shape(grid: Grid, shape, within=None) -> None:
    box = within or (grid.k,) * grid.n
    if len(shape) != len(box) or any(not isinstance(s, int) or s < 1 or b % s for s, b in zip(shape, box)):
        raise ConfigError(f"group shape {'x'.join(map(str, shape))} does not tile {'x'.join(map(str, box))}: "
                          f"each side must divide {'x'.join(map(str, box))}")
    m = 1
    for s in shape:
        m *= s
    if m < 2 or tuple(shape) == tuple(box):
        raise ConfigError(f"group shape {'x'.join(map(str, shape))}: a group needs 2 nodes or more, and there must "
                          "be 2 groups or more")


def halved(shape) -> tuple[int, ...]:
    d = max(range(len(shape)), key=lambda i: shape[i])
    if shape[d] % 2:
        raise ConfigError(f"nc_recursive: cannot halve group shape {'x'.join(map(str, shape))}; give inner=")
    return tuple(s // 2 if i == d else s for i, s in enumerate(shape))


# -- groups ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Box:
    """A box of the grid: per dimension, its coordinates in order."""

    axes: tuple[tuple[int, ...], ...]

    def nodes(self, grid: Grid) -> list[int]:
        """Its nodes in rank order (dimension 0 fastest)."""
        out = [()]
        for ax in self.axes:
            out = [c + (x,) for x in ax for c in out]
        return sorted(grid.index(c) for c in out)

    def centre_node(self, grid: Grid, centre: tuple[float, ...]) -> tuple[int, ...]:
        return tuple(min(ax, key=lambda x, c=c: (abs(x - c), x)) for ax, c in zip(self.axes, centre))


def tiles(box: Box, shape: tuple[int, ...]) -> list[Box]:
    """``box`` cut into boxes of ``shape``, group index in dimension-0-fastest order."""
    per = [[ax[i:i + s] for i in range(0, len(ax), s)] for ax, s in zip(box.axes, shape)]
    out = [()]
    for parts in per:
        out = [c + (p,) for p in parts for c in out]
    return [Box(tuple(c)) for c in out]


def box_centre(box: Box, grid: Grid, top: bool) -> tuple[float, ...]:
    if top:  # the network's centre: (k - 1) // 2, the lower coordinate on a tie
        return tuple(float((grid.k - 1) // 2) for _ in box.axes)
    return tuple(float(ax[(len(ax) - 1) // 2]) for ax in box.axes)
