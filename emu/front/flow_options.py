"""``emu run``'s options of the flow workloads (``emu.front.flow_checks``): their argument group, and
the front door that reads their files (``--flows``, a ``--cdf`` file) and refuses a bad option in one
line before anything starts."""

from __future__ import annotations

import argparse

from ..config import ConfigError

FLOW_OPTIONS = ("flows", "senders", "cdf", "duration")


def add_flow_options(r: argparse.ArgumentParser, ascii_int) -> None:
    g = r.add_argument_group("flow workloads (flows, incast, permutation, alltoall_flows, poisson; --size: bytes "
                             "per flow; "
                             "--load: poisson's one load; docs/flows.md)")
    g.add_argument("--flows", metavar="FILE", help="--test flows: a flow per line, 'src dst priority size start_ns' "
                                                   "(hosts by index or name), or the HPCC code's flow.txt")
    g.add_argument("--senders", type=ascii_int, metavar="N", help="--test incast: how many hosts send to h0 "
                                                                  "(default: all the others)")
    g.add_argument("--cdf", metavar="NAME|FILE", help="--test poisson: the flow sizes' CDF, websearch (the default; "
                                                      "DCTCP's), hadoop (Facebook's), or a file of 'size percent' lines")
    g.add_argument("--duration", metavar="TIME", help="--test poisson: flows start within this time (default 100us)")


def _read(option: str, path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or type(e).__name__
        raise ConfigError(f"{option} {path}: cannot be read ({reason}); give a text file") from None


def flow_extra(args, names: list[str], topo, extra: dict) -> dict:
    """The flow workloads' options as the tests take them, files read; refused when no flow test is
    named, or when the workload cannot be made (checked here, before anything starts)."""
    from .flow_checks import TESTS, workload

    given = {k: getattr(args, k, None) for k in FLOW_OPTIONS}
    tests = [n for n in names if n in TESTS]
    if not tests:
        used = [f"--{k}" for k, v in given.items() if v is not None]
        if used:
            raise ConfigError(f"{', '.join(used)} apply to the flow tests ({', '.join(TESTS)}) only; --test "
                              f"{'+'.join(names)} has none")
        return {}
    out: dict = {"flows": given["flows"], "senders": given["senders"], "cdf": given["cdf"]}
    for k, owner in (("flows", "flows"), ("senders", "incast"), ("cdf", "poisson"), ("duration", "poisson")):
        if given[k] is not None and owner not in tests:
            raise ConfigError(f"--{k} applies to --test {owner}; --test {'+'.join(names)} has no {owner}")
    if getattr(args, "size", None) is not None and all(n in ("poisson", "flows") for n in names):
        raise ConfigError(f"--size does not apply to --test {'+'.join(names)}: the sizes come from "
                          f"{'--cdf' if 'poisson' in names else 'the flow file'}; leave it out")
    if given["flows"] is not None:
        out["flows_text"] = _read("--flows", given["flows"])
    cdf = given["cdf"]
    if cdf is not None:
        from emu.nodes.workload.flows import CDFS

        if cdf not in CDFS:
            import os

            if not os.path.exists(cdf):
                raise ConfigError(f"--cdf {cdf}: neither a CDF by name ({', '.join(CDFS)}) nor a file")
            out["cdf_text"] = _read("--cdf", cdf)
    if given["duration"] is not None:
        from ..faults import parse_time_ns

        try:
            out["duration_ns"] = parse_time_ns(given["duration"])
        except ConfigError as e:
            raise ConfigError(f"--duration {given['duration']}: {str(e).replace('fault time', 'a time')}") from None
        if out["duration_ns"] < 1:
            raise ConfigError(f"--duration {given['duration']}: give a time above 0, e.g. 100us")
    if given["senders"] is not None and given["senders"] < 1:
        raise ConfigError(f"--senders {given['senders']}: 1 or more")
    for name in tests:
        workload(name, {**extra, **out}, topo, args.seed)  # refused now rather than in the run
    return out
