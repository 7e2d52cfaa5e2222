"""Shared test configuration: hypothesis profile and the --run-slow switch."""

from __future__ import annotations

import pytest

try:
    from hypothesis import settings

    settings.register_profile("dpacct", deadline=None, max_examples=40, derandomize=True)
    settings.load_profile("dpacct")
except ImportError:  # hypothesis is in the [test] extra; property tests skip without it
    pass


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="run slow accuracy sweeps")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
