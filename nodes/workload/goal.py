"""GOAL schedules (LogGOPSim's text format) read into plain per-rank objects.

The grammar is LogGOPSim's (spcl/LogGOPSim ``src/LogGOPSim/txt2bin.re``)::

    num_ranks N
    rank R {
      lA: send <B>b to <r> [tag <t>] [cpu <c>] [nic <n>]
      lB: recv <B>b from <r|-1> [tag <t|-1>] [cpu <c>] [nic <n>]     (-1: any source / any tag)
      lC: calc <ns> [cpu <c>]
      lA requires lB        (A starts after B completed)
      lA irequires lB       (A starts after B started)
    }

Labels (``[a-zA-Z][a-zA-Z0-9_]*``) are optional and belong to their rank's block; an operation ends
at the end of its line. Comments: ``// ...`` to the end of the line and ``/* ... */``; unlike
txt2bin, which takes them only where an item may begin, they are taken anywhere.

:func:`read_schedule` reads a stream of lines one rank block at a time (:func:`iter_ranks`): what is
kept of a block is its compiled :class:`RankSchedule` (parallel integer lists, the labels, the
dependency lists), never the text. A malformed line is refused in one line naming the file, the line
and the fix (:class:`GoalError`). Nothing here opens a file: the front door hands the lines in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from emu.config import ConfigError

SEND, RECV, CALC, COLL = 0, 1, 2, 3
KIND_NAMES = ("send", "recv", "calc", "coll")
"""(COLL: a collective of a Chakra trace, ``emu.nodes.workload.chakra``; GOAL has none.)"""
ANY = -1
"""Any source / any tag of a receive."""
MAX_TAG = 2**31 - 1
"""Tags travel in the MPI envelope's signed 32-bit field (``emu.wire.mpi.MpiEnvelope``)."""
MAX_RANKS = 1 << 20

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_]*|-1|\d+|[:{}]|\S")
_FAST_MSG = re.compile(r"\s*([A-Za-z][A-Za-z0-9_]*)\s*:\s*(send|recv)\s+(\d+)\s*b\s+(?:to|from)\s+(-1|\d+)"
                       r"(?:\s+tag\s+(-1|\d+))?(?:\s+cpu\s+(\d+))?(?:\s+nic\s+(\d+))?\s*$")
_FAST_CALC = re.compile(r"\s*([A-Za-z][A-Za-z0-9_]*)\s*:\s*calc\s+(\d+)(?:\s+cpu\s+(\d+))?\s*$")
_FAST_DEP = re.compile(r"\s*([A-Za-z][A-Za-z0-9_]*)\s+(requires|irequires)\s+([A-Za-z][A-Za-z0-9_]*)\s*$")
"""The common lines, read without tokens; anything else (or a value out of range) takes the full path."""
_KEYWORDS = {"send", "recv", "calc", "rank", "num_ranks", "requires", "irequires", "tag", "to", "from", "cpu", "nic"}


class GoalError(ConfigError):
    """A schedule refused: one line naming the file, the line and the fix."""


@dataclass
class RankSchedule:
    """One rank's operations, compiled: operation ``i`` is ``kind[i]`` of ``size[i]`` bytes (calc:
    ns) with ``peer[i]`` (send: destination; recv: source or -1), ``tag[i]`` (-1: any), on CPU
    stream ``cpu[i]`` and NIC ``nic[i]``; ``after_done[i]`` the operations that start only once ``i``
    completed (``requires``), ``after_start[i]`` those that start once ``i`` started (``irequires``);
    ``needs[i]`` how many dependencies ``i`` waits for."""

    rank: int
    kind: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    peer: list[int] = field(default_factory=list)
    tag: list[int] = field(default_factory=list)
    cpu: list[int] = field(default_factory=list)
    nic: list[int] = field(default_factory=list)
    labels: list[str | None] = field(default_factory=list)
    line: list[int] = field(default_factory=list)
    after_done: dict[int, list[int]] = field(default_factory=dict)
    after_start: dict[int, list[int]] = field(default_factory=dict)
    needs: list[int] = field(default_factory=list)
    first_line: int = 0
    """The line of ``rank r {``; ``alone``: nothing else on it (a streamed replay reads from the next)."""
    alone: bool = True

    def __len__(self) -> int:
        return len(self.kind)

    def name(self, i: int) -> str:
        """How a person names operation ``i``: its label, else ``#i``."""
        lab = self.labels[i]
        return lab if lab is not None else f"#{i}"

    def describe(self, i: int) -> str:
        k, s, p, t = self.kind[i], self.size[i], self.peer[i], self.tag[i]
        if k == CALC:
            return f"{self.name(i)}: calc {s}"
        tg = "" if t == 0 else f" tag {t}"
        return f"{self.name(i)}: {KIND_NAMES[k]} {s}b {'to' if k == SEND else 'from'} {p}{tg}"


