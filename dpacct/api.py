"""The one-call API: epsilon or delta of a DP-SGD run in one function call.

A run is given as ``sampling_probability`` and ``steps`` (q and the total number of
steps) or as ``epochs``, ``batch_size`` and ``dataset_size`` (see :mod:`dpacct.run`).
The guarantee depends on how batches are drawn (``sampler``):

* ``"poisson"``: each record joins each step independently with probability
  ``sampling_probability`` (add/remove adjacency): the standard DP-SGD analysis,
  computed by ``accountant``.
* ``"deterministic"``: the data is cut into batches in a fixed order; each record is
  in at most one batch per epoch (:meth:`dpacct.run.Run.participations` counts them).
  Under zero-out adjacency that is exactly that many Gaussian mechanisms, whose
  composition has an exact curve (Balle & Wang 2018): it is returned, whatever
  ``accountant`` says (every accountant's bound for it is at least the exact value).
* ``"shuffle"``: the same, with a random permutation. No tight accountant exists;
  shuffling never does worse than deterministic batches, so the deterministic curve is
  returned as a certified upper bound, and :func:`shuffle_epsilon_details` adds the
  lower bound of :mod:`dpacct.ablq`. The Poisson number is *not* a guarantee for
  shuffled batches (it can be far too small); it is returned only with the explicit
  opt-in ``assume_poisson=True``, which warns.
* ``"fixed_size"`` / ``"fixed_size_replacement"``: every step a batch of exactly
  ``batch_size`` records drawn without (with) replacement (add/remove adjacency). A
  neighbour swaps one gradient of the batch, so the pair is the Poisson pair at half the
  noise multiplier (:mod:`dpacct.samplers.fixed_size`); with replacement only
  ``accountant="pld"`` applies.
* ``"balls_in_bins"``: each record in one uniformly random step of each epoch; the
  certified upper bound returned is the smallest of the dominating pair's PLD (the law of
  its likelihood ratio on a lattice), its Renyi DP and the deterministic curve
  (:class:`dpacct.samplers.allocation.BallsInBinsAccountant`, which also gives the
  certified lower bound; :mod:`dpacct.samplers.allocation` adds an estimate).
* ``"random_allocation"``: each record in ``k`` distinct uniformly random steps among all
  the run's steps, ``k`` the participations of shuffled batches (Feldman and Shenfeld
  2025, arXiv:2502.08202); no dominating pair is proven for ``k > 1``, so the certified
  upper bound is the deterministic curve (a mixture of fixed schedules;
  :mod:`dpacct.samplers.allocation` has a lower bound and an estimate).
* ``"truncated_poisson"`` (with ``max_batch_size=B``): Poisson batches cut to at most
  ``B`` records (add/remove; :mod:`dpacct.samplers.truncated_poisson`, ``accountant="pld"``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check
from dpacct.accountant import DEFAULT_ACCOUNTANT, Accountant, check_options, make_accountant
from dpacct.mechanisms import (
    BallsInBinsGaussianMechanism,
    FixedSizeSampledGaussianMechanism,
    GaussianMechanism,
    PoissonSampledGaussianMechanism,
    TruncatedPoissonSampledGaussianMechanism,
)
from dpacct.run import SAMPLERS, Run

__all__ = [
    "SAMPLERS",
    "AccountingLimitError",
    "PoissonAssumptionWarning",
    "accountant_for_run",
    "build_accountant",
    "delta",
    "epsilon",
    "participations",
    "resolve_run",
    "shuffle_epsilon_details",
    "shuffle_lower_bound",
]

_API_KEYWORDS = ("noise_multiplier", "sampling_probability", "steps", "epochs", "batch_size", "dataset_size",
                 "drop_last", "delta", "epsilon", "accountant", "sampler", "assume_poisson", "max_batch_size")


class AccountingLimitError(ValueError):
    """An accountant could not compute a valid run (a numerical or memory limit); the message says what to try."""


def explain_failure(error: BaseException) -> str:
    """An accountant's internal failure in words a user can act on (never the C++ message itself)."""
    text = str(error)
    if "internal error" in text:  # (the C++ core's own consistency checks, e.g. a NaN mass: a bug, never an answer)
        return "an internal consistency check failed (a bug in dpacct: please report it with the parameters)"
    if isinstance(error, MemoryError) or any(s in text for s in ("too fine", "loss cells", "max_size", "memory")):
        return "its grid would need too much memory (very small noise or a very long run)"
    if any(s in text for s in ("non-finite", "Chernoff", "overflow")):
        return "its tail bound overflowed (very small noise)"
    return "it hit a numerical limit"


