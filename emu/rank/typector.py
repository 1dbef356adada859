"""The datatype constructors of the emulated ``mpi4py.MPI`` (set on ``dtype.Datatype``), and ``decode``.

Each computes the new type's size and bounds from its parts as MPI defines them (MPICH's rules:
a struct's extent is padded to its most aligned basic type; a block of length 0 counts for
nothing), records its envelope and contents in MPICH's large-count form, and leaves a builder of
its type map for later: copies of the old type's runs at the element displacements, in the order
the constructor lists them (a vector with a negative stride, a Fortran-order subarray: transposed)."""

from __future__ import annotations

import numpy as np

from . import typemap as tm
from .dtype import COMBINERS, DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC, DISTRIBUTE_DFLT_DARG, DISTRIBUTE_NONE, ORDER_C, \
    ORDER_F, TYPECLASS_COMPLEX, TYPECLASS_INTEGER, TYPECLASS_LOGICAL, TYPECLASS_REAL, TYPES, Datatype, _Type, _handle
from .mpierr import ERR_ARG, ERR_COUNT, Exception


def _ints(xs, what: str) -> list[int]:
    try:
        return [int(x) for x in xs]
    except TypeError:
        raise TypeError(f"{what}: expecting a sequence of integers, got {type(xs).__name__}") from None


def _count(n, what: str = "count") -> int:
    n = int(n)
    if n < 0:
        raise Exception(ERR_COUNT, f"MPI_ERR_COUNT: negative {what} {n}")
    return n


def _make(cls, combiner: str, old: list[_Type], displs, contents, extra_bounds=None, points=None) -> Datatype:
    """A type of copies of ``old[k]`` at byte displacements ``displs[k]`` (arrays, in map order);
    ``points``: where empty blocks start, which bound it as MPICH does when nothing else does."""
    size = sum(int(len(d)) * o.size for o, d in zip(old, displs))
    used = [(o, d) for o, d in zip(old, displs) if len(d)]
    if not size and (not points or not any(o.size for o in old)):  # MPICH: nothing in it, no bounds
        lb = ub = tlb = tub = 0
    elif used:
        lb = min(int(d.min()) + o.lb for o, d in used)
        ub = max(int(d.max()) + o.ub for o, d in used)
        tlb = min(int(d.min()) + o.tlb for o, d in used)
        tub = max(int(d.max()) + o.tub for o, d in used)
    elif points:  # blocks of length 0 (one old type): MPICH's bounds of a block, with its length 0
        o = old[0]
        lb, ub, tlb, tub = min(points) + o.lb, max(points) + o.lb, min(points) + o.tlb, max(points) + o.tub - (
            o.ub - o.lb)
    else:
        lb = ub = tlb = tub = 0
    align = max((o.align for o, _ in used), default=1)
    if extra_bounds is not None:
        lb, ub = extra_bounds
    base = _base([o for o, _ in used] or old) if size else None

    def build():
        return tm.concat([tm.replicate(o.map(), d) for o, d in used])
    return _wrap(cls, _Type(combiner, size, lb, ub, tlb, tub, build, align, contents, base))


def _wrap(cls, t: _Type) -> Datatype:
    return (cls if isinstance(cls, type) and issubclass(cls, Datatype) else Datatype)._of(t)


def _base(old: list[_Type]):
    bases = {id(o.base) for o in old}
    return old[0].base if len(bases) == 1 and old else None


def _arith(first: int, count: int, step: int) -> np.ndarray:
    return first + np.arange(count, dtype=np.int64) * step


