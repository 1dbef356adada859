"""The host's congestion control settings (``host.cc`` and its parameters, issue #47).

:class:`CcParams` is a base of :class:`emu.config.host.HostSpec`: its fields are ``host.*``
settings like the others. Each algorithm's defaults are the published ones, with their source in
the field's docstring; ``docs/congestion-control.md`` says how each is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import ConfigError

CC_BUILT_IN = ("none", "dcqcn", "hpcc", "swift", "ndp")
"""The congestion controls that come with the emulator (more by name: ``emu.nodes.nic.cc.cc_class``)."""
RECOVERIES = ("auto", "gbn", "sr")
ENTROPIES = ("flow", "message", "segment")


@dataclass(frozen=True)
class CcParams:
    cc: str = "none"
    """Congestion control of host messages at the NIC: none (the frames of a message go to the port at
    once; ``host.transport`` recovers losses), dcqcn, hpcc, swift or ndp (``docs/congestion-control.md``).
    Any but none brings its own segment transport: per-segment acknowledgements, go-back-N or selective
    repeat (``cc_recovery``), and paces each peer's segments by the algorithm's rate or window."""
    cc_recovery: str = "auto"
    """Loss recovery under a congestion control: auto (the algorithm's own -- go-back-N for dcqcn and
    hpcc as RoCE NICs do, selective repeat for swift and ndp), gbn or sr."""
    cc_entropy: str = "flow"
    """Under a congestion control, the entropy byte its segments carry for ECMP (the fabric header's rsvd; switch.routing=ecmp hashes it): flow (0: every segment to a peer takes one path, as one RoCE queue pair), message (each message its own) or segment (each segment its own: the sender sprays)."""
    dcqcn_g: float = 1 / 256
    """DCQCN: the gain of alpha's moving average (Zhu et al SIGCOMM 2015 g = 1/256; the HPCC repository's
    run.py EWMA_GAIN 0.00390625)."""
    dcqcn_cnp_interval_ns: int = 50_000
    """DCQCN: the receiver sends at most one CNP per flow in this time (Zhu et al: N = 50 us)."""
    dcqcn_alpha_timer_ns: int = 55_000
    """DCQCN: alpha decays by (1 - g) when no CNP came in this time (Zhu et al K = 55 us; the HPCC
    repository's ns-3 AlphaResumInterval default 55 us)."""
    dcqcn_rate_timer_ns: int = 55_000
    """DCQCN: the rate-increase timer T (the HPCC repository's run.py ``dcqcn_paper``: RP_TIMER 55 us; its
    ``dcqcn``, the Mellanox setting, 300 us)."""
    dcqcn_byte_counter_bytes: int = 10_000_000
    """DCQCN: the rate-increase byte counter B (Zhu et al: 10 MB); 0: timer only (as the ns-3 code)."""
    dcqcn_f: int = 5
    """DCQCN: increase events of fast recovery before additive increase, F (Zhu et al; ns-3 FastRecoveryTimes
    default 5)."""
    dcqcn_rai_mbps: float = 0.0
    """DCQCN: additive increase step R_AI (Mb/s); 0: 5 Mb/s per 25 Gb/s of line rate (the HPCC repository's run.py)."""
    dcqcn_rhai_mbps: float = 0.0
    """DCQCN: hyper increase step R_HAI (Mb/s); 0: 50 Mb/s per 25 Gb/s of line rate (run.py)."""
    dcqcn_rate_decrease_interval_ns: int = 4000
    """DCQCN: the rate decreases at most once per this interval, at a check on a grid from the first CNP, if
    a CNP came since the last check (the HPCC repository's ns-3 RateDecreaseInterval 4 us, run.py
    RATE_DECREASE_INTERVAL 4); 0: on each CNP."""
    dcqcn_min_rate_mbps: float = 1000.0
    """DCQCN: the rate never falls below this (Mb/s; run.py MIN_RATE 1000Mb/s)."""
    hpcc_u_target: float = 0.95
    """HPCC: target utilisation eta (Li et al SIGCOMM 2019; ns-3 TargetUtil 0.95)."""
    hpcc_max_stage: int = 5
    """HPCC: additive increases before a multiplicative one, maxStage (Li et al; ns-3 MiThresh default 5); 0:
    every update multiplicative (the HPCC code's mix/config.txt and run.py: MI_THRESH 0)."""
    hpcc_rai_mbps: float = 0.0
    """HPCC: additive step as a rate, W_AI = this x T (Mb/s); 0: 10 Mb/s per 25 Gb/s of line rate (run.py)."""
    hpcc_base_rtt_ns: int = 0
    """HPCC: the base round trip T (ns); 0: the smallest round trip the flow measured so far."""
    hpcc_int_hops: int = 5
    """HPCC: hop records the sender preallocates in each segment's INT stack (ns-3 IntHeader::maxHop 5)."""
    swift_base_target_ns: int = 20_000
    """Swift: base target delay (Kumar et al SIGCOMM 2020; htsim swift.cpp 20 us)."""
    swift_hop_scale_ns: int = 3053
    """Swift: target delay added per switch crossed, h (htsim: base/6.55)."""
    swift_ai: float = 1.0
    """Swift: additive increment, segments per round trip (htsim 1.0)."""
    swift_beta: float = 0.8
    """Swift: multiplicative decrease constant beta (htsim 0.8)."""
    swift_max_mdf: float = 0.5
    """Swift: largest multiplicative decrease at once (htsim 0.5)."""
    swift_init_cwnd: float = 12.0
    """Swift: initial window in segments (htsim SwiftSubflowSrc default 12)."""
    swift_min_cwnd: float = 0.01
    """Swift: smallest window in segments (htsim: 10 bytes); below one segment the sender paces at rtt/cwnd."""
    swift_max_cwnd: float = 1000.0
    """Swift: largest window in segments (htsim 1000 MSS)."""
    swift_retx_reset: int = 5
    """Swift: timeouts in a row after which the window drops to its minimum (htsim RETX_RESET_THRESHOLD 5)."""
    ndp_iw_segments: int = 15
    """NDP: segments a sender sends blind before the first pull (Handley et al SIGCOMM 2017; htsim main_ndp.cpp cwnd = 15)."""

    def _check_cc(self) -> None:
        if not isinstance(self.cc, str) or not self.cc.isidentifier():
            raise ConfigError(f"host.cc must be the name of a congestion control ({', '.join(CC_BUILT_IN)}, or one an "
                              f"installed package registers), got {self.cc!r}")
        if self.cc != "none" and getattr(self, "transport", "none") != "none":
            raise ConfigError(f"host.cc={self.cc} brings its own transport (acknowledgements, resends) and "
                              f"host.transport={self.transport} would be ignored; leave host.transport at none")
        nic = getattr(self, "nic", None)
        if self.cc == "none" and getattr(nic, "qp_sched", "auto") == "rr":
            raise ConfigError("nic.qp_sched=rr arbitrates between the queue pairs of a congestion control's "
                              "transport; set host.cc (dcqcn, hpcc, swift, ndp) or leave nic.qp_sched at auto")
        if self.cc_entropy not in ENTROPIES:
            raise ConfigError(f"host.cc_entropy must be one of {', '.join(ENTROPIES)}, got {self.cc_entropy!r}")
        if self.cc_recovery not in RECOVERIES:
            raise ConfigError(f"host.cc_recovery must be one of {', '.join(RECOVERIES)}, got {self.cc_recovery!r}")
        for name, lo, hi in (("dcqcn_g", 0.0, 1.0), ("hpcc_u_target", 0.0, 1.0), ("swift_beta", 0.0, 1.0),
                             ("swift_max_mdf", 0.0, 1.0)):
            v = getattr(self, name)
            if not lo < v <= hi:
                raise ConfigError(f"host.{name} must be within ({lo}, {hi}], got {v!r}")
        for name in ("dcqcn_cnp_interval_ns", "dcqcn_alpha_timer_ns", "dcqcn_rate_timer_ns", "dcqcn_f",
                     "swift_retx_reset", "ndp_iw_segments"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"host.{name} must be a positive integer, got {v!r}")
        for name in ("dcqcn_byte_counter_bytes", "dcqcn_rate_decrease_interval_ns", "hpcc_max_stage", "hpcc_base_rtt_ns",
                     "swift_base_target_ns", "swift_hop_scale_ns"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"host.{name} must be an integer >= 0, got {v!r}")
        for name in ("dcqcn_rai_mbps", "dcqcn_rhai_mbps", "dcqcn_min_rate_mbps", "hpcc_rai_mbps", "swift_ai"):
            if getattr(self, name) < 0:
                raise ConfigError(f"host.{name} must be >= 0, got {getattr(self, name)!r}")
        if not 1 <= self.hpcc_int_hops <= 255:
            raise ConfigError(f"host.hpcc_int_hops must be within 1..255, got {self.hpcc_int_hops!r}")
        if not 0 < self.swift_min_cwnd <= self.swift_init_cwnd <= self.swift_max_cwnd:
            raise ConfigError(f"host.swift_min_cwnd <= host.swift_init_cwnd <= host.swift_max_cwnd must hold (all > 0), "
                              f"got {self.swift_min_cwnd}, {self.swift_init_cwnd}, {self.swift_max_cwnd}")