def _query(acct: Accountant, accountant: str, query: Any, value: Any) -> Any:
    """``query(value)`` with internal failures turned into :class:`AccountingLimitError` (inputs are checked first)."""
    try:
        return query(value)
    except (ValueError, ArithmeticError, RuntimeError, MemoryError) as error:
        other = "pld" if accountant == "rdp" else "rdp"
        msg = f"the {accountant} accountant could not compute this run: {explain_failure(error)}; try accountant={other!r}"
        raise AccountingLimitError(msg) from error


class PoissonAssumptionWarning(UserWarning):
    """A shuffled run was accounted as if its batches were Poisson-sampled (not a guarantee)."""


def participations(*, sampling_probability: float, steps: int) -> int:
    """Most steps one record takes part in with shuffled or deterministic batches of fraction q.

    An epoch has at least ``floor(1/q)`` batches (``n // b`` with a dropped short last
    batch, ``ceil(n / b)`` without), and a record is in at most one batch per epoch, so
    ``steps`` steps touch it at most ``ceil(steps / floor(1/q))`` times; see
    :class:`dpacct.run.Run` for runs given in epochs (``ceil(epochs)`` participations).

    Examples
    --------
    >>> participations(sampling_probability=0.1, steps=30), participations(sampling_probability=0.1, steps=31)
    (3, 4)
    """
    return Run(sampling_probability=sampling_probability, steps=steps).participations("deterministic")


def resolve_run(
    *,
    sampling_probability: Any = None,
    steps: Any = None,
    epochs: Any = None,
    batch_size: Any = None,
    dataset_size: Any = None,
    drop_last: Any = False,
) -> Run:
    """The :class:`~dpacct.run.Run` from the one-call API's run keywords (checked)."""
    return Run.from_arguments(sampling_probability=sampling_probability, steps=steps, epochs=epochs,
                              batch_size=batch_size, dataset_size=dataset_size, drop_last=drop_last)


