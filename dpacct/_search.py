"""Safeguarded one-dimensional searches shared by calibration and the accountants' guides.

Each search keeps a bracket ``[unsafe, safe]`` around the solution of ``f(x) = target``
for a monotone ``f`` (epsilon as a function of the noise multiplier) and returns its
safe end, so the answer always meets the target.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["SIGMA_RANGE", "BudgetUnreachableError", "root_in_log", "smallest_safe", "smallest_safe_below"]


class BudgetUnreachableError(ValueError):
    """No value in the search range meets the budget (the budget, not the numerics, is the problem)."""

#: Noise multipliers searched by calibration.
SIGMA_RANGE = (1e-4, 1e6)


def smallest_safe_below(
    f: Callable[[float], float], target: float, safe: float, tol: float
) -> tuple[float, float]:
    """Smallest x <= safe with f(x) <= target for a decreasing f, given that f(safe) <= target."""
    f_safe = f(safe)
    if f_safe > target:  # the guide was not an upper bound after all: search from scratch
        return smallest_safe(f, target, SIGMA_RANGE, tol, "noise_multiplier")
    factor = 0.98
    while True:
        x = safe * factor
        if x < SIGMA_RANGE[0]:
            return safe, f_safe
        fx = f(x)
        if fx > target:
            return root_in_log(f, target, x, safe, fx, f_safe, tol)
        safe, f_safe = x, fx
        factor = factor**2


def _log_gap(value: float, target: float) -> float:
    """log(value / target), +inf for an infinite epsilon."""
    if value == 0.0:
        return -math.inf
    return math.log(value) - math.log(target)


def root_in_log(
    f: Callable[[float], float], target: float, unsafe: float, safe: float, f_unsafe: float, f_safe: float, tol: float
) -> tuple[float, float]:
    """Shrink the bracket between ``unsafe`` (f > target) and ``safe`` (f <= target).

    Works on log x with the Illinois variant of regula falsi, falling back to
    bisection when a value is infinite and clamping each probe to the inner 90%
    of the bracket, so the bracket shrinks on every step. Returns the safe end
    and its value.
    """
    u_unsafe, u_safe = math.log(unsafe), math.log(safe)
    h_unsafe, h_safe = _log_gap(f_unsafe, target), _log_gap(f_safe, target)
    side = 0
    while abs(u_safe - u_unsafe) > math.log1p(tol):
        low, high = min(u_unsafe, u_safe), max(u_unsafe, u_safe)
        margin = 0.05 * (high - low)
        if math.isfinite(h_unsafe) and math.isfinite(h_safe) and h_unsafe != h_safe:
            u = u_safe - h_safe * (u_safe - u_unsafe) / (h_safe - h_unsafe)
            u = min(max(u, low + margin), high - margin)
        else:
            u = 0.5 * (u_unsafe + u_safe)
        x = math.exp(u)
        fx = f(x)
        h = _log_gap(fx, target)
        if h <= 0.0:
            u_safe, h_safe, safe, f_safe = u, h, x, fx
            if side == -1:
                h_unsafe /= 2.0  # Illinois: stop the unsafe end from sticking
            side = -1
        else:
            u_unsafe, h_unsafe = u, h
            if side == 1:
                h_safe /= 2.0
            side = 1
    return safe, f_safe


def smallest_safe(
    f: Callable[[float], float], target: float, bounds: tuple[float, float], tol: float, name: str
) -> tuple[float, float]:
    """Smallest x in ``bounds`` with f(x) <= target for a decreasing f (up to ``tol``)."""
    x, fx = 1.0, f(1.0)
    if fx <= target:
        safe, f_safe = x, fx
        while True:
            x /= 4.0
            if x < bounds[0]:
                return safe, f_safe  # every noise level down to the bound meets the budget
            fx = f(x)
            if fx > target:
                return root_in_log(f, target, x, safe, fx, f_safe, tol)
            safe, f_safe = x, fx
    unsafe, f_unsafe = x, fx
    while True:
        x *= 4.0
        if x > bounds[1]:
            msg = f"no {name} up to {bounds[1]:g} meets epsilon <= {target:g}"
            raise BudgetUnreachableError(msg)
        fx = f(x)
        if fx <= target:
            return root_in_log(f, target, unsafe, x, f_unsafe, fx, tol)
        unsafe, f_unsafe = x, fx
