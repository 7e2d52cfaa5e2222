"""The RDP (moments) accountant and its calibration guide."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from dpacct import _check, _core
from dpacct._shape import unwrap
from dpacct.accountant import Accountant, NoiseGuide
from dpacct.mechanisms import (
    FixedSizeSampledGaussianMechanism,
    GaussianMechanism,
    Mechanism,
    PoissonSampledGaussianMechanism,
)
from dpacct.rdp.curves import (
    CONVERSIONS,
    DEFAULT_ORDERS,
    OptimalOrder,
    OrderGridWarning,
    _add_up,
    _orders_at,
    mechanism_rdp,
)

__all__ = ["RDPAccountant", "integer_order_guide"]


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
        """Gaussian, Poisson-subsampled Gaussian and fixed-size (without replacement) Gaussian mechanisms."""
        if isinstance(mechanism, FixedSizeSampledGaussianMechanism):
            return not mechanism.replacement
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