@dataclass
class Schedule:
    """A whole schedule: its rank count and every rank's :class:`RankSchedule`."""

    num_ranks: int
    ranks: list[RankSchedule]
    path: str = "<schedule>"

    @property
    def ops(self) -> int:
        return sum(len(r) for r in self.ranks)


def _lines_without_comments(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line number, text) with comments blanked; a ``/*`` comment may span lines."""
    in_block = False
    for no, text in enumerate(lines, 1):
        if not in_block and "/" not in text:  # (most lines)
            yield no, text
            continue
        out = []
        i, n = 0, len(text)
        while i < n:
            if in_block:
                j = text.find("*/", i)
                if j < 0:
                    i = n
                    break
                in_block, i = False, j + 2
                out.append(" ")
                continue
            j1, j2 = text.find("//", i), text.find("/*", i)
            if j1 < 0 and j2 < 0:
                out.append(text[i:])
                break
            if j2 < 0 or (0 <= j1 < j2):
                out.append(text[i:j1])
                break
            out.append(text[i:j2] + " ")
            in_block, i = True, j2 + 2
        yield no, "".join(out)


class _Reader:
    def __init__(self, path: str):
        self.path = path
        self.no = 0

    def fail(self, problem: str, fix: str) -> GoalError:
        return GoalError(f"{self.path}:{self.no}: {problem}; {fix}")

    def int_(self, toks: list[str], i: int, what: str, fix: str, lo: int = 0, hi: int = 2**63 - 1,
             any_ok: bool = False) -> int:
        if i >= len(toks):
            raise self.fail(f"the line ends where {what} should be", fix)
        t = toks[i]
        if t == "-1" and any_ok:
            return ANY
        if not t.isdigit():
            raise self.fail(f"{what} expected, found {t!r}", fix)
        v = int(t)
        if not lo <= v <= hi:
            raise self.fail(f"{what} {v} is out of range {lo}..{hi}", fix)
        return v


