"""Balls-in-bins and random allocation (dpacct.samplers.allocation): bounds, estimate, rows.

Independent reference: the pair's hockey-stick divergence for t = 2, 3 by quadrature
(scipy.integrate) over all coordinates but the last, whose integral is in closed form.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import special

from dpacct import gaussian
from dpacct.samplers import (
    allocation_rows,
    delta_allocation_estimate,
    delta_allocation_lower,
    delta_allocation_upper,
    delta_poisson_bounds,
    delta_shuffle_lower,
    epsilon_allocation_estimate,
    epsilon_allocation_lower,
    epsilon_allocation_upper,
)

# The quadrature reference is accurate to 2.2e-6 absolute (see _reference), so the bounds
# are compared one-sided with this slack only.
QUAD_SLACK = 3e-6
# t = 1: the per-epoch maximum is the output itself, so the optimistic PLD on a 1e-4 grid
# is within its discretization of the Gaussian curve (delta to relative 1e-3).
RTOL_GRID = 1e-3


def _inner(log_a: NDArray, log_b: NDArray, sigma: float, epsilon: float, direction: str) -> NDArray:
    """E over x ~ N(0, s^2) of (A + B e^{x/s^2} - e^eps)_+ ("remove") or (1 - e^eps (A + B e^{x/s^2}))_+ ("add").

    Closed form: x* solves A + B e^{x*/s^2} = e^eps (resp. = e^{-eps}), and
    E[e^{x/s^2} 1{x > x*}] = e^{1/(2 s^2)} Phi((1 - x*)/s) (tilting N(0, s^2) to N(1, s^2)).
    """
    s2 = sigma * sigma
    half = 0.5 / s2
    a = np.exp(log_a)
    with np.errstate(divide="ignore", invalid="ignore"):
        if direction == "remove":
            c = math.exp(epsilon)
            x_star = s2 * (np.log(np.maximum(c - a, 1e-300)) - log_b)
            part = np.exp(log_b + half) * special.ndtr((1.0 - x_star) / sigma) + (a - c) * special.ndtr(-x_star / sigma)
            return np.where(a >= c, a + np.exp(log_b + half) - c, part)
        ca = np.exp(epsilon + log_a)
        x_star = s2 * (np.log(np.maximum(1.0 - ca, 1e-300)) - epsilon - log_b)
        part = (1.0 - ca) * special.ndtr(x_star / sigma) - np.exp(epsilon + log_b + half) * special.ndtr(
            (x_star - 1.0) / sigma)
        return np.where(ca >= 1.0, 0.0, part)


def _reference(sigma: float, t: int, k: int, epsilon: float) -> float:
    """max over the directions of the pair's hockey-stick divergence (t in {2, 3}).

    Gauss-Legendre (2400 nodes for t = 2, 1200 per axis for t = 3) on
    [-10 s - 1, 10 s + 2] for the first t - 1 coordinates; the positive part is integrated
    out in closed form over the last coordinate, and the mass outside the box is below
    1e-20. Checked against scipy.integrate.quad / dblquad (epsabs 1e-11) on the four
    cases below: within 1e-7 (t = 2) and 2.2e-6 (t = 3).
    """
    points = 2400 if t == 2 else 1200
    s2 = sigma * sigma
    nodes, weights = special.roots_legendre(points)
    lo, hi = -10.0 * sigma - 1.0, 10.0 * sigma + 2.0
    x = 0.5 * (hi - lo) * nodes + 0.5 * (hi + lo)
    w = 0.5 * (hi - lo) * weights * np.exp(-0.5 * (x / sigma) ** 2) / (sigma * math.sqrt(2.0 * math.pi))
    grids = np.meshgrid(*([x] * (t - 1)), indexing="ij")
    weight = np.ones_like(grids[0])
    for axis in range(t - 1):
        weight = weight * np.meshgrid(*([w] * (t - 1)), indexing="ij")[axis]
    without, with_last = [], []
    for subset in itertools.combinations(range(t), k):
        exponent = (sum(grids[i] for i in subset if i < t - 1) - 0.5 * k) / s2 + np.zeros_like(grids[0])
        (with_last if t - 1 in subset else without).append(exponent)
    log_n = math.log(math.comb(t, k))
    log_a = special.logsumexp(np.stack(without), axis=0) - log_n if without else np.full_like(grids[0], -np.inf)
    log_b = special.logsumexp(np.stack(with_last), axis=0) - log_n
    return max(float(np.sum(weight * _inner(log_a, log_b, sigma, epsilon, d))) for d in ("remove", "add"))


def test_reference_oracle_closed_form() -> None:
    """The oracle itself: t = k = 2 is one Gaussian of sensitivity sqrt(2), both directions."""
    exact = float(gaussian.delta_for_epsilon(noise_multiplier=0.9 / math.sqrt(2.0), epsilon=1.2))
    assert _reference(0.9, 2, 2, 1.2) == pytest.approx(exact, abs=1e-9)


def test_one_step_is_the_gaussian_mechanism() -> None:
    """t = 1: balls-in-bins is deterministic batches; the upper bound is exact and the lower bound meets it."""
    eps = np.array([0.0, 0.5, 1.0, 3.0])
    exact = gaussian.delta_for_epsilon(noise_multiplier=0.8, epsilon=eps)
    upper = delta_allocation_upper(noise_multiplier=0.8, steps=1, epsilon=eps)
    lower = delta_allocation_lower(noise_multiplier=0.8, steps=1, epsilon=eps)
    np.testing.assert_allclose(upper.value, exact, rtol=1e-12)
    assert np.all(np.asarray(lower.value) <= exact)
    np.testing.assert_allclose(lower.value, exact, rtol=RTOL_GRID)
    assert upper.kind == "upper bound" and lower.kind == "lower bound" and upper.sampler == "balls_in_bins"


def test_all_steps_is_deterministic_with_k_participations() -> None:
    """k = t: every record is in every step, exactly the Gaussian curve with sigma / sqrt(k E)."""
    value = float(delta_allocation_upper(noise_multiplier=2.0, steps=3, participations=3, epochs=2, epsilon=1.0))
    assert value == pytest.approx(float(gaussian.delta_for_epsilon(noise_multiplier=2.0 / math.sqrt(6), epsilon=1.0)),
                                  rel=1e-12)


@pytest.mark.parametrize(("sigma", "t", "k", "epsilon"), [
    (0.7, 2, 1, 1.0), (1.0, 2, 1, 0.3), (0.6, 3, 1, 1.5), (0.8, 3, 2, 1.0),
])
def test_bounds_and_estimate_bracket_quadrature(sigma: float, t: int, k: int, epsilon: float) -> None:
    """lower <= quadrature <= upper (within 1 % for k = 1), and the estimate's 95 % interval covers it (fixed seed)."""
    reference = _reference(sigma, t, k, epsilon)
    assert reference > 1e-4
    lower = float(delta_allocation_lower(noise_multiplier=sigma, steps=t, participations=k, epsilon=epsilon))
    upper = float(delta_allocation_upper(noise_multiplier=sigma, steps=t, participations=k, epsilon=epsilon))
    assert lower <= reference + QUAD_SLACK
    assert reference <= upper + QUAD_SLACK
    if k == 1:  # balls-in-bins: the PLD of the pair's likelihood ratio makes both bounds tight (0.5 % target)
        assert upper <= reference * 1.01 + QUAD_SLACK and lower >= reference * 0.99 - QUAD_SLACK
    else:  # random allocation: only the deterministic curve is certified above
        assert upper > reference * 1.01
    estimate = delta_allocation_estimate(noise_multiplier=sigma, steps=t, participations=k, epsilon=epsilon,
                                         samples=20_000, interval="normal")
    assert estimate.kind == "estimate"
    assert estimate.lower <= reference <= estimate.upper
    assert abs(estimate.estimate - reference) < 0.05 * reference  # ... and the estimate is close


