"""The build's one hook (``[tool.setuptools.cmdclass]`` in pyproject.toml): an optional compiled
core that fails to build leaves no earlier build of it behind (in build/ or in the checkout), so a
wheel or an editable install never carries a core older than its sources; without it everything
runs pure Python (emu/native.py). Imported by setuptools at build time only."""

import os

from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        if os.path.exists(target):
            os.remove(target)  # a failed (optional) build must not leave the last one in its place
        super().build_extension(ext)