def iter_ranks(lines: Iterable[str], path: str = "<schedule>") -> Iterator[int | RankSchedule]:
    """Read a schedule: first its rank count (an int), then each rank block (a
    :class:`RankSchedule`) as soon as its closing brace is read. Refuses a malformed line with
    :class:`GoalError`."""
    rd = _Reader(path)
    num_ranks: int | None = None
    cur: RankSchedule | None = None
    labels: dict[str, int] = {}
    seen: set[int] = set()
    op_fix = ("write an operation as 'lA: send 8b to 1 tag 0', 'lB: recv 8b from -1 tag -1', 'lC: calc 100' "
              "or a dependency as 'lA requires lB'")
    for no, text in _lines_without_comments(lines):
        rd.no = no
        if cur is not None and _fast(cur, labels, text, num_ranks, no):
            continue
        toks = _TOKEN.findall(text)
        i = 0
        while i < len(toks):
            t = toks[i]
            if t == "num_ranks":
                if num_ranks is not None:
                    raise rd.fail("num_ranks given twice", "give it once, before the first rank block")
                num_ranks = rd.int_(toks, i + 1, "the number of ranks", "write 'num_ranks N' with N >= 1", 1, MAX_RANKS)
                yield num_ranks
                i += 2
                continue
            if t == "rank":
                if cur is not None:
                    raise rd.fail(f"rank block inside the block of rank {cur.rank}", "close that block with '}' first")
                if num_ranks is None:
                    raise rd.fail("a rank block before num_ranks", "begin the schedule with 'num_ranks N'")
                r = rd.int_(toks, i + 1, "the rank", f"number the ranks 0..{num_ranks - 1}", 0, num_ranks - 1)
                if r in seen:
                    raise rd.fail(f"rank {r} has a second block", "give each rank one block")
                if i + 2 >= len(toks) or toks[i + 2] != "{":
                    raise rd.fail(f"'{{' expected after 'rank {r}'", f"write 'rank {r} {{' on one line")
                seen.add(r)
                cur, labels = RankSchedule(r, first_line=no, alone=i == 0 and len(toks) == 3), {}
                i += 3
                continue
            if t == "}":
                if cur is None:
                    raise rd.fail("'}' outside a rank block", "remove it, or open the block with 'rank R {'")
                yield cur
                cur = None
                i += 1
                continue
            if cur is None:
                raise rd.fail(f"{t!r} outside a rank block", "put operations inside 'rank R { ... }'")
            _statement(rd, cur, labels, toks[i:], num_ranks, op_fix)
            break  # an operation or a dependency is the rest of its line
    if cur is not None:
        rd.no += 1
        raise rd.fail(f"the file ends inside the block of rank {cur.rank}", "close the block with '}' (is the file cut short?)")
    if num_ranks is None:
        raise GoalError(f"{path}: no 'num_ranks N' line; a GOAL schedule begins with it")
    missing = sorted(set(range(num_ranks)) - seen)
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise GoalError(f"{path}: rank {missing[0]}{more} of num_ranks {num_ranks} has no block; give every rank "
                        f"'rank R {{ ... }}' (empty if it does nothing) or lower num_ranks")


