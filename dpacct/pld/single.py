r"""One Poisson-subsampled Gaussian step, exactly: certified delta(epsilon) and epsilon(delta).

For one step the privacy loss is monotone in the output ``w``, so the optimal test is a
threshold on ``w`` and the hockey-stick divergence has a closed form (Balle and Wang 2018,
arXiv:1805.06530, Thm. 8, for the Gaussian; subsampled in both directions as in Zhu,
Dong, Wang 2022, arXiv:2106.08567, Sec. 5). With noise ``s`` (sensitivity 1), rate ``q``
and ``D(a, b) = P(a < Z <= b)`` for a standard normal ``Z``:

* remove (``P = (1 - q) N(0, s^2) + q N(1, s^2)``, ``Q = N(0, s^2)``), test ``{w >= C}``:
  ``P - e^eps Q = q D((C - 1)/s, C/s) - expm1(eps) Phi(-C/s)``, optimal at
  ``C* = s^2 log1p(expm1(eps) / q) + 1/2``;
* add (``P`` and ``Q`` swapped), test ``{w <= C}``:
  ``P - e^eps Q = e^eps ((q + expm1(-eps)) Phi(C/s) - q Phi((C - 1)/s))``, optimal at
  ``C* = s^2 log((q + expm1(-eps)) / q) + 1/2`` while ``q + expm1(-eps) > 0`` (beyond, the
  loss never reaches eps and delta is 0).

Any ``C`` gives a lower bound. For the upper bound ``C*`` is bracketed by ``[C - h, C + h]``,
certified by evaluating the loss at both ends (with its rounding), and ``delta`` is the value
at ``C - h`` plus the integral of ``|p - e^eps q|`` over ``[C - h, C*]``, at most ``e^eps Q``
(remove; ``P`` for add) of the bracket times ``|eps - L(C - h)|``. Each normal
probability is taken from ``erf``/``erfc`` (accurate to a few ulps in both tails) and
charged ``32 u`` of its size plus the effect of rounding its argument (``2 u x^2`` relative
in a tail at ``x``), so both bounds hold after the rounding. The PLD accountant answers
one-step Gaussian queries here instead of on a grid: at tiny q and epsilon a grid cannot
resolve the loss (sigma=1.01, q=3e-5, delta=9.46e-6 was [6.9e-6, 8.9e-6] on the grid).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import erf, erfc

from dpacct import _check

__all__ = ["gaussian_step_delta_bounds", "gaussian_step_epsilon_bounds"]

_U = 2.220446049250313e-16
# Absolute error allowed for every normal probability besides the relative one: below ~1e-300
# erfc's results are subnormal or 0 and carry no relative accuracy.
_FLOOR = 1e-300
_SQRT_HALF = math.sqrt(0.5)


def _tail(x: float) -> tuple[float, float]:
    """P(Z > x), and a bound on its error: erfc's few ulps, and the rounding of x itself
    (|dx| <= 2 u |x| moves log P(Z > x) by about |x| |dx|, the tail being Gaussian)."""
    value = 0.5 * float(erfc(x * _SQRT_HALF))
    return value, value * (32.0 + 8.0 * x * x) * _U + _FLOOR


def _between(a: float, b: float) -> tuple[float, float]:
    """P(a < Z <= b) for a <= b, and a bound on its error."""
    if a >= 0.0 or b <= 0.0:
        (ta, ea), (tb, eb) = (_tail(a), _tail(b)) if a >= 0.0 else (_tail(-b), _tail(-a))
        return abs(ta - tb), ea + eb + 4.0 * _U * (ta + tb)
    value = 0.5 * (float(erf(b * _SQRT_HALF)) + float(erf(-a * _SQRT_HALF)))
    return value, 32.0 * _U * value + 2.0 * _U * (abs(a) + abs(b)) + _FLOOR  # density <= 0.4, |dx| <= 2 u |x|


def _remove(s: float, q: float, eps: float, c: float) -> tuple[float, float]:
    """P(w >= c) - e^eps Q(w >= c) for the remove pair, and its rounding bound."""
    d, d_err = _between((c - 1.0) / s, c / s)
    tail, tail_err = _tail(c / s)
    grow = math.expm1(eps)
    value = q * d - grow * tail
    return value, q * d_err + grow * tail_err + 8.0 * _U * (q * d + grow * tail)


def _add(s: float, q: float, eps: float, c: float, room: float, room_err: float) -> tuple[float, float]:
    """P(w <= c) - e^eps Q(w <= c) for the add pair, and its rounding bound.

    P(w <= c) - e^eps ((1 - q) Phi(c/s) + q Phi((c - 1)/s)) = e^eps (room Phi(c/s) - q Phi((c - 1)/s))
    with room = q + expm1(-eps) = e^-eps - (1 - q): no e^eps-sized terms cancel (at q = 1 and large
    eps the form q e^eps D - expm1(eps) Phi(c/s) lost everything to them)."""
    head, head_err = _tail(-c / s)
    lead, lead_err = _tail(-(c - 1.0) / s)
    grow = math.exp(eps)
    value = grow * (room * head - q * lead)
    err = grow * (room * head_err + room_err * head + q * lead_err + 8.0 * _U * (room * head + q * lead))
    return value, err


def _loss(s: float, q: float, w: float, direction: str) -> tuple[float, float]:
    """The privacy loss at output w (increasing in w for remove, decreasing for add), and a
    bound on its rounding: a few ulps of log1p/expm1, and the rounding of the exponent
    (2w - 1) / (2 s^2) times the loss's derivative in it, q e^x / (1 - q + q e^x) <= 1."""
    x = (2.0 * w - 1.0) / (2.0 * s * s)
    with np.errstate(over="ignore"):
        grown = float(np.expm1(x))
    if not math.isfinite(grown):
        return (math.inf if direction == "remove" else -math.inf), 0.0
    loss = math.log1p(q * grown)
    slope = min(q * (grown + 1.0) / max(1.0 + q * grown, 1e-300), 1.0)
    err = 16.0 * _U * abs(loss) + 4.0 * _U * (abs(2.0 * w) + 1.0) / (2.0 * s * s) * slope + 1e-300
    return (loss if direction == "remove" else -loss), err


