"""Where the jobs of a run go (``emu run --job NAME:hosts=...``): a job's hosts given by list or
range, or drawn by a placement policy from the hosts the other jobs leave free. Pure data: host
names in, host names out; a file a job names is read at the front door (``emu.front.jobs``).

A ``hosts=`` value is one of

* a list of hosts, ``h0+h3+h5`` or ``[h0,h3,h5]``: names or indices (``0`` is the first host in
  address order), each item may be a range ``h0-h7`` or ``0-7`` (both ends included);
* ``packed:N`` -- the N lowest free hosts in address order (whole leaves of a tree first);
* ``random:N`` -- N free hosts drawn with the run's seed (and the job's name), as a busy
  scheduler leaves them (GPCNeT draws its jobs' nodes this way);
* ``interleaved:N`` -- N free hosts spread evenly over the free ones (every other host for two
  jobs of half the machine each: every leaf then holds hosts of both);
* ``file:PATH`` -- the hosts listed in a file (names, one a line or separated by spaces or commas;
  ``#`` starts a comment).

Jobs with explicit hosts (lists, ranges, files) are placed first, then the policies in the jobs'
order, each from the hosts still free: the same jobs and seed always give the same hosts.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from emu.config import ConfigError

POLICIES = ("packed", "random", "interleaved", "file")


@dataclass(frozen=True)
class HostRequest:
    """A job's ``hosts=``: an explicit list (``hosts``), or a policy and a count."""

    policy: str | None
    count: int = 0
    hosts: tuple[str, ...] = ()
    text: str = ""


def parse_hosts(job: str, text: str, all_hosts: list[str], read_file=None) -> HostRequest:
    """``hosts=TEXT`` of job ``job`` against the topology's hosts; ConfigError in one line naming the fix.
    ``read_file(path) -> str`` reads a ``file:PATH`` (the front door's; None refuses files)."""
    text = text.strip()
    where = f"--job {job}: hosts={text}"
    if not text:
        raise ConfigError(f"--job {job}: hosts= is empty; give a list (h0+h1), a range (h0-h7) or a policy "
                          f"({', '.join(p + ':N' for p in POLICIES[:3])}, file:PATH)")
    head, sep, rest = text.partition(":")
    if sep and head in POLICIES:
        if head == "file":
            if read_file is None:
                raise ConfigError(f"{where}: no file can be read here")
            names = [w for line in read_file(rest).splitlines() for w in re.split(r"[\s,]+", line.split("#")[0]) if w]
            if not names:
                raise ConfigError(f"{where}: the file lists no host")
            return HostRequest(None, len(names), _items(where, names, all_hosts), text)
        if not re.fullmatch(r"[0-9]+", rest) or int(rest) < 1:
            raise ConfigError(f"{where}: {head}:N takes a whole number of hosts N >= 1")
        return HostRequest(head, int(rest), (), text)
    if sep and not head.startswith("["):
        raise ConfigError(f"{where}: unknown placement {head!r}; known: {', '.join(POLICIES)}")
    body = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    items = [w for w in re.split(r"[+,]", body) if w.strip()]
    if not items:
        raise ConfigError(f"{where}: names no host")
    hosts = _items(where, [w.strip() for w in items], all_hosts)
    return HostRequest(None, len(hosts), hosts, text)


def _items(where: str, items: list[str], all_hosts: list[str]) -> tuple[str, ...]:
    index = {h: i for i, h in enumerate(all_hosts)}
    out: list[str] = []
    for item in items:
        if item in index:
            out.append(item)
        elif re.fullmatch(r"[0-9]+", item):
            out.append(_at(where, int(item), all_hosts))
        elif "-" in item:
            a, b = item.split("-", 1)
            lo, hi = _end(where, a, index, all_hosts), _end(where, b, index, all_hosts)
            if hi < lo:
                raise ConfigError(f"{where}: the range {item} runs backwards; give the lower host first")
            out.extend(all_hosts[lo:hi + 1])
        else:
            raise ConfigError(f"{where}: {item!r} is not a host of this topology ({all_hosts[0]}..{all_hosts[-1]})")
    twice = sorted({h for h in out if out.count(h) > 1}, key=index.get)
    if twice:
        raise ConfigError(f"{where}: lists {', '.join(twice)} twice")
    return tuple(out)


def _at(where: str, i: int, all_hosts: list[str]) -> str:
    if not 0 <= i < len(all_hosts):
        raise ConfigError(f"{where}: host index {i} is out of range; the topology has {len(all_hosts)} hosts (0..{len(all_hosts) - 1})")
    return all_hosts[i]


def _end(where: str, end: str, index: dict, all_hosts: list[str]) -> int:
    if end in index:
        return index[end]
    if re.fullmatch(r"[0-9]+", end):
        return index[_at(where, int(end), all_hosts)]
    raise ConfigError(f"{where}: {end!r} is not a host of this topology ({all_hosts[0]}..{all_hosts[-1]})")


def place(requests: list[tuple[str, HostRequest]], all_hosts: list[str], seed: int) -> dict[str, tuple[str, ...]]:
    """Each job's hosts: explicit requests first (refused when two share a host), then the policies in
    the jobs' order from the hosts still free (refused when too few are left)."""
    taken: dict[str, str] = {}
    out: dict[str, tuple[str, ...]] = {}
    for job, req in requests:
        if req.policy is None:
            for h in req.hosts:
                if h in taken:
                    raise ConfigError(f"--job {job} and --job {taken[h]} both take {h}; jobs run on disjoint hosts")
                taken[h] = job
            out[job] = req.hosts
    total = sum(r.count for _, r in requests)
    if total > len(all_hosts):
        raise ConfigError(f"the jobs ask for {total} hosts and the topology has {len(all_hosts)}; "
                          "give fewer hosts or a larger topology")
    for job, req in requests:
        if req.policy is None:
            continue
        free = [h for h in all_hosts if h not in taken]
        if req.count > len(free):
            raise ConfigError(f"--job {job}: hosts={req.text} asks for {req.count} hosts, {len(free)} are left free")
        out[job] = pick(req.policy, req.count, free, seed, job)
        for h in out[job]:
            taken[h] = job
    return {job: out[job] for job, _ in requests}


def pick(policy: str, n: int, free: list[str], seed: int, job: str) -> tuple[str, ...]:
    """``n`` of the ``free`` hosts (address order) by ``policy``."""
    if policy == "packed":
        return tuple(free[:n])
    if policy == "interleaved":  # evenly spread: the k-th of n at floor(k * len(free) / n)
        return tuple(free[k * len(free) // n] for k in range(n))
    if policy == "random":
        rng = random.Random(f"{seed}/job/{job}")  # (str seeds hash the same in every process)
        chosen = set(rng.sample(range(len(free)), n))
        return tuple(h for i, h in enumerate(free) if i in chosen)
    raise ConfigError(f"unknown placement {policy!r}; known: {', '.join(POLICIES)}")
