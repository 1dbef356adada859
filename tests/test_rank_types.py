"""The emulated mpi4py's datatypes, buffer specifications and local operators against the real MPICH.

Random type maps (nested constructors, transposing vectors and subarrays, structs, resized types,
negative displacements) are built with the real mpi4py (MPICH, a singleton in this process) and with
``emu.rank.types``; sizes, bounds, envelopes and the packed bytes must be the same, byte by byte."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from emu.rank import ops, typemap as tm, types as T
from emu.rank.buffers import BOTTOM, Msg

MPI = pytest.importorskip("mpi4py.MPI")

BASES = ["BYTE", "SHORT", "INT", "FLOAT", "DOUBLE", "INT64_T", "C_DOUBLE_COMPLEX", "SHORT_INT", "DOUBLE_INT",
         "LONG_DOUBLE"]
SWAPPABLE = {"BYTE", "SHORT", "INT", "FLOAT", "DOUBLE", "INT64_T", "C_DOUBLE_COMPLEX"}


def build(recipe, lookup, cls):
    """The datatype ``recipe`` describes, made with one MPI's ``lookup(name)`` and Datatype class."""
    kind, *args = recipe
    if kind == "named":
        return lookup(args[0])
    if kind == "struct":
        blocks = args[0]
        return cls.Create_struct([b for b, _, _ in blocks], [d for _, d, _ in blocks],
                                 [build(r, lookup, cls) for _, _, r in blocks])
    old = build(args[0], lookup, cls)
    rest = args[1:]
    if kind == "indexed" or kind == "hindexed":
        return getattr(old, f"Create_{kind}")([b for b, _ in rest[0]], [d for _, d in rest[0]])
    if kind == "darray":
        size, rank, gsizes, distribs, psizes, order = rest
        return old.Create_darray(size, rank, gsizes, distribs, [T.DISTRIBUTE_DFLT_DARG] * len(gsizes), psizes,
                                 order)
    if kind == "dup":
        return old.Dup()
    return getattr(old, f"Create_{kind}")(*rest)


def real(recipe):
    return build(recipe, lambda n: getattr(MPI, n), MPI.Datatype)


def emu(recipe):
    return build(recipe, lambda n: T.TYPES[n], T.Datatype)


@st.composite
def subarray(draw, children):
    n = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    subs = [draw(st.integers(1, s)) for s in sizes]
    starts = [draw(st.integers(0, s - u)) for s, u in zip(sizes, subs)]
    order = draw(st.sampled_from([T.ORDER_C, T.ORDER_F]))
    return ("subarray", draw(children), sizes, subs, starts, order)


@st.composite
def darray(draw, children):
    n = draw(st.integers(1, 2))
    psizes = draw(st.lists(st.integers(1, 2), min_size=n, max_size=n))
    size = int(np.prod(psizes))
    gsizes = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    distribs = draw(st.lists(st.sampled_from([T.DISTRIBUTE_BLOCK, T.DISTRIBUTE_CYCLIC]), min_size=n, max_size=n))
    return ("darray", draw(children), size, draw(st.integers(0, size - 1)), gsizes, distribs, psizes,
            draw(st.sampled_from([T.ORDER_C, T.ORDER_F])))


def _extend(children):
    small, disp = st.integers(0, 3), st.integers(-4, 6)
    return st.one_of(
        st.tuples(st.just("contiguous"), children, small),
        st.tuples(st.just("vector"), children, small, small, st.integers(-4, 4)),
        st.tuples(st.just("hvector"), children, small, small, st.integers(-40, 40)),
        st.tuples(st.just("indexed"), children, st.lists(st.tuples(small, disp), max_size=3)),
        st.tuples(st.just("hindexed"), children, st.lists(st.tuples(small, st.integers(-24, 48)), max_size=3)),
        st.tuples(st.just("indexed_block"), children, small, st.lists(disp, max_size=3)),
        st.tuples(st.just("hindexed_block"), children, small, st.lists(st.integers(-24, 48), max_size=3)),
        st.tuples(st.just("struct"), st.lists(st.tuples(small, st.integers(-24, 48), children), min_size=1,
                                              max_size=3)),
        st.tuples(st.just("resized"), children, st.integers(-16, 16), st.integers(1, 48)),
        st.tuples(st.just("dup"), children),
        subarray(children),
        darray(children),
    )