def accountant_for_run(
    run: Run,
    *,
    noise_multiplier: float,
    accountant: str = DEFAULT_ACCOUNTANT,
    sampler: str = "poisson",
    assume_poisson: bool = False,
    max_batch_size: int | None = None,
    **options: Any,
) -> Accountant:
    """An accountant holding ``run`` as drawn by ``sampler`` (see :func:`build_accountant`)."""
    sampler = _check.one_of("sampler", sampler, SAMPLERS)
    if not isinstance(assume_poisson, bool):
        msg = f"assume_poisson must be a bool, got {type(assume_poisson).__name__}"
        raise TypeError(msg)
    if assume_poisson and sampler != "shuffle":
        msg = f"assume_poisson applies only to sampler='shuffle', got sampler={sampler!r}"
        raise ValueError(msg)
    _check.one_of("accountant", accountant, _available())
    check_options(accountant, options, also_valid=_API_KEYWORDS)
    if (max_batch_size is None) != (sampler != "truncated_poisson"):
        msg = ("sampler='truncated_poisson' needs max_batch_size (the cap on the batch size)"
               if max_batch_size is None else
               f"max_batch_size applies only to sampler='truncated_poisson', got sampler={sampler!r}")
        raise ValueError(msg)
    if sampler == "truncated_poisson":
        if run.dataset_size is None:
            msg = "sampler='truncated_poisson' needs the dataset size: give epochs, batch_size and dataset_size"
            raise ValueError(msg)
        capped = TruncatedPoissonSampledGaussianMechanism(
            noise_multiplier=noise_multiplier, sampling_probability=run.sampling_probability,
            dataset_size=run.dataset_size, max_batch_size=max_batch_size)  # type: ignore[arg-type]
        made = make_accountant(accountant, **options)
        if not made.supports(capped):
            msg = f"the {accountant} accountant cannot account for sampler='truncated_poisson'; use accountant='pld'"
            raise ValueError(msg)
        return made.compose(capped, run.steps(sampler) if run.sampling_probability > 0.0 else 0)
    if sampler in ("fixed_size", "fixed_size_replacement"):
        replacement = sampler == "fixed_size_replacement"
        b, n = run.fixed_size_counts(replacement)
        fixed = FixedSizeSampledGaussianMechanism(noise_multiplier=noise_multiplier, batch_size=b, dataset_size=n,
                                                  replacement=replacement)
        made = make_accountant(accountant, **options)
        if not made.supports(fixed):
            msg = f"the {accountant} accountant cannot account for sampler={sampler!r}; use accountant='pld'"
            raise ValueError(msg)
        count = run.steps(sampler) if run.sampling_probability > 0.0 else 0
        return made.compose(fixed, count)
    if sampler == "poisson" or assume_poisson:
        mechanism: GaussianMechanism | PoissonSampledGaussianMechanism = PoissonSampledGaussianMechanism(
            noise_multiplier=noise_multiplier, sampling_probability=run.sampling_probability
        )
        count = run.steps("poisson")
        if run.sampling_probability == 0.0:
            count = 0  # nobody is ever sampled: epsilon and delta are exactly 0
        acct = make_accountant(accountant, **options).compose(mechanism, count)
    elif sampler == "balls_in_bins":
        from dpacct.samplers.allocation import BallsInBinsAccountant

        make_accountant(accountant, **options)  # the options are checked even though the method is fixed
        epoch = BallsInBinsGaussianMechanism(noise_multiplier=noise_multiplier,
                                             steps_per_epoch=max(1, run.batches_per_epoch()))
        acct = BallsInBinsAccountant().compose(epoch, run.participations(sampler))
    else:
        mechanism = GaussianMechanism(noise_multiplier=noise_multiplier, neighboring_relation="zero_out")
        make_accountant(accountant, **options)  # the options are checked even though the curve is exact
        acct = make_accountant("gaussian").compose(mechanism, run.participations(sampler))
    if assume_poisson:
        msg = (
            "sampler='shuffle' with assume_poisson=True: this is the Poisson-sampling number, "
            "which is NOT a privacy guarantee for shuffled batches (it can be far too small; "
            "Chua et al., ICML 2024). Use assume_poisson=False for the certified upper bound."
        )
        warnings.warn(msg, PoissonAssumptionWarning, stacklevel=4)
    return acct


def _available() -> tuple[str, ...]:
    from dpacct.accountant import available_accountants

    return available_accountants()


def build_accountant(
    *,
    noise_multiplier: float,
    sampling_probability: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    drop_last: bool = False,
    accountant: str = DEFAULT_ACCOUNTANT,
    sampler: str = "poisson",
    assume_poisson: bool = False,
    **options: Any,
) -> Accountant:
    """An accountant with a DP-SGD run composed.

    For ``sampler="poisson"`` (or ``"shuffle"`` with ``assume_poisson=True``, which warns)
    it is ``accountant`` holding the run's Poisson-subsampled Gaussian steps; for
    ``"deterministic"`` and ``"shuffle"`` it is the exact :class:`~dpacct.gaussian.GaussianAccountant`
    holding one zero-out Gaussian mechanism per participation of a record
    (:meth:`dpacct.run.Run.participations`), a certified upper bound for both (exact for
    deterministic). All arguments are validated before anything is computed; ``options``
    go to the accountant's constructor (e.g. ``orders=`` or ``conversion=`` for RDP) and
    an option it does not take is a ``ValueError``.
    """
    run = resolve_run(sampling_probability=sampling_probability, steps=steps, epochs=epochs,
                      batch_size=batch_size, dataset_size=dataset_size, drop_last=drop_last)
    _check.noise_multiplier(noise_multiplier)
    return accountant_for_run(run, noise_multiplier=noise_multiplier, accountant=accountant, sampler=sampler,
                              assume_poisson=assume_poisson, **options)


