"""The conjectured shuffle delta (Chua et al. 2024, Conjecture 3.2) against exact references.

Every Monte-Carlo interval here is requested at confidence ``1 - 2e-9`` (about 6
standard errors, two-sided); with fixed seeds the tests are deterministic, and a
correct estimator would fail one of them with probability below ~1e-8 per check
(union over the checks in this file: < 1e-6), so a failure means a bug, not bad luck.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, special

from dpacct import gaussian
from dpacct.samplers.conjectured import (
    KIND,
    ConjecturedEstimate,
    delta_shuffle_conjectured_mc,
    epsilon_shuffle_conjectured_mc,
)

SIX_SIGMA = 1.0 - 2e-9  # two-sided normal quantile ~6.0: false-failure probability 2e-9 per interval


# ---------------------------------------------------------------------------
# independent references


def _log_phi(x: np.ndarray, sigma: float) -> np.ndarray:
    return -0.5 * (x / sigma) ** 2 - math.log(sigma * math.sqrt(2 * math.pi))


def hockey_stick_bruteforce_t2(sigma: float, eps: float, h: float, *, forward: bool = True) -> float:
    """H_eps(P_S||Q_S) (or Q||P) for T = 2 by a Riemann sum of (p - e^eps q)_+ on a 2-d grid.

    The densities are written out directly from the mixture definition; the integrand is
    smooth except for the kink of the positive part, so the sum converges like h^2.
    """
    grid = np.arange(-9 * sigma, 2 + 9 * sigma, h)
    total = 0.0
    for start in range(0, grid.size, 256):
        w1 = grid[start : start + 256, None]
        w2 = grid[None, :]
        p = 0.5 * (
            np.exp(_log_phi(w1 - 2, sigma) + _log_phi(w2, sigma)) + np.exp(_log_phi(w1, sigma) + _log_phi(w2 - 2, sigma))
        )
        q = 0.5 * (
            np.exp(_log_phi(w1 - 1, sigma) + _log_phi(w2, sigma)) + np.exp(_log_phi(w1, sigma) + _log_phi(w2 - 1, sigma))
        )
        diff = p - math.exp(eps) * q if forward else q - math.exp(eps) * p
        total += float(np.maximum(diff, 0.0).sum())
    return total * h * h


def hockey_stick_conditional(sigma: float, steps: int, eps: float, h: float, *, forward: bool = True) -> float:
    """H_eps for small T: w_1 integrated in closed form (normal CDFs), w_2..w_T by a Riemann grid.

    With phi the N(0, sigma^2 I) density, p - e^eps q = phi(w)/T * (sum_t A_t - e^eps sum_t B_t),
    A_t = exp((2 w_t - 2)/sigma^2), B_t = exp((w_t - 1/2)/sigma^2). For fixed w_2..w_T the
    sign of the bracket in v = exp((w_1 - 1)/sigma^2) is that of a quadratic a v^2 + b v + c,
    and phi(w_1) A_1 = phi(w_1 - 2), phi(w_1) B_1 = phi(w_1 - 1), so the w_1-integral over
    the set where it is positive is a sum of differences of normal CDFs.
    """
    s2 = sigma * sigma
    e = math.exp(eps)
    axis = np.arange(-9 * sigma, 2 + 9 * sigma, h)
    others = np.meshgrid(*([axis] * (steps - 1)), indexing="ij")
    w = [o.ravel() for o in others]
    log_weight = sum((_log_phi(x, sigma) + math.log(h) for x in w), np.zeros(w[0].size if w else 1))
    a_o = sum((np.exp((2 * x - 2) / s2) for x in w), np.zeros_like(log_weight))
    b_o = sum((np.exp((x - 0.5) / s2) for x in w), np.zeros_like(log_weight))
    k = math.exp(0.5 / s2)
    if forward:  # bracket = v^2 - e k v + (A_o - e B_o); CDF weights for N(2), N(1), N(0)
        a, b, c = 1.0, -e * k, a_o - e * b_o
        coef = (1.0, -e, c)
    else:  # bracket = k v - e v^2 + (B_o - e A_o)
        a, b, c = -e, k, b_o - e * a_o
        coef = (-e, 1.0, c)
    disc = b * b - 4 * a * c
    with np.errstate(invalid="ignore", divide="ignore"):
        sq = np.sqrt(disc)
        r_lo = np.minimum((-b - sq) / (2 * a), (-b + sq) / (2 * a))
        r_hi = np.maximum((-b - sq) / (2 * a), (-b + sq) / (2 * a))
        real = disc > 0
        b1 = np.where(real & (r_lo > 0), 1 + s2 * np.log(r_lo), -np.inf)
        b2 = np.where(real & (r_hi > 0), 1 + s2 * np.log(r_hi), -np.inf)

    def cdf_integral(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        def big_f(x: np.ndarray) -> np.ndarray:
            return (
                coef[0] * special.ndtr((x - 2) / sigma)
                + coef[1] * special.ndtr((x - 1) / sigma)
                + coef[2] * special.ndtr(x / sigma)
            )

        return big_f(hi) - big_f(lo)

    # signs: beyond the largest root sign(a); between the roots -sign(a); below the smaller
    # root (only if it is positive) sign(c) = sign(a).
    inner = np.zeros_like(log_weight)
    if a > 0:
        inner += cdf_integral(b2, np.full_like(b2, np.inf))
        inner += cdf_integral(np.full_like(b1, -np.inf), b1)
    else:
        inner += cdf_integral(b1, b2)
    return float(np.sum(np.exp(log_weight) * inner) / steps)


def threshold_lower_bound(sigma: float, steps: int, eps: float) -> float:
    """max_C P_S(E_C) - e^eps Q_S(E_C) on a grid of C (Chua et al. 2024, Section 3), in log space."""
    c = np.arange(-2.0, 12.0, 1e-3)
    common = (steps - 1) * special.log_ndtr(c / sigma)
    p = -np.expm1(special.log_ndtr((c - 2) / sigma) + common)
    q = -np.expm1(special.log_ndtr((c - 1) / sigma) + common)
    return float(np.max(p - math.exp(eps) * q))


# ---------------------------------------------------------------------------
# references checked against each other


def test_conditional_reference_matches_bruteforce_t2() -> None:
    """The closed-form-in-w_1 reference agrees with a plain 2-d Riemann sum for T = 2 (both directions)."""
    for forward in (True, False):
        brute = hockey_stick_bruteforce_t2(1.0, 1.0, 0.004, forward=forward)
        cond = hockey_stick_conditional(1.0, 2, 1.0, 0.004, forward=forward)
        # kink error of the brute-force sum is O(h^2) ~ 1e-5 relative at h = 0.004
        np.testing.assert_allclose(cond, brute, rtol=1e-4)


def test_conditional_reference_is_gaussian_for_t1() -> None:
    """For T = 1 the reference reduces to the Gaussian curve (Balle & Wang 2018, Theorem 8)."""
    for sigma, eps in ((1.0, 1.0), (0.5, 4.0)):
        exact = gaussian.delta_for_epsilon(noise_multiplier=sigma, epsilon=eps)
        for forward in (True, False):
            np.testing.assert_allclose(hockey_stick_conditional(sigma, 1, eps, 1.0, forward=forward), exact, rtol=1e-12)


def test_threshold_lower_bound_reproduces_paper() -> None:
    """The grid lower bound gives delta_S(4) >= 0.226 at sigma 0.4, T 10 000 (Chua et al. 2024, Section 3)."""
    assert threshold_lower_bound(0.4, 10_000, 4.0) == pytest.approx(0.226, abs=5e-4)


# ---------------------------------------------------------------------------
# (a) T = 1 is the Gaussian pair


@pytest.mark.parametrize(
    ("sigma", "eps"),
    [(1.0, 1.0), (0.5, 4.0), (0.5, 12.0), (0.3, 40.0)],  # deltas 0.13, 0.085, 5.7e-9, 6.0e-26
)
def test_t1_covers_gaussian_curve(sigma: float, eps: float) -> None:
    """For T = 1 the 6-sigma interval covers the exact Gaussian delta, down to 1e-25 thanks to the tilt."""
    exact = gaussian.delta_for_epsilon(noise_multiplier=sigma, epsilon=eps)
    r = delta_shuffle_conjectured_mc(noise_multiplier=sigma, steps=1, epsilon=eps, samples=50_000, confidence=SIX_SIGMA)
    assert r.lower <= exact <= r.upper
    assert r.standard_error <= 0.02 * exact  # importance sampling keeps ~1% relative error at any delta


def test_t1_both_directions_equal() -> None:
    """For T = 1 both directions are the same Gaussian curve: each interval covers it."""
    exact = gaussian.delta_for_epsilon(noise_multiplier=0.7, epsilon=3.0)
    for direction in ("remove", "add"):
        r = delta_shuffle_conjectured_mc(
            noise_multiplier=0.7, steps=1, epsilon=3.0, samples=20_000, confidence=SIX_SIGMA, direction=direction
        )
        assert r.direction == direction
        assert r.lower <= exact <= r.upper


# ---------------------------------------------------------------------------
# (b) T = 2, 3 against quadrature


@pytest.mark.parametrize(
    ("sigma", "steps", "eps"),
    [(1.0, 2, 1.0), (0.5, 2, 4.0), (0.5, 2, 9.0), (0.8, 3, 1.5), (0.6, 3, 5.0)],
)
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_small_t_covers_quadrature(sigma: float, steps: int, eps: float, direction: str) -> None:
    """For T = 2, 3 the 6-sigma interval covers the quadrature value, whose own error is bounded by halving h."""
    forward = direction == "remove"
    h = 0.02 if steps == 2 else 0.04
    ref = hockey_stick_conditional(sigma, steps, eps, h, forward=forward)
    ref_fine = hockey_stick_conditional(sigma, steps, eps, h / 2, forward=forward)
    slack = 2 * abs(ref - ref_fine)  # Riemann-sum error of the reference, generously
    r = delta_shuffle_conjectured_mc(
        noise_multiplier=sigma, steps=steps, epsilon=eps, samples=50_000, confidence=SIX_SIGMA, direction=direction
    )
    assert r.lower - slack <= ref_fine <= r.upper + slack
    # The raw Monte-Carlo interval (before the certified clip, which is nearly exact at small T):
    assert r.mc_lower - slack <= ref_fine <= r.mc_upper + slack
    assert slack < 0.1 * (r.mc_upper - r.mc_lower) + 1e-15  # the reference is much sharper than the interval


def test_pq_dominates_qp_for_t_above_one() -> None:
    """For T = 2, 3 the P||Q direction is the larger one (quadrature), as the docstring states."""
    for sigma, steps, eps in ((1.0, 2, 1.0), (0.5, 2, 4.0), (0.8, 3, 1.5)):
        h = 0.02 if steps == 2 else 0.04
        assert hockey_stick_conditional(sigma, steps, eps, h) > hockey_stick_conditional(sigma, steps, eps, h, forward=False)


def test_both_is_max_of_directions() -> None:
    """direction='both' returns the larger direction's estimate, on exactly the same samples."""
    kw = {"noise_multiplier": 0.8, "steps": 3, "epsilon": 1.0, "samples": 5_000, "seed": 7}
    both = delta_shuffle_conjectured_mc(**kw)
    pq = delta_shuffle_conjectured_mc(**kw, direction="remove")
    qp = delta_shuffle_conjectured_mc(**kw, direction="add")
    assert both.estimate == max(pq.estimate, qp.estimate) == pq.estimate
    assert both.direction == "remove"
    # each direction is at level 1 - alpha/2 in 'both', so its interval is wider than alone
    assert both.upper > pq.upper


