"""Sweeps of ``emu run``: options that take comma-separated lists, and the points they make.

``--topo``, ``--set KEY=V1,V2,...``, ``--offload``, ``--algo`` and ``--size`` each take a list; the
run is their product, in that order (:data:`ORDER`: the first varies slowest), one cluster per
point, one row per test and point. A topology spec has commas of its own (``fattree:k=4,n=3``): a
list of them is split where a new spec begins (``star:n=4,star:n=8``, a piece that names a family
or a file before any ``=``).

Options that take one value refuse a second one (argparse would silently keep the last): see
:func:`refuse_repeats`.
"""

from __future__ import annotations

import argparse
import copy
import itertools

from ..config import ConfigError

ORDER = ("topo", "set", "offload", "algo", "size")
"""The order of the product: a sweep's points vary ``--size`` fastest, ``--topo`` slowest; ``--set``
keys in the order given."""


def split_topos(text: str) -> list[str]:
    """``"star:n=4,star:n=8"`` -> ``["star:n=4", "star:n=8"]``; ``"fattree:k=4,n=3"`` stays one."""
    out: list[str] = []
    for piece in text.split(","):
        p = piece.strip()
        colon, eq = p.find(":"), p.find("=")
        starts = not out or eq < 0 or (0 <= colon < eq)  # a family name (or a file) before any '='
        if starts:
            out.append(p)
        else:
            out[-1] += "," + p
    return [t for t in out if t]


def _values(option: str, text: str | None) -> list[str | None]:
    if text is None:
        return [None]
    vals = split_topos(text) if option == "topo" else [v.strip() for v in text.split(",")]
    if any(not v for v in vals):
        raise ConfigError(f"--{option} {text!r} has an empty item; give comma-separated values, e.g. --{option} "
                          + ("star:n=4,star:n=8" if option == "topo" else "a,b"))
    twice = sorted({v for v in vals if vals.count(v) > 1})
    if twice:
        raise ConfigError(f"--{option} names {', '.join(twice)} twice; each value once")
    return vals


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
            if any(not v for v in vals):
                raise ConfigError(f"--set {item!r} has an empty value; give --set {key}=V1,V2,...")
            lists[key] = vals
        else:
            single.append(item)
    return single, lists


def sweep(args) -> tuple[dict[str, list[str]], list[dict[str, str]]]:
    """({swept parameter: values}, the points in product order: {parameter: value}), parameters
    named ``topo``, ``offload``, ``algo``, ``size`` or the ``--set`` key. One point without a sweep."""
    single, sets = _set_lists(args.set)
    axes: dict[str, list] = {}
    for opt in ORDER:
        if opt == "set":
            axes.update(sets)
        else:
            axes[opt] = _values(opt, getattr(args, opt))
    swept = {k: v for k, v in axes.items() if len(v) > 1}
    points = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
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
