"""``emu mpirun``: ports and names (MPI 3.1 §10.4), emulator side -- ``Open_port``, ``Comm.Accept``,
``Comm.Connect``, ``Comm.Join``, ``Publish_name``/``Lookup_name``.

A port is a name the job's process manager hands out (as MPICH's hydra does: out of band, no frame
on the fabric): ``emu-port:<host>:<world rank>:<id>``, its id unique in the job. The connection
itself crosses the fabric, as MPICH's does: the connecting group's root sends a request to the
port's owner on the library's port context (``PORT_CTX``, tagged with the port's id) carrying its
group's world ranks; the accepting root, which waits for one with a receive posted there, answers
with its own group and a token naming the connection; each root then broadcasts what it got to its
group (``Bcast`` on the group's collective context), and every member of both groups makes the
intercommunicator of the token (``Job.context``: the same context on every member). A request that
comes before the ``Accept`` waits in the owner's unexpected queue, as in MPI; an ``Accept`` no one
connects to waits (the deadlock detector says so when every rank waits).

The name service (``Publish_name`` ...) is the process manager's too: a table of the job.
"""

from __future__ import annotations

import json

from .mpicoll import bcast_bytes
from .mpicomms import InterInfo, _answer, _make
from .mpiserve import ANY_SOURCE, CommInfo, MpiError, RankState

PORT_CTX = 0x7FFFFFFF
"""Context of the connection requests and answers (no communicator has it: ``Job.context`` counts up
from 2)."""
ERR_OTHER, ERR_ARG, ERR_ROOT, ERR_NAME, ERR_PORT, ERR_SERVICE = 15, 12, 7, 33, 38, 41
PREFIX = "emu-port:"


class Ports:
    """The job's open ports and published names (its process manager's tables)."""

    def __init__(self):
        self.next_id = 1
        self.open: dict[str, int] = {}
        """Port name -> world rank of the process that opened it."""
        self.names: dict[str, str] = {}
        """Service name -> port name."""
        self.accepted = 0
        self.joins: dict[str, tuple[int, int]] = {}
        """``Comm.Join``: the socket's key -> (world rank, tag) of the side that called first."""


def ports_of(st: RankState) -> Ports:
    p = getattr(st.job, "ports", None)
    if p is None:
        p = st.job.ports = Ports()
    return p


def _parse(name) -> tuple[int, int] | None:
    """(owner's world rank, port id) of a port name this job handed out, else None."""
    if not isinstance(name, str) or not name.startswith(PREFIX):
        return None
    parts = name[len(PREFIX):].rsplit(":", 2)
    try:
        return int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        return None


async def h_open_port(st: RankState, head: dict, payload):
    ports = ports_of(st)
    name = f"{PREFIX}{st.host.name}:{st.rank}:{ports.next_id}"
    ports.next_id += 1
    ports.open[name] = st.rank
    return {"port": name}, b""


async def h_close_port(st: RankState, head: dict, payload):
    ports_of(st).open.pop(head.get("port"), None)  # as MPICH: closing a closed port is no error
    return {}, b""


def _world(st: RankState) -> CommInfo:
    """The world, addressed on the port context (a message's source is the sender's world rank)."""
    return CommInfo(PORT_CTX, list(range(len(st.job.hosts))), st.rank)


async def accept_at(st: RankState, tag: int, ranks: list[int]) -> dict:
    """Wait for a connection request on the port context with ``tag``; answer it with ``ranks`` and a
    new token: the remote group's ranks and the token."""
    ports, world = ports_of(st), _world(st)
    req = await st.post_recv(world, ANY_SOURCE, tag, ctx=PORT_CTX)
    await st.wait(req)
    st.reqs.pop(req.id, None)
    theirs = json.loads(req.env.data)
    token = f"{st.rank}.{ports.accepted}"
    ports.accepted += 1
    sreq = await st.send(world, req.env.src, tag, json.dumps({"ranks": ranks, "token": token}).encode(), ctx=PORT_CTX)
    await st.wait(sreq)
    st.reqs.pop(sreq.id, None)
    return {"ranks": theirs["ranks"], "token": token}


