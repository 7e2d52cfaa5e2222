r"""Shuffled batches (ABLQ): the shuffle lower bound, the deterministic upper bound and their interval.

See :mod:`dpacct.samplers` for the overview.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpacct import _check, _core
from dpacct._shape import unwrap
from dpacct.samplers.bounds import (
    PERMUTATIONS,
    Bound,
    Quantity,
    ShuffleInterval,
    _setting,
    delta_deterministic,
    epsilon_deterministic,
)
from dpacct.samplers.shuffle_fresh import delta_shuffle_lower_fresh, epsilon_shuffle_lower_fresh

__all__ = [
    "delta_shuffle_lower",
    "delta_shuffle_upper",
    "epsilon_shuffle_lower",
    "epsilon_shuffle_upper",
    "shuffle_interval",
]


# -- shuffle ---------------------------------------------------------------------------------


def _shuffle_sigma(sigma: float, epochs: int, permutation: Any) -> float:
    _check.one_of("permutation", permutation, PERMUTATIONS)
    # Same permutation every epoch: a record sits at the same position each epoch, so
    # the E noisy answers at that position add up (a sufficient statistic) to one
    # epoch with noise sigma/sqrt(E). (Only used for "same", or for one epoch.)
    return sigma / math.sqrt(epochs)


def _fresh(epochs: int, permutation: Any) -> bool:
    """Whether the fresh-permutation bound applies: several epochs, each with a new permutation."""
    _check.one_of("permutation", permutation, PERMUTATIONS)
    return permutation == "fresh" and epochs > 1


_FRESH_METHOD = ("max statistic max_t w_t of each epoch, its optimistic PLD composed E times "
                 "(Chua et al., NeurIPS 2024), T={steps}, E={epochs} (fresh permutation)")


def delta_shuffle_lower(
    *, noise_multiplier: float, steps: int, epsilon: ArrayLike, epochs: int = 1, permutation: str = "fresh"
) -> Bound:
    r"""A lower bound on delta(epsilon) of ABLQ with shuffled batches.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    steps : int
        Batches per epoch ``T >= 1`` (``n = b T`` records).
    epsilon : float or array_like
        Finite epsilons ``>= 0``.
    epochs : int
        Epochs ``E >= 1``.
    permutation : {"fresh", "same"}
        ``"fresh"`` (default): a new permutation every epoch; for ``E > 1`` the bound is
        the hockey-stick divergence of the E-fold product of each epoch's max-statistic
        pair, from an optimistic PLD (:mod:`dpacct.pld.discrete`), a lower bound.
        ``"same"``: one permutation reused every epoch, which is exactly one epoch with
        ``noise_multiplier / sqrt(E)``. For one epoch both are the single-epoch bound
        below.

    Returns
    -------
    Bound
        ``kind="lower bound"``: the run is not (epsilon, delta)-DP for any smaller
        delta. ``threshold`` holds the maximising ``C``.

    Notes
    -----
    With :math:`P_S(E_C) = 1 - \Phi((C-2)/\sigma)\Phi(C/\sigma)^{T-1}` and
    :math:`Q_S(E_C) = 1 - \Phi((C-1)/\sigma)\Phi(C/\sigma)^{T-1}`,

    .. math:: \delta_S(\varepsilon) \ge \max_C \left[P_S(E_C) - e^{\varepsilon} Q_S(E_C)\right].

    The paper scans ``C`` on a 0.01 grid over ``[0, 100]``; here ``C`` is maximised
    continuously in C++ (branch and bound over a range containing ``[0, 100]``, then
    golden-section refinement), in log space so that ``T`` up to ``1e7`` and beyond
    works. The logs of P and Q are moved by ``1e-13 (1 + |log|)`` against the bound
    before subtracting (a floating-point safety margin, about 500 ulp).

    References
    ----------
    .. [1] L. Chua et al., "How Private are DP-SGD Implementations?", ICML 2024,
       arXiv:2403.17673, Section 3.

    Examples
    --------
    >>> round(float(delta_shuffle_lower(noise_multiplier=0.4, steps=10_000, epsilon=4.0)), 4)
    0.2261
    """
    sigma, t, e = _setting(noise_multiplier, steps, epochs)
    eps = _check.epsilon_array(epsilon)
    if _fresh(e, permutation):
        fresh = delta_shuffle_lower_fresh(noise_multiplier=sigma, steps=t, epochs=e, epsilon=eps)
        return Bound(value=fresh, quantity="delta", kind="lower bound", sampler="shuffle",
                     method=_FRESH_METHOD.format(steps=t, epochs=e))
    s = _shuffle_sigma(sigma, e, permutation)
    log_delta, threshold = _core.samplers.log_delta_lower(s, float(t), eps)
    with np.errstate(under="ignore"):  # exp(log delta) may underflow to 0: still a lower bound
        value = np.exp(log_delta)
    return Bound(value=unwrap(value), quantity="delta", kind="lower bound", sampler="shuffle",
                 method=_shuffle_method(t, e, permutation), threshold=unwrap(threshold))


def epsilon_shuffle_lower(
    *, noise_multiplier: float, steps: int, delta: ArrayLike, epochs: int = 1, permutation: str = "fresh"
) -> Bound:
    r"""A lower bound on epsilon(delta) of ABLQ with shuffled batches.

    Parameters are as in :func:`delta_shuffle_lower`, with ``delta`` (in ``(0, 1)``)
    in place of ``epsilon``.

    Returns
    -------
    Bound
        ``kind="lower bound"``: the run is not (eps, delta)-DP for any eps below it.

    Notes
    -----
    The lower bound on delta is decreasing in epsilon, and for one ``C`` it is at least
    ``delta`` exactly when :math:`\varepsilon \le \log((P_S(E_C) - \delta)/Q_S(E_C))`.
    So the root of ``max_C [P_S - e^eps Q_S] = delta`` is
    :math:`\sup_C \log((P_S(E_C) - \delta)/Q_S(E_C))`, which is maximised directly over
    ``C`` (the same search as :func:`delta_shuffle_lower`) instead of nesting a root
    finder around that search; the tests check that both agree.

    Examples
    --------
    >>> round(float(epsilon_shuffle_lower(noise_multiplier=0.4, steps=100_000, delta=1e-6)), 2)
    14.45
    """
    sigma, t, e = _setting(noise_multiplier, steps, epochs)
    d = _check.delta_array(delta)
    if _fresh(e, permutation):
        fresh = epsilon_shuffle_lower_fresh(noise_multiplier=sigma, steps=t, epochs=e, delta=d)
        return Bound(value=fresh, quantity="epsilon", kind="lower bound", sampler="shuffle",
                     method=_FRESH_METHOD.format(steps=t, epochs=e))
    s = _shuffle_sigma(sigma, e, permutation)
    value, threshold = _core.samplers.epsilon_lower(s, float(t), d)
    return Bound(value=unwrap(value), quantity="epsilon", kind="lower bound", sampler="shuffle",
                 method=_shuffle_method(t, e, permutation), threshold=unwrap(threshold))


def _shuffle_method(steps: int, epochs: int, permutation: str) -> str:
    scheme = f"{permutation} permutation" if epochs > 1 else "one epoch"
    return f"events max_t w_t >= C, continuous C, T={steps}, E={epochs} ({scheme})"


def delta_shuffle_upper(*, noise_multiplier: float, steps: int, epsilon: ArrayLike, epochs: int = 1) -> Bound:
    """A certified upper bound on delta(epsilon) of ABLQ with shuffled batches.

    Shuffling never does worse than deterministic batches (Chua et al. 2024, arXiv:2403.17673):
    the deterministic curve with ``noise_multiplier / sqrt(E)`` bounds it from above for
    any permutation scheme. ``steps`` is validated but does not enter the bound.

    Returns
    -------
    Bound
        ``kind="upper bound"``: the run is (epsilon, delta)-DP with this delta.
    """
    _setting(noise_multiplier, steps, epochs)
    exact = delta_deterministic(noise_multiplier=noise_multiplier, epsilon=epsilon, epochs=epochs)
    return Bound(value=exact.value, quantity="delta", kind="upper bound", sampler="shuffle",
                 method=f"deterministic batches dominate shuffling: {exact.method}")


def epsilon_shuffle_upper(*, noise_multiplier: float, steps: int, delta: ArrayLike, epochs: int = 1) -> Bound:
    """A certified upper bound on epsilon(delta) of ABLQ with shuffled batches.

    The deterministic epsilon (rounded up); see :func:`delta_shuffle_upper`.

    Returns
    -------
    Bound
        ``kind="upper bound"``: the run is (epsilon, delta)-DP with this epsilon.
    """
    _setting(noise_multiplier, steps, epochs)
    exact = epsilon_deterministic(noise_multiplier=noise_multiplier, delta=delta, epochs=epochs)
    return Bound(value=exact.value, quantity="epsilon", kind="upper bound", sampler="shuffle",
                 method=f"deterministic batches dominate shuffling: {exact.method}")


def shuffle_interval(
    *,
    noise_multiplier: float,
    steps: int,
    delta: ArrayLike | None = None,
    epsilon: ArrayLike | None = None,
    epochs: int = 1,
    permutation: str = "fresh",
) -> ShuffleInterval:
    """The honest interval for shuffled batches: [shuffle lower bound, deterministic upper bound].

    Give exactly one of ``delta`` (for an epsilon interval) or ``epsilon`` (for a delta
    interval); other parameters as in :func:`delta_shuffle_lower`.

    Returns
    -------
    ShuffleInterval
        ``lower`` (a lower bound) and ``upper`` (a certified upper bound).

    Examples
    --------
    >>> i = shuffle_interval(noise_multiplier=0.4, steps=10_000, epsilon=4.0)
    >>> round(float(i.lower), 3), round(float(i.upper), 3)
    (0.226, 0.244)
    """
    _one_target(delta, epsilon)
    if epsilon is not None:
        return ShuffleInterval(
            lower=delta_shuffle_lower(noise_multiplier=noise_multiplier, steps=steps, epsilon=epsilon,
                                      epochs=epochs, permutation=permutation),
            upper=delta_shuffle_upper(noise_multiplier=noise_multiplier, steps=steps, epsilon=epsilon, epochs=epochs),
        )
    assert delta is not None  # narrowed by _one_target
    return ShuffleInterval(
        lower=epsilon_shuffle_lower(noise_multiplier=noise_multiplier, steps=steps, delta=delta,
                                    epochs=epochs, permutation=permutation),
        upper=epsilon_shuffle_upper(noise_multiplier=noise_multiplier, steps=steps, delta=delta, epochs=epochs),
    )


def _one_target(delta: object, epsilon: object) -> Quantity:
    """Which quantity is asked for: ``"epsilon"`` when ``delta`` is given, ``"delta"`` otherwise."""
    if (delta is None) == (epsilon is None):
        msg = "give exactly one of delta (to compare epsilons) or epsilon (to compare deltas)"
        raise ValueError(msg)
    return "epsilon" if delta is not None else "delta"
