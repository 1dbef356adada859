"""What a running cluster tells: counters and CPU times per element and process, peak queues,
and the capture of every frame. ``Cluster``'s methods: the cluster holds the handles and the
lock they use."""

from __future__ import annotations

import os
from typing import Any

from ..errors import EmuError
from ..pcapng import capture_order, write_pcapng
from ..sync import RemoteHandle, call_everywhere


class ClusterFigures:
    """The figures and the capture of a running ``Cluster`` (a mixin of ``Cluster``: ``_handles``,
    ``_lock``, ``_captured``, ``topology``, ``run_config`` and ``plan`` are the cluster's)."""

    # -- figures and captures -------------------------------------------------------------------
    async def cpu_times(self) -> list[dict[str, float]]:
        """Per process (domain order, this one first): CPU seconds used so far, in all
        (``process_s``), running windows (``window_s``) and reading datagrams between them
        (``drain_s``) -- cost figures, for comparing runs over several processes (the difference
        of two calls is what a run took; windows are counted from the first call on)."""
        async with self._lock:
            return [await h.call("cpu") for h in self._handles]

    async def window_cpu(self, record: bool = True) -> list[list[float]]:
        """Per process (domain order): its CPU seconds at the start of every window since the last
        call, and from now on recorded (``record``) or no longer. The busiest process's CPU from one
        window's start to the next, summed over the windows, is the run's critical path in CPU
        time: how long it would take with a core per process and instant messages."""
        async with self._lock:
            return [await h.call("cpu_marks", record) for h in self._handles]

    async def stats(self) -> list[dict[str, Any]]:
        """Per element: element counters (drops of foreign/malformed input, recovery), engine
        counters, and per port frames, bytes and peak queue occupancy. What belongs to a process
        rather than to an element is in :meth:`process_stats`."""
        async with self._lock:
            return await self._stats()

    async def process_stats(self) -> list[dict[str, Any]]:
        """Per process (domain order, this one first): its socket's counters -- ``udp_sent`` and
        ``udp_received`` (real UDP datagrams: one per destination per window with the process's
        one socket, ``RunConfig.batch``; else the sum of its elements' own sockets), and with the
        one socket the input it dropped before any element was known (``bad_tag``, ``truncated``,
        ``bad_magic``, ``foreign_cluster``, ``bad_link``; with a socket per element those are the
        elements' own, in :meth:`stats`)."""
        async with self._lock:
            return [await h.call("process_stats") for h in self._handles]

    async def _stats(self) -> list[dict[str, Any]]:
        out = [s for part in await call_everywhere(self._handles, "stats") for s in part]
        order = {name: i for i, name in enumerate(self.topology.nodes)}
        return sorted(out, key=lambda s: order[s["name"]])

    async def reset_peaks(self) -> None:
        """Start measuring peak queue occupancy afresh (e.g. before an operation of interest)."""
        async with self._lock:
            for h in self._handles:
                await h.call("reset_peaks", self.now)

    async def capture_records(self) -> list[tuple[int, int, int, bytes]]:
        """Every frame recorded so far, in capture order (needs capture enabled)."""
        if not self.run_config.capture:
            raise EmuError("capture is off; create the cluster with capture=PATH or RunConfig(capture=True)")
        async with self._lock:
            for h in self._handles:
                self._captured.extend(await h.call("capture"))
        self._captured = capture_order(self._captured)
        return self._captured

    async def write_capture(self, path: str | os.PathLike) -> int:
        """Write every frame recorded so far to a pcapng file; returns the number of frames. The
        processes' spilled runs are merged as they are read: memory stays bounded."""
        if not self.run_config.capture:
            raise EmuError("capture is off; create the cluster with capture=PATH or RunConfig(capture=True)")
        from ..pcapng import merged, read_run

        async with self._lock:
            # an MPI rank may be on another machine: its records come over the channel, not as files
            far = [await h.call("capture") for h in self._handles if self.run_config.mpi and isinstance(h, RemoteHandle)]
            runs = [r for h in self._handles if not (self.run_config.mpi and isinstance(h, RemoteHandle))
                    for r in await h.call("capture_runs")]
        opened = False
        try:
            with open(path, "wb") as f:
                opened = True
                return write_pcapng(f, self.plan.interfaces(),
                                    merged([self._captured, *far] + [read_run(r) for r in runs]))
        except OSError as e:  # a full disk: name the file; an incomplete capture is no capture
            if e.filename not in (None, os.fspath(path)):
                raise
            if opened and os.path.isfile(path):  # (not a device such as /dev/full)
                os.unlink(path)
            raise OSError(e.errno, f"the capture was not written ({e.strerror})", os.fspath(path)) from None
        finally:
            for r in runs:
                try:
                    os.unlink(r)
                    os.rmdir(os.path.dirname(r))
                except OSError:
                    pass
