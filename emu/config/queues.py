"""The output-queue disciplines of an output-queued switch (``[queues]`` settings, ``--set queues.x=``;
``switch/queues``): a shared buffer with dynamic thresholds and tail drop (per-class reserves in it),
ECN marking, PFC, INT, trimming, strict or weighted (DRR) service of the classes. Everything is off by
default: a switch then forwards exactly as before. The input-queued router takes the arbiter only
(weights in its switch allocator, ``switch/iqdrr.py``).

Traffic classes are the fabric header's ``prio`` (0..7). The per-class settings take a list of
classes: ``"3"``, ``"0+3"`` (or ``"0,3"`` in a file: on the command line a comma makes a sweep),
``"0-7"``, ``"all"`` or ``""`` (none)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .base import ConfigError

ECN_MODES = ("off", "red", "step")
ARBITERS = ("strict", "drr")
CLASSES = 8
"""Traffic classes: the fabric header's prio, and the 8 PAUSE timers of an 802.1Qbb frame."""


def class_mask(where: str, text: str) -> int:
    """A list of traffic classes (``"0+3"`` or ``"0,3"``, ``"2-5"``, ``"all"``, ``""``) as a bit mask."""
    t = text.strip().lower()
    if t in ("", "none"):
        return 0
    if t == "all":
        return (1 << CLASSES) - 1
    mask = 0
    for part in t.replace("+", ",").split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            a = int(lo)
            b = int(hi) if dash else a
        except ValueError:
            raise ConfigError(f"{where}={text!r} is not a list of traffic classes 0..7; write e.g. "
                              f"{where}=3 or {where}=0+3 or {where}=0-7 or {where}=all") from None
        if not 0 <= a <= b < CLASSES:
            raise ConfigError(f"{where}={text!r}: traffic classes are 0..7 (the fabric header's prio); "
                              f"write e.g. {where}=3 or {where}=0-7")
        for c in range(a, b + 1):
            mask |= 1 << c
    return mask


