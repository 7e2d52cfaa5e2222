"""Build description of the compiled core ``dpacct._core`` (metadata lives in pyproject.toml)."""

from glob import glob

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

ext = Pybind11Extension(
    "dpacct._core",
    sorted(glob("cpp/src/**/*.cpp", recursive=True)) + sorted(glob("cpp/bindings/*.cpp")),  # sorted: reproducible builds
    include_dirs=["cpp/include", "cpp"],
    cxx_std=17,
    # No -ffast-math (accounting relies on inf and NaN semantics) and no
    # -march=native (results must not depend on the build machine).
    extra_compile_args=["-O3", "-Wall", "-Wextra"],
)

setup(ext_modules=[ext], cmdclass={"build_ext": build_ext})