RECIPES = st.recursive(st.sampled_from(BASES).map(lambda n: ("named", n)), _extend, max_leaves=4)


def _bases(recipe) -> set:
    if recipe[0] == "named":
        return {recipe[1]}
    if recipe[0] == "struct":
        return set().union(*(_bases(r) for _, _, r in recipe[1]))
    return _bases(recipe[1])


def _same_bounds(a, b) -> None:
    assert b.Get_size() == a.Get_size()
    assert b.Get_extent() == a.Get_extent()
    assert b.Get_true_extent() == a.Get_true_extent()
    assert b.Get_envelope() == a.Get_envelope()
    if not a.is_named:
        ra, rb = a.Get_contents(), b.Get_contents()
        assert rb[:3] == ra[:3]
        assert [x.combiner for x in rb[3]] == [x.combiner for x in ra[3]]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RECIPES, st.integers(1, 3))
def test_type_maps_pack_and_unpack_as_mpich_does(recipe, count):
    a, b = real(recipe).Commit(), emu(recipe).Commit()
    _same_bounds(a, b)
    lb, ext = a.Get_extent()
    tlb, text = a.Get_true_extent()
    if ext <= 0 or a.Get_size() == 0:
        return
    # the buffer begins far enough before the message for a negative true lb, and ends after its last byte
    lo = min(0, tlb, (count - 1) * ext + tlb)
    hi = max(tlb + text, (count - 1) * ext + tlb + text, count * ext)
    off = -lo
    pattern = (np.arange(off + hi + 8) % 251).astype(np.uint8)
    big = pattern.copy()
    n = a.Pack_size(count, MPI.COMM_SELF)
    out = bytearray(n)
    pos = a.Pack(memoryview(big)[off:off + count * ext], out, 0, MPI.COMM_SELF)
    want = bytes(out[:pos])
    if "LONG_DOUBLE" in _bases(recipe):  # MPICH packs its 10 bytes and zeroes the 6 of padding; we copy all 16
        return
    flat = b._message(count)
    got = tm.gather(big, off, flat)
    assert got == want
    fits = lo == 0 and hi <= count * ext
    if fits:  # the public call too (it refuses type maps outside the buffer)
        out2 = bytearray(n)
        assert b.Pack(big[:count * ext], out2, 0, None) == pos
        assert bytes(out2[:pos]) == want
    # unpack the packed bytes reversed into a fresh pattern: the same bytes change
    data = want[::-1]
    r1, r2 = pattern.copy(), pattern.copy()
    a.Unpack(data, 0, memoryview(r1)[off:off + count * ext], MPI.COMM_SELF)
    tm.scatter(r2, off, flat, data)
    assert r1.tobytes() == r2.tobytes()
    if _bases(recipe) <= SWAPPABLE and fits:  # external32: big-endian values
        e1 = _mpich_external(a, big[:count * ext], n)
        if e1 is None:  # MPICH's external32 dies on this type (SIGILL): nothing to compare with
            return
        e2 = bytearray(n)
        p2 = b.Pack_external("external32", big[:count * ext], e2, 0)
        assert bytes(e2[:p2]) == e1
        u1, u2 = pattern.copy(), pattern.copy()
        a.Unpack_external("external32", e1, 0, u1[:count * ext])
        b.Unpack_external("external32", e2[:p2], 0, u2[:count * ext])
        assert u1.tobytes() == u2.tobytes()