@dataclass(frozen=True)
class QueueSpec:
    """Output-queue mechanisms of an output-queued switch (``switch.model=output_queued``)."""

    buffer_bytes: int = 0
    """The switch's shared packet buffer (bytes); 0: unbounded (no tail drop). A frame of a lossy
    class is dropped when its output queue holds ``alpha`` x the free shared buffer or more, or when
    the buffer is full (Choudhury-Hahne dynamic thresholds)."""
    alpha: float = 1.0
    """Dynamic-threshold factor: an output queue may grow to alpha x (buffer_bytes - bytes in the
    buffer)."""
    ecn: str = "off"
    """ECN marking of host message segments (fabric flag ECN): off, red (``kmin_bytes``/``kmax_bytes``/
    ``pmax``) or step (at ``k_bytes``), on the output queue's bytes as the frame arrives."""
    kmin_bytes: int = 5_000
    """RED: below this many bytes in the queue nothing is marked (DCQCN's Kmin, 5 KB)."""
    kmax_bytes: int = 200_000
    """RED: at or above this many bytes every segment is marked (DCQCN's Kmax, 200 KB)."""
    pmax: float = 0.01
    """RED: the marking probability just below ``kmax_bytes`` (DCQCN's Pmax, 1 %); linear from 0 at
    ``kmin_bytes``."""
    k_bytes: int = 97_500
    """Step marking: a segment is marked when the queue holds this many bytes or more (DCTCP's K, 65
    packets of 1500 bytes)."""
    ecn_classes: str = "all"
    """Traffic classes that are marked: e.g. 3, 0+3, 0-7, all."""
    pfc_classes: str = ""
    """Lossless traffic classes (PFC, IEEE 802.1Qbb; e.g. 3, 0+3, 0-7, all; none by default): never tail-dropped; an ingress whose bytes of a
    class reach ``xoff_bytes`` sends a PAUSE upstream for that class, an XON below ``xon_bytes``."""
    xoff_bytes: int = 100_000
    """PFC: bytes of one class held for one ingress port at which a PAUSE goes upstream."""
    xon_bytes: int = 50_000
    """PFC: ... below which the pause is lifted (a PAUSE of quanta 0)."""
    headroom_bytes: int = 50_000
    """PFC: what may still arrive on a paused ingress (the frames in flight and the one on the line
    each way); a frame beyond ``xoff_bytes + headroom_bytes`` is dropped (counted: the headroom is too
    small for the link)."""
    pause_quanta: int = 65535
    """PFC: the pause time a PAUSE asks for, in quanta of 512 bit times. 65535: held until XON (the
    switch refreshes it before it lapses; the refreshes are not sent as frames of their own)."""
    int_telemetry: bool = False
    """INT: add a hop record (queue bytes, transmitted bytes, time, line rate; HPCC) to every frame that
    carries the fabric flag INT as it starts on its way out."""
    trim: bool = False
    """Packet trimming (NDP): a host message segment that tail drop would drop is cut to its headers
    and sent at priority 7 instead."""
    arbiter: str = "strict"
    """How an output port chooses between its class queues: strict (the highest class first, 802.1Q) or drr (deficit round robin with queues.weights)."""
    weights: str = ""
    """DRR: each class's weight, class 0 first, joined by + (e.g. 1+3: class 1 gets three times class 0's share of a busy port); classes not given weigh 1."""
    drr_quantum_bytes: int = 2048
    """DRR: the bytes a class of weight 1 may send per turn (a turn of weight w: w times this)."""
    class_shares: str = ""
    """Per-class buffer reserves within ``buffer_bytes``, class 0 first, joined by + (e.g. 0+0.25: class
    1 is guaranteed a quarter of the buffer; 0+20000: 20,000 bytes): a fraction (with a point, or a
    percentage) or whole bytes; classes not given reserve nothing. A frame of class c that fits in c's
    reserve (the bytes of c in the whole switch, with it, at most the reserve) is admitted; beyond it
    the frame takes the shared rest (``buffer_bytes`` minus every reserve) under the dynamic threshold,
    a queue counting only its bytes beyond its class's reserve (a real switch's per-priority-group
    guaranteed buffer beside its shared pool)."""
    class_map: str = ""
    """The fabric prio (0..7) a job of class k is given, job class 0 first, joined by + (e.g. 0+3+5: a
    job with class=1 sends at prio 3, class=2 at prio 5); classes not given keep their number. Read by
    ``emu run --job ...,class=K`` (docs/jobs.md)."""

    def __post_init__(self) -> None:
        for f in ("buffer_bytes", "kmin_bytes", "kmax_bytes", "k_bytes", "xoff_bytes", "xon_bytes", "headroom_bytes"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 1 << 40:
                raise ConfigError(f"queues.{f} must be an integer within 0..2**40 bytes, got {v!r}")
        if not isinstance(self.alpha, (int, float)) or not 0 < self.alpha <= 1024:
            raise ConfigError(f"queues.alpha must be a number within (0, 1024], got {self.alpha!r}; e.g. queues.alpha=1")
        if not isinstance(self.pmax, (int, float)) or not 0 <= self.pmax <= 1:
            raise ConfigError(f"queues.pmax is a probability within 0..1, got {self.pmax!r}; e.g. queues.pmax=0.01")
        if self.ecn not in ECN_MODES:
            raise ConfigError(f"queues.ecn {self.ecn!r} is not one of {', '.join(ECN_MODES)}")
        if not isinstance(self.pause_quanta, int) or not 1 <= self.pause_quanta <= 65535:
            raise ConfigError(f"queues.pause_quanta must be within 1..65535 quanta of 512 bit times, "
                              f"got {self.pause_quanta!r}")
        if self.arbiter not in ARBITERS:
            raise ConfigError(f"queues.arbiter {self.arbiter!r} is not one of {', '.join(ARBITERS)}")
        if not isinstance(self.drr_quantum_bytes, int) or not 1 <= self.drr_quantum_bytes <= 1 << 20:
            raise ConfigError(f"queues.drr_quantum_bytes must be an integer within 1..2**20, got {self.drr_quantum_bytes!r}")
        self.quanta  # (the weights are checked here)
        self.prio_of  # (the class map too)
        r = self.reserves
        if str(self.class_shares).strip() and not self.buffer_bytes:
            raise ConfigError("queues.class_shares reserve parts of the shared buffer, and queues.buffer_bytes=0 is "
                              "unbounded; give queues.buffer_bytes too")
        if r is not None:
            if sum(r) >= self.buffer_bytes:
                raise ConfigError(f"queues.class_shares={self.class_shares!s} reserve {sum(r)} of queues.buffer_bytes="
                                  f"{self.buffer_bytes} bytes and leave nothing shared: give smaller shares (their sum "
                                  "below the buffer)")
        if self.weights and self.arbiter != "drr":
            raise ConfigError("queues.weights are deficit round robin's; set queues.arbiter=drr too")
        for f in ("int_telemetry", "trim"):
            if not isinstance(getattr(self, f), bool):
                raise ConfigError(f"queues.{f} must be true or false, got {getattr(self, f)!r}")
        self.ecn_mask, self.pfc_mask  # (the class lists are checked here)
        if self.ecn == "red" and self.kmin_bytes >= self.kmax_bytes:
            raise ConfigError(f"queues.kmin_bytes={self.kmin_bytes} is not below queues.kmax_bytes={self.kmax_bytes}: "
                              "RED marks between them; set kmin_bytes < kmax_bytes")
        if self.trim and not self.buffer_bytes:
            raise ConfigError("queues.trim=true trims what tail drop would drop, and an unbounded buffer drops "
                              "nothing; give queues.buffer_bytes too")
        if self.pfc_mask:
            if self.xon_bytes > self.xoff_bytes:
                raise ConfigError(f"queues.xon_bytes={self.xon_bytes} is above queues.xoff_bytes={self.xoff_bytes}: "
                                  "a pause could never be lifted; set xon_bytes <= xoff_bytes")
            if self.xoff_bytes == 0:
                raise ConfigError("queues.xoff_bytes=0 would pause before anything arrives; give the bytes an "
                                  "ingress may hold, e.g. queues.xoff_bytes=100000")
            if self.buffer_bytes and self.buffer_bytes < self.xoff_bytes + self.headroom_bytes:
                raise ConfigError(f"queues.buffer_bytes={self.buffer_bytes} is smaller than one ingress's "
                                  f"xoff_bytes + headroom_bytes = {self.xoff_bytes + self.headroom_bytes}: "
                                  "give a larger buffer or smaller thresholds")

    @property
    def ecn_mask(self) -> int:
        return class_mask("queues.ecn_classes", self.ecn_classes)

    @property
    def pfc_mask(self) -> int:
        return class_mask("queues.pfc_classes", self.pfc_classes)

    @property
    def quanta(self) -> list[int] | None:
        """DRR's bytes per turn for each class (None: strict priority)."""
        if self.arbiter != "drr":
            return None
        text = str(self.weights).strip()
        parts = [p.strip() for p in text.replace(",", "+").split("+")] if text else []
        if len(parts) > CLASSES or not all(p.isascii() and p.isdigit() and 1 <= int(p) <= 1000 for p in parts):
            raise ConfigError(f"queues.weights {self.weights!r}: give up to {CLASSES} whole numbers 1..1000 joined "
                              "by +, class 0 first (e.g. 1+3)")
        w = [int(p) for p in parts] + [1] * (CLASSES - len(parts))
        return [x * self.drr_quantum_bytes for x in w]

    @property
    def reserves(self) -> list[int] | None:
        """Each class's reserved bytes of the buffer (``class_shares``; None: none reserved)."""
        text = str(self.class_shares).strip()
        if not text:
            return None
        parts = [p.strip() for p in text.replace(",", "+").split("+")]
        out = []
        for p in parts:
            try:
                if p.endswith("%"):
                    v = float(p[:-1]) / 100
                    frac = True
                else:
                    frac = "." in p or "e" in p.lower()
                    v = float(p) if frac else int(p)
            except ValueError:
                v, frac = -1, False
            if len(parts) > CLASSES or v < 0 or (frac and not v <= 1) or (not frac and v > 1 << 40):
                raise ConfigError(f"queues.class_shares {self.class_shares!r}: give up to {CLASSES} shares joined by +, "
                                  "class 0 first, each a fraction of queues.buffer_bytes (0.25, 25%) or whole bytes "
                                  "(20000); e.g. queues.class_shares=0+0.25")
            out.append(int(v * self.buffer_bytes) if frac else v)
        out += [0] * (CLASSES - len(out))
        return out if any(out) else None

    @property
    def prio_of(self) -> list[int]:
        """The fabric prio of each job class (``class_map``; the identity where not given)."""
        text = str(self.class_map).strip()
        parts = [p.strip() for p in text.replace(",", "+").split("+")] if text else []
        if len(parts) > CLASSES or not all(p.isascii() and p.isdigit() and int(p) < CLASSES for p in parts):
            raise ConfigError(f"queues.class_map {self.class_map!r}: give up to {CLASSES} priorities 0..7 joined by +, "
                              "job class 0 first (e.g. 0+3+5: class 1 sends at prio 3, class 2 at 5)")
        return [int(p) for p in parts] + list(range(len(parts), CLASSES))

    @property
    def pfc_on(self) -> bool:
        return bool(self.pfc_mask)

    @property
    def on(self) -> bool:
        """Is any mechanism switched on (then the switch's frames take the Python path)?"""
        return bool(self.buffer_bytes or self.ecn != "off" or self.pfc_mask or self.int_telemetry or self.trim
                    or self.arbiter != "strict")

    def check_switch(self, switch) -> None:
        """Refuse combinations with the switch's other settings (``SwitchSpec``)."""
        if not self.on:
            return
        if switch.model == "input_queued" and replace(self, arbiter="strict", weights="").on is False:
            if switch.allocator != "round_robin":  # weights in switch allocation (emu.switch.iqdrr)
                raise ConfigError(f"queues.arbiter=drr weighs the classes in the separable switch allocator; set "
                                  f"switch.allocator=round_robin (not {switch.allocator})")
            return
        if switch.model != "output_queued":
            raise ConfigError(f"queues.* needs output queues: switch.model={switch.model} has none (of them it takes "
                              "queues.arbiter=drr with queues.weights only); set switch.model=output_queued or switch "
                              "the other queues settings off")
        if switch.vc_buffer_bytes:
            raise ConfigError("queues.* and credit flow control (switch.vc_buffer_bytes > 0) are two buffer models; "
                              "set switch.vc_buffer_bytes=0 to use the shared output buffer")
        if switch.cut_through:
            raise ConfigError("queues.* needs store-and-forward switches; set switch.cut_through=false")
