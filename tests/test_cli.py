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
    return run_json_err(capsys, *args)[0]


def run_json_err(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[dict[str, object], str]:
    """The JSON report and what went to stderr."""
    assert main([*args, "--json"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_epsilon_json_matches_python_api(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct epsilon --json` reports the same epsilon as dpacct.epsilon, with its kind and order."""
    out = run_json(capsys, "epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "1000", "--delta", "1e-5",
                   "--accountant", "rdp")
    expected = dpacct.epsilon(noise_multiplier=1.1, sampling_probability=0.01, steps=1000, delta=1e-5, accountant="rdp")
    assert out["epsilon"] == expected
    assert out["kind"] == "upper bound"
    assert out["order"] > 1


def test_command_line_and_python_share_the_default_accountant(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --accountant / accountant= both give PLD's certified upper bound, the same number (the README's
    example: 2.162 in Python and 1.982 on the command line while Python defaulted to RDP)."""
    out = run_json(capsys, "epsilon", "--sigma", "1.1", "--q", "0.0042667", "--steps", "10000", "--delta", "1e-5")
    assert out["accountant"] == "pld" and out["kind"] == "upper bound"
    expected = dpacct.epsilon(noise_multiplier=1.1, sampling_probability=0.0042667, steps=10_000, delta=1e-5)
    assert out["epsilon"] == expected
    assert 1.974 < out["epsilon_lower_bound"] <= expected < 1.982  # [1.97486, 1.98101] measured
    out = run_json(capsys, "delta", "--sigma", "1.1", "--q", "0.0042667", "--steps", "10000", "--epsilon", "2")
    assert out["delta"] == dpacct.delta(noise_multiplier=1.1, sampling_probability=0.0042667, steps=10_000, epsilon=2.0)


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
        (["--sigma", "-1", "--q", "0.01", "--steps", "10", "--delta", "1e-5"], "--sigma must be finite and > 0"),
        (["--noise-multiplier", "-1", "--q", "0.01", "--steps", "10", "--delta", "1e-5"],
         "--noise-multiplier must be finite and > 0"),
        (["--sigma", "1", "--q", "1.5", "--steps", "10", "--delta", "1e-5"], "--q must be in [0, 1]"),
        (["--sigma", "1", "--sampling-probability", "1.5", "--steps", "10", "--delta", "1e-5"],
         "--sampling-probability must be in [0, 1]"),
        (["--sigma", "1", "--q", "0.1", "--steps", "-3", "--delta", "1e-5"], "--steps must be an integer >= 0"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "0"], "--delta must be in (0, 1)"),
        (["--sigma", "nan", "--q", "0.1", "--steps", "10", "--delta", "1e-5"], "--sigma must be finite"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "1e-5", "--accountant", "nope"],
         "--accountant must be one of"),
        (["--sigma", "1", "--epochs", "1", "--delta", "1e-5"], "must be given together; missing --batch-size"),
        (["--sigma", "1", "--epochs", "1", "--batch-size", "300", "--dataset-size", "100", "--delta", "1e-5"],
         "--batch-size must be in [1, --dataset-size=100], got 300"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "1e-5", "--drop-last"],
         "--drop-last applies only with --epochs"),
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
    """`dpacct schedule` gives Yu et al. 2019's (Sec. IV-A) epoch counts with sigma and cumulative rho per epoch."""
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
        (["--budget-rho", "-1", "--sigma0", "10", "--schedule", "uniform"], "--budget-rho must be finite and > 0"),
        (["--budget-rho", "1", "--sigma0", "0", "--schedule", "uniform"], "--sigma0 must be finite and > 0"),
        (["--budget-rho", "1", "--sigma0", "10", "--schedule", "time"], "--decay is required for the time schedule"),
        (["--budget-rho", "1", "--sigma0", "10", "--schedule", "step", "--decay", "0.5"], "--period is required"),
        (["--budget-rho", "1", "--sigma0", "10", "--schedule", "polynomial", "--decay", "2", "--period", "5"],
         "--sigma-end is required"),
        (["--budget-rho", "1", "--sigma0", "10", "--schedule", "validation", "--decay", "0.5"],
         "--accuracies is required"),
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
    """`--accountant zcdp --sampler poisson` refuses without --allow-heuristic, then prints a labelled number."""
    args = ["epsilon", "--sigma", "4", "--q", "0.01", "--steps", "10000", "--delta", "1e-5", "--accountant", "zcdp"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "no certified bound" in err and "--allow-heuristic" in err and err.count("\n") == 1
    out = run_json(capsys, *args, "--allow-heuristic")
    expected = dpacct.zcdp.random_sampling_epsilon_heuristic(noise_multiplier=4.0, sampling_probability=0.01,
                                                              steps=10_000, delta=1e-5)
    assert out["epsilon"] == expected.epsilon
    assert out["kind"] == "heuristic" and "NOT a guarantee" in str(out["kind_detail"])
    results = out["results"]
    assert isinstance(results, list) and results[0]["kind"] == "heuristic"
    assert main(["epsilon", "--sigma", "10", "--q", "0.01", "--steps", "10", "--delta", "1e-5",
                 "--accountant", "zcdp", "--allow-heuristic"]) == 2
    assert "--q must be <= 1/(16 noise_multiplier)" in capsys.readouterr().err


def test_epsilon_zcdp_shuffle_reports_the_exact_curve_and_the_zcdp_number(capsys: pytest.CaptureFixture[str]) -> None:
    """`--accountant zcdp --sampler shuffle`: the exact Gaussian upper bound, the zCDP (RR) number beside it."""
    out = run_json(capsys, "epsilon", "--sigma", "6", "--epochs", "400", "--batch-size", "100", "--dataset-size",
                   "10000", "--delta", "1e-5", "--accountant", "zcdp", "--sampler", "shuffle")
    assert out["participations"] == 400
    reference = dpacct.zcdp.shuffled_epochs_epsilon(noise_multiplier=6.0, epochs=400, delta=1e-5)
    assert out["epsilon"] == reference.gaussian_epsilon
    assert out["zcdp_epsilon"] == pytest.approx(reference.zcdp_epsilon, rel=1e-14)  # both round rho up
    out = run_json(capsys, "delta", "--sigma", "6", "--q", "0.01", "--steps", "40000", "--epsilon", "21",
                   "--accountant", "zcdp", "--sampler", "shuffle")
    assert out["participations"] == 400
    assert 0 < float(out["delta"]) <= float(out["zcdp_delta"]) < 1e-5  # type: ignore[arg-type]


# -- the run: one meaning of --steps/--epochs everywhere, participations per sampler ------------------------


def test_epochs_account_each_record_once_per_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    """60 epochs of 256 of 60000 (not divisible): 60 participations, the exact 60-epoch value 54.05.

    Hand count: ceil(60000/256) = 235 batches per epoch (234 with --drop-last), so 14100
    (14040) steps; each record is in one batch per epoch either way. Reference: the exact
    Gaussian curve at sigma/sqrt(60) (Balle & Wang 2018), to 1e-12 relative.
    """
    args = ["epsilon", "--sigma", "1.1", "--epochs", "60", "--batch-size", "256", "--dataset-size", "60000",
            "--delta", "1e-5", "--sampler", "deterministic"]
    exact = dpacct.gaussian.epsilon_for_delta(noise_multiplier=1.1 / 60**0.5, delta=1e-5)
    out = run_json(capsys, *args)
    assert out["participations"] == 60 and out["steps"] == 14100 and out["kind"] == "exact"
    assert out["epsilon"] == pytest.approx(exact, rel=1e-12) and round(float(out["epsilon"]), 2) == 54.05  # type: ignore[arg-type]
    out = run_json(capsys, *args, "--drop-last")
    assert out["participations"] == 60 and out["steps"] == 14040
    out = run_json(capsys, *args[:-2], "--sampler", "shuffle")
    assert out["epsilon"] == pytest.approx(exact, rel=1e-12)
    assert 0 < float(out["epsilon_lower_bound"]) <= float(out["epsilon"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("epochs", "batch", "size", "drop_last", "steps", "participations"),
    [
        (2, 300, 1000, False, 8, 2),     # 4 batches per epoch (last one of 100)
        (2, 300, 1000, True, 6, 2),      # 3 batches per epoch
        (2.5, 300, 1000, False, 10, 3),  # half an epoch: 2 more batches; its records take part a 3rd time
        (1, 1000, 1000, False, 1, 1),
        (3, 7, 10, True, 3, 3),          # one batch of 7 per epoch, 3 records dropped each epoch
    ],
)
def test_run_counts_by_hand(epochs: float, batch: int, size: int, drop_last: bool, steps: int,
                            participations: int) -> None:
    """Steps and participations of shuffled/deterministic batches, counted by hand."""
    run = dpacct.run.Run.from_epochs(epochs=epochs, batch_size=batch, dataset_size=size, drop_last=drop_last)
    for sampler in ("shuffle", "deterministic"):
        assert run.steps(sampler) == steps
        assert run.participations(sampler) == participations
    assert run.steps("poisson") == -(-int(epochs * size * 10) // (batch * 10))  # ceil(E n / b)


@pytest.mark.parametrize(
    ("q", "steps", "participations"),
    [
        (0.1, 30, 3), (0.1, 31, 4),  # 10 batches per epoch
        (0.3, 7, 3),                 # n=10, b=3: 3 batches with drop_last (worst case), 4 without
        (256 / 60000, 14041, 61),    # 234 batches per epoch with drop_last: the 14041st step starts epoch 61
        (0.0, 100, 0),
    ],
)
def test_participations_from_q_and_steps(q: float, steps: int, participations: int) -> None:
    """Given only q and T, an epoch has at least floor(1/q) batches: at most ceil(T / floor(1/q)) participations."""
    assert dpacct.api.participations(sampling_probability=q, steps=steps) == participations


def test_python_api_takes_the_run_in_epochs() -> None:
    """dpacct.epsilon/delta/calibrate accept epochs=, batch_size=, dataset_size= (keyword-only)."""
    kwargs = {"noise_multiplier": 1.1, "epochs": 60, "batch_size": 256, "dataset_size": 60_000}
    eps = dpacct.epsilon(**kwargs, delta=1e-5, sampler="deterministic")  # type: ignore[arg-type]
    assert eps == pytest.approx(dpacct.gaussian.epsilon_for_delta(noise_multiplier=1.1 / 60**0.5, delta=1e-5))
    assert dpacct.delta(**kwargs, epsilon=eps, sampler="deterministic") == pytest.approx(1e-5, rel=1e-6)  # type: ignore[arg-type]
    poisson = dpacct.epsilon(**kwargs, delta=1e-5)  # type: ignore[arg-type]
    assert poisson == dpacct.epsilon(noise_multiplier=1.1, sampling_probability=256 / 60000, steps=14063, delta=1e-5)
    result = dpacct.calibrate(epsilon=3.0, delta=1e-5, epochs=60, batch_size=256, dataset_size=60_000,
                              sampler="deterministic")
    assert result.epsilon <= 3.0
    with pytest.raises(ValueError, match="not both"):
        dpacct.epsilon(noise_multiplier=1.0, steps=10, epochs=1, batch_size=1, dataset_size=10, delta=1e-5)


def test_deterministic_sampler_is_the_exact_gaussian_curve_in_python() -> None:
    """sampler='deterministic' gives the exact curve whatever the accountant (the README's promise)."""
    exact = dpacct.gaussian.epsilon_for_delta(noise_multiplier=1.1 / 43**0.5, delta=1e-5)
    for accountant in ("rdp", "pld"):
        eps = dpacct.epsilon(noise_multiplier=1.1, sampling_probability=256 / 60000, steps=10_000, delta=1e-5,
                             sampler="deterministic", accountant=accountant)
        assert eps == pytest.approx(exact, rel=1e-12)


def test_compare_takes_the_users_run(capsys: pytest.CaptureFixture[str]) -> None:
    """`compare` takes --q/--steps (total steps) or --epochs/...; its numbers match `epsilon --sampler ...`."""
    run = ["--sigma", "0.8", "--epochs", "3", "--batch-size", "100", "--dataset-size", "1050", "--delta", "1e-5"]
    out = run_json(capsys, "compare", *run)
    rows = {(r["sampler"], r["kind"]): r["value"] for r in out["rows"]}  # type: ignore[union-attr]
    det = run_json(capsys, "epsilon", *run, "--sampler", "deterministic")
    shuffle = run_json(capsys, "epsilon", *run, "--sampler", "shuffle")
    poisson = run_json(capsys, "epsilon", *run, "--accountant", "rdp")
    assert rows[("deterministic", "exact")] == det["epsilon"] == rows[("shuffle", "upper bound")]
    assert rows[("shuffle", "lower bound")] == shuffle["epsilon_lower_bound"]
    assert out["participations"] == 3 and out["steps_by_sampler"] == {"poisson": 32, "shuffle": 33}
    assert rows[("poisson", "upper bound")] <= poisson["epsilon"]  # PLD row first, then RDP
    assert main(["compare", "--sigma", "1", "--steps", "1000", "--delta", "1e-5"]) == 2
    err = capsys.readouterr().err
    assert "--steps is the total number of steps" in err and err.count("\n") == 1


def test_shuffle_lower_bound_is_the_same_in_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    """epsilon/delta --sampler shuffle and compare use all complete epochs: the same lower bound."""
    run = ["--sigma", "1.0", "--q", "0.01", "--steps", "300"]
    eps = run_json(capsys, "epsilon", *run, "--delta", "1e-5", "--sampler", "shuffle")
    cmp = run_json(capsys, "compare", *run, "--delta", "1e-5")
    lower = dpacct.ablq.epsilon_shuffle_lower(noise_multiplier=1.0, steps=100, epochs=3, delta=1e-5)
    assert eps["epsilon_lower_bound"] == float(lower)
    assert next(r["value"] for r in cmp["rows"] if r["sampler"] == "shuffle" and r["kind"] == "lower bound") \
        == float(lower)  # type: ignore[union-attr]
    out = run_json(capsys, "delta", *run, "--epsilon", "2", "--sampler", "shuffle")
    lower_delta = dpacct.ablq.delta_shuffle_lower(noise_multiplier=1.0, steps=100, epochs=3, epsilon=2.0)
    assert out["delta_lower_bound"] == float(lower_delta) and 0 < float(lower_delta) <= float(out["delta"])  # type: ignore[arg-type]


def test_compare_json_has_every_sampler(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct compare --json` reports each sampler's numbers with their kinds (the results vocabulary)."""
    out = run_json(capsys, "compare", "--sigma", "0.4", "--q", "0.001", "--steps", "1000", "--delta", "1e-6")
    rows = out["rows"]
    assert isinstance(rows, list)
    kinds = [(r["sampler"], r["kind"]) for r in rows]
    assert kinds[:6] == [("deterministic", "exact"), ("poisson", "lower bound"), ("poisson", "upper bound"),
                         ("poisson", "upper bound"), ("shuffle", "lower bound"), ("shuffle", "upper bound")]
    # A run given as q and T has balls-in-bins and fixed-size batches without replacement (with
    # replacement and truncated Poisson need b and n).
    for name in ("balls_in_bins", "fixed_size"):
        assert {(name, "lower bound"), (name, "upper bound")} <= set(kinds[6:])
    assert {name for name, _ in kinds[6:]} == {"balls_in_bins", "fixed_size"}
    # The best certified guarantee is the smallest upper bound: at sigma = 0.4 balls-in-bins'
    # Renyi-DP bound (8.43) is below even Poisson's PLD lower bound (8.63).
    uppers = {(r["sampler"], r["value"]) for r in rows if r["kind"] in ("upper bound", "exact")}
    best = min(uppers, key=lambda sv: sv[1])  # type: ignore[arg-type,return-value]
    assert out["best_certified"]["sampler"] == best[0] == "balls_in_bins"  # type: ignore[index]
    poisson_lower = next(r["value"] for r in rows if r["sampler"] == "poisson" and r["kind"] == "lower bound")
    assert best[1] < poisson_lower  # type: ignore[operator]
    expected = dpacct.ablq.epsilon_shuffle_lower(noise_multiplier=0.4, steps=1000, delta=1e-6)
    assert rows[4]["value"] == float(expected) and rows[4]["quantity"] == "epsilon"
    assert out["adjacency"] == "zero_out" and out["delta"] == 1e-6


def test_compare_delta_table_and_permutation(capsys: pytest.CaptureFixture[str]) -> None:
    """`compare --epsilon` prints a delta table; --permutation same/fresh picks the multi-epoch lower bound."""
    assert main(["compare", "--sigma", "1.0", "--q", "0.01", "--steps", "200", "--epsilon", "2"]) == 0
    text = capsys.readouterr().out
    assert "2 participation(s)" in text and "lower bound" in text and "upper bound" in text and "delta" in text
    args = ["compare", "--sigma", "0.8", "--q", "0.01", "--steps", "400", "--epsilon", "2", "--json"]
    assert main(args) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert main([*args, "--permutation", "same"]) == 0
    same = json.loads(capsys.readouterr().out)

    def shuffle_lower(report: dict[str, object]) -> float:
        rows = report["rows"]
        assert isinstance(rows, list)
        return next(float(r["value"]) for r in rows if r["sampler"] == "shuffle" and r["kind"] == "lower bound")

    assert shuffle_lower(fresh) < shuffle_lower(same)


def test_compare_plot_checks_matplotlib_before_computing(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without matplotlib, --plot fails at once with the install hint, before any sweep."""
    import importlib.util

    import dpacct.samplers.run_comparison

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))

    def no_compute(**_: object) -> None:
        raise AssertionError("computed before checking matplotlib")

    monkeypatch.setattr(dpacct.samplers.run_comparison, "compare_run", no_compute)
    code = main(["compare", "--sigma", "1", "--q", "0.01", "--steps", "100", "--delta", "1e-5",
                 "--plot", str(tmp_path / "x.png")])
    assert code == 2 and "--plot needs matplotlib: pip install 'dpacct[plot]'" in capsys.readouterr().err


def test_compare_plot_writes_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`dpacct compare --plot FILE.png` sweeps sigma, shows progress on stderr and writes a PNG."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "samplers.png"
    assert main(["compare", "--sigma", "1.0", "--q", "0.01", "--steps", "100", "--delta", "1e-5",
                 "--plot", str(path), "--points", "3"]) == 0
    captured = capsys.readouterr()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot written to" in captured.out and "3/3" in captured.err


def test_compare_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct compare` errors are one line naming the flag."""
    assert main(["compare", "--sigma", "1", "--q", "0.1", "--steps", "0", "--delta", "1e-5"]) == 2
    assert "--steps must be an integer >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", "--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "1e-5", "--epsilon", "1"])


# -- opt-ins, labels, notes -------------------------------------------------------------------------------------


def test_assume_poisson_labels_each_number_with_its_run(capsys: pytest.CaptureFixture[str]) -> None:
    """--assume-poisson: the Poisson number says it is assumed; the shuffle interval is grouped and labelled."""
    code = main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "300", "--delta", "1e-5",
                 "--sampler", "shuffle", "--assume-poisson", "--accountant", "rdp", "--json"])
    captured = capsys.readouterr()
    assert code == 0
    assert "dpacct: warning:" in captured.err and "NOT a privacy guarantee" in captured.err
    assert "--assume-poisson" in captured.err and "assume_poisson=" not in captured.err
    report = json.loads(captured.out)
    assert report["accounted_as"] == "poisson" and report["kind"] == "heuristic"
    assert "NOT a guarantee" in report["kind_detail"]
    poisson = dpacct.epsilon(noise_multiplier=1.1, sampling_probability=0.01, steps=300, delta=1e-5, accountant="rdp")
    assert report["epsilon"] == poisson
    interval = report["shuffle_interval"]
    assert interval["sampler"] == "shuffle"
    assert interval["epsilon_lower_bound"] <= interval["epsilon_upper_bound"]
    assert "epsilon_lower_bound" not in report  # never beside the Poisson number without its run
    assert [r["kind"] for r in report["results"]] == ["heuristic", "lower bound", "upper bound"]


def test_assume_poisson_needs_the_shuffle_sampler(capsys: pytest.CaptureFixture[str]) -> None:
    """--assume-poisson with another sampler is refused with a one-line message naming the flags."""
    code = main(["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5", "--assume-poisson"])
    assert code == 2
    assert "--assume-poisson applies only to --sampler shuffle" in capsys.readouterr().err


def test_order_grid_warning_is_a_one_line_note(capsys: pytest.CaptureFixture[str]) -> None:
    """An edge-of-grid RDP order becomes one clean note: no Python warning, no file path, no orders= advice."""
    out, err = run_json_err(capsys, "epsilon", "--sigma", "0.1", "--q", "1", "--steps", "1000", "--delta", "0.5",
                            "--accountant", "rdp")
    assert out["order"] == 1.01
    assert err.startswith("dpacct: note: the optimal RDP order is at the edge") and err.count("\n") == 1
    assert "orders=" not in err and ".py" not in err and "Warning" not in err
    assert "edge of the order grid" in str(out["notes"])


def test_tiny_sigma_answers_quickly_without_internal_messages(capsys: pytest.CaptureFixture[str]) -> None:
    """sigma = 1e-6 used to hang; the default falls back from PLD to RDP with a note, never a C++ message."""
    import time

    start = time.perf_counter()
    out, err = run_json_err(capsys, "epsilon", "--sigma", "1e-6", "--q", "0.01", "--steps", "1000", "--delta", "1e-5")
    assert time.perf_counter() - start < 10
    assert out["accountant"] == "rdp" and 1e9 < float(out["epsilon"]) < float("inf")  # type: ignore[arg-type]
    assert "could not handle this run" in err
    code = main(["epsilon", "--sigma", "1e-6", "--q", "0.01", "--steps", "1000", "--delta", "1e-5",
                 "--accountant", "pld"])
    err = capsys.readouterr().err
    assert code == 2 and "try --accountant rdp" in err
    for internal in ("discretization", "std::", "max_size", "Chernoff", "loss cells"):
        assert internal not in err


def test_json_errors_are_json(capsys: pytest.CaptureFixture[str]) -> None:
    """With --json an error is also a JSON object on stdout (exit status 2)."""
    assert main(["epsilon", "--sigma", "1", "--q", "2", "--steps", "10", "--delta", "1e-5", "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out == {"command": "epsilon", "error": "--q must be in [0, 1], got 2.0"}


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct --version` prints the package version."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"dpacct {dpacct.__version__}"


def test_schedule_validation_and_the_epoch_cap(capsys: pytest.CaptureFixture[str]) -> None:
    """`schedule --schedule validation` follows the measured accuracies; --max-epochs never caps silently."""
    out = run_json(capsys, "schedule", "--budget-rho", "10", "--sigma0", "8", "--schedule", "validation",
                   "--decay", "0.5", "--accuracies", "0.5,0.6,0.6,0.7")
    expected = dpacct.schedules.ValidationBased(initial_noise_multiplier=8.0, decay=0.5).noise_multipliers(
        [0.5, 0.6, 0.6, 0.7])
    assert [r["noise_multiplier"] for r in out["per_epoch"]] == expected.tolist()  # type: ignore[union-attr]
    assert out["stopped_by"] == "known epochs"
    out, err = run_json_err(capsys, "schedule", "--budget-rho", "100", "--sigma0", "10", "--schedule", "uniform",
                            "--max-epochs", "50")
    assert out["epochs"] == 50 and out["stopped_by"] == "max_epochs" and out["budget_exhausted"] is False
    assert "stopped at --max-epochs 50 with budget left" in err and "stopped at --max-epochs" in str(out["notes"])


@pytest.mark.parametrize("args", [
    ["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5"],
    ["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5", "--accountant", "zcdp",
     "--sampler", "shuffle"],
    ["epsilon", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--delta", "1e-5", "--sampler", "deterministic"],
    ["delta", "--sigma", "1.1", "--q", "0.01", "--steps", "100", "--epsilon", "1", "--accountant", "rdp"],
    ["sigma", "--q", "0.01", "--steps", "100", "--epsilon", "1", "--delta", "1e-5", "--accountant", "rdp"],
])
def test_json_kinds_come_from_the_shared_vocabulary(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    """The top-level kind and every result's kind are among results.KINDS; words go to kind_detail/method."""
    from dpacct.results import KINDS

    out = run_json(capsys, *args)
    assert out["kind"] in KINDS
    results = out["results"]
    assert isinstance(results, list) and results and all(r["kind"] in KINDS for r in results)


def test_unreachable_budget_is_reported_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    """A budget no noise meets is the budget's problem: no accountant fallback, no 'numerical limit'."""
    code = main(["sigma", "--epsilon", "0.001", "--delta", "1e-10", "--q", "1", "--steps", "100000"])
    err = capsys.readouterr().err
    assert code == 2 and "meets epsilon <= 0.001" in err and "numerical limit" not in err and "note" not in err


def test_epsilon_jl_dim_accounts_dp_sgd_jl(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct epsilon --jl-dim r`: a certified f-DP interval above plain DP-SGD's (a JL-estimated norm only adds noise
    to the clipping); shared projections (the default) are never below the paper's per-example model."""
    run = ["epsilon", "--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "1e-5", "--json"]
    assert main(run) == 0
    plain = json.loads(capsys.readouterr().out)["epsilon"]
    assert main([*run, "--jl-dim", "100"]) == 0
    shared = json.loads(capsys.readouterr().out)
    assert main([*run, "--jl-dim", "100", "--jl-projections", "per-example"]) == 0
    per_example = json.loads(capsys.readouterr().out)
    assert shared["kind"] == "upper bound" and shared["jl_projections"] == "shared"
    assert shared["epsilon_lower_bound"] <= shared["epsilon"]
    assert per_example["epsilon"] <= shared["epsilon"]
    assert plain < per_example["epsilon"] < 1.2 * plain  # r = 100 is close to exact norms
    assert main([*run, "--jl-dim", "100", "--sampler", "shuffle"]) == 2
    assert "--jl-dim" in capsys.readouterr().err


@pytest.mark.slow
def test_json_is_strict_even_for_an_astronomical_epsilon(capsys: pytest.CaptureFixture[str]) -> None:
    """r = 1 projections: a finite but astronomically large certified epsilon, with the note saying why; --json
    stays strict (an uncertifiable epsilon would print "inf", never the non-standard Infinity)."""
    run = ["epsilon", "--sigma", "1", "--q", "0.1", "--steps", "5", "--delta", "1e-5", "--jl-dim", "1", "--json"]
    assert main(run) == 0

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-standard JSON constant {constant}")

    report = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert report["epsilon_lower_bound"] > 100
    assert report["epsilon"] == "inf" or report["epsilon"] >= max(1e6, report["epsilon_lower_bound"])
    assert "astronomically large" in report["note"]


def test_compare_truncated_poisson_and_fixed_size_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """--max-batch-size adds truncated Poisson rows (zero-out, like the table); a run in epochs adds fixed size with replacement."""
    run = ["--sigma", "2", "--epochs", "2", "--batch-size", "50", "--dataset-size", "2000", "--delta", "1e-5"]
    out = run_json(capsys, "compare", *run, "--max-batch-size", "60")
    rows = out["rows"]
    assert isinstance(rows, list)
    by = {(r["sampler"], r["kind"]) for r in rows}
    for name in ("fixed_size", "fixed_size_replacement", "truncated_poisson"):
        assert {(name, "lower bound"), (name, "upper bound")} <= by
    trunc = [r for r in rows if r["sampler"] == "truncated_poisson"]
    assert all("zero_out" in r["method"] for r in trunc)
    assert trunc[0]["value"] <= trunc[1]["value"]


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--q", "0.01", "--steps", "100", "--max-batch-size", "10"], "--max-batch-size (truncated Poisson) needs --epochs"),
     (["--epochs", "1", "--batch-size", "10", "--dataset-size", "100", "--max-batch-size", "0"],
      "--max-batch-size must be an integer >= 1, got 0")],
)
def test_compare_max_batch_size_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(["compare", "--sigma", "1", "--delta", "1e-5", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpacct: error: ") and message in err and err.count("\n") == 1


def test_epsilon_fixed_size_sampler(capsys: pytest.CaptureFixture[str]) -> None:
    """--sampler fixed_size: the add/remove PLD interval of dpacct.samplers.fixed_size_bounds; with replacement needs b and n."""
    out = run_json(capsys, "epsilon", "--sigma", "2", "--q", "0.01", "--steps", "200", "--delta", "1e-5",
                   "--sampler", "fixed_size")
    assert out["adjacency"] == "add_remove" and out["kind"] == "upper bound"
    assert float(out["epsilon_lower_bound"]) <= float(out["epsilon"])  # type: ignore[arg-type]
    assert main(["epsilon", "--sigma", "2", "--q", "0.01", "--steps", "200", "--delta", "1e-5",
                 "--sampler", "fixed_size_replacement"]) == 2
    assert "needs --epochs, --batch-size and --dataset-size" in capsys.readouterr().err


def test_random_allocation_sampler(capsys: pytest.CaptureFixture[str]) -> None:
    """--sampler random_allocation: the deterministic curve above, the maximum-output lower bound below."""
    out = run_json(capsys, "epsilon", "--sigma", "1", "--epochs", "3", "--batch-size", "100", "--dataset-size", "1000",
                   "--delta", "1e-5", "--sampler", "random_allocation", "--json")
    deterministic = dpacct.epsilon(noise_multiplier=1.0, epochs=3, batch_size=100, dataset_size=1000, delta=1e-5,
                                   sampler="deterministic")
    assert out["epsilon"] == pytest.approx(deterministic, rel=1e-12) and out["kind"] == "upper bound"
    assert 0.0 < out["epsilon_lower_bound"] < out["epsilon"]  # type: ignore[operator]
    assert "random allocation of k=3, t=30" in str(out["lower_bound_method"])
    compare = run_json(capsys, "compare", "--sigma", "1", "--epochs", "3", "--batch-size", "100", "--dataset-size",
                       "1000", "--delta", "1e-5", "--json")
    rows = [r for r in compare["rows"] if r["sampler"] == "random_allocation"]  # type: ignore[union-attr,index]
    assert sorted(r["kind"] for r in rows) == ["lower bound", "upper bound"]
    partial = run_json(capsys, "compare", "--sigma", "1", "--epochs", "2.5", "--batch-size", "100", "--dataset-size",
                       "1000", "--delta", "1e-5", "--json")
    assert not [r for r in partial["rows"] if r["sampler"] == "random_allocation"]  # type: ignore[union-attr,index]
