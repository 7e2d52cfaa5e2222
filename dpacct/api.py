"""The one-call API: epsilon or delta of a DP-SGD run in one function call.

The guarantee depends on how batches are drawn (``sampler``):

* ``"poisson"``: each record joins each step independently with probability
  ``sampling_probability`` (add/remove adjacency): the standard DP-SGD analysis.
* ``"deterministic"``: the data is cut into batches of a fixed fraction
  ``sampling_probability`` in a fixed order; each record is in exactly one batch per
  epoch, so over ``steps`` steps it is in at most ``ceil(steps * q)`` of them. Under
  zero-out adjacency that is exactly ``ceil(steps * q)`` Gaussian mechanisms.
* ``"shuffle"``: the same, with a random permutation. No tight accountant exists;
  shuffling never does worse than deterministic batches, so the deterministic
  number is returned as a certified upper bound, and :func:`shuffle_epsilon_details`
  adds the lower bound of :mod:`dpacct.ablq`. The Poisson number is *not* a
  guarantee for shuffled batches (it can be far too small); it is returned only with
  the explicit opt-in ``assume_poisson=True``, which warns.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check
from dpacct.accountant import Accountant, make_accountant
from dpacct.mechanisms import GaussianMechanism, PoissonSampledGaussianMechanism

__all__ = [
    "SAMPLERS",
    "PoissonAssumptionWarning",
    "build_accountant",
    "delta",
    "epsilon",
    "participations",
    "shuffle_epsilon_details",
]

#: Batch samplers the one-call API accounts for (see the module docstring).
SAMPLERS: tuple[str, ...] = ("poisson", "shuffle", "deterministic")


class PoissonAssumptionWarning(UserWarning):
    """A shuffled run was accounted as if its batches were Poisson-sampled (not a guarantee)."""


def participations(*, sampling_probability: float, steps: int) -> int:
    """Most steps one record takes part in with fixed-fraction batches: ``ceil(steps * q)``.

    Each record is in exactly one batch per epoch of ``1/q`` steps, so ``steps`` steps
    touch it at most ``ceil(steps * q)`` times (a partial epoch may still include it).
    The relative ``1e-15`` absorbs round-off in ``steps * q`` (``0.1 * 30`` is
    ``3.0000000000000004``), far below any real fractional epoch: with ``q = b/n`` the
    fraction ``steps * q - k`` is 0 or at least ``1/n``, i.e. relative ``1/(k n)``.

    Examples
    --------
    >>> participations(sampling_probability=0.1, steps=30), participations(sampling_probability=0.1, steps=31)
    (3, 4)
    """
    q = _check.probability("sampling_probability", sampling_probability)
    t = _check.count("steps", steps)
    return max(0, math.ceil(t * q * (1.0 - 1e-15)))


def build_accountant(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    accountant: str = "rdp",
    sampler: str = "poisson",
    assume_poisson: bool = False,
    **options: Any,
) -> Accountant:
    """An accountant of the given kind with a DP-SGD run composed.

    For ``sampler="poisson"`` (or ``"shuffle"`` with ``assume_poisson=True``, which warns)
    it holds ``steps`` Poisson-subsampled Gaussian steps; for ``"deterministic"`` and
    ``"shuffle"`` it holds :func:`participations` zero-out Gaussian mechanisms, a
    certified upper bound for both (tight for deterministic). All arguments are
    validated before anything is computed; ``options`` go to the accountant's
    constructor (e.g. ``orders=`` or ``conversion=`` for RDP).
    """
    sampler = _check.one_of("sampler", sampler, SAMPLERS)
    if not isinstance(assume_poisson, bool):
        msg = f"assume_poisson must be a bool, got {type(assume_poisson).__name__}"
        raise TypeError(msg)
    if assume_poisson and sampler != "shuffle":
        msg = f"assume_poisson applies only to sampler='shuffle', got sampler={sampler!r}"
        raise ValueError(msg)
    count = _check.count("steps", steps)
    mechanism: GaussianMechanism | PoissonSampledGaussianMechanism
    if sampler == "poisson" or assume_poisson:
        mechanism = PoissonSampledGaussianMechanism(
            noise_multiplier=noise_multiplier, sampling_probability=sampling_probability
        )
    else:
        mechanism = GaussianMechanism(noise_multiplier=noise_multiplier, neighboring_relation="zero_out")
        count = participations(sampling_probability=sampling_probability, steps=count)
    acct = make_accountant(accountant, **options).compose(mechanism, count)
    if assume_poisson:
        msg = (
            "sampler='shuffle' with assume_poisson=True: this is the Poisson-sampling number, "
            "which is NOT a privacy guarantee for shuffled batches (it can be far too small; "
            "Chua et al., ICML 2024). Use assume_poisson=False for the certified upper bound."
        )
        warnings.warn(msg, PoissonAssumptionWarning, stacklevel=3)
    return acct


def epsilon(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    delta: ArrayLike,
    accountant: str = "rdp",
    sampler: str = "poisson",
    assume_poisson: bool = False,
    **options: Any,
) -> float | NDArray[np.float64]:
    """Epsilon of ``steps`` DP-SGD steps, an upper bound.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, finite and ``> 0``.
    sampling_probability : float
        q = batch size / dataset size, in ``[0, 1]``: the Poisson inclusion
        probability, or the batch fraction for ``"shuffle"``/``"deterministic"``.
    steps : int
        Total number of noisy steps, ``>= 0``.
    delta : float or array_like
        Target delta(s) in ``(0, 1)``.
    accountant : str
        Accounting method, one of :func:`dpacct.available_accountants` (``"rdp"``).
    sampler : str
        How batches are drawn: ``"poisson"`` (add/remove adjacency), ``"shuffle"`` or
        ``"deterministic"`` (zero-out adjacency); see :mod:`dpacct.api`.
    assume_poisson : bool
        Only with ``sampler="shuffle"``: return the Poisson number instead, with a
        :class:`PoissonAssumptionWarning` (it is not a guarantee for shuffled batches).
    **options
        Passed to the accountant (e.g. ``orders=``, ``conversion=`` for RDP).

    Returns
    -------
    float or ndarray
        An upper bound on epsilon: the run is (epsilon, delta)-DP (except with
        ``assume_poisson=True``). For ``"shuffle"`` this is the deterministic-batch
        bound; :func:`shuffle_epsilon_details` also gives the lower bound.

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
        assume_poisson=assume_poisson,
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
    assume_poisson: bool = False,
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
        assume_poisson=assume_poisson,
        **options,
    )
    return acct.get_delta(e)


