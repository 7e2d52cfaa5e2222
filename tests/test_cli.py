"""The dpacct command line: tables, JSON, and one-line errors with a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def test_schedule_reproduces_spec_2_5(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct schedule` gives SPEC 2.5's epoch counts with sigma and cumulative rho per epoch."""
    out = run_json(capsys, "schedule", "--budget-rho", "0.78125", "--sigma0", "10", "--schedule", "polynomial",
                   "--decay", "3", "--period", "100", "--sigma-end", "2")
    assert out["epochs"] == 44 and out["budget_exhausted"] is True
    rows = out["per_epoch"]
    assert isinstance(rows, list) and len(rows) == 44 and rows[0] == {"epoch": 0, "noise_multiplier": 10.0,
                                                                        "cumulative_rho": 0.005}
    out = run_json(capsys, "schedule", "--budget-rho", "0.78125", "--sigma0", "8", "--schedule", "uniform")
    assert out["epochs"] == 100


def test_schedule_table_and_solver(capsys: pytest.CaptureFixture[str]) -> None:
    """The default output is a table; --target-epochs solves for the decay rate instead of --decay."""
    assert main(["schedule", "--budget-rho", "0.78125", "--sigma0", "10", "--schedule", "time", "--decay", "0.05"]) == 0
    text = capsys.readouterr().out
    assert "cumulative rho" in text and "epochs            38" in text
    out = run_json(capsys, "schedule", "--budget-rho", "0.78125", "--sigma0", "10", "--schedule", "exponential",
                   "--target-epochs", "71")
    assert out["epochs"] == 71 and isinstance(out["decay"], float) and out["decay"] >= 0.01


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget-rho", "-1", "--sigma0", "10", "--schedule", "uniform"], "budget_rho must be finite and > 0"),
        (["--budget-rho", "1", "--sigma0", "0", "--schedule", "uniform"], "sigma0 must be finite and > 0"),
        (["--budget-rho", "1", "--sigma0", "10", "--schedule", "time"], "decay is required for the time schedule"),
        (["--budget-rho", "1", "--sigma0", "10", "--schedule", "step", "--decay", "0.5"], "period is required"),
        (["--budget-rho", "1", "--sigma0", "10", "--schedule", "time", "--decay", "1", "--target-epochs", "3"],
         "either --decay or --target-epochs"),
        (["--budget-rho", "1", "--sigma0", "10", "--schedule", "step", "--decay", "1.5", "--period", "2"],
         "decay must be in (0, 1]"),
    ],
)
def test_schedule_bad_input(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    """Bad schedule input exits with status 2 and one line naming the parameter."""
    assert main(["schedule", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpacct: error: ") and message in err and err.count("\n") == 1


def test_epsilon_zcdp_poisson_is_labelled_heuristic(capsys: pytest.CaptureFixture[str]) -> None:
    """`--accountant zcdp --sampler poisson` prints Yu et al.'s number with a heuristic label."""
    out = run_json(capsys, "epsilon", "--sigma", "4", "--q", "0.01", "--steps", "10000", "--delta", "1e-5",
                   "--accountant", "zcdp", "--sampler", "poisson")
    expected = dpacct.zcdp.random_sampling_epsilon_heuristic(noise_multiplier=4.0, sampling_probability=0.01,
                                                              steps=10_000, delta=1e-5)
    assert out["epsilon"] == expected.epsilon
    assert isinstance(out["kind"], str) and "heuristic, not a proven bound" in out["kind"]
    assert main(["epsilon", "--sigma", "10", "--q", "0.01", "--steps", "10", "--delta", "1e-5",
                 "--accountant", "zcdp"]) == 2
    assert "1/(16 noise_multiplier)" in capsys.readouterr().err


def test_epsilon_zcdp_shuffle_reports_both_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """`--sampler shuffle` gives the RF zCDP epsilon and the exact Gaussian one, naming the tight one (SPEC 2.6)."""
    out = run_json(capsys, "epsilon", "--sigma", "6", "--epochs", "400", "--batch-size", "100", "--dataset-size",
                   "10000", "--delta", "1e-5", "--accountant", "zcdp", "--sampler", "shuffle")
    assert out["epochs"] == 400
    reference = dpacct.zcdp.shuffled_epochs_epsilon(noise_multiplier=6.0, epochs=400, delta=1e-5)
    assert out["epsilon"] == reference.zcdp_epsilon and out["gaussian_epsilon"] == reference.gaussian_epsilon
    assert out["tight"] == "gaussian_epsilon" and str(out["gaussian_kind"]).startswith("tight")
    out = run_json(capsys, "epsilon", "--sigma", "6", "--q", "0.01", "--steps", "40000", "--delta", "1e-5",
                   "--accountant", "zcdp", "--sampler", "shuffle")
    assert out["epochs"] == 400
    out = run_json(capsys, "delta", "--sigma", "6", "--q", "0.01", "--steps", "40000", "--epsilon", "21",
                   "--accountant", "zcdp", "--sampler", "shuffle")
    assert 0 < float(out["gaussian_delta"]) <= float(out["delta"]) < 1e-5  # type: ignore[arg-type]


def test_compare_json_has_every_sampler(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct compare --json` reports each sampler's numbers with their kinds, matching dpacct.ablq."""
    out = run_json(capsys, "compare", "--sigma", "0.4", "--steps", "1000", "--delta", "1e-6")
    rows = out["rows"]
    assert isinstance(rows, list)
    kinds = [(r["sampler"], r["kind"]) for r in rows]
    assert kinds == [("deterministic", "exact"), ("poisson", "lower bound"), ("poisson", "upper bound"),
                     ("poisson", "upper bound"), ("shuffle", "lower bound"), ("shuffle", "upper bound")]
    expected = dpacct.ablq.epsilon_shuffle_lower(noise_multiplier=0.4, steps=1000, delta=1e-6)
    assert rows[4]["epsilon"] == float(expected)
    assert out["adjacency"] == "zero_out" and out["delta"] == 1e-6


def test_compare_delta_and_epochs_table(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct compare --epsilon ... --epochs 2` prints a readable delta table naming lower and upper bounds."""
    assert main(["compare", "--sigma", "1.0", "--steps", "100", "--epsilon", "2", "--epochs", "2"]) == 0
    text = capsys.readouterr().out
    assert "E = 2 epoch(s)" in text and "lower bound" in text and "upper bound" in text and "delta" in text


def test_compare_plot_writes_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`dpacct compare --plot FILE.png` sweeps sigma, shows progress on stderr and writes a PNG."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "samplers.png"
    assert main(["compare", "--sigma", "1.0", "--steps", "100", "--delta", "1e-5", "--plot", str(path),
                 "--points", "3"]) == 0
    captured = capsys.readouterr()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot written to" in captured.out and "3/3" in captured.err


def test_epsilon_shuffle_prints_interval(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct epsilon --sampler shuffle` gives the certified upper bound and the shuffle lower bound, labelled."""
    out = run_json(capsys, "epsilon", "--sigma", "0.4", "--q", "0.001", "--steps", "1000", "--delta", "1e-6",
                   "--sampler", "shuffle", "--accountant", "pld")
    assert str(out["kind"]).startswith("upper bound")
    assert 14.45 <= float(out["epsilon_lower_bound"]) <= float(out["epsilon"])  # type: ignore[arg-type]
    assert main(["epsilon", "--sigma", "0.4", "--q", "0.001", "--steps", "1000", "--delta", "1e-6",
                 "--sampler", "shuffle"]) == 0
    text = capsys.readouterr().out
    assert "epsilon lower bound" in text and "upper bound (deterministic batches dominate shuffling)" in text


def test_compare_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct compare` errors are one line naming the parameter."""
    assert main(["compare", "--sigma", "1", "--steps", "0", "--delta", "1e-5"]) == 2
    assert "steps must be an integer >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", "--sigma", "1", "--steps", "10", "--delta", "1e-5", "--epsilon", "1"])


def test_assume_poisson_prints_a_warning_and_labels_the_number(capsys: pytest.CaptureFixture[str]) -> None:
    """--assume-poisson with a shuffled run gives the Poisson number, a stderr warning and a kind that says so."""
    code = main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5",
                 "--sampler", "shuffle", "--assume-poisson", "--accountant", "rdp", "--json"])
    captured = capsys.readouterr()
    assert code == 0
    assert "dpacct: warning:" in captured.err and "NOT a privacy guarantee" in captured.err
    report = json.loads(captured.out)
    assert report["assumed_sampler"] == "poisson" and "NOT a guarantee" in report["kind"]
    poisson = dpacct.epsilon(noise_multiplier=1.1, sampling_probability=0.01, steps=100, delta=1e-5)
    assert report["epsilon"] == poisson


def test_assume_poisson_needs_the_shuffle_sampler(capsys: pytest.CaptureFixture[str]) -> None:
    """--assume-poisson with another sampler is refused with a one-line message."""
    code = main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5", "--assume-poisson"])
    assert code == 2
    assert "assume_poisson applies only to sampler='shuffle'" in capsys.readouterr().err


def test_compare_permutation_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """compare --permutation same/fresh picks the multi-epoch shuffle lower bound."""
    args = ["compare", "--sigma", "1.2", "--steps", "1000", "--epochs", "4", "--epsilon", "2", "--json"]
    assert main(args) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert main([*args, "--permutation", "same"]) == 0
    same = json.loads(capsys.readouterr().out)

    def shuffle_lower(report: dict[str, object]) -> float:
        rows = report["rows"]
        assert isinstance(rows, list)
        return next(float(r["delta"]) for r in rows if r["sampler"] == "shuffle" and r["kind"] == "lower bound")

    assert shuffle_lower(fresh) < shuffle_lower(same)
