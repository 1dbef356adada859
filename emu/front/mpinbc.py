"""``emu mpirun``: nonblocking and persistent collectives, emulator side.

``Ibcast``, ``Iallreduce``, ... (and a persistent collective's ``Start``) queue the call on its rank
and answer with a request at once. A rank runs its queued collectives, in the order it called them,
when it would otherwise wait: when a ``Wait`` or ``Test`` names one of them, when any of its calls
waits for a message (``RankState.progress``), and before a blocking collective (MPI's rule: every
rank calls a communicator's collectives, blocking or not, in the same order, so every rank runs them
in that order). They run by the same algorithms as the blocking calls, with every message through
the point-to-point layer on a context of their own (``emu.front.mpicomm.NBC_CTX``): while one
runs, the rank's point-to-point traffic keeps moving -- a rendezvous send posted before it, a
receive another rank's send waits for -- so a collective run inside a rank's blocking call cannot
deadlock with the point-to-point traffic it overtook. This is a progress model MPI allows (progress
inside MPI calls); it does not overlap a collective with the rank's computation, as MPICH's does not
without an asynchronous progress thread either.
"""

from __future__ import annotations

import json
import struct

from .mpiserve import ANY_SOURCE, ANY_TAG, Env, RankState

LEN = struct.Struct("!I")


def encode(out: dict, data) -> bytes:
    """A finished collective's answer (its head and bytes) as the request's data for ``Wait``."""
    head = json.dumps(out).encode()
    return b"".join((LEN.pack(len(head)), head, bytes(data)))


async def run_pending(st: RankState) -> None:
    """Run the rank's queued nonblocking collectives, oldest first."""
    if st.nbc_running:
        return
    st.nbc_running = True
    try:
        while st.nbc:
            req, info, fn, head, payload = st.nbc.pop(0)
            out, data = await fn(st, info, head, payload)
            blob = encode(out, data)
            req.env = Env(info.ctx, ANY_SOURCE, ANY_TAG, blob, -1, size=len(blob))
            req.done = True
    finally:
        st.nbc_running = False


def start(st: RankState, fn, head: dict, payload) -> dict:
    """Queue a nonblocking collective (``fn``: the blocking call's ``emu.front.mpicoll`` function):
    its request's id."""
    info = st.comm(head["ctx"])
    req = st.new_req("coll", ctx=info.ctx)
    st.nbc.append((req, info, fn, head, bytes(payload)))
    st.nbc_runner = run_pending
    return {"req": req.id}
