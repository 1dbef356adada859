"""Type maps of the emulated ``mpi4py.MPI`` datatypes as compact run arrays (rank side).

One element of a datatype flattens to three int64 arrays in TYPE-MAP ORDER (never sorted):
``off`` (byte displacement of a run), ``ln`` (its length) and ``sw`` (the size of the basic
values it holds: what external32 byte-swaps). Adjacent runs are merged only when the second
follows the first in memory *and* in the map, so a transposing type stays transposed.

A message (``count`` elements ``extent`` apart) is packed by gathering these runs, and unpacked
by scattering into them, in bounded chunks. A message over ``MAX_PACK_BYTES`` or a type map over
``MAX_RUNS`` runs is refused in one line: the datatype itself stays cheap to build
(``Create_contiguous(2**31-1)`` is one run)."""

from __future__ import annotations

import numpy as np

from .mpierr import ERR_BUFFER, ERR_COUNT, Exception

MAX_PACK_BYTES = 1 << 30
"""The largest message the emulated MPI packs (1 GiB): the emulator carries every byte as frames."""
MAX_RUNS = 1 << 25
"""The most byte runs a message's type map may flatten to (each run costs 24 bytes of memory)."""
_CHUNK = 1 << 22  # bytes gathered or scattered per numpy step


class Flat:
    """One element's runs: ``off``, ``ln``, ``sw`` (int64 arrays), in type-map order."""

    __slots__ = ("off", "ln", "sw")

    def __init__(self, off, ln, sw):
        self.off, self.ln, self.sw = off, ln, sw

    @classmethod
    def of(cls, runs) -> "Flat":
        a = np.array(runs, np.int64).reshape(-1, 3)
        return cls(a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy())

    @classmethod
    def empty(cls) -> "Flat":
        z = np.zeros(0, np.int64)
        return cls(z, z, z)

    def __len__(self) -> int:
        return len(self.off)

    def dense(self) -> bool:
        return len(self.off) == 1

    def shifted(self, by: int) -> "Flat":
        return Flat(self.off + by, self.ln, self.sw)


def too_big(what: str, n: int, bound: int, unit: str, code: int) -> Exception:
    name = "MPI_ERR_COUNT" if code == ERR_COUNT else "MPI_ERR_BUFFER"
    return Exception(code, f"{name}: {what} would take {n:,} {unit}, over the emulated MPI's bound of {bound:,} "
                           f"{unit} (emu.rank.typemap.MAX_{'PACK_BYTES' if unit == 'bytes' else 'RUNS'}); "
                           "send it in smaller messages")


def merge(off, ln, sw) -> Flat:
    """Runs merged where one ends where the next begins (in map order); empty runs dropped."""
    keep = ln > 0
    if not keep.all():
        off, ln, sw = off[keep], ln[keep], sw[keep]
    if len(off) < 2:
        return Flat(off, ln, sw)
    brk = np.ones(len(off), bool)
    brk[1:] = (off[1:] != off[:-1] + ln[:-1]) | (sw[1:] != sw[:-1])
    if brk.all():
        return Flat(off, ln, sw)
    starts = np.flatnonzero(brk)
    return Flat(off[starts], np.add.reduceat(ln, starts), sw[starts])


def replicate(flat: Flat, displs) -> Flat:
    """``flat`` placed at each displacement of ``displs`` (an int64 array), in that order."""
    displs = np.asarray(displs, np.int64)
    n = len(displs) * len(flat)
    if n == 0:
        return Flat.empty()
    if flat.dense() and len(displs) > 1:  # one run: copies that touch merge before they are made
        step = np.diff(displs)
        if (step == flat.ln[0]).all():
            return Flat(flat.off + displs[0], flat.ln * len(displs), flat.sw.copy())
    if n > MAX_RUNS:
        raise too_big("the datatype's type map", n, MAX_RUNS, "runs", ERR_COUNT)
    off = (displs[:, None] + flat.off[None, :]).ravel()
    return merge(off, np.tile(flat.ln, len(displs)), np.tile(flat.sw, len(displs)))


def repeat(flat: Flat, count: int, step: int) -> Flat:
    """``count`` copies of ``flat``, ``step`` bytes apart, without a displacement array when they touch."""
    if count <= 0 or not len(flat):
        return Flat.empty()
    if count == 1:
        return flat
    if flat.dense() and step == flat.ln[0]:
        return Flat(flat.off.copy(), flat.ln * count, flat.sw.copy())
    if count * len(flat) > MAX_RUNS:
        raise too_big("the datatype's type map", count * len(flat), MAX_RUNS, "runs", ERR_COUNT)
    return replicate(flat, np.arange(count, dtype=np.int64) * step)