def test_estimate_covers_the_mass_of_other_coordinates() -> None:
    """Regression: at t = 1000 the mass where a non-record coordinate is extreme matters.

    Moving only the record's coordinate gave 6.6e-18 [6.3e-18, 6.8e-18] below the
    certified lower bound 7.5e-18 (sigma = 1, epsilon = 2).
    """
    lower = float(delta_allocation_lower(noise_multiplier=1.0, steps=1000, epsilon=2.0))
    estimate = delta_allocation_estimate(noise_multiplier=1.0, steps=1000, epsilon=2.0, samples=4000,
                                         interval="normal")
    assert lower == pytest.approx(7.52e-18, rel=1e-2)
    assert estimate.upper >= lower
    assert estimate.lower <= float(delta_allocation_upper(noise_multiplier=1.0, steps=1000, epsilon=2.0))


def test_threshold_lower_bound_far_tail_against_mpmath() -> None:
    """t = 1e6, sigma = 0.8, eps = 2: the threshold tests keep delta ~ 5e-34 (the PLD alone lumps it away).

    Oracle: P(M >= C) - e^eps Q(M >= C) in 50-digit mpmath on a 1e-3 grid of C around the
    optimum, which the continuous search must match or beat (relative 1e-6). The authors'
    code (BnBAccountant.get_deltas_lower_bound of Chua et al. 2025, as shipped in
    random-allocation 1.0.5, 0.01 grid) gives 4.862e-34 here.
    """
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    sigma, t, eps = mpmath.mpf("0.8"), 10**6, mpmath.mpf(2)

    def gap(c: float) -> object:
        c = mpmath.mpf(c)
        phi0 = mpmath.ncdf(c / sigma)
        p = 1 - mpmath.ncdf((c - 1) / sigma) * phi0 ** (t - 1)
        q = 1 - phi0**t
        return p - mpmath.exp(eps) * q

    best = max(gap(c) for c in np.arange(10.45, 10.6, 1e-3))
    ours = float(delta_allocation_lower(noise_multiplier=0.8, steps=t, epsilon=2.0))
    assert ours >= float(best) * (1 - 1e-6)
    assert ours <= float(best) * (1 + 1e-3)  # the grid optimum is within 1e-3 of the continuous one
    assert ours >= 4.862e-34
    back = float(delta_allocation_lower(noise_multiplier=0.8, steps=t,
                                        epsilon=float(epsilon_allocation_lower(noise_multiplier=0.8, steps=t,
                                                                               delta=1e-30))))
    assert back == pytest.approx(1e-30, rel=1e-6)