def _hvector(self, count, blocklength, stride, combiner, contents) -> Datatype:
    t = self._ok()
    count, bl = _count(count), _count(blocklength, "blocklength")
    ext = t.ub - t.lb
    n = count * bl if count and bl else 0
    if not t.size:  # MPICH: copies of nothing have no bounds
        lb = ub = tlb = tub = 0
    elif count and not bl:  # MPICH: empty blocks still mark their starts
        dmin, dmax = min(0, (count - 1) * stride), max(0, (count - 1) * stride)
        lb, ub, tlb, tub = dmin + t.lb, dmax + t.lb, dmin + t.tlb, dmax + t.tub - ext
    elif n:
        dmin = min(0, (count - 1) * stride) + min(0, (bl - 1) * ext)
        dmax = max(0, (count - 1) * stride) + max(0, (bl - 1) * ext)
        lb, ub, tlb, tub = dmin + t.lb, dmax + t.ub, dmin + t.tlb, dmax + t.tub
    else:
        lb = ub = tlb = tub = 0

    def build():
        return tm.repeat(tm.repeat(t.map(), bl, ext), count, stride)
    base = t.base if n * t.size else None  # MPICH: an empty type has no basic type
    align = t.align if count else 1  # MPICH: blocks of length 0 keep the old type's alignment
    return _wrap(type(self), _Type(combiner, n * t.size, lb, ub, tlb, tub, build, align, contents, base))


def Create_contiguous(self, count: int) -> Datatype:
    contents = ((), (), [int(count)], [self._ok()])
    return _hvector(self, 1 if count else 0, count, 0, "CONTIGUOUS", contents)  # MPICH: 0 copies, no bounds


def Create_vector(self, count: int, blocklength: int, stride: int) -> Datatype:
    contents = ((), (), [int(count), int(blocklength), int(stride)], [self._ok()])
    return _hvector(self, count, blocklength, int(stride) * self.extent, "VECTOR", contents)


def Create_hvector(self, count: int, blocklength: int, stride: int) -> Datatype:
    contents = ((), (), [int(count), int(blocklength), int(stride)], [self._ok()])
    return _hvector(self, count, blocklength, int(stride), "HVECTOR", contents)


