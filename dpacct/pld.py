"""Privacy loss distributions: the tightest general accountant, with certified two-sided bounds.

Each step's privacy loss is discretised, the steps are composed by FFT in C++
(``dpacct._core.pld``), and delta(epsilon) is read off the composed
distribution. Both directions of the add/remove relation are composed and the
larger delta is reported (prv-accountant models only one direction).

Why the bounds are certified (details in ``cpp/include/dpacct/pld.hpp``):

* the loss axis is cut into cells of width ``D``; each cell's P- and Q-mass is
  a certified interval (log-CDF round-off propagated through the differences);
* upper bound: "connect the dots" (Doroshenko et al. 2022) splits each cell's
  mass between its two grid points so that E[e^{-L}] is kept, a mean-preserving
  spread that can only raise delta for every composition; mass past the clamp
  points goes to +inf (charged) or up to the grid;
* lower bound: labelling every output by its cell is post-processing, so the
  hockey-stick divergence of the composed labels (P- and Q-distributions of
  the label sum, composed by FFT) is below the true one;
* both errors are second order in ``D``, so a coarse grid (a fraction of the
  per-step loss spread) gives a gap of a few tenths of a percent of epsilon;
* FFT round-off (Higham's bound, through Cauchy-Schwarz) and the tilted mass
  that could wrap around the transform are charged to both bounds;
* exponential tilting by ``e^{lambda L}`` (a fraction of the optimal RDP order
  minus one) puts enough mass near the queried epsilon that small deltas (1e-12
  and below) keep their relative accuracy. Known limit: at very small epsilon
  with a tiny sampling rate and few steps (RDP order near 1) the delta bounds
  keep an absolute round-off floor of about 1e-11 (``tests/test_pld_reference.py``
  records two such points as expected failures).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check, _core
from dpacct._shape import unwrap
from dpacct.accountant import Accountant, register_accountant
from dpacct.mechanisms import GaussianMechanism, Mechanism, PoissonSampledGaussianMechanism
from dpacct.rdp import OrderGridWarning, RDPAccountant

__all__ = ["Bounds", "PLDAccountant"]

_DIRECTIONS = ("remove", "add")
_CTD_SCALE = 0.1  # discretization / per-step loss spread at which ...
_CTD_ERROR_AT_SCALE = 0.002  # ... the gap (upper - lower) / epsilon is about this (bench grid, measured)
_REFINEMENTS = 2  # grid refinements when a query's gap exceeds the target
_TINIEST = math.ulp(0.0)  # smallest positive double: the upper bound of a delta that underflows
_TILT_STRENGTH = 0.5  # tilt = _TILT_STRENGTH * (RDP order - 1); see PLDAccountant._settings
_MIN_DISCRETIZATION = 1e-7
_MAX_DISCRETIZATION = 0.05


class Bounds(NamedTuple):
    """A certified interval: ``lower <= true value <= upper``."""

    lower: float | NDArray[np.float64]
    upper: float | NDArray[np.float64]


class PLDAccountant(Accountant):
    """Privacy loss distribution accountant with certified upper and lower bounds.

    Parameters
    ----------
    discretization : float, optional
        Width of the loss grid. By default it is chosen per query so that the
        gap between the bounds is about ``relative_accuracy`` times epsilon.
    relative_accuracy : float
        Target for ``(upper - lower) / epsilon`` when ``discretization`` is not
        given (default 0.005, in ``(0, 0.5]``).
    max_size : int
        Largest FFT (a power of two) the accountant may use; if a query would
        need more, the grid is coarsened (the bounds stay certified, the gap
        grows). Default ``2**22`` (about 200 MB of working memory at that size;
        typical DP-SGD queries use 2**12 to 2**17).

    Notes
    -----
    ``get_epsilon`` / ``get_delta`` return the certified upper bounds;
    :meth:`epsilon_bounds` / :meth:`delta_bounds` return ``(lower, upper)`` so the
    discretisation error is visible. Supports the Gaussian and the
    Poisson-subsampled Gaussian mechanisms (add/remove or zero-out adjacency).

    References
    ----------
    .. [1] D. Sommer, S. Meiser, E. Mohammadi, "Privacy Loss Classes: The Central
       Limit Theorem in Differential Privacy", PoPETs 2019.
    .. [2] A. Koskela, J. Jalko, A. Honkela, "Computing Tight Differential
       Privacy Guarantees Using FFT", AISTATS 2020, arXiv:1906.03049.
    .. [3] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, "Connect
       the Dots: Tighter Discrete Approximations of Privacy Loss Distributions",
       PoPETs 2022, arXiv:2207.04380 (the pessimistic discretisation).

    Examples
    --------
    >>> acct = PLDAccountant().compose(GaussianMechanism(noise_multiplier=1.0))
    >>> lower, upper = acct.epsilon_bounds(1e-5)
    >>> lower <= 4.3772 <= upper   # the exact Gaussian epsilon
    True
    """

    name = "pld"

    def __init__(
        self,
        *,
        discretization: float | None = None,
        relative_accuracy: float = 0.005,
        max_size: int = 2**22,
    ) -> None:
        super().__init__()
        self._discretization = None if discretization is None else _check.positive("discretization", discretization)
        accuracy = _check.positive("relative_accuracy", relative_accuracy)
        if accuracy > 0.5:
            msg = f"relative_accuracy must be in (0, 0.5], got {accuracy!r}"
            raise ValueError(msg)
        self._relative_accuracy = accuracy
        size = _check.count("max_size", max_size)
        if size < 2 or size & (size - 1):
            msg = f"max_size must be a power of two >= 2, got {size}"
            raise ValueError(msg)
        self._max_size = size
        self._cache: dict[tuple[str, float, float], Any] = {}

    def supports(self, mechanism: Mechanism) -> bool:
        """Gaussian and Poisson-subsampled Gaussian mechanisms are supported."""
        return isinstance(mechanism, (GaussianMechanism, PoissonSampledGaussianMechanism))

    def _compose(self, mechanism: Mechanism, count: int) -> None:
        self._cache.clear()

    def step(self, *, noise_multiplier: float, sampling_probability: float, count: int = 1) -> PLDAccountant:
        """Compose ``count`` DP-SGD steps (Poisson rate ``sampling_probability``, add/remove)."""
        mechanism = PoissonSampledGaussianMechanism(
            noise_multiplier=noise_multiplier, sampling_probability=sampling_probability
        )
        return self.compose(mechanism, count)

    # -- the composed distributions ---------------------------------------------------------

    def _groups(self) -> NDArray[np.float64]:
        """Identical steps grouped over the whole history: rows (q, sigma, count)."""
        counts: dict[tuple[float, float], int] = {}
        for mechanism, count in self._history:
            if isinstance(mechanism, GaussianMechanism):
                key = (1.0, mechanism.effective_noise_multiplier)
            else:
                assert isinstance(mechanism, PoissonSampledGaussianMechanism)
                key = (mechanism.sampling_probability, mechanism.noise_multiplier)
            if key[0] > 0.0:
                counts[key] = counts.get(key, 0) + count
        return np.array([[q, s, c] for (q, s), c in counts.items()], dtype=np.float64).reshape(-1, 3)

    def _directions(self, groups: NDArray[np.float64]) -> tuple[str, ...]:
        # With q = 1 everywhere (pure Gaussians) both directions have the same loss distribution.
        return ("remove",) if np.all(groups[:, 0] == 1.0) else _DIRECTIONS

    def _rdp_guide(self) -> RDPAccountant:
        rdp = RDPAccountant()
        for mechanism, count in self._history:
            rdp.compose(mechanism, count)
        return rdp

    def _settings(
        self, epsilon_scale: float, order: float, delta_scale: float, *, for_delta: bool = False
    ) -> tuple[float, float]:
        """Discretization and tilt for a query around (epsilon_scale, delta_scale).

        Connect-the-dots errs by about ``D^2 / 4`` in each step's loss variance,
        so ``D`` is set to a fraction of the smallest per-step loss spread: at
        ``D = 0.1 * spread`` the upper bound errs by ~0.1% of epsilon on the
        bench grid (measured), and the error scales with ``D^2``. For delta
        queries the target is divided by the order (``log delta`` has slope
        ~ ``-order`` in epsilon). The query then checks the gap it got and
        refines the grid if needed.

        The tilt is ``c (order - 1)``: tilting by the RDP order's ``order - 1``
        would put O(1) tilted mass at the queried epsilon, and ``c < 1`` leaves
        about ``delta^(1 - c)`` there while the tilted tails (and so the FFT
        window) stay much shorter (measured: 2-4x smaller transforms at small
        sigma, same gaps). ``c = max(1/2, 1 - 6 / log10(1/delta))`` keeps that
        mass >= 1e-6, far above the FFT round-off, down to the smallest deltas.
        """
        log10_inverse = -math.log10(min(max(delta_scale, 1e-300), 0.1))
        strength = max(_TILT_STRENGTH, 1.0 - 6.0 / log10_inverse)
        tilt = 0.0 if not math.isfinite(order) else strength * max(order - 1.0, 0.0)
        if self._discretization is not None:
            return self._discretization, tilt
        target = self._relative_accuracy
        if for_delta:
            target /= max(order if math.isfinite(order) else 1.0, 1.0)
        width = _CTD_SCALE * _step_spread(self._groups()) * math.sqrt(target / _CTD_ERROR_AT_SCALE)
        return min(max(width, _MIN_DISCRETIZATION), _MAX_DISCRETIZATION), tilt

    def _composed(self, direction: str, discretization: float, tilt: float) -> Any:
        key = (direction, discretization, round(tilt, 6))
        if key not in self._cache:
            while True:
                try:
                    built = _core.pld.ComposedPld(self._groups(), direction, discretization, tilt, self._max_size)
                except ValueError as error:
                    if "increase discretization" not in str(error) or discretization >= _MAX_DISCRETIZATION:
                        raise
                    discretization = min(2.0 * discretization, _MAX_DISCRETIZATION)  # coarser: still certified
                    continue
                break
            self._cache[key] = built
        return self._cache[key]

    # -- delta ------------------------------------------------------------------------------

    def delta_bounds(self, epsilon: ArrayLike) -> Bounds:
        """Certified ``(lower, upper)`` bounds on delta(epsilon), max over both directions.

        Parameters
        ----------
        epsilon : float or array_like
            Finite epsilons ``>= 0``.

        Returns
        -------
        Bounds
            ``lower <= delta(epsilon) <= upper`` for the composed mechanism.
        """
        eps = _check.epsilon_array(epsilon)
        lower = np.zeros_like(eps)
        upper = np.zeros_like(eps)
        groups = self._groups()
        if groups.shape[0] == 0:
            return Bounds(unwrap(lower), unwrap(upper))
        guide = self._rdp_guide()
        for index, e in np.ndenumerate(eps):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OrderGridWarning)
                delta_rdp, order = guide.get_delta_and_order(float(e))
            discretization, tilt = self._settings(float(e), float(order), float(delta_rdp), for_delta=True)
            best_lower, best_upper = 0.0, 1.0
            for _refinement in range(_REFINEMENTS + 1):
                lo_d, up_d = self._delta_bounds_at(groups, float(e), discretization, tilt)
                previous_gap = best_upper - best_lower
                best_lower, best_upper = max(best_lower, lo_d), min(best_upper, up_d)
                gap = best_upper - best_lower
                if self._discretization is not None or gap <= self._relative_accuracy * best_upper:
                    break
                # A finer grid only helps when the grid is what limits the gap: not when the
                # lower bound is uninformative (round-off dominates) or refining stopped paying.
                if discretization <= _MIN_DISCRETIZATION or best_upper <= 0.0 or lo_d <= 0.0:
                    break
                if _refinement > 0 and gap > 0.7 * previous_gap:
                    break
                # Error ~ D^2: shrink D to meet the target, with a margin.
                shrink = math.sqrt(self._relative_accuracy * best_upper / gap) * 0.8 if gap > 0 else 0.5
                discretization = max(discretization * min(max(shrink, 0.1), 0.7), _MIN_DISCRETIZATION)
            # Round-off, not the grid, limits the gap where the tilt is too small for this delta
            # (RDP order near 1 at small epsilon): more tilt puts more mass near epsilon.
            for boost in (4.0, 16.0):
                if best_upper - best_lower <= self._relative_accuracy * best_upper:
                    break
                boosted = max(tilt * boost, boost / 4.0)
                lo_d, up_d = self._delta_bounds_at(groups, float(e), discretization, boosted)
                best_lower, best_upper = max(best_lower, lo_d), min(best_upper, up_d)
            lower[index] = best_lower
            # RDP is a valid upper bound too; a positive delta below the double range stays positive.
            upper[index] = max(min(best_upper, float(delta_rdp)), _TINIEST)
        return Bounds(unwrap(lower), unwrap(upper))

    def _delta_bounds_at(
        self, groups: NDArray[np.float64], epsilon: float, discretization: float, tilt: float
    ) -> tuple[float, float]:
        """Bounds on delta(epsilon) on one grid and tilt: the max over the directions."""
        lower, upper = 0.0, 0.0
        for direction in self._directions(groups):
            lo, up = self._composed(direction, discretization, tilt).delta_bounds(np.array([epsilon]))
            lower, upper = max(lower, float(lo[0])), max(upper, float(up[0]))
        return lower, upper

    def get_delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        """A certified upper bound on delta(epsilon); see :meth:`delta_bounds`."""
        return self.delta_bounds(epsilon).upper

    # -- epsilon ----------------------------------------------------------------------------

    def epsilon_bounds(self, delta: ArrayLike) -> Bounds:
        """Certified ``(lower, upper)`` bounds on epsilon(delta), max over both directions.

        Parameters
        ----------
        delta : float or array_like
            Deltas in ``(0, 1)``.

        Returns
        -------
        Bounds
            ``lower <= epsilon(delta) <= upper``: the composition is
            (upper, delta)-DP and is not (eps, delta)-DP for any eps < lower.
        """
        d = _check.delta_array(delta)
        lower = np.zeros_like(d)
        upper = np.zeros_like(d)
        groups = self._groups()
        if groups.shape[0] == 0:
            return Bounds(unwrap(lower), unwrap(upper))
        guide = self._rdp_guide()
        for index, target in np.ndenumerate(d):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OrderGridWarning)
                eps_rdp, order = guide.get_epsilon_and_order(float(target))
            lo, up = self._epsilon_bounds_one(groups, float(target), float(eps_rdp), float(order))
            lower[index] = lo
            upper[index] = min(up, float(eps_rdp))  # RDP is a valid upper bound too
        return Bounds(unwrap(lower), unwrap(upper))

    def get_epsilon(self, delta: ArrayLike) -> float | NDArray[np.float64]:
        """A certified upper bound on epsilon(delta); see :meth:`epsilon_bounds`."""
        return self.epsilon_bounds(delta).upper

    def get_epsilon_details(self, delta: float) -> dict[str, Any]:
        """Epsilon for one delta with its certified lower bound, for reports and the CLI."""
        lower, upper = self.epsilon_bounds(delta)
        return {"epsilon": float(upper), "kind": "upper bound", "epsilon_lower_bound": float(lower)}

    def _epsilon_bounds_one(self, groups: NDArray[np.float64], delta: float, eps_rdp: float, order: float) -> tuple[float, float]:
        discretization, _tilt = self._settings(eps_rdp, order, delta)
        best_lower, best_upper = 0.0, math.inf
        for _refinement in range(_REFINEMENTS + 1):
            lo, up = self._epsilon_bounds_at(groups, delta, eps_rdp, order, discretization)
            previous_gap = best_upper - best_lower
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
            gap = best_upper - best_lower
            target = self._relative_accuracy * max(best_upper, 0.05) if math.isfinite(best_upper) else 0.0
            if self._discretization is not None or gap <= target or discretization <= _MIN_DISCRETIZATION:
                break
            if _refinement > 0 and gap > 0.7 * previous_gap:  # the grid no longer limits the gap
                break
            # Error ~ D^2: shrink D to meet the target, with a margin.
            shrink = math.sqrt(target / gap) * 0.8 if math.isfinite(gap) and target > 0 else 0.5
            discretization = max(discretization * min(max(shrink, 0.1), 0.7), _MIN_DISCRETIZATION)
        return best_lower, best_upper

    def _epsilon_bounds_at(
        self, groups: NDArray[np.float64], delta: float, eps_rdp: float, order: float, discretization: float
    ) -> tuple[float, float]:
        tilt_order = order
        lower = 0.0
        upper = 0.0
        for direction in self._directions(groups):
            # Each attempt gives certified bounds, so the tightest of them is kept. Where RDP is
            # far off (small q, T = 1e5) the tilt of the RDP order puts the mass at huge clamped
            # losses, the window cannot certify epsilon (upper = inf) or the answer lies below
            # the window, and a smaller tilt is tried, down to none.
            best_lower, best_upper = 0.0, math.inf
            order = tilt_order
            for _attempt in range(6):
                _width, tilt = self._settings(eps_rdp, order, delta)
                composed = self._composed(direction, discretization, tilt)
                lo, up, below_window = _invert(composed, delta)
                best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
                if (not below_window and math.isfinite(up)) or tilt == 0.0:
                    break
                order = 1.0 + (order - 1.0) / 4.0 if order > 1.25 else 1.0  # tilt less
            tilt_order = order  # the other direction starts from the tilt that worked here
            lower = max(lower, best_lower)
            upper = max(upper, best_upper)
        return lower, upper


def _step_spread(groups: NDArray[np.float64]) -> float:
    """The smallest per-step standard deviation of the privacy loss, approximately.

    For the Poisson-subsampled Gaussian the loss variance under P is about
    ``q^2 (e^{1/sigma^2} - 1)`` for small q, and ``1/sigma^2`` for q = 1
    (the Gaussian PLD is N(mu, 2 mu), mu = 1/(2 sigma^2)); the smaller of the
    two is used. Only the grid width depends on it: the bounds are certified
    whatever it returns.
    """
    spreads = [
        min(q * math.sqrt(math.expm1(min(1.0 / (s * s), 700.0))), 1.0 / s) for q, s, _count in groups
    ]
    return min(spreads) if spreads else 1.0


def _invert(composed: Any, delta: float) -> tuple[float, float, bool]:
    """Epsilon bounds for one direction by bisection on the monotone delta bounds.

    Returns ``(lower, upper, below_window)``; ``below_window`` says the upper
    bound's root lies below the represented losses (retry with less tilt).
    """

    def bounds(eps: float) -> tuple[float, float]:
        lo, up = composed.delta_bounds(np.array([eps]))
        return float(lo[0]), float(up[0])

    start = max(0.0, composed.window_low + 2 * composed.discretization)
    stop = composed.window_high + 1.0
    below_window = False
    # Upper bound: the smallest eps with upper(eps) <= delta.
    if bounds(start)[1] <= delta:
        upper = start
        below_window = start > 0.0
    elif bounds(stop)[1] > delta:
        upper = math.inf  # this window cannot certify delta: the RDP bound takes over
    else:
        upper = _bisect(lambda e: bounds(e)[1] <= delta, start, stop)
    # Lower bound: every eps with lower(eps) > delta is below the true epsilon.
    # The lower bound is informative only near the tilt point (far below it the
    # round-off terms swamp it), so bracket downward from the upper answer.
    lower = 0.0
    anchor = upper if math.isfinite(upper) else stop
    width = max(1e-3 * anchor, 1e-6)
    probe = anchor
    while probe > 0.0:
        probe = max(anchor - width, 0.0)
        if bounds(probe)[0] > delta:
            lower = _bisect(lambda e: bounds(e)[0] <= delta, probe, anchor, return_low=True)
            break
        anchor, width = probe, 2.0 * width
    return lower, upper, below_window


def _bisect(is_valid: Any, low: float, high: float, *, return_low: bool = False) -> float:
    """Bisection for a monotone predicate false at ``low`` and true at ``high``.

    Returns the ``high`` end (where the predicate holds), or the ``low`` end with
    ``return_low``; the bracket is shrunk to relative width 1e-10.
    """
    for _ in range(200):
        if high - low <= 1e-10 * max(high, 1e-300):
            break
        mid = 0.5 * (low + high)
        if is_valid(mid):
            high = mid
        else:
            low = mid
    return low if return_low else high


register_accountant("pld", PLDAccountant)