# ---------------------------------------------------------------------------
# (c) between the certified bounds


@pytest.mark.parametrize(("sigma", "steps", "eps"), [(0.4, 100, 4.0), (0.4, 100, 10.0), (1.0, 1000, 1.0), (0.6, 50, 6.0)])
def test_between_threshold_lower_bound_and_deterministic(sigma: float, steps: int, eps: float) -> None:
    """The interval meets [threshold lower bound, delta_D]: both are certified bounds on the conjectured value."""
    r = delta_shuffle_conjectured_mc(noise_multiplier=sigma, steps=steps, epsilon=eps, samples=10_000, confidence=SIX_SIGMA)
    assert r.upper >= threshold_lower_bound(sigma, steps, eps)
    assert r.lower <= gaussian.delta_for_epsilon(noise_multiplier=sigma, epsilon=eps)


def test_paper_point_sigma04_t10000() -> None:
    """sigma 0.4, T 10 000, eps 4: the estimate is within 6 SE of [0.226, 0.244] (Chua et al. 2024, Section 3)."""
    r = delta_shuffle_conjectured_mc(
        noise_multiplier=0.4, steps=10_000, epsilon=4.0, samples=8_000, confidence=SIX_SIGMA, direction="remove"
    )
    assert r.upper >= 0.226
    assert r.lower <= 0.2439
    assert r.standard_error < 0.005  # informative: the range itself is only 0.018 wide


