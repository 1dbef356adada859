"""Errors that are ours (misuse, broken invariants): raised, with what to do (DESIGN.md principle 5).

Errors that are the peer's (a malformed or foreign frame) are never raised: they are counted in the
receiving element's stats and dropped.
"""

import re

from .config import ConfigError


class EmuError(RuntimeError):
    """Base of the emulator's run-time errors."""


class FrameLossError(EmuError):
    """Frames were lost on a link and could not be recovered; the run stopped."""


class CausalityError(EmuError):
    """A frame arrived stamped earlier than virtual time already processed (a synchroniser bug)."""


class EngineError(EmuError):
    """An engine broke its contract (emitted a frame in the past, a timer before now)."""


class DeadlockError(EmuError):
    """No events are left but applications are still waiting; the message says who waits for what."""


class AppError(EmuError):
    """Applications raised: one line per distinct error with the hosts that raised it (and how
    many), then the traceback of the first failure once -- not one traceback per host."""

    def __init__(self, failures: list[tuple[str, int | None, str]]):
        """``failures``: (host, virtual time it failed at, its traceback text), in host order."""
        self.failures = failures
        groups: dict[str, list[tuple[str, int | None, str]]] = {}
        for host, t, tb in sorted(failures, key=lambda f: _natural(f[0])):
            what = _last_line(tb)
            groups.setdefault(re.sub(r"\d+", "#", what), []).append((host, t, what))  # alike but for numbers
        lines = []
        for where in sorted(groups.values(), key=lambda g: (min(t or 0 for _, t, _ in g), g[0][2])):
            hosts = ", ".join(h for h, _, _ in where[:4]) + (f", ... ({len(where)} hosts)" if len(where) > 4 else "")
            times = sorted({t for _, t, _ in where if t is not None})
            when = f" at {times[0]} ns" if len(times) == 1 else f" at {times[0]}..{times[-1]} ns" if times else ""
            alike = " (and alike)" if len({w for _, _, w in where}) > 1 else ""
            lines.append(f"{hosts}{when}: {where[0][2]}{alike}")
        self.summary = "; ".join(lines)
        """One line: each distinct error, where and when."""
        if not failures:
            super().__init__("application(s) failed")
            return
        first = min(failures, key=lambda f: (f[1] is None, f[1] or 0))
        super().__init__(f"application(s) failed: {self.summary}\nfirst failure, {first[0]} (at {first[1]} ns):\n"
                         f"{first[2]}".rstrip())

    def __reduce__(self):  # pickled (a worker, a pool) and copied from what it was made of
        return (type(self), (self.failures,))


def _natural(name: str) -> list:
    """Sort key: h2 before h10."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]


def _last_line(text: str) -> str:
    """The exception's own lines of a traceback (the unindented lines after the last frame), as
    one line; the text itself when it is no traceback."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    tail: list[str] = []
    for ln in reversed(lines):
        if ln[:1].isspace() or ln.startswith("Traceback ("):
            break
        tail.append(ln.strip())
    return " ".join(reversed(tail)) or text.strip()


def leaves(e: BaseException):
    """The exceptions inside ``e``, through nested exception groups (``e`` itself if not a group)."""
    if isinstance(e, BaseExceptionGroup):
        for x in e.exceptions:
            yield from leaves(x)
    else:
        yield e


__all__ = ["AppError", "CausalityError", "ConfigError", "DeadlockError", "EmuError", "EngineError",
           "FrameLossError"]
