"""One UDP socket per process, with every element's records of a window batched per destination.

An element's link layer (``emu.link``) turns the frames a port sends in one window into a group of
``EmuLink`` records (one per frame, its own sequence number, time stamp and window), and keeps that
group for retransmission (one bytes object: each record's header, then the frame). Without batching every group is one datagram from the element's own socket:
in a fabric where a port sends about one frame per window, that is one ``sendto`` and one
``recvfrom`` per frame, and the two system calls cost more than everything else a crossing does.

With a :class:`Batch` (the default socket path: ``emu.build.build_domain`` makes one per process)
the elements of a process share one socket. While the process runs a window, the groups its
elements send are held per destination socket and gathered into datagrams of up to ``MAX_DATAGRAM``
bytes (the kernel joins the parts: ``sendmsg``), sent when the window's elements have run (or when
one fills up): one ``sendmsg`` per destination process per window, whatever the number of links. Every frame still crosses a real UDP
socket, as bytes its sender built and its receiver decodes; only the number of datagrams changes.

The receiving side splits a datagram into its records and hands each to the element at the end of
its link -- the same per-link logic as an element's own socket (``Element.on_datagram``): the
sequence number decides accept / gap (one NACK, go-back-N from the sender's retained groups) /
duplicate. A record is accepted only if its datagram came from the socket that owns the other end of
its link (the peer process's socket: ``wrong_sender`` counts the rest, record by record); off
loopback every datagram ends with the keyed tag of ``emu.wire.outer``, checked before any record of
it is read. Errors that belong to no element (a datagram with a bad tag, no emulator header, another
cluster's id, a link that ends nowhere in this process, an unknown record kind) are counted in the
process's own ``stats`` beside its UDP datagram counts (``Cluster.process_stats``); the run goes on. A record stamped before what its element
has already processed is a buggy peer's or a forger's, not ours: counted (``late``) and dropped, its
place left open for the genuine one (only a frame handed over in memory raises ``CausalityError``).

Where the system allows it (Linux 5.4 or later, loopback), the process's socket has beside it one socket
connected to each peer socket (``emu.batch_conn``): the kernel hands each peer's datagrams to the socket
connected to it, read without formatting a source address, and everything else -- a stranger's -- to
the process's socket, read and counted as ever.

Frames a process sends to itself are read back at once when more than ``SELF_DRAIN_BYTES`` are
waiting in the socket (the process is the only reader of its socket and does not read it while a
window runs), so a big window does not overflow the receive buffer; the link layer's recovery
still covers any datagram that goes missing.
"""

from __future__ import annotations

import heapq
import hmac
import logging
import select
import socket
import time

import trio

from . import native
from .batch_conn import CONNECTED, open_connected, read_connected, read_own, reuse_port
from .element_const import INF, RX_FLAGS
from .element_links import read_datagrams, send_unsent
from .link import MAX_DATAGRAM
from .wire.outer import MAGIC, OUTER, OUTER_LEN, TAG_LEN, VERSION, LinkKind, tagger

log = logging.getLogger(__name__)

RCVBUF = 4 << 20
RCVBUF_FORCE = 32 << 20
"""Where the system allows it (``SO_RCVBUFFORCE``: root or CAP_NET_ADMIN), the receive buffer of the
process's one socket is this big: it takes what every other process sends here while this one runs a
window, which per-element sockets used to share out."""
SELF_DRAIN_BYTES = 1 << 20
"""Bytes sent to this process's own socket after which it is read before anything more is sent."""
_NACK, _LAST = int(LinkKind.NACK), int(LinkKind.DATA_POOL)
IOV_MAX = 1024
_SENDMSG = hasattr(socket.socket, "sendmsg")
"""The most buffers one ``sendmsg`` takes (Linux's UIO_MAXIOV): a datagram of more parts is joined here."""
PROCESS_DROPS = ("bad_tag", "truncated", "bad_magic", "foreign_cluster", "bad_link")
"""What the process's socket drops before any element is known (``Batch.drops``)."""

def _parts(items: list) -> list[bytes]:
    """The parts of a datagram given as groups (each a bytes, or a list of parts), in order."""
    return [p for g in items for p in (g if g.__class__ is list else (g,))]


