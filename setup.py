"""Builds the compiled core (native/*.pyx, see native/__init__.py) next to the metadata in
pyproject.toml. Every kernel has a pure-Python twin, so a machine without a C compiler (or
without Cython) still installs a working package: the build warns and skips the extensions."""

import glob
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing: the pure-Python twins are the fallback."""

    def run(self):
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any compiler failure means "no extension"
            print(f"warning: the compiled core was not built ({e}); "
                  "kudusql runs its pure-Python twins", file=sys.stderr)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            print(f"warning: {ext.name} was not built ({e}); its pure-Python twin runs",
                  file=sys.stderr)


def extensions():
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("warning: Cython is not installed; kudusql runs its pure-Python twins",
              file=sys.stderr)
        return []
    try:
        return cythonize(sorted(glob.glob("native/*.pyx")), language_level=3, quiet=True)
    except Exception as e:  # noqa: BLE001 - a kernel that does not translate: the twins run
        print(f"warning: the compiled core was not translated ({e}); kudusql runs its "
              "pure-Python twins", file=sys.stderr)
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
