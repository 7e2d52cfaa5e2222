"""Calibration for DP-SGD-JL: the noise for a budget given r, and the fewest projections given the noise.

Both search over certified epsilons of :class:`~dpacct.fdp.FDPAccountant`
(upper bounds), so the returned value always meets the budget. Epsilon falls as
sigma grows and, for both projection models, as ``r`` grows (towards plain
DP-SGD): the searches bracket and then bisect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from dpacct import _check
from dpacct.fdp.accountant import FDPAccountant
from dpacct.fdp.jl import PROJECTIONS, DPSGDJLMechanism

__all__ = ["JLCalibration", "jl_dim_for_budget", "noise_multiplier_for_budget"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JLCalibration:
    """A calibrated DP-SGD-JL run: its parameters and the certified epsilon it achieves at ``delta``."""

    noise_multiplier: float
    jl_dim: int
    epsilon: float
    delta: float
    projections: str
    evaluations: int


def _epsilon(sigma: float, q: float, steps: int, r: int | None, projections: str, delta: float,
             quantiles: int, above: float = math.inf) -> float:
    """The certified upper bound on epsilon, or (with ``above``) a lower bound once it exceeds ``above``.

    The heavy tails of ``r <= 2`` make the upper bound slow (losses near 1e12 on a
    coarse grid); the paper's pair's lower bound (fast) settles ``epsilon > above``
    first where it can.
    """
    if r is not None and r <= 2 and math.isfinite(above):
        lower = _epsilon(sigma, q, steps, r, "per_example_lower", delta, quantiles)
        if lower > above:
            return lower
    acct = FDPAccountant(quantiles=quantiles, copies=1)
    if r is None:
        acct.step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    else:
        model: Literal["shared", "per_example"] = "shared" if projections == "shared" else "per_example"
        acct.compose(DPSGDJLMechanism(noise_multiplier=sigma, sampling_probability=q, jl_dim=r,
                                      projections=model), steps)
        if projections == "per_example_lower":  # a realised pair: its lower bound holds for both models
            return float(acct.epsilon_bounds(delta).lower)
    return float(acct.get_epsilon(delta))


def noise_multiplier_for_budget(
    *, epsilon: float, delta: float, sampling_probability: float, steps: int, jl_dim: int,
    projections: str = "shared", relative_tolerance: float = 1e-3, quantiles: int = 128,
) -> JLCalibration:
    """The smallest sigma (to ``relative_tolerance``, rounded up) whose certified epsilon(delta) <= ``epsilon``.

    Examples
    --------
    >>> res = noise_multiplier_for_budget(epsilon=3.0, delta=1e-5, sampling_probability=0.01, steps=100,
    ...                                   jl_dim=30, relative_tolerance=0.05, quantiles=32)
    >>> res.epsilon <= 3.0
    True
    """
    target = _check.positive("epsilon", epsilon)
    d = _check.delta(delta)
    q = _check.probability("sampling_probability", sampling_probability)
    t = _check.count("steps", steps)
    _check.one_of("projections", projections, PROJECTIONS)
    tol = _check.positive("relative_tolerance", relative_tolerance)
    evaluations = 0
    lo, hi = 0.0, 1.0
    while True:
        evaluations += 1
        eps_hi = _epsilon(hi, q, t, jl_dim, projections, d, quantiles)
        if eps_hi <= target:
            break
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:
            msg = "no noise multiplier up to 1e4 meets the budget"
            raise ValueError(msg)
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        evaluations += 1
        e = _epsilon(mid, q, t, jl_dim, projections, d, quantiles)
        if e <= target:
            hi, eps_hi = mid, e
        else:
            lo = mid
    return JLCalibration(noise_multiplier=hi, jl_dim=jl_dim, epsilon=eps_hi, delta=d, projections=projections,
                         evaluations=evaluations)


def jl_dim_for_budget(
    *, epsilon: float, delta: float, noise_multiplier: float, sampling_probability: float, steps: int,
    projections: str = "shared", max_dim: int = 10_000, quantiles: int = 128,
) -> JLCalibration:
    """The smallest number of projections ``r <= max_dim`` whose certified epsilon(delta) <= ``epsilon``.

    Raises
    ------
    ValueError
        If even plain DP-SGD (the limit ``r -> inf``) or ``r = max_dim`` misses the budget.
    """
    target = _check.positive("epsilon", epsilon)
    d = _check.delta(delta)
    sigma = _check.noise_multiplier(noise_multiplier)
    q = _check.probability("sampling_probability", sampling_probability)
    t = _check.count("steps", steps)
    _check.one_of("projections", projections, PROJECTIONS)
    limit = _epsilon(sigma, q, t, None, projections, d, quantiles)
    if limit > target:
        msg = (f"epsilon must be >= {limit:.6g} (plain DP-SGD, the r -> inf limit, at this noise), got {target!r}; "
               "raise noise_multiplier")
        raise ValueError(msg)
    evaluations = 1
    cache: dict[int, float] = {}

    def eps(r: int) -> float:
        nonlocal evaluations
        if r not in cache:
            evaluations += 1
            cache[r] = _epsilon(sigma, q, t, r, projections, d, quantiles, above=target)
        return cache[r]

    hi = 1
    while eps(hi) > target:
        if hi >= max_dim:
            msg = f"no jl_dim <= max_dim = {max_dim} meets the budget (epsilon at max_dim is {eps(hi):.6g})"
            raise ValueError(msg)
        hi = min(2 * hi, max_dim)
    lo = hi // 2  # eps(lo) > target (or lo = 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if eps(mid) <= target:
            hi = mid
        else:
            lo = mid
    return JLCalibration(noise_multiplier=sigma, jl_dim=hi, epsilon=eps(hi), delta=d, projections=projections,
                         evaluations=evaluations)


