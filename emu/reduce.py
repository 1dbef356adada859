"""Reduction operators, registered by name (DESIGN.md principle 8), on numpy arrays: the one
kernel that host software, the NIC's ALU and (next) switch aggregation all combine operands with.

Integers reduce exactly (wrap-around arithmetic, so any order gives numpy's answer); floats within
the usual reassociation tolerance. ``minloc``/``maxloc`` work on pairs: the operand becomes a
structured array of ``value`` and ``index`` (the contributing rank), ties going to the lower index,
as MPI_MINLOC/MPI_MAXLOC do. Logical and bitwise operators are defined on integer types only.

Two forms of the same operator: :meth:`Op.combine` on the operands host software holds (a
structured array for the paired operators), :meth:`Op.combine_located` on the (values, locations)
arrays hardware holds (the NIC's data and location words).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from emu.config import ConfigError

DTYPES = {name: np.dtype(name) for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                            "uint64", "float16", "float32", "float64")}


@dataclass(frozen=True)
class Op:
    name: str
    combine: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """Combine two operands of the wire dtype into a new array (never in place)."""
    integer_only: bool = False
    paired: bool = False
    """Operands are (value, index) pairs (minloc/maxloc)."""

    def combine_located(self, a: np.ndarray, al: np.ndarray, b: np.ndarray, bl: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """The operator on (values, locations) operands: a paired operator keeps the location of the
        value it picks, any other keeps ``al``."""
        with np.errstate(all="ignore"):
            if self.paired:
                take_b = _take_b(self.name, a, al, b, bl)
                return np.where(take_b, b, a), np.where(take_b, bl, al)
            return self.combine(a, b), al

    def wire_dtype(self, dtype: np.dtype) -> np.dtype:
        if self.paired:
            return np.dtype([("value", dtype), ("index", np.int32)])
        return dtype

    def check(self, dtype: np.dtype) -> None:
        if dtype.name not in DTYPES:
            raise ConfigError(f"element type {dtype.name} is not supported; use one of {', '.join(DTYPES)}")
        if self.integer_only and dtype.kind == "f":
            raise ConfigError(f"operator {self.name} is defined on integer types only, not {dtype.name}")

    def prepare(self, x: np.ndarray, rank: int) -> np.ndarray:
        """The operand this rank contributes: paired with its rank for minloc/maxloc, made 0/1 for
        the logical operators (so that a single rank's result is a truth value too)."""
        if self.name in ("land", "lor", "lxor"):
            return (x != 0).astype(x.dtype)
        if not self.paired:
            return x
        out = np.empty(x.shape, self.wire_dtype(x.dtype))
        out["value"] = x
        out["index"] = rank
        return out


def _logical(fn):
    def combine(a, b):
        return fn(a != 0, b != 0).astype(a.dtype)
    return combine


def _take_b(name: str, a, al, b, bl):
    """Where the second operand wins a minloc/maxloc: better value, or equal value and lower location."""
    better = np.less if name == "minloc" else np.greater
    return better(b, a) | ((b == a) & (bl < al))


def _loc(name):
    def combine(a, b):
        return np.where(_take_b(name, a["value"], a["index"], b["value"], b["index"]), b, a)
    return combine


OPS: dict[str, Op] = {}


def register(op: Op) -> None:
    OPS[op.name] = op


for _op in (
    Op("sum", np.add), Op("prod", np.multiply), Op("min", np.minimum), Op("max", np.maximum),
    Op("minloc", _loc("minloc"), paired=True), Op("maxloc", _loc("maxloc"), paired=True),
    Op("land", _logical(np.logical_and), integer_only=True), Op("lor", _logical(np.logical_or), integer_only=True),
    Op("lxor", _logical(np.logical_xor), integer_only=True),
    Op("band", np.bitwise_and, integer_only=True), Op("bor", np.bitwise_or, integer_only=True),
    Op("bxor", np.bitwise_xor, integer_only=True),
):
    register(_op)


def get_op(name: str) -> Op:
    try:
        return OPS[name]
    except KeyError:
        raise ConfigError(f"unknown operator {name!r}; known: {', '.join(OPS)}") from None


def reference(op: Op, inputs: list[np.ndarray]) -> np.ndarray:
    """What numpy says the reduction of ``inputs`` (rank order) is: the oracle for tests."""
    ops = [op.prepare(x, r) for r, x in enumerate(inputs)]
    if op.paired:
        vals = np.stack([o["value"] for o in ops])
        pick = np.argmin(vals, axis=0) if op.name == "minloc" else np.argmax(vals, axis=0)
        out = np.empty(ops[0].shape, ops[0].dtype)
        out["value"] = np.take_along_axis(vals, pick[None], 0)[0]
        out["index"] = pick
        return out
    stack = np.stack(ops)
    dt = stack.dtype
    with np.errstate(all="ignore"):
        if op.name == "sum":
            return np.sum(stack, axis=0, dtype=dt)
        if op.name == "prod":
            return np.prod(stack, axis=0, dtype=dt)
        if op.name == "min":
            return np.min(stack, axis=0)
        if op.name == "max":
            return np.max(stack, axis=0)
        if op.name in ("land", "lor", "lxor"):
            fn = {"land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor}[op.name]
            return fn.reduce(stack != 0, axis=0).astype(dt)
        fn = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op.name]
        return fn.reduce(stack, axis=0)


def reference_streamed(op: Op, inputs) -> np.ndarray:
    """:func:`reference` for ``inputs`` given one at a time (an iterable, rank order), holding only
    the running result and one operand: the oracle of a 1 GiB-per-rank run without n GiB of stack.
    Element-wise it is the same fold, in the same order, as the stacked reduction."""
    if op.paired:
        return reference(op, list(inputs))
    it = iter(inputs)
    acc = op.prepare(next(it), 0).copy()
    fn = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
          "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}.get(op.name)
    with np.errstate(all="ignore"):
        for r, x in enumerate(it, 1):
            if fn is not None:
                fn(acc, x, out=acc)
            else:  # land, lor, lxor on truth values
                logical = {"land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor}[op.name]
                acc[...] = logical(acc != 0, x != 0)
            del x
    return acc
