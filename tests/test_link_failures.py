"""One link failure per link class, per topology family (issue 42, item 1): every collective completes
equal to numpy while the ranks stay connected, within a bound of the healthy run derived from the
timeout and the manager's reaction time (scripts/link_failures.py states it and runs the larger
sweep); a host whose only link dies fails in one line that names the link."""

import pytest

from load_script import load

sweep = load("link_failures")


def test_the_bound_is_one_capped_timeout_and_the_managers_reaction_past_twice_the_healthy_time():
    from emu.config import HostSpec, ManagerSpec

    h, m = HostSpec(), ManagerSpec()
    assert (sweep.RTO_NS, sweep.PERSIST_NS, sweep.RETRY_NS) == (h.rto_ns, m.persist_ns, m.retry_ns)
    assert h.rto_min_ns > m.persist_ns + m.retry_ns  # a message lost waits past the manager's rewrite
    assert sweep.bound_ns(36_656) == 2 * 36_656 + 1_000_000 + 20_000 + 20_000


@pytest.mark.parametrize("topo", list(sweep.QUICK))
def test_one_link_down_per_class_at_two_microseconds(topo, capsys):
    lines = []
    bad = sweep.check_family(topo, sweep.QUICK[topo], ("2us",), sweep.TESTS_OF.get(topo, sweep.TESTS),
                             out=lines.append)
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert not bad, bad
    assert lines  # every point ran
