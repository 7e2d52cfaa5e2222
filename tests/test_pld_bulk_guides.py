"""The quadrature guides of delta queries whose delta is the composed bulk's (``PLDAccountant._bulk_dominated``).

At tiny sampling rates the coarse step's cells are far wider than a step's losses (~q): its loss variance
came out 36-75x too large, and the guides built on it (the Chernoff slope, the grid's error model) aimed
delta queries of Poisson-subsampled Gaussians at T ~ 4e7 steps far off. Those queries now take the
moment generating function and the cumulants of one step from a quadrature of the densities. Only
estimates: the tests check them against mpmath, the classification against the cases it was built for,
and the answers against the epsilon query's certified bounds (a separate path).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy.special import ndtri_exp

from dpacct.pld import PLDAccountant
from dpacct.pld import accountant as acc


def _cut_line(sigma: float, q: float, direction: str) -> tuple[float, float]:
    """The interval of outputs the quadrature covers at the default tail (e^-80 per side, as in the module)."""
    reach = -float(ndtri_exp(-80.0))
    low, high = -sigma * reach, sigma * reach
    if direction == "remove":
        high = max(high, 1.0 + sigma * -float(ndtri_exp(min(-80.0 - math.log(q), 0.0))))
    return low, high


def _mp_moments(sigma: float, q: float, direction: str, slope: float) -> tuple[mp.mpf, list[mp.mpf]]:
    """mpmath at 40 digits, over the same interval: log E_P[e^{slope L}] (normalised by the base's mass there)
    and the first four raw moments of L under P."""
    mp.mp.dps = 40
    low, high = _cut_line(sigma, q, direction)
    s, r = mp.mpf(sigma), mp.mpf(q)

    def loss(x: mp.mpf) -> mp.mpf:
        z = (2 * x - 1) / (2 * s * s)
        value = mp.log(1 + r * mp.expm1(z))
        return value if direction == "remove" else -value

    def p_density(x: mp.mpf) -> mp.mpf:
        base = mp.npdf(x, 0, s)
        return base * mp.e ** loss(x) if direction == "remove" else base  # P = Q e^L (remove)

    points = mp.linspace(low, high, 60)
    mass = mp.ncdf(high, 0, s) - mp.ncdf(low, 0, s)
    a = slope + 1 if direction == "remove" else slope
    power = mp.quad(lambda x: mp.npdf(x, 0, s) * mp.expm1(a * loss(x)), points)
    log_mgf = mp.log1p(power / mass)
    p_mass = mp.quad(p_density, points)
    moments = [mp.quad(lambda x, k=k: p_density(x) * loss(x) ** k, points) / p_mass for k in range(1, 5)]
    return log_mgf, moments


@pytest.mark.parametrize(
    ("sigma", "q", "direction", "slope"),
    [
        (1.19, 5.68e-8, "remove", 15000.0),  # the saddle point of a delta query at T = 4.8e7
        (1.19, 5.68e-8, "add", 15000.0),
        (1.0, 1e-3, "remove", 5.0),
        (0.5, 1e-7, "add", 30.0),
        (0.3, 1e-5, "remove", 2.0),
        (1.19, 5.68e-8, "remove", 1e-3),  # ~q^2 lambda^2 / 2 = 1.7e-18: the linear term's cancellation
    ],
)
def test_log_mgf_estimate_matches_mpmath(sigma: float, q: float, direction: str, slope: float) -> None:
    """The trapezoidal rule on 40 points per standard deviation against mpmath over the same cut line, where the
    tilted terms fall off before the cut: within 1e-7 relative (measured at most 2e-8, at the smallest slope,
    where the result is 1.7e-18 and the rounding of the linear term, ~1e-16 q, is what is left)."""
    estimate = float(acc._gaussian_log_mgf_estimate(sigma, q, direction, np.array([slope]), -80.0)[0])
    exact = float(_mp_moments(sigma, q, direction, slope)[0])
    assert estimate == pytest.approx(exact, rel=1e-7)


@pytest.mark.parametrize(
    ("sigma", "q", "direction"),
    [(1.19, 5.68e-8, "remove"), (1.06, 3.05e-7, "add"), (0.644, 6.98e-6, "remove"), (0.4, 1e-4, "add")],
)
def test_cumulants_match_mpmath(sigma: float, q: float, direction: str) -> None:
    """Second cumulant within 1e-8 relative of mpmath's central moment; the third and fourth within 1e-5
    (their sums cancel more). Where q e^{1/s^2} is small the variance is q^2 (e^{1/s^2} - 1) to first order (the
    chi-square divergence of N(1, s^2) from N(0, s^2), times q^2): within 1e-3 relative."""
    k2, k3, k4 = acc._gaussian_cumulants(sigma, q, direction, -80.0)
    m1, m2, m3, m4 = _mp_moments(sigma, q, direction, 1.0)[1]
    c2 = m2 - m1**2
    c3 = m3 - 3 * m1 * m2 + 2 * m1**3
    c4 = m4 - 4 * m1 * m3 + 6 * m1**2 * m2 - 3 * m1**4 - 3 * c2**2
    assert k2 == pytest.approx(float(c2), rel=1e-8)
    assert k3 == pytest.approx(float(c3), rel=1e-5)
    assert k4 == pytest.approx(float(c4), rel=1e-5)
    if q * math.exp(1.0 / sigma**2) < 1e-3:  # (at sigma=0.4, q=1e-4 the log of the ratio saturates: 2.4e-6 vs 5.2e-6)
        assert k2 == pytest.approx(q * q * math.expm1(1.0 / sigma**2), rel=1e-3)


@pytest.mark.parametrize("slope", [1e-6, 0.5, 1.0, 10.0, 1e4, 1e8])
def test_chernoff_factor_is_the_maximum(slope: float) -> None:
    """log max_{x > 0} (1 - e^{-x}) e^{-slope x} in closed form against mpmath's maximisation (12 digits), and
    (1 - e^{-x})_+ <= e^{factor + slope x} on a grid of x of both signs."""
    mp.mp.dps = 30
    lam = mp.mpf(slope)
    best = mp.log(lam**lam / (lam + 1) ** (lam + 1))  # at e^{-x} = lam / (lam + 1)
    x_star = mp.log1p(1 / lam)
    assert mp.log(-mp.expm1(-x_star)) - lam * x_star == pytest.approx(float(best), rel=1e-12, abs=1e-12)
    factor = acc._chernoff_factor(slope)
    assert factor == pytest.approx(float(best), rel=1e-12, abs=1e-12)
    for x in np.concatenate([-np.geomspace(1e-6, 10, 20), np.geomspace(1e-12, 100, 60)]):
        if x > 0.0:  # (for x <= 0 the left side is 0)
            right = factor + slope * x
            assert math.log(-math.expm1(-x)) <= right + 1e-12 * (1.0 + abs(right))


def _accountant(sigma: float, q: float, steps: int) -> PLDAccountant:
    return PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)


def test_bulk_dominated_separates_the_bulk_from_a_rare_hit() -> None:
    """Where the composed bulk sets delta the quadrature guides go in; where one hit's tail does, or outside
    their scope (epsilon = 0, rates above 1e-4, noise above 10), they do not."""
    bulk = _accountant(1.0618444250172518, 3.052222841070213e-07, 37938380)
    assert bulk._bulk_dominated(bulk._groups(), 0.0150493)  # one hit reaches 0.015 with probability 2e-27
    rare = _accountant(0.6439835527735535, 6.978074147153433e-06, 56299833)
    assert not rare._bulk_dominated(rare._groups(), 1.64247)  # one hit reaches 1.6 with probability 1.2e-12
    assert not bulk._bulk_dominated(bulk._groups(), 0.0)
    assert not _accountant(1.0, 3e-4, 10**6)._bulk_dominated(_accountant(1.0, 3e-4, 10**6)._groups(), 0.05)
    wide = _accountant(19.0, 1.46e-8, 32992507)
    assert not wide._bulk_dominated(wide._groups(), 1.48e-5)
    # (Huge epsilons at small sigma: e^eps overflowed, and a sweep below sigma = 0.2 met an OverflowError.)
    small = _accountant(0.05, 1e-5, 10**6)
    assert small._bulk_dominated(small._groups(), 5000.0) in (True, False)
    assert small._bulk_dominated(small._groups(), 1e300) in (True, False)


def test_guides_see_the_losses_the_coarse_cells_cannot() -> None:
    """sigma=1.19, q=5.7e-8, T=4.8e7 at epsilon = 0.0024 (6 standard deviations of the composed loss): the
    quadrature's variance is the closed form's, the coarse step's 75x more; the guide's slope is within a
    factor 2 of the Gaussian limit's eps / V (the coarse one was 185)."""
    sigma, q, steps, epsilon = 1.185869566676579, 5.6799520026228373e-08, 47633189, 0.00242109
    accountant = _accountant(sigma, q, steps)
    groups = accountant._groups()
    own = q * q * math.expm1(1.0 / sigma**2)
    coarse = accountant._coarse_cumulants(groups[0][0], "remove")[0]
    assert coarse > 50.0 * own
    accountant._fine_lines = accountant._bulk_dominated(groups, epsilon)
    assert accountant._fine_lines
    assert accountant._coarse_cumulants(groups[0][0], "remove")[0] == pytest.approx(own, rel=1e-3)
    limit = epsilon / (steps * own)
    assert 0.5 * limit <= accountant._guide_delta(groups, "remove", epsilon).slope <= 2.0 * limit


def test_bulk_delta_query_agrees_with_the_epsilon_query() -> None:
    """sigma=1.5, q=1e-6, T=1e5, delta at 4 standard deviations of the composed loss (~1.9e-9), answered with the
    quadrature guides: within the accuracy target, and consistent with the epsilon query's certified bounds
    (which these guides do not touch): eps(delta_upper) lower end <= eps <= eps(delta_lower) upper end."""
    sigma, q, steps = 1.5, 1e-6, 10**5
    epsilon = 4.0 * math.sqrt(steps * q * q * math.expm1(1.0 / sigma**2))
    accountant = _accountant(sigma, q, steps)
    assert accountant._bulk_dominated(accountant._groups(), epsilon)
    lower, upper = accountant.delta_bounds(epsilon)
    assert 0.0 < lower <= upper <= 1.005 * lower
    assert float(_accountant(sigma, q, steps).epsilon_bounds(upper).lower) <= epsilon
    assert epsilon <= float(_accountant(sigma, q, steps).epsilon_bounds(lower).upper)


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize(("sigma", "q", "epsilon"), [(1.0, 1e-3, 0.01), (1.0, 1e-3, 0.3), (2.0, 0.05, 0.2), (0.8, 1e-4, 2e-3)])
def test_chernoff_bounds_with_their_factor_stay_above_two_steps(
    direction: str, sigma: float, q: float, epsilon: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The certified Chernoff bounds (the coarse steps' and the densities') now carry the factor
    lambda^lambda / (lambda + 1)^(lambda + 1): still at or above the exact two-step delta (mpmath quadrature,
    ``tests/test_pld_reference.py``), and below the bounds without it (wherever those are in (0, 1))."""
    from tests.test_pld_reference import delta_two_steps

    exact = float(delta_two_steps(epsilon, sigma, q, direction)[0])
    accountant = _accountant(sigma, q, 2)
    groups = accountant._groups()
    coarse = accountant._chernoff_upper(groups, direction, epsilon)
    densities = accountant._gaussian_chernoff(groups, direction, epsilon)
    assert exact <= coarse <= 1.0
    assert exact <= densities <= 1.0
    monkeypatch.setattr(acc, "_chernoff_factor", lambda slope: 0.0 * np.asarray(slope) if np.ndim(slope) else 0.0)
    plain_coarse = accountant._chernoff_upper(groups, direction, epsilon)
    plain_densities = accountant._gaussian_chernoff(groups, direction, epsilon)
    for tight, plain in ((coarse, plain_coarse), (densities, plain_densities)):
        assert tight <= plain
        if 1e-300 < plain < 1.0:  # (the add direction's losses are at most -log(1 - q): at 2 steps often 0)
            assert tight < plain
