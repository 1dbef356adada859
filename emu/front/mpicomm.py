"""``emu mpirun``: the emulator's collective algorithms (``emu.nodes.collectives.Comm``) over a rank's
MPI library when a message of theirs may be long.

A collective whose messages are all at most ``host.eager_limit_bytes`` sends them as host messages
of the algorithm's own tags, as ``Comm`` does everywhere (one message each way, no envelope). One
that may send a longer message -- the bound is the bytes the call moves, the same on every rank, so
every rank decides alike -- carries every message of the call through the rank's point-to-point
layer instead (``emu.front.mpiserve``: an envelope, eager below the limit and rendezvous above it,
on a context of the communicator's own), as MPICH's collectives go over its point-to-point layer:
a long message then leaves only when its receiver is there, and a root's ``Bcast`` ends when its
data went. A nonblocking collective always goes this way (``always``), on another context: while
it runs, the rank's point-to-point traffic keeps moving (its waits progress the one layer).
"""

from __future__ import annotations

import numpy as np

from emu.nodes.collectives import Comm

ALGO_CTX = 0x40000000
"""Context bit of a communicator's collective algorithms' messages through the point-to-point layer."""
NBC_CTX = 0x20000000
"""Context bit of its nonblocking collectives' messages."""


class MpiComm(Comm):
    """``Comm`` whose algorithms' messages go through rank state ``st``'s point-to-point layer when
    the call may send a message over the eager limit (or always)."""

    def __init__(self, st, info, ctx: int, always: bool = False):
        super().__init__(st.host, [st.job.hosts[w] for w in info.ranks], comm_id=info.coll_id)
        self.st, self.info, self.ctx, self.always = st, info, ctx, always
        self.p2p = False
        """This call's messages go through the point-to-point layer."""
        self._pending: list = []
        """Its rendezvous sends not yet done (completed at the call's end, ``_sends_done``)."""

    async def _run(self, kind: str, algo, nbytes: int, *args):
        if not self.always:  # a blocking collective (or a communicator's making): the nonblocking ones called before it first
            await self.st.run_nbc()
        # (a rank with windows: every call through the point-to-point layer, whose waits serve the
        # one-sided requests of other ranks -- a passive target's lock must not wait for a barrier)
        self.p2p = self.always or nbytes > self.st.eager or self.st.rma is not None
        try:
            return await super()._run(kind, algo, nbytes, *args)
        finally:
            self.p2p = False

    def _ptag(self, step: int) -> int:
        return ((self._seq & 0xFFF) << 12) | self._tag(step) & 0xFFF

    async def send(self, rank: int, data, step: int) -> None:
        if not self.p2p:
            return await super().send(rank, data, step)
        if isinstance(data, np.ndarray):  # a copy: a rendezvous message's bytes go later
            data = np.ascontiguousarray(data).tobytes()
        req = await self.st.send(self.info, rank, self._ptag(step), bytes(data), ctx=self.ctx)
        self.st.reqs.pop(req.id, None)
        if not req.done:
            self._pending.append(req)

    async def recv(self, rank: int, dtype, step: int) -> np.ndarray:
        if not self.p2p:
            return await super().recv(rank, dtype, step)
        st = self.st
        req = await st.wait(await st.post_recv(self.info, rank, self._ptag(step), ctx=self.ctx))
        st.reqs.pop(req.id, None)
        return np.frombuffer(req.env.data, dtype).copy()

    async def _sends_done(self) -> None:
        if self._pending:
            reqs, self._pending = self._pending, []
            for r in reqs:
                await self.st.wait(r)
        await super()._sends_done()
