"""epsilon(delta) of the compositions that invert their own delta bounds (``invert_delta`` in
``cpp/include/dpacct/pld/compose.hpp``: the split composition and the one with at most one rare step).

The inversion searches by regula falsi on log(bound / delta) and keeps only points it evaluated, so
its two ends must be (a) certified against an exact reference, the two-step mpmath quadrature of
``tests/test_pld_reference.py`` (30 digits), and (b) where the composition's own delta bounds cross
delta, to the inversion's stated relative width (``kInversionWidth``, 1e-7): a bisection in Python
over the same ``delta_bounds`` finds those crossings independently.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpacct
from dpacct import _core

from tests.test_pld_reference import delta_two_steps

_LOG_TAIL = -80.0
_WIDTH = 1e-7  # kInversionWidth: the relative width at which the inversion stops


def _split_composed(sigma: float, q: float, direction: str, count: int, rare_max: int) -> object:
    small, rare = _core.pld.gaussian_step(
        sigma, q, direction, 1e-4, _LOG_TAIL, 2**24, split_ratio=10, split_tau=2
    )
    return _core.pld.SplitComposedPld(small, rare, count, rare_max, 3.0, 1.0, 2**20)


def _one_rare_composed(sigma: float, q: float, epsilon: float, d: float) -> object:
    band, rare = _core.pld.gaussian_step(
        sigma, q, "remove", d, _LOG_TAIL, 2**24, split_ratio=math.ceil(1.0 / d), split_tau=math.ceil(1.3 * epsilon / d),
        rare_growth=1e-3,
    )
    return _core.pld.OneRareComposedPld(band, rare, 2.0, 0.0, 2**20)


def _crossing(composed: object, delta: float, upper: bool, high: float) -> tuple[float, float]:
    """[a, b], 1e-12 wide relative, around where the upper (or lower) delta bound falls to delta."""
    pick = 1 if upper else 0

    def above(e: float) -> bool:
        return float(composed.delta_bounds(np.array([e]))[pick][0]) > delta  # type: ignore[attr-defined]

    low = 0.0
    while above(high):
        low, high = high, 2.0 * high
    for _ in range(200):
        if high - low <= 1e-12 * high:
            break
        mid = 0.5 * (low + high)
        if above(mid):
            low = mid
        else:
            high = mid
    return low, high


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize(("sigma", "q", "epsilon"), [(1.0, 0.1, 0.15), (0.7, 0.02, 0.03)])  # (below the add direction's largest loss, 2 log(1/(1-q)))
def test_split_inversion_brackets_the_two_step_quadrature(direction: str, sigma: float, q: float, epsilon: float) -> None:
    # delta is the exact two-step delta at `epsilon`, so epsilon(delta) = epsilon exactly.
    delta = float(delta_two_steps(epsilon, sigma, q, direction)[0])
    composed = _split_composed(sigma, q, direction, 2, 2)
    lower, upper, _ = composed.epsilon_bounds(delta)
    assert lower <= epsilon <= upper
    # Nothing charged (every rare step composed): the delta bounds are within 2 % (test_pld_split), and
    # the slope of log delta here is about 2-6, so epsilon's interval is well within 1 % of epsilon.
    assert upper - lower <= 0.01 * epsilon


@pytest.mark.parametrize(
    ("sigma", "q", "steps", "delta"),
    [
        (1.0, 1e-4, 10_000, 1e-9),
        (2.47, 8e-8, 1_599_932, 2.1e-14),  # a steep log delta (slope ~ 1e5): few hits, tiny epsilon
    ],
)
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_split_inversion_ends_where_its_own_bounds_cross_delta(
    sigma: float, q: float, steps: int, delta: float, direction: str
) -> None:
    acct = dpacct.PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    answer = acct.epsilon_bounds(delta)
    # The split composition the accountant builds for this query, at its default accuracy.
    composed = acct._split_composed(acct._groups(), direction, float(answer.upper), delta, refine=True,
                                    allowed=0.005 * float(answer.upper))
    lower, upper, _ = composed.epsilon_bounds(delta)
    assert 0.0 < lower <= upper < math.inf
    # Both certified for this direction: the direction's epsilon is at most the answer's upper bound.
    assert lower <= float(answer.upper)
    # The upper end is a point whose upper delta bound is at most delta (certified), within the
    # inversion's width of where that bound first falls to delta.
    assert float(composed.delta_bounds(np.array([upper]))[1][0]) <= delta
    a, b = _crossing(composed, delta, True, upper)
    assert a <= upper <= b * (1.0 + 1.01 * _WIDTH)
    # The lower end: a point whose lower bound (a threshold search near the best one found first)
    # exceeds delta; delta_bounds' full threshold search crosses delta no further than 0.1 % above it.
    a, b = _crossing(composed, delta, False, upper)
    assert lower <= b
    assert lower >= a * (1.0 - 1e-3), (lower, a)


# (The cases of test_pld_one_rare.py's two-step check, with its grids.)
@pytest.mark.parametrize(("sigma", "q", "epsilon", "d"), [(1.08, 3.67e-8, 3e-6, 1e-9), (0.6, 1e-6, 4e-3, 1e-6)])
def test_one_rare_inversion_brackets_the_two_step_quadrature(sigma: float, q: float, epsilon: float, d: float) -> None:
    delta = float(delta_two_steps(epsilon, sigma, q, "remove")[0])
    composed = _one_rare_composed(sigma, q, epsilon, d)
    lower, upper, _ = composed.epsilon_bounds(delta)
    assert lower <= epsilon <= upper
    assert upper - lower <= 0.01 * epsilon
    a, b = _crossing(composed, delta, True, upper)
    assert a <= upper <= b * (1.0 + 1.01 * _WIDTH)
