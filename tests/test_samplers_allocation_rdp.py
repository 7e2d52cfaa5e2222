"""Renyi DP of balls-in-bins batches (dpacct.samplers.allocation_rdp): references, properties, wiring.

References:
* remove direction: E[(Y_1 + ... + Y_t)^n] by expanding the power over all compositions of
  ``n`` (mpmath, 30 digits), an algorithm independent of the generating-function power;
* both directions at t = 2: two-dimensional mpmath quadrature, and the add direction at
  t = 100 .. 10000: the Laplace-transform integral by mpmath quadrature
  (``tests/reference/allocation_rdp_quadrature.py`` made the .json; see its notes).

Tolerances: the remove direction is exact up to its charged rounding (log-coefficients of
size ~ n log t are summed and then n log t is subtracted: 1e-9 relative plus 1e-10 absolute
in the divergence covers the charge); the add
direction's discretisation (cells of w of 0.05, of s of ratio 1.002) makes it at most 0.5 %
above the quadrature (measured 0.2-0.25 %), and it must never be below it (the quadrature's
own error is under 1e-10 relative).
"""

from __future__ import annotations

import itertools
import json
import math
import pathlib

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpacct import gaussian
from dpacct.samplers import epsilon_allocation_lower, epsilon_allocation_upper
from dpacct.samplers.allocation_rdp import (
    ORDERS,
    balls_in_bins_rdp,
    delta_balls_in_bins_rdp,
    epsilon_balls_in_bins_rdp,
)

REFERENCE = json.loads((pathlib.Path(__file__).parent / "reference" / "allocation_rdp_quadrature.json").read_text())
ADD_RTOL = 5e-3  # the add direction's discretisation (module notes; measured 0.2-0.25 %)
EXACT_RTOL = 1e-9  # the remove direction: exact up to charged rounding ...
EXACT_ATOL = 1e-10  # ... which is absolute in the log-moments (module notes)


def _remove_by_enumeration(sigma: float, t: int, n: int) -> float:
    """D_n(P||Q) from E[(sum Y)^n] = sum over compositions of n of multinomial * prod E[Y^k]."""
    mp.mp.dps = 30
    s2 = mp.mpf(sigma) ** 2
    total = mp.mpf(0)
    for ks in itertools.product(range(n + 1), repeat=t):
        if sum(ks) != n:
            continue
        term = mp.factorial(n)
        for k in ks:
            term *= mp.e ** (k * (k - 1) / (2 * s2)) / mp.factorial(k)
        total += term
    return float((mp.log(total) - n * mp.log(t)) / (n - 1))


@pytest.mark.parametrize(("sigma", "t"), [(0.6, 2), (1.0, 3), (2.5, 4), (0.9, 5)])
def test_remove_direction_equals_the_expanded_moments(sigma: float, t: int) -> None:
    orders = np.arange(2.0, 9.0)
    ours = balls_in_bins_rdp(noise_multiplier=sigma, steps=t, orders=orders, direction="remove")
    expected = np.array([_remove_by_enumeration(sigma, t, int(n)) for n in orders])
    gaussian_rdp = orders / (2 * sigma * sigma)
    expected = np.minimum(expected, gaussian_rdp)  # the cap (never binding here, by Jensen)
    assert np.all(ours >= expected * (1 - 1e-12))
    np.testing.assert_allclose(ours, expected, rtol=EXACT_RTOL, atol=EXACT_ATOL)


@pytest.mark.parametrize("t", [10, 1000, 10**6])
def test_remove_direction_order_two_closed_form(t: int) -> None:
    """E[Z^2] = 1 + (e^{1/sigma^2} - 1) / t (independent Y with E Y = 1, E Y^2 = e^{1/sigma^2})."""
    sigma = 1.3
    ours = balls_in_bins_rdp(noise_multiplier=sigma, steps=t, orders=[2.0], direction="remove")[0]
    exact = math.log1p(math.expm1(1 / sigma**2) / t)
    assert exact <= ours <= exact * (1 + EXACT_RTOL) + EXACT_ATOL


@pytest.mark.parametrize("row", REFERENCE["rows"], ids=lambda r: f"{r['kind']}-s{r['sigma']}-t{r['steps']}-"
                                                                  f"a{r['order']}-{r['direction']}")
def test_against_quadrature(row: dict[str, object]) -> None:
    ours = balls_in_bins_rdp(noise_multiplier=row["sigma"], steps=row["steps"], orders=[float(row["order"])],
                             direction=row["direction"])[0]
    reference = float(row["rdp"])  # type: ignore[arg-type]
    assert ours >= reference  # certified: never below
    if row["direction"] == "remove":
        assert ours <= reference * (1 + EXACT_RTOL) + EXACT_ATOL
    else:
        assert ours <= reference * (1 + ADD_RTOL)


def test_one_step_is_the_gaussian_mechanism() -> None:
    orders = np.array([1.5, 2.0, 10.0, 512.0])
    for direction in ("remove", "add", "both"):
        np.testing.assert_allclose(balls_in_bins_rdp(noise_multiplier=0.7, steps=1, orders=orders,
                                                     direction=direction), orders / (2 * 0.7 * 0.7), rtol=1e-15)