def epsilon(
    *,
    noise_multiplier: float,
    delta: ArrayLike,
    sampling_probability: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    drop_last: bool = False,
    accountant: str = DEFAULT_ACCOUNTANT,
    sampler: str = "poisson",
    assume_poisson: bool = False,
    **options: Any,
) -> float | NDArray[np.float64]:
    """Epsilon of a DP-SGD run, an upper bound.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, finite and ``> 0``.
    delta : float or array_like
        Target delta(s) in ``(0, 1)``.
    sampling_probability : float
        q = batch size / dataset size, in ``[0, 1]``: the Poisson inclusion
        probability, or the batch fraction for ``"shuffle"``/``"deterministic"``.
    steps : int
        Total number of noisy steps, ``>= 0``.
    epochs, batch_size, dataset_size : float, int, int
        Instead of ``sampling_probability`` and ``steps``: the run in epochs
        (``q = batch_size / dataset_size``; steps and participations per sampler as in
        :mod:`dpacct.run`).
    drop_last : bool
        With ``epochs``: whether each epoch drops a short last batch.
    accountant : str
        Accounting method for Poisson sampling, one of
        :func:`dpacct.available_accountants`: ``"pld"`` (the default, as on the command
        line: the certified upper bound of the privacy loss distribution, the tightest;
        :class:`~dpacct.pld.PLDAccountant`'s ``epsilon_bounds`` also gives the lower bound)
        or ``"rdp"`` (the Renyi DP bound: faster, looser).
    sampler : str
        How batches are drawn: ``"poisson"`` (add/remove adjacency), ``"shuffle"``,
        ``"balls_in_bins"`` or ``"deterministic"`` (zero-out adjacency; the Gaussian curve of the
        participations: exact for deterministic, an upper bound otherwise; balls-in-bins also
        through Renyi DP, the smaller), ``"fixed_size"`` or
        ``"fixed_size_replacement"``, ``"truncated_poisson"`` (add/remove; the accountant's
        bound; the last needs ``max_batch_size``); see :mod:`dpacct.api`.
    assume_poisson : bool
        Only with ``sampler="shuffle"``: return the Poisson number instead, with a
        :class:`PoissonAssumptionWarning` (it is not a guarantee for shuffled batches).
    **options
        Passed to the accountant (e.g. ``orders=``, ``conversion=`` for RDP); an option
        it does not take raises ``ValueError``.

    Returns
    -------
    float or ndarray
        An upper bound on epsilon: the run is (epsilon, delta)-DP (except with
        ``assume_poisson=True``). For ``"deterministic"`` it is exact (rounded up);
        for ``"shuffle"`` it is the deterministic value, and
        :func:`shuffle_epsilon_details` also gives the lower bound.

    Examples
    --------
    >>> round(epsilon(noise_multiplier=1.1, sampling_probability=256 / 60000, steps=10_000, delta=1e-5), 3)
    1.981
    >>> round(epsilon(noise_multiplier=1.1, sampling_probability=256 / 60000, steps=10_000, delta=1e-5,
    ...               accountant="rdp"), 3)
    2.162
    >>> round(epsilon(noise_multiplier=1.1, epochs=60, batch_size=256, dataset_size=60_000, delta=1e-5,
    ...               sampler="deterministic"), 2)
    54.05
    """
    d = _check.delta_array(delta)
    acct = build_accountant(
        noise_multiplier=noise_multiplier, sampling_probability=sampling_probability, steps=steps, epochs=epochs,
        batch_size=batch_size, dataset_size=dataset_size, drop_last=drop_last, accountant=accountant,
        sampler=sampler, assume_poisson=assume_poisson, **options,
    )
    result: float | NDArray[np.float64] = _query(acct, accountant, acct.get_epsilon, d)
    return result


