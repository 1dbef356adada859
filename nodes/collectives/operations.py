"""The collective operations: the one list every other part reads (algorithm tables, the runner,
the oracle, the dry-run counter, the named tests, the CLI's help).

Each operation says what it takes and what each rank gets, so that code elsewhere asks the table
instead of listing names again. Where each can be offloaded, each offload says
(``emu.nodes.collectives.offloads``: ``Offload.operations``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Operation:
    name: str
    summary: str
    """One line, as ``emu run --help`` shows it."""
    rooted: bool = False
    """Takes ``root`` (``--root``)."""
    reduces: bool = False
    """Combines data with an operator (``--op``)."""
    result: str = "same"
    """What rank r gets: ``same`` (one array, the same everywhere), ``reduced`` (the reduction),
    ``root_reduced`` (the reduction at the root only), ``gathered`` (every rank's data, stacked),
    ``scattered`` (part r of the reduction), ``exchanged`` (part r of every rank's data), ``none``."""
    per_rank_operand: bool = False
    """Its algorithms see the operand of every rank at once (message sizes scale with the ranks)."""


OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    Operation("allreduce", "Every rank gets the reduction of all ranks' data (host software, --offload nic, hw "
              "or switch)", reduces=True, result="reduced"),
    Operation("reduce", "The root gets the reduction of all ranks' data (host software, --offload nic or switch)",
              rooted=True, reduces=True, result="root_reduced"),
    Operation("bcast", "The root's data to every rank (host software, --offload hw or switch)", rooted=True),
    Operation("barrier", "No rank leaves before every rank has entered (host software, --offload hw or switch)",
              result="none"),
    Operation("allgather", "Every rank gets every rank's data", result="gathered", per_rank_operand=True),
    Operation("reduce_scatter", "The reduction, split: rank r gets part r", reduces=True, result="scattered"),
    Operation("alltoall", "A part of its own data from every rank to every rank", result="exchanged",
              per_rank_operand=True),
    Operation("mcast", "One-to-all multicast by unicasts (the coded broadcast's baseline)", rooted=True),
    Operation("mcast_all", "All-to-all multicast by unicasts (the coded broadcast's baseline)", result="gathered",
              per_rank_operand=True),
)}


def rooted() -> list[str]:
    return [n for n, op in OPERATIONS.items() if op.rooted]