def _mpich_external(a, inbuf, n: int):
    """MPICH's external32 packing of ``inbuf``, in a child process (MPICH 5 traps on some type maps)."""
    import os

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover -- the child
        try:
            import faulthandler

            faulthandler.disable()  # its trap is expected: quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            out = bytearray(n)
            os.write(w, bytes(out[:a.Pack_external("external32", inbuf, out, 0)]) or b"-")
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status):
        return None
    return b"" if data == b"-" else data


@settings(max_examples=150, deadline=None)
@given(RECIPES)
def test_decode_recreates_the_same_type(recipe):
    b = emu(recipe)
    if b.is_named:
        return
    old, comb, params = b.decode()
    a = real(recipe)
    assert (comb, params.keys()) == (a.decode()[1], a.decode()[2].keys())
    import pickle

    c = pickle.loads(pickle.dumps(b))
    assert (c.Get_size(), c.Get_extent(), c.Get_true_extent(), c.Get_envelope()) == \
           (b.Get_size(), b.Get_extent(), b.Get_true_extent(), b.Get_envelope())


# -- the silent wrong data, fixed ------------------------------------------------------------------------
def test_a_transposing_vector_type_sends_the_transpose():
    """A 3x4 C array sent with a column type resized to one int: the columns, one after another
    (issue 40: the byte runs were sorted, so the rows went out untransposed)."""
    a = np.arange(12, dtype="i4").reshape(3, 4)
    col = T.TYPES["INT"].Create_vector(3, 1, 4).Create_resized(0, 4).Commit()
    assert np.frombuffer(Msg([a, 4, col]).pack(), "i4").tolist() == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    back = np.zeros((3, 4), "i4")
    Msg([back, 4, col], writable=True).unpack(np.arange(12, dtype="i4").tobytes())
    assert back.tolist() == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
    f = T.TYPES["INT"].Create_subarray([3, 4], [3, 4], [0, 0], T.ORDER_F).Commit()
    assert np.frombuffer(Msg([a, 1, f]).pack(), "i4").tolist() == list(range(12))  # memory order: F's own
    neg = T.TYPES["INT"].Create_vector(3, 1, -1).Commit()
    assert np.frombuffer(Msg([a, (1, 1), neg]).pack(), "i4").tolist() == [3, 2, 1]  # one extent (3 ints) in


def test_a_scalar_displacement_moves_the_message():
    """``[buf, (count, displ), T]`` starts ``displ`` extents into the buffer, sending and receiving
    (issue 40: it was ignored)."""
    a = np.arange(10, dtype="i4")
    assert np.frombuffer(Msg([a, (3, 4), T.TYPES["INT"]]).pack(), "i4").tolist() == [4, 5, 6]
    assert np.frombuffer(Msg([a, (None, 7), "i"]).pack(), "i4").tolist() == [7, 8, 9]
    assert np.frombuffer(Msg([a, 2, 5, T.TYPES["INT"]]).pack(), "i4").tolist() == [5, 6]
    r = np.zeros(10, "i4")
    Msg([r, (2, 6), T.TYPES["INT"]], writable=True).unpack(np.array([1, 2], "i4").tobytes())
    assert r.tolist() == [0, 0, 0, 0, 0, 0, 1, 2, 0, 0]
    m = Msg([a, (2, 3), T.TYPES["INT"]])  # a collective's block displacement adds to the message's own
    assert np.frombuffer(m.pack(2, 1), "i4").tolist() == [4, 5]


