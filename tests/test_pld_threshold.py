"""The threshold-test lower bound of the PLD accountant (dpacct.pld.threshold).

A test {max_t w_t >= C} (or <= C) is a post-processing of the outputs, so
P(A) - e^eps Q(A) is a lower bound on delta whatever C; for one Gaussian step the best C
gives the Neyman-Pearson set, so the bound is the exact Gaussian curve (mpmath at 50 digits,
relative tolerance 1e-7: the bound is lowered by its rounding margin, 1e-12 (2 + |log P| +
|log Q| + eps) (1 + 2 / (1 - e^eps Q / P)), which reaches ~1e-8 in the far tails).
"""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpacct.mechanisms import PoissonSampledGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.pld.threshold import threshold_delta_lower, threshold_epsilon_lower


def _gaussian_delta(mu: float, eps: float) -> float:
    with mpmath.workdps(50):
        m, e = mpmath.mpf(mu), mpmath.mpf(eps)
        return float(mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2))


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("eps", [0.0, 1.0, 4.0])
def test_one_gaussian_step_gives_the_exact_curve(sigma: float, eps: float) -> None:
    exact = _gaussian_delta(1.0 / sigma, eps)
    for direction in ("remove", "add"):
        lower = threshold_delta_lower([(sigma, 1.0, 1.0)], eps, direction)
        assert exact * (1 - 1e-7) <= lower <= exact


def test_tiny_delta_at_tiny_rate_gets_a_positive_lower_bound() -> None:
    """sigma=0.8, q=1e-4, T=1e4, eps=2: delta ~ 1e-17, where the composed labels gave a lower bound of 0."""
    acct = PLDAccountant().compose(PoissonSampledGaussianMechanism(noise_multiplier=0.8, sampling_probability=1e-4),
                                   10_000)
    lower, upper = acct.delta_bounds(2.0)
    assert 1e-17 < lower <= upper
    eps_lower, eps_upper = acct.epsilon_bounds(1e-17)
    assert 0.0 < eps_lower <= eps_upper


@settings(max_examples=8, deadline=None)
@given(sigma=st.floats(0.3, 5.0), q=st.floats(1e-4, 1.0), steps=st.integers(1, 10**4), eps=st.floats(0.0, 8.0))
def test_below_the_certified_upper_bound(sigma: float, q: float, steps: int, eps: float) -> None:
    """The threshold lower bound never exceeds the engine's certified upper bound (both directions)."""
    acct = PLDAccountant(relative_accuracy=0.02).compose(
        PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q), steps)
    _, upper = acct.delta_bounds(eps)
    for direction in ("remove", "add"):
        assert threshold_delta_lower([(sigma, q, float(steps))], eps, direction) <= upper * (1 + 1e-12)
    delta = 1e-6
    _, eps_upper = acct.epsilon_bounds(delta)
    for direction in ("remove", "add"):
        assert threshold_epsilon_lower([(sigma, q, float(steps))], delta, direction) <= eps_upper + 1e-12
    assert math.isfinite(eps_upper)
