"""Balls-in-bins epochs in the PLD engine (cpp/include/dpacct/pld/allocation.hpp).

One epoch's dominating pair has the likelihood ratio Z = (Y_1 + ... + Y_t) / t, the Y_i
independent log-normal; both hockey-stick divergences are expectations of convex
functions of Z. Independent references:

* t = 1: the Gaussian mechanism (closed form, any number of epochs);
* t = 2: mpmath quadrature of E (Z - e^eps)_+ and E (1 - e^eps Z)_+ over Y_1, the inner
  expectation over Y_2 in closed form (log-normal partial moments), 30 digits;
* larger t: plain Monte Carlo of E (Z - e^eps)_+ (fixed seed, 4 standard errors), and
  the certified bounds of other methods (Renyi DP above, the per-epoch maximum below).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpacct import _core, gaussian
from dpacct.mechanisms import BallsInBinsGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.pld.accountant import allocation_laws
from dpacct.samplers import allocation_rdp
from dpacct.samplers.allocation import BallsInBinsAccountant, epsilon_allocation_lower

# Certified bounds against a 30-digit reference: only the reference's own error (< 1e-20
# relative) separates them, so the comparison allows 1e-12 relative.
REL = 1e-12


def _epoch(sigma: float, t: int) -> BallsInBinsGaussianMechanism:
    return BallsInBinsGaussianMechanism(noise_multiplier=sigma, steps_per_epoch=t)


def _two_steps_delta(sigma: float, epsilon: float) -> float:
    """max of the two directions' hockey-stick divergences of one epoch of t = 2 steps (mpmath)."""
    mpmath.mp.dps = 30
    s = mpmath.mpf(1) / sigma
    e = mpmath.e ** mpmath.mpf(epsilon)

    def y_of(w: mpmath.mpf) -> mpmath.mpf:
        return mpmath.e ** (s * w - s * s / 2)

    def a_of(c: mpmath.mpf) -> mpmath.mpf:  # Y > c  <=>  W > a
        return (mpmath.log(c) + s * s / 2) / s

    def density(w: mpmath.mpf) -> mpmath.mpf:
        return mpmath.npdf(w)

    def remove_inner(w: mpmath.mpf) -> mpmath.mpf:  # E (Y_2 - c)_+, c = 2 e^eps - Y_1
        c = 2 * e - y_of(w)
        if c <= 0:
            return 1 - c
        a = a_of(c)
        return mpmath.ncdf(s - a) - c * mpmath.ncdf(-a)

    def add_inner(w: mpmath.mpf) -> mpmath.mpf:  # E (c - Y_2)_+, c = 2 e^-eps - Y_1
        c = 2 / e - y_of(w)
        if c <= 0:
            return mpmath.mpf(0)
        a = a_of(c)
        return c * mpmath.ncdf(a) - mpmath.ncdf(a - s)

    kink_remove = a_of(2 * e)
    kink_add = a_of(2 / e)
    remove = mpmath.quad(lambda w: density(w) * remove_inner(w), [-mpmath.inf, kink_remove, mpmath.inf]) / 2
    add = e / 2 * mpmath.quad(lambda w: density(w) * add_inner(w), [-mpmath.inf, kink_add])
    return float(max(remove, add))


@pytest.mark.parametrize(("sigma", "epsilon"), [(1.0, 0.5), (1.0, 2.5), (0.8, 1.0), (2.0, 0.2), (1.3, 3.5)])
def test_two_steps_against_quadrature(sigma: float, epsilon: float) -> None:
    """t = 2: the certified interval holds the 30-digit quadrature and is within 1 % of it."""
    reference = _two_steps_delta(sigma, epsilon)
    bounds = PLDAccountant().compose(_epoch(sigma, 2)).delta_bounds(epsilon)
    lower, upper = float(bounds.lower), float(bounds.upper)
    assert lower <= reference * (1 + REL) and reference <= upper * (1 + REL)
    assert upper <= reference * 1.01 and lower >= reference * 0.99


