"""``emu run --job NAME:hosts=...,test=...`` and ``[[job]]`` tables in ``--config``: several workloads
on one cluster at once (docs/jobs.md). Each job is read, placed (``emu.nodes.workload.placement``)
and its test's options checked -- by the same checks a ``--test`` of its own passes -- before
anything starts; :mod:`emu.front.jobs_run` runs them."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import ConfigError

WORKLOAD_KEYS = ("size", "algo", "dtype", "op", "root", "density", "overlap", "bucket", "load", "warmup", "measure",
                 "drain", "to_self", "gpcnet")
"""A job's workload options: the ``emu run`` options of the same name (``to-self`` also as written there)."""
KEYS = ("hosts", "test", "start", "class", "goal", "mpirun", *WORKLOAD_KEYS)
_INTS = ("root", "bucket", "warmup", "measure")
_FLOATS = ("density", "overlap")


@dataclass
class Job:
    name: str
    test: str
    hosts: tuple[str, ...]
    start_ns: int = 0
    """When the job starts, from the shared run's start (its first episode; ``start=10us``)."""
    traffic_class: int = 0
    """Its class (0..7, ``class=``): its hosts' ``HostSpec.traffic_class`` -- the fabric prio of their
    message frames -- is ``queues.class_map``'s entry for it (the class itself by default)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """The test's options, as ``Options.extra`` of a ``--test`` run."""
    hosts_text: str = ""
    prio: int = 0
    """The fabric prio its class maps to (``apply_host_specs``)."""


def job_texts(args) -> list[dict[str, Any]]:
    """The jobs of the command line and of its ``--config`` file, as raw tables ({key: value}, with
    ``name``), in order: the file's first."""
    tables = config_jobs(args.config) if getattr(args, "config", None) and getattr(args, "recorded_config", None) is None else []
    for text in getattr(args, "job", None) or []:
        tables.append(parse_job(text))
    return tables


def parse_job(text: str) -> dict[str, Any]:
    """``NAME:key=value,key=value`` (``hosts=[a,b]`` may hold commas inside its brackets)."""
    name, sep, rest = text.partition(":")
    name = name.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name):
        raise ConfigError(f"--job {text!r}: give NAME:hosts=...,test=... (a name of letters, digits, _ . -; "
                          "e.g. --job a:hosts=packed:8,test=allreduce,size=64KiB)")
    out: dict[str, Any] = {"name": name}
    depth, item, items = 0, "", []
    for ch in rest:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(item)
            item = ""
        else:
            item += ch
    items.append(item)
    for it in (i.strip() for i in items if i.strip()):
        key, eq, value = it.partition("=")
        key = key.strip().replace("-", "_")
        if not eq:
            raise ConfigError(f"--job {name}: {it!r} is not KEY=VALUE; keys: {', '.join(KEYS)}")
        if key not in KEYS:
            raise ConfigError(f"--job {name}: unknown key {key!r}; keys: {', '.join(KEYS)}")
        if key in out:
            raise ConfigError(f"--job {name}: {key}= given twice")
        out[key] = value.strip()
    return out


def config_jobs(path: str) -> list[dict[str, Any]]:
    """The ``[[job]]`` tables of a ``--config`` TOML file (each with ``name``)."""
    from ..config.files import read_toml

    data = read_toml(path, f"--config {path}")
    tables = data.get("job", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"--config {path}: job must be an array of tables ([[job]] with name = ..., hosts = ..., test = ...)")
    out = []
    for i, t in enumerate(tables):
        name = t.get("name")
        if not isinstance(name, str):
            raise ConfigError(f"--config {path}: [[job]] number {i + 1} has no name = \"...\"")
        unknown = [k for k in t if k != "name" and k.replace("-", "_") not in KEYS]
        if unknown:
            raise ConfigError(f"--config {path}: [[job]] {name}: unknown key {unknown[0]!r}; keys: {', '.join(KEYS)}")
        row = {k.replace("-", "_"): v for k, v in t.items()}
        for k in ("hosts", "mpirun", "load"):
            if isinstance(row.get(k), list):
                row[k] = "[" + ",".join(str(h) for h in row[k]) + "]"
        out.append({k: v if isinstance(v, (str, bool)) or k == "name" else str(v) for k, v in row.items()})
    return out


def _read(path: str) -> str:
    from ..config.files import read

    data = read(path, f"hosts=file:{path}", "mapping")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"hosts=file:{path}: not UTF-8 text; give host names, one a line") from None


