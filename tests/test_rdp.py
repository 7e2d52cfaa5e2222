"""RDP of the sampled Gaussian against mpmath, closed forms and published numbers."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import dpacct
from dpacct.rdp import RDPAccountant, delta_from_rdp, epsilon_from_rdp, subsampled_gaussian_rdp

# Integer orders are an exact positive sum rounded up by <= 64 ulps of the
# largest exponent: agreement to 1e-9 relative is ample.
RTOL_INTEGER = 1e-9
# Fractional orders: spectrally accurate trapezoid rule (~1e-12 relative) plus an
# a-posteriori error margin of the same size; 1e-10 leaves room for libm differences.
RTOL_FRACTIONAL = 1e-10


def mp_log_a_minus_one_integer(q: float, sigma: float, order: int) -> mp.mpf:
    """log(A - 1) by the exact binomial sum at 50 digits (MTZ 2019, Section 3.1)."""
    with mp.workdps(50):
        q_, s = mp.mpf(q), mp.mpf(sigma)
        total = mp.fsum(
            mp.binomial(order, k) * (1 - q_) ** (order - k) * q_**k * mp.expm1((k * k - k) / (2 * s * s))
            for k in range(2, order + 1)
        )
        return mp.log(total)


def mp_rdp_quadrature(q: float, sigma: float, order: float) -> mp.mpf:
    """RDP by 40-digit quadrature of A = E[(1 - q + q exp((2z-1)/(2 sigma^2)))^order]."""
    with mp.workdps(40):
        q_, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(order)

        def integrand(z: mp.mpf) -> mp.mpf:
            x = q_ * mp.expm1((2 * z - 1) / (2 * s * s))
            # (1 + x)^a - 1 - a x >= 0: integrating this keeps the digits of A - 1.
            return mp.npdf(z, 0, s) * (mp.exp(a * mp.log1p(x)) - 1 - a * x)

        z0 = s * s * mp.log(1 / q_ - 1) + mp.mpf(1) / 2
        points = sorted({-mp.inf, -8 * s, mp.mpf(0), z0, a, a + 8 * s, mp.inf})
        a_minus_one = mp.quad(integrand, points)
        return mp.log1p(a_minus_one) / (a - 1)


INTEGER_CASES = [
    (q, sigma, order)
    for q in (1e-8, 1e-3, 0.01, 0.5, 0.999)
    for sigma in (0.1, 1.0, 4.0, 1e4)
    for order in (2, 3, 32, 256)
] + [(0.01, 1.0, 1000), (1e-3, 4.0, 10000), (0.5, 0.5, 2000)]


@pytest.mark.parametrize(("q", "sigma", "order"), INTEGER_CASES)
def test_integer_orders_match_exact_sum(q: float, sigma: float, order: int) -> None:
    """Integer orders are an upper bound within 1e-9 of the 50-digit exact sum, from q=1e-8 to 0.999."""
    got = subsampled_gaussian_rdp(noise_multiplier=sigma, sampling_probability=q, orders=float(order))
    with mp.workdps(50):
        ref = mp.log1p(mp.exp(mp_log_a_minus_one_integer(q, sigma, order))) / (order - 1)
    assert got >= ref * (1 - 1e-15)  # never below the truth
    np.testing.assert_allclose(got, float(ref), rtol=RTOL_INTEGER)


FRACTIONAL_CASES = [
    (0.01, 1.0, 1.5),
    (0.01, 1.0, 2.5),
    (0.1, 0.5, 3.7),
    (0.5, 1.0, 1.01),
    (0.001, 4.0, 1.1),
    (0.01, 4.0, 32.5),
    (1e-5, 10.0, 2.5),
    (0.999, 1.0, 8.5),
    (0.3, 0.3, 5.5),
    (256 / 60000, 1.1, 10.4),
    (1e-8, 0.5, 1.05),
    (1e-8, 1e4, 1.5),
    (0.999, 0.1, 3.5),
    (0.01, 0.1, 1.01),
    (0.001, 1e4, 256.1),
    (0.5, 4.0, 256.1),
    (1e-3, 100.0, 1000.5),
]


@pytest.mark.parametrize(("q", "sigma", "order"), FRACTIONAL_CASES)
def test_fractional_orders_match_quadrature(q: float, sigma: float, order: float) -> None:
    """Fractional orders are an upper bound within 1e-10 of mpmath quadrature, even when RDP ~ 1e-20."""
    got = subsampled_gaussian_rdp(noise_multiplier=sigma, sampling_probability=q, orders=order)
    ref = mp_rdp_quadrature(q, sigma, order)
    assert got >= ref * (1 - 1e-12)
    np.testing.assert_allclose(got, float(ref), rtol=RTOL_FRACTIONAL)


@pytest.mark.parametrize("order", [1.01, 1.5, 2.0, 7.0, 100.0, 10000.0])
def test_full_sampling_is_the_gaussian(order: float) -> None:
    """q = 1 is the Gaussian mechanism: RDP(order) = order / (2 sigma^2) (Mironov 2017, Prop. 7)."""
    got = subsampled_gaussian_rdp(noise_multiplier=3.0, sampling_probability=1.0, orders=order)
    assert got == pytest.approx(order / 18.0, rel=1e-15)


def test_zero_sampling_and_infinite_order() -> None:
    """q = 0 costs nothing; the order inf is the max-divergence, infinite for a Gaussian."""
    assert subsampled_gaussian_rdp(noise_multiplier=1.0, sampling_probability=0.0, orders=2.0) == 0.0
    assert subsampled_gaussian_rdp(noise_multiplier=1.0, sampling_probability=0.1, orders=math.inf) == math.inf


def test_integer_and_fractional_paths_agree_at_the_seam() -> None:
    """An order a hair away from an integer (fractional series) matches the integer sum to 1e-6."""
    orders = np.array([3.0, 3.0 + 1e-7, 12.0, 12.0 - 1e-7])
    values = subsampled_gaussian_rdp(noise_multiplier=1.3, sampling_probability=0.02, orders=orders)
    np.testing.assert_allclose(values[1], values[0], rtol=1e-6)
    np.testing.assert_allclose(values[3], values[2], rtol=1e-6)


def test_abadi_moments_accountant_reference() -> None:
    """q=0.01, sigma=4, delta=1e-5, T=10^4 gives eps ~ 1.26 (Abadi et al. 2016, Sec. 5.2)
    with the classic conversion; the improved conversion is smaller."""
    classic = dpacct.epsilon(noise_multiplier=4.0, sampling_probability=0.01, steps=10_000, delta=1e-5,
                             accountant="rdp", conversion="classic")
    improved = dpacct.epsilon(noise_multiplier=4.0, sampling_probability=0.01, steps=10_000, delta=1e-5,
                              accountant="rdp")
    assert classic == pytest.approx(1.26, abs=0.01)
    assert improved < classic


@pytest.mark.parametrize("rho", [0.001, 0.1, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_classic_conversion_of_gaussian_matches_closed_form(rho: float, delta: float) -> None:
    """For RDP(a) = a rho the classic conversion's continuous optimum is rho + 2 sqrt(rho log(1/delta))
    (Bun & Steinke 2016, Prop. 1.3); on a fine grid it is above it and within 1e-6."""
    orders = 1.0 + np.geomspace(1e-4, 1e6, 20001)
    eps = epsilon_from_rdp(orders=orders, rdp=orders * rho, delta=delta, conversion="classic").value
    exact = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert eps >= exact * (1 - 1e-15)
    np.testing.assert_allclose(eps, exact, rtol=1e-6)


def test_improved_conversion_beats_classic_and_exact_gaussian_is_below() -> None:
    """improved <= classic, and both are >= the exact Gaussian curve (they are upper bounds)."""
    acct = RDPAccountant().compose(dpacct.GaussianMechanism(noise_multiplier=2.0), 25)
    classic = RDPAccountant(conversion="classic").compose(dpacct.GaussianMechanism(noise_multiplier=2.0), 25)
    exact = dpacct.gaussian.epsilon_for_delta(noise_multiplier=2.0 / 5.0, delta=1e-6)
    improved_eps = acct.get_epsilon(1e-6)
    assert exact <= improved_eps <= classic.get_epsilon(1e-6)
    assert improved_eps < exact * 1.2


def test_delta_from_rdp_inverts_epsilon_from_rdp() -> None:
    """Round trip: delta(epsilon(delta)) <= delta, and equality holds at the shared order."""
    acct = RDPAccountant().step(noise_multiplier=1.1, sampling_probability=256 / 60000, count=10_000)
    for d in (1e-3, 1e-5, 1e-9):
        eps = acct.get_epsilon(d)
        assert acct.get_delta(eps) <= d * (1 + 1e-9)


def test_bretagnolle_huber_bound_is_used_for_small_rdp() -> None:
    """With tiny RDP, delta(0) <= sqrt(1 - exp(-rdp)) beats the moment bounds, and is valid (TV bound)."""
    orders = np.array([2.0, 4.0])
    rdp = np.array([1e-6, 2e-6])
    value = delta_from_rdp(orders=orders, rdp=rdp, epsilon=0.0).value
    assert value == pytest.approx(math.sqrt(-math.expm1(-1e-6)), rel=1e-12)


def test_optimize_order_never_worse_than_grid() -> None:
    """Continuous minimisation over the order can only lower the bound, and stays above the exact curve."""
    acct = RDPAccountant().compose(dpacct.GaussianMechanism(noise_multiplier=10.0), 3)
    grid = acct.get_epsilon_and_order(1e-5)
    refined = acct.get_epsilon_and_order(1e-5, optimize_order=True)
    exact = dpacct.gaussian.epsilon_for_delta(noise_multiplier=10.0 / math.sqrt(3), delta=1e-5)
    assert exact <= refined.value <= grid.value


def test_edge_of_grid_warns() -> None:
    """An optimum at the largest order warns that a wider grid could help."""
    acct = RDPAccountant(orders=[2.0, 3.0, 4.0]).compose(dpacct.GaussianMechanism(noise_multiplier=50.0))
    with pytest.warns(dpacct.OrderGridWarning, match="edge of the orders grid"):
        acct.get_epsilon(1e-5)


def test_tiny_noise_answers_quickly_with_a_valid_bound() -> None:
    """sigma = 1e-6 used to hang (quadrature work ~ 1/sigma^2); closed-form bounds answer at once.

    Reference at order 1.5: two independent upper bounds, the chord between log A_1 = 0 and
    the exact integer log A_2 = log(1 + q^2 (e^{1/sigma^2} - 1)) (Mironov, Talwar, Zhang
    2019, arXiv:1908.10530, Section 3.1; mpmath, 30 digits) and the unsubsampled Gaussian's
    order / (2 sigma^2) (joint quasi-convexity of the Renyi divergence); the value is the
    smaller one up to the stated rounding margin (rtol 1e-12).
    """
    import time

    q, sigma, order = 0.01, 1e-6, 1.5
    with mp.workdps(30):
        chord = float(mp.log(1 + mp.mpf(q) ** 2 * mp.expm1(1 / mp.mpf(sigma) ** 2)))
    gaussian = order / (2 * sigma**2)
    value = subsampled_gaussian_rdp(noise_multiplier=sigma, sampling_probability=q, orders=order)
    assert min(chord, gaussian) <= value <= min(chord, gaussian) * (1 + 1e-12)
    start = time.perf_counter()
    with pytest.warns(dpacct.OrderGridWarning):  # the optimum is the smallest order, 1.01
        eps = dpacct.epsilon(noise_multiplier=sigma, sampling_probability=q, steps=1000, delta=1e-5,
                             accountant="rdp")
    assert time.perf_counter() - start < 5.0
    # The truth is far above 1e9: with probability 1 - (1 - q)^1000 >> delta the record is used
    # at least once, and one use shifts the output by 1/sigma = 1e6 standard deviations (privacy
    # loss ~ 1/(2 sigma^2) = 5e11). The bound is at most the unsubsampled composition's
    # T/(2 sigma^2) plus the conversion term at the smallest order.
    assert 1e9 < eps <= 1000 / (2 * sigma**2) * 1.02


def test_infinite_order_is_refused_by_the_accountant() -> None:
    with pytest.raises(ValueError, match="orders must all be finite"):
        RDPAccountant(orders=[math.inf])
    with pytest.raises(ValueError, match="orders must all be finite"):
        RDPAccountant(orders=[2.0, math.inf])
