"""examples/train_digits.py runs offline on CPU and prints the honest epsilon of each sampler."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_digits.py"


def test_digits_example_poisson_and_shuffle(capsys: pytest.CaptureFixture[str]) -> None:
    """Both runs train (accuracy well above chance, 0.1) and the shuffled run's certified epsilon exceeds its Poisson number."""
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    poisson, shuffle = module.main(["--epochs", "3"])
    out = capsys.readouterr().out
    assert "poisson" in out and "NOT a guarantee" in out
    assert poisson["steps"] == shuffle["steps"] == 3 * 24  # 1440 records, batches of 60 (expected for Poisson)
    assert poisson["accuracy"] > 0.5 and shuffle["accuracy"] > 0.5
    assert 0 < shuffle["epsilon_lower_bound"] <= shuffle["epsilon"]
    assert shuffle["poisson_number_not_a_guarantee"] < shuffle["epsilon"]
