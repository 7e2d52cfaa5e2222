"""The Gaussian mechanism's exact curve against closed forms and mpmath."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpacct import gaussian

# The C++ curve is a difference of two log-Phi values: relative error ~1e-13.
RTOL_CURVE = 1e-11


def mp_delta(sigma: float, eps: float) -> mp.mpf:
    with mp.workdps(60):
        s, e = mp.mpf(sigma), mp.mpf(eps)
        return mp.ncdf(-e * s + 1 / (2 * s)) - mp.e**e * mp.ncdf(-e * s - 1 / (2 * s))


@pytest.mark.parametrize("sigma", [0.1, 0.3, 1.0, 2.0, 5.0, 30.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 3.0, 10.0, 50.0])
def test_log_delta_matches_mpmath(sigma: float, eps: float) -> None:
    """log delta(eps) equals the 60-digit mpmath value of Balle & Wang's Theorem 8, even at 1e-300."""
    ref = mp_delta(sigma, eps)
    got = gaussian.log_delta_for_epsilon(noise_multiplier=sigma, epsilon=eps)
    if ref == 0:
        pytest.skip("delta is below mpmath's working range")
    np.testing.assert_allclose(got, float(mp.log(ref)), rtol=RTOL_CURVE, atol=1e-12)


def test_published_value_mu_one() -> None:
    """mu = 1, eps = 1 gives delta = 0.126936737507 (dp_accounting's reference value)."""
    assert gaussian.delta_for_epsilon(noise_multiplier=1.0, epsilon=1.0) == pytest.approx(0.12693673750664392, rel=1e-12)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 5.0, 100.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-8, 1e-12, 1e-15, 1e-30])
def test_epsilon_inverts_delta_and_rounds_up(sigma: float, delta: float) -> None:
    """epsilon(delta) is the rounded-up inverse: delta(eps) <= delta < delta(eps * (1 - 1e-7))."""
    eps = gaussian.epsilon_for_delta(noise_multiplier=sigma, delta=delta)
    assert isinstance(eps, float)
    if eps == 0.0:
        assert float(mp_delta(sigma, 0.0)) <= delta
        return
    assert mp_delta(sigma, eps) <= delta
    assert mp_delta(sigma, eps * (1 - 1e-7)) > delta


def test_vectorised_equals_scalar_loop() -> None:
    """The array call equals a Python loop of scalar calls, bit for bit."""
    deltas = np.array([1e-3, 1e-6, 1e-9])
    vector = gaussian.epsilon_for_delta(noise_multiplier=0.8, delta=deltas)
    loop = [gaussian.epsilon_for_delta(noise_multiplier=0.8, delta=d) for d in deltas]
    assert isinstance(vector, np.ndarray)
    np.testing.assert_array_equal(vector, loop)


def test_composition_of_gaussians_is_one_gaussian() -> None:
    """k Gaussians with sigma compose to one with sigma / sqrt(k) (Dong, Roth, Su, Cor. 3.3)."""
    assert gaussian.composed_noise_multiplier([3.0] * 9) == pytest.approx(1.0, rel=1e-15)


def test_classic_calibration_is_conservative_for_small_epsilon() -> None:
    """sigma = sqrt(2 ln(1.25/delta))/eps (Dwork & Roth Thm A.1) is valid for eps < 1: exact eps <= target."""
    for eps_target in (0.1, 0.5, 0.9):
        sigma = math.sqrt(2 * math.log(1.25 / 1e-5)) / eps_target
        assert gaussian.epsilon_for_delta(noise_multiplier=sigma, delta=1e-5) <= eps_target
