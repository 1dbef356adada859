"""``emu schedule OPERATION --ranks N --size S [--algo A]``: a collective of the emulator as a GOAL schedule.

The host-software algorithm is run on in-process mailboxes and recorded
(``emu.nodes.workload.goal_collective``); the schedule goes to stdout or ``-o FILE``, for ``emu
replay`` or LogGOPSim. NIC and switch offloads are the NIC's and the switches' own protocols, which a
schedule of host messages cannot express: refused.
"""

from __future__ import annotations

import sys

from ..config import ConfigError


def add_parser(sub, ascii_int) -> None:
    from emu.nodes.collectives.operations import OPERATIONS

    p = sub.add_parser("schedule", help="write a collective of the emulator as a GOAL schedule (for emu replay and "
                                        "LogGOPSim)", allow_abbrev=False)
    p.add_argument("operation", choices=sorted(OPERATIONS), help="the collective")
    p.add_argument("--ranks", type=ascii_int, required=True, help="number of ranks")
    p.add_argument("--size", default="1KiB", help="bytes per rank, as emu run's --size (default 1KiB)")
    p.add_argument("--algo", help="the algorithm (default: emu run's choice by size)")
    p.add_argument("--dtype", default="float32", help="element type (default float32)")
    p.add_argument("--op", default="sum", help="reduction operator (default sum)")
    p.add_argument("--root", type=ascii_int, default=0, help="root of rooted collectives (default 0)")
    p.add_argument("--offload", default="none", help="none only: offloads are not host messages")
    p.add_argument("--set", action="append", metavar="host.reduce_ps_per_byte=PS",
                   help="the host's reduction cost per byte (a calc's time)")
    p.add_argument("-o", "--out", metavar="FILE", help="write the schedule here (default: stdout)")


def cmd_schedule(args) -> int:
    import numpy as np

    from emu.config import HostSpec, parse_settings
    from emu.nodes.collectives import DTYPES, get_op
    from emu.nodes.collectives.select import ALGORITHMS
    from emu.nodes.workload.goal_collective import goal_lines, record

    from .sizes import parse_size

    from emu.nodes.collectives.offloads import canonical_offload, offload_named

    if not offload_named(canonical_offload(args.offload)).hosted:
        raise ConfigError(f"--offload {args.offload}: a GOAL schedule holds host messages and calcs; the NIC's and "
                          "the switches' offload protocols are not expressible in it; give --offload none")
    if not 2 <= args.ranks <= 2048:
        raise ConfigError(f"--ranks {args.ranks}: give 2..2048 ranks")
    if args.dtype not in DTYPES:
        raise ConfigError(f"unknown element type {args.dtype!r}; known: {', '.join(DTYPES)}")
    size = parse_size(args.size)
    item = np.dtype(args.dtype).itemsize
    if size % item or size == 0:
        raise ConfigError(f"--size {args.size}: give a positive whole number of {args.dtype} elements ({item} B)")
    get_op(args.op).check(np.dtype(args.dtype))
    if not 0 <= args.root < args.ranks:
        raise ConfigError(f"--root {args.root} is not one of the {args.ranks} ranks")
    if args.algo is not None and args.algo not in ALGORITHMS[args.operation]:
        raise ConfigError(f"--algo {args.algo}: {args.operation} has {', '.join(sorted(ALGORITHMS[args.operation]))}")
    given = parse_settings(args.set or [])
    extra = {k: v for k, v in given.items() if k != "host"} or {k for k in given.get("host", {}) if k != "reduce_ps_per_byte"}
    if extra:
        raise ConfigError("emu schedule takes only --set host.reduce_ps_per_byte=PS (a calc's time per byte)")
    spec = HostSpec(**given.get("host", {}))
    count = size // item
    if args.operation == "reduce_scatter" and count % args.ranks:
        raise ConfigError(f"reduce_scatter: {count} elements do not split evenly over {args.ranks} ranks")
    algo, logs = record(args.operation, args.ranks, count, args.dtype, args.op, args.algo, args.root, spec.reduce_ns)
    head = (f"emu schedule {args.operation} --algo {algo} --ranks {args.ranks} --size {size} --dtype {args.dtype} "
            f"--op {args.op} --root {args.root}: the emulator's host-software algorithm, recorded")
    out = open(args.out, "w") if args.out else sys.stdout
    try:
        for line in goal_lines(logs, head):
            out.write(line)
    finally:
        if args.out:
            out.close()
    n = sum(len(o) for o in logs)
    print(f"emu schedule: {args.operation} ({algo}) on {args.ranks} ranks, {size:,} bytes: {n:,} operations"
          + (f" written to {args.out}" if args.out else ""), file=sys.stderr)
    return 0
