"""Calibration: the noise multiplier, number of steps or sampling rate that meets a budget.

Written once for every accountant: epsilon is decreasing in the noise multiplier
and increasing in the number of steps and the sampling probability (see the tests), so
each unknown is bracketed and then found by a safeguarded root finder that keeps
a bracket ``[unsafe, safe]`` and returns its safe end. The returned configuration
is re-accounted and always meets the budget: ``result.epsilon <= target``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpacct import _check
from dpacct._search import SIGMA_RANGE, BudgetUnreachableError, root_in_log, smallest_safe, smallest_safe_below
from dpacct.accountant import DEFAULT_ACCOUNTANT, NoiseGuide, accountant_guide
from dpacct.api import accountant_for_run, resolve_run
from dpacct.run import Run

__all__ = ["BudgetUnreachableError", "CalibrationResult", "calibrate"]

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
    epochs: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    drop_last: bool = False,
    accountant: str = DEFAULT_ACCOUNTANT,
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
    epochs, batch_size, dataset_size, drop_last : optional
        Instead of ``sampling_probability`` and ``steps``: the run in epochs (as in
        :func:`dpacct.epsilon`); the noise multiplier is then solved for.
    accountant, sampler, **options
        As in :func:`dpacct.epsilon`.
    rtol : float
        Relative width of the final bracket for continuous unknowns (in ``(0, 0.1]``).
        The returned value is the safe end, so it is at most ``rtol`` (relative)
        more conservative than the exact solution. An accountant's guide may coarsen
        it to the accountant's own resolution (PLD: ``max(rtol, 1e-3)``; finer than
        that, the PLD grid's own error, about 0.5% of epsilon, dominates).

    Returns
    -------
    CalibrationResult
        The configuration and the epsilon it achieves, ``<= epsilon``.

    Raises
    ------
    ValueError
        If not exactly one unknown is ``None``, an argument is out of range, or no
        value in the search range meets the budget.

    Notes
    -----
    Calibration talks to the accountant only through the accountant protocol: it
    builds accountants with :func:`dpacct.api.accountant_for_run` and reads
    ``get_epsilon``; an accountant may offer a fast
    :meth:`~dpacct.accountant.Accountant.noise_multiplier_guide` (RDP and PLD do),
    used for Poisson runs with default options.

    Examples
    --------
    >>> r = calibrate(epsilon=1.0, delta=1e-5, sampling_probability=256 / 60000, steps=10_000)
    >>> r.epsilon <= 1.0, round(r.noise_multiplier, 3)
    (True, 1.754)
    """
    target = _check.positive("epsilon", epsilon)
    d = _check.delta(delta)
    tol = _check.positive("rtol", rtol)
    if tol > 0.1:
        msg = f"rtol must be in (0, 0.1], got {tol!r}"
        raise ValueError(msg)
    by_epochs = any(v is not None for v in (epochs, batch_size, dataset_size))
    if by_epochs:
        if noise_multiplier is not None:
            msg = "with epochs, batch_size and dataset_size the noise multiplier is solved for: leave noise_multiplier=None"
            raise ValueError(msg)
        unknowns = ["noise_multiplier"]
    else:
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

    def account(sigma: float, run: Run) -> float:
        counter.calls += 1
        acct = accountant_for_run(run, noise_multiplier=sigma, accountant=accountant, sampler=sampler, **options)
        return float(acct.get_epsilon(d))

    if noise_multiplier is None:
        run = resolve_run(sampling_probability=sampling_probability, steps=steps, epochs=epochs,
                          batch_size=batch_size, dataset_size=dataset_size, drop_last=drop_last)
        q, t = run.sampling_probability, run.steps(sampler)
        if q == 0.0 or t == 0:
            msg = "noise_multiplier cannot be calibrated when sampling_probability or steps is 0 (epsilon is 0 for any noise)"
            raise ValueError(msg)
        # Validates accountant/sampler/options before the search (builds, computes nothing).
        accountant_for_run(run, noise_multiplier=1.0, accountant=accountant, sampler=sampler, **options)
        guide = None
        if sampler == "poisson" and not options:
            guide = accountant_guide(accountant)(sampling_probability=q, steps=t, delta=d, epsilon=target)
        if guide is not None:
            counter.calls += guide.evaluations
            sigma, achieved = _guided(lambda s: account(s, run), guide, target, tol)
        else:
            sigma, achieved = smallest_safe(lambda s: account(s, run), target, SIGMA_RANGE, tol, "noise_multiplier")
        result = (sigma, q, t, achieved)
    elif steps is None:
        assert noise_multiplier is not None and sampling_probability is not None
        sigma = _check.noise_multiplier(noise_multiplier)
        q = _check.probability("sampling_probability", sampling_probability)
        t, achieved = _largest_safe_steps(lambda n: account(sigma, Run(sampling_probability=q, steps=n)), target)
        result = (sigma, q, t, achieved)
    else:
        assert noise_multiplier is not None
        sigma = _check.noise_multiplier(noise_multiplier)
        t = _check.count("steps", steps)
        q, achieved = _largest_safe_probability(lambda p: account(sigma, Run(sampling_probability=p, steps=t)),
                                                target, tol)
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


def _guided(account: Callable[[float], float], guide: NoiseGuide, target: float, tol: float) -> tuple[float, float]:
    """Smallest safe noise multiplier, searched from an accountant's guide; re-accounted at the end."""
    tol = max(tol, guide.min_rtol)
    f = guide.search_epsilon if guide.search_epsilon is not None else account
    if guide.unsafe is not None:
        f_safe = guide.safe_epsilon if guide.safe_epsilon is not None and f is account else f(guide.safe)
        if f_safe <= target:
            # The guide's value at the proven-unsafe end only steers the probes.
            f_unsafe = guide.unsafe_epsilon if guide.unsafe_epsilon is not None else f(guide.unsafe)
            sigma, f_sigma = root_in_log(f, target, guide.unsafe, guide.safe, f_unsafe, f_safe, tol)
        else:  # the guide's safe end is not safe for this accountant: restart from its fallback
            sigma, f_sigma = smallest_safe_below(f, target, guide.fallback or guide.safe, tol)
    else:
        start = guide.safe
        if f is account and guide.fallback is not None and guide.fallback != guide.safe and f(start) > target:
            start = guide.fallback
        sigma, f_sigma = smallest_safe_below(f, target, start, tol)
    if f is account:
        return sigma, f_sigma
    achieved = account(sigma)
    if achieved > target:  # the search function was not an upper bound here: search with the accountant
        return smallest_safe_below(account, target, sigma, tol)
    return sigma, achieved


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
            raise BudgetUnreachableError(msg)
        fx = f(x)
        if fx <= target:
            return root_in_log(f, target, unsafe, x, f_unsafe, fx, tol)
        unsafe, f_unsafe = x, fx


def _largest_safe_steps(f: Callable[[int], float], target: float) -> tuple[int, float]:
    """Largest integer T >= 1 with f(T) <= target for a non-decreasing f."""
    f_one = f(1)
    if f_one > target:
        msg = f"a single step already gives epsilon = {f_one:.6g} > {target:g}; no number of steps meets the budget"
        raise BudgetUnreachableError(msg)
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
            raise BudgetUnreachableError(msg)
    while unsafe - safe > 1:
        mid = (safe + unsafe) // 2
        value = f(mid)
        if value <= target:
            safe, f_safe = mid, value
        else:
            unsafe = mid
    return safe, f_safe
