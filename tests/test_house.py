"""The house (issue 24): no import circles, dependencies in one direction, `emu` the only import name.

Imports are read from the source with ``ast``, all of them: at module level, inside functions and
under ``if TYPE_CHECKING:`` (a type named is a dependency too). Folders map to import names as
``pyproject.toml`` installs them: ``nodes/`` is ``emu.nodes``, ``switch/`` ``emu.switch``,
``topologies/`` ``emu.topologies``.
"""

import ast
import pathlib
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = {"emu": "emu", "nodes": "emu.nodes", "switch": "emu.switch", "topologies": "emu.topologies"}


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for folder, name in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join([name, *parts])] = path
    return mods


MODULES = _modules()


def _imports(mod: str, path: pathlib.Path) -> set[str]:
    """The modules of the project that ``mod`` imports (a package's ``__init__`` counts, except for
    its own submodules importing it)."""
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != mod and not (MODULES[name].name == "__init__.py" and mod.startswith(name + ".")):
                found.add(name)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for start in GRAPH:
        if start in index:
            continue
        work = [(start, iter(sorted(GRAPH[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(GRAPH[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_the_reader_sees_the_imports_that_matter():
    # guards against a checker that passes because it reads nothing
    assert len(MODULES) > 100
    assert "emu.nodes.nic.interface" in GRAPH["emu.nodes.host.engine"]
    assert "emu.nodes.host.engine" in GRAPH["emu.nodes.nic.engine"]
    assert "emu.front.engines" in GRAPH["emu.front.cluster"]


def test_no_import_circles():
    assert _circles() == []


def _substrate() -> list[str]:
    """Every module of emu/ but the front door: emu.front, and the package's own faces, ``emu``
    (hands on ``emu.Cluster``) and ``emu.__main__`` (``python -m emu``)."""
    return [m for m in MODULES if m.startswith("emu.") and m != "emu.__main__"
            and not m.startswith(("emu.front", "emu.nodes", "emu.switch", "emu.topologies"))]


@pytest.mark.parametrize("mod", _substrate())
def test_the_substrate_imports_nothing_above_it(mod):
    above = {t for t in GRAPH[mod] if t.startswith(("emu.front", "emu.nodes", "emu.switch", "emu.topologies"))}
    assert not above, f"{mod} imports {sorted(above)}"


def test_topologies_are_data_and_switches_know_no_nodes():
    for mod, targets in GRAPH.items():
        if mod.startswith("emu.topologies"):
            assert not {t for t in targets if t.startswith(("emu.nodes", "emu.switch", "emu.front"))}, mod
        if mod.startswith(("emu.nodes", "emu.switch")):
            assert not {t for t in targets if t.startswith("emu.front")}, mod
        if mod.startswith("emu.switch"):
            assert not {t for t in targets if t.startswith("emu.nodes")}, mod


def test_host_and_nic_meet_only_in_the_interface():
    mechanisms = {m for m in MODULES if m.startswith("emu.nodes.nic.")} - {"emu.nodes.nic.interface",
                                                                            "emu.nodes.nic.engine"}
    for mod in (m for m in MODULES if m.startswith("emu.nodes.host")):
        nic = {t for t in GRAPH[mod] if t.startswith("emu.nodes.nic")}
        assert nic <= {"emu.nodes.nic.interface"}, f"{mod} imports {sorted(nic)}"
    for mod in mechanisms:
        bad = {t for t in GRAPH[mod] if t.startswith(("emu.nodes.host", "emu.nodes.nic.engine"))}
        assert not bad, f"{mod} imports {sorted(bad)}"


def test_emu_is_the_only_top_level_import_name():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    assert listed == on_disk, f"pyproject.toml packages differ from the folders: {sorted(listed ^ on_disk)}"
    assert {k: v for k, v in config["package-dir"].items()} == {"emu.nodes": "nodes", "emu.switch": "switch",
                                                                "emu.topologies": "topologies"}
    others = [p for p in ROOT.glob("*/**/*.py") if p.parts[len(ROOT.parts)] in ("tests", "scripts")] + list(MODULES.values())
    for path in others:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                assert name.split(".")[0] not in ("nodes", "switch", "topologies"), f"{path}: import {name}"
