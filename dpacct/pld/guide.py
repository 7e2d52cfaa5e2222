"""Calibration guide for the PLD accountant: an RDP solution, then secant steps of PLD queries.

Kept apart from the PLD engine: :func:`dpacct.calibrate` asks for it through the
accountant protocol (:func:`dpacct.accountant.accountant_guide`) and works without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpacct._search import SIGMA_RANGE
from dpacct.accountant import NoiseGuide

__all__ = ["SecantResult", "noise_multiplier_guide", "pld_secant"]


def noise_multiplier_guide(*, sampling_probability: float, steps: int, delta: float, epsilon: float) -> NoiseGuide:
    """Bracket the PLD noise multiplier meeting ``epsilon`` for ``steps`` Poisson-sampled Gaussian steps.

    The RDP solution on integer orders (an RDP upper bound, usually above the PLD
    epsilon) is the first point; secant steps on ``log epsilon`` against ``log sigma``
    (:func:`pld_secant`), each a PLD query with the default options (the function
    calibration searches), then close a bracket ``[unsafe, safe]`` of relative width
    ``PLD_MIN_RTOL``. Both ends come with their epsilons, so calibration does not
    evaluate them again; where the secant does not close the bracket, calibration's own
    search goes on from what it proved.
    """
    from dpacct.rdp import integer_order_guide

    start = integer_order_guide(sampling_probability=sampling_probability, steps=steps, delta=delta,
                                epsilon=epsilon, windowed=False).safe
    found = pld_secant(sampling_probability, steps, delta, epsilon, start)
    if found.safe is None:
        return NoiseGuide(safe=start, fallback=start, min_rtol=PLD_MIN_RTOL, evaluations=found.evaluations)
    return NoiseGuide(safe=found.safe[0], safe_epsilon=found.safe[1],
                      unsafe=None if found.unsafe is None else found.unsafe[0],
                      unsafe_epsilon=None if found.unsafe is None else found.unsafe[1],
                      fallback=start, min_rtol=PLD_MIN_RTOL, evaluations=found.evaluations)


# The bracket is not narrowed below this relative width: the default grid's own error
# (about 0.5% of epsilon) dominates there, and every probe is a full PLD evaluation.
PLD_MIN_RTOL = 1e-3
_SECANT_STEPS = 8  # PLD queries the secant may spend (4-5 on the calibration cases of bench/)
_RDP_SLOPE_STEP = 0.97  # the first secant step takes its slope from RDP between sigma and 0.97 sigma


@dataclass(frozen=True)
class SecantResult:
    """What :func:`pld_secant` proved: ``(sigma, epsilon)`` ends (or None) and the queries spent."""

    safe: tuple[float, float] | None
    unsafe: tuple[float, float] | None
    evaluations: int


def pld_secant(q: float, t: int, delta: float, target: float, start: float) -> SecantResult:
    """Find ``safe`` (PLD epsilon <= target) and ``unsafe`` (> target) within ``PLD_MIN_RTOL``.

    The function is the default PLD accountant's certified upper bound on epsilon, the one
    calibration checks, so every end is proven by its own query. The first step uses the
    RDP curve's slope in log-log at ``start``; later steps the secant through the last two
    PLD points (epsilon behaves like a power of sigma locally). Once the predicted root is
    known to within a fraction of the tolerance, probes straddle it: just above (to prove
    safe) and just below (to prove unsafe). On the calibration cases of ``bench/`` this
    takes 4-5 queries where coarse probes and a regula falsi took 11 (RESULTS.md).
    """
    from dpacct.pld import PLDAccountant
    from dpacct.rdp import DEFAULT_ORDERS
    from dpacct.rdp.accountant import _epsilon_on

    evaluations = 0

    def upper(sigma: float) -> float:
        nonlocal evaluations
        evaluations += 1
        acct = PLDAccountant().step(noise_multiplier=sigma, sampling_probability=q, count=t)
        return float(acct.epsilon_bounds(delta).upper)

    tol = PLD_MIN_RTOL
    safe: tuple[float, float] | None = None
    unsafe: tuple[float, float] | None = None
    points: list[tuple[float, float]] = []  # (log sigma, log epsilon)

    def record(sigma: float, value: float) -> None:
        nonlocal safe, unsafe
        if value <= target:
            if safe is None or sigma < safe[0]:
                safe = (sigma, value)
        elif unsafe is None or sigma > unsafe[0]:
            unsafe = (sigma, value)
        if 0.0 < value < math.inf:
            points.append((math.log(sigma), math.log(value)))

    integer_orders = DEFAULT_ORDERS[DEFAULT_ORDERS == np.floor(DEFAULT_ORDERS)]
    rdp_here = _epsilon_on(integer_orders, start, q, t, delta)[0]
    rdp_below = _epsilon_on(integer_orders, start * _RDP_SLOPE_STEP, q, t, delta)[0]
    slope = -math.log(rdp_below / rdp_here) / math.log(1.0 / _RDP_SLOPE_STEP)
    if not (math.isfinite(slope) and slope < 0.0):
        return SecantResult(None, None, evaluations)
    x = start
    for _ in range(_SECANT_STEPS):
        if not SIGMA_RANGE[0] <= x <= SIGMA_RANGE[1]:
            break
        record(x, upper(x))
        if safe is not None and unsafe is not None and safe[0] <= unsafe[0] * (1.0 + tol):
            break
        if len(points) >= 2 and points[-1][0] != points[-2][0]:
            local = (points[-1][1] - points[-2][1]) / (points[-1][0] - points[-2][0])
            if local < 0.0:
                slope = local
        if not points:
            break
        u, v = points[-1]
        root = math.exp(u + (math.log(target) - v) / slope)
        if safe is not None and unsafe is not None:
            low, high = unsafe[0], safe[0]
            root = min(max(root, low * (high / low) ** 0.05), high * (low / high) ** 0.05)
            if root <= low * (1.0 + tol):
                x = low * (1.0 + 0.999 * tol)  # a safe probe closes the bracket
            elif root >= high / (1.0 + tol):
                x = high / (1.0 + 0.999 * tol)  # an unsafe probe closes it
            else:
                x = root * (1.0 + 0.45 * tol)  # aim just on the safe side of the predicted root
        elif safe is not None:
            x = min(root * (1.0 - 0.45 * tol), safe[0] / (1.0 + 0.999 * tol))
        else:
            assert unsafe is not None
            x = max(root * (1.0 + 0.45 * tol), unsafe[0] * (1.0 + 0.999 * tol))
    return SecantResult(safe, unsafe, evaluations)
