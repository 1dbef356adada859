"""Sweeps of ``emu run``: options that take comma-separated lists, and the points they make.

``--topo``, ``--set KEY=V1,V2,...``, ``--offload``, ``--algo`` and ``--size`` each take a list; the
run is their product, in that order (:data:`ORDER`: the first varies slowest), one cluster per
point, one row per test and point. A topology spec has commas of its own (``fattree:k=4,n=3``): a
list of them is split where a new spec begins (``star:n=4,star:n=8``, a piece that names a family
or a file before any ``=``).

A sweep has at most :data:`MAX_POINTS` points (10,000): the product is counted from the lengths of
the lists before any point is made or checked, and a larger one is refused in one line with its
count (three ``--set`` keys of 1,000 values each would be 10^9 clusters). The points are then made
one at a time as they are checked and run (:class:`Points`), never all at once.

Options that take one value refuse a second one (argparse would silently keep the last): see
:func:`refuse_repeats`.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import math
from collections.abc import Iterator, Sequence

from ..config import ConfigError

ORDER = ("topo", "set", "offload", "algo", "size")
"""The order of the product: a sweep's points vary ``--size`` fastest, ``--topo`` slowest; ``--set``
keys in the order given."""
MAX_POINTS = 10_000
"""Most points a sweep may have: each is a cluster of its own, every one of them prepared (its
topology built, its options checked) before the first starts. Split a larger study into several runs."""


def split_topos(text: str) -> list[str]:
    """``"star:n=4,star:n=8"`` -> ``["star:n=4", "star:n=8"]``; ``"fattree:k=4,n=3"`` stays one."""
    out: list[list[str]] = []
    for piece in text.split(","):
        p = piece.strip()
        colon, eq = p.find(":"), p.find("=")
        starts = not out or eq < 0 or (0 <= colon < eq)  # a family name (or a file) before any '='
        if starts:
            out.append([p])
        else:
            out[-1].append(p)  # (joined once at the end: a spec of many parameters stays linear)
    return [t for t in (",".join(parts) for parts in out) if t]


def _split(option: str, text: str | None) -> list[str | None]:
    if text is None:
        return [None]
    return split_topos(text) if option == "topo" else [v.strip() for v in text.split(",")]


def _check_values(key: str, vals: list, text: str) -> None:
    """Refuse an empty item, or a value named twice (in time linear in the list); ``key`` an option
    of :data:`ORDER` or a ``--set`` key."""
    opt = f"--{key}" if key in ORDER else f"--set {key}"
    if any(not v for v in vals):
        if key in ORDER:
            raise ConfigError(f"--{key} {_short(text)!r} has an empty item; give comma-separated values, e.g. --{key} "
                              + ("star:n=4,star:n=8" if key == "topo" else "a,b"))
        raise ConfigError(f"--set {key}={_short(text)!r} has an empty value; give --set {key}=V1,V2,...")
    seen: set = set()
    twice = list(dict.fromkeys(v for v in vals if v in seen or seen.add(v)))  # (in the order given)
    if twice:
        more = f" and {len(twice) - 5:,} more" if len(twice) > 5 else ""
        raise ConfigError(f"{opt} names {', '.join(_short(v) for v in twice[:5])}{more} twice; each value once")


def _short(text: str, most: int = 60) -> str:
    """``text``, cut to ``most`` characters for a refusal's one line (a list may be long)."""
    return text if len(text) <= most else text[:most - 3] + "..."


def _set_lists(items: list[str] | None) -> tuple[list[str], dict[str, list[str]]]:
    """(the --set items of one value, {KEY: [values]} of those with several), refused when a key is
    given twice."""
    single: list[str] = []
    lists: dict[str, list[str]] = {}
    seen: set[str] = set()
    for item in items or []:
        key, eq, value = (x.strip() for x in str(item).partition("="))
        if eq and key in seen:
            raise ConfigError(f"--set {key} is given twice; give one --set {key}=V1,V2,... to sweep it")
        seen.add(key)
        vals = [v.strip() for v in value.split(",")] if eq else [value]
        if len(vals) > 1:
            lists[key] = vals
        else:
            single.append(item)
    return single, lists


