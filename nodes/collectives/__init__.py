"""Host software collectives: the MPI-like baseline every offload is measured against."""

from .comm import Comm
from emu.reduce import DTYPES, OPS, Op, get_op, reference
from .select import ALGORITHMS, choose, register

__all__ = ["ALGORITHMS", "Comm", "DTYPES", "OPS", "Op", "choose", "get_op", "reference", "register"]
