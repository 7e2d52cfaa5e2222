r"""zCDP conversions: rho of the Gaussian and of pure DP, and rho to (epsilon, delta) and back.

Named ``<target>_from_<source>`` (:func:`epsilon_from_rho`, :func:`delta_from_rho`,
:func:`rho_from_pure_dp`); the former ``rho_to_epsilon``, ``rho_to_delta`` and
``pure_dp_to_rho`` remain as deprecated aliases.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from dpacct import _check, gaussian
from dpacct._shape import unwrap

__all__ = [
    "CONVERSIONS",
    "GAUSSIAN_KIND",
    "HEURISTIC_KIND",
    "ZCDP_KIND",
    "delta_from_rho",
    "epsilon_from_rho",
    "gaussian_rho",
    "pure_dp_to_rho",
    "rho_from_pure_dp",
    "rho_to_delta",
    "rho_to_epsilon",
]

#: zCDP -> (epsilon, delta) conversions, named as RDP's (``dpacct.rdp.CONVERSIONS``): zCDP is RDP
#: of every order, rho * alpha, so the "classic" RDP conversion minimised over the order is exactly
#: Bun & Steinke's rho + 2 sqrt(rho log(1/delta)), and "improved" applies Canonne, Kamath, Steinke's.
CONVERSIONS = ("improved", "classic")
_CONVERSION_ALIASES = {"rdp": "improved", "simple": "classic"}  # the names before 0.2, deprecated


def conversion_name(conversion: Any) -> str:
    """The conversion's name, with the former zCDP names accepted (DeprecationWarning)."""
    if isinstance(conversion, str) and conversion in _CONVERSION_ALIASES:
        new = _CONVERSION_ALIASES[conversion]
        warnings.warn(f"conversion={conversion!r} is now called {new!r} (one name per conversion in every family)",
                      DeprecationWarning, stacklevel=3)
        return new
    return _check.one_of("conversion", conversion, CONVERSIONS)

#: The ``kind`` of every number produced by Yu et al.'s random-sampling analysis.
HEURISTIC_KIND = "heuristic, not a proven bound (Yu et al. 2019, Thm 3)"
ZCDP_KIND = "upper bound (zCDP, looser)"
GAUSSIAN_KIND = "tight (exact for deterministic batches; upper bound for shuffling)"

# Relative size of the upward nudge applied to converted values: a few ulps of the
# largest term of each formula (the formulas are sums of <= 4 correctly rounded terms
# and one libm call, each within 1 ulp).
_ROUND_UP = 8.0 * float(np.finfo(np.float64).eps)


def _up(x: float) -> float:
    """The next float above ``x`` (0 stays 0, which is exact): used to round a computed rho upward."""
    return math.nextafter(x, math.inf) if x != 0.0 else 0.0


