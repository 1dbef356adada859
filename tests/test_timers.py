"""The node timer queue (emu.nodes.timers.Timers): order, cancellation, and ``next`` kept exact."""

from emu.nodes.timers import Timers


def test_ties_run_in_the_order_they_were_set_and_next_follows():
    tm, ran = Timers(), []
    assert tm.next is None
    tm.at(30, ran.append, "c")
    assert tm.next == 30
    tm.at(10, ran.append, "a")
    tm.at(10, ran.append, "b")
    assert tm.next == 10
    assert tm.run_due(9) == 10 and ran == []
    assert tm.run_due(10) == 30 and ran == ["a", "b"]
    assert tm.run_due(100) is None and ran == ["a", "b", "c"] and tm.next is None


def test_a_cancelled_timer_neither_runs_nor_stays_next():
    tm, ran = Timers(), []
    first = tm.at(10, ran.append, "a")
    second = tm.at(20, ran.append, "b")
    tm.at(30, ran.append, "c")
    tm.cancel(second)  # not the head: next is unchanged, it is dropped when reached
    assert tm.next == 10
    tm.cancel(first)  # the head: next moves past it and past the cancelled one behind it
    assert tm.next == 30
    assert tm.run_due(25) == 30 and ran == []
    assert tm.run_due(30) is None and ran == ["c"]


def test_a_timer_cancelled_or_set_while_timers_run():
    tm, ran = Timers(), []
    later = tm.at(10, ran.append, "later")

    def first(_):
        ran.append("first")
        tm.cancel(later)  # the head now: it goes, it does not run
        tm.at(5, ran.append, "now")  # due already: runs in this same call, after this one
        tm.at(50, ran.append, "end")

    tm.at(5, first, None)
    assert tm.run_due(10) == 50
    assert ran == ["first", "now"]
    assert tm.run_due(50) is None and ran == ["first", "now", "end"]
