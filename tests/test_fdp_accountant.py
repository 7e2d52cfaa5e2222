"""FDPAccountant: the accountant protocol, certified sides against exact Gaussian curves, attack risk, CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpacct import gaussian
from dpacct.accountant import UnsupportedMechanismError
from dpacct.cli import main
from dpacct.fdp import DPSGDJLMechanism, FDPAccountant, TradeoffCurve, gaussian_tradeoff, gdp
from dpacct.fdp.risk import calibrate_noise_for_tpr, tradeoff_for_run
from dpacct.mechanisms import GaussianMechanism

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ALPHAS = np.concatenate([[1e-6, 1e-4], np.linspace(0.001, 0.999, 41)])
RTOL_PLD = 0.01  # relative_accuracy 0.005 by default: the epsilon gap is about 0.5%


@pytest.mark.parametrize(("sigma", "count"), [(1.0, 1), (2.0, 4), (0.8, 3)])
def test_certified_side_against_exact_gaussian_curve(sigma: float, count: int) -> None:
    """q = 1: k Gaussians are exactly G_mu, mu = sqrt(k)/sigma; certified curve <= G_mu <= optimistic curve."""
    acct = FDPAccountant().compose(GaussianMechanism(noise_multiplier=sigma), count)
    curve = acct.tradeoff()
    exact = np.asarray(gaussian_tradeoff(mu=math.sqrt(count) / sigma, alpha=ALPHAS))
    assert np.all(np.asarray(curve(ALPHAS)) <= exact + 1e-12)
    assert np.all(np.asarray(curve.optimistic(ALPHAS)) >= exact - 1e-12)
    assert curve.gap() < 0.01
    lower, upper = curve.gdp_mu()
    assert lower <= math.sqrt(count) / sigma <= upper + 1e-12


def test_gaussian_pld_epsilon_brackets_exact() -> None:
    """The epsilon interval of one Gaussian contains the exact Balle-Wang epsilon, within the accuracy."""
    acct = FDPAccountant().compose(GaussianMechanism(noise_multiplier=1.0))
    exact = float(gaussian.epsilon_for_delta(noise_multiplier=1.0, delta=1e-5))
    lower, upper = acct.epsilon_bounds(1e-5)
    # epsilon_for_delta is an upper bound aimed at delta (1 - 1e-9) (4.3771780959 against 4.3771780956812 by
    # mpmath); one step is now answered in closed form to ~1e-12, so the comparison allows that 1e-9.
    assert lower <= exact and exact <= upper * (1 + 1e-9)
    np.testing.assert_allclose(acct.get_epsilon(1e-5), exact, rtol=RTOL_PLD)
    assert acct.get_delta(exact) >= 1e-5 * (1 - 1e-9)


def test_protocol_empty_compose_count_and_unsupported() -> None:
    """Empty accountant: epsilon 0 and G_0; compose(m, k) equals k compose(m); unsupported raises, state kept."""
    empty = FDPAccountant()
    assert empty.get_epsilon(1e-5) == 0.0
    assert float(empty.tradeoff().tpr(0.1)) == pytest.approx(0.1)
    a = FDPAccountant().step(noise_multiplier=1.0, sampling_probability=0.05, count=30)
    b = FDPAccountant()
    for _ in range(30):
        b.step(noise_multiplier=1.0, sampling_probability=0.05)
    assert a.get_epsilon(1e-5) == b.get_epsilon(1e-5)
    with pytest.raises(UnsupportedMechanismError):
        a.compose("gaussian")  # type: ignore[arg-type]
    assert len(a) == 30


def test_dpsgd_tradeoff_is_below_clt_where_clt_is_optimistic() -> None:
    """Poisson DP-SGD: the certified curve and the CLT curve are reported apart; at small T the CLT is optimistic."""
    acct = FDPAccountant().step(noise_multiplier=1.0, sampling_probability=0.1, count=10)
    curve = acct.tradeoff()
    clt = gdp.tradeoff_poisson_clt_approx(noise_multiplier=1.0, sampling_probability=0.1, steps=10)
    # Some attack does better than the CLT says: the optimistic (upper) curve dips below G_mu(CLT).
    assert np.any(np.asarray(curve.optimistic(ALPHAS)) < np.asarray(clt(ALPHAS)))
    assert curve.tpr(0.01).kind == "upper bound" and clt.tpr(0.01).kind == "heuristic"


def test_attack_calibration_deterministic_closed_form() -> None:
    """Deterministic batches: the calibrated sigma gives exactly the target TPR (Kulynych et al. 2024)."""
    res = calibrate_noise_for_tpr(target_tpr=0.2, fpr=0.01, sampling_probability=0.01, steps=400,
                                  sampler="deterministic")
    mu = math.sqrt(4.0) / res.noise_multiplier
    np.testing.assert_allclose(1 - float(gaussian_tradeoff(mu=mu, alpha=0.01)), 0.2, rtol=1e-9)
    assert float(res.tpr) <= 0.2
    shuffled = tradeoff_for_run(noise_multiplier=res.noise_multiplier, sampling_probability=0.01, steps=400,
                                sampler="shuffle")
    assert shuffled.kind == "upper bound" and float(shuffled.tpr(0.01)) == pytest.approx(float(res.tpr))


def test_attack_calibration_poisson_meets_target() -> None:
    """Poisson: the calibrated sigma's certified TPR is <= target, and 1% less noise misses it."""
    res = calibrate_noise_for_tpr(target_tpr=0.05, fpr=0.01, sampling_probability=0.1, steps=20,
                                  relative_tolerance=2e-3)
    assert float(res.tpr) <= 0.05
    below = tradeoff_for_run(noise_multiplier=res.noise_multiplier * 0.99, sampling_probability=0.1, steps=20)
    assert float(below.tpr(0.01)) > 0.05