def concat(flats) -> Flat:
    flats = [f for f in flats if len(f)]
    if not flats:
        return Flat.empty()
    return merge(np.concatenate([f.off for f in flats]), np.concatenate([f.ln for f in flats]),
                 np.concatenate([f.sw for f in flats]))


def message(flat: Flat, count: int, extent: int, size: int) -> Flat:
    """The runs of ``count`` elements ``extent`` bytes apart, refused over the bounds."""
    if count * size > MAX_PACK_BYTES:
        raise too_big(f"a message of {count:,} elements of {size:,} bytes", count * size, MAX_PACK_BYTES, "bytes",
                      ERR_COUNT)
    return repeat(flat, count, extent)


def span(flat: Flat) -> tuple[int, int]:
    """The bytes the runs touch: [lo, hi)."""
    n = len(flat.off)
    if n == 1:  # (one run, the common message: no array reductions)
        lo = int(flat.off[0])
        return lo, lo + int(flat.ln[0])
    if not n:
        return 0, 0
    return int(flat.off.min()), int((flat.off + flat.ln).max())


def _expand(off, ln):
    """Byte indices of the runs ``off``/``ln``, in order."""
    total = int(ln.sum())
    starts = np.cumsum(ln) - ln
    return np.arange(total, dtype=np.int64) + np.repeat(off - starts, ln)


def indices(flat: Flat):
    """Byte offsets of every byte the runs touch, in type-map order (numpy int64)."""
    return _expand(flat.off, flat.ln)


def _chunks(flat: Flat):
    """(first run, end run, output offset) steps of at most about _CHUNK bytes."""
    ends = np.cumsum(flat.ln)
    i, at, n = 0, 0, len(flat.ln)
    while i < n:
        j = int(np.searchsorted(ends, at + _CHUNK, side="right"))
        j = max(j, i + 1)
        yield i, j, at
        at = int(ends[j - 1])
        i = j


def gather(mem: np.ndarray, base: int, flat: Flat, limit: int | None = None) -> bytes:
    """The bytes of ``flat``'s runs (at ``base`` in ``mem``), in map order; ``limit``: the first bytes only."""
    if not len(flat):
        return b""
    if flat.dense():
        o = base + int(flat.off[0])
        return mem[o:o + int(flat.ln[0])].tobytes()
    out = []
    big = flat.ln.mean() >= 4096
    for i, j, _ in _chunks(flat):
        if big:
            out.extend(mem[base + int(o):base + int(o) + int(n)].tobytes() for o, n in zip(flat.off[i:j], flat.ln[i:j]))
        else:
            out.append(mem[_expand(flat.off[i:j] + base, flat.ln[i:j])].tobytes())
    data = b"".join(out)
    return data if limit is None else data[:limit]


def scatter(mem: np.ndarray, base: int, flat: Flat, data) -> None:
    """``data`` into ``flat``'s runs (at ``base`` in ``mem``) in map order; it may end early."""
    src = np.frombuffer(data, np.uint8)
    left = len(src)
    if not left:
        return
    if flat.dense():
        o = base + int(flat.off[0])
        mem[o:o + left] = src
        return
    for i, j, at in _chunks(flat):
        if at >= left:
            break
        idx = _expand(flat.off[i:j] + base, flat.ln[i:j])
        n = min(len(idx), left - at)
        mem[idx[:n]] = src[at:at + n]


def to_big_endian(data: bytes, flat: Flat) -> bytes:
    """external32: every basic value of the packed ``data`` (the runs of ``flat``, in order) byte-swapped
    (the same operation turns external32 back to this machine's little-endian)."""
    arr = np.frombuffer(data, np.uint8).copy()
    n = len(arr)
    starts = np.cumsum(flat.ln) - flat.ln
    for s in np.unique(flat.sw):
        if s <= 1:
            continue
        m = (flat.sw == s) & (starts < n)
        idx = _expand(starts[m], flat.ln[m])
        idx = idx[idx < n]
        idx = idx[:len(idx) - len(idx) % s].reshape(-1, int(s))
        arr[idx] = arr[idx[:, ::-1]]
    return arr.tobytes()
