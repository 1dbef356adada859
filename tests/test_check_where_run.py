"""A reduction's results checked where their ranks ran (issue 45): each process checks its own ranks'
(``run_collective(keep=True)``, ``check_where_run``), as strictly as the check in one place, with its
words; a wrong result is caught in any process."""

import dataclasses

import numpy as np
import pytest

import emu
from emu.nodes.collectives import check as kept
from emu.nodes.collectives.run import check_results, check_where_run, run_collective

SPEC = "fattree:k=2,n=3"  # 8 hosts


def spoil(token: str, rank: int, how: str) -> bool:
    """In a process: make ``rank``'s kept result wrong, if this process ran it."""
    return _spoil(kept._KEPT.get(token, {}), rank, how)


def _spoil(got: dict, rank: int, how: str) -> bool:
    if rank not in got:
        return False
    y = got[rank]
    if how == "value":
        y[len(y) // 2] += 1
    elif how == "size":
        got[rank] = y[:-1]
    else:  # a result where none was due
        got[rank] = np.zeros(3, np.float32)
    return True


def left() -> int:
    """In a process: the runs whose results or checks it still holds."""
    return len(kept._KEPT) + len(kept._PARTS)


@pytest.fixture
async def two(cluster):
    return await cluster(SPEC, processes=2)


def ranks_by_process(net, res) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r, h in enumerate(res.ranks):
        out.setdefault(net.plan.owner[h], []).append(r)
    return out


@pytest.mark.parametrize("operation,dtype,op", [("allreduce", "float32", "sum"), ("allreduce", "int32", "sum"),
                                                ("allreduce", "float64", "prod"), ("reduce", "int16", "max"),
                                                ("reduce_scatter", "uint8", "bxor")])
async def test_each_process_checks_its_ranks(two, operation, dtype, op):
    count = 8 * 40
    res = await run_collective(two, operation, count=count, dtype=dtype, op=op, root=3, seed=7, keep=True)
    assert res.kept and res.results == {}
    assert sorted(ranks_by_process(two, res)) == [0, 1]  # ranks in both processes
    with pytest.raises(ValueError, match="check_where_run"):
        check_results(res, count, dtype, op, 3, 7)
    await check_where_run(two, res, count, dtype, op, 3, 7)
    assert res.kept is None and await two.each_process(left) == [0, 0]


@pytest.mark.parametrize("how", ["value", "size", "none"])
async def test_a_wrong_result_is_caught_in_either_process(two, how):
    count = 1000
    operation = "reduce" if how == "none" else "allreduce"  # (a reduce's result at its root only)
    plain = await run_collective(two, operation, count=count, root=0, seed=3)  # the results, in this process
    for d, ranks in ranks_by_process(two, plain).items():
        r = ranks[-1] if how != "none" else [x for x in ranks if x != 0][0]
        res = await run_collective(two, operation, count=count, root=0, seed=3, keep=True)
        assert await two.each_process(spoil, lambda p: (res.kept, r, how)) == [p == d for p in (0, 1)]
        # the check in one place, of the same wrong result, says ...
        got = {i: None if plain.results[h] is None else plain.results[h].copy() for i, h in enumerate(plain.ranks)}
        _spoil(got, r, how)
        one = dataclasses.replace(plain, results={h: got[i] for i, h in enumerate(plain.ranks)})
        with pytest.raises(AssertionError) as in_one:
            check_results(one, count, "float32", "sum", 0, 3)
        with pytest.raises(AssertionError) as where_run:  # ... what the processes say
            await check_where_run(two, res, count, "float32", "sum", 0, 3)
        said = str(where_run.value).splitlines()[0]  # (pytest adds its own lines to an assert's message)
        assert said == str(in_one.value).splitlines()[0]
        assert f"rank {r} ({plain.ranks[r]})" in said
        assert await two.each_process(left) == [0, 0]


async def test_the_first_rank_wrong_is_named_whichever_process_ran_it(two):
    res = await run_collective(two, "allreduce", count=64, seed=1, keep=True)
    by = ranks_by_process(two, res)
    wrong = [by[0][-1], by[1][-1]]
    for r in wrong:
        await two.each_process(spoil, lambda p: (res.kept, r, "value"))
    with pytest.raises(AssertionError, match=rf"allreduce/\S+ sum float32: rank {min(wrong)} \(h\d+\) differs"):
        await check_where_run(two, res, 64, "float32", "sum", 0, 1)


async def test_what_cannot_go_by_chunks_comes_back_as_before(two):
    for operation, dtype, op in (("allreduce", "int32", "land"), ("allreduce", "float32", "maxloc"),
                                 ("bcast", "float32", "sum")):
        res = await run_collective(two, operation, count=16, dtype=dtype, op=op, seed=2, keep=True)
        assert res.kept is None and len(res.results) == 8
        await check_where_run(two, res, 16, dtype, op, 0, 2)


async def test_a_failed_run_keeps_nothing_here():
    async with emu.Cluster(SPEC) as net:
        with pytest.raises(emu.ConfigError):
            await run_collective(net, "allreduce", count=16, ranks=["h0", "nope"], keep=True)
        res = await run_collective(net, "allreduce", count=16, keep=True)
        assert len(kept._KEPT) == 1
        await check_where_run(net, res, 16, "float32", "sum", 0, 0)
        assert left() == 0


def test_the_reference_made_once_answers_as_allclose():
    rng = np.random.default_rng(5)
    ref = rng.uniform(-1, 1, 64).astype(np.float32)
    odd = ref.copy()
    odd[3], odd[9] = np.inf, np.nan
    for f in (ref, odd):
        near = kept._Near(f, 1e-3)
        for g in (f.copy(), f + np.float32(5e-4), f + np.float32(3e-3), np.where(np.isnan(f), 0, f).astype(np.float32),
                  np.full_like(f, np.nan), np.where(np.isfinite(f), f, np.inf).astype(np.float32)):
            for a, b in ((0, 64), (10, 30)):
                want = bool(np.allclose(g[a:b].astype(np.float64), f[a:b].astype(np.float64), rtol=1e-3, atol=1e-3))
                assert near(g[a:b], a, b) == want
    exact = kept._Near(np.arange(8, dtype=np.int32), None)
    assert exact(np.arange(2, 5, dtype=np.int32), 2, 5) and not exact(np.arange(3, 6, dtype=np.int32), 2, 5)