# -- buffer specifications as mpi4py reads them -------------------------------------------------------------------
def test_message_errors_are_mpi4pys():
    buf = bytearray(5)
    empty = Msg([None, 0, "B"])
    assert empty.count == 0 and empty.pack() == b""
    assert Msg([None, "B"]).count == 0
    assert Msg([BOTTOM, 0, "B"]).pack() == b""
    for spec, err in [([buf, 0, 0, "i", None], ValueError), ([buf, 0, "\0"], KeyError), ([buf, -1, "i"], ValueError),
                      ([buf, 0, -1, "i"], ValueError), ([buf, 0, 2, "i"], ValueError), ([None, 1, 0, "i"], ValueError),
                      ([buf, None, 0, "i"], ValueError), ([buf, 0, 1, T.TYPES["DATATYPE_NULL"]], ValueError),
                      ([[1, 2, 3, 4], 4, 0, "i"], TypeError), (object, TypeError)]:
        with pytest.raises(err):
            Msg(spec)
    with pytest.raises(BufferError):
        Msg(b"abc", writable=True)
    with pytest.raises(BufferError):
        Msg(np.zeros((4, 4))[:, ::2])
    t = T.TYPES["INT"].Create_resized(0, -4).Commit()
    with pytest.raises(ValueError):
        Msg([buf, None, t])


def test_vector_specifications():
    a = np.arange(10, dtype="i4")
    m = Msg(a, vector=True, blocks=3)  # 10 entries over 3 blocks: 4, 3, 3
    assert (m.counts, m.displs) == ([4, 3, 3], [0, 4, 7])
    m = Msg([a, 2, "i"], vector=True, blocks=3)  # one count for all, contiguous
    assert (m.counts, m.displs) == ([2, 2, 2], [0, 2, 4])
    m = Msg([a, (2, 3), "i"], vector=True, blocks=3)  # strided
    assert (m.counts, m.displs) == ([2, 2, 2], [0, 3, 6])
    m = Msg([a, [1, 2, 3], [9, 0, 4], "i"], vector=True, blocks=3)
    assert np.frombuffer(m.pack(m.counts[0], m.displs[0]), "i4").tolist() == [9]
    with pytest.raises(ValueError):
        Msg([a, [1, 2], [0, 1], "i"], vector=True, blocks=3)


def test_fortran_arrays_dlpack_and_cuda_interface():
    f = np.asfortranarray(np.arange(6, dtype="f8").reshape(2, 3))
    assert np.frombuffer(Msg(f).pack(), "f8").tolist() == [0, 3, 1, 4, 2, 5]
    assert Msg(f).dt == T.TYPES["DOUBLE"]
    src = np.arange(4, dtype="i4")
    assert np.frombuffer(Msg(src.__dlpack__ and _DL(src)).pack(), "i4").tolist() == [0, 1, 2, 3]
    dst = np.zeros(4, "i4")
    Msg(_CAI(dst), writable=True).unpack(src.tobytes())
    assert dst.tolist() == [0, 1, 2, 3]
    assert Msg(_CAI(dst)).dt == T.TYPES["INT"]
    with pytest.raises(BufferError):
        Msg(_CAI(dst, readonly=True), writable=True)