class Points(Sequence):
    """The points of a sweep, ``{parameter: value}`` in product order (the first axis varies slowest),
    made one at a time: its length is known at once, no point is made before it is asked for."""

    def __init__(self, axes: dict[str, list]):
        self._axes = axes
        self._n = math.prod(len(v) for v in axes.values())

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[dict]:
        return (dict(zip(self._axes, combo)) for combo in itertools.product(*self._axes.values()))

    def __getitem__(self, i: int) -> dict:
        if not -self._n <= i < self._n:
            raise IndexError(f"point {i} of {self._n}")
        i %= self._n
        out = {}
        for name, vals in reversed(self._axes.items()):  # mixed radix: the last axis varies fastest
            i, k = divmod(i, len(vals))
            out[name] = vals[k]
        return {name: out[name] for name in self._axes}

    def __repr__(self) -> str:
        return f"Points({self._n:,} of {', '.join(self._axes)})"


def sweep(args) -> tuple[dict[str, list[str]], Points]:
    """({swept parameter: values}, the points in product order: {parameter: value}), parameters
    named ``topo``, ``offload``, ``algo``, ``size`` or the ``--set`` key. One point without a sweep.

    The number of points is counted first and refused past :data:`MAX_POINTS`; then each list is
    checked (an empty item, a value named twice), and the points are made as they are used."""
    single, sets = _set_lists(args.set)
    axes: dict[str, list] = {}
    for opt in ORDER:
        if opt == "set":
            axes.update(sets)
        else:
            axes[opt] = _split(opt, getattr(args, opt))
    points = Points(axes)
    if len(points) > MAX_POINTS:
        lists = " x ".join(f"{len(v):,} {k}" for k, v in axes.items() if len(v) > 1)
        raise ConfigError(f"this sweep has {len(points):,} points ({lists} values), over the limit of {MAX_POINTS:,} "
                          "(a cluster each); sweep fewer values, or split the study into several runs")
    for k, v in axes.items():
        if v != [None]:
            _check_values(k, v, getattr(args, k) if k in ORDER else ",".join(v))
    swept = {k: v for k, v in axes.items() if len(v) > 1}
    args._set_single = single
    return swept, points


def point_args(args, point: dict[str, str]):
    """A copy of ``args`` with the single values of one point."""
    a = copy.copy(args)
    sets = list(getattr(args, "_set_single", args.set or []))
    for key, value in point.items():
        if key in ("topo", "offload", "algo", "size"):
            setattr(a, key, value)
        else:
            sets.append(f"{key}={value}")
    a.set = sets or None
    return a


class _Once(argparse.Action):
    """Store one value; a second one is noted, and refused in one line before anything starts."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = getattr(namespace, "_given", None)
        if seen is None:
            seen = set()
            setattr(namespace, "_given", seen)
        if self.dest in seen:
            rep = getattr(namespace, "_repeated", None) or []
            rep.append(option_string or self.dest)
            setattr(namespace, "_repeated", rep)
        seen.add(self.dest)
        setattr(namespace, self.dest, values)


def refuse_repeats(parser: argparse.ArgumentParser) -> None:
    """Make every option of ``parser`` that stores one value note a repetition (see :func:`check_repeats`)."""
    for action in parser._actions:
        if type(action) is argparse._StoreAction and action.option_strings and action.nargs is None:
            action.__class__ = _Once


def check_repeats(args) -> None:
    rep = getattr(args, "_repeated", None)
    if rep:
        opt = rep[0]
        lists = {"--topo", "--offload", "--algo", "--size"}
        hint = (f"to sweep it, give one {opt} with comma-separated values" if opt in lists
                else "it takes one value")
        raise ConfigError(f"{opt} is given more than once; {hint}")
