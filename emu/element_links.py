"""An element's side of its links (part of :class:`emu.element.Element`): the frames its busy ports
send in a window -- handed over in memory to elements of this process, or as records in datagrams
(``emu.link``) by socket --, the records it reads back, NACKs and go-back-N retransmission, and the
retained record groups it forgets."""

from __future__ import annotations

import heapq
import hmac
import logging

import trio

from . import native
from .errors import CausalityError
from .link import ACCEPT, GAP
from .port import InPort, OutPort
from .wire.lazy import LazyFrame
from .wire.outer import MAGIC, OUTER, OUTER_LEN, TAG_LEN, VERSION, LinkKind
from .element_const import INF, DIR_OUT, POOL, CLEAN, NOFCS, RX_FLAGS

log = logging.getLogger("emu.element")


def read_datagrams(sock, on_datagram, into: memoryview | None = None) -> int:
    """Read every datagram waiting on the non-blocking ``sock`` into ``on_datagram(data, sender)``;
    return the sum of what it returned (DATA frames accepted). ``into``: as ``emu.batch_conn.read_connected``'s."""
    accepted = 0
    if into is not None:
        recv_into = sock.recvfrom_into
        while True:
            try:
                n, sender = recv_into(into)
            except BlockingIOError:
                return accepted
            except ConnectionRefusedError:  # ICMP from a peer that already closed (teardown)
                continue
            accepted += on_datagram(into[:n], sender)
    recv = sock.recvfrom
    while True:
        try:
            data, sender = recv(65536)
        except BlockingIOError:
            return accepted
        except ConnectionRefusedError:  # ICMP from a peer that already closed (teardown)
            continue
        accepted += on_datagram(data, sender)

async def send_unsent(sock, unsent: list) -> None:
    """Send the (datagram, address) pairs that found no room in ``sock``'s buffer, in order, as room
    comes."""
    while unsent:
        await trio.lowlevel.wait_writable(sock)
        data, addr = unsent[0]
        try:
            sock.sendto(data, addr)
        except BlockingIOError:
            continue
        unsent.pop(0)