@pytest.mark.parametrize("epochs", [1, 4, 25])
def test_one_step_per_epoch_is_the_gaussian_mechanism(epochs: int) -> None:
    """t = 1: every epoch is one Gaussian step; E epochs are the Gaussian with sigma / sqrt(E)."""
    acct = PLDAccountant().compose(_epoch(1.2, 1), epochs)
    exact_eps = float(mpmath.findroot(
        lambda x: mpmath.ncdf(-x * 1.2 / math.sqrt(epochs) + math.sqrt(epochs) / 2.4)
        - mpmath.e ** x * mpmath.ncdf(-x * 1.2 / math.sqrt(epochs) - math.sqrt(epochs) / 2.4) - 1e-6, 3.0))
    lower, upper = acct.epsilon_bounds(1e-6)
    assert float(lower) <= exact_eps <= float(upper) <= exact_eps * 1.006


def test_heterogeneous_epochs_compose() -> None:
    """Epochs at different noise multipliers (t = 1) compose to the Gaussian with (sum sigma_i^-2)^-1/2."""
    acct = PLDAccountant().compose(_epoch(1.0, 1), 2).compose(_epoch(2.0, 1), 3)
    sigma_eff = (2 / 1.0**2 + 3 / 2.0**2) ** -0.5
    exact = float(gaussian.delta_for_epsilon(noise_multiplier=sigma_eff, epsilon=1.5))
    lower, upper = acct.delta_bounds(1.5)
    assert float(lower) <= exact <= float(upper) <= exact * 1.02


def test_plain_monte_carlo_meets_the_interval() -> None:
    """t = 100: plain Monte Carlo of E (Z - e^eps)_+ (fixed seed, 4 standard errors) meets the remove interval."""
    sigma, t, epsilon = 1.0, 100, 0.25
    rng = np.random.default_rng(2026)
    values = []
    for _ in range(20):
        w = rng.standard_normal((10_000, t))
        z = np.exp(w / sigma - 0.5 / sigma**2).mean(axis=1)
        values.append(np.maximum(z - math.exp(epsilon), 0.0))
    sample = np.concatenate(values)
    mean, error = float(sample.mean()), float(sample.std() / math.sqrt(sample.size))
    assert error < 0.05 * mean
    bounds = PLDAccountant().compose(_epoch(sigma, t)).delta_bounds(epsilon)  # the larger direction: remove here
    assert mean - 4 * error <= float(bounds.upper) and float(bounds.lower) <= mean + 4 * error
    assert float(bounds.upper) <= float(bounds.lower) * 1.02


@settings(max_examples=12, deadline=None)
@given(sigma=st.floats(0.8, 3.0), t=st.integers(2, 2000), epochs=st.integers(1, 4),
       delta=st.sampled_from([1e-4, 1e-6, 1e-8]))
def test_properties(sigma: float, t: int, epochs: int, delta: float) -> None:
    """lower <= upper; the interval meets the other certified bounds; more noise never costs more."""
    acct = BallsInBinsAccountant().compose(_epoch(sigma, t), epochs)
    lower, upper = (float(v) for v in acct.epsilon_bounds(delta))
    assert 0.0 < lower <= upper
    rdp = float(allocation_rdp.epsilon_balls_in_bins_rdp(noise_multiplier=sigma, steps=t, epochs=epochs,
                                                         delta=delta)[0])
    assert lower <= rdp  # Renyi DP is a certified upper bound too
    assert upper <= float(gaussian.epsilon_for_delta(noise_multiplier=sigma / math.sqrt(epochs), delta=delta))
    assert upper >= float(epsilon_allocation_lower(noise_multiplier=sigma, steps=t, epochs=epochs, delta=delta))
    noisier = BallsInBinsAccountant().compose(_epoch(sigma * 1.2, t), epochs)
    assert float(noisier.epsilon_bounds(delta).lower) <= upper  # the truth falls in sigma


def test_lattice_laws() -> None:
    """The kernel's laws: probability masses, ordered ends, the mean of Z, tiny tail charges."""
    laws = allocation_laws(1.0, 1000)
    z = (laws.start + np.arange(laws.sum.size)) * laws.lattice / laws.steps
    assert abs(float(laws.sum.sum()) - 1.0) < 1e-6  # upper ends: slightly above 1
    assert float((laws.sum * z).sum()) == pytest.approx(1.0, abs=1e-6)  # connect-the-dots keeps E Z = 1
    assert np.all(laws.null_low <= laws.null_high) and np.all(laws.record_low <= laws.record_high)
    assert float(laws.null_low.sum()) <= 1.0 <= float(laws.null_high.sum())
    assert laws.truncation <= 1.01e-14 and laws.tail_above < 2e-22 and laws.tail_below < 2e-22  # e^-50 a side
    step = _core.pld.allocation_step(laws, "remove", 1e-3, 2**24)
    assert step.infinity_upper >= laws.truncation  # the cut's mass is charged at +inf


