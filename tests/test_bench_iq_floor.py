"""``scripts/bench_iq.py --floor``: the router's functions it counts exist in the compiled core's
sources (a rename would make it refuse, not count nothing), and a child's split of a point's CPU
puts the compiled window()'s part inside the point's."""

import re
import sys
from pathlib import Path

import pytest

from emu import native

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import bench_iq  # noqa: E402


def test_the_router_functions_counted_are_the_cores():
    src = "".join(p.read_text() for p in sorted((ROOT / "emu" / "csrc").glob("*.h")))
    for name in bench_iq.ROUTER:
        assert re.search(rf"^static [^;(]*\b{name}\(", src, re.M), f"{name} is no function of emu/csrc"


@pytest.mark.skipif(native.CORE is None, reason="the compiled core is not built here (no C compiler?)")
def test_a_split_point_times_window_inside_its_cpu():
    res = bench_iq.ours(str(ROOT), 4, 1, 1, [0.2], 20, ["input_queued"], split=True)  # (a child process, as --floor's)
    p = res["points"][0]
    assert p["hops"] > 0
    assert 0 < p["window_s"] < p["cpu_s"]
