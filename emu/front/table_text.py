"""A rich ``Table`` of plain cells printed on a console that is not a terminal (``consoles.make_console``:
no colour, never wrapped) as the lines rich would print, made directly: rich's own layout costs a few
milliseconds a table (each cell measured, rendered and padded as segments), the most of a small
``emu run``'s report. Anything outside the plain case (a terminal, markup or wide characters in a
cell, a table option other than those ``emu run`` uses) is printed by rich itself; tests compare the
two on many tables."""

from __future__ import annotations

from rich.box import Box
from rich.console import Console
from rich.table import Table

from .consoles import UNWRAPPED

try:
    from rich._emoji_replace import _emoji_replace  # (rich's own: what it replaces in a cell's text)
except ImportError:  # (a rich without it: a cell with a colon is left to rich)
    def _emoji_replace(s: str) -> str:
        return s + ":"

MARKED = {"[green]yes[/]": "yes", "[red]NO[/]": "NO"}
"""Cells whose markup is a colour alone, and their text (the colour is not printed off a terminal)."""
_PADS = {((0, 1, 0, 1), True), ((0, 0, 0, 1), False)}
"""(padding, pad_edge) of the tables handled: rich's default, and ``box=None`` tables' one space between columns."""


def print_table(out: Console, table: Table) -> None:
    """``out.print(table)``: the same text."""
    lines = _plain_lines(out, table)
    if lines is None:
        out.print(table)
    else:
        out.out("\n".join(lines), highlight=False)


def _plain(s) -> str | None:
    """A cell's text if it is one printed as it is (markup, emoji codes, wide or control characters,
    spaces at either end, which rich's justification trims: None)."""
    if s.__class__ is not str:
        return None
    s = MARKED.get(s, s)
    if not (s.isascii() and s.isprintable()) or "[" in s or s[:1] == " " or s[-1:] == " " or \
            (":" in s and _emoji_replace(s) != s):
        return None
    return s


def _plain_lines(out: Console, table: Table) -> list[str] | None:
    """The lines rich prints for ``table`` on ``out`` where they are plain (else None)."""
    if (out.is_terminal or out.color_system is not None or not out.soft_wrap or out.width != UNWRAPPED
            or out.legacy_windows or not out.encoding.lower().startswith("utf")):
        return None
    box = table.box
    if ((table._padding, table.pad_edge) not in _PADS or (box is not None and not isinstance(box, Box))
            or table.caption is not None or table.width is not None or table.min_width is not None or table.expand
            or not table.show_header or table.show_footer or not table.show_edge or table.show_lines or table.leading
            or table.collapse_padding or table.row_styles or table.title_justify != "center" or not table.rows
            or not table.columns or any(r.end_section or r.style is not None for r in table.rows)):
        return None
    title = _plain(table.title) if table.title else None
    if title is None:
        return None
    cols = []
    for c in table.columns:
        if (c.justify not in ("left", "right") or not c.no_wrap or c.width is not None or c.min_width is not None
                or c.max_width is not None or c.ratio is not None or c.vertical != "top" or c.footer):
            return None
        cells = [_plain(c.header)] + [_plain(x) for x in c._cells]
        if None in cells or len(cells) != len(table.rows) + 1:
            return None
        cols.append((c.justify == "right", cells))
    left, right = table._padding[3], table._padding[1]
    widths, texts = [], []  # (widths with the padding, as rich's box methods take them)
    last = len(cols) - 1
    for i, (rjust, cells) in enumerate(cols):
        w = max(len(x) for x in cells)
        if not w:
            return None
        lp = left if (i or table.pad_edge) else 0
        rp = right if (i < last or table.pad_edge) else 0
        widths.append(w + lp + rp)
        texts.append([" " * lp + (x.rjust(w) if rjust else x.ljust(w)) + " " * rp for x in cells])
    rows = list(zip(*texts))
    lines = [title]
    if box is None:
        lines.extend("".join(r) for r in rows)
        return lines
    lines.append(box.get_top(widths))
    n = len(rows)
    for k, r in enumerate(rows):
        if k == 0:
            a, b, d = box.head_left, box.head_right, box.head_vertical
        elif k == n - 1:
            a, b, d = box.foot_left, box.foot_right, box.foot_vertical
        else:
            a, b, d = box.mid_left, box.mid_right, box.mid_vertical
        lines.append(a + d.join(r) + b)
        if k == 0:
            lines.append(box.get_row(widths, "head", edge=True))
    lines.append(box.get_bottom(widths))
    return lines
