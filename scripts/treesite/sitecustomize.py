"""Run another checkout's code (a benchmark's ``--before`` tree, a worktree) with this venv.

The editable install maps ``emu.nodes``, ``emu.switch`` and ``emu.topologies`` to the top-level
folders of the checkout it was installed from. A process started with this folder on
``PYTHONPATH`` and ``EMU_TREE=<checkout>`` (see ``scripts/trees.py``) imports ``emu`` and those
subpackages from ``<checkout>`` instead, as that checkout's ``pyproject.toml`` maps them. The
environment is inherited, so the workers a run starts import the same tree."""

import importlib.util
import os
import sys


def _mapping(tree: str) -> dict[str, str]:
    import tomllib

    with open(os.path.join(tree, "pyproject.toml"), "rb") as f:
        dirs = tomllib.load(f).get("tool", {}).get("setuptools", {}).get("package-dir", {})
    mapping = {"emu": os.path.join(tree, "emu")}
    mapping.update({name: os.path.join(tree, path) for name, path in dirs.items() if name})
    return mapping


class _TreeFinder:  # (a meta path finder: ``find_spec`` is all one needs; importlib.abc's base would
    # import importlib.resources, tempfile, shutil, ... into every benchmarked process, ~9 ms of start-up)
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def find_spec(self, fullname, path=None, target=None):
        folder = self.mapping.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(fullname, os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])


_tree = os.environ.get("EMU_TREE")
if _tree and os.path.isfile(os.path.join(_tree, "pyproject.toml")):
    sys.meta_path.insert(0, _TreeFinder(_mapping(os.path.abspath(_tree))))
