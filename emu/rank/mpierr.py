"""The error classes the datatype modules raise, and ``Missing``; ``MPI.Exception`` itself is
``emu.rank.errors.Exception`` (one class: a program catches what every part raises)."""

from __future__ import annotations

from .errors import Exception  # noqa: A001,F401 -- MPI.Exception

ERR_BUFFER, ERR_COUNT, ERR_TYPE, ERR_OP, ERR_ARG, ERR_TRUNCATE, ERR_OTHER = 1, 2, 3, 9, 12, 14, 15


class Missing(NotImplementedError, AttributeError):
    """A part of MPI the emulated library does not have (also an AttributeError: ``hasattr`` is False)."""