def _statement(rd: _Reader, cur: RankSchedule, labels: dict[str, int], toks: list[str], num_ranks: int,
               op_fix: str) -> None:
    label = None
    t0 = toks[0]
    if t0 not in _KEYWORDS and t0[0].isalpha():  # a label: 'lA: op' or 'lA requires lB'
        if len(toks) < 2:
            raise rd.fail(f"a label {t0!r} alone", op_fix)
        if toks[1] in ("requires", "irequires"):
            if len(toks) < 3:
                raise rd.fail(f"'{t0} {toks[1]}' names no operation", f"write '{t0} {toks[1]} lB'")
            if len(toks) > 3:
                raise rd.fail(f"{toks[3]!r} after the dependency", "one dependency per line")
            a, b = labels.get(t0), labels.get(toks[2])
            for lab, ix in ((t0, a), (toks[2], b)):
                if ix is None:
                    raise rd.fail(f"label {lab!r} names no operation of rank {cur.rank} before this line",
                                  "define the operation (with 'label: ...') before the dependency")
            if a == b:
                raise rd.fail(f"{t0} {toks[1]} itself", "remove the line")
            (cur.after_done if toks[1] == "requires" else cur.after_start).setdefault(b, []).append(a)
            cur.needs[a] += 1
            return
        if toks[1] != ":":
            raise rd.fail(f"':', 'requires' or 'irequires' expected after {t0!r}, found {toks[1]!r}", op_fix)
        if t0 in labels:
            raise rd.fail(f"label {t0!r} defined twice in rank {cur.rank}", "give each operation its own label")
        label, toks = t0, toks[2:]
        if not toks:
            raise rd.fail(f"label {label!r} with no operation", op_fix)
    op = toks[0]
    n = len(toks)
    if op == "calc":
        ns = rd.int_(toks, 1, "the calc time (ns)", "write 'calc <ns>'")
        cpu, i = 0, 2
        if i < n and toks[i] == "cpu":
            cpu = rd.int_(toks, i + 1, "the CPU", "write 'cpu <c>'", 0, 255)
            i += 2
        if i < n:
            raise rd.fail(f"{toks[i]!r} after the calc", "a calc takes only 'cpu <c>' after its time")
        _add(cur, labels, label, CALC, ns, 0, 0, cpu, 0, rd.no)
        return
    if op not in ("send", "recv"):
        raise rd.fail(f"{op!r} is not an operation", op_fix)
    size = rd.int_(toks, 1, "the size", f"write '{op} <bytes>b ...'")
    if 2 >= n or toks[2] != "b":
        raise rd.fail(f"'b' expected after the size {size}", f"write '{op} {size}b ...'")
    word = "to" if op == "send" else "from"
    if 3 >= n or toks[3] != word:
        raise rd.fail(f"'{word}' expected in the {op}", f"write '{op} {size}b {word} <rank>'")
    peer = rd.int_(toks, 4, "the rank", f"name a rank 0..{num_ranks - 1}" + (" or -1 (any source)" if op == "recv" else ""),
                   0, num_ranks - 1, any_ok=op == "recv")
    tag, cpu, nic, i = 0, 0, 0, 5
    order = ["tag", "cpu", "nic"]
    while i < n:
        w = toks[i]
        if w not in order:
            raise rd.fail(f"{w!r} after the {op}", "only 'tag <t>', 'cpu <c>', 'nic <n>' follow, in that order")
        order = order[order.index(w) + 1:]
        if w == "tag":
            tag = rd.int_(toks, i + 1, "the tag", f"give a tag 0..{MAX_TAG}" + (" or -1 (any tag)" if op == "recv" else ""),
                          0, MAX_TAG, any_ok=op == "recv")
        elif w == "cpu":
            cpu = rd.int_(toks, i + 1, "the CPU", "write 'cpu <c>'", 0, 255)
        else:
            nic = rd.int_(toks, i + 1, "the NIC", "write 'nic <n>'", 0, 255)
        i += 2
    _add(cur, labels, label, SEND if op == "send" else RECV, size, peer, tag, cpu, nic, rd.no)


def _fast(cur: RankSchedule, labels: dict, text: str, num_ranks: int, no: int) -> bool:
    """Take a common, well-formed line at once (True); False: the full path reads it (and refuses)."""
    m = _FAST_MSG.match(text)
    if m is not None:
        label, op, size, peer, tag, cpu, nic = m.groups()
        if label in _KEYWORDS or label in labels:
            return False
        peer = int(peer)
        tag = 0 if tag is None else int(tag)
        cpu = 0 if cpu is None else int(cpu)
        nic = 0 if nic is None else int(nic)
        send = op == "send"
        if peer >= num_ranks or (send and (peer < 0 or tag < 0)) or tag > MAX_TAG or cpu > 255 or nic > 255:
            return False
        _add(cur, labels, label, SEND if send else RECV, int(size), peer, tag, cpu, nic, no)
        return True
    m = _FAST_DEP.match(text)
    if m is not None:
        a, how, b = m.groups()
        ia, ib = labels.get(a), labels.get(b)
        if ia is None or ib is None or ia == ib or a in _KEYWORDS:
            return False
        (cur.after_done if how == "requires" else cur.after_start).setdefault(ib, []).append(ia)
        cur.needs[ia] += 1
        return True
    m = _FAST_CALC.match(text)
    if m is not None:
        label, ns, cpu = m.groups()
        cpu = 0 if cpu is None else int(cpu)
        if label in _KEYWORDS or label in labels or cpu > 255:
            return False
        _add(cur, labels, label, CALC, int(ns), 0, 0, cpu, 0, no)
        return True
    return False


def _add(cur: RankSchedule, labels: dict, label, kind, size, peer, tag, cpu, nic, line) -> None:
    if label is not None:
        labels[label] = len(cur.kind)
    cur.kind.append(kind)
    cur.size.append(size)
    cur.peer.append(peer)
    cur.tag.append(tag)
    cur.cpu.append(cpu)
    cur.nic.append(nic)
    cur.labels.append(label)
    cur.line.append(line)
    cur.needs.append(0)


