"""The jobs of ``emu run --job`` at once on one cluster, then each alone on the same hosts.

Each job runs its test as a ``--test`` run would (``run_check``), but on a view of the cluster
(:class:`JobNet`) whose ``hosts`` are the job's and whose ``run`` does not run at once: it waits
until every job still running has asked for its next episode, and then one ``Cluster.run`` starts
all their applications together -- the jobs share the fabric, each on its own hosts. A job's first
episode starts ``start_ns`` late (its applications sleep that long first); the later episodes of a
job that runs several (a traffic test's loads, an offload's setup) meet the other jobs' later
episodes, each started when the slowest job of the one before is done. Every job's time is its
own: a collective's completion from its own start, and for a test without one the span from its
start to its last application's end.

Then each job again alone, on the same hosts of the same cluster (``--no-isolated`` skips it), and
its row gives ``slowdown`` = shared / alone completion. The same seed gives the same figures over
any ``--processes``: the shared episodes are ordinary runs of the cluster.
"""

from __future__ import annotations

from typing import Any

import trio

from ..errors import EmuError


async def job_app(host, delay: int, fn, *args):
    """A job's application: ``delay`` ns late, then ``fn``; returns (its value, when it ended)."""
    if delay:
        await host.sleep(delay)
    value = await fn(host, *args)
    return value, host.now


class _JobMetrics:
    """The shared episode's metrics, with the job's own completion (``run_check`` reads it when the
    test gives none)."""

    def __init__(self, metrics, completion_ns: int | None):
        self._m, self.completion_ns = metrics, completion_ns

    def __getattr__(self, name: str):
        return getattr(self._m, name)


class JobNet:
    """The cluster as one job's test sees it: its hosts, and episodes shared with the other jobs."""

    def __init__(self, net, coord: "Coordinator", job):
        self._net, self._coord, self.job = net, coord, job
        self.started = False
        self.span_ns: int | None = None
        """This job's last episode: from its start to its last application's end."""

    @property
    def hosts(self) -> list[str]:
        return list(self.job.hosts)

    @property
    def now(self) -> int:  # a test's t0 (read before its run) is its own start
        return self._net.now + (0 if self.started else self._coord.delay(self.job))

    @property
    def metrics(self):
        m = self._net.metrics
        return None if m is None else _JobMetrics(m, self.span_ns)

    async def run(self, apps: dict) -> dict[str, Any]:
        return await self._coord.submit(self, apps)

    def __getattr__(self, name: str):  # topology, trace marks, stats: the cluster's
        return getattr(self._net, name)


class Coordinator:
    """Gathers the jobs' episodes and runs each round of them as one ``Cluster.run``."""

    def __init__(self, net, shared: bool):
        self.net, self.shared = net, shared
        self.live: set[str] = set()
        self.waiting: dict[str, tuple[JobNet, dict, trio.Event, list]] = {}
        self.changed = trio.Event()

    def delay(self, job) -> int:
        return job.start_ns if self.shared else 0

    async def submit(self, view: JobNet, apps: dict) -> dict[str, Any]:
        done, box = trio.Event(), []
        self.waiting[view.job.name] = (view, apps, done, box)
        self.changed.set()
        await done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def finished(self, name: str) -> None:
        self.live.discard(name)
        self.changed.set()

    async def drive(self) -> None:
        while self.live:
            await self.changed.wait()
            self.changed = trio.Event()
            if not self.live or set(self.waiting) != self.live:
                continue
            await self._round()

    async def _round(self) -> None:
        batch, self.waiting = self.waiting, {}
        start = self.net.now
        merged: dict[str, tuple] = {}
        for view, apps, _, _ in batch.values():
            delay = 0 if view.started else self.delay(view.job)
            for host, spec in apps.items():
                if host not in view.job.hosts:
                    raise EmuError(f"job {view.job.name}: its test runs an application on {host}, not one of its hosts")
                fn, args = (spec[0], tuple(spec[1:])) if isinstance(spec, tuple) else (spec, ())
                merged[host] = (job_app, delay, fn, *args)
        try:
            out = await self.net.run(merged)
            error = None
        except EmuError as e:  # an application failed, or a deadlock: every job of the episode says so
            out, error = {}, e
        for name, (view, apps, done, box) in batch.items():
            delay = 0 if view.started else self.delay(view.job)
            view.started = True
            if error is not None:
                box.append(error)
            else:
                ends = [out[h][1] for h in apps]
                view.span_ns = max(ends) - start - delay if ends else 0
                box.append({h: out[h][0] for h in apps})
            done.set()


async def run_round(net, jobs, seed: int, shared: bool) -> list:
    """``jobs`` at once (``shared``: with their start times), each its test; their CheckResults in order."""
    from .checks import Options, run_check

    coord = Coordinator(net, shared)
    results: dict[str, Any] = {}
    views = {j.name: JobNet(net, coord, j) for j in jobs}
    coord.live = set(views)

    async def one(job) -> None:
        try:
            results[job.name] = await run_check(views[job.name], job.test, Options(seed=seed, extra=job.extra))
        finally:
            coord.finished(job.name)

    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(one, job)
        nursery.start_soon(coord.drive)
    return [results[j.name] for j in jobs]


async def run_jobs(net, jobs, seed: int, isolated: bool = True) -> list:
    """The jobs together, then (``isolated``) each alone: a row per job, named ``JOB:TEST``, with its
    hosts, class, start and, beside its shared completion, the alone one and the slowdown."""
    import time

    wall = time.perf_counter()
    shared = await run_round(net, jobs, seed, True)
    wall = round(time.perf_counter() - wall, 3)
    alone = [None] * len(jobs)
    if isolated:
        for i, job in enumerate(jobs):
            alone[i] = (await run_round(net, [job], seed, False))[0]
    rows = []
    for job, r, a in zip(jobs, shared, alone):
        r.name = f"{job.name}:{job.test}"
        info = {"job": job.name, "hosts": len(job.hosts), "placement": job.hosts_text, "class": job.traffic_class,
                "prio": job.prio,
                "job_start_ns": job.start_ns}
        if a is not None:
            info["isolated_ns"] = a.completion_ns
            if r.ok and a.ok and r.completion_ns and a.completion_ns:
                info["slowdown"] = round(r.completion_ns / a.completion_ns, 4)
            elif not a.ok:
                info["isolated_error"] = a.error
        r.figures = {**info, **r.figures, "host_list": ",".join(job.hosts), "wall_s": wall}
        rows.append(r)
    return rows
