"""``MPI.Pickle`` of the emulated ``mpi4py.MPI``: how the lowercase calls serialise Python objects;
``MPI.pickle`` (``PICKLE``) is the one they use, and a program may give it its own ``dumps``/``loads``."""

from __future__ import annotations

import pickle


class Pickle:
    """``MPI.Pickle``: how the lowercase calls serialise Python objects (``MPI.pickle`` is the one
    they use)."""

    __module__ = "mpi4py.MPI"

    def __init__(self, dumps=None, loads=None, protocol: int | None = None, threshold: int | None = None):
        self._dumps = dumps or pickle.dumps
        self._loads = loads or pickle.loads
        self.PROTOCOL = pickle.HIGHEST_PROTOCOL if protocol is None else protocol
        self.THRESHOLD = 1 << 18 if threshold is None else threshold

    def dumps(self, obj) -> bytes:
        if self._dumps is pickle.dumps:
            return self._dumps(obj, self.PROTOCOL)
        return self._dumps(obj)

    def loads(self, data):
        return self._loads(data)

    def dumps_oob(self, obj):
        bufs = []
        data = self._dumps(obj, self.PROTOCOL, buffer_callback=bufs.append) if self.PROTOCOL >= 5 else self.dumps(obj)
        return data, [b.raw() for b in bufs]

    def loads_oob(self, data, buffers):
        return self._loads(data, buffers=buffers)



PICKLE = Pickle()
