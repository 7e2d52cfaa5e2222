"""Noise schedules in a torch loop: the epochs an (epsilon, delta) budget affords.

:func:`plan_epochs` takes a :mod:`dpacct.schedules` schedule (the noise multiplier of
each epoch, Yu et al., IEEE S&P 2019, arXiv:1904.02200, Section IV-A) and the sampler,
accounts the epochs heterogeneously (Poisson: ``batches_per_epoch`` subsampled Gaussian
steps with that epoch's noise; fixed-size batches: one zero-out Gaussian per epoch), and
stops **before** the epoch that would exceed the budget. Train with
``PrivacyAccountant(..., noise_multiplier=schedule)`` for ``plan.epochs`` epochs: the
accountant then reports the plan's epsilon.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpacct import _check
from dpacct.accountant import available_accountants, make_accountant
from dpacct.mechanisms import FixedSizeSampledGaussianMechanism, GaussianMechanism, PoissonSampledGaussianMechanism
from dpacct.schedules import Schedule
from dpacct.torch.samplers import SamplingInfo, identify

__all__ = ["EpochPlan", "plan_epochs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochPlan:
    """The epochs that fit a budget under a noise schedule.

    Attributes
    ----------
    noise_multipliers : tuple of float
        Noise multiplier of each epoch that fits, epoch 0 first.
    epsilon : float
        Upper bound on epsilon after those epochs (``<= target_epsilon``).
    target_epsilon, delta : float
        The budget.
    accountant, sampler : str
        How it was accounted.
    budget_exhausted : bool
        True: the next epoch would exceed the budget. False: ``max_epochs`` (or the end of a
        finite schedule) came first.
    """

    noise_multipliers: tuple[float, ...]
    epsilon: float
    target_epsilon: float
    delta: float
    accountant: str
    sampler: str
    budget_exhausted: bool

    @property
    def epochs(self) -> int:
        """Number of epochs that fit."""
        return len(self.noise_multipliers)


def _epoch_runs(sigmas: list[float], info: SamplingInfo) -> list[tuple[Any, int]]:
    runs: list[tuple[Any, int]] = []
    for sigma in sigmas:
        mechanism: Any
        if info.sampler == "poisson":
            mechanism = PoissonSampledGaussianMechanism(noise_multiplier=sigma,
                                                        sampling_probability=info.sampling_probability)
            count = info.batches_per_epoch
        elif info.sampler in ("fixed_size", "fixed_size_replacement"):
            mechanism = FixedSizeSampledGaussianMechanism(noise_multiplier=sigma, batch_size=round(info.batch_size),
                                                          dataset_size=info.dataset_size,
                                                          replacement=info.sampler == "fixed_size_replacement")
            count = info.batches_per_epoch
        else:
            mechanism, count = GaussianMechanism(noise_multiplier=sigma, neighboring_relation="zero_out"), 1
        if runs and runs[-1][0] == mechanism:
            runs[-1] = (mechanism, runs[-1][1] + count)
        else:
            runs.append((mechanism, count))
    return runs


def plan_epochs(
    schedule: Schedule | Iterable[float],
    sampler: Any,
    *,
    epsilon: float,
    delta: float,
    accountant: str = "pld",
    max_epochs: int = 1000,
    **options: Any,
) -> EpochPlan:
    """The epochs of a noise schedule that fit an (epsilon, delta) budget for this sampler.

    Parameters
    ----------
    schedule : Schedule or iterable of float
        Noise multiplier per epoch.
    sampler : DataLoader, batch sampler or SamplingInfo
        As in :class:`dpacct.torch.PrivacyAccountant`.
    epsilon, delta : float
        The budget.
    accountant : str
        dpacct accountant name (default ``"pld"``).
    max_epochs : int
        Largest number of epochs considered.
    **options
        Passed to the accountant.

    Returns
    -------
    EpochPlan
        The epochs that fit; found by doubling and bisection on the number of epochs, the
        returned prefix verified to fit.

    Examples
    --------
    >>> from dpacct.schedules import Exponential
    >>> from dpacct.torch import ShuffleBatchSampler
    >>> plan = plan_epochs(Exponential(initial_noise_multiplier=8.0, decay=0.05),
    ...                    ShuffleBatchSampler(dataset_size=1000, batch_size=100), epsilon=2.0, delta=1e-5)
    >>> plan.epochs, plan.epsilon <= 2.0, plan.budget_exhausted
    (9, True, True)
    """
    info = sampler if isinstance(sampler, SamplingInfo) else identify(sampler)
    target = _check.positive("epsilon", epsilon)
    d = _check.delta(delta)
    _check.one_of("accountant", accountant, available_accountants())
    limit = _check.count("max_epochs", max_epochs)
    if isinstance(schedule, Schedule):
        sigmas = [float(s) for s in schedule.noise_multipliers(np.arange(limit))]
    else:
        sigmas = [_check.noise_multiplier(s) for s, _ in zip(schedule, range(limit))]
    cache: dict[int, float] = {0: 0.0}

    def eps(n: int) -> float:
        if n not in cache:
            acct = make_accountant(accountant, **options)
            for mechanism, count in _epoch_runs(sigmas[:n], info):
                acct.compose(mechanism, count=count)
            cache[n] = float(acct.get_epsilon(d))
        return cache[n]

    low, high = 0, 1  # eps(low) <= target; high: first count not known to fit
    while high <= len(sigmas) and eps(high) <= target:
        low, high = high, 2 * high
    high = min(high, len(sigmas) + 1)
    while high - low > 1:
        mid = (low + high) // 2
        if eps(mid) <= target:
            low = mid
        else:
            high = mid
    return EpochPlan(noise_multipliers=tuple(sigmas[:low]), epsilon=eps(low), target_epsilon=target, delta=d,
                     accountant=accountant, sampler=info.sampler, budget_exhausted=low < len(sigmas))
