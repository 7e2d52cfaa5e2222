r"""Gaussian differential privacy (mu-GDP): exact conversions and the (heuristic) CLT for DP-SGD.

A mechanism is mu-GDP when its trade-off function is at least
``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)`` (Dong, Roth, Su, "Gaussian
Differential Privacy", JRSS-B 2022, arXiv:1905.02383, Definition 2.6). The
Gaussian mechanism with noise multiplier ``s`` is exactly ``(1/s)``-GDP and
compositions add ``mu^2`` (their Corollary 3.3), so every function here except
the ``*_approx`` ones is exact.

The central limit theorem of Bu, Dong, Long, Su ("Deep Learning with Gaussian
Differential Privacy", Harvard Data Science Review 2020, arXiv:1911.11607,
Theorem 5 / eq. (6)) approximates ``T`` steps of Poisson-subsampled DP-SGD by
``mu = q sqrt(T (e^{1/s^2} - 1))``. It is an asymptotic statement, **not** a
bound, and it is optimistic at small ``T`` and small epsilon; those functions end in
``_approx`` and return results of kind ``"heuristic"``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from dpacct import _check
from dpacct.fdp.tradeoff import TradeoffCurve, _gdp_delta
from dpacct.results import Value

__all__ = [
    "delta_for_epsilon",
    "epsilon_for_delta",
    "mu_for_epsilon_delta",
    "mu_of_gaussian",
    "mu_poisson_clt_approx",
    "tradeoff_poisson_clt_approx",
]


def _mu(mu: float) -> float:
    m = _check.real("mu", mu)
    if not (m >= 0.0 and math.isfinite(m)):
        msg = f"mu must be finite and >= 0, got {m!r}"
        raise ValueError(msg)
    return m


def mu_of_gaussian(noise_multipliers: ArrayLike) -> float:
    r"""The exact GDP parameter of one Gaussian mechanism or a composition of several.

    Parameters
    ----------
    noise_multipliers : float or array_like
        Noise multipliers ``s_i`` (each finite and ``> 0``) of the composed Gaussians.

    Returns
    -------
    float
        ``mu = sqrt(sum_i s_i^{-2})``, exact (Dong, Roth, Su, arXiv:1905.02383,
        Theorem 2.7 and Corollary 3.3).

    Examples
    --------
    >>> mu_of_gaussian(2.0)
    0.5
    >>> round(mu_of_gaussian([1.0, 1.0]), 12)
    1.414213562373
    """
    s = np.atleast_1d(np.asarray(noise_multipliers, dtype=np.float64))
    for v in s.ravel():
        _check.noise_multiplier(float(v))
    return float(math.sqrt(math.fsum((1.0 / s.ravel() ** 2).tolist())))


def delta_for_epsilon(*, mu: float, epsilon: ArrayLike) -> float | NDArray[np.float64]:
    r"""Exact delta(epsilon) of a mu-GDP mechanism.

    .. math:: \delta(\varepsilon) = \Phi(-\varepsilon/\mu + \mu/2) - e^\varepsilon \Phi(-\varepsilon/\mu - \mu/2)

    (Dong, Roth, Su, arXiv:1905.02383, Corollary 2.13), evaluated in log space.

    Examples
    --------
    >>> round(delta_for_epsilon(mu=1.0, epsilon=1.0), 9)
    0.126936738
    """
    return _gdp_delta(_mu(mu), _check.epsilon_array(epsilon))


def epsilon_for_delta(*, mu: float, delta: float) -> float:
    """Exact epsilon(delta) of mu-GDP (root of the decreasing delta(epsilon), rounded up).

    Examples
    --------
    >>> round(epsilon_for_delta(mu=1.0, delta=0.126936737506644), 6)
    1.0
    """
    m = _mu(mu)
    d = _check.delta(delta)
    if m == 0.0 or float(_gdp_delta(m, np.asarray(0.0))) <= d:
        return 0.0
    hi = max(1.0, m * m)
    while float(_gdp_delta(m, np.asarray(hi))) > d:
        hi *= 2.0
    root = optimize.brentq(lambda e: math.log(float(_gdp_delta(m, np.asarray(e)))) - math.log(d), 0.0, hi,
                           xtol=1e-14, rtol=1e-15)
    return float(root) * (1.0 + 1e-12)


def mu_for_epsilon_delta(*, epsilon: float, delta: float) -> float:
    """The largest mu such that mu-GDP implies (epsilon, delta)-DP (exact, rounded down).

    Examples
    --------
    >>> round(mu_for_epsilon_delta(epsilon=1.0, delta=0.126936737506644), 6)
    1.0
    """
    e = _check.epsilon(epsilon)
    d = _check.delta(delta)
    # delta_mu(eps) increases with mu from 0 (mu = 0) to 1 (mu -> inf).
    hi = 1.0
    while float(_gdp_delta(hi, np.asarray(e))) < d:
        hi *= 2.0
    root = optimize.brentq(lambda m: float(_gdp_delta(m, np.asarray(e))) - d, 0.0, hi, xtol=1e-15, rtol=1e-15)
    return float(root) * (1.0 - 1e-12)


def mu_poisson_clt_approx(*, noise_multiplier: float, sampling_probability: float, steps: int) -> Value:
    r"""The GDP central-limit approximation for Poisson DP-SGD: **heuristic, not a bound**.

    .. math:: \mu \approx q \sqrt{T (e^{1/\sigma^2} - 1)}

    (Bu, Dong, Long, Su, arXiv:1911.11607, eq. (6), the limit ``q sqrt(T) -> nu``).
    It is optimistic for small ``T`` and small epsilon; use
    :class:`dpacct.fdp.FDPAccountant` for a certified curve.

    Returns
    -------
    Value
        ``kind="heuristic"``, ``quantity="mu"``.

    Examples
    --------
    >>> v = mu_poisson_clt_approx(noise_multiplier=1.1, sampling_probability=256 / 60000, steps=14063)
    >>> round(float(v), 4), v.kind
    (0.5736, 'heuristic')
    """
    s = _check.noise_multiplier(noise_multiplier)
    q = _check.probability("sampling_probability", sampling_probability)
    t = _check.count("steps", steps)
    mu = q * math.sqrt(t * math.expm1(1.0 / (s * s)))
    return Value(value=mu, quantity="mu", kind="heuristic",
                 method="GDP central limit theorem (Bu, Dong, Long, Su 2019, arXiv:1911.11607)",
                 details={"noise_multiplier": s, "sampling_probability": q, "steps": t})


def tradeoff_poisson_clt_approx(*, noise_multiplier: float, sampling_probability: float, steps: int) -> TradeoffCurve:
    """The CLT curve ``G_mu`` for Poisson DP-SGD, labelled ``kind="heuristic"`` (see :func:`mu_poisson_clt_approx`)."""
    v = mu_poisson_clt_approx(noise_multiplier=noise_multiplier, sampling_probability=sampling_probability,
                              steps=steps)
    return TradeoffCurve.gaussian(float(v), method="GDP CLT approximation (heuristic, not a bound)", kind="heuristic")

