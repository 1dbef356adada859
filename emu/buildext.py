"""The build's one hook (``[tool.setuptools.cmdclass]`` in pyproject.toml): an optional compiled
core that fails to build leaves no earlier build of it behind (in build/ or in the checkout), so a
wheel or an editable install never carries a core older than its sources; without it everything
runs pure Python (emu/native.py). Imported by setuptools at build time only."""

import os

from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        # an editable install builds in a folder of its own, then copies the core beside this file:
        # that copy goes too, or a failed build leaves an older core there to be refused at import
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.path.basename(target))
        for old in {target, here}:
            if os.path.exists(old):
                os.remove(old)  # a failed (optional) build must not leave the last one in its place
        super().build_extension(ext)

