"""One Poisson-subsampled Gaussian step in closed form (``dpacct/pld/single.py``).

Reference: the exact one-step hockey-stick divergence of ``tests/test_pld_reference.py``,
evaluated by mpmath at 30 digits (its error is far below every tolerance here). The bounds
must bracket it after all rounding, and be tight (relative width 1e-4 down to delta = 1e-100),
including the corners a grid cannot resolve: tiny q and tiny epsilon, where the PLD grid
answered sigma=1.01, q=3e-5, delta=9.46e-6 with [6.9e-6, 8.9e-6].
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpacct
from dpacct.pld.single import gaussian_step_delta_bounds, gaussian_step_epsilon_bounds
from tests.test_pld_reference import delta_one_step


@pytest.mark.parametrize(
    ("sigma", "q", "epsilon"),
    [(1.0, 1e-3, 0.391), (1.01, 3e-5, 8e-6), (0.349, 9.2e-7, 1e-7), (10.0, 0.5, 0.01), (0.3, 1.0, 5.0),
     (2.0, 0.1, 0.0), (0.5, 1.0, 30.0), (1e4, 1e-8, 1e-12), (0.2, 1e-6, 2.0), (0.21875, 1e-8, 1e-8),
     (4.625, 10**-2.5, 2.5)],
)
def test_delta_brackets_the_exact_value(sigma: float, q: float, epsilon: float) -> None:
    remove, add = delta_one_step(epsilon, sigma, q)
    exact = float(max(remove, add))
    lower, upper = gaussian_step_delta_bounds(sigma, q, epsilon)
    assert lower <= exact <= upper


@settings(max_examples=80, deadline=None)
@given(
    sigma=st.floats(0.2, 100.0),
    log_q=st.floats(-8.0, 0.0),
    log_epsilon=st.floats(-10.0, 1.5),
)
def test_delta_brackets_the_exact_value_everywhere(sigma: float, log_q: float, log_epsilon: float) -> None:
    q, epsilon = 10.0**log_q, 10.0**log_epsilon
    remove, add = delta_one_step(epsilon, sigma, q)
    exact = float(max(remove, add))
    lower, upper = gaussian_step_delta_bounds(sigma, q, epsilon)
    assert lower <= exact <= upper
    if exact > 1e-100:
        # Tight: the rounding charged grows like x^2 u in a normal tail at x standard deviations
        # (delta ~ 3e-151 at sigma=37, q=0.01, eps=0.01 is 1e-5 wide).
        assert upper - lower <= 1e-4 * upper


def test_epsilon_inverts_delta() -> None:
    lower, upper = gaussian_step_epsilon_bounds(1.01, 3e-5, 9.46e-6)
    assert upper - lower <= 1e-6 * upper
    assert gaussian_step_delta_bounds(1.01, 3e-5, upper)[1] <= 9.46e-6 < gaussian_step_delta_bounds(1.01, 3e-5, lower)[0]
    # At or above the total variation q (2 Phi(1 / (2 sigma)) - 1), epsilon is exactly 0.
    tv = 9.2e-7 * math.erf(1.0 / (2.0 * 0.349) / math.sqrt(2.0))
    assert gaussian_step_epsilon_bounds(0.349, 9.2e-7, 1.01 * tv) == (0.0, 0.0)
    assert gaussian_step_epsilon_bounds(0.349, 9.2e-7, 0.99 * tv)[0] > 0.0
    # sigma = 1, q = 1, delta = 1e-3: mpmath's root is 3.1386705485829.
    lower, upper = gaussian_step_epsilon_bounds(1.0, 1.0, 1e-3)
    assert lower <= 3.1386705485829 <= upper and upper - lower <= 1e-11


def test_huge_epsilon_gives_trivial_bounds_and_the_grid_answers() -> None:
    assert gaussian_step_delta_bounds(0.01, 1.0, 1000.0) == (0.0, 1.0)
    assert gaussian_step_epsilon_bounds(0.02, 1.0, 1e-5) == (0.0, math.inf)
    # The accountant then composes on its grid: sigma = 0.02 gives 1462.285 (Balle-Wang).
    lower, upper = dpacct.PLDAccountant().step(noise_multiplier=0.02, sampling_probability=1.0).epsilon_bounds(1e-5)
    exact = float(dpacct.gaussian.epsilon_for_delta(noise_multiplier=0.02, delta=1e-5))
    assert lower <= exact <= upper * (1 + 1e-9) and upper - lower <= 1e-6 * upper


def test_the_accountant_answers_one_step_in_closed_form() -> None:
    acct = dpacct.PLDAccountant().step(noise_multiplier=1.01, sampling_probability=3e-5, count=1)
    lower, upper = acct.epsilon_bounds(9.46e-6)
    assert upper - lower <= 1e-6 * upper  # the grid gave [6.9e-6, 8.9e-6]
    lower, upper = acct.delta_bounds(0.391)
    remove, add = delta_one_step(0.391, 1.01, 3e-5)
    assert lower <= float(max(remove, add)) <= upper
    # Two steps still go through the grid; the closed form is for one step only.
    two = dpacct.PLDAccountant().step(noise_multiplier=1.01, sampling_probability=3e-5, count=2)
    assert two._single_gaussian(two._groups()) is None


@pytest.mark.parametrize(
    ("sigma", "q", "value", "name"),
    [(float("nan"), 0.1, 0.5, "noise_multiplier"), (0.0, 0.1, 0.5, "noise_multiplier"),
     (1.0, 1.5, 0.5, "sampling_probability"), (1.0, 0.0, 0.5, "sampling_probability"),
     (1.0, float("nan"), 0.5, "sampling_probability"), (1.0, 0.1, float("nan"), "epsilon"),
     (1.0, 0.1, -1.0, "epsilon"), (1.0, 0.1, float("inf"), "epsilon")],
)
def test_bad_input_is_rejected_by_name(sigma: float, q: float, value: float, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        gaussian_step_delta_bounds(sigma, q, value)
    if name != "epsilon":
        with pytest.raises(ValueError, match=name):
            gaussian_step_epsilon_bounds(sigma, q, 1e-5)
    for delta in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            gaussian_step_epsilon_bounds(1.0, 0.1, delta)
