"""``emu.front.table_text``: a report's tables printed off a terminal as the text rich prints for
them, made directly -- compared with rich's own on many tables (titles shorter and longer than
the table, left and right columns, one row and several, the two layouts ``emu run`` uses), and
the cases it leaves to rich (a terminal, markup, wide characters, emoji codes) printed by rich."""

import io
import random

from rich.console import Console
from rich.table import Table

from emu.front.consoles import UNWRAPPED
from emu.front.table_text import _plain_lines, print_table


def _console(**kw) -> Console:
    return Console(file=io.StringIO(), width=UNWRAPPED, soft_wrap=True, color_system=None, highlight=False, **kw)


def _both(make) -> tuple[str, str, bool]:
    """What rich prints for the table ``make()`` gives, what print_table prints, and whether the
    direct text was used."""
    a, b = _console(), _console()
    a.print(make())
    t = make()
    direct = _plain_lines(b, t) is not None
    print_table(b, t)
    return a.file.getvalue(), b.file.getvalue(), direct


WORDS = ["a", "ok", "test", "completion (ns)", "1,234", "-", "0.2809", "x y", "mesh:k=4,n=2",
         "uniform: curve", "a-b-c", "None", "True", "12", "[green]yes[/]", "[red]NO[/]", "(seed 0)", "e=1;f=2"]


def _random_table(rng: random.Random, boxed: bool):
    cols = rng.randint(1, 7)
    rows = [[rng.choice(WORDS) for _ in range(cols)] for _ in range(rng.randint(1, 4))]
    heads = [rng.choice(WORDS) for _ in range(cols)]
    just = [rng.choice(("left", "right")) for _ in range(cols)]
    title = " ".join(rng.choice([w for w in WORDS if "[" not in w]) for _ in range(rng.randint(1, 12)))

    def make():
        t = Table(title=title) if boxed else Table(title=title, box=None, padding=(0, 0, 0, 1), pad_edge=False)
        for h, j in zip(heads, just):
            t.add_column(h, justify=j, no_wrap=True)
        for r in rows:
            t.add_row(*r)
        return t
    return make


def test_the_same_text_as_rich_on_many_tables():
    rng = random.Random(7)
    used = 0
    for k in range(400):
        rich_text, ours, direct = _both(_random_table(rng, boxed=k % 2 == 0))
        assert ours == rich_text
        used += direct
    assert used == 400  # (every one of these is the plain case)


def test_emu_runs_tables():
    """The two tables of ``emu run``'s report, as run_output makes them."""
    from types import SimpleNamespace

    from emu.front.run_output import _results_table, _rows_table

    r = SimpleNamespace(name="uniform", ok=True, completion_ns=6780, frames=2903, bytes=261270, hop_count=13148)
    bad = SimpleNamespace(name="pingall", ok=False, completion_ns=None, frames=0, bytes=0, hop_count=0)
    args = SimpleNamespace(topo="mesh:k=4,n=2", seed=0, swept={"load": None})
    finished = [({"load": 0.1}, None, r), ({"load": 0.25}, None, bad)]
    rows = [{"offered": 0.2809, "packets": 1343, "mean_ns": 198.9, "saturated": False, "note": "x"},
            {"offered": 0.5, "packets": 12, "extra": "-"}]
    for make in (lambda: _results_table(args, finished), lambda: _rows_table("uniform: curve", rows)):
        rich_text, ours, direct = _both(make)
        assert direct and ours == rich_text


def test_left_to_rich():
    """Markup other than a colour, wide characters, an emoji code, spaces at an end, a terminal: rich
    prints them."""
    for cell in ("[bold]x[/]", "naïve", "日本", ":thumbs_up:", "a\tb", "  lead", "trail  "):
        def make(cell=cell):
            t = Table(title="t")
            t.add_column("c", justify="right", no_wrap=True)
            t.add_row(cell)
            return t
        rich_text, ours, direct = _both(make)
        assert not direct and ours == rich_text
    term = Console(file=io.StringIO(), force_terminal=True, width=80)
    t = Table(title="t")
    t.add_column("c", no_wrap=True)
    t.add_row("1")
    assert _plain_lines(term, t) is None