def read_schedule(lines: Iterable[str], path: str = "<schedule>") -> Schedule:
    """The whole schedule (every rank block compiled), checked: no dependency cycle."""
    it = iter_ranks(lines, path)
    ranks: list[RankSchedule | None] = []
    num = None
    for item in it:
        if isinstance(item, int):
            num = item
            ranks = [None] * num
        else:
            check_acyclic(item, path)
            ranks[item.rank] = item
    return Schedule(num, ranks, path)  # (iter_ranks refused a missing block)


def check_acyclic(rs: RankSchedule, path: str) -> None:
    """Refuse a dependency cycle in one line naming the operations on it."""
    needs = list(rs.needs)
    ready = [i for i, n in enumerate(needs) if n == 0]
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for succ in (rs.after_done.get(i, ()), rs.after_start.get(i, ())):
            for j in succ:
                needs[j] -= 1
                if needs[j] == 0:
                    ready.append(j)
    if done == len(rs):
        return
    stuck = [i for i, n in enumerate(needs) if n > 0]
    names = ", ".join(f"{rs.name(i)} (line {rs.line[i]})" for i in stuck[:4])
    more = f" and {len(stuck) - 4} more" if len(stuck) > 4 else ""
    raise GoalError(f"{path}: rank {rs.rank}: a dependency cycle: {names}{more} wait for each other; "
                    "remove one of their 'requires' lines")


def check_matching(s: Schedule) -> None:
    """Refuse, before a run, receives no send can match: per rank, more receives than messages sent
    to it, or more receives from a given source and tag than that source sends with that tag."""
    m = Matching(s.num_ranks, s.path)
    for rs in s.ranks:
        m.add(rs)
    m.check(lambda r: s.ranks[r])


class Matching:
    """What :func:`check_matching` counts, a rank block at a time (a block need not be kept): the
    messages sent per destination and per (source, destination, tag), the receives per rank, and
    the line of each receive from a given source and tag."""

    def __init__(self, num_ranks: int, path: str):
        self.path = path
        self.sent_to = [0] * num_ranks
        self.exact: dict[tuple[int, int, int], int] = {}
        self.count = [0] * num_ranks
        self.posted: dict[tuple[int, int, int], list[int]] = {}
        """(rank, source, tag) -> the op indices of its receives from that source with that tag."""

    def add(self, rs: RankSchedule) -> None:
        from array import array

        exact, posted, r = self.exact, self.posted, rs.rank
        for i, (k, p, t) in enumerate(zip(rs.kind, rs.peer, rs.tag)):
            if k == SEND:
                self.sent_to[p] += 1
                exact[(r, p, t)] = exact.get((r, p, t), 0) + 1
            elif k == RECV:
                self.count[r] += 1
                if p != ANY and t != ANY:
                    ops = posted.get((r, p, t))
                    if ops is None:
                        ops = posted[(r, p, t)] = array("q")
                    ops.append(i)

    def check(self, block) -> None:
        """Refuse the first receive no send can match; ``block(r)``: rank r's RankSchedule (to name it)."""
        by_rank: dict[int, list] = {}
        for key, ops in self.posted.items():
            by_rank.setdefault(key[0], []).append((key, ops))
        for r in range(len(self.count)):
            if self.count[r] > self.sent_to[r]:
                raise GoalError(f"{self.path}: rank {r} posts {self.count[r]} receives but {self.sent_to[r]} messages "
                                "are sent to it: the rest would wait for ever; remove receives or add sends")
            for (_, p, t), ops in by_rank.get(r, ()):
                have = self.exact.get((p, r, t), 0)
                if len(ops) > have:
                    rs, i = block(r), ops[have]
                    raise GoalError(f"{self.path}:{rs.line[i]}: rank {r}'s {rs.describe(i)} can match no send: rank {p} "
                                    f"sends it {have} message{'s' if have != 1 else ''} with tag {t}; fix the source "
                                    "or tag")