@given(
    sigma=st.floats(0.6, 3.0),
    q=st.floats(0.01, 0.5),
    steps=st.integers(1, 50),
)
@hypothesis.settings(max_examples=8)
def test_monotone_in_sigma_q_steps(sigma: float, q: float, steps: int) -> None:
    """Certified epsilon and TPR do not decrease with q and T and do not increase with sigma."""
    def eps(s: float, qq: float, t: int) -> float:
        return float(FDPAccountant(relative_accuracy=0.01).step(noise_multiplier=s, sampling_probability=qq,
                                                                count=t).get_epsilon(1e-5))

    base = eps(sigma, q, steps)
    slack = 0.02 * base + 1e-9  # two independent discretisations, each within 1% relative
    assert eps(sigma * 1.3, q, steps) <= base + slack
    assert eps(sigma, min(q * 1.5, 1.0), steps) >= base - slack
    assert eps(sigma, q, steps * 2) >= base - slack


def test_cli_tradeoff_json_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    """`dpacct tradeoff --json` prints the curve, TPR bounds and the labelled CLT; bad flags exit 2 with one line."""
    assert main(["tradeoff", "--sigma", "1.0", "--q", "0.1", "--steps", "10", "--fpr", "0.01", "0.1",
                 "--alpha", "0.05", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["command"] == "tradeoff"
    assert report["tpr_lower_bound"][0] <= report["tpr_upper_bound"][0]
    assert report["gdp_clt_approx"]["kind"] == "heuristic"
    assert report["tradeoff_certified"][0] <= report["tradeoff_optimistic"][0]
    assert main(["tradeoff", "--sigma", "1.0", "--q", "0.1", "--steps", "10", "--jl-dim", "8",
                 "--jl-projections", "sometimes"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpacct: error: --jl-projections must be 'shared' or 'per-example'")
    assert main(["tradeoff", "--sigma", "1.0", "--q", "0.1", "--steps", "10", "--fpr", "2"]) == 2
    assert "--fpr must be in [0, 1], got 2.0" in capsys.readouterr().err


def test_cli_tradeoff_plot(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    """--plot writes a PNG (matplotlib optional)."""
    pytest.importorskip("matplotlib")
    from pathlib import Path

    out = Path(str(tmp_path)) / "curve.png"
    assert main(["tradeoff", "--sigma", "1.0", "--q", "0.1", "--steps", "10", "--plot", str(out)]) == 0
    assert out.stat().st_size > 1000
    assert "plot written" in capsys.readouterr().out


def test_tradeoff_curve_object_protocol() -> None:
    """The accountant's curve is a TradeoffCurve whose certified TPR bounds the optimistic one."""
    curve = FDPAccountant().step(noise_multiplier=1.0, sampling_probability=0.2, count=5).tradeoff()
    assert isinstance(curve, TradeoffCurve)
    bounds = curve.tpr_bounds(np.array([0.001, 0.01, 0.1]))
    assert np.all(np.asarray(bounds.lower) <= np.asarray(bounds.upper))
    assert DPSGDJLMechanism(noise_multiplier=1.0, sampling_probability=0.1, jl_dim=4).projections == "shared"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"relative_accuracy": 0.0}, r"^relative_accuracy must be finite and > 0, got 0.0"),
        ({"relative_accuracy": 0.7}, r"^relative_accuracy must be in \(0, 0.5\], got 0.7"),
        ({"quantiles": 1}, r"^quantiles must be an integer >= 2, got 1"),
    ],
)
def test_accountant_options_are_checked(kwargs: dict[str, float], match: str) -> None:
    """Bad FDPAccountant options raise ValueError naming the option and its range."""
    with pytest.raises(ValueError, match=match):
        FDPAccountant(**kwargs)  # type: ignore[arg-type]


def test_tradeoff_points_checked() -> None:
    """tradeoff(points=...) needs at least 8 epsilons."""
    with pytest.raises(ValueError, match=r"^points must be an integer >= 8, got 3"):
        FDPAccountant().step(noise_multiplier=1.0, sampling_probability=0.1).tradeoff(points=3)
