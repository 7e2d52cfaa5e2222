"""The hand-kept stubs of the compiled core match it, and a missing build says how to fix it.

An equivalent of ``mypy.stubtest`` for this layout: ``dpacct/_core.pyi`` declares each
submodule of the extension as a class of static functions (a stub *folder* would shadow
the extension), so the check compares names, parameter names and defaults directly with
the signatures pybind11 writes into each docstring.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpacct import _core

STUB = Path(__file__).resolve().parents[1] / "dpacct" / "_core.pyi"


def _split_top_level(text: str) -> list[str]:
    """Split a parameter list at commas outside brackets."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts]


def _runtime_parameters(obj: object) -> list[tuple[str, bool]]:
    """(name, has default) of each parameter, from the signature line pybind11 writes first in ``__doc__``."""
    line = (obj.__doc__ or "").splitlines()[0]
    inside = line[line.index("(") + 1 : line.rindex(")")]
    inside = inside[: inside.rindex(")") + 1] if " -> " in inside else inside
    params = []
    for part in _split_top_level(inside):
        name = part.split(":", 1)[0].split("=", 1)[0].strip()
        if name and name != "self":
            params.append((name, "=" in part))
    return params


def _stub_parameters(node: ast.FunctionDef) -> list[tuple[str, bool]]:
    args = node.args.args
    defaults = len(node.args.defaults)
    out = [(a.arg, i >= len(args) - defaults) for i, a in enumerate(args)]
    return [(name, default) for name, default in out if name != "self"]


def _stub() -> dict[str, ast.ClassDef]:
    tree = ast.parse(STUB.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _public(obj: object) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def test_stub_declares_exactly_the_submodules() -> None:
    assert set(_stub()) == _public(_core)


@pytest.mark.parametrize("submodule", sorted(_public(_core)))
def test_stub_matches_the_compiled_submodule(submodule: str) -> None:
    """Every function and class of the submodule, with the same parameter names and defaults."""
    declared = _stub()[submodule]
    runtime = getattr(_core, submodule)
    members = {n.name: n for n in declared.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert set(members) == _public(runtime), f"_core.{submodule}: stub and module list different names"
    for name, node in members.items():
        obj = getattr(runtime, name)
        if isinstance(node, ast.FunctionDef):
            assert _stub_parameters(node) == _runtime_parameters(obj), f"_core.{submodule}.{name}"
            continue
        stub_members = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef) and n.name != "__init__"}
        assert set(stub_members) == _public(obj), f"_core.{submodule}.{name}: attributes differ"
        for attribute, fn in stub_members.items():
            value = getattr(obj, attribute)
            if callable(value) and not isinstance(value, property):
                assert _stub_parameters(fn) == _runtime_parameters(value), f"_core.{submodule}.{name}.{attribute}"
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is not None:
            assert _stub_parameters(init) == _runtime_parameters(obj.__init__), f"_core.{submodule}.{name}.__init__"


def test_no_stub_folder_can_shadow_the_extension() -> None:
    """A ``dpacct/_core/`` folder would turn an unbuilt ``_core`` into an empty namespace package."""
    assert not (STUB.parent / "_core").exists()
    assert Path(_core.__file__ or "").suffix in (".so", ".pyd")


def test_unbuilt_tree_says_how_to_build(tmp_path: Path) -> None:
    """Importing a source tree without the compiled core raises ImportError naming `pip install -e .`."""
    source = STUB.parent
    shutil.copytree(source, tmp_path / "dpacct", ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    # -S: no site-packages, so no installed dpacct (an editable install's finder would
    # otherwise supply its own _core); the failing import comes before numpy is needed.
    done = subprocess.run(
        [sys.executable, "-S", "-c", "import dpacct"], capture_output=True, text=True, cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: dpacct._core is not built") and "pip install -e ." in last
