"""Shared labels for the PLD lower bound (``cpp/include/dpacct/pld/step.hpp``, ``compose.cpp``).

Where epsilon is tiny the best threshold test P(K >= j) - e^eps Q(K >= j) compares masses near 1/2 to
a delta many digits below them, and each cell's mass interval (P low, Q high), T times over, swamps
it. The shared labels carry each label's Q-mass midpoint and its own loss, so that P and Q share the
masses' error, which then meets only TV and eps. Checked against the two-step quadrature (40 digits,
``tests/test_pld_reference.py``) where the bound must hold with every charge in place, against the
split composition (an independent certified algorithm) at T = 7.6e6, and for the widths it was built
for.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpacct import _core
from dpacct.pld import PLDAccountant

from tests.test_pld_reference import delta_two_steps

_LOG_TAIL = -80.0


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize(("sigma", "q", "epsilon"), [(1.0, 1e-3, 1e-3), (2.0, 1e-2, 0.0), (0.8, 1e-4, 2e-4)])
def test_shared_labels_bracket_the_two_step_quadrature(direction: str, sigma: float, q: float, epsilon: float) -> None:
    """Two subsampled Gaussian steps on a grid finer than 1e-4 (the sharp own losses): under tilts from 0 to
    5000 the shared-label lower bound stays below the exact delta and the upper bound above it."""
    step = _core.pld.gaussian_step(sigma, q, direction, 2e-5, _LOG_TAIL, 2**24, shared_labels=True)
    assert step.log_q_mid.size == step.log_p.size and step.mid_weights.size == 4
    exact = float(delta_two_steps(epsilon, sigma, q, direction)[0])
    for tilt in (0.0, 200.0, 5000.0):
        composed = _core.pld.ComposedPld([step], [2.0], tilt, 2**22, -25.0, False, True, True)
        assert composed.shared_labels
        lower, upper = (float(x[0]) for x in composed.delta_bounds(np.array([epsilon])))
        assert lower <= exact <= upper, (tilt, lower, exact, upper)


def test_shared_label_fields_agree_with_the_intervals() -> None:
    """Each label's Q-mass midpoint lies below the upper end of its interval (log_q), and its own loss is at
    least log_p - log_q (P low over Q high) less its error bound."""
    step = _core.pld.gaussian_step(9.88, 2.27e-8, "remove", 3e-10, _LOG_TAIL, 2**24, shared_labels=True)
    log_q_mid, own = np.asarray(step.log_q_mid), np.asarray(step.own_mid)
    log_p, log_q = np.asarray(step.log_p), np.asarray(step.log_q)
    both = np.isfinite(log_q_mid) & np.isfinite(log_p)
    assert both.sum() > 10
    assert np.all(log_q_mid[both] <= log_q[both] + 1e-13)
    assert np.all(own[both] >= log_p[both] - log_q[both] - step.own_error - 1e-13)
    assert 0.0 < step.mid_weights[2] <= step.mid_error and step.own_error >= 0.0


def test_no_shared_labels_on_coarse_grids_or_unasked() -> None:
    """On grids of 1e-4 and coarser the own losses come from the mass intervals: no shared labels, and a
    composition asked for them falls back to the intervals. Nor are they built unasked (they cost about a
    fifth more per cell)."""
    assert _core.pld.gaussian_step(1.0, 1e-3, "remove", 2e-5, _LOG_TAIL, 2**24).log_q_mid.size == 0
    step = _core.pld.gaussian_step(1.0, 1e-3, "remove", 1e-3, _LOG_TAIL, 2**24, shared_labels=True)
    assert step.log_q_mid.size == 0
    assert not _core.pld.ComposedPld([step], [10.0], 1.0, 2**20, -25.0, False, True, True).shared_labels


def test_tiny_epsilon_over_a_long_run_agrees_with_the_split_composition() -> None:
    """sigma=9.88, q=2.27e-8, T=7.6e6, delta=2.78e-7 (epsilon ~ 8.4e-6): on one grid with shared labels
    (measured [8.3581e-6, 8.3953e-6], 0.44 %; the intervals had given [8.04e-6, 8.40e-6]) against the split
    composition with interval labels: both certified, they must overlap, at epsilon and at delta."""
    sigma, q, steps, delta = 9.87999482518304, 2.2722235652701816e-08, 7608311, 2.783995657703518e-07
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower, upper = acct.epsilon_bounds(delta)
    assert upper - lower <= 0.01 * upper
    groups = acct._groups()
    split_lower, split_upper = acct._split_epsilon(groups, "remove", delta, float(upper))
    assert lower <= split_upper and split_lower <= upper
    d_lower, d_upper = acct.delta_bounds(float(upper))
    assert d_lower <= delta * (1 + 1e-9)  # delta(upper) <= delta, certified below too
    assert d_upper - d_lower <= 0.02 * d_upper  # measured 0.80 % (11.1 % with the intervals)
    assert math.isfinite(float(d_upper))


def test_shared_tests_stand_aside_where_their_linear_arithmetic_would_not_hold() -> None:
    """The shared labels' tests are taken in linear space: beyond epsilon = 700 (e^eps overflows) and where a
    mass they subtract would underflow they give way to the interval labels' log-space tests, so the lower
    bound there is the intervals' own (a capped e^eps or a Q-mass rounded to 0 would raise it)."""
    step = _core.pld.gaussian_step(1.0, 1e-3, "remove", 2e-5, _LOG_TAIL, 2**24, shared_labels=True)
    for tilt in (0.0, 200.0):
        shared = _core.pld.ComposedPld([step], [2.0], tilt, 2**22, -25.0, False, True, True)
        plain = _core.pld.ComposedPld([step], [2.0], tilt, 2**22, -25.0, False, True, False)
        epsilons = np.array([5.0, 20.0, 750.0])
        lower_s, upper_s = shared.delta_bounds(epsilons)
        lower_p, upper_p = plain.delta_bounds(epsilons)
        assert np.all(lower_s <= upper_s) and np.all(upper_s == upper_p)
        assert lower_s[2] == lower_p[2]
        assert np.all(lower_s >= lower_p)


