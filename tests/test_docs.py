"""Documents a user has (issue 31, item 1): docs/ pages per mechanism, the fabric and the topologies,
linked from the README; user-facing text names a mechanism by what it is, never "spec 0N"; the
README's names exist on the topologies it shows (item 2)."""

import argparse
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MECHANISMS = ["nic-offload.md", "network-coding.md", "qsnet.md", "in-network-allreduce.md"]
PAGES = MECHANISMS + ["fabric.md", "topologies.md", "flows.md"]
SPEC = re.compile(r"\bspecs? 0\d", re.I)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_exists_and_the_readme_links_it(page):
    text = (ROOT / "docs" / page).read_text()
    assert f"(docs/{page})" in README
    assert not SPEC.search(text), page
    for target in re.findall(r"\]\(([\w.-]+\.md)\)", text):  # links between pages resolve
        assert (ROOT / "docs" / target).exists(), (page, target)


@pytest.mark.parametrize("page", MECHANISMS)
def test_a_mechanism_page_has_what_a_user_needs(page):
    text = (ROOT / "docs" / page).read_text()
    for heading in ("## What it models", "## Source", "## Parameters", "## What the tool measures",
                    "## Known limits"):
        assert heading in text, (page, heading)


@pytest.mark.parametrize("page", PAGES)
def test_parameter_tables_give_the_defaults_the_code_has(page):
    """Every row ``| `section.field` | unit | default | ... |`` holds the field's real default."""
    from emu.config import settable_fields

    defaults = {name: default for name, _kind, default, _doc in settable_fields()}
    rows = re.findall(r"^\| `(\w+\.\w+)` \| [^|]+ \| ([^|]+) \|", (ROOT / "docs" / page).read_text(), re.M)
    if page in MECHANISMS or page == "fabric.md":
        assert len(rows) >= 5, page
    for name, default in rows:
        assert name in defaults, (page, name)
        assert default.strip() == str(defaults[name]), (page, name, default, defaults[name])


def test_the_sources_are_cited_by_title_authors_and_venue():
    qsnet = (ROOT / "docs" / "qsnet.md").read_text()
    assert "Roweth" in qsnet and "QsNetIII" in qsnet and "High Performance Interconnects" in qsnet
    inc = (ROOT / "docs" / "in-network-allreduce.md").read_text()
    assert "De Sensi" in inc and "Flare: Flexible In-Network Allreduce" in inc and "SC '21" in inc


def test_the_readme_never_says_spec_0n():
    text = README + (ROOT / "docs" / "architecture.md").read_text()
    bad = [line for line in text.splitlines() if SPEC.search(line)]
    assert not bad, bad


def _helps(parser: argparse.ArgumentParser):
    yield parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _helps(sub)


def test_no_help_text_says_spec_0n():
    from emu.front.cli import _parser

    texts = list(_helps(_parser()))
    assert len(texts) >= 8
    bad = [line for text in texts for line in text.splitlines() if SPEC.search(line)]
    assert not bad, bad


USER_FACING_CALLS = {"add_argument", "add_parser", "add_argument_group", "ArgumentParser", "Table", "print",
                     "add_column", "Operation", "warn", "note"}


def test_no_user_facing_string_in_the_code_says_spec_0n():
    """Strings handed to argparse, to a table or a print, to an exception (what ``refused:`` and
    ``error:`` lines show) or naming an operation -- not comments and docstrings."""
    bad = []
    for folder in ("emu", "nodes", "switch", "topologies"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if not (name in USER_FACING_CALLS or name.endswith("Error")):
                    continue
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    for c in ast.walk(arg):
                        if isinstance(c, ast.Constant) and isinstance(c.value, str) and SPEC.search(c.value):
                            bad.append(f"{path.relative_to(ROOT)}:{c.lineno}: {c.value[:60]!r}")
    assert not bad, bad


TOPO = re.compile(r"\b((?:star|fattree|clos|twolevel|mesh|torus|qsnet):[\w=,.]+?)(?=[`\s)]|$)")
NAMES = re.compile(r"(link=([a-z]+\d+)-([a-z]+\d+)|switch=([a-z]+\d+)|--(?:ranks|hosts) ([a-z]+\d+(?:,[a-z]+\d+)*))")
"""Names as a topology has them (``s0``, ``h3``); placeholders (``link=A-B``, ``switch=S``) are not names."""


def test_names_in_the_readme_exist_on_the_topology_they_are_shown_with():
    """Every ``link=A-B``, ``switch=S``, ``--ranks`` and ``--hosts`` name in the README is a link, switch
    or host of the topology named before it on the same line or, failing that, in the same paragraph."""
    from emu.topologies.registry import build

    built: dict = {}
    checked = 0
    for para in re.split(r"\n\s*\n", README):
        lines = para.splitlines()
        for i, line in enumerate(lines):
            for m in NAMES.finditer(line):
                before = TOPO.findall(line[:m.start()]) or TOPO.findall(line) or \
                    [t for prev in lines[:i] for t in TOPO.findall(prev)]
                assert before, f"README: {m.group(0)!r} is shown with no topology: {line.strip()}"
                spec = before[-1].rstrip(".,")
                t = built.get(spec) or built.setdefault(spec, build(spec))
                if m.group(2):
                    assert any({lk.a, lk.b} == {m.group(2), m.group(3)} for lk in t.links), (spec, m.group(0))
                elif m.group(4):
                    assert t.nodes.get(m.group(4)) and t.nodes[m.group(4)].kind == "switch", (spec, m.group(0))
                else:
                    hosts = [h for h in m.group(5).split(",") if h]
                    assert all(h in t.nodes and t.nodes[h].kind == "host" for h in hosts), (spec, m.group(0))
                checked += 1
    assert checked >= 4
