"""Renyi differential privacy: the moments accountant of Abadi et al. and its refinements.

The Poisson-subsampled Gaussian's RDP is computed in C++ (``dpacct._core.rdp``)
for integer and fractional orders, composed additively, and converted to
(epsilon, delta)-DP by the classic or the improved conversion.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from dpacct import _check, _core
from dpacct._shape import unwrap
from dpacct.accountant import Accountant, NoiseGuide
from dpacct.mechanisms import GaussianMechanism, Mechanism, PoissonSampledGaussianMechanism

__all__ = [
    "CONVERSIONS",
    "DEFAULT_ORDERS",
    "OptimalOrder",
    "OrderGridWarning",
    "RDPAccountant",
    "clear_cache",
    "delta_from_rdp",
    "epsilon_from_rdp",
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
    msg = f"no RDP is known for {mechanism!r}"
    raise TypeError(msg)


def _epsilon_on(orders: NDArray[np.float64], sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    """Epsilon and optimal order of ``steps`` Poisson-sampled Gaussian steps on ``orders`` (no edge warning)."""
    acct = RDPAccountant(orders=orders).compose(
        PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q), steps
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrderGridWarning)  # a guide's grid edges do not matter
        value, order = acct.get_epsilon_and_order(delta)
    return float(value), float(order)


def integer_order_guide(
    *, sampling_probability: float, steps: int, delta: float, epsilon: float, windowed: bool
) -> NoiseGuide:
    """The noise multiplier meeting ``epsilon`` on the integer default orders (an RDP upper bound).

    With ``windowed``, also a search function on the default orders near that
    solution's optimal order (see :meth:`RDPAccountant.noise_multiplier_guide`).
    """
    from dpacct._search import SIGMA_RANGE, smallest_safe

    q, t, d = sampling_probability, steps, delta
    integer_orders = DEFAULT_ORDERS[DEFAULT_ORDERS == np.floor(DEFAULT_ORDERS)]
    guide, _ = smallest_safe(lambda s: _epsilon_on(integer_orders, s, q, t, d)[0], epsilon, SIGMA_RANGE, 1e-3,
                             "noise_multiplier")
    if not windowed:
        return NoiseGuide(safe=guide, fallback=guide)
    _, order = _epsilon_on(DEFAULT_ORDERS, guide, q, t, d)
    window = DEFAULT_ORDERS[(DEFAULT_ORDERS >= order / 1.5) & (DEFAULT_ORDERS <= order * 1.5)]
    if window.size == 0:
        return NoiseGuide(safe=guide, fallback=guide)
    return NoiseGuide(safe=guide, search_epsilon=lambda s: _epsilon_on(window, s, q, t, d)[0], fallback=guide)


def _add_up(total: NDArray[np.float64], count: int, values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``total + count * values`` rounded up: each floating-point operation is nudged one ulp upward."""
    with np.errstate(invalid="ignore"):  # inf * count stays inf; 0 * inf does not occur (count > 0)
        product = np.nextafter(count * values, np.inf)
    return np.nextafter(total + product, np.inf)


