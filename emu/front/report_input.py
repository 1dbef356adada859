"""What ``emu report`` reads, checked as data before anything is drawn.

A results or trace file may come from someone else: every field the plots use is checked for its
type and range here, and a file that is not what ``emu run`` / ``emu mpirun`` write is refused in one
line naming the file and the field (``rows[3].per_link["s0.p1"].busy_ns``), never a traceback from
deep inside matplotlib. What would make a figure absurdly large is bounded too (:data:`MAX_PANELS`,
:data:`MAX_RANKS`).
"""

from __future__ import annotations

import math
from typing import Any

from ..config import ConfigError

MAX_PANELS = 64
"""Tests drawn side by side at most (one panel each)."""
MAX_RANKS = 4096
"""Ranks drawn in the MPI-calls plot at most."""
MAX_NUMBER = 2**63
"""Largest magnitude of a figure (times in ns, counts) a file may hold."""


class _Bad(Exception):
    """A field is wrong: (where, what it should be)."""


def _num(v: Any, where: str, *, none: bool = True) -> None:
    if v is None and none:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)) \
            or abs(v) >= MAX_NUMBER:
        raise _Bad(where, f"a finite number below 2**63, got {_show(v)}")


def _int(v: Any, where: str, *, none: bool = True) -> None:
    if v is None and none:
        return
    if isinstance(v, bool) or not isinstance(v, int) or abs(v) >= MAX_NUMBER:
        raise _Bad(where, f"an integer below 2**63, got {_show(v)}")


def _str(v: Any, where: str, *, none: bool = False, limit: int = 4096) -> None:
    if v is None and none:
        return
    if not isinstance(v, str) or len(v) > limit:
        raise _Bad(where, f"a string of at most {limit} characters, got {_show(v)}")


def _dict(v: Any, where: str, *, none: bool = False) -> dict:
    if v is None and none:
        return {}
    if not isinstance(v, dict):
        raise _Bad(where, f"an object, got {_show(v)}")
    return v


def _list(v: Any, where: str) -> list:
    if not isinstance(v, list):
        raise _Bad(where, f"a list, got {_show(v)}")
    return v


def _show(v: Any) -> str:
    text = repr(v) if not isinstance(v, (dict, list)) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _key(k: str) -> str:
    return f"[{k!r}]" if len(k) <= 40 else "[...]"


def _run(run: Any) -> None:
    run = _dict(run, "run", none=True)
    _int(run.get("seed"), "run.seed")
    if run.get("topology") is not None and not isinstance(run["topology"], (str, list)):
        raise _Bad("run.topology", f"a topology spec or a list of them, got {_show(run['topology'])}")
    if run.get("sweep"):
        sweep = _dict(run["sweep"], "run.sweep")
        for k, vals in sweep.items():
            for i, v in enumerate(_list(vals, f"run.sweep{_key(k)}")):
                _str(v, f"run.sweep{_key(k)}[{i}]")
        order = run.get("sweep_order")
        if order is not None:
            for i, k in enumerate(_list(order, "run.sweep_order")):
                if not isinstance(k, str) or k not in sweep:
                    raise _Bad(f"run.sweep_order[{i}]", f"a key of run.sweep, got {_show(k)}")
        elif not sweep:
            raise _Bad("run.sweep", "the swept parameters, got an empty object")


def _row(r: dict, w: str) -> None:
    _str(r.get("topology"), f"{w}.topology")
    _str(r.get("name"), f"{w}.name")
    _int(r.get("seed"), f"{w}.seed")
    _num(r.get("completion_ns"), f"{w}.completion_ns")
    _num(r.get("virtual_ns"), f"{w}.virtual_ns")
    _int(r.get("mpi_calls"), f"{w}.mpi_calls")
    for port, v in _dict(r.get("per_link"), f"{w}.per_link").items():
        _num(_dict(v, f"{w}.per_link{_key(port)}").get("busy_ns"), f"{w}.per_link{_key(port)}.busy_ns")
    for k, v in _dict(r.get("point"), f"{w}.point", none=True).items():
        _str(v, f"{w}.point{_key(k)}")
    if "per_rank" in r:
        ranks = _list(r["per_rank"], f"{w}.per_rank")
        if len(ranks) > MAX_RANKS:
            raise _Bad(f"{w}.per_rank", f"at most {MAX_RANKS} ranks to draw, got {len(ranks):,}")
        for i, rk in enumerate(ranks):
            rw = f"{w}.per_rank[{i}]"
            rk = _dict(rk, rw)
            _int(rk.get("rank"), f"{rw}.rank", none=False)
            _str(rk.get("host", ""), f"{rw}.host")
            for kind, f in _dict(rk.get("calls"), f"{rw}.calls", none=True).items():
                f = _dict(f, f"{rw}.calls{_key(kind)}")
                _num(f.get("virtual_ns"), f"{rw}.calls{_key(kind)}.virtual_ns")
                _int(f.get("count"), f"{rw}.calls{_key(kind)}.count")


def check_run(path: str, run: Any, rows: list) -> None:
    """Refuse (ConfigError, one line) a results document whose fields the plots could not use."""
    try:
        _run(run)
        for i, r in enumerate(rows):
            _row(r, f"rows[{i}]")
        names = {r["name"] for r in rows}
        if len(names) > MAX_PANELS:
            raise _Bad("rows", f"at most {MAX_PANELS} tests to draw side by side, got {len(names):,}")
    except _Bad as e:
        where, want = e.args
        raise ConfigError(f"emu report: {path}: {where} must be {want}; give the --json file of an emu run "
                          "or emu mpirun") from None


def check_trace(path: str, trace: dict) -> None:
    """Refuse (ConfigError, one line) trace events the timeline could not use."""
    try:
        for i, e in enumerate(trace["traceEvents"]):
            w = f"traceEvents[{i}]"
            e = _dict(e, w)
            _str(e.get("ph", ""), f"{w}.ph", limit=8)
            _str(e.get("name", ""), f"{w}.name")
            _str(e.get("cat", ""), f"{w}.cat")
            if e.get("pid") is not None and (isinstance(e["pid"], bool) or not isinstance(e["pid"], (int, str))):
                raise _Bad(f"{w}.pid", f"an integer or a string, got {_show(e['pid'])}")
            if e.get("ph") in ("B", "E", "i", "X"):
                _num(e.get("ts"), f"{w}.ts", none=False)
            if e.get("ph") == "M" and e.get("name") == "process_name":
                _str(_dict(e.get("args"), f"{w}.args").get("name"), f"{w}.args.name")
    except _Bad as e:
        where, want = e.args
        raise ConfigError(f"emu report: {path}: {where} must be {want}; give the --trace file of an emu run") from None