async def connect_to(st: RankState, owner: int, tag: int, ranks: list[int]) -> dict:
    """Send a connection request with ``ranks`` to world rank ``owner`` on the port context with ``tag``
    and wait for its answer: the remote group's ranks and the token."""
    world = _world(st)
    rreq = await st.post_recv(world, owner, tag, ctx=PORT_CTX)
    sreq = await st.send(world, owner, tag, json.dumps({"ranks": ranks}).encode(), ctx=PORT_CTX)
    await st.wait(sreq)
    await st.wait(rreq)
    for r in (sreq, rreq):
        st.reqs.pop(r.id, None)
    return json.loads(rreq.env.data)


def make_intercomm(st: RankState, local: list[int], rank: int, theirs: dict) -> dict:
    remote = [int(r) for r in theirs["ranks"]]
    if set(remote) & set(local):
        raise MpiError("Accept/Connect: the two groups share processes (a process connected to itself)", ERR_OTHER)
    return _answer(_make(st, ("port", theirs["token"]), local, remote, rank))


async def _connection(st: RankState, head: dict, accept: bool) -> dict:
    info = st.comm(head["ctx"])
    if isinstance(info, InterInfo):
        raise MpiError(f"{'Accept' if accept else 'Connect'}: the communicator must be an intracommunicator", 5)
    root = int(head.get("root", 0))
    if not 0 <= root < len(info.ranks):
        raise MpiError(f"invalid root {root} (the communicator has {len(info.ranks)})", ERR_ROOT)
    ports = ports_of(st)
    got = None
    if info.rank == root:
        name = head.get("port")
        port_at = _parse(name)
        if accept:
            if port_at is None or ports.open.get(name) != st.rank:
                raise MpiError(f"Accept: {name!r} is not a port this process opened (MPI.Open_port) and has not "
                               "closed", ERR_PORT)
            got = json.dumps(await accept_at(st, port_at[1], info.ranks)).encode()
        else:
            if port_at is None or name not in ports.open:
                raise MpiError(f"Connect: no open port {name!r} (a name MPI.Open_port gave, or MPI.Lookup_name "
                               "found)", ERR_PORT)
            got = json.dumps(await connect_to(st, port_at[0], port_at[1], info.ranks)).encode()
    if len(info.ranks) > 1:
        got = await bcast_bytes(st, info, root, got)
    return make_intercomm(st, info.ranks, info.rank, json.loads(got))


async def h_join(st: RankState, head: dict, payload):
    """``Comm.Join(fd)``: the two processes at the ends of a socket name it by the same ``key`` (the rank
    makes it of the socket's two addresses); the first to call waits for the other's request, as an
    ``Accept`` on a port of its own, the second sends it, as a ``Connect``."""
    ports, key = ports_of(st), str(head["key"])
    first = ports.joins.pop(key, None)
    if first is None:
        tag = ports.next_id
        ports.next_id += 1
        ports.joins[key] = (st.rank, tag)
        theirs = await accept_at(st, tag, [st.rank])
    else:
        theirs = await connect_to(st, first[0], first[1], [st.rank])
    return make_intercomm(st, [st.rank], 0, theirs), b""


async def h_accept(st: RankState, head: dict, payload):
    """``Intracomm.Accept(port_name, info, root)``: collective over the communicator."""
    return await _connection(st, head, True), b""


async def h_connect(st: RankState, head: dict, payload):
    """``Intracomm.Connect(port_name, info, root)``: collective over the communicator."""
    return await _connection(st, head, False), b""


async def h_publish(st: RankState, head: dict, payload):
    ports, service, port = ports_of(st), str(head["service"]), str(head["port"])
    if service in ports.names:
        raise MpiError(f"Publish_name: the service {service!r} is already published", ERR_NAME)
    ports.names[service] = port
    return {}, b""


async def h_unpublish(st: RankState, head: dict, payload):
    ports, service = ports_of(st), str(head["service"])
    if service not in ports.names:
        raise MpiError(f"Unpublish_name: no service {service!r} is published", ERR_SERVICE)
    del ports.names[service]
    return {}, b""


async def h_lookup(st: RankState, head: dict, payload):
    ports, service = ports_of(st), str(head["service"])
    if service not in ports.names:
        raise MpiError(f"Lookup_name: no service {service!r} is published", ERR_NAME)
    return {"port": ports.names[service]}, b""


HANDLERS = {"open_port": h_open_port, "close_port": h_close_port, "accept": h_accept, "connect": h_connect,
            "join": h_join, "publish_name": h_publish, "unpublish_name": h_unpublish, "lookup_name": h_lookup}