# ---------------------------------------------------------------------------
# epsilon from delta


@pytest.mark.parametrize(("sigma", "delta"), [(1.0, 1e-5), (0.5, 1e-8), (1.0, 1e-12)])
def test_epsilon_t1_covers_gaussian_epsilon(sigma: float, delta: float) -> None:
    """For T = 1 the epsilon interval covers the exact Gaussian epsilon(delta) and brackets the estimate."""
    exact = gaussian.epsilon_for_delta(noise_multiplier=sigma, delta=delta)
    r = epsilon_shuffle_conjectured_mc(noise_multiplier=sigma, steps=1, delta=delta, samples=20_000, confidence=SIX_SIGMA)
    assert r.lower <= r.estimate <= r.upper
    assert r.lower <= exact <= r.upper
    assert r.upper - r.lower < 0.05 * exact  # the tilt makes the estimate sharp at small delta
    assert r.kind == KIND


def test_epsilon_t2_covers_quadrature_epsilon() -> None:
    """For T = 2 the epsilon interval covers the root of the quadrature curve (Brent on the reference)."""
    sigma, delta = 0.6, 1e-4

    def curve(eps: float) -> float:
        return max(hockey_stick_conditional(sigma, 2, eps, 0.01, forward=f) for f in (True, False))

    exact = optimize.brentq(lambda e: curve(e) - delta, 0.0, 30.0)
    r = epsilon_shuffle_conjectured_mc(
        noise_multiplier=sigma, steps=2, delta=delta, samples=20_000, confidence=SIX_SIGMA
    )
    assert r.lower <= exact <= r.upper


