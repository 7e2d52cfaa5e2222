"""Trade-off curves and Gaussian DP: closed forms against mpmath, duality round trips, shape of the curves."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpacct.fdp import TradeoffCurve, gaussian_tradeoff, gdp
from dpacct.fdp.tradeoff import _gdp_delta

RTOL_CLOSED = 1e-12  # closed forms in double precision (log_ndtr, ndtri)
ALPHAS = np.concatenate([[0.0, 1e-9, 1e-4], np.linspace(0.001, 0.999, 37), [1.0]])


def _mp_tradeoff(mu: float, alpha: float) -> float:
    if alpha == 0.0:
        return 1.0
    if alpha == 1.0:
        return 0.0
    return float(mp.ncdf(mp.erfinv(1 - 2 * mp.mpf(alpha)) * mp.sqrt(2) - mu))


@pytest.mark.parametrize("mu", [0.0, 0.3, 1.0, 4.0])
def test_gaussian_tradeoff_matches_mpmath(mu: float) -> None:
    """G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu) agrees with 30-digit mpmath."""
    mp.mp.dps = 30
    want = np.array([_mp_tradeoff(mu, a) for a in ALPHAS])
    got = np.asarray(gaussian_tradeoff(mu=mu, alpha=ALPHAS))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-300)


def test_gaussian_attack_reference() -> None:
    """mu = 1, FPR 0.01: the largest TPR is Phi(1 - Phi^-1(0.99)) = 0.092362..., within the published TPR <= 0.09245."""
    mp.mp.dps = 30
    exact = float(mp.ncdf(1 - mp.sqrt(2) * mp.erfinv(mp.mpf("0.98"))))
    tpr = TradeoffCurve.gaussian(1.0).tpr(0.01)
    assert tpr.kind == "exact"
    np.testing.assert_allclose(float(tpr), exact, rtol=RTOL_CLOSED)
    assert float(tpr) <= 0.09245


def test_gdp_delta_reference_and_round_trip() -> None:
    """delta(1) of 1-GDP is 0.12693673750664392 (Balle & Wang form); epsilon(delta) inverts it."""
    d = gdp.delta_for_epsilon(mu=1.0, epsilon=1.0)
    np.testing.assert_allclose(d, 0.12693673750664392, rtol=RTOL_CLOSED)
    np.testing.assert_allclose(gdp.epsilon_for_delta(mu=1.0, delta=float(d)), 1.0, rtol=1e-9)
    np.testing.assert_allclose(gdp.mu_for_epsilon_delta(epsilon=1.0, delta=float(d)), 1.0, rtol=1e-9)


def test_gdp_delta_tiny_is_positive_in_log_space() -> None:
    """Far in the tail delta stays positive and matches mpmath (the naive difference cancels to 0)."""
    mp.mp.dps = 40
    mu, eps = 1.0, 12.0
    want = float(mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2))
    np.testing.assert_allclose(float(_gdp_delta(mu, np.asarray(eps))), want, rtol=1e-8)


def test_mu_of_gaussian_composition() -> None:
    """Gaussians compose to G_sqrt(sum 1/s_i^2) (Dong, Roth, Su, Corollary 3.3)."""
    assert gdp.mu_of_gaussian([2.0, 2.0, 2.0, 2.0]) == pytest.approx(1.0, rel=1e-15)
    assert gdp.mu_of_gaussian(0.5) == 2.0


def test_clt_reference_value() -> None:
    """Bu, Dong, Long, Su 2019: q = 256/60000, sigma = 1.1, 60 epochs gives mu ~ 0.5736, labelled heuristic."""
    q = 256 / 60000
    steps = math.ceil(60 / q)
    v = gdp.mu_poisson_clt_approx(noise_multiplier=1.1, sampling_probability=q, steps=steps)
    assert v.kind == "heuristic" and not v.is_guarantee
    np.testing.assert_allclose(float(v), math.sqrt(60 * q * math.expm1(1 / 1.21)), rtol=1e-4)  # T rounded up
    assert round(float(v), 4) == 0.5736
    curve = gdp.tradeoff_poisson_clt_approx(noise_multiplier=1.1, sampling_probability=q, steps=steps)
    assert curve.kind == "heuristic" and curve.tpr(0.01).kind == "heuristic"


def _grid_curve(mu: float, lower_too: bool = True) -> TradeoffCurve:
    eps = np.linspace(0.0, 10.0, 600)
    d = np.asarray(gdp.delta_for_epsilon(mu=mu, epsilon=eps))
    return TradeoffCurve.from_privacy_curve(eps, d, d if lower_too else None)


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_privacy_curve_to_tradeoff_brackets_gaussian(mu: float) -> None:
    """From the exact delta(eps) on a grid: certified curve <= G_mu <= optimistic curve, and the gap is small."""
    curve = _grid_curve(mu)
    exact = np.asarray(gaussian_tradeoff(mu=mu, alpha=ALPHAS))
    assert np.all(np.asarray(curve(ALPHAS)) <= exact + 1e-12)
    assert np.all(np.asarray(curve.optimistic(ALPHAS)) >= exact - 1e-12)
    assert curve.gap() < 0.02  # grid step 1/60 in epsilon


def test_duality_round_trips() -> None:
    """delta -> f -> delta returns the grid deltas (they are tight points), and f -> delta -> f keeps G_mu."""
    mu = 1.0
    eps = np.linspace(0.0, 8.0, 400)
    d = np.asarray(gdp.delta_for_epsilon(mu=mu, epsilon=eps))
    curve = TradeoffCurve.from_privacy_curve(eps, d)
    back = np.asarray(curve.delta(eps))
    np.testing.assert_allclose(back, d, rtol=1e-9, atol=1e-15)
    g = TradeoffCurve.gaussian(mu)
    again = TradeoffCurve.from_privacy_curve(eps, np.asarray(g.delta(eps)))
    np.testing.assert_allclose(np.asarray(again(ALPHAS[3:-1])), np.asarray(g(ALPHAS[3:-1])), atol=2e-3)
    np.testing.assert_allclose(g.epsilon(float(d[100])), eps[100], rtol=1e-9)


def test_curves_are_convex_decreasing_symmetric() -> None:
    """Certified curves are convex, non-increasing, below 1 - alpha and symmetric (f = f^-1 for symmetric profiles)."""
    curve = _grid_curve(1.5)
    a = np.linspace(0.0, 1.0, 2001)
    f = np.asarray(curve(a))
    assert np.all(np.diff(f) <= 1e-15)
    assert np.all(np.diff(f, 2) >= -1e-12)
    assert np.all(f <= 1.0 - a + 1e-15)
    inverse = np.asarray(curve.inverse()(a))
    np.testing.assert_allclose(inverse, f, atol=1e-9)


def test_symmetrised_is_min_of_curve_and_inverse() -> None:
    """For an asymmetric curve, the symmetrisation is below both f and f^-1 and convex."""
    curve = TradeoffCurve.from_points([0.0, 0.05, 0.3], [0.6, 0.3, 0.05])
    sym = curve.symmetrised()
    a = np.linspace(0.0, 1.0, 501)
    s = np.asarray(sym(a))
    assert np.all(s <= np.asarray(curve(a)) + 1e-12)
    assert np.all(s <= np.asarray(curve.inverse()(a)) + 1e-12)
    assert np.all(np.diff(s, 2) >= -1e-12)
    np.testing.assert_allclose(np.asarray(sym.inverse()(a)), s, atol=1e-9)


def test_gdp_mu_of_a_grid_curve_brackets_mu() -> None:
    """The GDP parameter read off a gridded G_1 curve brackets 1."""
    curve = _grid_curve(1.0)
    lower, upper = curve.gdp_mu()
    assert lower <= 1.0 + 1e-9
    assert upper >= 1.0 - 1e-9
    assert upper < 1.01


def test_advantage_of_gaussian() -> None:
    """The largest advantage of G_mu is 2 Phi(mu/2) - 1."""
    mp.mp.dps = 20
    v = TradeoffCurve.gaussian(1.0).advantage()
    np.testing.assert_allclose(float(v), float(2 * mp.ncdf(0.5) - 1), rtol=1e-12)
    grid = _grid_curve(1.0).advantage()
    assert grid.kind == "upper bound" and float(grid) >= float(v) - 1e-12


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: gaussian_tradeoff(mu=-1.0, alpha=0.1), r"^mu must be finite and >= 0, got -1.0"),
        (lambda: gaussian_tradeoff(mu=1.0, alpha=1.5), r"^alpha must be in \[0, 1\], got 1.5"),
        (lambda: TradeoffCurve.gaussian(1.0).tpr([0.1, -0.1]), r"^fpr must be in \[0, 1\], got -0.1 at index 1"),
        (lambda: gdp.epsilon_for_delta(mu=1.0, delta=0.0), r"^delta must be in \(0, 1\)"),
        (lambda: TradeoffCurve.from_privacy_curve([1.0, 0.5], [0.1, 0.2]), r"^epsilon must be a non-empty increasing"),
    ],
)
def test_bad_input_names_the_parameter(call: object, match: str) -> None:
    """Bad values raise ValueError naming the parameter and the allowed range."""
    with pytest.raises(ValueError, match=match):
        call()  # type: ignore[operator]
