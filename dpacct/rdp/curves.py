"""Renyi DP curves: the Poisson-subsampled Gaussian's RDP (C++) and its conversions to (epsilon, delta).

Conversions follow the package's naming scheme, ``<target>_from_<source>``:
:func:`epsilon_from_rdp` and :func:`delta_from_rdp`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check, _core
from dpacct._shape import unwrap
from dpacct.mechanisms import (
    FixedSizeSampledGaussianMechanism,
    GaussianMechanism,
    Mechanism,
    PoissonSampledGaussianMechanism,
)

__all__ = [
    "CONVERSIONS",
    "DEFAULT_ORDERS",
    "OptimalOrder",
    "OrderGridWarning",
    "clear_cache",
    "delta_from_rdp",
    "epsilon_from_rdp",
    "mechanism_rdp",
    "subsampled_gaussian_rdp",
]

CONVERSIONS = ("improved", "classic")

#: Default orders: dense near 1 (where large-noise, many-step runs are optimal),
#: every tenth from 1.1 to 10.9 and every integer to 64 (the usual DP-SGD optimum;
#: a superset of opacus's and dp-accounting's grids, so dpacct is never looser),
#: then roughly geometric to 16384 (few-step, tiny-privacy-loss runs).
DEFAULT_ORDERS: NDArray[np.float64] = np.array(
    [1.01, 1.02, 1.03, 1.05, 1.07]
    + [round(1.0 + x / 10.0, 1) for x in range(1, 100)]
    + [float(a) for a in range(11, 65)]
    + [72.0, 80.0, 88.0, 96.0, 112.0, 128.0, 144.0, 160.0, 192.0, 224.0, 256.0, 320.0, 384.0]
    + [448.0, 512.0, 640.0, 768.0, 896.0, 1024.0, 1280.0, 1536.0, 2048.0, 2560.0, 3072.0]
    + [4096.0, 5120.0, 6144.0, 8192.0, 10240.0, 12288.0, 16384.0]
)
DEFAULT_ORDERS.flags.writeable = False


class OrderGridWarning(UserWarning):
    """The optimal order is at the edge of the grid: a wider grid may give a smaller bound."""


class OptimalOrder(NamedTuple):
    """A converted bound and the Renyi order that attains it (``nan`` if none is finite)."""

    value: float | NDArray[np.float64]
    order: float | NDArray[np.float64]


def subsampled_gaussian_rdp(
    *, noise_multiplier: float, sampling_probability: float, orders: ArrayLike
) -> float | NDArray[np.float64]:
    r"""RDP of one step of the Poisson-subsampled Gaussian mechanism (add/remove adjacency).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, finite and ``> 0``.
    sampling_probability : float
        Poisson inclusion probability q, in ``[0, 1]``.
    orders : float or array_like
        Renyi orders, each ``> 1`` (``inf`` allowed).

    Returns
    -------
    float or ndarray
        An upper bound on the RDP at each order: every value is rounded up by a
        bound on its floating-point error (relative ~1e-13 or less), so it is
        never below the true RDP; values are non-decreasing in the order.

    Notes
    -----
    .. math:: \mathrm{RDP}(\alpha) = \frac{\log A_\alpha}{\alpha - 1},\quad
              A_\alpha = \mathbb{E}_{z\sim N(0,\sigma^2)}
              \left[\left(1 - q + q e^{(2z-1)/(2\sigma^2)}\right)^\alpha\right]

    Integer orders use the binomial expansion of :math:`A_\alpha - 1`, a sum of
    positive terms (exact, no cancellation). Fractional orders integrate the
    non-negative :math:`A_\alpha - 1 = \mathbb{E}[(1+x)^\alpha - 1 - \alpha x]`,
    :math:`x = q(e^{(2z-1)/(2\sigma^2)} - 1)`, by the trapezoid rule (spectrally
    accurate, ~1e-12 relative, rounded up by an a-posteriori error estimate) and
    cap it by the convexity chord between the neighbouring integer orders.
    ``q = 1`` gives the Gaussian mechanism's :math:`\alpha / (2\sigma^2)`.

    References
    ----------
    .. [1] I. Mironov, K. Talwar, L. Zhang, "Renyi Differential Privacy of the
       Sampled Gaussian Mechanism", arXiv:1908.10530 (v1), Sections 3.1-3.3.
    .. [2] M. Abadi et al., "Deep Learning with Differential Privacy", CCS 2016,
       arXiv:1607.00133 (v2), Section 3.2.

    Examples
    --------
    >>> round(subsampled_gaussian_rdp(noise_multiplier=2.0, sampling_probability=1.0, orders=8.0), 12)
    1.0
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    q = _check.probability("sampling_probability", sampling_probability)
    order_array = _check.orders(orders, scalar_ok=True)
    return unwrap(_core.rdp.subsampled_gaussian(q, sigma, order_array))


