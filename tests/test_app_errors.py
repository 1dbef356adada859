"""Errors raised on many ranks come out as one line per distinct error, with the hosts and a count,
and the first failure's traceback once (issue 22: a link down under --offload hw printed 128)."""

import pytest

import emu
from emu.errors import AppError


async def _fail(host, why):
    await host.sleep(100 * (int(host.name[1:]) % 3))
    raise RuntimeError(f"rank {host.name[1:]}: {why}")


async def test_many_failures_make_one_line_per_distinct_error():
    async with emu.Cluster("star:n=12") as net:
        apps = {h: (_fail, "no data") for h in net.hosts}
        apps["h5"] = (_fail, "something else")
        with pytest.raises(AppError) as info:
            await net.run(apps)
    e = info.value
    assert len(e.failures) == 12
    assert e.summary == ("h0, h1, h2, h3, ... (11 hosts) at 0..200 ns: RuntimeError: rank 0: no data (and alike); "
                         "h5 at 200 ns: RuntimeError: rank 5: something else")
    text = str(e)
    assert text.count("Traceback (most recent call last)") == 1  # the first failure's, once
    assert "first failure, h0 (at 0 ns)" in text and "\n" not in e.summary


def test_the_summary_reads_the_exception_line_of_a_traceback():
    tb = ('Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\n'
          'ValueError: a message\nthat goes on\n')
    e = AppError([("h3", 7, tb), ("h10", 9, "TypeError: misuse")])
    assert e.summary == "h3 at 7 ns: ValueError: a message that goes on; h10 at 9 ns: TypeError: misuse"


def test_the_error_travels_between_processes():
    import copy
    import pickle

    e = AppError([("h1", 5, "ValueError: x"), ("h2", 5, "ValueError: y")])
    for back in (pickle.loads(pickle.dumps(e)), copy.copy(e)):
        assert back.failures == e.failures and back.summary == e.summary and str(back) == str(e)
    assert str(AppError([])) == "application(s) failed"