class Links:
    """The link side of :class:`emu.element.Element` (a part of it, never used alone)."""

    def drain(self) -> int:
        """Read every datagram waiting on the socket; return how many DATA frames were accepted."""
        if self.batch is not None:
            return self.batch.drain()
        return read_datagrams(self.sock, self.on_datagram)

    def on_datagram(self, data: bytes, sender: tuple[str, int]) -> int:
        """Parse the records of one datagram from socket address ``sender``; foreign, forged or
        malformed input is counted and dropped. A link's DATA records are accepted only from the
        socket of the element at its sending end, its NACKs only from the socket at its receiving
        end (``wrong_sender`` counts the rest): a stranger on the machine that guesses a cluster id,
        a link id and the next sequence number still cannot take a genuine frame's place."""
        n = len(data)
        off = 0
        accepted = 0
        stats = self.stats
        stats["datagrams_received"] += 1
        if not n:
            stats["truncated"] += 1
            self._note("truncated", "an empty datagram")
            return 0
        first_ts = INF
        unpack = OUTER.struct.unpack_from
        while off < n:
            if n - off < OUTER_LEN:
                stats["truncated"] += 1
                self._note("truncated", f"{n - off} trailing bytes are shorter than an outer header")
                break
            magic, ver, kind, cid, link, seq, ts, length, win = unpack(data, off)
            if magic != MAGIC or ver != VERSION:
                stats["bad_magic"] += 1
                self._note("bad_magic", f"magic 0x{magic:04x} version {ver}: not an emulator frame")
                break
            if cid != self.cluster_id:
                stats["foreign_cluster"] += 1
                self._note("foreign_cluster", f"cluster id 0x{cid:08x} is not this cluster's")
                break
            end = off + OUTER_LEN + length
            if end > n:
                stats["truncated"] += 1
                self._note("truncated", f"record says {length} bytes, datagram has {n - off - OUTER_LEN}")
                break
            if kind != LinkKind.NACK and kind <= LinkKind.DATA_POOL:
                inp = self.in_by_link.get(link)
                if inp is None:
                    stats["bad_link"] += 1
                    self._note("bad_link", f"frame for link {link}, which does not end here")
                    break
                if sender != inp.peer_addr:
                    stats["wrong_sender"] += 1
                    self._note("wrong_sender", f"frame for link {link} from {sender}, not from {inp.peer}")
                    break
                lk = inp.link
                if seq == lk.expected and ts < self.safe_time:  # the peer's fault (a bug, a forgery): not
                    stats["late"] += 1                           # taken, its place open for the real one
                    self._note("late", f"{inp.name}: record {seq} stamped {ts} ns, before {self.safe_time} ns "
                               "already processed here")
                    break
                if seq == lk.expected:  # (``LinkReceiver.classify``'s ACCEPT, inline: nearly every record)
                    lk.expected = (seq + 1) & 0xFFFFFFFF
                    verdict = ACCEPT
                else:
                    verdict = lk.classify(seq)
                if verdict == ACCEPT:
                    inp.rx_frames += 1
                    inp.rx_bytes += length
                    # handled at its virtual arrival: the port checks the FCS then (and strips it)
                    heapq.heappush(self.heap, (ts, inp.index, seq, data[off + OUTER_LEN:end], RX_FLAGS[kind]))
                    if ts < first_ts:
                        first_ts = ts
                    accepted += 1
                elif verdict == GAP:
                    # a datagram before this one was lost: go back N from what we expect
                    stats["gaps"] += 1
                    if not inp.link.gap_reported:
                        self.send_nack(inp)
                    break
                else:
                    stats["duplicates"] += 1
            elif kind == LinkKind.NACK:
                outp = self.out_by_link.get(link)
                if outp is None:
                    stats["bad_link"] += 1
                    self._note("bad_link", f"NACK for link {link}, which does not start here")
                    break
                if sender != outp.peer_addr:
                    stats["wrong_sender"] += 1
                    self._note("wrong_sender", f"NACK for link {link} from {sender}, not from {outp.peer}")
                    break
                self.retransmit(outp, seq)
            else:
                stats["bad_magic"] += 1
                self._note("bad_magic", f"unknown record kind {kind}")
                break
            off = end
        if accepted:
            self.domain.frames_arrived(self, accepted, first_ts, win)
        return accepted

    def _on_tagged_datagram(self, data: bytes, sender: tuple[str, int]) -> int:
        """``on_datagram`` off loopback: nothing of a datagram is read before its tag holds (a
        host on the network can forge a link's source address and port, not the tag)."""
        n = len(data) - TAG_LEN
        if n < 0 or not hmac.compare_digest(self._tag(memoryview(data)[:n]), data[n:]):
            self.stats["datagrams_received"] += 1
            self.stats["bad_tag"] += 1
            self._note("bad_tag", f"a datagram of {len(data)} bytes from {sender} without this cluster's tag")
            return 0
        return Links.on_datagram(self, data[:n], sender)

    def _sendto_tagged(self, data: bytes | list[bytes], addr: tuple[str, int], lossy: bool = True) -> None:
        if data.__class__ is list:
            data = b"".join(data)
        Links._sendto(self, data + self._tag(data), addr, lossy)

    def _note(self, what: str, detail: str) -> None:
        """Log a dropped input: the first of each kind as a warning, the rest at debug (the
        counters in ``stats`` are the record)."""
        (log.warning if self.stats[what] == 1 else log.debug)("%s: dropped input (%s): %s", self.name, what, detail)

    def send_nack(self, inp: InPort) -> None:
        self.stats["nacks_sent"] += 1
        self._sendto(inp.link.nack(), inp.peer_addr)

    def retransmit(self, outp: OutPort, from_seq: int) -> None:
        """Go back N: resend every retained group (joined: its datagram) that holds a record at or after
        ``from_seq``."""
        for dgram in outp.link.go_back(from_seq):
            self.stats["retransmitted"] += 1
            self._sendto(dgram, outp.peer_addr, lossy=False)

    def _transmit(self, release: int, window: int) -> int:
        """Every busy port's frames due before ``release`` on their way: into the heaps of this
        process's elements, or as records to other processes; returns the earliest arrival (INF: none)."""
        core = native.CORE
        if core is not None and self.capture is None:  # the ports to this process's elements (and to its socket) in the core
            first_arrival, ports = core.transmit_local(self.busy, release, window, self.domain,
                                                       None if self._drop_rate else self.batch, self.stats)
            return self._transmit_ports(ports, first_arrival, release, window) if ports else first_arrival
        return self._transmit_ports(self.busy, INF, release, window)

    def _transmit_ports(self, ports, first_arrival: int, release: int, window: int) -> int:
        """``_transmit`` for the busy ports ``ports`` (all, or those the compiled core left)."""
        cap = self.capture
        done = []
        domain = self.domain
        push = heapq.heappush
        batch = self.batch
        core = native.CORE
        for p in ports:
            pend, ctl = p.pending, p.ctl
            if p.local is not None and not ctl and p.fault_rng is None and cap is None:
                # to an element of this process, nothing to capture, no fault: straight into its heap
                # (what ``_hand_over`` does with the list below, without building the list)
                if pend and pend[0][1] < release:
                    peer, inp = p.local
                    a0 = pend[0][1]
                    if a0 < peer.safe_time:
                        raise CausalityError(f"{inp.name}: frame stamped {a0} ns handed over after {peer.safe_time} ns "
                                             "was processed; the synchroniser let a window run too far")
                    if a0 < first_arrival:
                        first_arrival = a0
                    heap, index, link = peer.heap, inp.index, p.link
                    seq = link.seq
                    flags = CLEAN | NOFCS if p.defer_fcs else CLEAN
                    n = nbytes = 0  # (with the compiled core, transmit_local above took these ports)
                    while pend and pend[0][1] < release:
                        _, arrival, frame, pool = pend.popleft()
                        if frame.__class__ is LazyFrame:  # made from its sender's buffer now (emu.wire.lazy)
                            frame = frame.make()
                        push(heap, (arrival, index, seq, frame, flags | POOL if pool else flags))
                        seq = (seq + 1) & 0xFFFFFFFF
                        n += 1
                        nbytes += len(frame)
                    if flags & NOFCS:
                        nbytes += 4 * n
                    link.seq = inp.link.expected = seq
                    p.sent_done = arrival - p.latency_ns
                    p.tx_frames += n
                    p.tx_bytes += nbytes
                    inp.rx_frames += n
                    inp.rx_bytes += nbytes
                    domain.frames_local(peer, n, a0, window)
                if not pend:
                    done.append(p)
                continue
            if batch is not None and not ctl and p.fault_rng is None and cap is None:
                # by the process's socket, nothing to capture, no fault, no credit: the frames become
                # records as they leave the port (what the list below does, without building it)
                if pend and pend[0][1] < release:
                    if pend[0][1] < first_arrival:
                        first_arrival = pend[0][1]
                    # (a frame on a socket carries its FCS: defer_fcs is only set on ports handed over in memory)
                    dgrams, n, nbytes, arrival = core.take(p.link, pend, release, window) if core is not None \
                        else p.link.take(pend, release, window)
                    if self._drop_rate:
                        for dgram in dgrams:
                            self._sendto(dgram, p.peer_addr)
                    else:
                        self.stats["datagrams_sent"] += len(dgrams)
                        for dgram in dgrams:
                            batch.send(dgram, p.peer_addr)
                    domain.frames_sent(p.peer_domain, n, p.peer)
                    p.sent_done = arrival - p.latency_ns
                    p.tx_frames += n
                    p.tx_bytes += nbytes
                if not pend:
                    done.append(p)
                continue
            frames = []
            while ctl and ctl[0][1] < release:  # credits: no time on the wire, never faulty
                start, arrival, frame, _ = ctl.popleft()
                if arrival < first_arrival:
                    first_arrival = arrival
                if cap is not None:
                    cap.append((start, p.iface, DIR_OUT, frame))
                frames.append((arrival, frame, False))
            credits = len(frames)
            total = 0
            if pend and pend[0][1] < release:
                if pend[0][1] < first_arrival:  # arrivals are in order on a port
                    first_arrival = pend[0][1]
                faulty = p.fault_rng is not None
                if faulty and p.defer_fcs:  # a fault acts on the frame as it is on the line
                    p.restore_fcs()
                nofcs = NOFCS if p.defer_fcs else 0
                while pend and pend[0][1] < release:
                    start, arrival, frame, pool = pend.popleft()
                    if frame.__class__ is LazyFrame:  # made from its sender's buffer now (emu.wire.lazy)
                        frame = frame.make()
                    if faulty:
                        frame, lost = self._fault(p, start, frame, pool, arrival)
                        if lost:  # the frame occupied the port, then vanished: that time still passed
                            if arrival - p.latency_ns > self.lost_until:
                                self.lost_until = arrival - p.latency_ns
                            self._resync(p, frame, pool, arrival + p.latency_ns)
                            continue
                    elif cap is not None:
                        cap.append((start, p.iface, DIR_OUT, frame))
                    frames.append((arrival, frame, (POOL if pool else 0) | nofcs))  # (UDP: 0, POOL or NOFCS)
                    total += len(frame)
                if nofcs:
                    total += 4 * (len(frames) - credits)
                p.sent_done = arrival - p.latency_ns
            if frames:  # (emulated faults may have lost every frame); credits ride with the data
                if p.local is not None:
                    self._hand_over(p, frames, window)
                else:
                    addr = p.peer_addr
                    for dgram in p.link.datagrams(frames, window):
                        self._sendto(dgram, addr)
                    domain.frames_sent(p.peer_domain, len(frames), p.peer)
                p.tx_frames += len(frames) - credits
                p.tx_bytes += total
            if not pend and not ctl:
                done.append(p)
        for p in done:
            del self.busy[p]
        return first_arrival

    def _hand_over(self, p: OutPort, frames: list, window: int) -> None:
        """Frames for an element of this process: into its input queue as the records a datagram
        would carry (the link's sequence numbers, so equal-time order is the same), no socket."""
        peer, inp = p.local
        if frames[0][0] < peer.safe_time:
            raise CausalityError(f"{inp.name}: frame stamped {frames[0][0]} ns handed over after {peer.safe_time} ns "
                                 "was processed; the synchroniser let a window run too far")
        heap, index = peer.heap, inp.index
        seq = p.link.seq
        clean = CLEAN if p.fault_rng is None else 0  # no emulated fault can have touched it: FCS good
        first_ts = INF
        nbytes = 0
        push = heapq.heappush
        for arrival, frame, flags in frames:  # flags: POOL, NOFCS
            push(heap, (arrival, index, seq, frame, clean | flags))
            seq = (seq + 1) & 0xFFFFFFFF
            nbytes += len(frame) + 4 if flags & NOFCS else len(frame)
            if arrival < first_ts:
                first_ts = arrival
        p.link.seq = inp.link.expected = seq
        inp.rx_frames += len(frames)
        inp.rx_bytes += nbytes
        self.domain.frames_local(peer, len(frames), first_ts, window)

    def forget(self, upto_window: int) -> None:
        """Drop retained groups of windows <= ``upto_window``: every receiver has them."""
        if native.CORE is not None and type(self.out_ports) is list:
            native.CORE.forget(self.out_ports, upto_window)
            return
        for p in self.out_ports:
            r = p.link.retained
            if r and r[0][0] <= upto_window:  # (frames handed over in memory are never retained)
                p.link.forget(upto_window)

    def _sendto(self, data: bytes | list[bytes], addr: tuple[str, int], lossy: bool = True) -> None:
        """One group of records (a datagram's bytes, or the parts ``LinkSender.take`` made) to ``addr``."""
        if lossy and self._drop_rate and self._drop_rng.random() < self._drop_rate:
            self.stats["sock_dropped"] += 1
            return
        self.stats["datagrams_sent"] += 1
        if self.batch is not None:  # (a group of one link's records: the batch joins and sends them)
            self.batch.send(data, addr)
            return
        if data.__class__ is list:
            data = b"".join(data)
        try:
            self.sock.sendto(data, addr)
        except BlockingIOError:
            self.unsent.append((data, addr))

    async def flush_unsent(self) -> None:
        await send_unsent(self.sock, self.unsent)
