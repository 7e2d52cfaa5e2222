"""The one-call API: epsilon or delta of a DP-SGD run in one function call."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check
from dpacct.accountant import Accountant, make_accountant
from dpacct.mechanisms import PoissonSampledGaussianMechanism

__all__ = ["SAMPLERS", "build_accountant", "delta", "epsilon"]

#: Batch samplers the one-call API accounts for. ``"poisson"``: each record joins
#: each batch independently with probability ``sampling_probability`` (the
#: setting every DP-SGD analysis assumes).
SAMPLERS: tuple[str, ...] = ("poisson",)


def build_accountant(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    accountant: str = "rdp",
    sampler: str = "poisson",
    **options: Any,
) -> Accountant:
    """An accountant of the given kind with ``steps`` DP-SGD steps composed.

    All arguments are validated before anything is computed; ``options`` go to
    the accountant's constructor (e.g. ``orders=`` or ``conversion=`` for RDP).
    """
    mechanism = PoissonSampledGaussianMechanism(
        noise_multiplier=noise_multiplier, sampling_probability=sampling_probability
    )
    count = _check.count("steps", steps)
    _check.one_of("sampler", sampler, SAMPLERS)
    return make_accountant(accountant, **options).compose(mechanism, count)


def epsilon(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    delta: ArrayLike,
    accountant: str = "rdp",
    sampler: str = "poisson",
    **options: Any,
) -> float | NDArray[np.float64]:
    """Epsilon of ``steps`` DP-SGD steps, an upper bound.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, finite and ``> 0``.
    sampling_probability : float
        Poisson inclusion probability q (batch size / dataset size), in ``[0, 1]``.
    steps : int
        Number of noisy steps, ``>= 0``.
    delta : float or array_like
        Target delta(s) in ``(0, 1)``.
    accountant : str
        Accounting method, one of :func:`dpacct.available_accountants` (``"rdp"``).
    sampler : str
        How batches are drawn; ``"poisson"`` (add/remove adjacency).
    **options
        Passed to the accountant (e.g. ``orders=``, ``conversion=`` for RDP).

    Returns
    -------
    float or ndarray
        An upper bound on epsilon: the run is (epsilon, delta)-DP.

    Examples
    --------
    >>> round(epsilon(noise_multiplier=1.1, sampling_probability=256 / 60000, steps=10_000, delta=1e-5), 3)
    2.162
    """
    d = _check.delta_array(delta)
    acct = build_accountant(
        noise_multiplier=noise_multiplier,
        sampling_probability=sampling_probability,
        steps=steps,
        accountant=accountant,
        sampler=sampler,
        **options,
    )
    return acct.get_epsilon(d)


def delta(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    epsilon: ArrayLike,
    accountant: str = "rdp",
    sampler: str = "poisson",
    **options: Any,
) -> float | NDArray[np.float64]:
    """Delta of ``steps`` DP-SGD steps at the given epsilon(s), an upper bound.

    Parameters are as in :func:`dpacct.epsilon`, with ``epsilon`` (finite, ``>= 0``)
    in place of ``delta``.

    Returns
    -------
    float or ndarray
        An upper bound on delta: the run is (epsilon, delta)-DP.
    """
    e = _check.epsilon_array(epsilon)
    acct = build_accountant(
        noise_multiplier=noise_multiplier,
        sampling_probability=sampling_probability,
        steps=steps,
        accountant=accountant,
        sampler=sampler,
        **options,
    )
    return acct.get_delta(e)
