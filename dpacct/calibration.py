"""Calibration: the noise multiplier, number of steps or sampling rate that meets a budget.

Written once for every accountant: epsilon is decreasing in the noise multiplier
and increasing in the number of steps and the sampling probability (SPEC §8), so
each unknown is bracketed and then found by a safeguarded root finder that keeps
a bracket ``[unsafe, safe]`` and returns its safe end. The returned configuration
is re-accounted and always meets the budget: ``result.epsilon <= target``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpacct import _check
from dpacct.api import build_accountant
from dpacct.api import epsilon as _epsilon
from dpacct.rdp import OrderGridWarning

__all__ = ["CalibrationResult", "calibrate"]

_SIGMA_RANGE = (1e-4, 1e6)
_MIN_SAMPLING_PROBABILITY = 1e-12
_MAX_STEPS = 10**12


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationResult:
    """A configuration that meets an (epsilon, delta) budget.

    Attributes
    ----------
    noise_multiplier, sampling_probability, steps : float, float, int
        The full configuration; ``solved_for`` names the one that was solved.
    epsilon : float
        The epsilon this configuration actually achieves (an upper bound from the
        accountant), ``<= target_epsilon``.
    delta, target_epsilon : float
        The budget.
    solved_for : str
        ``"noise_multiplier"``, ``"steps"`` or ``"sampling_probability"``.
    accountant, sampler : str
        How epsilon was computed.
    evaluations : int
        Number of accountant evaluations the solver used.
    """

    noise_multiplier: float
    sampling_probability: float
    steps: int
    epsilon: float
    delta: float
    target_epsilon: float
    solved_for: str
    accountant: str
    sampler: str
    evaluations: int


def calibrate(
    *,
    epsilon: float,
    delta: float,
    noise_multiplier: float | None = None,
    sampling_probability: float | None = None,
    steps: int | None = None,
    accountant: str = "rdp",
    sampler: str = "poisson",
    rtol: float = 1e-6,
    **options: Any,
) -> CalibrationResult:
    """Solve for the one of noise multiplier, steps or sampling probability left as ``None``.

    Parameters
    ----------
    epsilon, delta : float
        The budget: the result is (epsilon, delta)-DP.
    noise_multiplier, sampling_probability, steps : optional
        Give exactly two; the third is solved for: the smallest noise multiplier,
        the largest number of steps, or the largest sampling probability that
        meets the budget.
    accountant, sampler, **options
        As in :func:`dpacct.epsilon`.
    rtol : float
        Relative width of the final bracket for continuous unknowns (in ``(0, 0.1]``).
        The returned value is the safe end, so it is at most ``rtol`` (relative)
        more conservative than the exact solution. With ``accountant="pld"`` the
        noise multiplier is resolved to ``max(rtol, 1e-3)``: finer than that, the
        PLD grid's own error (about 0.5% of epsilon) dominates.

    Returns
    -------
    CalibrationResult
        The configuration and the epsilon it achieves, ``<= epsilon``.

    Raises
    ------
    ValueError
        If not exactly one unknown is ``None``, an argument is out of range, or no
        value in the search range meets the budget.

    Examples
    --------
    >>> r = calibrate(epsilon=1.0, delta=1e-5, sampling_probability=256 / 60000, steps=10_000)
    >>> r.epsilon <= 1.0, round(r.noise_multiplier, 3)
    (True, 1.879)
    """
    target = _check.positive("epsilon", epsilon)
    d = _check.delta(delta)
    tol = _check.positive("rtol", rtol)
    if tol > 0.1:
        msg = f"rtol must be in (0, 0.1], got {tol!r}"
        raise ValueError(msg)
    unknowns = [
        name
        for name, value in (
            ("noise_multiplier", noise_multiplier),
            ("sampling_probability", sampling_probability),
            ("steps", steps),
        )
        if value is None
    ]
    if len(unknowns) != 1:
        msg = (
            "exactly one of noise_multiplier, sampling_probability, steps must be None "
            f"(the unknown), got {len(unknowns)} unknowns"
        )
        raise ValueError(msg)
    counter = _Counter()

    def account(sigma: float, q: float, t: int) -> float:
        counter.calls += 1
        value = _epsilon(
            noise_multiplier=sigma,
            sampling_probability=q,
            steps=t,
            delta=d,
            accountant=accountant,
            sampler=sampler,
            **options,
        )
        return float(value)

    if noise_multiplier is None:
        assert sampling_probability is not None and steps is not None  # narrowed by the count above
        q = _check.probability("sampling_probability", sampling_probability)
        t = _check.count("steps", steps)
        if q == 0.0 or t == 0:
            msg = "noise_multiplier cannot be calibrated when sampling_probability or steps is 0 (epsilon is 0 for any noise)"
            raise ValueError(msg)
        # Validates accountant/sampler/options before the search (builds, computes nothing).
        build_accountant(noise_multiplier=1.0, sampling_probability=q, steps=t, accountant=accountant,
                         sampler=sampler, **options)
        if accountant in ("rdp", "pld") and sampler == "poisson" and not options:
            sigma, achieved = _guided_noise_multiplier(account, q, t, d, target, tol, accountant, counter)
        else:
            sigma, achieved = _smallest_safe(lambda s: account(s, q, t), target, _SIGMA_RANGE, tol, "noise_multiplier")
        result = (sigma, q, t, achieved)
    elif steps is None:
        assert noise_multiplier is not None and sampling_probability is not None
        sigma = _check.noise_multiplier(noise_multiplier)
        q = _check.probability("sampling_probability", sampling_probability)
        t, achieved = _largest_safe_steps(lambda n: account(sigma, q, n), target)
        result = (sigma, q, t, achieved)
    else:
        assert noise_multiplier is not None
        sigma = _check.noise_multiplier(noise_multiplier)
        t = _check.count("steps", steps)
        q, achieved = _largest_safe_probability(lambda p: account(sigma, p, t), target, tol)
        result = (sigma, q, t, achieved)
    return CalibrationResult(
        noise_multiplier=result[0],
        sampling_probability=result[1],
        steps=result[2],
        epsilon=result[3],
        delta=d,
        target_epsilon=target,
        solved_for=unknowns[0],
        accountant=accountant,
        sampler=sampler,
        evaluations=counter.calls,
    )


class _Counter:
    calls = 0


def _guided_noise_multiplier(
    account: Callable[[float, float, int], float],
    q: float,
    t: int,
    delta: float,
    target: float,
    tol: float,
    accountant: str,
    counter: _Counter,
) -> tuple[float, float]:
    """Smallest noise multiplier for RDP/PLD, sped up by a cheaper guide that bounds it from above.

    Phase 1 solves with RDP on integer orders only: its epsilon upper-bounds the
    default-grid RDP epsilon (a subset of orders can only raise the minimum) and
    the PLD epsilon (RDP is looser than PLD), so its answer is safe for the target.
    Phase 2 searches just below that answer with the target accountant; for RDP it
    uses only the default orders near the phase-1 optimum, again an upper bound,
    and the full grid is evaluated once at the end for the reported epsilon.
    """
    from dpacct.rdp import DEFAULT_ORDERS, RDPAccountant
    from dpacct.mechanisms import PoissonSampledGaussianMechanism

    integer_orders = DEFAULT_ORDERS[DEFAULT_ORDERS == np.floor(DEFAULT_ORDERS)]

    def rdp_epsilon(sigma: float, orders: NDArray[np.float64]) -> float:
        counter.calls += 1
        acct = RDPAccountant(orders=orders).compose(
            PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q), t
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OrderGridWarning)  # the guide's grid edges do not matter
            return float(acct.get_epsilon(delta))

    guide, _ = _smallest_safe(lambda s: rdp_epsilon(s, integer_orders), target, _SIGMA_RANGE, 1e-3, "noise_multiplier")
    if accountant == "rdp":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OrderGridWarning)
            order = float(
                RDPAccountant()
                .compose(PoissonSampledGaussianMechanism(noise_multiplier=guide, sampling_probability=q), t)
                .get_epsilon_and_order(delta)
                .order
            )
        window = DEFAULT_ORDERS[(DEFAULT_ORDERS >= order / 1.5) & (DEFAULT_ORDERS <= order * 1.5)]
        sigma, _ = _smallest_safe_below(lambda s: rdp_epsilon(s, window), target, guide, tol)
    else:
        tol = max(tol, _PLD_MIN_RTOL)
        unsafe, safe = _pld_bracket(q, t, delta, target, guide, counter)
        f_safe = account(safe, q, t)
        if f_safe > target:  # the default grid is looser than a coarse one here: search from the guide
            sigma, _ = _smallest_safe_below(lambda s: account(s, q, t), target, guide, tol)
        elif unsafe is None:
            sigma, _ = _smallest_safe_below(lambda s: account(s, q, t), target, safe, tol)
        else:
            # The coarse upper bound at the proven-unsafe end stands in for its value: the
            # end is unsafe by a certified lower bound, and the value only steers the probes.
            sigma, f_sigma = _root_in_log(lambda s: account(s, q, t), target, unsafe[0], safe,
                                          unsafe[1], f_safe, tol)
            return sigma, f_sigma
    return sigma, account(sigma, q, t)


# Accuracies of the cheap PLD probes that narrow the bracket before the default grid is used.
_PLD_PROBE_ACCURACIES = (0.1, 0.03, 0.01)
# The PLD bracket is not narrowed below this relative width: the default grid's own error
# (about 0.5% of epsilon) dominates there, and every probe is a full PLD evaluation.
_PLD_MIN_RTOL = 1e-3


def _pld_bracket(
    q: float, t: int, delta: float, target: float, safe: float, counter: _Counter
) -> tuple[tuple[float, float] | None, float]:
    """Narrow ``[unsafe, safe]`` for the PLD noise multiplier with cheap, coarse-grid probes.

    A coarse PLD still gives certified bounds, only wider: a probe whose upper bound
    meets the target proves its noise multiplier safe, and one whose lower bound
    exceeds the target proves it unsafe for every accountant (the true epsilon is
    above the target). Undecided probes split the bracket where it is proven. Each
    accuracy level costs a fraction of a default-grid evaluation (the FFT size scales
    like 1/accuracy), so only the last few probes of the search pay the full price.
    Returns ``((unsafe, its coarse upper bound) or None, safe)``; ``safe`` is certified by
    a coarse upper bound.
    """
    from dpacct.pld import PLDAccountant

    def bounds(sigma: float, accuracy: float) -> tuple[float, float]:
        counter.calls += 1
        acct = PLDAccountant(relative_accuracy=accuracy).step(
            noise_multiplier=sigma, sampling_probability=q, count=t
        )
        lower, upper = acct.epsilon_bounds(delta)
        return float(lower), float(upper)

    unsafe: tuple[float, float] | None = None
    for accuracy in _PLD_PROBE_ACCURACIES:
        if unsafe is None:  # find a proven-unsafe lower end below the safe one
            x = safe
            while x > _SIGMA_RANGE[0]:
                x *= 1.0 - 4.0 * accuracy
                lower, upper = bounds(x, accuracy)
                if lower > target:
                    unsafe = (x, upper)
                    break
                if upper <= target:
                    safe = x
            if unsafe is None:
                return None, safe
        # Bisect in log sigma while the probes can still decide (about 8 halvings of a bracket
        # a few accuracies wide); an undecided probe ends this level.
        for _ in range(8):
            mid = math.sqrt(unsafe[0] * safe)
            lower, upper = bounds(mid, accuracy)
            if upper <= target:
                safe = mid
            elif lower > target:
                unsafe = (mid, upper)
            else:
                break
    return unsafe, safe


def _smallest_safe_below(
    f: Callable[[float], float], target: float, safe: float, tol: float
) -> tuple[float, float]:
    """Smallest x <= safe with f(x) <= target for a decreasing f, given that f(safe) <= target."""
    f_safe = f(safe)
    if f_safe > target:  # the guide was not an upper bound after all: search from scratch
        return _smallest_safe(f, target, _SIGMA_RANGE, tol, "noise_multiplier")
    factor = 0.98
    while True:
        x = safe * factor
        if x < _SIGMA_RANGE[0]:
            return safe, f_safe
        fx = f(x)
        if fx > target:
            return _root_in_log(f, target, x, safe, fx, f_safe, tol)
        safe, f_safe = x, fx
        factor = factor**2


def _log_gap(value: float, target: float) -> float:
    """log(value / target), +inf for an infinite epsilon."""
    if value == 0.0:
        return -math.inf
    return math.log(value) - math.log(target)


def _root_in_log(
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


def _smallest_safe(
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
                return _root_in_log(f, target, x, safe, fx, f_safe, tol)
            safe, f_safe = x, fx
    unsafe, f_unsafe = x, fx
    while True:
        x *= 4.0
        if x > bounds[1]:
            msg = f"no {name} up to {bounds[1]:g} meets epsilon <= {target:g}"
            raise ValueError(msg)
        fx = f(x)
        if fx <= target:
            return _root_in_log(f, target, unsafe, x, f_unsafe, fx, tol)
        unsafe, f_unsafe = x, fx


def _largest_safe_probability(f: Callable[[float], float], target: float, tol: float) -> tuple[float, float]:
    """Largest q in (0, 1] with f(q) <= target for an increasing f."""
    f_one = f(1.0)
    if f_one <= target:
        return 1.0, f_one
    unsafe, f_unsafe = 1.0, f_one
    x = 1.0
    while True:
        x /= 4.0
        if x < _MIN_SAMPLING_PROBABILITY:
            msg = f"no sampling_probability down to {_MIN_SAMPLING_PROBABILITY:g} meets epsilon <= {target:g}"
            raise ValueError(msg)
        fx = f(x)
        if fx <= target:
            return _root_in_log(f, target, unsafe, x, f_unsafe, fx, tol)
        unsafe, f_unsafe = x, fx


def _largest_safe_steps(f: Callable[[int], float], target: float) -> tuple[int, float]:
    """Largest integer T >= 1 with f(T) <= target for a non-decreasing f."""
    f_one = f(1)
    if f_one > target:
        msg = f"a single step already gives epsilon = {f_one:.6g} > {target:g}; no number of steps meets the budget"
        raise ValueError(msg)
    safe, f_safe = 1, f_one
    unsafe = 2
    while True:
        value = f(unsafe)
        if value > target:
            break
        safe, f_safe = unsafe, value
        unsafe *= 2
        if unsafe > _MAX_STEPS:
            msg = f"more than {_MAX_STEPS:g} steps meet epsilon <= {target:g}; the noise is too large to calibrate steps"
            raise ValueError(msg)
    while unsafe - safe > 1:
        mid = (safe + unsafe) // 2
        value = f(mid)
        if value <= target:
            safe, f_safe = mid, value
        else:
            unsafe = mid
    return safe, f_safe
