r"""Classic :math:`(\varepsilon, \delta)` composition, amplification by sampling, and DP dropout.

* :func:`basic_composition`, :func:`advanced_composition` (Dwork, Rothblum, Vadhan;
  Dwork & Roth Thm 3.20) and the tight :func:`optimal_composition_delta` /
  :func:`optimal_composition_epsilon` for k-fold homogeneous composition (Kairouz, Oh,
  Viswanath 2015, Thm 3.3), evaluated exactly in log space.
* :func:`poisson_subsampling`: amplification by Poisson sampling (Li, Qardaji, Su 2012).
* DP dropout lives in :mod:`dpacct.dropout`; its names are re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from dpacct import _check
from dpacct._shape import unwrap

__all__ = [
    "DPD_ACCOUNTINGS",
    "DropoutCalibration",
    "DropoutRates",
    "EpsilonDelta",
    "advanced_composition",
    "basic_composition",
    "classical_gaussian_noise_multiplier",
    "DPD_PAPER_METHODS",
    "PAPER_KIND",
    "dpd_ac_noise_multiplier",
    "dpd_paper_noise_multiplier",
    "dpd_zcdp_noise_multiplier",
    "dropout_rates",
    "optimal_composition_delta",
    "optimal_composition_epsilon",
    "poisson_subsampling",
]

# Relative slack added to values computed in log space (log-binomials from gammaln
# carry an absolute error of ~1e-16 * k log k, i.e. <= 1e-10 for k <= 1e5).
_LOG_SPACE_SLACK = 1e-9
_UP = 1.0 + 8.0 * float(np.finfo(np.float64).eps)


class EpsilonDelta(NamedTuple):
    """An :math:`(\\varepsilon, \\delta)`-DP guarantee (both upper bounds)."""

    epsilon: float
    delta: float


def _eps_delta(epsilon: Any, delta: Any) -> tuple[float, float]:
    eps = _check.epsilon(epsilon)
    d = _check.real("delta", delta)
    if not 0.0 <= d <= 1.0:
        msg = f"delta must be in [0, 1], got {d!r}"
        raise ValueError(msg)
    return eps, d


def _mul_up(k: int, x: float) -> float:
    """``k * x`` rounded up (exact check in rationals: the float product may round down)."""
    product = k * x
    if math.isfinite(product) and Fraction(product) < k * Fraction(x):
        return math.nextafter(product, math.inf)
    return product


def basic_composition(*, epsilon: float, delta: float, count: int) -> EpsilonDelta:
    r"""k-fold composition by the basic theorem: :math:`(k\varepsilon, k\delta)`.

    Parameters
    ----------
    epsilon : float
        Per-mechanism epsilon, finite and ``>= 0``.
    delta : float
        Per-mechanism delta in ``[0, 1]``.
    count : int
        Number k of mechanisms, ``>= 0``.

    Returns
    -------
    EpsilonDelta
        A valid guarantee (delta capped at 1). Dwork & Roth 2014, Theorem 3.16.

    Examples
    --------
    >>> r = basic_composition(epsilon=0.1, delta=1e-6, count=10)
    >>> round(r.epsilon, 12), round(r.delta, 12)
    (1.0, 1e-05)
    """
    eps, d = _eps_delta(epsilon, delta)
    k = _check.count("count", count)
    return EpsilonDelta(_mul_up(k, eps), min(1.0, _mul_up(k, d)))


def advanced_composition(*, epsilon: float, delta: float, count: int, delta_slack: float) -> EpsilonDelta:
    r"""k-fold composition by the advanced composition theorem.

    Parameters
    ----------
    epsilon : float
        Per-mechanism epsilon, finite and ``>= 0``.
    delta : float
        Per-mechanism delta in ``[0, 1]``.
    count : int
        Number k of mechanisms, ``>= 0``.
    delta_slack : float
        The extra :math:`\delta' \in (0, 1)` spent by the theorem.

    Returns
    -------
    EpsilonDelta
        :math:`(\varepsilon\sqrt{2k\log(1/\delta')} + k\varepsilon(e^\varepsilon - 1),\;
        k\delta + \delta')`, a valid guarantee (epsilon rounded up, delta capped at 1).

    References
    ----------
    .. [1] C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and Differential Privacy",
       FOCS 2010; C. Dwork and A. Roth, "The Algorithmic Foundations of Differential
       Privacy", 2014, Theorem 3.20.

    Examples
    --------
    >>> r = advanced_composition(epsilon=0.01, delta=0.0, count=1000, delta_slack=1e-5)
    >>> round(r.epsilon, 6), round(r.delta, 12)
    (1.617929, 1e-05)
    """
    eps, d = _eps_delta(epsilon, delta)
    k = _check.count("count", count)
    slack = _check.real("delta_slack", delta_slack)
    if not 0.0 < slack < 1.0:
        msg = f"delta_slack must be in (0, 1), got {slack!r}"
        raise ValueError(msg)
    value = eps * math.sqrt(2.0 * k * math.log(1.0 / slack)) + k * eps * math.expm1(eps)
    return EpsilonDelta(value * _UP, min(1.0, (_mul_up(k, d) + slack) * _UP))


def _randomized_response(eps: float, k: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """log P(l) and privacy loss (k - 2l) eps of k-fold randomized response, l = 0..k."""
    l = np.arange(k + 1, dtype=np.float64)
    log_binom = special.gammaln(k + 1.0) - special.gammaln(l + 1.0) - special.gammaln(k - l + 1.0)
    # P(l) = C(k, l) e^{(k-l) eps} / (1 + e^eps)^k, in log space (no overflow for k eps up to ~1e308).
    log_p = log_binom + (k - l) * eps - k * np.logaddexp(0.0, eps)
    return log_p, (k - 2.0 * l) * eps


def _optimal_delta(eps: float, d: float, k: int, rr: tuple[NDArray[np.float64], NDArray[np.float64]],
                   total_epsilon: NDArray[np.float64]) -> NDArray[np.float64]:
    log_p, loss = rr
    log_pure = np.empty(total_epsilon.shape, dtype=np.float64)
    for index, eg in enumerate(total_epsilon.ravel()):
        positive = loss > eg
        if not positive.any():
            log_pure.ravel()[index] = -np.inf
            continue
        # max(0, 1 - e^{eg - loss}) in log space: log(-expm1(eg - loss)) keeps its digits near loss = eg.
        terms = log_p[positive] + np.log(-np.expm1(eg - loss[positive]))
        log_pure.ravel()[index] = special.logsumexp(terms)
    log_pure = np.minimum(log_pure, 0.0)  # delta_pure <= 1; rounding of logsumexp may overshoot by an ulp
    log_keep = k * math.log1p(-d) if d < 1.0 else -math.inf
    # 1 - (1-delta)^k (1 - delta_pure), as -expm1(log of the product) to keep small deltas.
    with np.errstate(divide="ignore"):  # log1p(-1) = -inf when delta_pure = 1: the product is 0, delta = 1
        log_product = log_keep + np.log1p(-np.exp(log_pure))
    value: NDArray[np.float64] = np.minimum(1.0, -np.expm1(log_product) * (1.0 + _LOG_SPACE_SLACK))
    return value


def optimal_composition_delta(
    *, epsilon: float, delta: float, count: int, total_epsilon: ArrayLike
) -> float | NDArray[np.float64]:
    r"""Exact delta of the k-fold composition of :math:`(\varepsilon, \delta)`-DP mechanisms at ``total_epsilon``.

    Parameters
    ----------
    epsilon : float
        Per-mechanism epsilon, finite and ``>= 0``.
    delta : float
        Per-mechanism delta in ``[0, 1]``.
    count : int
        Number k of mechanisms, ``>= 0``.
    total_epsilon : float or array_like
        Epsilons of the composition, finite and ``>= 0``.

    Returns
    -------
    float or ndarray
        The smallest delta such that every k-fold composition of
        :math:`(\varepsilon, \delta)`-DP mechanisms is (total_epsilon, delta)-DP:
        exact, rounded up by a relative 1e-9 (the accuracy of the log-binomials).

    Notes
    -----
    Kairouz, Oh and Viswanath (ICML 2015, arXiv:1311.0776 (v4), Theorem 3.3) show
    the composition's privacy region is that of k-fold randomized response; at
    :math:`\varepsilon_g = (k - 2i)\varepsilon` it is

    .. math:: \delta_i = 1 - (1-\delta)^k \Bigl(1 - \frac{\sum_{l=0}^{i-1} \binom{k}{l}
              \bigl(e^{(k-l)\varepsilon} - e^{(k-2i+l)\varepsilon}\bigr)}{(1+e^\varepsilon)^k}\Bigr),

    and between those points the hockey-stick divergence of the binomial pair,
    :math:`\sum_l \binom{k}{l} \max(0, e^{(k-l)\varepsilon} - e^{\varepsilon_g + l\varepsilon})
    / (1+e^\varepsilon)^k` (Murtagh & Vadhan, TCC 2016, arXiv:1507.03113, Theorem 1.5),
    which is what is computed, term by term in log space (``gammaln`` binomials,
    ``logsumexp``), so k of 10^4 and more neither overflows nor cancels.

    Examples
    --------
    >>> round(optimal_composition_delta(epsilon=1.0, delta=0.0, count=1, total_epsilon=0.0), 8)  # tanh(1/2)
    0.46211716
    """
    eps, d = _eps_delta(epsilon, delta)
    k = _check.count("count", count)
    eg = _check.epsilon_array(total_epsilon)
    if k == 0:
        return unwrap(np.zeros_like(eg))
    return unwrap(_optimal_delta(eps, d, k, _randomized_response(eps, k), eg))


def optimal_composition_epsilon(*, epsilon: float, delta: float, count: int, total_delta: float) -> float:
    r"""Smallest epsilon of the k-fold composition of :math:`(\varepsilon, \delta)`-DP at ``total_delta``.

    Parameters
    ----------
    epsilon, delta, count
        As in :func:`optimal_composition_delta`.
    total_delta : float
        Target delta of the composition, in ``(0, 1)``.

    Returns
    -------
    float
        An upper bound on the optimal epsilon (bisection on the exact, decreasing
        :func:`optimal_composition_delta` to absolute 1e-12, returning the end whose
        delta is ``<= total_delta``); ``inf`` if even ``k * epsilon`` does not reach
        ``total_delta`` (i.e. ``1 - (1-delta)^k > total_delta``).

    Examples
    --------
    >>> round(optimal_composition_epsilon(epsilon=0.01, delta=0.0, count=1000, total_delta=1e-5), 4)
    1.1977
    """
    eps, d = _eps_delta(epsilon, delta)
    k = _check.count("count", count)
    target = _check.delta(total_delta)
    if k == 0:
        return 0.0

    rr = _randomized_response(eps, k)

    def fits(eg: float) -> bool:
        return float(_optimal_delta(eps, d, k, rr, np.array([eg]))[0]) <= target

    high = k * eps
    if not fits(high):
        return math.inf
    if fits(0.0):
        return 0.0
    low = 0.0
    while high - low > 1e-12 * max(1.0, high):
        mid = 0.5 * (low + high)
        if fits(mid):
            high = mid
        else:
            low = mid
    return high


def poisson_subsampling(*, epsilon: float, delta: float, sampling_probability: float) -> EpsilonDelta:
    r"""Amplification by Poisson subsampling: :math:`(\log(1 + \nu(e^\varepsilon - 1)), \nu\delta)`.

    Parameters
    ----------
    epsilon : float
        Epsilon of the mechanism on the subsample, finite and ``>= 0``.
    delta : float
        Its delta, in ``[0, 1]``.
    sampling_probability : float
        Inclusion probability :math:`\nu \in [0, 1]` of each record.

    Returns
    -------
    EpsilonDelta
        A valid guarantee of the subsampled mechanism (add/remove adjacency).

    References
    ----------
    .. [1] N. Li, W. Qardaji, D. Su, "On Sampling, Anonymization, and Differential
       Privacy", ASIACCS 2012, arXiv:1101.2604 (v2), Theorem 1.

    Examples
    --------
    >>> r = poisson_subsampling(epsilon=1.0, delta=1e-5, sampling_probability=0.01)
    >>> round(r.epsilon, 8), round(r.delta, 12)
    (0.01703686, 1e-07)
    """
    eps, d = _eps_delta(epsilon, delta)
    nu = _check.probability("sampling_probability", sampling_probability)
    return EpsilonDelta(math.log1p(nu * math.expm1(eps)) * _UP, nu * d)


def classical_gaussian_noise_multiplier(*, epsilon: float, delta: float) -> float:
    r"""The classical Gaussian calibration :math:`\sigma = \sqrt{2\log(1.25/\delta)}/\varepsilon`, for :math:`\varepsilon < 1`.

    Dwork & Roth 2014, Theorem A.1: valid only for :math:`0 < \varepsilon < 1`
    (outside it, use :func:`dpacct.calibrate` or the exact Gaussian curve).

    Returns
    -------
    float
        A noise multiplier that makes the Gaussian mechanism (epsilon, delta)-DP (rounded up).

    Examples
    --------
    >>> round(classical_gaussian_noise_multiplier(epsilon=0.5, delta=1e-5), 6)
    9.689611
    """
    eps = _check.real("epsilon", epsilon)
    if not 0.0 < eps < 1.0:
        msg = f"epsilon must be in (0, 1) for the classical Gaussian calibration, got {eps!r}"
        raise ValueError(msg)
    d = _check.delta(delta)
    return math.sqrt(2.0 * math.log(1.25 / d)) / eps * _UP


# DP dropout moved to dpacct.dropout; its names stay importable from here.
from dpacct.dropout import (  # noqa: E402  (after the helpers dpacct.dropout imports from this module)
    DPD_ACCOUNTINGS,
    DPD_PAPER_METHODS,
    PAPER_KIND,
    DropoutCalibration,
    DropoutRates,
    dpd_ac_noise_multiplier,
    dpd_paper_noise_multiplier,
    dpd_zcdp_noise_multiplier,
    dropout_rates,
)