def test_several_epochs_lower_bound_keeps_small_deltas() -> None:
    """E = 3, t = 1e4: the threshold test on the maximum of all E t outputs keeps delta ~ 3.7e-17 (the PLD gave 0).

    E epochs can only leak more than one (dropping epochs is post-processing), and the
    test on the product is about E times the one-epoch test when it is rare.
    """
    one = float(delta_allocation_lower(noise_multiplier=0.8, steps=10_000, epochs=1, epsilon=2.0))
    three = float(delta_allocation_lower(noise_multiplier=0.8, steps=10_000, epochs=3, epsilon=2.0))
    assert 2.9 * one <= three <= float(delta_allocation_upper(noise_multiplier=0.8, steps=10_000, epochs=3,
                                                                epsilon=2.0))


def test_balls_in_bins_beats_shuffle_and_matches_poisson() -> None:
    """Chua et al. 2025 (arXiv:2412.16802, abstract): balls-in-bins amplifies like Poisson or better,
    while shuffling is provably far worse (its certified lower bound is far above).

    sigma = 0.5, t = 1000, epsilon = 2: the estimate's upper end is below the Poisson PLD's
    certified lower bound, which is far below the shuffle lower bound.
    """
    estimate = delta_allocation_estimate(noise_multiplier=0.5, steps=1000, epsilon=2.0, samples=4000,
                                         interval="normal")
    poisson = delta_poisson_bounds(noise_multiplier=0.5, steps=1000, epsilon=2.0)
    shuffle = float(delta_shuffle_lower(noise_multiplier=0.5, steps=1000, epsilon=2.0))
    lower = float(delta_allocation_lower(noise_multiplier=0.5, steps=1000, epsilon=2.0))
    assert lower <= estimate.upper < float(poisson.lower.value) < 1e-3 * shuffle


