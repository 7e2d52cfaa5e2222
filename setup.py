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
    # -march=native (results must not depend on the build machine). -O3 lets the
    # FFT's butterflies vectorise (the same IEEE operations); -ffp-contract=off keeps
    # a * b + c two roundings on machines with FMA (aarch64), as the error bounds
    # of the C++ core are written, and the results the same on every machine.
    extra_compile_args=["-O3", "-ffp-contract=off", "-Wall", "-Wextra"],
)

setup(ext_modules=[ext], cmdclass={"build_ext": build_ext})