def resolve(args, topo, tables: list[dict[str, Any]]) -> list[Job]:
    """The jobs placed on ``topo`` and each one's options checked; ConfigError in one line."""
    from emu.nodes.workload.placement import parse_hosts, place

    from ..faults import parse_time_ns
    from . import mpirun_check  # noqa: F401  (registers the test mpirun: only a job runs it; emu.front.checks
    from .run_prepare import _collective_extra, tests_named  # imports it not, as emu.front.mpirun imports checks)
    from emu.nodes.collectives.offloads import canonical_offload

    if args.test or any(getattr(args, k, None) not in (None, False) for k in WORKLOAD_KEYS if k != "gpcnet") \
            or args.ranks or canonical_offload(args.offload) is not None:
        raise ConfigError("with --job, give each job's test and its options inside it (--job a:hosts=packed:4,"
                          "test=allreduce,size=1KiB), not as --test, --size, ... of the run")
    names = [t["name"] for t in tables]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"--job {twice[0]} is given twice; each job needs a name of its own")
    all_hosts = topo.host_names()
    requests = []
    for t in tables:
        if "hosts" not in t:
            raise ConfigError(f"--job {t['name']}: give hosts= (a list h0+h1, a range h0-h7, or packed:N, random:N, "
                              "interleaved:N, file:PATH)")
        requests.append((t["name"], parse_hosts(t["name"], str(t["hosts"]), all_hosts, _read)))
    placed = place(requests, all_hosts, args.seed)
    jobs = []
    for t in tables:
        name = t["name"]
        try:
            test = t.get("test") or ("goal" if "goal" in t else "mpirun" if "mpirun" in t else "pingall")
            for key in ("goal", "mpirun"):
                if (key in t) != (test == key):
                    raise ConfigError(f"{key}= is the job's workload: give it without test= (or test={key} with {key}=)")
            (test,) = tests_named([test]) if "+" not in test else (None,)
            if test is None:
                raise ConfigError(f"test={t['test']}: a job runs one test; give one job per test")
            jargs = argparse.Namespace(**vars(args))
            jargs.test = [test]
            for k in WORKLOAD_KEYS:
                v = t.get(k)
                if k in _INTS and v is not None:
                    v = _number(k, v, int)
                elif k in _FLOATS and v is not None:
                    v = _number(k, v, float)
                elif k == "load" and v is not None:  # several: load=[0.3,0.5] or load=0.3+0.5
                    v = str(v).strip().strip("[]").replace("+", ",").replace(" ", "")
                elif k == "to_self" and v is not None:
                    v = str(v).lower() in ("1", "true", "yes", "")
                setattr(jargs, k, v)
            jargs.ranks, jargs.offload, jargs.branch = None, None, None
            extra = _collective_extra(jargs, [test], None, topo)
            if t.get("gpcnet") is not None:
                if test != "gpcnet":
                    raise ConfigError("gpcnet= applies to test=gpcnet only")
                extra["gpcnet"] = t["gpcnet"]
            if test == "gpcnet":
                from .gpcnet import gpcnet_options

                gpcnet_options(extra.get("gpcnet"), len(placed[name]))
            if test == "goal":
                from .replay_goal import read_goal

                schedule, _sha = read_goal(str(t["goal"]))
                if schedule.num_ranks != len(placed[name]):
                    raise ConfigError(f"goal={t['goal']} has {schedule.num_ranks} ranks and the job {len(placed[name])} "
                                      "hosts; give one host per rank")
                extra.update(goal_schedule=schedule, goal=str(t["goal"]))
            if test == "mpirun":
                from .mpirun_check import program

                if args.processes != 1 or getattr(args, "mpi", False):
                    raise ConfigError("an mpirun= job's ranks talk to the emulator's own process: leave out --processes")
                extra["mpirun"] = program(str(t["mpirun"]))
            start = parse_time_ns(str(t.get("start", "0")))
            klass = _number("class", t.get("class", "0"), int)
            if klass not in range(8):
                raise ConfigError(f"class={klass}: the traffic classes are 0..7 (the fabric header's prio through "
                                  "queues.class_map; the switches' class queues)")
        except ConfigError as e:
            msg = str(e)
            raise ConfigError(msg if msg.startswith(f"--job {name}") else f"--job {name}: {msg}") from None
        jobs.append(Job(name, test, placed[name], start, klass, extra, str(t["hosts"])))
    if len(jobs) < 1:
        raise ConfigError("--job: no job given")
    return jobs


def _number(key: str, value, kind):
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value}: not {'a whole number' if kind is int else 'a number'}") from None


