"""The dpacct command line: tables, JSON, and one-line errors with a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import dpacct
from dpacct.cli import main


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_epsilon_json_matches_python_api(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct epsilon --json` reports the same epsilon as dpacct.epsilon, with its kind and order."""
    out = run_json(capsys, "epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "1000", "--delta", "1e-5",
                   "--accountant", "rdp")
    expected = dpacct.epsilon(noise_multiplier=1.1, sampling_probability=0.01, steps=1000, delta=1e-5)
    assert out["epsilon"] == expected
    assert out["kind"] == "upper bound"
    assert out["order"] > 1


def test_epochs_batch_size_dataset_size(capsys: pytest.CaptureFixture[str]) -> None:
    """--epochs/--batch-size/--dataset-size map to q = b/n and T = ceil(E n / b)."""
    out = run_json(capsys, "epsilon", "--sigma", "1.1", "--epochs", "2", "--batch-size", "256",
                   "--dataset-size", "60000", "--delta", "1e-5", "--accountant", "rdp")
    assert out["sampling_probability"] == 256 / 60000
    assert out["steps"] == 469


def test_delta_and_sigma_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct delta` inverts `dpacct epsilon`; `dpacct sigma` meets its budget."""
    out = run_json(capsys, "delta", "--sigma", "1.1", "--q", "0.01", "--steps", "1000", "--epsilon", "2",
                   "--accountant", "rdp")
    assert 0 < out["delta"] < 1
    out = run_json(capsys, "sigma", "--epsilon", "2", "--delta", "1e-5", "--q", "0.01", "--steps", "1000",
                   "--accountant", "rdp")
    assert out["epsilon"] <= 2


def test_table_output_is_readable(capsys: pytest.CaptureFixture[str]) -> None:
    """The default output is a two-column table naming each quantity."""
    assert main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "1000", "--delta", "1e-5"]) == 0
    text = capsys.readouterr().out
    assert "noise multiplier (sigma)" in text and "upper bound" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sigma", "-1", "--q", "0.01", "--steps", "10", "--delta", "1e-5"], "noise_multiplier must be finite and > 0"),
        (["--sigma", "1", "--q", "1.5", "--steps", "10", "--delta", "1e-5"], "sampling_probability must be in [0, 1]"),
        (["--sigma", "1", "--q", "0.1", "--steps", "-3", "--delta", "1e-5"], "steps must be an integer >= 0"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "0"], "delta must be in (0, 1)"),
        (["--sigma", "nan", "--q", "0.1", "--steps", "10", "--delta", "1e-5"], "noise_multiplier must be finite"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "1e-5", "--accountant", "nope"], "accountant must be one of"),
        (["--sigma", "1", "--epochs", "1", "--delta", "1e-5"], "must be given together"),
    ],
)
def test_bad_input_exits_with_one_line(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    """Bad input exits with status 2 and one stderr line naming the parameter."""
    assert main(["epsilon", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpacct: error: ") and message in err
    assert err.count("\n") == 1


def test_console_script_runs() -> None:
    """`python -m dpacct` works as a process (the installed `dpacct` script uses the same main)."""
    done = subprocess.run(
        [sys.executable, "-m", "dpacct", "epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100",
         "--delta", "1e-5", "--json"],
        capture_output=True, text=True, check=True,
    )
    assert json.loads(done.stdout)["epsilon"] > 0
