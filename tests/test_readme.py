"""The README's example runs and its set-up commands stay what CI runs."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_python_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The first ```python block of the README executes and prints an epsilon."""
    block = re.search(r"```python\n(.*?)```", README, re.S)
    assert block is not None
    exec(compile(block.group(1), "README.md", "exec"), {})  # noqa: S102 - our own README
    assert "epsilon <=" in capsys.readouterr().out


def test_setup_commands_are_first() -> None:
    """The README opens with the two set-up commands, and .ci/run runs the second one."""
    lines = README.splitlines()
    assert lines[3].startswith("pip install . && dpacct epsilon")
    assert 'pip install -e ".[test' in lines[4] and "pytest" in lines[4]
    assert "sed -n '5p' README.md" in (ROOT / ".ci" / "run").read_text()
