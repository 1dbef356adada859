"""Partitioned point-to-point communication (MPI 4.0 §4) of the emulated ``mpi4py.MPI``: ``Psend_init`` /
``Precv_init`` and their requests' ``Pready``, ``Pready_range``, ``Pready_list`` and ``Parrived``.

The message is the whole buffer, carried as one: the send goes (``Isend``) once every partition is
marked ready since its ``Start``; the receive is posted (``Irecv``) at its ``Start`` and every partition
has arrived when that message has (``Parrived`` looks without completing the request). MPI lets an
implementation do that; it moves no byte before the last ``Pready``, as the slowest legal one."""

from __future__ import annotations

from .comm import Prequest
from .consts import CONSTANTS
from .types import Exception


class PartRequest(Prequest):
    """A partitioned send or receive (persistent: ``Start`` ... ``Wait`` again; ``Free`` ends it)."""

    @classmethod
    def _part(cls, start, partitions: int, send: bool) -> "PartRequest":
        if int(partitions) < 1:
            raise Exception(CONSTANTS["ERR_ARG"], f"MPI_ERR_ARG: invalid number of partitions {partitions}")
        req = cls._persistent(start)
        req._h.parts, req._h.send, req._h.ready = int(partitions), send, None
        return req

    def _h_ok(self):
        if self._h is None:
            raise Exception(CONSTANTS["ERR_REQUEST"], "MPI_ERR_REQUEST: invalid request (REQUEST_NULL)")
        return self._h

    def Start(self) -> None:
        h = self._h_ok()
        if h.send:
            h.ready = set()  # the send goes when every partition is ready
        else:
            super().Start()

    def _partition(self, i: int) -> int:
        h = self._h_ok()
        i = int(i)
        if not 0 <= i < h.parts:
            raise Exception(CONSTANTS["ERR_ARG"], f"MPI_ERR_ARG: invalid partition {i} (the request has {h.parts})")
        return i

    def Pready(self, partition: int) -> None:
        self.Pready_list([partition])

    def Pready_range(self, partition_low: int, partition_high: int) -> None:
        self.Pready_list(range(int(partition_low), int(partition_high) + 1))

    def Pready_list(self, partitions) -> None:
        h = self._h_ok()
        if not h.send or h.ready is None:
            raise Exception(CONSTANTS["ERR_REQUEST"], "MPI_ERR_REQUEST: Pready needs a started partitioned send")
        h.ready.update(self._partition(i) for i in partitions)
        if len(h.ready) == h.parts:
            h.ready = None
            super().Start()

    def Parrived(self, partition: int) -> bool:
        h = self._h_ok()
        self._partition(partition)
        if h.send:
            raise Exception(CONSTANTS["ERR_REQUEST"], "MPI_ERR_REQUEST: Parrived needs a partitioned receive")
        return bool(h.inactive or h.done or self.Get_status())


def psend_init(comm, buf, partitions: int, dest: int, tag: int = 0, info=None) -> PartRequest:
    return PartRequest._part(lambda: comm.Isend(buf, dest, tag), partitions, True)


def precv_init(comm, buf, partitions: int, source: int, tag: int = 0, info=None) -> PartRequest:
    return PartRequest._part(lambda: comm.Irecv(buf, source, tag), partitions, False)
