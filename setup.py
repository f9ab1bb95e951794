"""Builds attnum._core with the project's CMake (pyproject.toml has the metadata).

The extension is the CMake target attnum_python (python/CMakeLists.txt), configured for the
interpreter that runs pip, in build/pip (ccache shares objects with build/ where the flags
match). Environment: ATTNUM_CMAKE_ARGS adds configure arguments; CMAKE_BUILD_PARALLEL_LEVEL
sets the jobs (default: all cores); ATTNUM_BUILD_DIR reuses a configured build folder instead.
"""
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        env = dict(os.environ, CCACHE_BASEDIR=str(ROOT), CCACHE_NOHASHDIR="1")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        # ATTNUM_BUILD_DIR: an existing configured build folder (e.g. scripts/build's build/, whose
        # module is built for /usr/bin/python3, the interpreter of a venv made from it): reused
        # as it is, nothing reconfigured.
        reuse = os.environ.get("ATTNUM_BUILD_DIR")
        build = Path(reuse).resolve() if reuse else ROOT / "build" / "pip"
        if not reuse:
            self.configure(build, env)
        subprocess.run(["cmake", "--build", str(build), "--target", "attnum_python", "-j", jobs], check=True, env=env)
        built = next((build / "python" / "attnum").glob("_core*.so"))
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)

    @staticmethod
    def configure(build, env):
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     "-DATTNUM_PYTHON=ON", "-DATTNUM_BUILD_TESTS=OFF", "-DATTNUM_BUILD_BENCH=OFF",
                     f"-DPython_EXECUTABLE={sys.executable}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("ATTNUM_CMAKE_ARGS", ""))
        subprocess.run(configure, check=True, env=env)


setup(ext_modules=[Extension("attnum._core", sources=[])], cmdclass={"build_ext": CMakeBuild})
