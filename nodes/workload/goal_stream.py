"""One rank's block of a GOAL schedule, read as the replay consumes it (``emu replay FILE.goal``).

The schedule was read once before the run (``goal.iter_ranks``: the grammar, cycles, receives no
send can match), a block at a time, keeping of each block only where it begins. During the run
each rank reads its own block from there with the same parser, at most ``window`` operations read
and not completed. A GOAL dependency line may follow its operations anywhere in the block, so an
operation is considered only once ``seal`` more operations were read after it (or the block ended):
a dependency line naming an operation that far back is refused (raise ``--window``). An operation
that became ready while it was still unread, or not yet sealed (the window was full), starts later
than a whole reading would start it: each such delay is counted (``window_delays``), and where there
was none the figures are those of the whole schedule read first, exactly.
"""

from __future__ import annotations

from typing import BinaryIO

from .chakra import DoneSet, Op
from .goal import _TOKEN, GoalError, _fast, _lines_without_comments, _Reader, _statement

OP_FIX = ("write an operation as 'lA: send 8b to 1 tag 0', 'lB: recv 8b from -1 tag -1', 'lC: calc 100' "
          "or a dependency as 'lA requires lB'")


class _Grow:
    """A list by absolute index whose early items can be dropped (``append``, ``len``, ``[i]``)."""

    __slots__ = ("d", "n")

    def __init__(self):
        self.d, self.n = {}, 0

    def append(self, v) -> None:
        self.d[self.n] = v
        self.n += 1

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return self.d[i]

    def __setitem__(self, i: int, v) -> None:
        self.d[i] = v

    def pop(self, i: int):
        return self.d.pop(i)


class _Counts(_Grow):
    """Dependencies left per operation; an operation taken up and done has none (a late line names it:
    refused by ``GoalFeed._deps``)."""

    __slots__ = ()

    def __getitem__(self, i: int):
        return self.d.get(i, 0)


class _Block:
    """What ``goal._add`` and the dependency parsers write into (a ``RankSchedule``'s attributes)."""

    def __init__(self, rank: int):
        self.rank = rank
        self.kind, self.size, self.peer, self.tag, self.cpu, self.nic = (_Grow() for _ in range(6))
        self.labels, self.line, self.needs = _Grow(), _Grow(), _Counts()
        self.after_done: dict[int, list[int]] = {}
        self.after_start: dict[int, list[int]] = {}