def test_small_noise_falls_back() -> None:
    """Below sigma ~0.04 no lattice is representable: the accountant still answers (Renyi DP, Gaussian)."""
    with pytest.raises(ValueError, match="too small"):
        _core.pld.allocation_laws(0.02, 10, 0.1, math.log(1e-14), -50.0, 2**21)
    acct = BallsInBinsAccountant().compose(_epoch(0.02, 10))
    lower, upper = acct.epsilon_bounds(1e-5)
    assert float(lower) == 0.0 and math.isfinite(float(upper)) and float(upper) > 0.0


@pytest.mark.parametrize(("args", "match"), [
    ((0.0, 10, 0.1, -30.0, -50.0, 2**20), r"^noise_multiplier must be"),
    ((1.0, 0, 0.1, -30.0, -50.0, 2**20), r"^steps must be an integer >= 1"),
    ((1.0, 10, -0.1, -30.0, -50.0, 2**20), r"^resolution must be"),
    ((1.0, 10, 0.1, 1.0, -50.0, 2**20), r"^log_truncation must be < 0"),
])
def test_kernel_rejects_bad_input(args: tuple[float, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _core.pld.allocation_laws(*args)


def test_grid_points_at_the_largest_loss() -> None:
    """Regression: a grid width within ulps of log(z_max) / k put the last atom past the grid (a crash)."""
    laws = _core.pld.allocation_laws(2.0, 3, 0.1, -32.2, -50.0, 2**21)
    z_max = (laws.start + laws.sum.size - 1) * laws.lattice / laws.steps
    for k in range(1, 12):
        for d in (math.log(z_max) / k, np.nextafter(math.log(z_max) / k, 0.0), np.nextafter(math.log(z_max) / k, 1.0)):
            for direction in ("remove", "add"):
                step = _core.pld.allocation_step(laws, direction, float(d), 2**24)
                assert np.all(np.isfinite(step.log_upper) | (step.log_upper == -np.inf))
                assert 0.0 <= step.infinity_upper <= 1.0


def test_accountant_rejects_bad_input() -> None:
    """BallsInBinsAccountant: relative_accuracy in (0, 0.5], only balls-in-bins epochs, deltas in (0, 1)."""
    from dpacct.accountant import UnsupportedMechanismError
    from dpacct.mechanisms import GaussianMechanism

    with pytest.raises(ValueError, match=r"^relative_accuracy must be in \(0, 0.5\]"):
        BallsInBinsAccountant(relative_accuracy=2.0)
    with pytest.raises(UnsupportedMechanismError):
        BallsInBinsAccountant().compose(GaussianMechanism(noise_multiplier=1.0))
    acct = BallsInBinsAccountant().compose(_epoch(1.0, 10))
    with pytest.raises(ValueError, match=r"^delta must be"):
        acct.epsilon_bounds(1.5)
    assert BallsInBinsAccountant().epsilon_bounds(1e-5) == (0.0, 0.0)  # nothing composed


def test_large_noise_multiplier() -> None:
    """sigma = 50 (Y within a few percent of 1): the Chernoff window's lower-tail bound must not
    underflow (it claimed an e^-50 tail 3 standard deviations below the mean), and the laws hold
    their mass (sums >= 1 for upper ends)."""
    laws = allocation_laws(50.0, 1000)
    assert float(laws.sum.sum()) >= 1.0 and float(laws.null_high.sum()) >= 1.0
    bounds = BallsInBinsAccountant().compose(_epoch(50.0, 1000)).epsilon_bounds(1e-6)
    assert 0.0 < float(bounds.lower) <= float(bounds.upper) <= 1.01 * float(bounds.lower)
    poisson = PLDAccountant().step(noise_multiplier=50.0, sampling_probability=1e-3, count=1000).epsilon_bounds(1e-6)
    assert float(bounds.lower) <= 1.2 * float(poisson.upper)  # about Poisson's, as at sigma = 1