def test_epsilon_zero_when_delta_above_curve() -> None:
    """A delta above delta_hat(0) (the total variation) gives epsilon 0."""
    r = epsilon_shuffle_conjectured_mc(noise_multiplier=1.0, steps=2, delta=0.9, samples=2_000)
    assert r.estimate == 0.0
    assert r.lower == 0.0


# ---------------------------------------------------------------------------
# (d) errors, (e) determinism, result object


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"noise_multiplier": -1.0}, ValueError, r"^noise_multiplier must be finite and > 0, got -1.0"),
        ({"noise_multiplier": float("nan")}, ValueError, r"^noise_multiplier must be finite and > 0, got nan"),
        ({"noise_multiplier": "1"}, TypeError, r"^noise_multiplier must be a real number, got str"),
        ({"steps": 0}, ValueError, r"^steps must be an integer >= 1, got 0"),
        ({"steps": 2.5}, ValueError, r"^steps must be an integer >= 1, got 2.5"),
        ({"epsilon": -0.1}, ValueError, r"^epsilon must be finite and >= 0, got -0.1"),
        ({"epsilon": float("inf")}, ValueError, r"^epsilon must be finite and >= 0, got inf"),
        ({"samples": 1}, ValueError, r"^samples must be an integer >= 2, got 1"),
        ({"confidence": 1.0}, ValueError, r"^confidence must be in \(0, 1\), got 1.0"),
        ({"seed": -3}, ValueError, r"^seed must be an integer >= 0 or None, got -3"),
        ({"seed": 1.5}, TypeError, r"^seed must be an integer or None, got float"),
        ({"direction": "up"}, ValueError, r"^direction must be one of 'both', 'remove', 'add', got 'up'"),
        ({"interval": "exact"}, ValueError, r"^interval must be one of 'normal', 'bernstein', got 'exact'"),
    ],
)
def test_errors_name_the_parameter(kwargs: dict[str, object], error: type[Exception], pattern: str) -> None:
    """Each invalid argument raises the right type with the parameter, the range and the value."""
    args: dict[str, object] = {"noise_multiplier": 1.0, "steps": 2, "epsilon": 1.0, "samples": 100}
    args.update(kwargs)
    with pytest.raises(error, match=pattern):
        delta_shuffle_conjectured_mc(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-3])
def test_epsilon_rejects_bad_delta(bad: float) -> None:
    """epsilon_shuffle_conjectured_mc rejects delta outside (0, 1), naming it."""
    with pytest.raises(ValueError, match=r"^delta must be in \(0, 1\), got"):
        epsilon_shuffle_conjectured_mc(noise_multiplier=1.0, steps=2, delta=bad, samples=100)