def delta(
    *,
    noise_multiplier: float,
    epsilon: ArrayLike,
    sampling_probability: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    drop_last: bool = False,
    accountant: str = DEFAULT_ACCOUNTANT,
    sampler: str = "poisson",
    assume_poisson: bool = False,
    **options: Any,
) -> float | NDArray[np.float64]:
    """Delta of a DP-SGD run at the given epsilon(s), an upper bound.

    Parameters are as in :func:`dpacct.epsilon`, with ``epsilon`` (finite, ``>= 0``)
    in place of ``delta``.

    Returns
    -------
    float or ndarray
        An upper bound on delta: the run is (epsilon, delta)-DP (exact for
        ``sampler="deterministic"``).
    """
    e = _check.epsilon_array(epsilon)
    acct = build_accountant(
        noise_multiplier=noise_multiplier, sampling_probability=sampling_probability, steps=steps, epochs=epochs,
        batch_size=batch_size, dataset_size=dataset_size, drop_last=drop_last, accountant=accountant,
        sampler=sampler, assume_poisson=assume_poisson, **options,
    )
    result: float | NDArray[np.float64] = _query(acct, accountant, acct.get_delta, e)
    return result


def shuffle_lower_bound(run: Run, *, noise_multiplier: float, delta: float | None = None,
                        epsilon: float | None = None) -> tuple[float, str]:
    """The shuffle lower bound on epsilon (given ``delta``) or delta (given ``epsilon``) for ``run``.

    Uses every complete epoch of the run (:meth:`dpacct.run.Run.full_epochs`), each of
    :meth:`~dpacct.run.Run.lower_bound_batches_per_epoch` batches, with a fresh
    permutation per epoch; 0 when the run is shorter than one epoch. The same count is
    used by ``dpacct compare``, ``dpacct epsilon --sampler shuffle`` and ``dpacct delta``.

    Returns
    -------
    (float, str)
        The lower bound and how it was computed.
    """
    from dpacct import samplers as ablq  # local: samplers import the accountants, keep api light

    sigma = _check.noise_multiplier(noise_multiplier)
    batches = run.lower_bound_batches_per_epoch()
    epochs = run.full_epochs()
    if batches == 0 or epochs == 0:
        return 0.0, "none: the run is shorter than one epoch"
    if delta is not None:
        bound = ablq.epsilon_shuffle_lower(noise_multiplier=sigma, steps=batches, epochs=epochs, delta=delta)
    else:
        bound = ablq.delta_shuffle_lower(noise_multiplier=sigma, steps=batches, epochs=epochs,
                                         epsilon=_check.epsilon(epsilon))
    return float(bound), f"shuffle lower bound, {epochs} full epoch(s) of T={batches} batches, fresh permutations"


def shuffle_epsilon_details(
    *,
    noise_multiplier: float,
    delta: float,
    sampling_probability: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    drop_last: bool = False,
    accountant: str = DEFAULT_ACCOUNTANT,
    **options: Any,
) -> dict[str, Any]:
    """The honest epsilon interval of a shuffled DP-SGD run, for reports and the CLI.

    Parameters are as in :func:`dpacct.epsilon` (one ``delta``).

    Returns
    -------
    dict
        ``epsilon``: certified upper bound (deterministic batches dominate shuffling:
        the exact Gaussian curve of the participations); ``epsilon_lower_bound``: the
        shuffle lower bound of :func:`shuffle_lower_bound` over the run's complete
        epochs (0 if the run is shorter than one epoch); ``kind`` and ``lower_bound_method``.
    """
    d = _check.delta(delta)
    run = resolve_run(sampling_probability=sampling_probability, steps=steps, epochs=epochs,
                      batch_size=batch_size, dataset_size=dataset_size, drop_last=drop_last)
    acct = accountant_for_run(run, noise_multiplier=noise_multiplier, accountant=accountant, sampler="shuffle",
                              **options)
    upper = float(acct.get_epsilon(d))
    lower, method = shuffle_lower_bound(run, noise_multiplier=noise_multiplier, delta=d)
    return {
        "epsilon": upper,
        "kind": "upper bound (deterministic batches dominate shuffling)",
        "epsilon_lower_bound": min(lower, upper),
        "lower_bound_method": method,
    }
