"""The Gaussian mechanism's exact privacy curve.

For a query of L2 sensitivity 1 released with N(0, noise_multiplier^2) noise, the
(epsilon, delta) guarantees are given exactly by the curve of Balle & Wang (2018).
The same curve is the k-fold composition of Gaussians with noise multipliers
``s_i`` once ``noise_multiplier = (sum s_i^-2)^-1/2`` (see :func:`composed_noise_multiplier`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

import math
from typing import Any

from dpacct import _check, _core
from dpacct._shape import unwrap
from dpacct.accountant import Accountant
from dpacct.mechanisms import GaussianMechanism, Mechanism

__all__ = [
    "GaussianAccountant",
    "composed_noise_multiplier",
    "delta_for_epsilon",
    "epsilon_for_delta",
    "log_delta_for_epsilon",
]


def log_delta_for_epsilon(*, noise_multiplier: float, epsilon: ArrayLike) -> float | NDArray[np.float64]:
    r"""Natural log of the exact delta(epsilon) of the Gaussian mechanism.

    Useful when delta underflows (below 1e-308); see :func:`delta_for_epsilon`.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    epsilon : float or array_like
        One or more epsilons, each finite and ``>= 0``.

    Returns
    -------
    float or ndarray
        ``log delta(epsilon)``: exact up to floating point (relative error of
        delta about 1e-13).
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    eps = _check.epsilon_array(epsilon)
    return unwrap(_core.gaussian.log_delta(sigma, eps))


def delta_for_epsilon(*, noise_multiplier: float, epsilon: ArrayLike) -> float | NDArray[np.float64]:
    r"""Exact delta(epsilon) of the Gaussian mechanism.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    epsilon : float or array_like
        One or more epsilons, each finite and ``>= 0``.

    Returns
    -------
    float or ndarray
        The smallest delta for which the mechanism is (epsilon, delta)-DP:
        exact up to floating point (relative error about 1e-13).

    Notes
    -----
    .. math:: \delta(\varepsilon) = \Phi\left(-\varepsilon\sigma + \frac{1}{2\sigma}\right)
              - e^{\varepsilon}\,\Phi\left(-\varepsilon\sigma - \frac{1}{2\sigma}\right)

    evaluated as a difference of logarithms so that it keeps its digits in the
    far tail.

    References
    ----------
    .. [1] B. Balle and Y.-X. Wang, "Improving the Gaussian Mechanism for
       Differential Privacy: Analytical Calibration and Optimal Denoising",
       ICML 2018, arXiv:1805.06530 (v2), Theorem 8.

    Examples
    --------
    >>> round(delta_for_epsilon(noise_multiplier=1.0, epsilon=1.0), 12)
    0.126936737507
    """
    with np.errstate(under="ignore"):  # exp(log delta) may underflow to 0: that is the answer
        return unwrap(np.exp(np.asarray(log_delta_for_epsilon(noise_multiplier=noise_multiplier, epsilon=epsilon))))


def epsilon_for_delta(*, noise_multiplier: float, delta: ArrayLike) -> float | NDArray[np.float64]:
    """Smallest epsilon for which the Gaussian mechanism is (epsilon, delta)-DP.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    delta : float or array_like
        One or more deltas in ``(0, 1)``.

    Returns
    -------
    float or ndarray
        An upper bound on the exact inverse of :func:`delta_for_epsilon`: bisection
        to relative tolerance 1e-14, aimed at ``delta * (1 - 1e-9)`` to absorb the
        curve's evaluation error, so the true delta at the result is ``<= delta``.

    Examples
    --------
    >>> round(epsilon_for_delta(noise_multiplier=1.0, delta=1e-5), 6)
    4.377178
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    d = _check.delta_array(delta)
    return unwrap(_core.gaussian.epsilon(sigma, d))


def composed_noise_multiplier(noise_multipliers: ArrayLike) -> float:
    r"""Noise multiplier of the single Gaussian equal to a composition of Gaussians.

    The composition of Gaussian mechanisms with noise multipliers
    :math:`\sigma_1, \dots, \sigma_k` is exactly the Gaussian mechanism with
    :math:`\sigma_{\mathrm{eff}} = (\sum_i \sigma_i^{-2})^{-1/2}` (Dong, Roth, Su,
    "Gaussian Differential Privacy", arXiv:1905.02383 (v3), Corollary 3.3).

    Examples
    --------
    >>> composed_noise_multiplier([2.0, 2.0, 2.0, 2.0])
    1.0
    """
    sigmas = np.atleast_1d(np.asarray(noise_multipliers, dtype=np.float64))
    for index, s in enumerate(sigmas):
        if not (s > 0.0 and np.isfinite(s)):
            msg = f"noise_multipliers must all be finite and > 0, got {float(s)!r} at index {index}"
            raise ValueError(msg)
    return float(np.sum(sigmas**-2.0) ** -0.5)


class GaussianAccountant(Accountant):
    r"""Exact accountant for compositions of Gaussian mechanisms (no subsampling).

    k Gaussian mechanisms with noise multipliers :math:`\sigma_i` compose to exactly one
    Gaussian with :func:`composed_noise_multiplier`, whose curve is
    :func:`delta_for_epsilon`. This is what deterministic batches give (each record in
    one batch per epoch; zero-out adjacency), and a certified upper bound for shuffled
    batches. Every other accountant's bound for such a history is at least this one.

    Examples
    --------
    >>> acct = GaussianAccountant().compose(GaussianMechanism(noise_multiplier=2.0), 4)
    >>> round(acct.get_epsilon(1e-5), 6) == round(epsilon_for_delta(noise_multiplier=1.0, delta=1e-5), 6)
    True
    """

    name = "gaussian"

    def supports(self, mechanism: Mechanism) -> bool:
        """Only plain Gaussian mechanisms (any neighbouring relation)."""
        return isinstance(mechanism, GaussianMechanism)

    def _compose(self, mechanism: Mechanism, count: int) -> None:
        """Nothing to precompute: the effective noise multiplier is derived from the history."""

    @property
    def effective_noise_multiplier(self) -> float:
        r""":math:`(\sum_i \sigma_i^{-2})^{-1/2}` over the history (``inf`` when it is empty)."""
        precision = math.fsum(
            count / mech.effective_noise_multiplier**2
            for mech, count in self._history
            if isinstance(mech, GaussianMechanism)
        )
        return math.inf if precision == 0.0 else precision**-0.5

    def get_epsilon(self, delta: ArrayLike) -> float | NDArray[np.float64]:
        """Exact epsilon (rounded up) for each ``delta`` in ``(0, 1)``; 0 for an empty history."""
        d = _check.delta_array(delta)
        sigma = self.effective_noise_multiplier
        if math.isinf(sigma):
            return unwrap(np.zeros_like(d))
        return epsilon_for_delta(noise_multiplier=sigma, delta=d)

    def get_delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        """Exact delta for each finite ``epsilon >= 0``; 0 for an empty history."""
        e = _check.epsilon_array(epsilon)
        sigma = self.effective_noise_multiplier
        if math.isinf(sigma):
            return unwrap(np.zeros_like(e))
        return delta_for_epsilon(noise_multiplier=sigma, epsilon=e)

    def get_epsilon_details(self, delta: float) -> dict[str, Any]:
        """Epsilon with its kind (exact) and the effective noise multiplier."""
        return {"epsilon": float(self.get_epsilon(delta)), "kind": "exact",
                "effective_noise_multiplier": self.effective_noise_multiplier}