def _bracket(s: float, q: float, eps: float, c: float, direction: str) -> float | None:
    """h with the optimal threshold certainly in [c - h, c + h] (the losses there, less
    their rounding, straddle eps), or None."""
    h = 64.0 * _U * (abs(c) + 1.0)
    sign = 1.0 if direction == "remove" else -1.0
    for _ in range(120):
        below, below_err = _loss(s, q, c - h, direction)
        above, above_err = _loss(s, q, c + h, direction)
        if sign * below + below_err < sign * eps and sign * above - above_err > sign * eps:
            return h
        h *= 4.0
    return None


def _direction_bounds(s: float, q: float, eps: float, direction: str) -> tuple[float, float]:
    if direction == "remove":
        c = s * s * math.log1p(math.expm1(eps) / q) + 0.5
        evaluate = _remove
    else:
        # q + expm1(-eps) = e^-eps - (1 - q), formed where it cancels least.
        if q > 0.5:
            room, room_err = (q - 1.0) + math.exp(-eps), 4.0 * _U * (1.0 - q + math.exp(-eps))
        else:
            room, room_err = q + math.expm1(-eps), 4.0 * _U * (q - math.expm1(-eps))
        if room <= 8.0 * _U * q:
            # At or past the add loss's supremum -log(1 - q): certified by the loss itself.
            if q < 1.0 and -math.log1p(-q) * (1.0 + 8.0 * _U) < eps:
                return 0.0, 0.0
            return 0.0, q  # (the boundary: delta <= TV <= q)
        c = s * s * (math.log(room) - math.log(q)) + 0.5

        def evaluate(s: float, q: float, eps: float, c: float) -> tuple[float, float]:
            return _add(s, q, eps, c, room, room_err)
    value, err = evaluate(s, q, eps, c)
    lower = max(value - err, 0.0)
    h = _bracket(s, q, eps, c, direction)
    if h is None:
        return lower, 1.0
    low_value, low_err = evaluate(s, q, eps, c - h)
    bracket, bracket_err = _between((c - h) / s, (c + h) / s)
    # delta = f(C*) = f(c - h) + the integral over [c - h, C*] of (remove) e^eps q - p = e^eps q (1 - e^{L - eps})
    # <= e^eps q (eps - L(c - h)), L increasing; (add) p - e^eps q = p (1 - e^{eps - L}) <= p (L(c - h) - eps),
    # L decreasing: the bracket's Q (remove) or P (add) mass times that loss gap.
    loss_low, loss_err = _loss(s, q, c - h, direction)
    gap_low = (eps - loss_low if direction == "remove" else loss_low - eps) + loss_err
    factor = min(max(gap_low, 0.0) * (1.0 + 8.0 * _U), 1.0)
    weight = math.exp(eps) if direction == "remove" else 1.0
    upper = low_value + low_err + weight * (bracket + bracket_err) * factor * (1.0 + 4.0 * _U)
    if direction == "add" and q < 1.0:
        # Near the add loss's supremum L* = -log(1 - q): delta <= P(w <= C*) (1 - e^{eps - L*})
        # <= P(w <= c + h) (L* - eps), which the bracket's mass would swamp.
        gap = max(-math.log1p(-q) * (1.0 + 8.0 * _U) - eps * (1.0 - 8.0 * _U), 0.0)
        head, head_err = _tail(-(c + h) / s)
        upper = min(upper, (head + head_err) * gap * (1.0 + 8.0 * _U))
    return lower, min(max(upper, lower), 1.0)


