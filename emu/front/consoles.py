"""Where a person reads the output: rich consoles for stdout and stderr, shared by the ``emu``
command and the demo."""

from __future__ import annotations

from rich.console import Console


UNWRAPPED = 1 << 20
"""The width of a console that is not a terminal: no line is ever broken (a table takes the width
its cells need)."""


def make_console(stderr: bool = False) -> Console:
    """A console for a person at a terminal (colour, its width, spinners where the caller shows them),
    or, when the output is a pipe or a file, one that never wraps a line (whatever ``COLUMNS`` says)
    and writes no colour codes: a log or a ``grep`` gets each line whole."""
    c = Console(stderr=stderr)
    if c.is_terminal:
        return c
    return Console(stderr=stderr, width=UNWRAPPED, soft_wrap=True, color_system=None, highlight=False)


console = make_console()
"""The ``emu`` command's stdout console (its subcommands print their tables and lines to it)."""