def _blocks(t: _Type, bls, displs) -> np.ndarray:
    ext = t.ub - t.lb
    parts = [_arith(d, _count(b, "blocklength"), ext) for b, d in zip(bls, displs)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _check_len(a, b, what: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"incompatible lengths of {what}: {len(a)} and {len(b)}")


def Create_indexed(self, blocklengths, displacements) -> Datatype:
    t, bls, ds = self._ok(), _ints(blocklengths, "blocklengths"), _ints(displacements, "displacements")
    _check_len(bls, ds, "blocklengths and displacements")
    contents = ((), (), [len(bls), *bls, *ds], [t])
    return _make(type(self), "INDEXED", [t], [_blocks(t, bls, [d * (t.ub - t.lb) for d in ds])], contents)


def Create_hindexed(self, blocklengths, displacements) -> Datatype:
    t, bls, ds = self._ok(), _ints(blocklengths, "blocklengths"), _ints(displacements, "displacements")
    _check_len(bls, ds, "blocklengths and displacements")
    contents = ((), (), [len(bls), *bls, *ds], [t])
    return _make(type(self), "HINDEXED", [t], [_blocks(t, bls, ds)], contents)


def Create_indexed_block(self, blocklength: int, displacements) -> Datatype:
    t, ds = self._ok(), _ints(displacements, "displacements")
    bl = _count(blocklength, "blocklength")
    contents = ((), (), [len(ds), bl, *ds], [t])
    ds = [d * (t.ub - t.lb) for d in ds]
    return _make(type(self), "INDEXED_BLOCK", [t], [_blocks(t, [bl] * len(ds), ds)], contents,
                 points=None if bl else ds)


def Create_hindexed_block(self, blocklength: int, displacements) -> Datatype:
    t, ds = self._ok(), _ints(displacements, "displacements")
    bl = _count(blocklength, "blocklength")
    contents = ((), (), [len(ds), bl, *ds], [t])
    return _make(type(self), "HINDEXED_BLOCK", [t], [_blocks(t, [bl] * len(ds), ds)], contents,
                 points=None if bl else ds)


def Create_struct(cls, blocklengths, displacements, datatypes) -> Datatype:
    bls, ds = _ints(blocklengths, "blocklengths"), _ints(displacements, "displacements")
    datatypes = list(datatypes)
    _check_len(bls, ds, "blocklengths and displacements")
    _check_len(bls, datatypes, "blocklengths and datatypes")
    olds = [d._ok() for d in datatypes]
    parts = [_blocks(o, [b], [d]) for o, b, d in zip(olds, bls, ds)]
    new = _make(cls, "STRUCT", olds, parts, ((), (), [len(bls), *bls, *ds], olds))
    t = new._t
    if not t.size:  # MPICH: a struct of nothing has no bounds
        t.lb = t.ub = t.tlb = t.tub = 0
    ext = t.ub - t.lb
    # MPICH: one type throughout (blocks of length 0 too) is an hindexed, not padded; so is one basic
    # type throughout, each block's type being one element of it (a Dup, a contiguous of 1, ...)
    one = {id(_element(o)) for o in olds}
    same = all(o is olds[0] for o in olds) or (len(one) == 1 and _element(olds[0]) is not None)
    if t.align > 1 and ext % t.align and not same:  # else padded to its most aligned basic type
        t.ub += t.align - ext % t.align
    return new


def _element(t: _Type):
    """The named type ``t`` is exactly one element of (same size, bounds, true bounds), or None."""
    b = t.base._t if t.base is not None else None
    if b is None or (t.size, t.lb, t.ub, t.tlb, t.tub) != (b.size, b.lb, b.ub, b.tlb, b.tub):
        return None
    return b


def _strides(sizes, ext: int, order: int) -> list[int]:
    n = len(sizes)
    st = [0] * n
    acc = ext
    dims = range(n - 1, -1, -1) if order == ORDER_C else range(n)
    for k in dims:
        st[k] = acc
        acc *= sizes[k]
    return st


def _grid(index_lists, strides, order: int) -> np.ndarray:
    """Displacements of every combination of the per-dimension indices, the last dimension fastest
    in C order, the first in Fortran order."""
    d = np.zeros(1, np.int64)
    dims = range(len(index_lists)) if order == ORDER_C else range(len(index_lists) - 1, -1, -1)
    for k in dims:
        d = (d[:, None] + np.asarray(index_lists[k], np.int64)[None, :] * strides[k]).ravel()
    return d


def _order(order) -> int:
    order = int(order)
    if order not in (ORDER_C, ORDER_F):
        raise Exception(ERR_ARG, f"MPI_ERR_ARG: invalid array order {order}")
    return order


def Create_subarray(self, sizes, subsizes, starts, order: int = ORDER_C) -> Datatype:
    t = self._ok()
    sizes, subsizes, starts = _ints(sizes, "sizes"), _ints(subsizes, "subsizes"), _ints(starts, "starts")
    _check_len(sizes, subsizes, "sizes and subsizes")
    _check_len(sizes, starts, "sizes and starts")
    order = _order(order)
    for n, s, a in zip(sizes, subsizes, starts):
        if n < 1 or s < 1 or a < 0 or a + s > n:
            raise Exception(ERR_ARG, f"MPI_ERR_ARG: invalid subarray: sizes {sizes}, subsizes {subsizes}, "
                                     f"starts {starts}")
    ext = t.ub - t.lb
    st = _strides(sizes, ext, order)
    full = int(np.prod(sizes)) * ext
    displs = _grid([range(a, a + s) for a, s in zip(starts, subsizes)], st, order)
    contents = ([len(sizes), order], (), [*sizes, *subsizes, *starts], [t])
    return _make(type(self), "SUBARRAY", [t], [displs], contents, (0, full))


def _dist_indices(g: int, dist: int, darg: int, p: int, c: int) -> list[int]:
    if dist == DISTRIBUTE_NONE:
        return list(range(g))
    if dist == DISTRIBUTE_BLOCK:
        b = -(-g // p) if darg == DISTRIBUTE_DFLT_DARG else darg
        if b * p < g:
            raise Exception(ERR_ARG, f"MPI_ERR_ARG: block size {b} times {p} processes does not cover {g}")
        return list(range(min(c * b, g), min((c + 1) * b, g)))
    if dist == DISTRIBUTE_CYCLIC:
        b = 1 if darg == DISTRIBUTE_DFLT_DARG else darg
        return [i for s in range(c * b, g, p * b) for i in range(s, min(s + b, g))]
    raise Exception(ERR_ARG, f"MPI_ERR_ARG: invalid distribution {dist}")


def Create_darray(self, size: int, rank: int, gsizes, distribs, dargs, psizes, order: int = ORDER_C) -> Datatype:
    t = self._ok()
    gsizes, distribs = _ints(gsizes, "gsizes"), _ints(distribs, "distribs")
    dargs, psizes = _ints(dargs, "dargs"), _ints(psizes, "psizes")
    order = _order(order)
    if int(np.prod(psizes)) != size or not 0 <= rank < size:
        raise Exception(ERR_ARG, f"MPI_ERR_ARG: process grid {psizes} does not hold rank {rank} of {size}")
    coords, r = [], rank
    for p in reversed(psizes):  # the process grid is row-major whatever the array order
        coords.append(r % p)
        r //= p
    coords.reverse()
    ext = t.ub - t.lb
    lists = [_dist_indices(g, d, a, p, c) for g, d, a, p, c in zip(gsizes, distribs, dargs, psizes, coords)]
    displs = _grid(lists, _strides(gsizes, ext, order), order)
    n = len(gsizes)
    contents = ([size, rank, n, *distribs, *dargs, *psizes, order], (), gsizes, [t])
    return _make(type(self), "DARRAY", [t], [displs], contents, (0, int(np.prod(gsizes)) * ext))


def Create_resized(self, lb: int, extent: int) -> Datatype:
    t = self._ok()
    lb, extent = int(lb), int(extent)
    new = _Type("RESIZED", t.size, lb, lb + extent, t.tlb, t.tub, t.map, t.align, ((), (), [lb, extent], [t]), t.base)
    return _wrap(type(self), new)


def Dup(self) -> Datatype:
    t = self._ok()
    new = _Type("DUP", t.size, t.lb, t.ub, t.tlb, t.tub, t.map, t.align, ((), (), (), [t]), t.base)
    new.committed, new.npcode = t.committed, t.npcode
    dup = _wrap(type(self), new)
    self._copy_attrs_to(dup)
    return dup


def _f90(cls, combiner: str, ints, key: str | None, size: int, kind: str) -> Datatype:
    if key is None:
        raise Exception(15, f"MPI_ERR_OTHER: no Fortran {kind} type with {combiner.lower()} parameters {ints}")
    named = TYPES[key]._t
    code = {"i": f"i{size}", "f": f"f{size}", "c": f"c{size}"}[kind]
    char = {("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "l", ("f", 4): "f", ("f", 8): "d",
            ("f", 16): "g", ("c", 8): "F", ("c", 16): "D", ("c", 32): "G"}.get((kind, size), "V")
    new = _Type(combiner, size, 0, size, 0, size, named.map, named.align, (ints, (), (), ()), named.base)
    new.codes, new.npcode, new.committed = (code, code, char), named.npcode, True
    return _wrap(cls, new)


def Create_f90_integer(cls, r: int) -> Datatype:
    size = next((s for s, top in ((1, 2), (2, 4), (4, 9), (8, 18)) if r <= top), None)
    key = {1: "INTEGER1", 2: "INTEGER2", 4: "INTEGER4", 8: "INTEGER8"}.get(size)
    return _f90(cls, "F90_INTEGER", [int(r)], key, size or 0, "i")


def _real_size(p: int, r: int) -> int | None:
    return next((s for s, pp, rr in ((4, 6, 37), (8, 15, 307), (16, 33, 4931)) if p <= pp and r <= rr), None)


def Create_f90_real(cls, p: int, r: int) -> Datatype:
    size = _real_size(p, r)
    key = {4: "REAL4", 8: "REAL8", 16: "REAL16"}.get(size)
    return _f90(cls, "F90_REAL", [int(p), int(r)], key, size or 0, "f")


def Create_f90_complex(cls, p: int, r: int) -> Datatype:
    size = _real_size(p, r)
    key = {4: "COMPLEX8", 8: "COMPLEX16", 16: "COMPLEX32"}.get(size)
    return _f90(cls, "F90_COMPLEX", [int(p), int(r)], key, 2 * (size or 0), "c")


_MATCH = {TYPECLASS_INTEGER: {1: "INTEGER1", 2: "INTEGER2", 4: "INTEGER4", 8: "INTEGER8"},
          TYPECLASS_REAL: {4: "REAL4", 8: "REAL8", 16: "REAL16"},
          TYPECLASS_COMPLEX: {8: "COMPLEX8", 16: "COMPLEX16", 32: "COMPLEX32"},
          TYPECLASS_LOGICAL: {4: "LOGICAL"}}


def Match_size(cls, typeclass: int, size: int) -> Datatype:
    key = _MATCH.get(typeclass, {}).get(size)
    if key is None:
        raise Exception(ERR_ARG, f"MPI_ERR_ARG: no named type of type class {typeclass} and size {size}")
    return TYPES[key]


_VALUE_INDEX = {("SHORT", "INT"): "SHORT_INT", ("INT", "INT"): "INT_INT", ("LONG", "INT"): "LONG_INT",
                ("FLOAT", "INT"): "FLOAT_INT", ("DOUBLE", "INT"): "DOUBLE_INT",
                ("LONG_DOUBLE", "INT"): "LONG_DOUBLE_INT"}


def Get_value_index(cls, value: Datatype, index: Datatype) -> Datatype:
    v, i = value._ok(), index._ok()
    key = _VALUE_INDEX.get((v.key, i.key))
    return TYPES[key] if key else TYPES["DATATYPE_NULL"]


def decode(self) -> tuple[Datatype, str, dict]:
    """mpi4py's ``Datatype.decode``: (the old type, the combiner's name, the constructor's arguments)."""
    t = self._ok()
    name = {v: k for k, v in COMBINERS.items()}[t.combiner]
    if name == "NAMED":
        return self, name, {}
    ints, c, types = t.ints, t.counts, [_handle(x) for x in t.types]
    old = types[0] if len(types) == 1 else TYPES["DATATYPE_NULL"]
    n = c[0] if c else 0
    params: dict = {}
    if name == "CONTIGUOUS":
        params = {"count": c[0]}
    elif name in ("VECTOR", "HVECTOR"):
        params = {"count": c[0], "blocklength": c[1], "stride": c[2]}
    elif name in ("INDEXED", "HINDEXED"):
        params = {"blocklengths": c[1:1 + n], "displacements": c[1 + n:1 + 2 * n]}
    elif name in ("INDEXED_BLOCK", "HINDEXED_BLOCK"):
        params = {"blocklength": c[1], "displacements": c[2:2 + n]}
    elif name == "STRUCT":
        params = {"blocklengths": c[1:1 + n], "displacements": c[1 + n:1 + 2 * n], "datatypes": types}
    elif name == "SUBARRAY":
        k = ints[0]
        params = {"sizes": c[:k], "subsizes": c[k:2 * k], "starts": c[2 * k:3 * k], "order": ints[1]}
    elif name == "DARRAY":
        k = ints[2]
        params = {"size": ints[0], "rank": ints[1], "gsizes": c[:k], "distribs": ints[3:3 + k],
                  "dargs": ints[3 + k:3 + 2 * k], "psizes": ints[3 + 2 * k:3 + 3 * k], "order": ints[3 + 3 * k]}
    elif name == "RESIZED":
        params = {"lb": c[0], "extent": c[1]}
    elif name == "F90_INTEGER":
        params = {"r": ints[0]}
    elif name in ("F90_REAL", "F90_COMPLEX"):
        params = {"p": ints[0], "r": ints[1]}
    return old, name, params


for _f in (Create_contiguous, Create_vector, Create_hvector, Create_indexed, Create_hindexed, Create_indexed_block,
           Create_hindexed_block, Create_subarray, Create_darray, Create_resized, Dup, decode):
    setattr(Datatype, _f.__name__, _f)
Datatype.Create_dup = Dup  # mpi4py's convenience alias
for _f in (Create_struct, Create_f90_integer, Create_f90_real, Create_f90_complex, Match_size, Get_value_index):
    setattr(Datatype, _f.__name__, classmethod(_f))