def gaussian_rho(*, noise_multiplier: float) -> float:
    r"""zCDP parameter of the Gaussian mechanism, :math:`\rho = 1/(2\sigma^2)`.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.

    Returns
    -------
    float
        The exact :math:`\rho`, rounded up by at most two ulps.

    References
    ----------
    .. [1] M. Bun and T. Steinke, "Concentrated Differential Privacy: Simplifications,
       Extensions, and Lower Bounds", TCC 2016, arXiv:1605.02065 (v1), Proposition 1.6.

    Examples
    --------
    >>> round(gaussian_rho(noise_multiplier=2.0), 12)
    0.125
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    return _gaussian_rho(sigma)


def _gaussian_rho(sigma: float) -> float:
    square = sigma * sigma
    if square == 0.0:  # sigma below 1e-154: no meaningful noise, rho is effectively infinite
        return math.inf
    return _up(_up(0.5 / square))  # one ulp for sigma*sigma, one for the division


def rho_from_pure_dp(*, epsilon: float) -> float:
    r"""zCDP parameter implied by pure :math:`\varepsilon`-DP: :math:`\rho = \varepsilon^2/2`.

    Parameters
    ----------
    epsilon : float
        The pure-DP parameter, finite and ``>= 0``.

    Returns
    -------
    float
        :math:`\varepsilon^2/2`, rounded up (a valid zCDP parameter for any
        :math:`\varepsilon`-DP mechanism).

    References
    ----------
    .. [1] Bun and Steinke, arXiv:1605.02065 (v1), Proposition 1.4.

    Examples
    --------
    >>> round(rho_from_pure_dp(epsilon=1.0), 12)
    0.5
    """
    eps = _check.epsilon(epsilon)
    return _up(0.5 * eps * eps) if eps > 0.0 else 0.0


def epsilon_from_rho(*, rho: float, delta: ArrayLike, conversion: str = "improved") -> float | NDArray[np.float64]:
    r"""Convert :math:`\rho`-zCDP to :math:`(\varepsilon, \delta)`-DP.

    Parameters
    ----------
    rho : float
        zCDP parameter, finite and ``>= 0``.
    delta : float or array_like
        Target deltas in ``(0, 1)``.
    conversion : {"improved", "classic"}
        ``"classic"``: :math:`\varepsilon = \rho + 2\sqrt{\rho\log(1/\delta)}` (Bun &
        Steinke 2016, Proposition 1.3). ``"improved"`` (default): the improved RDP
        conversion applied to :math:`\mathrm{RDP}(\alpha) = \alpha\rho`, minimised
        exactly over the continuous order :math:`\alpha > 1`, and never above the
        simple value.

    Returns
    -------
    float or ndarray
        An upper bound on epsilon (scalar in, float out), rounded up by a few ulps.

    Notes
    -----
    The improved conversion (Canonne, Kamath, Steinke 2020, arXiv:2004.00010 (v5),
    Proposition 12; Balle et al. 2020, Theorem 21) at order :math:`\alpha` is

    .. math:: f(\alpha) = \alpha\rho + \log(1 - 1/\alpha) + \frac{\log(1/\delta) - \log\alpha}{\alpha - 1}.

    Its derivative simplifies to :math:`\rho - \log(1/(\alpha\delta))/(\alpha-1)^2`, so the
    minimiser is the unique root of :math:`\rho(\alpha-1)^2 + \log\alpha = \log(1/\delta)`
    (the left side increases in :math:`\alpha`), bracketed by ``1`` and the simple
    optimum :math:`1 + \sqrt{\log(1/\delta)/\rho}`. Every order gives a valid bound, so
    the root finder's tolerance costs nothing in soundness.

    Examples
    --------
    >>> round(epsilon_from_rho(rho=0.5, delta=1e-5, conversion="classic"), 9)
    5.298525912
    >>> round(epsilon_from_rho(rho=0.5, delta=1e-5), 6)
    4.728387
    """
    r = _rho(rho)
    d = _check.delta_array(delta)
    kind = conversion_name(conversion)
    out = np.array([_epsilon_one(r, float(x), kind) for x in d.ravel()], dtype=np.float64).reshape(d.shape)
    return unwrap(out)


def _rho(value: Any) -> float:
    x = _check.real("rho", value)
    if not (x >= 0.0 and math.isfinite(x)):
        msg = f"rho must be finite and >= 0, got {x!r}"
        raise ValueError(msg)
    return x


def _simple_epsilon(rho: float, log_inv_delta: float) -> float:
    value = rho + 2.0 * math.sqrt(rho * log_inv_delta)
    return value * (1.0 + _ROUND_UP)


def _epsilon_one(rho: float, delta: float, conversion: str) -> float:
    if rho == 0.0:
        return 0.0
    log_inv_delta = -math.log(delta)
    simple = _simple_epsilon(rho, log_inv_delta)
    if conversion == "classic":
        return simple

    def slope(alpha: float) -> float:  # rho (alpha-1)^2 + log(alpha) - log(1/delta): increasing
        return rho * (alpha - 1.0) ** 2 + math.log(alpha) - log_inv_delta

    high = 1.0 + math.sqrt(log_inv_delta / rho)
    if not high > 1.0:  # rho so large that alpha - 1 underflows: the simple bound is all we have
        return simple
    alpha = high if slope(high) <= 0.0 else float(optimize.brentq(slope, 1.0, high, xtol=1e-12, rtol=1e-12))
    if not alpha > 1.0:
        return simple
    terms = (alpha * rho, math.log1p(-1.0 / alpha), (log_inv_delta - math.log(alpha)) / (alpha - 1.0))
    value = math.fsum(terms) + _ROUND_UP * sum(abs(t) for t in terms)
    return max(0.0, min(value, simple))


def delta_from_rho(*, rho: float, epsilon: ArrayLike, conversion: str = "improved") -> float | NDArray[np.float64]:
    r"""Convert :math:`\rho`-zCDP to the smallest certified delta at each epsilon.

    Parameters
    ----------
    rho : float
        zCDP parameter, finite and ``>= 0``.
    epsilon : float or array_like
        Epsilons, each finite and ``>= 0``.
    conversion : {"improved", "classic"}
        ``"classic"`` inverts Bun & Steinke's formula:
        :math:`\delta = e^{-(\varepsilon-\rho)^2/(4\rho)}` for :math:`\varepsilon \ge \rho`
        (else 1). ``"improved"`` (default) minimises the improved RDP conversion
        :math:`\log\delta = (\alpha-1)(\alpha\rho - \varepsilon) + (\alpha-1)\log(1-1/\alpha) - \log\alpha`
        exactly over :math:`\alpha > 1` (stationary point: the unique root of the
        increasing :math:`(2\alpha-1)\rho - \varepsilon + \log(1-1/\alpha)`) and takes
        the smaller of it and the simple value.

    Returns
    -------
    float or ndarray
        An upper bound on delta, at most 1 (``0`` when ``rho == 0``).

    Examples
    --------
    >>> round(delta_from_rho(rho=0.5, epsilon=5.298525912188081, conversion="classic"), 12)
    1e-05
    """
    r = _rho(rho)
    e = _check.epsilon_array(epsilon)
    kind = conversion_name(conversion)
    out = np.array([_delta_one(r, float(x), kind) for x in e.ravel()], dtype=np.float64).reshape(e.shape)
    return unwrap(out)


def _delta_one(rho: float, epsilon: float, conversion: str) -> float:
    if rho == 0.0:
        return 0.0
    if epsilon <= rho:
        simple_log = 0.0
    else:
        simple_log = -((epsilon - rho) ** 2) / (4.0 * rho)
        simple_log += _ROUND_UP * abs(simple_log)
    best_log = simple_log
    if conversion == "improved":

        def slope(alpha: float) -> float:  # derivative of log delta(alpha): increasing in alpha
            return (2.0 * alpha - 1.0) * rho - epsilon + math.log1p(-1.0 / alpha)

        high = 1.0 + (epsilon + rho) / (2.0 * rho) + 1.0
        while slope(high) < 0.0 and math.isfinite(high):
            high *= 2.0
        low = 1.0 + 1e-12 * high
        if math.isfinite(high) and slope(low) < 0.0:
            alpha = float(optimize.brentq(slope, low, high, xtol=1e-12, rtol=1e-12))
            terms = ((alpha - 1.0) * alpha * rho, -(alpha - 1.0) * epsilon,
                     (alpha - 1.0) * math.log1p(-1.0 / alpha), -math.log(alpha))
            log_value = math.fsum(terms) + _ROUND_UP * sum(abs(t) for t in terms)
            best_log = min(best_log, log_value)
    with np.errstate(under="ignore"):  # a delta below 1e-308 is reported as 0 (its log is finite)
        return float(min(1.0, np.exp(best_log)))


# -- deprecated names (one naming scheme: conversions are ``<target>_from_<source>``) ----------------


def _deprecated(old: str, new: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(new)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"dpacct.zcdp.{old} is deprecated; use dpacct.zcdp.{new.__name__} (same arguments)",
                      DeprecationWarning, stacklevel=2)
        return new(*args, **kwargs)

    alias.__doc__ = f"Deprecated alias of :func:`{new.__name__}`."
    return alias


rho_to_epsilon = _deprecated("rho_to_epsilon", epsilon_from_rho)
rho_to_delta = _deprecated("rho_to_delta", delta_from_rho)
pure_dp_to_rho = _deprecated("pure_dp_to_rho", rho_from_pure_dp)
