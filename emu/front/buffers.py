"""Finite switch buffers against the frames a run sends: refused before anything starts.

With credit flow control (``switch.vc_buffer_bytes`` > 0) a frame enters a switch's input only whole,
into its VC's buffer or the shared pool; a frame larger than both can never pass, and the run would
stop in a credit deadlock. The largest frame a run sends is known from the settings: a message
segment of ``host.mtu_bytes`` (46 header bytes and the 4-byte FCS around it), a QsNet packet of
``elan.packet_bytes`` (put, get and the hardware collectives), a bring-up test frame of
``manager.test_bytes``.
"""

from __future__ import annotations

from ..config import ConfigError

MSG_OVERHEAD = 46 + 4
"""Ethernet 14, fabric 16, message segment 16 and the FCS around ``host.mtu_bytes`` (``HostSpec``)."""


def largest_frames(topo, names: list[str], offload: str | None) -> list[tuple[int, str, int]]:
    """(bytes on the socket, what it is, its fabric ptype) of the largest frame of each kind the run
    sends; a switch counts their modelled lengths on the links into it (``check_buffers``)."""
    from emu.wire import FCS_LEN, HDR_LEN
    from emu.wire.fabric import PacketType
    from emu.wire.qsnet import MGMT, TXN_LEN, packet_bytes

    host = topo.hosts[0].spec
    out = [(host.mtu_bytes + MSG_OVERHEAD, f"a message segment of host.mtu_bytes={host.mtu_bytes} with its headers",
            PacketType.MSG)]
    from emu.nodes.collectives.offloads import offload_named

    if offload_named(offload).qsnet_packets or any(n in ("put", "get") for n in names):
        pb = host.elan.packet_bytes
        out.append((HDR_LEN + packet_bytes(TXN_LEN + pb) + FCS_LEN,
                    f"a QsNet packet (elan.packet_bytes={pb} with its headers and FCS)", PacketType.QPKT))
    if topo.manager is not None:
        m = topo.nodes[topo.manager].info["manager"]
        if m.bringup:
            out.append((HDR_LEN + MGMT.size + m.test_bytes + FCS_LEN,
                        f"a bring-up test frame (manager.test_bytes={m.test_bytes} with its headers and FCS)",
                        PacketType.MGMT))
    return out


def check_buffers(topo, names: list[str], offload: str | None) -> None:
    """Refuse finite switch buffers that the largest frame of the run cannot enter, in the framing of
    the links into each switch (a frame's flits are those of its modelled length there)."""
    from emu.wire import FCS_LEN, HDR_LEN
    from emu.wire.framing import frame_length

    kinds = largest_frames(topo, names, offload)
    framings: dict[str, set] = {}
    for lk in topo.links:
        for n in (lk.a, lk.b):
            framings.setdefault(n, set()).add(lk.spec.framing)
    for s in topo.switches:
        spec = s.spec
        vc = getattr(spec, "vc_buffer_bytes", 0)
        if not vc:
            continue
        size, what = max((frame_length(f, ptype, n - HDR_LEN - FCS_LEN), w) for n, w, ptype in kinds
                         for f in framings.get(s.name, {"ethernet"}))
        if max(vc, getattr(spec, "pool_bytes", 0)) < size:
            raise ConfigError(f"switch.vc_buffer_bytes={vc} is smaller than the largest frame of this run, "
                              f"{size:,} B on the links into {s.name} ({what}): it could never enter {s.name}'s buffer and the run would "
                              f"deadlock; give switch.vc_buffer_bytes={size} or more")
