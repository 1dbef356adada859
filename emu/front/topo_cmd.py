"""``emu topo SPEC --links | --nodes | --format json|graphml``: what a person needs to name the parts
of a topology (as Mininet's ``links`` and ``dump``), and the topology written to a file
(``emu.topologies.files``); and the one-line refusal of a name the topology does not have, with the
nearest names it does (``--fault``, ``--ranks``, ``emu mpirun --hosts``)."""

from __future__ import annotations

import sys

from ..config import ConfigError


def add_options(t) -> None:
    """``emu topo``'s listing and export options."""
    t.add_argument("--links", action="store_true",
                   help="list every link by name (as --fault link=A-B names it), its ports at both ends, latency "
                        "and bandwidth")
    t.add_argument("--nodes", action="store_true",
                   help="list every node: name, kind, fabric address, ports, the family's facts, its spec's "
                        "settings that differ from the defaults")
    t.add_argument("--format", choices=["json", "graphml"],
                   help="write the topology as node-link JSON or GraphML (networkx; node kinds, link and switch "
                        "specs and routes as attributes): to --out, default stdout; emu run --topo FILE runs it")
    t.add_argument("--out", metavar="FILE", help="where --format writes ('-': stdout, the default)")
    t.add_argument("--no-routes", action="store_true",
                   help="with --format: leave the routing tables out (the file is then routed by shortest paths)")


def listing(args, t) -> bool:
    """Print what ``--links`` / ``--nodes`` ask for, write ``--format``; True when the summary table
    should not follow on stdout (stdout holds the listing or the file)."""
    from emu.topologies.files import node_attributes

    if args.out and not args.format:
        raise ConfigError("--out is where --format writes: give --format json or --format graphml too")
    to_stdout = args.format and (args.out or "-") == "-"
    if to_stdout and (args.links or args.nodes or args.json == "-"):
        raise ConfigError("--format writes the file to stdout: give it --out FILE to list --links/--nodes or "
                          "write --json - as well")
    if args.format:
        from emu.topologies.files import write

        write(t, args.format, args.out or "-", routes=not args.no_routes)
        if not to_stdout:
            print(f"{t.name} written to {args.out} ({args.format}, {len(t.nodes)} nodes, {len(t.links)} links"
                  f"{', without routes' if args.no_routes else ', with routes'})", file=sys.stderr)
    if args.nodes:
        rows = [("node", "kind", "address", "ports", "facts", "settings (other than the defaults)")]
        for n in t.nodes.values():
            facts = " ".join(f"{k}={_short(v)}" for k, v in n.info.items() if k not in ("manager",))
            spec = " ".join(f"{k}={v}" for k, v in node_attributes(n).items()
                            if k not in ("switch.processing_delay_ns", "switch.model") or n.kind == "switch")
            rows.append((n.name, n.kind, f"{n.id:#x}" if n.kind == "switch" else str(n.id), str(t.nports(n.name)),
                         facts or "-", spec or "-"))
        _print_rows(rows)
    if args.links:
        rows = [("link", "port", "peer port", "latency_ns", "bandwidth")]
        for lk, name in zip(t.links, t.link_names()):
            rows.append((name, t.port_name(lk.a, lk.a_port), t.port_name(lk.b, lk.b_port),
                         str(lk.spec.latency_ns), f"{lk.spec.bandwidth_bps / 1e9:g} Gbit/s"))
        _print_rows(rows)
    return bool(to_stdout or args.links or args.nodes)


def _short(v) -> str:
    if isinstance(v, (tuple, list)):
        return ",".join(map(str, v))
    return str(v)


def _print_rows(rows: list[tuple[str, ...]]) -> None:
    """Plain columns, one row a line (never wrapped: a pipe or grep gets whole rows)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = sys.stdout
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] + "\n")
    out.write("\n")


def nearest(word: str, names, what: str, n: int = 4) -> str:
    """``; nearest: a, b, c`` -- the valid names closest to ``word`` (difflib), else the first few."""
    from difflib import get_close_matches  # (a refusal's: not imported by a run that has none)

    names = list(names)
    near = get_close_matches(word, names, n=n, cutoff=0.5) or names[:n]
    more = ", ..." if len(names) > len(near) else ""
    return f"; nearest {what}: {', '.join(near)}{more}"


def check_fault_names(topo, faults, spec: str) -> list[str]:
    """Refuse a fault on a node or link the topology does not have, naming the nearest valid ones.
    Returns notes for the person: a bare pair naming several parallel links takes them all."""
    hint = f" (emu topo {spec} --links lists them)"
    notes: list[str] = []
    switches = [s.name for s in topo.switches]
    links = topo.link_names()
    for f in faults:
        if f.switch:
            if f.switch not in topo.nodes or topo.nodes[f.switch].kind != "switch":
                what = "no switch" if f.switch not in topo.nodes else "not a switch:"
                raise ConfigError(f"--fault: {what} {f.switch!r} in {topo.name}{nearest(f.switch, switches, 'switches')}"
                                  + f" (emu topo {spec} --nodes lists them)")
            continue
        a, b = f.link
        if not topo.links_named(a, b):
            name = f"{a}-{b}"
            close = [x for x in links if a in x.split("-") or b in x.split("-")]
            from difflib import get_close_matches

            near = get_close_matches(name, close or links, n=4, cutoff=0.3) or (close or links)[:4]
            missing = next((x for x in (a, b.rpartition(".")[0] if b not in topo.nodes and "." in b else b)
                            if x not in topo.nodes), None)
            if missing:
                raise ConfigError(f"--fault: no node {missing!r} in {topo.name}{nearest(missing, list(topo.nodes), 'nodes')}"
                                  f"{hint}")
            what = f"between {a} and {b}" if b in topo.nodes else name
            raise ConfigError(f"--fault: no link {what} in {topo.name}; nearest links: {', '.join(near)}{hint}")
        ids = topo.links_named(a, b)
        if len(ids) > 1:
            names = topo.link_names()
            notes.append(f"--fault link={a}-{b}: {len(ids)} parallel links join {a} and {b} "
                         f"({', '.join(names[i] for i in ids)}); the fault takes all of them (link={names[ids[0]]} "
                         "names one)")
    return notes


def check_host_names(option: str, given: list[str], hosts: list[str], spec: str) -> None:
    """Refuse a host name the topology does not have (``--ranks``, ``--hosts``), naming the nearest."""
    valid = set(hosts)
    bad = [h for h in given if h not in valid]
    if bad:
        raise ConfigError(f"{option}: {', '.join(bad[:4])} not a host of {spec} (hosts {hosts[0]}..{hosts[-1]})"
                          f"{nearest(bad[0], hosts, 'hosts')}")
