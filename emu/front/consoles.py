"""Where a person reads the output: rich consoles for stdout and stderr, shared by the ``emu``
command and the demo."""

from __future__ import annotations

from rich.console import Console


def make_console(stderr: bool = False) -> Console:
    """A console that does not squeeze tables to 80 columns when the output is a pipe or a file."""
    c = Console(stderr=stderr)
    return c if c.is_terminal else Console(stderr=stderr, width=120)