def _clt_mu(sigma: float, q: float, steps: int) -> float:
    """The central limit of Poisson-subsampled Gaussian DP-SGD, mu = q sqrt(T (e^{1/sigma^2} - 1)) (Dong, Roth
    and Su 2019, arXiv:1905.02383, Corollary 5.4; Bu, Dong, Long and Su 2019, arXiv:1911.11607), in mpmath."""
    import mpmath

    mpmath.mp.dps = 40
    return float(mpmath.mpf(q) * mpmath.sqrt(steps * mpmath.expm1(1 / mpmath.mpf(sigma) ** 2)))


# Deep in the CLT's regime (every loss ~q, T >= 2e6) the composed loss's skewness is below ~1e-4 (one step's,
# at most ~1 for sigma >= 3.7, over sqrt(T)), and so is the limit's relative error on delta(0): the references
# below are the mu-GDP values, met within 2e-3 relative (20 times that).
_CLT_SLACK = 2e-3


@pytest.mark.parametrize(
    ("sigma", "q", "steps"),
    [(7.2, 4.99e-8, 28895527), (3.77, 1.05e-7, 85419155), (4.8, 4.18e-7, 36340686)],
)
def test_total_variation_of_long_runs_near_the_gaussian_limit(sigma: float, q: float, steps: int) -> None:
    """delta(0), the total variation distance, over long runs of tiny losses: within 1 % (measured 0.41 %, 0.29 %
    and 0.20 %; before the shared labels went in by the size of delta, and before the first grid resolved one
    step's spread, 4.4 %, 2.2 % and 0.9 %), and around the mu-GDP value 2 Phi(mu / 2) - 1."""
    from scipy.stats import norm

    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower, upper = acct.delta_bounds(0.0)
    assert upper - lower <= 0.01 * upper
    reference = float(2.0 * norm.cdf(_clt_mu(sigma, q, steps) / 2.0) - 1.0)
    assert lower * (1.0 - _CLT_SLACK) <= reference <= upper * (1.0 + _CLT_SLACK)


