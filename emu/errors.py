"""Errors that are ours (misuse, broken invariants): raised, with what to do (DESIGN.md principle 5).

Errors that are the peer's (a malformed or foreign frame) are never raised: they are counted in the
receiving element's stats and dropped.
"""

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
    """An application raised; the message names the host and carries the traceback."""


def leaves(e: BaseException):
    """The exceptions inside ``e``, through nested exception groups (``e`` itself if not a group)."""
    if isinstance(e, BaseExceptionGroup):
        for x in e.exceptions:
            yield from leaves(x)
    else:
        yield e


__all__ = ["AppError", "CausalityError", "ConfigError", "DeadlockError", "EmuError", "EngineError",
           "FrameLossError"]