class GoalFeed:
    def __init__(self, f: BinaryIO, path: str, rank: int, num_ranks: int, first_line: int, window: int,
                 seal: int | None = None):
        self.path, self.rank, self.num_ranks = path, rank, num_ranks
        self.window = window
        self.seal = seal if seal is not None else max(1, window // 4)
        self.first_line = first_line
        self.lines = _lines_without_comments(raw.decode("utf-8") for raw in f)
        self.rd = _Reader(path)
        self.cur = _Block(rank)
        self.labels: dict[str, int] = {}
        self.sealed = 0
        self.in_flight = 0
        self.exhausted = False
        self.done, self.began = DoneSet(), set()
        self.after_done: dict[int, list[int]] = {}
        self.after_start: dict[int, list[int]] = {}
        self.ready_at: dict[int, tuple[int, int]] = {}
        """An operation not sealed yet whose last dependency was met: (when, by which)."""
        self.delays, self.first_delay = 0, None
        self.evict_at = 4 * window

    @property
    def count(self) -> int:
        return len(self.cur.kind)

    # -- reading ----------------------------------------------------------------------------------
    def _line(self) -> None:
        nxt = next(self.lines, None)
        if nxt is None:
            raise GoalError(f"{self.path}: the file ends inside the block of rank {self.rank}; is it cut short?")
        no, text = nxt
        no += self.first_line
        self.rd.no = no
        cur = self.cur
        if not _fast(cur, self.labels, text, self.num_ranks, no):
            toks = _TOKEN.findall(text)
            if not toks:
                return
            if toks[0] == "}":
                self.exhausted = True
                return
            try:
                _statement(self.rd, cur, self.labels, toks, self.num_ranks, OP_FIX)
            except GoalError as e:
                raise GoalError(f"{e} (or it names an operation more than {2 * self.window:,} operations back, which "
                                "a replay no longer holds: raise --window)") from None
        self.in_flight = self.count - self._retired
        if cur.after_done or cur.after_start:
            self._deps(no)
        if self.count >= self.evict_at:
            self._evict()

    _retired = 0

    def _deps(self, no: int) -> None:
        cur = self.cur
        for how, rec, met, real in (("requires", cur.after_done, self.done, self.after_done),
                                    ("irequires", cur.after_start, None, self.after_start)):
            for b, succ in rec.items():
                for a in succ:
                    if a < self.sealed:
                        raise GoalError(f"{self.path}:{no}: '{self._name(a)} {how} {self._name(b)}' comes more than "
                                        f"{self.seal:,} operations after {self._name(a)}, which the replay has taken "
                                        f"up already; put dependency lines closer to their operations or raise "
                                        f"--window (above {4 * (self.count - a):,})")
                    if b in self.done or (met is None and b in self.began):
                        cur.needs[a] -= 1  # met already (when, not known: counted a delay if it then waits)
                        if cur.needs[a] == 0:
                            self.ready_at[a] = (-1, b)
                    else:
                        real.setdefault(b, []).append(a)
                        self.ready_at.pop(a, None)
            rec.clear()

    def _name(self, i: int) -> str:
        lab = self.cur.labels.d.get(i)
        if lab is None:  # (taken up already: its label only in the label table)
            lab = next((k for k, v in self.labels.items() if v == i), None)
        return lab if lab is not None else f"#{i}"

    def _evict(self) -> None:
        """Forget the labels of operations far behind (a later line cannot name them)."""
        low = self.count - 2 * self.window
        self.labels = {k: v for k, v in self.labels.items() if v >= low or v not in self.done}
        self.evict_at = self.count + 2 * self.window

    # -- what the replay asks -------------------------------------------------------------------------
    def more(self, now: int) -> list[tuple[int, Op, int, int, int]]:
        """(index, operation, dependencies left, when it became ready, what made it ready) of each
        operation sealed now."""
        if self.sealed >= self.count and (self.exhausted or self.in_flight >= self.window):
            return ()
        while not self.exhausted and self.in_flight < self.window:
            self._line()
        limit = self.count if self.exhausted else self.count - self.seal
        out = []
        cur = self.cur
        while self.sealed < limit:
            i = self.sealed
            self.sealed += 1
            n = cur.needs[i]
            ready, cause = 0, -1
            if n == 0:
                ready, cause = self.ready_at.pop(i, (0, -1))
                if ready < now:  # it could have started earlier
                    self.delays += 1
                    if self.first_delay is None:
                        self.first_delay = f"rank {self.rank} {self._name(i)} (line {cur.line[i]}) at {now} ns"
                    ready = max(ready, 0)
            op = Op(i, (), cur.kind.pop(i), cur.size.pop(i), cur.peer.pop(i), cur.tag.pop(i), cpu=cur.cpu.pop(i),
                    label=cur.labels.pop(i), line=cur.line.pop(i))
            cur.nic.pop(i)
            out.append((i, op, n, ready, cause))
        return out

    def _release(self, succ, i: int, now: int) -> list[int]:
        needs, out = self.cur.needs, []
        for j in succ:
            needs[j] -= 1
            if needs[j] == 0:
                if j < self.sealed:
                    out.append(j)
                else:
                    self.ready_at[j] = (now, i)
        return out

    def started(self, i: int, now: int) -> list[int]:
        self.began.add(i)
        succ = self.after_start.pop(i, None)
        return self._release(succ, i, now) if succ else []

    def finished(self, i: int, now: int) -> list[int]:
        self.done.add(i)
        self.began.discard(i)
        self._retired += 1
        self.in_flight -= 1
        self.cur.needs.pop(i)
        succ = self.after_done.pop(i, None)
        return self._release(succ, i, now) if succ else []


async def goal_stream_rank(host, rank: int, path: str, offset: int, first_line: int, num_ranks: int,
                           hosts: list[str], trace: bool = False, window: int = 1024, keep: bool = True):
    """Replay rank ``rank``'s block of the GOAL schedule ``path``, read from byte ``offset`` (the line
    after ``rank r {``, line ``first_line``) as the run consumes it."""
    from .chakra_replay import StreamRank

    f = open(path, "rb")
    f.seek(offset)
    feed = GoalFeed(f, path, rank, num_ranks, first_line, window)
    return await StreamRank(host, rank, feed, hosts, trace, {}, keep, f, goal=True).run()