def test_fixed_seed_is_deterministic() -> None:
    """The same seed gives the identical result object; another seed gives another estimate."""
    kw = {"noise_multiplier": 0.9, "steps": 30, "epsilon": 1.0, "samples": 3_000}
    first = delta_shuffle_conjectured_mc(**kw, seed=11)
    assert delta_shuffle_conjectured_mc(**kw, seed=11) == first
    assert delta_shuffle_conjectured_mc(**kw, seed=12).estimate != first.estimate
    eps_kw = {"noise_multiplier": 0.9, "steps": 30, "delta": 1e-3, "samples": 2_000}
    assert epsilon_shuffle_conjectured_mc(**eps_kw, seed=5) == epsilon_shuffle_conjectured_mc(**eps_kw, seed=5)


def test_result_is_labelled_conjectured_and_frozen() -> None:
    """The result says it is conjectured and Monte Carlo, and cannot be modified."""
    r = delta_shuffle_conjectured_mc(noise_multiplier=1.0, steps=3, epsilon=1.0, samples=1_000)
    assert isinstance(r, ConjecturedEstimate)
    assert r.kind == "conjectured (Chua et al. 2024, Conjecture 3.2), Monte-Carlo estimate, not a certified bound"
    assert r.samples == 1_000
    with pytest.raises(AttributeError):
        r.estimate = 0.0  # type: ignore[misc]


def test_large_steps_are_chunked() -> None:
    """steps = 100 000 runs (chunked to bounded memory) and stays between the certified bounds."""
    r = delta_shuffle_conjectured_mc(
        noise_multiplier=0.4, steps=100_000, epsilon=12.0, samples=300, confidence=SIX_SIGMA, direction="remove"
    )
    assert r.upper >= threshold_lower_bound(0.4, 100_000, 12.0)
    assert r.lower <= gaussian.delta_for_epsilon(noise_multiplier=0.4, epsilon=12.0)


def test_bernstein_interval_covers_and_is_wider() -> None:
    """The distribution-free interval covers the T = 1 exact value and contains the normal one's centre."""
    exact = gaussian.delta_for_epsilon(noise_multiplier=1.0, epsilon=0.5)
    normal = delta_shuffle_conjectured_mc(noise_multiplier=1.0, steps=1, epsilon=0.5, samples=20_000, confidence=0.99)
    bern = delta_shuffle_conjectured_mc(
        noise_multiplier=1.0, steps=1, epsilon=0.5, samples=20_000, confidence=0.99, interval="bernstein"
    )
    assert bern.mc_lower <= exact <= bern.mc_upper
    assert bern.mc_upper - bern.mc_lower > normal.mc_upper - normal.mc_lower
    assert bern.estimate == normal.estimate
    # T = 1: the certified range [threshold bound, Gaussian curve] is the exact value itself.
    assert bern.clipped and bern.lower <= exact * (1 + 1e-9) and bern.upper >= exact * (1 - 1e-9)


@given(
    sigma=st.floats(0.3, 3.0),
    steps=st.integers(1, 40),
    eps=st.floats(0.0, 8.0),
    seed=st.integers(0, 2**32),
)
def test_property_interval_is_consistent_with_certified_bounds(sigma: float, steps: int, eps: float, seed: int) -> None:
    """For any parameters the 6-sigma interval is ordered, non-negative, and meets [threshold bound, delta_D]."""
    r = delta_shuffle_conjectured_mc(
        noise_multiplier=sigma, steps=steps, epsilon=eps, samples=4_000, confidence=SIX_SIGMA, seed=seed
    )
    assert 0.0 <= r.lower <= r.estimate <= r.upper
    assert r.mc_lower <= r.mc_upper and math.isfinite(r.mc_upper)
    assert math.isfinite(r.upper)
    assert r.lower <= gaussian.delta_for_epsilon(noise_multiplier=sigma, epsilon=eps) * (1 + 1e-9)
    assert r.upper >= threshold_lower_bound(sigma, steps, eps) - 1e-12


def test_former_direction_names_still_work_and_warn() -> None:
    """direction="pq"/"qp" are deprecated aliases of "remove"/"add": same samples, same numbers."""
    kw = {"noise_multiplier": 0.7, "steps": 3, "epsilon": 2.0, "samples": 2_000, "seed": 5}
    with pytest.deprecated_call(match="use direction='remove'"):
        old = delta_shuffle_conjectured_mc(**kw, direction="pq")  # type: ignore[arg-type]
    new = delta_shuffle_conjectured_mc(**kw, direction="remove")  # type: ignore[arg-type]
    assert old.estimate == new.estimate and old.direction == new.direction == "remove"