def _count(inp, g: list, rn: int, rb: int, rts: int) -> None:
    """``rn`` frames of ``rb`` bytes, the earliest stamped ``rts``, accepted on one link: onto its
    input port's counters and its element's group (frames, earliest stamp) of the datagram."""
    inp.rx_frames += rn
    inp.rx_bytes += rb
    g[0] += rn
    if rts < g[1]:
        g[1] = rts


class Batch:
    """The socket of one process (a domain) and the datagrams its elements send in a window."""

    def __init__(self, bind: str = "127.0.0.1", tag_key: bytes | None = None, cluster_id: int = 0):
        self.cluster_id = cluster_id
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, RCVBUF)
            force = getattr(socket, "SO_RCVBUFFORCE", None)
            if force is not None:
                try:
                    self.sock.setsockopt(socket.SOL_SOCKET, force, RCVBUF_FORCE)
                except OSError:  # not permitted: RCVBUF (capped by net.core.rmem_max)
                    pass
            self.sock.bind((bind, 0))
            if CONNECTED and tag_key is None:  # (sockets connected to its peers beside it: emu.batch_conn)
                reuse_port(self.sock)  # (after the bind: see ``batch_conn.reuse_port``)
            self.sock.setblocking(False)
        except BaseException:
            self.sock.close()
            raise
        self.addr: tuple[str, int] = self.sock.getsockname()
        self._fd = self.sock.fileno()
        # read back what this process sends itself well before the receive buffer it got is full
        # (the kernel reports twice the size asked for; without SO_RCVBUFFORCE it may be far below RCVBUF)
        self.self_drain = min(SELF_DRAIN_BYTES, self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 4)
        self._tag = tagger(tag_key) if tag_key is not None else None
        self.holding = False
        """A window is running: what the elements send waits for ``flush``."""
        self.pending: dict[tuple[str, int], list] = {}
        """Destination socket -> [record groups, their bytes]."""
        self.unsent: list[tuple[bytes, tuple[str, int]]] = []
        self._to_self = 0
        """Bytes sent to this socket since it was last read."""
        self._self_unread = 0
        """Datagrams sent to this socket since it was last read (``drain_own``)."""
        self.in_owner: dict = {}
        """Link id -> (element, input port) for every link that ends in this process."""
        self.in_list: list = []
        """``in_owner`` as a list by link id (None: no such link here), for the compiled core."""
        self.out_owner: dict = {}
        """Link id -> (element, output port) for every link that starts here (its NACKs come here)."""
        self.domain = None
        """The domain the elements live in (woken when frames were accepted)."""
        self.udp_sent = 0
        self.udp_received = 0
        """UDP datagrams this socket sent and read (an element counts its record groups: ``datagrams_sent``)."""
        self.drops = dict.fromkeys(PROCESS_DROPS, 0)
        """Input dropped that belongs to no element of the process, by why."""
        self.connected: list[tuple[socket.socket, tuple[str, int]]] = []
        """(socket connected to a peer socket, its address) beside ``sock`` (``connect_peers``)."""
        self._own = None
        """(connected socket, address) that reads what this process sends itself (None: ``sock`` does)."""
        self._early: list = []
        """(data, true sender) queued on a connected socket before its connect (``open_connected``),
        handed to ``on_datagram`` by the next ``drain``."""
        self._into = memoryview(bytearray(65536))
        """The buffer every datagram is read into while the compiled core reads their records (``drain``):
        no bytes object made, and let go, per datagram -- ``on_datagram`` copies what it keeps."""
        self._ep = None
        """An epoll of ``sock`` and the connected sockets, which ``serve`` waits on (None: ``sock`` only);
        made now, as ``serve`` starts before the peers are known."""
        if CONNECTED and tag_key is None:
            self._ep = select.epoll()
            self._ep.register(self._fd, select.EPOLLIN)

    def index(self, elements) -> None:
        """Learn which element owns each link (after the process's elements are built)."""
        for el in elements:
            self.domain = el.domain
            for p in el.in_ports:
                self.in_owner[p.link_id] = (el, p)
            for p in el.out_ports:
                self.out_owner[p.link_id] = (el, p)
        top = max(self.in_owner, default=-1) + 1
        self.in_list = [self.in_owner.get(k) for k in range(top)] if top <= 8 * len(self.in_owner) + 64 else []

    def connect_peers(self) -> None:
        """With the peers' addresses known (after ``index``): a socket connected to each peer socket
        this process's links come from, and to its own (``emu.batch_conn``); the ports' equal peer
        addresses become one object each, the one the connected socket's datagrams are read with."""
        if self._ep is None:
            return
        self._close_connected()
        canon: dict[tuple[str, int], tuple[str, int]] = {}
        for owners in (self.in_owner, self.out_owner):
            for _, p in owners.values():
                if p.peer_addr is not None:
                    p.peer_addr = canon.setdefault(tuple(p.peer_addr), p.peer_addr)
        for peer in canon.values():
            s = open_connected(self.addr, peer, RCVBUF, RCVBUF_FORCE, self._early)
            self.connected.append((s, peer))
            self._ep.register(s.fileno(), select.EPOLLIN)
            if peer == self.addr:
                self._own = (s, peer)

    def _close_connected(self) -> None:
        for s, _ in self.connected:
            self._ep.unregister(s.fileno())
            s.close()
        self.connected = []
        self._own = None

    def close(self) -> None:
        if self._ep is not None:
            self._close_connected()
            self._ep.close()
        self.sock.close()

    @property
    def stats(self) -> dict[str, int]:
        """The socket's counters: UDP datagrams sent and received, drops that belong to no element."""
        return {"udp_sent": self.udp_sent, "udp_received": self.udp_received, **self.drops}

    # -- send side ------------------------------------------------------------------------------
    def send(self, data: bytes | list[bytes], addr: tuple[str, int]) -> None:
        """A group of records for the socket at ``addr`` (one datagram's bytes, or the parts a
        link's ``take`` made, see ``emu.link``): held while a window runs, else sent now."""
        size = len(data) if data.__class__ is not list else sum(map(len, data))
        if not self.holding:
            self._send(data, addr, size)
            return
        q = self.pending.get(addr)
        if q is None:
            self.pending[addr] = [[data], size]
            return
        if q[1] + size > MAX_DATAGRAM:
            self._send(q[0], addr, q[1])
            q[0] = [data]
            q[1] = size
        else:
            q[0].append(data)
            q[1] += size

    def flush(self) -> None:
        """Send what the window's elements sent: one datagram per destination (or per 60 KB)."""
        self.holding = False
        pending, self.pending = self.pending, {}
        for addr, (groups, size) in pending.items():
            self._send(groups[0] if len(groups) == 1 else groups, addr, size)

    def _send(self, data: bytes | list, addr: tuple[str, int], size: int = -1) -> None:
        """One datagram to ``addr``: ``data``, or the join of a list of groups (``size``: their
        bytes), each a datagram's bytes or a list of parts -- gathered by the kernel where it can
        (``sendmsg``'s scatter-gather: the same datagram, no copy made of it here), else joined here."""
        core = native.CORE
        if data.__class__ is list:
            if core is not None and self._tag is None and not self.unsent:  # (the gather, no part copied)
                try:
                    sent = core.sendparts(self._fd, addr[0], addr[1], data, IOV_MAX)
                except BlockingIOError:
                    sent = None
                    self.udp_sent += 1
                    self.unsent.append((b"".join(_parts(data)), addr))
                    return
                if sent is not None:
                    self.udp_sent += 1
                    if addr == self.addr:  # (``_sent_to``, inline: a datagram a window and destination)
                        self._self_unread += 1
                        self._to_self += sent
                        if self._to_self > self.self_drain:
                            self.drain()
                    return
            data = _parts(data)
            if self._tag is not None or self.unsent or len(data) > IOV_MAX or not _SENDMSG:
                data = b"".join(data)
        if self._tag is not None:
            data += self._tag(data)
        self.udp_sent += 1
        if self.unsent:  # something is waiting for room: keep the order (a link's records stay in sequence)
            self.unsent.append((data, addr))
            return
        try:
            if data.__class__ is list:
                size = self.sock.sendmsg(data, (), 0, addr)
            else:
                size = self.sock.sendto(data, addr)
        except BlockingIOError:
            self.unsent.append((b"".join(data) if data.__class__ is list else data, addr))
            return
        self._sent_to(addr, size)

    def _sent_to(self, addr: tuple[str, int], size: int) -> None:
        """``size`` bytes left for ``addr``: what this process sent itself is read back in time."""
        if addr == self.addr:
            self._self_unread += 1
            self._to_self += size
            if self._to_self > self.self_drain:
                self.drain()

    async def flush_unsent(self) -> None:
        await send_unsent(self.sock, self.unsent)

    # -- receive side ---------------------------------------------------------------------------
    async def serve(self, cpu: dict | None = None) -> None:
        """Read the socket until cancelled; ``wake`` the domain when frames were accepted. ``cpu``:
        the CPU seconds spent reading are added to its ``drain_s`` (``Domain.cpu``)."""
        while True:
            await trio.lowlevel.wait_readable(self.sock if self._ep is None else self._ep)
            c0 = time.process_time()
            accepted = self.drain()
            if cpu is not None:
                cpu["drain_s"] += time.process_time() - c0
            if accepted:
                self.domain.wake()

    def drain(self) -> int:
        """Read every datagram waiting on the socket; return how many DATA frames were accepted."""
        self._to_self = 0
        self._self_unread = 0
        accepted = 0
        if self._early:
            early, self._early = self._early, []
            for data, sender in early:
                accepted += self.on_datagram(data, sender)
        into = self._take_into()
        try:
            for s, peer in self.connected:
                accepted += read_connected(s, peer, self.on_datagram, into)
            return accepted + read_datagrams(self.sock, self.on_datagram, into)
        finally:
            if into is not None:
                self._into = into

    def _take_into(self) -> memoryview | None:
        """The buffer to read datagrams into, taken (None: read each into bytes of its own) while a
        drain reads it: a drain inside it -- a retransmission to this process that fills the socket
        while a datagram's records are read, ``_sent_to`` -- must not read over that datagram."""
        into = self._into
        if native.CORE is None:
            return None
        self._into = None
        return into

    def drain_own(self) -> int:
        """Read as many datagrams as this process sent itself since the socket was last read, and no
        more (for a process that is the whole cluster: those are all it can expect, so no read is
        spent finding the socket empty). Any shortfall -- one lost, another's datagram read in its
        place -- is what ``drain`` and the domain's recovery read later, as ever."""
        self._to_self = 0
        own = self._own
        core = native.CORE
        into = self._take_into()
        try:
            return read_own(self, own, core, into)
        finally:
            if into is not None:
                self._into = into

    def _drop(self, el, what: str, detail: str) -> None:
        """Count (on element ``el``, or on the process when it is None) and log a dropped input."""
        if el is not None:
            el.stats[what] += 1
            el._note(what, detail)
            return
        self.drops[what] += 1
        (log.warning if self.drops[what] == 1 else log.debug)("process socket %s: dropped input (%s): %s",
                                                              self.addr, what, detail)

    def _owner(self, owners: dict, link: int, sender: tuple[str, int], what: str):
        """(element, port) at this process's end of ``link`` (``in_owner``: DATA records, its receiving
        end; ``out_owner``: NACKs, its sending end), when ``sender`` is the socket at the other end;
        else None, counted: ``bad_link`` on the process (no such end here), ``wrong_sender`` on the element."""
        owner = owners.get(link)
        if owner is None:
            end = "end" if owners is self.in_owner else "start"
            self._drop(None, "bad_link", f"{what} for link {link}, which does not {end} in this process")
        elif sender != owner[1].peer_addr:
            self._drop(owner[0], "wrong_sender", f"{what} for link {link} from {sender}, not from {owner[1].peer}")
        else:
            return owner
        return None

    def on_datagram(self, data: bytes | memoryview, sender: tuple[str, int]) -> int:
        """Check the tag (off loopback), then dispatch each record to the element at the end of its
        link; foreign, forged or malformed input is counted and dropped. ``data``: the datagram's
        bytes, or a view of the buffer it was read into (``drain``), read here and not kept: what a
        record brings is copied out (a frame as bytes of its own)."""
        self.udp_received += 1
        core = native.CORE
        if core is not None and self._tag is None:  # (every record the compiled core's: nothing more to set up)
            n = len(data)
            if n:
                off, taken = core.records(data, 0, n, self.cluster_id, self.in_list, sender)
                if off >= n:
                    return taken
                return self._records(data, sender, off, taken)
        return self._records(data, sender, 0, 0)

    def _records(self, data: bytes | memoryview, sender: tuple[str, int], off: int, taken: int) -> int:
        """``on_datagram`` from ``off``, the records before it taken (``taken`` DATA frames) by the
        compiled core."""
        if self._tag is not None:
            n = len(data) - TAG_LEN
            if n < 0 or not hmac.compare_digest(self._tag(memoryview(data)[:n]), data[n:]):
                self._drop(None, "bad_tag", f"a datagram of {len(data)} bytes from {sender} without this cluster's tag")
                return 0
            data = data[:n]
        n = len(data)
        if not n:
            self._drop(None, "truncated", "an empty datagram")
            return 0
        cid = self.cluster_id
        unpack = OUTER.struct.unpack_from
        in_owner = self.in_owner
        push = heapq.heappush
        # frames accepted per element: [count, earliest time stamp, window] (told to the domain at the end)
        got: dict = {}
        cur = cwin = -1  # the link (and window) of the records being read, its sender checked
        inp = g = None
        rn = rb = 0  # frames and bytes accepted on link ``cur`` not yet added to its port
        rts = INF
        core = native.CORE
        while off < n:
            if core is not None and not rn:  # the common records in the compiled core, up to another one
                off, k = core.records(data, off, n, cid, self.in_list, sender)
                taken += k
                cur = -1  # (it may have read other links: look the next one up again)
                if off >= n:
                    break
            if n - off < OUTER_LEN:
                self._drop(None, "truncated", f"{n - off} trailing bytes are shorter than an outer header")
                break
            magic, ver, kind, rcid, link, seq, ts, length, win = unpack(data, off)
            if magic != MAGIC or ver != VERSION:
                self._drop(None, "bad_magic", f"magic 0x{magic:04x} version {ver}: not an emulator frame")
                break
            if rcid != cid:
                self._drop(None, "foreign_cluster", f"cluster id 0x{rcid:08x} is not this cluster's")
                break
            end = off + OUTER_LEN + length
            if end > n:
                self._drop(None, "truncated", f"record says {length} bytes, datagram has {n - off - OUTER_LEN}")
                break
            if kind != _NACK and kind <= _LAST:  # DATA, DATA_POOL
                if link != cur or win != cwin:  # (a link's records come one after the other)
                    if rn:
                        _count(inp, g, rn, rb, rts)
                        rn = rb = 0
                        rts = INF
                    cur = -1
                    owner = self._owner(in_owner, link, sender, "frame")
                    if owner is None:
                        off = end
                        continue
                    el, inp = owner
                    cur, cwin, lk, heap, index, safe = link, win, inp.link, el.heap, inp.index, el.safe_time
                    g = got.get(el)
                    if g is None or g[2] != win:  # (a window's groups and an older retransmitted one)
                        if g is not None and g[0]:
                            el.domain.frames_arrived(el, *g)
                        g = got[el] = [0, INF, win]
                if seq == lk.expected:  # accept it (``LinkReceiver.classify``, inline: nearly every record)
                    if ts < safe:  # the peer's fault (a bug, a forgery): its place stays open for the real one
                        self._drop(el, "late", f"{inp.name}: record {seq} stamped {ts} ns, before {safe} ns "
                                   "already processed here")
                        off = end
                        continue
                    lk.expected = (seq + 1) & 0xFFFFFFFF
                    push(heap, (ts, index, seq, bytes(data[off + OUTER_LEN:end]), RX_FLAGS[kind]))
                    rn += 1
                    rb += length
                    if ts < rts:
                        rts = ts
                elif ((seq - lk.expected) & 0xFFFFFFFF) < 0x80000000:  # GAP: a datagram before this one was lost
                    el.stats["gaps"] += 1
                    if not lk.gap_reported:  # go back N from what we expect
                        el.send_nack(inp)
                else:
                    el.stats["duplicates"] += 1
            elif kind == _NACK:
                owner = self._owner(self.out_owner, link, sender, "NACK")
                if owner is not None:
                    owner[0].retransmit(owner[1], seq)
            else:
                self._drop(None, "bad_magic", f"unknown record kind {kind}")
                break
            off = end
        if rn:
            _count(inp, g, rn, rb, rts)
        if core is not None:  # (the loop below, the domains' counts kept inline)
            return taken + core.arrived(got) if got else taken
        accepted = 0
        for el, (k, first_ts, win) in got.items():
            if k:
                accepted += k
                el.domain.frames_arrived(el, k, first_ts, win)
        return accepted