def apply_host_specs(topo, jobs: list[Job], defaults: dict, settings: dict) -> None:
    """Onto each job's hosts' spec: its traffic class (the NIC stamps it on their message frames), and
    for an open-loop traffic test what ``emu run --test uniform`` sets on every host unless given
    (``host.send_overhead_ns=0``; with ``drain=measured`` or ``global`` also ``recv_overhead_ns=0``)."""
    from .traffic_checks import PATTERNS, RECEIVING_DRAINS

    given = {**defaults.get("host", {}), **settings.get("host", {})}
    prio_of = class_map(topo, jobs)
    groups = vc_groups(topo, jobs)
    for job in jobs:
        prio = job.prio = prio_of[job.traffic_class]
        change: dict = {"traffic_class": prio} if prio else {}
        if groups > 1 and job.traffic_class:
            change["class_vc"] = job.traffic_class
        if job.test in PATTERNS:
            change.update({f: 0 for f in ("send_overhead_ns", "recv_overhead_ns")
                           if f not in given and (f == "send_overhead_ns" or job.extra.get("drain") in RECEIVING_DRAINS)})
        if change:
            for h in job.hosts:
                node = topo.nodes[h]  # (a Node is frozen: a new one in its place, the dict's order kept)
                topo.nodes[h] = replace(node, spec=replace(node.spec, **change))


def class_map(topo, jobs: list[Job]) -> list[int]:
    """The fabric prio of each job class (``queues.class_map``, the same on every switch); refused where
    a job's prio is above 1 and no switch has class queues to tell it from prio 1."""
    switches = [n for n in topo.nodes.values() if getattr(n.spec, "queues", None) is not None]
    maps = {tuple(n.spec.queues.prio_of) for n in switches}
    if len(maps) > 1:
        raise ConfigError("queues.class_map differs between switches; a job's class has one prio on the whole fabric: "
                          "give queues.class_map once for all")
    prio_of = list(maps.pop()) if maps else list(range(8))
    queued = any(n.spec.queues.on and (getattr(n.spec, "model", "") == "output_queued" or n.spec.queues.arbiter == "drr")
                 for n in switches)
    for job in jobs:
        p = prio_of[job.traffic_class]
        if p > 1 and not queued:
            raise ConfigError(f"--job {job.name}: class={job.traffic_class} is prio {p}, and with no class queues in the "
                              "switches a port tells only prio 0 from the rest: turn class queues on (e.g. --set "
                              "queues.arbiter=drr, or queues.buffer_bytes) or use class 0 or 1")
    return prio_of


def vc_groups(topo, jobs: list[Job]) -> int:
    """The VC groups a job's class maps to on input-queued routers (``switch.classes`` with
    ``vc_policy=by_class``: class k on group k); 1: none (classes share the VCs). Refused where a job's
    class has no group."""
    iq = [n.spec for n in topo.nodes.values() if getattr(n.spec, "model", "") == "input_queued"]
    groups = min((s.classes for s in iq if s.vc_policy == "by_class"), default=1)
    for job in jobs:
        if groups > 1 and job.traffic_class >= groups:
            raise ConfigError(f"--job {job.name}: class={job.traffic_class} has no VC group on the input-queued routers "
                              f"(switch.classes={groups}: classes 0..{groups - 1}); give switch.classes more groups or "
                              "a lower class")
    return groups


async def prepare_jobs(args) -> tuple:
    """``_prepare`` of a run of jobs: (no tests, topology, faults, {"jobs": [...]})."""
    from .run_prepare import _add_manager_and_group, _topology_with_faults, _writable, run_config

    if not 0 <= args.seed < 2**63:
        raise ConfigError(f"--seed must be within 0..2**63-1, got {args.seed}")
    run_config(args)
    for opt in ("pcap", "json", "csv", "trace"):
        _writable(f"--{opt}", getattr(args, opt))
    if getattr(args, "format", "table") != "table":
        raise ConfigError(f"--format {args.format} prints collective sweeps; a run of --job prints a row per job")
    tables = job_texts(args)
    if getattr(args, "recorded_config", None) is not None:  # a replay reads no file its record names
        named = [t["name"] for t in tables if str(t.get("hosts", "")).startswith("file:") or "goal" in t or "mpirun" in t]
        if named:
            raise ConfigError(f"--replay: --job {named[0]} reads a file (hosts=file:, goal= or mpirun=); a replay reads no file "
                              "its record names: run the command again instead")
    given = args.test
    args.test = None  # (the traffic tests' host settings go onto their jobs' hosts only: apply_host_specs)
    try:
        topo, faults, defaults, settings = _topology_with_faults(args)
    finally:
        args.test = given
    jobs = resolve(args, topo, tables)
    apply_host_specs(topo, jobs, defaults, settings)
    _add_manager_and_group(args, topo, {"offload": None, "ranks": None}, faults, defaults, settings)
    from .runrecord import resolved_settings
    from .run_prepare import _settings

    config, given_set = _settings(args)
    args.resolved = resolved_settings(args.topo, config, defaults, given_set, args.config)
    return [], topo, faults, {"jobs": jobs}
