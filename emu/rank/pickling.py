"""``MPI.Pickle`` of the emulated ``mpi4py.MPI``: how the lowercase calls serialise Python objects;
``MPI.pickle`` (``PICKLE``) is the one they use, and a program may give it its own ``dumps``/``loads``.
As mpi4py's: the protocol is pickle's highest unless ``MPI4PY_PICKLE_PROTOCOL`` says another (None:
the ``dumps`` given decides), and ``dumps_oob`` keeps every buffer of at least ``THRESHOLD`` bytes
(``MPI4PY_PICKLE_THRESHOLD``, 256 KiB) out of band, as an ``MPI.buffer``, with protocol 5 at least."""

from __future__ import annotations

import os
import pickle

PROTOCOL = int(os.environ["MPI4PY_PICKLE_PROTOCOL"]) if os.environ.get("MPI4PY_PICKLE_PROTOCOL") else \
    pickle.HIGHEST_PROTOCOL
THRESHOLD = int(os.environ["MPI4PY_PICKLE_THRESHOLD"]) if os.environ.get("MPI4PY_PICKLE_THRESHOLD") else 1 << 18


class Pickle:
    """``MPI.Pickle``: how the lowercase calls serialise Python objects (``MPI.pickle`` is the one
    they use)."""

    __module__ = "mpi4py.MPI"

    def __init__(self, dumps=None, loads=None, protocol: int | None = None, threshold: int | None = None):
        self._dumps = pickle.dumps if dumps is None else dumps
        self._loads = pickle.loads if loads is None else loads
        self.PROTOCOL = protocol
        self.THRESHOLD = threshold

    @property
    def PROTOCOL(self) -> int | None:  # noqa: N802 -- mpi4py's name
        return self._proto

    @PROTOCOL.setter
    def PROTOCOL(self, protocol: int | None) -> None:  # noqa: N802
        self._proto = PROTOCOL if protocol is None and self._dumps is pickle.dumps else protocol

    @property
    def THRESHOLD(self) -> int:  # noqa: N802
        return self._thres

    @THRESHOLD.setter
    def THRESHOLD(self, threshold: int | None) -> None:  # noqa: N802
        self._thres = THRESHOLD if threshold is None else int(threshold)

    def dumps(self, obj) -> bytes:
        return self._dumps(obj) if self._proto is None else self._dumps(obj, self._proto)

    def loads(self, data):
        return self._loads(data)

    def dumps_oob(self, obj):
        from .mpibuf import buffer

        bufs: list = []

        def callback(ob) -> bool:
            b = buffer(ob)
            if b.nbytes >= self._thres:
                bufs.append(b)
                return False
            return True

        protocol = max(PROTOCOL if self._proto is None else self._proto, 5)
        return self._dumps(obj, protocol, buffer_callback=callback), bufs

    def loads_oob(self, data, buffers):
        return self._loads(data, buffers=buffers)


PICKLE = Pickle()
