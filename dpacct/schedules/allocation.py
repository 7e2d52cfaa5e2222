r"""Budget allocation over a schedule: the epochs a zCDP or (epsilon, delta) budget affords, and the decay solver."""

from __future__ import annotations

import abc
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check
from dpacct.accountant import available_accountants, make_accountant
from dpacct.mechanisms import GaussianMechanism
from dpacct.schedules.shapes import (  # the shapes are used by the doctests too
    _DEFAULT_MAX_EPOCHS,
    SCHEDULES,
    Exponential,
    Polynomial,
    Schedule,
    Step,
    TimeBased,
    Uniform,
    ValidationBased,
    make_schedule,
)

__all__ = ["Allocation", "DecaySolution", "EpsilonAllocation", "allocate_budget", "allocate_budget_epsilon",
           "solve_decay"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Allocation:
    """The epochs a zCDP budget affords under a schedule.

    Attributes
    ----------
    noise_multipliers : ndarray
        Sigma of each epoch that fits, epoch 0 first.
    rho_per_epoch, cumulative_rho : ndarray
        ``1/(2 sigma_t^2)`` and its running total (exact sum, rounded to float).
    rho_total : float
        The budget.
    budget_exhausted : bool
        ``True``: the next epoch would exceed the budget. ``False``: ``max_epochs``
        (or the end of a finite sequence) stopped the allocation first.
    """

    noise_multipliers: NDArray[np.float64]
    rho_per_epoch: NDArray[np.float64]
    cumulative_rho: NDArray[np.float64]
    rho_total: float
    budget_exhausted: bool

    @property
    def epochs(self) -> int:
        """Number of epochs that fit in the budget."""
        return int(self.noise_multipliers.size)


def _chunks(schedule: Schedule | Iterable[float], max_epochs: int) -> Iterator[NDArray[np.float64]]:
    if isinstance(schedule, Schedule):
        for start in range(0, max_epochs, 4096):
            yield schedule.noise_multipliers(np.arange(start, min(start + 4096, max_epochs)))
        return
    if isinstance(schedule, (str, bytes, ValidationBased)) or not isinstance(schedule, Iterable):
        msg = ("schedule must be a Schedule or an iterable of noise multipliers "
               f"(for ValidationBased pass its noise_multipliers(accuracies)), got {type(schedule).__name__}")
        raise TypeError(msg)
    iterator = iter(np.asarray(schedule, dtype=np.float64).ravel().tolist()) if isinstance(schedule, np.ndarray) \
        else iter(schedule)
    taken = 0
    while taken < max_epochs:
        chunk = np.fromiter(itertools.islice(iterator, min(4096, max_epochs - taken)), dtype=np.float64)
        if chunk.size == 0:
            return
        taken += chunk.size
        yield chunk


def _exact_cost(sigma: float) -> Fraction:
    return Fraction(1, 2) / Fraction(sigma) ** 2


def allocate_budget(
    schedule: Schedule | Iterable[float], *, rho_total: float, max_epochs: int = _DEFAULT_MAX_EPOCHS
) -> Allocation:
    r"""The epochs a zCDP budget affords: stop **before** the epoch that would exceed ``rho_total``.

    Parameters
    ----------
    schedule : Schedule or iterable of float
        A schedule object, or the noise multipliers of successive epochs (e.g. the
        output of :meth:`ValidationBased.noise_multipliers`).
    rho_total : float
        The zCDP budget, finite and ``> 0``.
    max_epochs : int
        Stop after this many epochs even if budget is left (``budget_exhausted`` is then
        ``False``). Default 100000.

    Returns
    -------
    Allocation
        The noise multipliers of the epochs that fit and their costs.

    Notes
    -----
    Epoch :math:`t` costs :math:`1/(2\sigma_t^2)` (random-reshuffling accounting, Yu et
    al. 2019, Thm 2). The decision "does the total after epoch n exceed the
    budget" is exact for the floating-point :math:`\sigma_t` the schedule returns: the
    running sum is computed in floating point with a bound on its rounding error, and
    any epoch within that bound of the budget is decided in exact rational arithmetic
    (so 100 epochs at :math:`\sigma = 8` fit a budget of exactly 0.78125).

    Examples
    --------
    >>> allocate_budget(Uniform(initial_noise_multiplier=8.0), rho_total=0.78125).epochs
    100
    >>> allocate_budget(TimeBased(initial_noise_multiplier=10.0, decay=0.05), rho_total=0.78125).epochs
    38
    """
    rho = _check.positive("rho_total", rho_total)
    limit = _check.count("max_epochs", max_epochs)
    sigmas_parts: list[NDArray[np.float64]] = []
    float_total = 0.0
    for chunk in _chunks(schedule, limit):
        ok = (chunk >= 0.0) & np.isfinite(chunk)
        if not ok.all():
            index = sum(p.size for p in sigmas_parts) + int(np.flatnonzero(~ok)[0])
            msg = f"noise multipliers must be finite and >= 0, got {float(chunk[~ok][0])!r} at epoch {index}"
            raise ValueError(msg)
        sigmas_parts.append(chunk)
        with np.errstate(divide="ignore", over="ignore"):  # sigma = 0 (or tiny) means rho = inf: never fits
            float_total += float(np.sum(0.5 / (chunk * chunk)))
        if float_total > 2.0 * rho:  # well past the budget: the crossing is in what we have
            break
    sigmas = np.concatenate(sigmas_parts) if sigmas_parts else np.zeros(0)
    with np.errstate(divide="ignore", over="ignore"):  # as above
        costs = 0.5 / (sigmas * sigmas)
    infinite = ~np.isfinite(costs)
    stop = int(np.argmax(infinite)) if infinite.any() else sigmas.size  # an epoch of infinite cost never fits
    sigmas, costs = sigmas[:stop], costs[:stop]
    with np.errstate(over="ignore"):  # a running total past 1e308 is inf: far over any finite budget
        cumulative = np.cumsum(costs)
    # |float cumsum - exact sum| <= (n + 4) * eps * cumsum: n additions plus the rounding
    # of each cost (square and division), each at most one unit roundoff (eps / 2).
    with np.errstate(over="ignore"):  # inf stays inf (and is never "clearly fits")
        tolerance = (np.arange(sigmas.size) + 5.0) * np.finfo(np.float64).eps * cumulative
    clearly_fits = cumulative + tolerance <= rho
    n = int(np.argmin(clearly_fits)) if not clearly_fits.all() else sigmas.size
    exact_total: Fraction | None = None
    while n < sigmas.size and math.isfinite(cumulative[n]) and not cumulative[n] - tolerance[n] > rho:
        # Too close to call in floating point: decide in exact rational arithmetic.
        if exact_total is None:
            exact_total = sum((_exact_cost(float(s)) for s in sigmas[:n]), Fraction(0))
        candidate = exact_total + _exact_cost(float(sigmas[n]))
        if candidate > Fraction(rho):
            break
        exact_total = candidate
        n += 1
        while n < sigmas.size and cumulative[n] + tolerance[n] <= rho:  # back in the clear region
            exact_total += _exact_cost(float(sigmas[n]))
            n += 1
    exhausted = n < sigmas.size or stop < infinite.size
    return Allocation(
        noise_multipliers=sigmas[:n].copy(), rho_per_epoch=costs[:n].copy(), cumulative_rho=cumulative[:n].copy(),
        rho_total=rho, budget_exhausted=exhausted,
    )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class EpsilonAllocation:
    """The epochs an (epsilon, delta) budget affords under a schedule, through one accountant.

    ``epsilon`` is the accountant's epsilon (an upper bound) for the epochs that fit,
    ``<= target_epsilon``; ``budget_exhausted`` as in :class:`Allocation`.
    """

    noise_multipliers: NDArray[np.float64]
    epsilon: float
    target_epsilon: float
    delta: float
    accountant: str
    budget_exhausted: bool
    kind: str = field(default="upper bound (achieved, <= target)")

    @property
    def epochs(self) -> int:
        """Number of epochs that fit in the budget."""
        return int(self.noise_multipliers.size)


def _epsilon_of(sigmas: NDArray[np.float64], delta: float, accountant: str, options: dict[str, Any]) -> float:
    acct = make_accountant(accountant, **options)
    for sigma, run in itertools.groupby(sigmas.tolist()):
        acct.compose(GaussianMechanism(noise_multiplier=sigma), sum(1 for _ in run))
    return float(acct.get_epsilon(delta))


def allocate_budget_epsilon(
    schedule: Schedule | Iterable[float],
    *,
    epsilon: float,
    delta: float,
    accountant: str = "zcdp",
    max_epochs: int = 10_000,
    **options: Any,
) -> EpsilonAllocation:
    r"""The epochs an :math:`(\varepsilon, \delta)` budget affords, through any registered accountant.

    Each epoch is one :class:`~dpacct.GaussianMechanism` with that epoch's noise
    multiplier (disjoint batches: each record is in one step of the epoch).

    Parameters
    ----------
    schedule : Schedule or iterable of float
        As in :func:`allocate_budget`.
    epsilon : float
        Target epsilon, finite and ``> 0``.
    delta : float
        Target delta in ``(0, 1)``.
    accountant : str
        Registry name, e.g. ``"zcdp"`` (default), ``"rdp"``, ``"pld"``.
    max_epochs : int
        Largest number of epochs considered (default 10000).
    **options
        Passed to the accountant's constructor.

    Returns
    -------
    EpsilonAllocation
        The epochs that fit and the accountant's epsilon for them.

    Notes
    -----
    The count is found by doubling and bisection on the prefix length (a logarithmic
    number of accountant evaluations). For zCDP and RDP the accountant's epsilon
    increases with every epoch, so this is the largest prefix that fits; for PLD the
    certified bound can wobble by its discretisation, and the result is the largest
    prefix found by bisection, verified to fit.

    Examples
    --------
    >>> allocate_budget_epsilon(Uniform(initial_noise_multiplier=8.0), epsilon=1.0, delta=1e-5).epochs
    3
    """
    target = _check.positive("epsilon", epsilon)
    d = _check.delta(delta)
    _check.one_of("accountant", accountant, available_accountants())
    limit = _check.count("max_epochs", max_epochs)
    sigmas = np.concatenate([np.zeros(0), *_chunks(schedule, limit)])
    bad = ~((sigmas > 0.0) & np.isfinite(sigmas))
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        msg = f"noise multipliers must be finite and > 0, got {float(sigmas[index])!r} at epoch {index}"
        raise ValueError(msg)

    cache: dict[int, float] = {0: 0.0}

    def eps(n: int) -> float:
        if n not in cache:
            cache[n] = _epsilon_of(sigmas[:n], d, accountant, options)
        return cache[n]

    low, high = 0, 1  # invariant: eps(low) <= target; high is the first candidate not yet known to fit
    while high <= sigmas.size and eps(high) <= target:
        low, high = high, 2 * high
    high = min(high, sigmas.size + 1)
    while high - low > 1:
        mid = (low + high) // 2
        if eps(mid) <= target:
            low = mid
        else:
            high = mid
    exhausted = low < sigmas.size
    return EpsilonAllocation(noise_multipliers=sigmas[:low].copy(), epsilon=eps(low), target_epsilon=target,
                             delta=d, accountant=accountant, budget_exhausted=exhausted)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class DecaySolution:
    """A decay rate that gives exactly ``epochs`` epochs, with its schedule and allocation."""

    decay: float
    epochs: int
    schedule: Schedule
    allocation: Allocation


def solve_decay(
    kind: str,
    *,
    initial_noise_multiplier: float,
    rho_total: float,
    target_epochs: int,
    period: int | None = None,
    final_noise_multiplier: float | None = None,
    max_epochs: int = _DEFAULT_MAX_EPOCHS,
    xtol: float = 1e-12,
) -> DecaySolution:
    r"""The decay rate k for which the budget affords exactly ``target_epochs`` epochs.

    Parameters
    ----------
    kind : {"time", "exponential", "step", "polynomial"}
        The schedule family.
    initial_noise_multiplier : float
        :math:`\sigma_0`.
    rho_total : float
        zCDP budget, finite and ``> 0``.
    target_epochs : int
        Wanted number of epochs, ``>= 1``.
    period, final_noise_multiplier
        As the schedule needs them (step: ``period``; polynomial: both).
    max_epochs : int
        Passed to :func:`allocate_budget`.
    xtol : float
        Absolute tolerance of the bisection on k.

    Returns
    -------
    DecaySolution
        ``decay`` gives exactly ``target_epochs`` epochs (verified).

    Raises
    ------
    ValueError
        If no decay rate gives exactly ``target_epochs`` (the message gives the
        achievable range, or the neighbouring counts when the count jumps over it).

    Notes
    -----
    The number of epochs is a monotone step function of k (non-increasing for
    time, exponential and polynomial; non-decreasing for step, where k in (0, 1] is
    the factor kept per period), so the k that give ``target_epochs`` form an
    interval. Bisection returns, within ``xtol``, the end of that interval with the
    least noise: the largest k for time/exponential/polynomial and the smallest k
    for step. It spends the most budget over those epochs, and it is checked to
    give exactly ``target_epochs``.

    Examples
    --------
    >>> sol = solve_decay("time", initial_noise_multiplier=10.0, rho_total=0.78125, target_epochs=38)
    >>> sol.epochs, 0.05 <= sol.decay < 0.06
    (38, True)
    """
    name = _check.one_of("kind", kind, SCHEDULES[1:])
    _check.positive("initial_noise_multiplier", initial_noise_multiplier)
    rho = _check.positive("rho_total", rho_total)
    target = _check.count("target_epochs", target_epochs, minimum=1)
    limit = _check.count("max_epochs", max_epochs)
    if target > limit:
        msg = f"target_epochs must be <= max_epochs = {limit}, got {target}"
        raise ValueError(msg)
    tol = _check.positive("xtol", xtol)

    def build(k: float) -> Schedule:
        return make_schedule(name, initial_noise_multiplier=initial_noise_multiplier, decay=k, period=period,
                             final_noise_multiplier=final_noise_multiplier)

    build(0.5)  # validates period / final_noise_multiplier before any search

    def count(k: float) -> int:
        return allocate_budget(build(k), rho_total=rho, max_epochs=limit).epochs

    if name == "step":
        # count(k) non-decreasing in k on (0, 1]: find the smallest k with count >= target.
        low, high = 0.0, 1.0
        if count(high) < target:
            msg = f"target_epochs must be <= {count(high)} (no decay) for this budget, got {target}"
            raise ValueError(msg)
        tiny = min(tol, 1e-300)
        if count(tiny) >= target:
            low = high = tiny
        while high - low > tol:
            mid = 0.5 * (low + high)
            if count(mid) >= target:
                high = mid
            else:
                low = mid
        k = high
    else:
        # count(k) non-increasing in k >= 0: find the largest k with count >= target.
        if count(0.0) < target:
            msg = f"target_epochs must be <= {count(0.0)} (no decay) for this budget, got {target}"
            raise ValueError(msg)
        low, high = 0.0, 1.0
        while count(high) >= target:
            low, high = high, 2.0 * high
            if high > 1e300:
                msg = f"no finite decay reduces the number of epochs to target_epochs = {target}"
                raise ValueError(msg)
        while high - low > tol * max(1.0, low):
            mid = 0.5 * (low + high)
            if count(mid) >= target:
                low = mid
            else:
                high = mid
        k = low
    allocation = allocate_budget(build(k), rho_total=rho, max_epochs=limit)
    if allocation.epochs != target:
        other = low if name == "step" else high
        beside = f" and decay = {other:.12g} gives {count(other)}" if other > 0.0 else ""
        msg = (f"no decay gives exactly target_epochs = {target}: decay = {k:.12g} gives {allocation.epochs} "
               f"epochs{beside}; choose a neighbouring target_epochs")
        raise ValueError(msg)
    return DecaySolution(decay=k, epochs=target, schedule=build(k), allocation=allocation)
