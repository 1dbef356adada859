"""``--trace FILE [--trace-limit SIZE] [--trace-bin NS]``: the options of a traced run, for ``emu run``
and ``emu mpirun`` alike, as ``RunConfig`` fields."""

from __future__ import annotations

from ..config import ConfigError


def trace_config(args) -> dict:
    """The trace options as RunConfig fields (refused in one line when bad)."""
    if not getattr(args, "trace", None):
        if getattr(args, "trace_limit", None) or getattr(args, "trace_bin", None):
            raise ConfigError("--trace-limit and --trace-bin go with --trace FILE")
        return {}
    from .sizes import parse_size

    if args.trace == "-":
        raise ConfigError("--trace needs a file name (the trace is written as the run goes, not to stdout)")
    out = {"trace": args.trace}
    if args.trace_limit:
        out["trace_limit_bytes"] = parse_size(args.trace_limit)
        if out["trace_limit_bytes"] < 4096:
            raise ConfigError(f"--trace-limit {args.trace_limit} is under 4KiB; give at least 4KiB, e.g. 64MiB")
    if args.trace_bin is not None:
        if args.trace_bin < 1:
            raise ConfigError(f"--trace-bin must be at least 1 ns, got {args.trace_bin}")
        out["trace_bin_ns"] = args.trace_bin
    return out
