"""What a neighbor collective costs on the rank side. Alltoallw's and Neighbor_alltoallw's blocks
(``emu.rank.inter.w_pack``/``w_unpack``): each block is the buffer's memory (or absolute addresses,
BOTTOM) with its displacement as the message's base -- no datatype is made per block and per call
(mpi4py's ``test_cco_ngh_buf`` at n = 4 made about 20,000 of them per test case), the bytes are the
same, and a block outside its buffer is refused. And a type's message runs are kept per count."""

from __future__ import annotations

import numpy as np
import pytest

from emu.rank import inter, types as T
from emu.rank.buffers import BOTTOM
from emu.rank.dtype import Datatype


@pytest.fixture
def no_new_types(monkeypatch):
    """Making a derived datatype fails the test."""
    def refuse(*a, **k):
        raise AssertionError("a datatype was made for a block")
    for name in ("Create_hindexed", "Create_hvector", "Create_contiguous", "Create_struct"):
        monkeypatch.setattr(Datatype, name, refuse)


def test_blocks_of_a_buffer_and_of_bottom_pack_the_same_bytes(no_new_types):
    INT, DOUBLE = T.TYPES["INT"], T.TYPES["DOUBLE"]
    a = np.arange(6, dtype="i4")
    d = np.array([1.5, 2.5, 3.5])
    # buffer: counts, byte displacements, types
    parts = inter.w_pack([a, ([2, 1, 3], [0, 8, 12]), [INT, INT, INT]], 3)
    assert [np.frombuffer(p, "i4").tolist() for p in parts] == [[0, 1], [2], [3, 4, 5]]
    # BOTTOM: the displacements are addresses, of two arrays and two types
    sa, sd = T.Get_address(a), T.Get_address(d)
    parts = inter.w_pack([BOTTOM, ([2, 2], [sa + 4, sd + 8]), [INT, DOUBLE]], 2)
    assert np.frombuffer(parts[0], "i4").tolist() == [1, 2] and np.frombuffer(parts[1], "f8").tolist() == [2.5, 3.5]


def test_blocks_unpack_in_place_and_skip_what_came_from_proc_null(no_new_types):
    INT = T.TYPES["INT"]
    r = np.full(6, -1, "i4")
    data = np.array([7, 8, 9, 10], "i4").tobytes()
    inter.w_unpack([r, ([1, 2, 1], [20, 0, 8]), [INT] * 3], 3, [4, 8, 4], data)
    assert r.tolist() == [8, 9, 10, -1, -1, 7]
    q = np.full(4, -1, "i4")
    ra = T.Get_address(q)
    inter.w_unpack([BOTTOM, ([2, 2], [ra, ra + 8]), [INT, INT]], 2, [8, 8], data, skip={0})
    assert q.tolist() == [-1, -1, 9, 10]


def test_a_block_outside_its_buffer_is_refused():
    INT = T.TYPES["INT"]
    a = np.arange(4, dtype="i4")
    for count, displ in ((1, -4), (2, 12)):  # before the buffer (not its tail, as a slice read it), past its end
        with pytest.raises(T.Exception, match="outside it"):
            inter.w_pack([a, ([count], [displ]), [INT]], 1)
    with pytest.raises(ValueError, match="negative count"):
        inter.w_pack([a, ([-1], [0]), [INT]], 1)
    assert inter.w_pack([a, ([0], [64]), [INT]], 1) == [b""]  # an empty block reads nothing


def test_a_types_message_runs_are_kept_per_count_and_stay_right():
    """``Datatype._message``: the runs of a message of ``count`` elements are worked out once per type and
    count (a neighbor collective asked for them 8 times per call), for small ones only."""
    INT = T.TYPES["INT"]
    vec = INT.Create_vector(3, 1, 2).Commit()
    first = vec._message(2)
    assert vec._message(2) is first and vec._message(3) is not first
    a = np.arange(12, dtype="i4")
    from emu.rank.buffers import Msg
    for _ in range(2):  # the same bytes from the kept runs
        assert np.frombuffer(Msg([a, 2, vec]).pack(), "i4").tolist() == [0, 2, 4, 5, 7, 9]
    big = INT.Create_vector(5000, 1, 2).Commit()
    assert big._message(1) is big._message(1)  # (one element: the type's own runs)
    assert big._message(2) is not big._message(2)  # 10,000 runs: not kept
    for k in range(20):  # a few counts kept at a time
        vec._message(k)
    assert len(vec._t.msgs) <= 8
