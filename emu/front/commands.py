"""The commands that start no cluster: ``emu topo`` (what a topology is made of), ``emu plan`` (the
planner of network-coded broadcast) and ``emu wireshark`` (the Lua dissector)."""

from __future__ import annotations

import json
import sys

from rich.table import Table

from ..config import ConfigError
from .consoles import console, make_console
from .run_prepare import _settings, _writable


def cmd_topo(args) -> int:
    from emu.topologies.registry import build

    _writable("--json", args.json)
    defaults, settings = _settings(args)
    t = build(args.spec, defaults=defaults, settings=settings)
    t.validate()
    figures = {"topology": t.name, "hosts": len(t.hosts), "switches": len(t.switches), "links": len(t.links),
               "diameter": t.diameter, "bisection": t.bisection, **t.figures}
    table = Table(title=t.name, show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("hosts", str(len(t.hosts)))
    table.add_row("switches", str(len(t.switches)))
    f = t.figures
    if "node_switches" in f:  # a federated network (spec 03, Table I): node-switch chassis and top switches
        tops = [s for s in t.switches if s.info.get("stage") == 3]
        table.add_row("  node switches (chassis of routers)", f"{f['node_switches']} x {2 * 8}")
        table.add_row("  top switches", f"{f['top_switches']}" + (f" of radix {tops[0].info['radix']}" if tops else
                                                                  (" (two chassis joined directly)"
                                                                   if f["node_switches"] == 2 else "")))
        table.add_row("  cables (the nodes' own included)", str(f["cables"]))
        if f.get("top_chassis"):
            table.add_row("  top switches in node-switch chassis (one element each)", str(f["top_chassis"]))
    routers = {s.info["router"] for s in t.switches if "router" in s.info}
    if routers:
        table.add_row("  carved out of routers" + (" (one element each)" if "node_switches" in f else ""),
                      str(len(routers)))
    table.add_row("links", str(len(t.links)))
    for key, v in f.items():  # a dragonfly's, HyperX's or Slim Fly's cables by kind
        if key.startswith("cables_"):
            table.add_row(f"  {key[7:]} cables", str(v))
    table.add_row("diameter (links, host to host)", str(t.diameter))
    table.add_row("bisection width (links)", "n/a" if t.bisection is None else str(t.bisection))
    specs = {(link.spec.latency_ns, link.spec.bandwidth_bps) for link in t.links}
    table.add_row("link latency / bandwidth",
                  ", ".join(f"{lat} ns / {bw / 1e9:g} Gbit/s" for lat, bw in sorted(specs)))
    from .topo_cmd import listing

    if not listing(args, t):  # --links, --nodes, --format: stdout holds them
        (make_console(stderr=True) if args.json == "-" else console).print(table)
    if args.json == "-":
        json.dump(figures, sys.stdout, indent=2)
        print()
    elif args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)
    return 0


def personal_plugin_dir() -> str:
    """Wireshark's personal Lua plugin folder (as tshark reports it, else the Linux default)."""
    import os
    import shutil
    import subprocess

    if shutil.which("tshark"):
        try:
            out = subprocess.run(["tshark", "-G", "folders"], capture_output=True, text=True, timeout=20).stdout
            for line in out.splitlines():
                if line.startswith("Personal Lua Plugins:"):
                    return line.split(":", 1)[1].strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return os.path.join(os.path.expanduser("~"), ".local", "lib", "wireshark", "plugins")


def cmd_plan(args) -> int:
    """``emu plan nc mesh:k=16,n=2``: spec 02's planner -- the group shape and IN coordinates it picks
    and the longest-path and per-step hop tables that explain why."""
    from emu.nodes.collectives.coding.planner import report
    from emu.topologies.grid import grid_of
    from emu.topologies.registry import build

    t = build(args.spec)
    grid = grid_of(t)
    if grid is None:
        raise ConfigError(f"emu plan nc: {args.spec} is not a direct network; give mesh:k=..,n=.. or torus:k=..,n=..")
    if grid.size > 1 << 14:
        raise ConfigError(f"emu plan nc: {grid.size} nodes; the planner's tables go up to 16384 (k=128, n=2)")
    print(report(grid, args.mcast, args.scheme, args.by))
    return 0


def cmd_wireshark(args) -> int:
    import pathlib
    import shutil

    from ..dissector import GENERATED_PATH

    src = pathlib.Path(__file__).resolve().parents[1] / GENERATED_PATH
    if args.action == "path":
        print(src)
        return 0
    dest = pathlib.Path(args.dest or personal_plugin_dir())
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest / src.name)
    console.print(f"installed {dest / src.name}; restart Wireshark (or use tshark) to load it")
    return 0
