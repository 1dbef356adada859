"""NDP (Handley et al., "Re-architecting datacenter networks and stacks for low latency and high
performance", SIGCOMM 2017): ``host.cc=ndp``.

Receiver-driven, selective repeat. A sender whose queue pair was idle sends its first
``ndp_iw_segments`` segments blind, at the line rate; after that it sends one segment (a resend
first, if any) for each pull it is granted. The receiver answers every arrival -- a whole segment
or the header of a trimmed one -- with a pull for its sender, queued in one pull queue per
receiver (first come, first served) and sent paced at its own line rate: one pull per wire time of
a full segment (``mtu_bytes`` + 46 header bytes + FCS), so that the senders together send no faster
than the receiver's link takes. A :class:`emu.wire.cc.Pull` carries ``pull_no``, the count of pulls
this receiver granted that sender so far: the sender adds what is new, so a lost pull is covered by
the next. A trimmed header is also answered by a :class:`emu.wire.cc.Nack` naming the segment; the
sender queues it for a resend, which goes with the next pull. Every whole segment is acknowledged
(``MsgAck``, the segment's end offset).

A pull still queued when its message has all arrived is released, not sent (counted
``pulls_released``), as htsim's ``NdpSink`` releases a finished flow's pulls (``release_pulls``):
sent, it would take a full segment's slot on the receiver's link and pull nothing. A queue pair
carries one peer's messages one after another, so a sender whose earlier messages are all
acknowledged, with nothing out and no credit left (the pulls released with the last message), starts
the next one as a new burst, blind, as a new NDP connection does.
"""

from __future__ import annotations

from collections import deque

from emu.wire import FCS_LEN, HDR_LEN, MSG, PacketType
from emu.wire.cc import PULL

from . import register_cc
from .base import CTRL_PRIO, CcTransport, Flow


class _Nd:
    __slots__ = ("credit", "last_pull")

    def __init__(self):
        self.credit, self.last_pull = 0, 0


@register_cc("ndp")
class Ndp(CcTransport):
    recovery = "sr"

    def __init__(self, nic):
        super().__init__(nic)
        self.pulls: deque[tuple[int, int]] = deque()
        """The receiver's pull queue: (sender, msg_id) per arrival not yet answered."""
        self.granted: dict[int, int] = {}
        """Pulls sent to each sender so far (the next pull's ``pull_no``)."""
        self.pull_next = 0
        self.pull_timer = None
        self.stats["pulls_released"] = 0
        self.stats["bursts"] = 0

    def frames(self):
        return {**super().frames(), int(PacketType.PULL): self._on_pull}

    def flow_init(self, flow: Flow) -> None:
        flow.cc = _Nd()

    def send(self, dst, tag, data, at, vc=0, prio=None) -> None:
        f = self.flow(dst)
        if f.idle():  # a new burst: the first window goes blind
            f.cc.credit = self.spec.ndp_iw_segments
        super().send(dst, tag, data, at, vc, prio)

    def allowed(self, f: Flow, n: int) -> bool:
        return f.cc.credit > 0

    def on_sent(self, f: Flow, n: int) -> None:
        f.cc.credit -= 1

    def on_ack_cc(self, f: Flow, newly: int, rtt, hops: int, stack: bytes) -> None:
        if not f.out and f.cc.credit <= 0 and f.msgs and f.nxt == f.msgs[0].start:
            # the messages before all acknowledged, the next one not begun, nothing out to bring a pull
            # (the receiver released the pulls of the last one): it goes as a new burst, blind
            f.cc.credit = self.spec.ndp_iw_segments
            self.stats["bursts"] += 1

    def on_timeout_cc(self, f: Flow) -> None:
        f.cc.credit = max(f.cc.credit, 1)  # a segment lost whole brought no pull: the resend goes unpulled

    def _on_pull(self, frame: bytes, src: int, port: int, now: int) -> None:
        _msg_id, pull_no, count, _ = PULL.unpack(frame, HDR_LEN)
        self.stats["pulls_received"] += 1
        f = self.flows.get(src)
        if f is None:
            return
        nd: _Nd = f.cc
        new = (pull_no - nd.last_pull) & 0xFFFFFFFF
        if new and new < 1 << 31:
            nd.last_pull = pull_no
            nd.credit += new
            self.kick(f)

    # -- the receiver's pull queue ------------------------------------------------------------------
    def on_arrival(self, src: int, msg_id: int, rx, trimmed: bool) -> None:
        self.pulls.append((src, msg_id))
        if self.pull_timer is None:
            self._pull_pump()

    def _pull_gap(self) -> int:
        wire = HDR_LEN + MSG.size + self.mtu + FCS_LEN
        return -(-wire * 8_000_000_000 // self.line_bps)

    def _pull_pump(self, _arg=None) -> None:
        self.pull_timer = None
        if not self.pulls:
            return
        now = self.nic.now
        t = max(now + self.delay, self.pull_next)
        if t > now + self.delay:
            self.pull_timer = self.nic.at(t - self.delay, self._pull_pump, None)
            return
        src, msg_id = self.pulls.popleft()
        while self.seen(src, msg_id):  # all arrived: the pull would pull nothing
            self.stats["pulls_released"] += 1
            if not self.pulls:
                return
            src, msg_id = self.pulls.popleft()
        n = self.granted[src] = (self.granted.get(src, 0) + 1) & 0xFFFFFFFF
        self.stats["pulls_sent"] += 1
        self.nic.emit(src, PacketType.PULL, PULL.pack(msg_id, n, 1, 0), t, prio=CTRL_PRIO)
        self.pull_next = t + self._pull_gap()
        if self.pulls:
            self.pull_timer = self.nic.at(self.pull_next - self.delay, self._pull_pump, None)
