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


def test_every_command_line_in_the_readme_parses() -> None:
    """Each `dpacct ...` line of the README's shell blocks is accepted by the current command line."""
    import shlex

    from dpacct.cli import _commands, _parser

    parser, _ = _parser(_commands())
    lines = [line.split("#")[0].strip() for block in re.findall(r"```bash\n(.*?)```", README, re.S)
             for line in block.splitlines()]
    commands = [line for line in lines if line.startswith("dpacct ")]
    assert len(commands) >= 5
    for line in commands:
        parser.parse_args(shlex.split(line)[1:])  # exits (SystemExit) on an unknown or missing flag
