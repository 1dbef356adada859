"""The build's one hook (``[tool.setuptools.cmdclass]`` in pyproject.toml): an optional compiled
core that fails to build leaves no earlier build of it behind (in build/ or in the checkout), so a
wheel or an editable install never carries a core older than its sources; without it everything
runs pure Python (emu/native.py). Imported by setuptools at build time only."""

import os

from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        # an editable install builds in a folder of its own, then copies the core into the package's
        # source folder: that copy goes too, or a failed build leaves an older core there to be
        # refused at import (the path an in-place build of this extension writes: ext.name's package
        # under the project being built -- never this file's own checkout's, unless that is it)
        inplace, self.inplace = self.inplace, 1
        try:
            here = self.get_ext_fullpath(ext.name)
        finally:
            self.inplace = inplace
        for old in {target, here}:
            if os.path.exists(old):
                os.remove(old)  # a failed (optional) build must not leave the last one in its place
        super().build_extension(ext)