def test_fractional_orders_are_the_chord_above_the_integers() -> None:
    """log E Z^alpha is convex: the value at 2.5 lies between D_2 and the chord's, and is certified above both ends' interpolation."""
    r = balls_in_bins_rdp(noise_multiplier=1.0, steps=50, orders=[2.0, 2.5, 3.0], direction="remove")
    chord = (0.5 * (1.0 * r[0]) + 0.5 * (2.0 * r[2])) / 1.5  # (alpha-1) D is interpolated
    assert r[1] == pytest.approx(chord, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(sigma=st.floats(0.3, 20.0), t=st.integers(2, 10**6), epochs=st.integers(1, 50))
def test_properties(sigma: float, t: int, epochs: int) -> None:
    """Below the Gaussian cap; more steps per epoch never hurt (the mean of more i.i.d. terms
    is smaller in convex order); the certified epsilon is above the certified lower bound."""
    orders = np.array([2.0, 4.0, 16.0, 64.0])
    for direction in ("remove", "add"):
        one = balls_in_bins_rdp(noise_multiplier=sigma, steps=t, orders=orders, direction=direction)
        more = balls_in_bins_rdp(noise_multiplier=sigma, steps=4 * t, orders=orders, direction=direction)
        assert np.all(one <= orders / (2 * sigma * sigma))
        assert np.all(more <= one * (1 + 2 * ADD_RTOL) + 1e-12)
    upper = float(epsilon_allocation_upper(noise_multiplier=sigma, steps=t, epochs=epochs, delta=1e-6))
    if t <= 10**4:  # the lower bound's per-epoch PLD is costly beyond
        lower = float(epsilon_allocation_lower(noise_multiplier=sigma, steps=t, epochs=epochs, delta=1e-6))
        assert lower <= upper
    gaussian_eps = float(gaussian.epsilon_for_delta(noise_multiplier=sigma / math.sqrt(epochs), delta=1e-6))
    assert upper <= gaussian_eps


def test_epsilon_and_delta_are_consistent_and_wired() -> None:
    """The RDP epsilon and delta agree; the allocation upper bound is never above them, and uses them where the PLD is wide."""
    eps = epsilon_balls_in_bins_rdp(noise_multiplier=1.0, steps=1000, epochs=3, delta=[1e-5, 1e-8])
    delta = delta_balls_in_bins_rdp(noise_multiplier=1.0, steps=1000, epochs=3, epsilon=eps)
    assert np.all(delta <= np.array([1e-5, 1e-8]) * (1 + 1e-9))
    bound = epsilon_allocation_upper(noise_multiplier=1.0, steps=1000, epochs=3, delta=[1e-5, 1e-8])
    assert np.all(np.asarray(bound.value) <= eps)
    assert "PLD" in bound.method and bound.kind == "upper bound"
    # 4.4 -> 0.68 (Renyi DP) -> 0.139 (PLD) at one epoch, above the lower bound.
    one = float(epsilon_allocation_upper(noise_multiplier=1.0, steps=1000, delta=1e-5))
    assert 0.1385 < one < 0.14
    # At a delta where the PLD's interval is wide (its round-off floor), Renyi DP is consulted.
    tiny = epsilon_allocation_upper(noise_multiplier=1.0, steps=1000, epochs=3, delta=1e-14)
    assert "Renyi DP" in tiny.method
    assert float(tiny) <= float(epsilon_balls_in_bins_rdp(noise_multiplier=1.0, steps=1000, epochs=3, delta=1e-14)[0])
    # Where the Gaussian curve is smaller (tiny t, many epochs, small sigma), it is kept.
    small = epsilon_allocation_upper(noise_multiplier=0.3, steps=2, epochs=1, delta=1e-5)
    assert float(small) <= float(gaussian.epsilon_for_delta(noise_multiplier=0.3, delta=1e-5))


def test_random_allocation_keeps_the_deterministic_bound() -> None:
    """k > 1: the pair is only known to be attained, so no RDP bound is claimed."""
    bound = epsilon_allocation_upper(noise_multiplier=1.0, steps=100, participations=2, delta=1e-5)
    assert "Renyi" not in bound.method
    assert float(bound) == float(gaussian.epsilon_for_delta(noise_multiplier=1.0 / math.sqrt(2), delta=1e-5))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"noise_multiplier": 0.0, "steps": 10}, r"^noise_multiplier must be"),
    ({"noise_multiplier": float("nan"), "steps": 10}, r"^noise_multiplier must be"),
    ({"noise_multiplier": 1.0, "steps": 0}, r"^steps must be an integer >= 1"),
    ({"noise_multiplier": 1.0, "steps": 10, "orders": [1.0]}, r"^orders must"),
    ({"noise_multiplier": 1.0, "steps": 10, "orders": [600.0]}, r"^orders must be in \(1, 512\]"),
    ({"noise_multiplier": 1.0, "steps": 10, "direction": "both ways"}, r"^direction must be one of"),
])
def test_bad_input(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        balls_in_bins_rdp(**kwargs)  # type: ignore[arg-type]


def test_default_orders() -> None:
    assert ORDERS.max() == 512.0 and ORDERS.min() > 1.0 and not ORDERS.flags.writeable