def test_tiny_epsilon_within_the_spread_takes_the_shared_labels() -> None:
    """sigma=7.05, q=1.57e-8, T=2.3e6, delta=2.45e-8: epsilon ~ 7.06e-6, about twice mu, where the tilt is too
    small for the old rule and the labels' mass intervals (T x 2e-14 over epsilon) set the lower bound: within
    1 % now (measured 0.46 %; 1.6 % before), around the mu-GDP epsilon."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    sigma, q, steps, delta = 7.05, 1.57e-8, 2338671, 2.45e-8
    mu = _clt_mu(sigma, q, steps)
    reference = brentq(lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta,
                       0.0, 10 * mu, xtol=1e-16, rtol=1e-14)
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower, upper = acct.epsilon_bounds(delta)
    assert upper - lower <= 0.01 * upper
    # (delta's slope in epsilon is about -1/2 here: 2e-3 of delta(0) moves epsilon by ~1e-8, 0.2 % of it.)
    assert lower * (1.0 - 2 * _CLT_SLACK) <= reference <= upper * (1.0 + 2 * _CLT_SLACK)


def test_shared_labels_chosen_by_the_size_of_the_answer() -> None:
    """The rule of PLDAccountant._shared_labels: by the tilt (near the Gaussian limit), or where T x 2e-14 over
    the answer exceeds a tenth of the accuracy target; not for ordinary answers."""
    long_run = PLDAccountant().step(noise_multiplier=7.2, sampling_probability=4.99e-8, count=28895527)._groups()
    short_run = PLDAccountant().step(noise_multiplier=7.2, sampling_probability=4.99e-8, count=10**4)._groups()
    acct = PLDAccountant()
    assert acct._shared_labels(long_run, 1.0, 1.5e-5)  # delta(0) ~ 1.5e-5: 0.039 of it
    assert not acct._shared_labels(long_run, 1.0, 1.0)
    assert not acct._shared_labels(short_run, 1.0, 1.5e-5)
    assert acct._shared_labels(long_run, 1e5, math.inf)  # the tilt's rule: T x tilt x 2e-14 = 0.058
    assert not acct._shared_labels(long_run, 1.0, math.inf)


@pytest.mark.parametrize(
    ("sigma", "q", "direction", "d"),
    [(2.34, 3.58e-8, "remove", 4.4e-10), (1.0, 1e-3, "add", 8e-5), (2.0, 1e-2, "remove", 5e-5)],
)
def test_concentrated_drift_brackets_the_exact_sums(sigma: float, q: float, direction: str, d: float) -> None:
    """mid_drift bounds sum_j P~_j - sum_j P_j and sum_j Q~_j - sum_j Q_j (step.hpp). The labels partition the
    line between the clamp points, whose tails are below e^-80 per side, so sum_j P_j lies in [1 - 4e-35, 1]:
    the exact sums of the labels' P~_j = e^{log_q_mid + own_mid} and Q~_j = e^{log_q_mid} (30 digits), less
    that, must fall within the bounds, which are a few ulps wide (the point of them: T times their width is
    what the composed masses pay)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    step = _core.pld.gaussian_step(sigma, q, direction, d, _LOG_TAIL, 2**24, shared_labels=True)
    drift = np.asarray(step.mid_drift)
    assert drift.size == 6 and step.mid_eta.size == step.log_q_mid.size == step.mid_nu.size
    finite = np.isfinite(step.log_q_mid)
    sum_p = mp.fsum(mp.exp(mp.mpf(float(a)) + mp.mpf(float(b))) for a, b in zip(step.log_q_mid[finite], step.own_mid[finite]))
    sum_q = mp.fsum(mp.exp(mp.mpf(float(a))) for a in step.log_q_mid[finite])
    tails = 4e-35
    for exact, lo, hi in ((sum_p, drift[0], drift[1]), (sum_q, drift[2], drift[3])):
        assert lo - tails <= float(exact - 1) <= hi  # sum P~ - 1 = drift - (1 - sum P), 0 <= 1 - sum P <= tails
        assert hi - lo <= 1e-14
    assert 0.0 <= drift[4] <= tails and 0.0 <= drift[5] <= tails