class _DL:
    """Only DLPack: a numpy array's ``__dlpack__`` without its buffer protocol."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class _CAI:
    def __init__(self, a, readonly=False):
        self.a = a
        self.__cuda_array_interface__ = {"version": 3, "data": (a.ctypes.data, readonly), "typestr": a.dtype.str,
                                         "shape": a.shape, "strides": None}


def test_bottom_and_absolute_addresses():
    x, y = np.arange(3, dtype="i4"), np.zeros(2, "f8")
    ax, ay = T.Get_address(x), T.Get_address(y)
    assert ax == x.ctypes.data and T.Aint_diff(ay, ax) == ay - ax and T.Aint_add(ax, 4) == ax + 4
    st_ = T.Datatype.Create_struct([2, 1], [ax + 4, ay], [T.TYPES["INT"], T.TYPES["DOUBLE"]]).Commit()
    data = Msg([BOTTOM, 1, st_]).pack()
    assert data == x[1:].tobytes() + y[:1].tobytes()
    with pytest.raises(ValueError):  # as mpi4py: None holds no count
        Msg([None, 1, st_])
    Msg([BOTTOM, 1, st_], writable=True).unpack(np.array([7, 8], "i4").tobytes() + np.array([2.5]).tobytes())
    assert x.tolist() == [0, 7, 8] and y.tolist() == [2.5, 0.0]


def test_a_huge_type_is_cheap_and_its_message_refused_in_one_line():
    t = T.TYPES["BYTE"].Create_contiguous(2**31 - 1).Commit()
    assert t.size == 2**31 - 1 and len(t._t.map()) == 1
    with pytest.raises(T.Exception) as e:
        Msg([np.zeros(1, "u1"), 1, t]).pack()
    assert e.value.Get_error_class() == T.ERR_COUNT
    assert "1,073,741,824" in str(e.value) and "\n" not in str(e.value)
    many = T.TYPES["BYTE"].Create_vector(2**30, 1, 2).Commit()  # a billion one-byte runs
    with pytest.raises(T.Exception):
        many._message(1)
    assert tm.MAX_PACK_BYTES == 1 << 30


# -- codes, constructors' corners, handles ------------------------------------------------------------------------
def test_codes_and_handles_as_mpi4py():
    for name in ["INT", "DOUBLE", "C_DOUBLE_COMPLEX", "INT8_T", "UINT64_T", "WCHAR", "DOUBLE_INT", "BOOL", "AINT"]:
        a, b = getattr(MPI, name), T.TYPES[name]
        assert (b.typestr, b.typechar) == (a.typestr, a.typechar)
        assert (b.Get_name(), b.Get_extent()) == (a.Get_name(), a.Get_extent())
        try:
            code = a.tocode()
        except ValueError:
            with pytest.raises(ValueError):
                b.tocode()
        else:
            assert b.tocode() == code and T.Datatype.fromcode(code) == T.Datatype.fromcode(code)
    for code in ["i", "d", "Zd", "f16", "u4", "b1", "p", "c"]:
        assert T.Datatype.fromcode(code).Get_name() == MPI.Datatype.fromcode(code).Get_name()
    with pytest.raises(ValueError):
        T.Datatype.fromcode("abc@xyz")
    null = T.Datatype()
    assert null == T.TYPES["DATATYPE_NULL"] and null is not T.TYPES["DATATYPE_NULL"] and not null
    assert T.Datatype(T.TYPES["INT"]) == T.TYPES["INT"]
    with pytest.raises(TypeError):
        T.Datatype((1, 2, 3))
    for r in (1, 4, 9, 18):
        a, b = MPI.Datatype.Create_f90_integer(r), T.Datatype.Create_f90_integer(r)
        assert (b.size, b.typestr, b.Get_envelope(), b.Get_contents()[0]) == \
               (a.size, a.typestr, a.Get_envelope(), a.Get_contents()[0])
    for p, r in ((6, 30), (15, 300)):
        for f in ("Create_f90_real", "Create_f90_complex"):
            a, b = getattr(MPI.Datatype, f)(p, r), getattr(T.Datatype, f)(p, r)
            assert (b.size, b.typestr, b.typechar, b.tocode()) == (a.size, a.typestr, a.typechar, a.tocode())
    assert T.Datatype.Get_value_index(T.TYPES["DOUBLE"], T.TYPES["INT"]) is T.TYPES["DOUBLE_INT"]
    assert T.Datatype.Get_value_index(T.TYPES["DOUBLE"], T.TYPES["FLOAT"]) == T.TYPES["DATATYPE_NULL"]
    assert T.Datatype.Match_size(T.TYPECLASS_REAL, 8).Get_name() == "MPI_REAL8"
    with pytest.raises(ValueError):
        T.Datatype.Create_struct([1], [0], [T.TYPES["INT"], T.TYPES["FLOAT"]])
    with pytest.raises(T.Exception) as e:
        T.TYPES["INT"].Create_contiguous(2).Pack_size(1, None)  # not committed: MPICH's ERR_TYPE
    assert e.value.Get_error_class() == T.ERR_TYPE
    assert T.CONSTANTS["COMBINER_SUBARRAY"] == MPI.COMBINER_SUBARRAY
    assert all(getattr(MPI, k) == v for k, v in T.CONSTANTS.items() if k.isupper())


# -- local reductions ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["MAX", "MIN", "SUM", "PROD", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR", "REPLACE",
                                "NO_OP"])
@pytest.mark.parametrize("typ", ["INT", "UNSIGNED_SHORT", "DOUBLE", "INT64_T", "C_DOUBLE_COMPLEX"])
def test_reduce_local_as_mpich(op, typ):
    a, b = np.array([3, 0, 5, 7]), np.array([2, 6, 5, 1])
    npt = T.TYPES[typ].numpy()
    x, y = a.astype(npt), b.astype(npt)
    y1, y2 = y.copy(), y.copy()
    try:
        getattr(MPI, op).Reduce_local([x, getattr(MPI, typ)], [y1, getattr(MPI, typ)])
    except MPI.Exception as e:
        with pytest.raises(T.Exception) as mine:
            T.OPS[op].Reduce_local([x, T.TYPES[typ]], [y2, T.TYPES[typ]])
        assert mine.value.Get_error_class() == e.Get_error_class()
        return
    T.OPS[op].Reduce_local([x, T.TYPES[typ]], [y2, T.TYPES[typ]])
    assert y2.tobytes() == y1.tobytes()


@pytest.mark.parametrize("op", ["MINLOC", "MAXLOC"])
@pytest.mark.parametrize("typ", ["DOUBLE_INT", "INT_INT", "SHORT_INT", "FLOAT_INT", "LONG_INT"])
def test_reduce_local_pairs_as_mpich(op, typ):
    npt = T.TYPES[typ].numpy()  # the packed value-and-index record
    ext = T.TYPES[typ].extent
    full = np.dtype({"names": ["v", "i"], "formats": [npt["v"], "<i4"], "offsets": [0, ext - 4 if typ != "DOUBLE_INT"
                                                                                     and typ != "LONG_INT" else 8],
                     "itemsize": ext})
    x, y = np.zeros(3, full), np.zeros(3, full)
    x["v"], x["i"], y["v"], y["i"] = [1, 5, 2], [0, 1, 2], [3, 5, 2], [9, 0, 4]
    y1, y2 = y.copy(), y.copy()
    getattr(MPI, op).Reduce_local([x, getattr(MPI, typ)], [y1, getattr(MPI, typ)])
    T.OPS[op].Reduce_local([x, T.TYPES[typ]], [y2, T.TYPES[typ]])
    assert y2[["v", "i"]].tolist() == y1[["v", "i"]].tolist()


def test_user_operators_as_mpi4py():
    seen = []

    def mysum(a, b, dt):
        assert isinstance(a, T.buffer) and isinstance(b, T.buffer) and not b.readonly  # as mpi4py's
        seen.append(dt)
        x, y = np.frombuffer(a, "i4"), np.frombuffer(b, "i4")
        y += x

    op = T.Op.Create(mysum, commute=True)
    acc, b = np.array([1, 2], "i4"), np.array([10, 20], "i4")
    op.fn(memoryview(acc).cast("B"), memoryview(b).cast("B"), T.TYPES["INT"])  # as the channel calls it
    assert b.tolist() == [11, 22]
    seen.clear()
    x, y = np.array([1, 2], "i4"), np.array([10, 20], "i4")
    op.Reduce_local([x, T.TYPES["INT"]], [y, T.TYPES["INT"]])
    assert y.tolist() == [11, 22] and seen == [T.TYPES["INT"]] and op.Is_commutative() and not op.is_predefined
    assert T.Op(op) == op and T.Op() == T.OPS["OP_NULL"] and not T.Op()
    more = [T.Op.Create(mysum) for _ in range(ops.MAX_USER_OPS - 1)]
    with pytest.raises(RuntimeError):
        T.Op.Create(mysum)
    for o in more + [op]:
        o.Free()
    assert not op
    with pytest.raises(T.Exception):
        T.OPS["SUM"].Free()
    assert T.OPS["REPLACE"](2, 3) == 3 and T.OPS["NO_OP"](2, 3) == 2
    with pytest.raises(ValueError):
        T.OPS["OP_NULL"](1, 2)


def test_mpi_buffer_and_alloc_mem():
    b = T.buffer()
    assert (b.address, b.obj, b.nbytes, b.readonly, len(b)) == (0, None, 0, False, 0)
    m = T.Alloc_mem(16)
    assert m.address != 0 and m.nbytes == 16 and not m.readonly
    m[3] = 7
    assert m[3] == 7 and m[0:4].nbytes == 4 and isinstance(m[0:4], T.buffer)
    with pytest.raises(IndexError):
        m[16]
    with pytest.raises(IndexError):
        m[::2]
    with pytest.raises(TypeError):
        m[None]
    with pytest.raises(ValueError):
        m[0:1] = m[1:3]
    ro = T.buffer(b"abc")
    assert ro.readonly and memoryview(ro).readonly and ro.tobytes() == b"abc"
    with pytest.raises(TypeError):
        ro[:] = 0
    assert Msg([m, "B"]).count == 16  # a buffer is a buffer specification too
    with pytest.raises(TypeError):
        T.buffer.allocate(None)
    with pytest.raises(ValueError):
        T.buffer.allocate(-1)
    T.Free_mem(m)
    assert (m.address, m.nbytes) == (0, 0)


def test_alltoallw_specifications():
    from emu.rank.buffers import MsgW

    a = np.arange(4, dtype="i4")
    w = MsgW([a, [1, 2], [0, 4], [T.TYPES["INT"]] * 2], blocks=2)  # byte displacements
    assert np.frombuffer(w.pack(1), "i4").tolist() == [1, 2]
    assert MsgW([a, [T.TYPES["INT"]] * 2], blocks=2).counts == [1, 1]
    for spec in ([a], [a, [0], [0], [T.TYPES["BYTE"]], None], [BOTTOM, None, [0], [T.TYPES["BYTE"]]],
                 [BOTTOM, [0], None, [T.TYPES["BYTE"]]]):
        with pytest.raises(ValueError):
            MsgW(spec, blocks=1)


def test_mpi4py_util_dtlib_works_on_the_emulated_types():
    """mpi4py's own ``util.dtlib`` (pure Python) run on the emulated MPI: numpy dtypes to datatypes
    and back, as on MPICH."""
    import types as pytypes

    import mpi4py.util.dtlib as real

    emu_mpi = pytypes.SimpleNamespace(**{k: v for k, v in T.TYPES.items()}, **T.CONSTANTS, Datatype=T.Datatype)
    src = open(real.__file__).read().replace("from .. import MPI", "")
    mod = pytypes.ModuleType("emu_dtlib")
    mod.MPI = emu_mpi
    exec(compile(src, "dtlib.py", "exec"), mod.__dict__)  # noqa: S102 -- mpi4py's module, on our MPI
    for spec in ["i4", "f8", "c16", "u2", "b1", [("a", "i4"), ("b", "f8")], ("f4", (2, 3)),
                 np.dtype([("x", "i2"), ("y", "f8")], align=True), np.dtype("i4", align=True)]:
        dt = np.dtype(spec)
        mine, theirs = mod.from_numpy_dtype(dt), real.from_numpy_dtype(dt)
        assert (mine.Get_size(), mine.Get_extent(), mine.Get_true_extent()) == \
               (theirs.Get_size(), theirs.Get_extent(), theirs.Get_true_extent())
        assert mod.to_numpy_dtype(mine) == real.to_numpy_dtype(theirs)
    for name in ["DOUBLE_INT", "SHORT_INT", "LONG_DOUBLE_INT", "C_DOUBLE_COMPLEX"]:
        assert mod.to_numpy_dtype(T.TYPES[name]) == real.to_numpy_dtype(getattr(MPI, name))