def test_epsilon_versions_invert_delta() -> None:
    """epsilon(delta) of each bound: lower <= upper, and delta at the lower epsilon is about delta."""
    delta = np.array([1e-3, 1e-6])
    lower = np.asarray(epsilon_allocation_lower(noise_multiplier=0.9, steps=50, epochs=2, delta=delta).value)
    upper = np.asarray(epsilon_allocation_upper(noise_multiplier=0.9, steps=50, epochs=2, delta=delta).value)
    assert np.all(lower <= upper) and np.all(lower > 0)
    back = np.asarray(delta_allocation_lower(noise_multiplier=0.9, steps=50, epochs=2, epsilon=lower).value)
    np.testing.assert_allclose(back, delta, rtol=2e-2)  # the bisection stops within the grid's resolution
    scalar = [float(epsilon_allocation_lower(noise_multiplier=0.9, steps=50, epochs=2, delta=d)) for d in delta]
    np.testing.assert_array_equal(lower, scalar)


def test_epsilon_estimate_within_certified_bounds() -> None:
    """The epsilon estimate's interval meets the certified interval (t = 10)."""
    r = epsilon_allocation_estimate(noise_multiplier=1.0, steps=10, delta=1e-4, samples=3000, interval="normal")
    lower = float(epsilon_allocation_lower(noise_multiplier=1.0, steps=10, delta=1e-4))
    upper = float(epsilon_allocation_upper(noise_multiplier=1.0, steps=10, delta=1e-4))
    assert r.kind == "estimate"
    assert r.lower <= r.estimate <= r.upper
    # The certified interval is 0.1 % wide (the PLD of the pair; a 0.01-lattice computation gives
    # 1.70444, inside it); the estimate's noise is ~1 %: its 95 % interval meets the certified one.
    assert lower <= upper <= lower * 1.005
    assert r.lower <= upper and lower <= r.upper
    assert r.upper >= lower


def test_several_epochs_estimate() -> None:
    """E = 3: plain-plus-joint sampling still brackets: lower bound <= upper end of the interval, estimate <= upper bound."""
    kwargs = {"noise_multiplier": 1.0, "steps": 4, "epochs": 3, "epsilon": 1.0}
    r = delta_allocation_estimate(**kwargs, samples=5000, interval="normal")  # type: ignore[arg-type]
    assert float(delta_allocation_lower(**kwargs)) <= r.upper  # type: ignore[arg-type]
    assert r.lower <= float(delta_allocation_upper(**kwargs))  # type: ignore[arg-type]


def test_rows() -> None:
    """allocation_rows: upper at (fewest steps, most epochs), lower at (most steps, complete epochs), opt-in estimate."""
    rows = allocation_rows(noise_multiplier=1.0, quantity="epsilon", at=1e-5, steps_per_epoch_upper=99,
                           steps_per_epoch_lower=100, epochs_upper=3, epochs_lower=2)
    assert [(name, v.kind) for name, v in rows] == [("balls_in_bins", "upper bound"), ("balls_in_bins", "lower bound")]
    assert float(rows[0][1]) == float(epsilon_allocation_upper(noise_multiplier=1.0, steps=99, epochs=3, delta=1e-5))
    assert float(rows[1][1]) == float(epsilon_allocation_lower(noise_multiplier=1.0, steps=100, epochs=2, delta=1e-5))
    assert "t=100" in rows[1][1].method and "E=2" in rows[1][1].method and "E=3" in rows[0][1].method
    none = allocation_rows(noise_multiplier=1.0, quantity="delta", at=1.0, steps_per_epoch_upper=10,
                           steps_per_epoch_lower=10, epochs_upper=1, epochs_lower=0, estimate=True, samples=500)
    assert float(none[1][1]) == 0.0 and none[1][1].method.startswith("none:")
    assert none[2][1].kind == "estimate" and not none[2][1].is_guarantee
    assert none[2][1].details["lower"] <= float(none[2][1]) <= none[2][1].details["upper"]
    k2 = allocation_rows(noise_multiplier=1.0, quantity="delta", at=1.0, steps_per_epoch_upper=10,
                         steps_per_epoch_lower=10, epochs_upper=1, epochs_lower=1, participations=2, estimate=True,
                         samples=500)
    assert k2[0][0] == "random_allocation" and float(k2[1][1]) <= float(k2[0][1])
    assert [v.kind for _, v in k2] == ["upper bound", "lower bound", "estimate"]
    # Balls-in-bins with a complete epoch: the certified interval is narrower than the estimate's noise.
    tight = allocation_rows(noise_multiplier=1.0, quantity="delta", at=1.0, steps_per_epoch_upper=10,
                            steps_per_epoch_lower=10, epochs_upper=1, epochs_lower=1, estimate=True, samples=500)
    assert [v.kind for _, v in tight] == ["upper bound", "lower bound"]
    assert float(tight[0][1]) <= 1.01 * float(tight[1][1])