def test_concentrated_labels_against_the_gaussian_closed_form() -> None:
    """T = 2.2e6 Gaussian steps at sigma = 6e7 (mu-GDP with mu = 2.5e-5: the composed loss as concentrated as at
    sigma=2.34, q=3.6e-8) and delta(1.2e-4) ~ 3.6e-12, 5 standard deviations out: the best threshold test compares
    masses ~2e5 times delta, and the interval labels' mass errors, T times each label's, leave the lower bound 1.9 %
    low. Bounded by their concentration (concentration.hpp) the shared labels' errors cost 4e-9 of the masses: the
    lower bound is measured 0.42 % below the closed form (Dong, Roth, Su 2019, arXiv:1905.02383, Cor. 2.13), the
    rest being the grid's; the intervals' is kept above 1.5 % low to show it is the concentration that pays."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    sigma, steps, epsilon = 6e7, 2238763, 1.2e-4
    mu, eps = mp.sqrt(steps) / sigma, mp.mpf(epsilon)
    exact = float(mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2))
    step = _core.pld.gaussian_step(sigma, 1.0, "remove", 4e-10, _LOG_TAIL, 2**24, shared_labels=True)
    plain = _core.pld.ComposedPld([step], [float(steps)], 2e5, 2**22, -25.0, False, True, False)
    shared = _core.pld.ComposedPld([step], [float(steps)], 2e5, 2**22, -25.0, False, True, True)
    ok, factor_p, charge_p, factor_q, charge_q, charge_a = shared.concentration
    assert ok and 1.0 - 1e-8 < factor_p < 1.0 < factor_q < 1.0 + 1e-8
    assert charge_p <= 1e-30 and charge_q <= 1e-30 and 0.0 < charge_a <= 1e-300
    lower, upper = (float(x[0]) for x in shared.delta_bounds(np.array([epsilon])))
    plain_lower = float(plain.delta_bounds(np.array([epsilon]))[0][0])
    assert plain_lower <= lower <= exact <= upper
    assert lower >= (1.0 - 0.006) * exact  # measured -0.42 %
    assert plain_lower <= (1.0 - 0.015) * exact  # measured -1.87 %


def test_tiny_rate_long_run_delta_within_one_percent() -> None:
    """sigma=2.34, q=3.58e-8, T=2.2e6, delta(1.1882e-4) ~ 1.66e-12 (from bench/pld_sweep.py --delta --seed 21): the
    interval labels had left it 2.65 % wide; with the concentrated shared labels measured 0.6 %. The lower bound must
    stay below an independent certified upper bound: one grid twice as fine, upper masses alone."""
    sigma, q, steps, epsilon = 2.34, 3.58e-8, 2238763, 1.1882e-4
    acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    lower, upper = (float(x) for x in acct.delta_bounds(epsilon))
    assert upper - lower <= 0.01 * upper
    fine = _core.pld.gaussian_step(sigma, q, "remove", 2e-10, _LOG_TAIL, 2**24)
    check = _core.pld.ComposedPld([fine], [float(steps)], 2.2e5, 2**22, -25.0, False, False)
    assert lower <= float(check.delta_bounds(np.array([epsilon]))[1][0])


@settings(max_examples=20, deadline=None)
@given(
    mu=st.floats(0.01, 2.0),
    quantile=st.floats(0.0, 6.0),
    log_steps=st.floats(0.0, 6.5),
    strength=st.floats(0.0, 1.5),
)
def test_concentrated_labels_bracket_the_closed_form(mu: float, quantile: float, log_steps: float, strength: float) -> None:
    """T Gaussian steps at sigma = sqrt(T) / mu are mu-GDP (Dong, Roth, Su 2019, arXiv:1905.02383, Cor. 2.13): with the
    shared labels and their concentration bound in force, at any tilt from 0 to 1.5 times the Chernoff slope, the
    lower bound stays below the closed form and the upper above it (40 digits)."""
    mp = pytest.importorskip("mpmath")
    steps = max(1, int(10**log_steps))
    sigma = math.sqrt(steps) / mu
    epsilon = mu * mu / 2.0 + quantile * mu
    with mp.workdps(40):
        m, e = mp.mpf(mu), mp.mpf(epsilon)
        exact = float(mp.ncdf(-e / m + m / 2) - mp.e**e * mp.ncdf(-e / m - m / 2))
    d = min(5e-5, mu / 2e4, 0.05 / sigma)
    step = _core.pld.gaussian_step(sigma, 1.0, "remove", d, _LOG_TAIL, 2**24, shared_labels=True)
    tilt = strength * quantile / mu
    composed = _core.pld.ComposedPld([step], [float(steps)], tilt, 2**22, -25.0, False, True, True)
    assert composed.shared_labels and composed.concentration[0]
    lower, upper = (float(x[0]) for x in composed.delta_bounds(np.array([epsilon])))
    assert lower <= exact * (1.0 + 1e-15) and exact <= upper * (1.0 + 1e-15), (lower, exact, upper)  # (float rounding)