def epsilon_from_rdp(
    *, orders: ArrayLike, rdp: ArrayLike, delta: ArrayLike, conversion: str = "improved"
) -> OptimalOrder:
    r"""Convert an RDP curve to epsilon for each delta, minimising over the orders.

    Parameters
    ----------
    orders : array_like
        Renyi orders, each ``> 1``.
    rdp : array_like
        RDP at each order (``>= 0``; ``inf`` allowed).
    delta : float or array_like
        Target deltas in ``(0, 1)``.
    conversion : {"improved", "classic"}
        ``"classic"``: :math:`\varepsilon = \mathrm{RDP}(\alpha) + \log(1/\delta)/(\alpha-1)`
        (Mironov 2017, Proposition 3). ``"improved"``:
        :math:`\varepsilon = \mathrm{RDP}(\alpha) + \log\frac{\alpha-1}{\alpha}
        - \frac{\log\delta + \log\alpha}{\alpha - 1}` (Canonne, Kamath, Steinke 2020,
        arXiv:2004.00010 (v5), Proposition 12; Balle et al. 2020, Theorem 21).
        Both are valid; the improved one is never larger by more than rounding.

    Returns
    -------
    OptimalOrder
        ``value``: an upper bound on epsilon (clipped at 0; ``inf`` if no order is
        finite). ``order``: the order attaining it (``nan`` if none).
    """
    order_array, rdp_array = _curve(orders, rdp)
    d = _check.delta_array(delta)
    kind = _check.one_of("conversion", conversion, CONVERSIONS)
    values, index = _core.rdp.epsilon_from_rdp(order_array, rdp_array, d, kind)
    return OptimalOrder(unwrap(values), unwrap(_orders_at(order_array, index)))


def delta_from_rdp(
    *, orders: ArrayLike, rdp: ArrayLike, epsilon: ArrayLike, conversion: str = "improved"
) -> OptimalOrder:
    r"""Convert an RDP curve to delta for each epsilon, minimising over the orders.

    The inverse of :func:`epsilon_from_rdp`: ``"classic"`` gives
    :math:`\delta = e^{(\alpha-1)(\mathrm{RDP}(\alpha)-\varepsilon)}`; ``"improved"`` gives
    :math:`\delta = e^{(\alpha-1)(\mathrm{RDP}(\alpha)-\varepsilon)}(1-1/\alpha)^{\alpha-1}/\alpha`
    and also uses :math:`\delta \le \sqrt{1 - e^{-\mathrm{RDP}(\alpha)}}` (the
    Bretagnolle-Huber bound on total variation; KL is at most any RDP of order > 1).

    Returns
    -------
    OptimalOrder
        ``value``: an upper bound on delta (at most 1). ``order``: the order
        attaining it (``nan`` if the trivial bound 1 is the best).
    """
    order_array, rdp_array = _curve(orders, rdp)
    e = _check.epsilon_array(epsilon)
    kind = _check.one_of("conversion", conversion, CONVERSIONS)
    values, index = _core.rdp.delta_from_rdp(order_array, rdp_array, e, kind)
    return OptimalOrder(unwrap(values), unwrap(_orders_at(order_array, index)))


def _curve(orders: ArrayLike, rdp: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    order_array = _check.orders(orders)
    rdp_array = np.asarray(rdp, dtype=np.float64)
    if rdp_array.shape != order_array.shape:
        msg = f"rdp must have the same shape as orders {order_array.shape}, got {rdp_array.shape}"
        raise ValueError(msg)
    return order_array, rdp_array


def _orders_at(orders: NDArray[np.float64], index: NDArray[np.int64]) -> NDArray[np.float64]:
    padded = np.append(orders, np.nan)  # index == len(orders) means "no finite bound"
    result: NDArray[np.float64] = padded[index]
    return result


@functools.lru_cache(maxsize=256)
def _step_rdp(noise_multiplier: float, sampling_probability: float, orders: tuple[float, ...]) -> NDArray[np.float64]:
    """RDP of one step, cached: a training loop composes the same step thousands of times."""
    out = _core.rdp.subsampled_gaussian(sampling_probability, noise_multiplier, np.array(orders))
    out.flags.writeable = False
    return out


def clear_cache() -> None:
    """Forget the cached per-step RDP curves (they are reused while composing; see benchmarks)."""
    _step_rdp.cache_clear()


def mechanism_rdp(mechanism: Mechanism, orders: NDArray[np.float64]) -> NDArray[np.float64]:
    """RDP of one supported mechanism at ``orders`` (an upper bound, see :func:`subsampled_gaussian_rdp`)."""
    key = tuple(float(a) for a in orders)
    if isinstance(mechanism, GaussianMechanism):
        return _step_rdp(mechanism.effective_noise_multiplier, 1.0, key)
    if isinstance(mechanism, PoissonSampledGaussianMechanism):
        return _step_rdp(mechanism.noise_multiplier, mechanism.sampling_probability, key)
    if isinstance(mechanism, FixedSizeSampledGaussianMechanism) and not mechanism.replacement:
        # The dominating pairs are the Poisson-subsampled Gaussian pairs at sigma/2, rate b/n
        # (dpacct.samplers.fixed_size); the bound covers both orders, so replace-one too.
        return _step_rdp(mechanism.noise_multiplier / 2.0, mechanism.hit_probability, key)
    msg = f"no RDP is known for {mechanism!r}"
    raise TypeError(msg)


def _add_up(total: NDArray[np.float64], count: int, values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``total + count * values`` rounded up: each floating-point operation is nudged one ulp upward."""
    with np.errstate(invalid="ignore"):  # inf * count stays inf; 0 * inf does not occur (count > 0)
        product = np.nextafter(count * values, np.inf)
    return np.nextafter(total + product, np.inf)