@pytest.mark.parametrize(("call", "kwargs", "match"), [
    (delta_allocation_upper, {"noise_multiplier": -1.0, "steps": 2, "epsilon": 1.0}, r"^noise_multiplier must be"),
    (delta_allocation_upper, {"noise_multiplier": 1.0, "steps": 0, "epsilon": 1.0}, r"^steps must be an integer >= 1"),
    (delta_allocation_lower, {"noise_multiplier": 1.0, "steps": 2, "epochs": 0, "epsilon": 1.0},
     r"^epochs must be an integer >= 1"),
    (delta_allocation_lower, {"noise_multiplier": 1.0, "steps": 2, "participations": 3, "epsilon": 1.0},
     r"^participations must be an integer in \[1, steps=2\], got 3"),
    (epsilon_allocation_lower, {"noise_multiplier": 1.0, "steps": 2, "delta": 0.0}, r"^delta must be"),
    (delta_allocation_upper, {"noise_multiplier": 1.0, "steps": 2, "epsilon": -1.0}, r"^epsilon must be"),
    (delta_allocation_estimate, {"noise_multiplier": 1.0, "steps": 2, "epsilon": 1.0, "samples": 1},
     r"^samples must be an integer >= 2"),
    (delta_allocation_estimate, {"noise_multiplier": 1.0, "steps": 2, "epsilon": 1.0, "confidence": 1.5},
     r"^confidence must be in \(0, 1\)"),
    (delta_allocation_estimate, {"noise_multiplier": 1.0, "steps": 2, "epsilon": 1.0, "direction": "up"},
     r"^direction must be one of"),
    (epsilon_allocation_estimate, {"noise_multiplier": 1.0, "steps": 2, "delta": 1.0}, r"^delta must be in \(0, 1\)"),
    (allocation_rows, {"noise_multiplier": 1.0, "quantity": "rho", "at": 1.0, "steps_per_epoch_upper": 2,
                       "steps_per_epoch_lower": 2, "epochs_upper": 1, "epochs_lower": 1}, r"^quantity must be one of"),
    (allocation_rows, {"noise_multiplier": 1.0, "quantity": "delta", "at": 1.0, "steps_per_epoch_upper": 2,
                       "steps_per_epoch_lower": 2, "epochs_upper": 1, "epochs_lower": -1},
     r"^epochs_lower must be an integer >= 0"),
    (allocation_rows, {"noise_multiplier": 1.0, "quantity": "delta", "at": 1.0, "steps_per_epoch_upper": 0,
                       "steps_per_epoch_lower": 2, "epochs_upper": 1, "epochs_lower": 1},
     r"^steps_per_epoch_upper must be an integer >= 1"),
])
def test_bad_input(call, kwargs, match) -> None:  # type: ignore[no-untyped-def]
    """Bad input raises ValueError naming the parameter."""
    with pytest.raises(ValueError, match=match):
        call(**kwargs)


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=12, deadline=None)
@given(sigma=st.floats(0.5, 3.0), t=st.integers(1, 200), epochs=st.integers(1, 3), epsilon=st.floats(0.0, 3.0))
def test_monotone_and_ordered(sigma: float, t: int, epochs: int, epsilon: float) -> None:
    """lower <= upper; both non-increasing in sigma and non-decreasing in epochs."""
    def bounds(s: float, e: int) -> tuple[float, float]:
        kw = {"noise_multiplier": s, "steps": t, "epochs": e, "epsilon": epsilon}
        return float(delta_allocation_lower(**kw)), float(delta_allocation_upper(**kw))  # type: ignore[arg-type]

    lower, upper = bounds(sigma, epochs)
    assert lower <= upper * (1 + 1e-12)
    lower_more_noise, upper_more_noise = bounds(sigma * 1.3, epochs)
    assert upper_more_noise <= upper
    assert lower_more_noise <= lower + 1e-12  # the grid may differ: compare up to round-off
    lower_more_epochs, upper_more_epochs = bounds(sigma, epochs + 1)
    assert upper_more_epochs >= upper
    assert lower_more_epochs >= lower - 1e-12