def _checked(sigma: float, q: float) -> tuple[float, float]:
    s = _check.noise_multiplier(sigma)
    rate = _check.probability("sampling_probability", q)
    if rate == 0.0:
        msg = "sampling_probability must be in (0, 1], got 0.0 (a step that never samples the record has delta 0)"
        raise ValueError(msg)
    return s, rate


def gaussian_step_delta_bounds(sigma: float, q: float, epsilon: float) -> tuple[float, float]:
    """Certified (lower, upper) on delta(epsilon) of one Poisson-subsampled Gaussian step, both directions.

    ``sigma`` is the noise multiplier (finite, ``> 0``), ``q`` the sampling probability in
    ``(0, 1]``, ``epsilon`` finite and ``>= 0``; anything else raises ``ValueError``.
    ``(0, 1)`` (trivial, still valid) where the closed form leaves the double range (epsilon > 700).
    """
    s, rate = _checked(sigma, q)
    return _delta_bounds(s, rate, _check.epsilon(epsilon))


def _delta_bounds(sigma: float, q: float, epsilon: float) -> tuple[float, float]:
    if not epsilon <= 700.0:
        return 0.0, 1.0
    lows, ups = zip(*(_direction_bounds(sigma, q, epsilon, r) for r in ("remove", "add")))
    lower, upper = max(lows), max(ups)
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return 0.0, 1.0
    return lower, upper


def gaussian_step_epsilon_bounds(sigma: float, q: float, delta: float) -> tuple[float, float]:
    """Certified (lower, upper) on epsilon(delta) of one Poisson-subsampled Gaussian step.

    The upper end is an epsilon whose certified delta upper bound is at most ``delta``; the
    lower end one whose certified delta lower bound exceeds it (bisection to 1e-12 relative).
    ``(0, inf)`` where epsilon exceeds 700 (the closed form leaves the double range there).
    ``sigma`` and ``q`` as in :func:`gaussian_step_delta_bounds`, ``delta`` in ``(0, 1)``.
    """
    sigma, q = _checked(sigma, q)
    delta = _check.delta(delta)

    def upper_ok(e: float) -> bool:
        return _delta_bounds(sigma, q, e)[1] <= delta

    def lower_above(e: float) -> bool:
        return _delta_bounds(sigma, q, e)[0] > delta

    if upper_ok(0.0):
        return 0.0, 0.0
    high = 1e-12
    while not upper_ok(high):
        high *= 2.0
        if high > 1e3:  # beyond 700 every delta bound is the trivial one
            return 0.0, math.inf
    upper = _crossing(upper_ok, high / 2.0 if high > 1e-12 else 0.0, high)[1]
    if not lower_above(0.0):
        return 0.0, upper
    return _crossing(lambda e: not lower_above(e), 0.0, upper)[0], upper


def _crossing(holds: Callable[[float], bool], low: float, high: float) -> tuple[float, float]:
    """Bisect ``[low, high]`` (``holds`` false at low, true at high) to 1e-12 relative; returns the bracket."""
    for _ in range(200):
        if high - low <= 1e-12 * high:
            break
        mid = 0.5 * (low + high)
        if holds(mid):
            high = mid
        else:
            low = mid
    return low, high