def shuffle_epsilon_details(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    delta: float,
    accountant: str = "rdp",
    **options: Any,
) -> dict[str, Any]:
    """The honest epsilon interval of a shuffled DP-SGD run, for reports and the CLI.

    Parameters are as in :func:`dpacct.epsilon` (``sampling_probability`` = batch
    fraction, ``steps`` = total steps, one ``delta``).

    Returns
    -------
    dict
        ``epsilon``: certified upper bound (deterministic batches dominate shuffling,
        computed by ``accountant``); ``epsilon_lower_bound``: the shuffle lower bound of
        :func:`dpacct.ablq.epsilon_shuffle_lower` for the first epoch of
        ``T = ceil(1/q)`` batches (0 if the run is shorter than one epoch), which holds
        whatever permutation later epochs use; ``kind`` and ``lower_bound_method``.

    Notes
    -----
    Rounding ``1/q`` up can only lower the bound: more batches per epoch hide a record
    better, and the event bound decreases with ``T`` (tested). Later epochs can only
    add privacy loss, so the first epoch's lower bound holds for the whole run.
    """
    from dpacct import ablq  # local: ablq imports the accountants, keep api light

    d = _check.delta(delta)
    acct = build_accountant(noise_multiplier=noise_multiplier, sampling_probability=sampling_probability,
                            steps=steps, accountant=accountant, sampler="shuffle", **options)
    upper = float(acct.get_epsilon(d))
    q = _check.probability("sampling_probability", sampling_probability)
    t = _check.count("steps", steps)
    lower = 0.0
    method = "none: the run is shorter than one epoch"
    if q > 0.0 and t * q >= 1.0 - 1e-9:
        batches = max(1, math.ceil(1.0 / q - 1e-9))
        bound = ablq.epsilon_shuffle_lower(noise_multiplier=noise_multiplier, steps=batches, delta=d)
        lower = float(bound)
        method = f"shuffle lower bound, first epoch, T={batches} batches"
    return {
        "epsilon": upper,
        "kind": "upper bound (deterministic batches dominate shuffling)",
        "epsilon_lower_bound": lower,
        "lower_bound_method": method,
    }