class RDPAccountant(Accountant):
    """Renyi DP (moments) accountant for Gaussian and Poisson-subsampled Gaussian steps.

    Parameters
    ----------
    orders : array_like, optional
        Renyi orders (each ``> 1``). Defaults to :data:`DEFAULT_ORDERS`, 1.01 to 16384.
    conversion : {"improved", "classic"}
        RDP to (epsilon, delta) conversion; see :func:`epsilon_from_rdp`.

    Notes
    -----
    The getters return upper bounds: RDP values are rounded up, composition sums
    them with upward rounding, and both conversions are valid theorems. When the
    optimal order is the smallest or largest of the grid, an
    :class:`OrderGridWarning` suggests widening it.

    Examples
    --------
    >>> acct = RDPAccountant()
    >>> _ = acct.step(noise_multiplier=4.0, sampling_probability=0.01, count=10_000)
    >>> round(acct.get_epsilon(1e-5), 3)
    1.035
    """

    name = "rdp"

    def __init__(self, *, orders: ArrayLike | None = None, conversion: str = "improved") -> None:
        super().__init__()
        self._orders = DEFAULT_ORDERS if orders is None else np.sort(_check.orders(orders))
        if not np.all(np.isfinite(self._orders)):
            # Every mechanism here has infinite RDP at order inf, and no conversion uses it:
            # such a grid could only ever answer epsilon = inf.
            msg = f"orders must all be finite for an accountant, got {self._orders[-1]!r}; drop the inf order"
            raise ValueError(msg)
        self._conversion = _check.one_of("conversion", conversion, CONVERSIONS)
        self._rdp_cache: NDArray[np.float64] | None = None

    @property
    def orders(self) -> NDArray[np.float64]:
        """The orders grid (sorted, read-only copy)."""
        return self._orders.copy()

    @property
    def conversion(self) -> str:
        """The RDP to (epsilon, delta) conversion in use."""
        return self._conversion

    def supports(self, mechanism: Mechanism) -> bool:
        """Gaussian and Poisson-subsampled Gaussian mechanisms are supported."""
        return isinstance(mechanism, (GaussianMechanism, PoissonSampledGaussianMechanism))

    def _compose(self, mechanism: Mechanism, count: int) -> None:
        mechanism_rdp(mechanism, self._orders)  # computes (and caches) now, so errors surface here
        self._rdp_cache = None

    @classmethod
    def noise_multiplier_guide(
        cls, *, sampling_probability: float, steps: int, delta: float, epsilon: float
    ) -> NoiseGuide | None:
        """Calibration guide: solve on integer orders, then search with the orders near the optimum.

        Integer orders are a subset of the default grid, so their epsilon is an upper
        bound on the default-grid epsilon: the noise multiplier they need is ``safe``.
        The search then uses only the default orders within a factor 1.5 of that
        solution's optimal order (again a subset: an upper bound), and calibration
        re-accounts the answer on the full grid.
        """
        return integer_order_guide(sampling_probability=sampling_probability, steps=steps, delta=delta,
                                   epsilon=epsilon, windowed=True)

    def step(self, *, noise_multiplier: float, sampling_probability: float, count: int = 1) -> RDPAccountant:
        """Compose ``count`` DP-SGD steps (Poisson rate ``sampling_probability``, add/remove)."""
        mechanism = PoissonSampledGaussianMechanism(
            noise_multiplier=noise_multiplier, sampling_probability=sampling_probability
        )
        return self.compose(mechanism, count)

    @property
    def rdp(self) -> NDArray[np.float64]:
        """The composed RDP curve at :attr:`orders` (an upper bound; copy)."""
        return self._total_rdp().copy()

    def _total_rdp(self) -> NDArray[np.float64]:
        if self._rdp_cache is None:
            total = np.zeros_like(self._orders)
            for mechanism, count in self._history:
                total = _add_up(total, count, mechanism_rdp(mechanism, self._orders))
            self._rdp_cache = total
        return self._rdp_cache

    def _rdp_at(self, order: float) -> float:
        orders = np.array([order])
        total = np.zeros(1)
        for mechanism, count in self._history:
            total = _add_up(total, count, mechanism_rdp(mechanism, orders))
        return float(total[0])

    def _is_trivial(self) -> bool:
        return not np.any(self._total_rdp() > 0.0)

    def get_epsilon(self, delta: ArrayLike) -> float | NDArray[np.float64]:
        """An upper bound on epsilon for each ``delta`` in ``(0, 1)``; see :meth:`get_epsilon_and_order`."""
        return self.get_epsilon_and_order(delta).value

    def get_delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        """An upper bound on delta for each finite ``epsilon >= 0``; see :meth:`get_delta_and_order`."""
        return self.get_delta_and_order(epsilon).value

    def get_epsilon_and_order(self, delta: ArrayLike, *, optimize_order: bool = False) -> OptimalOrder:
        """The smallest epsilon over the orders and the order attaining it.

        Parameters
        ----------
        delta : float or array_like
            Target deltas in ``(0, 1)``.
        optimize_order : bool
            Also minimise over a continuous order between the grid neighbours of
            the best grid order (scipy's bounded Brent search). Scalar ``delta`` only.

        Returns
        -------
        OptimalOrder
            ``value`` is an upper bound on epsilon; ``order`` the order used
            (``nan`` when nothing has been composed and epsilon is exactly 0).
        """
        d = _check.delta_array(delta)
        if self._is_trivial():
            zeros = np.zeros_like(d)
            return OptimalOrder(unwrap(zeros), unwrap(zeros + np.nan))
        values, index = _core.rdp.epsilon_from_rdp(self._orders, self._total_rdp(), d, self._conversion)
        self._warn_if_edge(index, values)
        result = OptimalOrder(unwrap(values), unwrap(_orders_at(self._orders, index)))
        if optimize_order:
            if d.ndim != 0:
                msg = "optimize_order=True needs a scalar delta"
                raise ValueError(msg)
            return self._refine(float(d), result, int(index))
        return result

    def get_delta_and_order(self, epsilon: ArrayLike) -> OptimalOrder:
        """The smallest delta over the orders and the order attaining it (``nan``: trivial bound)."""
        e = _check.epsilon_array(epsilon)
        if self._is_trivial():
            zeros = np.zeros_like(e)
            return OptimalOrder(unwrap(zeros), unwrap(zeros + np.nan))
        values, index = _core.rdp.delta_from_rdp(self._orders, self._total_rdp(), e, self._conversion)
        self._warn_if_edge(index, values)
        return OptimalOrder(unwrap(values), unwrap(_orders_at(self._orders, index)))

    def get_epsilon_details(self, delta: float) -> dict[str, Any]:
        """Epsilon for one delta with what produced it, for reports and the CLI."""
        eps, order = self.get_epsilon_and_order(delta)
        return {"epsilon": float(eps), "kind": "upper bound", "order": float(order), "conversion": self._conversion}

    def _warn_if_edge(self, index: NDArray[np.int64], values: NDArray[np.float64]) -> None:
        n = self._orders.size
        if n < 2:
            return
        at_edge = ((index == 0) | (index == n - 1)) & (values > 0.0) & np.isfinite(values)
        if np.any(at_edge):
            edge = self._orders[0] if np.any(index[at_edge] == 0) else self._orders[-1]
            warnings.warn(
                f"the optimal RDP order {edge:g} is at the edge of the orders grid "
                f"[{self._orders[0]:g}, {self._orders[-1]:g}]; pass wider orders= for a possibly smaller bound",
                OrderGridWarning,
                stacklevel=3,
            )

    def _refine(self, delta: float, grid: OptimalOrder, index: int) -> OptimalOrder:
        if index >= self._orders.size or not math.isfinite(float(grid.value)):
            return grid
        lo = self._orders[max(index - 1, 0)]
        hi = self._orders[min(index + 1, self._orders.size - 1)]
        if not hi > lo:
            return grid

        def epsilon_at(order: float) -> float:
            rdp = np.array([self._rdp_at(order)])
            value, _ = _core.rdp.epsilon_from_rdp(np.array([order]), rdp, np.array(delta), self._conversion)
            return float(value)

        found = optimize.minimize_scalar(epsilon_at, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6 * hi})
        best_order = float(found.x)
        best = epsilon_at(best_order)  # re-evaluate: the bound at the order actually returned
        if best < float(grid.value):
            return OptimalOrder(best, best_order)
        return grid

