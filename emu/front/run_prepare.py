"""``emu run``'s input, each point checked before any starts: the tests named, the options in range,
the topology and its faults, the collective and traffic options, the network manager; and the
``RunConfig`` the options make. ``emu topo`` takes its settings layers and output check from here."""

from __future__ import annotations

import math

from rich.markup import escape

from ..config import MIN_REALTIME_NS_PER_S, ConfigError
from .consoles import make_console
from .trace_options import trace_config


def _settings(args) -> tuple[dict, dict]:
    """(--config file, --set items) as settings layers: the file under the spec string, --set over it.
    A replay reads no --config file its record names: it gives the settings recorded as from it."""
    from ..config import load_settings, parse_settings

    recorded = getattr(args, "recorded_config", None)
    config = recorded if recorded is not None else load_settings(args.config) if args.config else {}
    return config, parse_settings(args.set or [])


def _writable(option: str, path: str | None) -> None:
    """Refuse an output path whose folder does not exist, before anything runs."""
    import os

    if path in (None, "-"):
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigError(f"{option} {path}: the folder {folder} does not exist; create it or write elsewhere")
    if os.path.isdir(path):
        raise ConfigError(f"{option} {path} is a folder; give a file name")


def tests_named(given: list[str] | None) -> list[str]:
    """The tests ``--test`` names, in order: each ``--test`` may join several with '+'. A test named
    twice is refused (it would run twice on the same cluster and give two rows of the same name)."""
    from .checks import CHECKS

    names = [n for text in (given or ["pingall"]) for n in text.split("+") if n]
    if not names:
        raise ConfigError(f"--test names no test; known: {', '.join(sorted(CHECKS))}")
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ConfigError(f"unknown test(s) {', '.join(unknown)}; known: {', '.join(sorted(CHECKS))}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"--test names {', '.join(twice)} more than once; each test runs once per command")
    return names


async def _prepare(args, launch=None) -> tuple:
    """One point: (tests, topology, faults, options), refused in one line when bad. ``launch``: the
    worker processes started for its cluster: the first makes the partition while the rest of the
    input is checked (``emu.control.Launch.ask_partition``)."""
    early = await _ask_partition_early(args, launch) if launch is not None else None
    names, offload = _checked_run_args(args)
    topo, faults, defaults, settings = _topology_with_faults(args, early)
    if "goal" in names or "mpirun" in names:
        raise ConfigError("--test goal and --test mpirun run a job's GOAL schedule or mpi4py program: give --job "
                          "NAME:hosts=...,goal=FILE or mpirun=PROGRAM.py (alone: emu replay FILE, emu mpirun PROGRAM.py)")
    extra = _collective_extra(args, names, offload, topo)
    if getattr(args, "gpcnet", None) is not None:
        if "gpcnet" not in names:
            raise ConfigError("--gpcnet applies to --test gpcnet only")
        extra["gpcnet"] = args.gpcnet
    if "gpcnet" in names:
        from .gpcnet import gpcnet_options

        gpcnet_options(extra.get("gpcnet"), len(topo.hosts))  # refused before anything starts
    _add_manager_and_group(args, topo, extra, faults, defaults, settings)
    if launch is not None:  # (the nodes and links are final: the rest only checks)
        from ..partition import graph_of

        await launch.ask_partition(graph_of(topo), args.processes, args.partition)
    from .buffers import check_buffers
    from .estimate import large_run_note
    from .memory import check_memory
    from .runrecord import resolved_settings

    check_buffers(topo, names, offload)  # a frame larger than a switch's buffers can never pass
    check_memory(names, topo, extra)  # a message size whose buffers would not fit in this machine's memory
    config, given = _settings(args)
    args.resolved = resolved_settings(args.topo, config, defaults, given, args.config)
    note = await large_run_note(names, topo, extra, args.seed, args.direct)  # before it starts: a person may rather stop
    if note:
        make_console(stderr=True).print(f"[yellow]{escape(note)}[/]")
    return names, topo, faults, extra


async def _ask_partition_early(args, launch) -> tuple | None:
    """Build the topology and ask worker 1 for its partition at once, before the input is checked:
    the checks import the engines and the collectives (a tenth of a second), which the partition
    then overlaps. Only where nothing after may change the graph -- host software (no offload
    attaches the network manager), no manager, no faults --, and whatever else happens the plan
    takes the partition only if made for the final topology's very graph (``Launch.known_partition``).
    Returns (spec, settings layers, topology) for ``_topology_with_faults`` to take if the same, or
    None; a topology that cannot be built is left to be refused in the usual order."""
    if getattr(args, "offload", None) is not None or args.manager == "on" or args.fault:
        return None
    from emu.topologies.registry import build

    from ..partition import graph_of

    try:
        defaults, settings = _settings(args)
        topo = build(args.topo, defaults=defaults, settings=settings)
    except Exception:  # noqa: BLE001 -- raised again where the usual order builds it
        return None
    await launch.ask_partition(graph_of(topo), args.processes, args.partition)
    return args.topo, defaults, settings, topo


def _checked_run_args(args) -> tuple[list[str], str | None]:
    """The tests named and the offload (None: host software), after refusing options out of range
    and output paths that cannot be written."""
    names = tests_named(args.test)
    from emu.nodes.collectives.offloads import canonical_offload

    offload = canonical_offload(args.offload)  # refused in one line naming the known ones
    if not 0 <= args.seed < 2**63:
        raise ConfigError(f"--seed must be within 0..2**63-1, got {args.seed}")
    if args.realtime is not None and not (math.isfinite(args.realtime) and args.realtime >= MIN_REALTIME_NS_PER_S):
        raise ConfigError(f"--realtime must be a finite number of virtual ns per second, at least "
                          f"{MIN_REALTIME_NS_PER_S:g} (1 us of virtual time per second; slower would pace even a short "
                          f"run over hours), got {args.realtime:g}")
    if args.root is not None and not 0 <= args.root < 2**31:
        raise ConfigError(f"--root {args.root} is not a rank")
    run_config(args)  # refuses a bad --bind (a wildcard address), --processes under mpiexec: before anything starts
    _writable("--pcap", args.pcap)
    _writable("--json", args.json)
    _writable("--csv", args.csv)
    _writable("--trace", args.trace)
    from .formats import check as check_format

    check_format(getattr(args, "format", "table"), names)
    if getattr(args, "format", "table") != "table" and "-" in (args.json, args.csv):
        raise ConfigError(f"--format {args.format} prints to stdout, and so does --json - or --csv -; send them to a file")
    if args.json == "-" and args.csv == "-":
        raise ConfigError("--json - and --csv - both write to stdout; send one of them to a file")
    if args.indent is not None and not 0 <= args.indent <= 16:
        raise ConfigError(f"--indent {args.indent}: give 0..16 spaces")
    return names, offload


def _topology_with_faults(args, early: tuple | None = None) -> tuple:
    """(topology, faults, settings file layer, --set layer): the topology built and validated, and the
    ``--fault`` options parsed, each naming real nodes and links of it. ``early``: (spec, settings
    layers, topology) built already (``_ask_partition_early``), taken if built from the same."""
    from emu.topologies.registry import build

    from ..faults import Fault

    faults = [Fault.parse(f) for f in args.fault or []]
    defaults, settings = _settings(args)
    if faults or args.manager == "on":  # a run that loses frames on purpose: host messages recover them end to end
        defaults = _host_default(defaults, settings, "transport", "reliable")
    from .traffic_checks import PATTERNS, RECEIVING_DRAINS

    if set(tests_named(args.test)) & set(PATTERNS):  # open loop: a packet every cycle drawn, not 300 ns later
        defaults = _host_default(defaults, settings, "send_overhead_ns", 0)
        if getattr(args, "drain", None) in RECEIVING_DRAINS:  # its sources receive between packets: at no cost
            defaults = _host_default(defaults, settings, "recv_overhead_ns", 0)
    if early is not None and early[:3] == (args.topo, defaults, settings):
        topo = early[3]
    else:
        topo = build(args.topo, defaults=defaults, settings=settings)
    topo.validate()
    _check_faults(topo, faults, args.topo)
    return topo, faults, defaults, settings


def _host_default(defaults: dict, settings: dict, field: str, value) -> dict:
    """The settings file layer with ``host.<field>`` = ``value`` where neither it nor --set gives one."""
    if field in defaults.get("host", {}) or field in settings.get("host", {}):
        return defaults
    return {**defaults, "host": {**defaults.get("host", {}), field: value}}


def _check_faults(topo, faults, spec: str = "SPEC") -> None:
    """Refuse a fault on a node or link the topology does not have, before anything starts, naming the
    nearest names it has."""
    from .topo_cmd import check_fault_names

    for note in check_fault_names(topo, faults, spec):
        make_console(stderr=True).print(f"[yellow]{escape(note)}[/]")


def _collective_extra(args, names: list[str], offload: str | None, topo) -> dict:
    """The collective options as the tests take them (``Options.extra``), refused before anything
    starts where no test named takes them or a collective cannot run with them."""
    extra = {"algo": args.algo, "size": args.size, "dtype": args.dtype, "op": args.op, "root": args.root,
             "ranks": args.ranks.split(",") if args.ranks else None, "offload": offload,
             "branch": args.branch, "density": args.density, "overlap": args.overlap,
             "bucket": args.bucket}
    from emu.nodes.collectives.select import ALGORITHMS

    from .checks import collective_options

    given = [k for k, v in extra.items() if v is not None]
    collectives = [n for n in names if n in ALGORITHMS]
    if any(n in ("put", "get") for n in names):
        from .qsnet_checks import put_size

        put_size(extra)  # refused before anything starts
        if given == ["size"]:
            given = []  # put and get take a size too
    traffic = _traffic_extra(args, names, topo, extra)
    if traffic and given == ["size"]:
        given = []  # a traffic test's packet size
    from .flow_checks import TESTS as FLOW_TESTS
    from .flow_options import flow_extra

    flows = flow_extra(args, names, topo, {**extra, "load": args.load})
    if any(n in FLOW_TESTS for n in names) and given == ["size"]:
        given = []  # a flow's size
    if given and not collectives:
        raise ConfigError(f"--{', --'.join(given)} apply to collective tests only; --test {'+'.join(names)} has none")
    if args.branch is not None and not offload:
        raise ConfigError("--branch is the offload tree's degree: give --offload nic or hw too")
    from emu.nodes.collectives.operations import rooted

    if args.root is not None and not any(n in rooted() for n in names):
        raise ConfigError(f"--root applies to {', '.join(rooted())} only")
    for name in collectives:  # refuse options a test cannot run with before anything starts
        opts = collective_options(name, extra, topo.host_names(), topo.hosts[0].spec.nic.queue_capacity,
                                  topo.hosts[0].spec.elan)
        limit = topo.hosts[0].spec.max_message_bytes
        if opts.size > limit:
            raise ConfigError(f"--size {opts.size:,} B is over what the hosts accept in one message "
                              f"(host.max_message_bytes = {limit:,}); use a smaller size or --set "
                              "host.max_message_bytes=...")
    return {**extra, **traffic, **flows, **({"load": args.load} if "poisson" in names else {})}


def _traffic_extra(args, names: list[str], topo, extra: dict) -> dict:
    """The open-loop traffic options (``--load``, ``--warmup``, ``--measure``), refused before anything
    starts when out of range, when a pattern cannot run on the topology, or when no traffic test is named."""
    from .traffic_checks import ONE_PROCESS, PATTERNS, check_pattern, traffic_options

    traffic = {"load": args.load, "warmup": args.warmup, "measure": args.measure, "drain": args.drain,
               "to_self": args.to_self}
    patterns = [n for n in names if n in PATTERNS]
    if not patterns:
        if "poisson" in names and all(v is None for k, v in traffic.items() if k != "load"):
            return {}  # poisson's load (emu.front.flow_options)
        if any(v is not None for v in traffic.values()):
            raise ConfigError(f"--load, --warmup, --measure, --drain and --to-self apply to the traffic tests ({', '.join(PATTERNS)}) "
                              f"only; --test {'+'.join(names)} has none")
        return {}
    traffic_options({**extra, **traffic}, topo)
    if args.drain == "global" and _processes(args) > 1:
        raise ConfigError(ONE_PROCESS)
    for name in patterns:
        check_pattern(name, len(topo.hosts))
    return traffic


def wants_manager(args, faults) -> bool:
    """Is the network manager attached? ``--manager`` (on), or by default when a fault takes a link or
    switch down -- a fat tree's subnet manager, QsNet's manager are there in the fabrics modelled --
    unless ``--manager none`` (the bare network)."""
    if args.manager is not None:
        return args.manager == "on"
    return any(f.action == "down" for f in faults)


def _add_manager_and_group(args, topo, extra: dict, faults, defaults: dict, settings: dict) -> None:
    """Attach the network manager (``--manager``, or for the switch offload, which asks it for a tree)
    and, for the hardware offload, the multicast group over the run's ranks."""
    from ..config import ManagerSpec, merge_settings

    mset = merge_settings(defaults, settings).get("manager", {})
    from emu.nodes.collectives.offloads import OFFLOADS, offload_named

    off = offload_named(extra["offload"])
    if args.manager == "none" and off.needs_manager:
        raise ConfigError(f"--offload {off.name} asks the network manager for its trees; leave out --manager none")
    if mset and not wants_manager(args, faults) and not off.needs_manager:
        itself = ", ".join(f"--offload {n}" for n, o in OFFLOADS.items() if o.needs_manager)
        how = "leave out --manager none" if args.manager == "none" else "give --manager too"
        raise ConfigError(f"manager.{next(iter(mset))} (--set or [manager] in --config) is a setting of the network "
                          f"manager, and this run has none: {how} ({itself} attaches one itself, and so does a "
                          "--fault that takes a link or switch down)")
    if wants_manager(args, faults) or off.needs_manager:  # in-network allreduce asks the network manager for a tree
        spec, notes = ManagerSpec(**mset), []
        if spec.bringup:  # enough test frames to catch the links given a bit-error rate from the start
            from ..bringup import sized

            spec, notes = sized(spec, {"-".join(f.link): f.rate for f in faults if f.action == "ber" and f.at_ns == 0})
        topo.add_manager(spec=spec).info["bringup_notes"] = notes
    # the multicast groups its collectives use (hw: over the run's ranks); a switch or link down from the
    # start: the group's tree is rooted and routed around it
    avoid = [f.switch or f.link for f in faults if f.action == "down" and f.at_ns == 0]
    off.add_groups(topo, extra["ranks"] or topo.host_names(), avoid=avoid)


def _processes(args) -> int:
    """The processes ``emu run`` runs over: ``--processes``, or under ``mpiexec -n N`` the N ranks."""
    from ..mpi import world

    processes, size = args.processes, world()[1]
    if size > 1:
        if args.processes not in (1, size):
            raise ConfigError(f"--processes {args.processes} under mpiexec -n {size}: the ranks are the "
                              "processes; leave --processes out")
        processes = size
    return processes


def run_config(args) -> "RunConfig":
    """How ``emu run`` runs: under ``mpiexec -n N`` the N ranks are its processes (``emu.mpi``)."""
    from ..config import RunConfig
    from ..mpi import world

    processes, size = _processes(args), world()[1]
    return RunConfig(seed=args.seed, processes=processes, capture=bool(args.pcap), realtime_ns_per_s=args.realtime,
                     direct=args.direct, bind=args.bind, partition=args.partition, mpi=size > 1,
                     **trace_config(args))
