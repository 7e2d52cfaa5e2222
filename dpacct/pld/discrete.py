"""Generic privacy loss distributions of any pair of distributions, with certified one-sided bounds.

A :class:`DiscretePLD` is built from a partition of the real line into cells and
the masses of every cell under the two distributions ``P`` and ``Q`` of a
dominating pair; it is composed lazily (``(pmf, count)`` groups, one FFT at
query time, by the one PLD composer of :mod:`dpacct.pld`) and answers
``delta(epsilon)`` and ``epsilon(delta)`` of the pair ``(P, Q)``.

Two roundings, each a certified bound (soundness argument with citations in
``cpp/include/dpacct/pld/step.hpp`` and ``finite.hpp``):

* ``pessimistic=True`` (default): each cell, whose losses lie between ``L`` at
  its two edges (``L`` must be non-decreasing in ``x``), is spread to the grid
  points around that range keeping its P- and Q-mass (connect the dots); the
  right tail cell and any P-mass missing from the cells go to the ``+inf``
  atom. Every result is an **upper bound**.
* ``pessimistic=False``: the pair is bucketed into the cells (post-processing,
  so its divergence can only shrink) and each bucket is labelled by its loss
  ``log(P(cell)/Q(cell))`` rounded to the grid; the hockey-stick divergence of
  the composed labels is a **lower bound**.

FFT round-off is bounded rigorously and charged to the bound (added to an upper
bound, subtracted from a lower bound).

Directions. ``delta`` is the hockey-stick divergence of the ordered pair
``(P, Q)``. Where the adjacency is symmetric, the privacy curve is the maximum
over ``(P, Q)`` and ``(Q, P)``: build the second one with ``reverse=True`` from
the same cells and take the larger delta (and the larger epsilon), e.g.
``max(pld.get_delta(e), pld_reversed.get_delta(e))``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check, _core
from dpacct._shape import unwrap

__all__ = ["ComposedPMF", "DiscretePLD"]

_DEFAULT_MAX_SIZE = 2**24
_GAUSSIAN_TAIL_SIGMAS = 14.0  # N(0,1) mass beyond 14 sigma is < 1e-44 (goes to the +inf atom)

LogFunction = Callable[[NDArray[np.float64]], Any]


class ComposedPMF(NamedTuple):
    """One step's discrete PLD: ``mass[j]`` at loss ``(offset + j) * discretization``, plus ``+inf``.

    For a pessimistic PLD these are the connect-the-dots grid masses (the
    distribution every upper bound is computed from), for an optimistic one the
    P-masses of the cell labels; ``infinity_mass`` is rounded towards the
    bound. ``error_l2``, ``tail_low`` and ``tail_high`` are 0: one step is
    exact up to the rounding of its cell masses.
    """

    offset: int
    mass: NDArray[np.float64]
    infinity_mass: float
    error_l2: float
    tail_low: float
    tail_high: float


@dataclass(frozen=True, eq=False)
class _Step:
    core: Any  # dpacct._core.pld.Step


def _log1mexp(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """log(1 - e^x) for x <= 0, the branch choice of Maechler (2012) (see logmath.hpp)."""
    with np.errstate(divide="ignore"):  # x == 0 gives log(0) = -inf: an empty cell, intended
        safe = np.minimum(x, 0.0)
        out: NDArray[np.float64] = np.where(
            safe > -math.log(2.0), np.log(-np.expm1(safe)), np.log1p(-np.exp(np.minimum(safe, -math.log(2.0))))
        )
    return out


def _log_cell_masses(log_cdf: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    """Log-masses of the cells (-inf, x_0], (x_0, x_1], ..., (x_{m-1}, inf) from log F at the edges.

    ``log(F(b) - F(a)) = log F(b) + log(1 - e^{log F(a) - log F(b)})``: relative
    accuracy follows that of ``log F`` (also for ``F`` near 1, where ``log F``
    is a small negative number, if the caller computes it accurately).
    """
    ok = (np.isfinite(log_cdf) | (log_cdf == -np.inf)) & (log_cdf <= 1e-12)
    if not np.all(ok):
        msg = f"{name} must return values in [-inf, 0] (a log-CDF), got {float(log_cdf[~ok][0])!r}"
        raise ValueError(msg)
    log_cdf = np.minimum(log_cdf, 0.0)  # round-off above 0 (e.g. from logaddexp) means F = 1
    steps = np.diff(log_cdf)
    if np.any(steps < -1e-12 * np.abs(log_cdf[1:]) - 1e-300):
        index = int(np.flatnonzero(steps < -1e-12 * np.abs(log_cdf[1:]) - 1e-300)[0]) + 1
        msg = f"{name} must be non-decreasing along the grid (a log-CDF), got a decrease at index {index}"
        raise ValueError(msg)
    log_cdf = np.maximum.accumulate(log_cdf)  # remove round-off-level decreases (checked above)
    with np.errstate(invalid="ignore"):  # -inf - -inf = nan for cells left of all mass; replaced below
        gaps = log_cdf[:-1] - log_cdf[1:]
    inner = np.where(log_cdf[1:] == -np.inf, -np.inf, log_cdf[1:] + _log1mexp(np.nan_to_num(gaps, nan=-np.inf)))
    return np.concatenate([log_cdf[:1], inner, _log1mexp(log_cdf[-1:])])


def _evaluate(function: LogFunction, grid: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    """Call a vectorised callable on the grid and check the shape of its result."""
    with np.errstate(divide="ignore", under="ignore"):  # log(0) = -inf and underflow are valid log-masses
        values = np.asarray(function(grid), dtype=np.float64)
    if values.shape != grid.shape:
        msg = f"{name} must return an array of the grid's shape {grid.shape}, got {values.shape}"
        raise ValueError(msg)
    if np.any(np.isnan(values)):
        index = int(np.flatnonzero(np.isnan(values))[0])
        msg = f"{name} must not return NaN, got nan at grid index {index}"
        raise ValueError(msg)
    return values


def _as_log_array(name: str, value: ArrayLike) -> NDArray[np.float64]:
    array = np.asarray(value, dtype=np.float64) if not isinstance(value, (str, bytes)) else None
    if array is None or array.ndim != 1 or array.size == 0:
        msg = f"{name} must be a non-empty 1-d array of log-probabilities"
        raise ValueError(msg)
    return np.ascontiguousarray(array)


class DiscretePLD:
    """Discrete privacy loss distribution of a pair ``(P, Q)``: a certified upper or lower bound.

    Build one with :meth:`from_cells`, :meth:`from_log_cdfs` or
    :meth:`from_gaussian`; compose with :meth:`compose` / :meth:`self_compose`
    (lazy: the FFT runs once, at the first query). Objects are immutable.

    Notes
    -----
    ``get_delta`` and ``get_epsilon`` return **upper bounds** when
    ``pessimistic`` is true and **lower bounds** otherwise (see the module
    docstring). Steps are composed by the same composer as
    :class:`dpacct.pld.PLDAccountant` (untilted here): if the full composed
    support does not fit in ``max_size`` entries, only a Chernoff window is
    kept and the mass outside it is charged to the bound; if even that window
    does not fit, a ``ValueError`` says to increase ``discretization``. FFT
    round-off is bounded and charged; without tilting it dominates deltas
    below about ``1e-10`` after large compositions.

    References
    ----------
    .. [1] D. Sommer, S. Meiser, E. Mohammadi, "Privacy Loss Classes: The Central
       Limit Theorem in Differential Privacy", PoPETs 2019.
    .. [2] A. Koskela, J. Jalko, A. Honkela, "Computing Tight Differential
       Privacy Guarantees Using FFT", AISTATS 2020, arXiv:1906.03049.
    .. [3] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi,
       "Connect the Dots: Tighter Discrete Approximations of Privacy Loss
       Distributions", PoPETs 2022, arXiv:2207.04380.
    """

    def __init__(
        self, *, groups: tuple[tuple[_Step, int], ...], discretization: float, pessimistic: bool, max_size: int
    ) -> None:
        self._groups = groups
        self._discretization = discretization
        self._pessimistic = pessimistic
        self._max_size = max_size
        self._composed: Any = None

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_cells(
        cls,
        *,
        log_p: ArrayLike,
        log_q: ArrayLike,
        log_ratio_at_edges: ArrayLike | None = None,
        discretization: float,
        pessimistic: bool = True,
        reverse: bool = False,
        max_size: int = _DEFAULT_MAX_SIZE,
    ) -> DiscretePLD:
        """One step of the pair ``(P, Q)`` (or ``(Q, P)`` if ``reverse``) from the cells of a partition.

        Parameters
        ----------
        log_p, log_q : array_like
            ``log P(cell)`` and ``log Q(cell)`` for the ``n`` cells
            ``(-inf, x_0], (x_0, x_1], ..., (x_{n-2}, inf)`` of edges
            ``x_0 < ... < x_{n-2}``; each ``<= 0`` (``-inf`` for an empty cell).
            They are taken as exact; P-mass missing from them (``1 - sum``) goes
            to ``+inf`` when pessimistic.
        log_ratio_at_edges : array_like, optional
            ``L(x_i) = log p(x_i)/q(x_i)`` at the ``n - 1`` edges, non-decreasing
            (a ``ValueError`` otherwise). Required when pessimistic; any values
            ``>=`` the supremum of ``L`` on cell ``i`` keep the bound valid.
        discretization : float
            Width ``D`` of the loss grid, finite and ``> 0``.
        pessimistic : bool
            Upper bound (default) or lower bound (see the class notes).
        reverse : bool
            Build the pair ``(Q, P)`` from the same cells (the cells are taken
            in reverse order and the ratio is negated, so it stays monotone).
        max_size : int
            Most entries of a PMF and most FFT size allowed (default ``2**24``).

        Returns
        -------
        DiscretePLD
            One step; upper-bound or lower-bound as ``pessimistic`` says.

        Examples
        --------
        >>> from scipy.special import log_ndtr
        >>> x = np.linspace(-10.0, 11.0, 20001)  # N(1, 1) against N(0, 1)
        >>> pld = DiscretePLD.from_log_cdfs(
        ...     log_cdf_p=lambda t: log_ndtr(t - 1.0), log_cdf_q=log_ndtr,
        ...     log_pdf_p=lambda t: -0.5 * (t - 1.0) ** 2, log_pdf_q=lambda t: -0.5 * t**2,
        ...     grid=x, discretization=1e-3)
        >>> round(pld.get_delta(1.0), 3)  # exact: 0.127
        0.127
        """
        d = _check.positive("discretization", discretization)
        pess = _bool("pessimistic", pessimistic)
        rev = _bool("reverse", reverse)
        size = _max_size(max_size)
        lp = _as_log_array("log_p", log_p)
        lq = _as_log_array("log_q", log_q)
        if lp.shape != lq.shape:
            msg = f"log_p and log_q must have the same length, got {lp.size} and {lq.size}"
            raise ValueError(msg)
        ratio: NDArray[np.float64] | None = None
        if log_ratio_at_edges is not None:
            ratio = np.ascontiguousarray(np.asarray(log_ratio_at_edges, dtype=np.float64))
            if ratio.ndim != 1 or ratio.size != lp.size - 1:
                msg = (
                    f"log_ratio_at_edges must be a 1-d array of length len(log_p) - 1 = {lp.size - 1}, "
                    f"got shape {ratio.shape}"
                )
                raise ValueError(msg)
        elif pess:
            msg = "log_ratio_at_edges is required when pessimistic=True (the bound takes the largest loss of each cell)"
            raise ValueError(msg)
        if rev:
            lp, lq = lq[::-1].copy(), lp[::-1].copy()
            if ratio is not None:
                ratio = -ratio[::-1]
        step = _Step(_core.pld.cells_step(lp, lq, ratio if pess else None, d, size))
        return cls(groups=((step, 1),), discretization=d, pessimistic=pess, max_size=size)

    @classmethod
    def from_log_cdfs(
        cls,
        *,
        log_cdf_p: LogFunction,
        log_cdf_q: LogFunction,
        log_pdf_p: LogFunction | None = None,
        log_pdf_q: LogFunction | None = None,
        grid: ArrayLike,
        discretization: float,
        pessimistic: bool = True,
        reverse: bool = False,
        max_size: int = _DEFAULT_MAX_SIZE,
    ) -> DiscretePLD:
        """One step of a pair of distributions on the line given by vectorised log-CDFs.

        Parameters
        ----------
        log_cdf_p, log_cdf_q : callable
            Vectorised ``x -> log F(x)``; accurate in relative terms where
            ``F`` is near 1 too (as ``scipy.special.log_ndtr`` is), because the
            right-tail masses are ``1 - F``.
        log_pdf_p, log_pdf_q : callable, optional
            Vectorised log-densities (up to a common additive constant); their
            difference at the grid points is the monotone ratio required by
            pessimistic rounding.
        grid : array_like
            The edges ``x_0 < ... < x_{m-1}``, finite and strictly increasing.
        discretization, pessimistic, reverse, max_size
            As in :meth:`from_cells`.

        Returns
        -------
        DiscretePLD
            One step; upper-bound or lower-bound as ``pessimistic`` says.
        """
        x = np.asarray(grid, dtype=np.float64)
        if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)) or np.any(np.diff(x) <= 0.0):
            msg = "grid must be a non-empty 1-d array of finite, strictly increasing edges"
            raise ValueError(msg)
        log_p = _log_cell_masses(_evaluate(log_cdf_p, x, "log_cdf_p"), "log_cdf_p")
        log_q = _log_cell_masses(_evaluate(log_cdf_q, x, "log_cdf_q"), "log_cdf_q")
        ratio = None
        if pessimistic:
            if log_pdf_p is None or log_pdf_q is None:
                msg = "log_pdf_p and log_pdf_q are required when pessimistic=True"
                raise ValueError(msg)
            with np.errstate(invalid="ignore"):  # inf - inf: checked just below
                ratio = _evaluate(log_pdf_p, x, "log_pdf_p") - _evaluate(log_pdf_q, x, "log_pdf_q")
            if np.any(np.isnan(ratio)):
                msg = "log_pdf_p - log_pdf_q must not be NaN (both -inf or both +inf at an edge)"
                raise ValueError(msg)
        return cls.from_cells(
            log_p=log_p,
            log_q=log_q,
            log_ratio_at_edges=ratio,
            discretization=discretization,
            pessimistic=pessimistic,
            reverse=reverse,
            max_size=max_size,
        )

    @classmethod
    def from_gaussian(
        cls,
        *,
        noise_multiplier: float,
        discretization: float = 1e-3,
        pessimistic: bool = True,
        max_size: int = _DEFAULT_MAX_SIZE,
    ) -> DiscretePLD:
        """One Gaussian mechanism of sensitivity 1: the pair ``N(1, s^2)`` against ``N(0, s^2)``.

        The edges are placed where the loss ``(2x - 1)/(2 s^2)`` meets the grid
        (nudged left by a relative 1e-12, so that the loss at each edge is just
        below its grid point and rounding up cannot jump a whole step), from
        14 standard deviations below the loss's mean to 14 above; the pair is
        symmetric, so one direction suffices.

        Parameters
        ----------
        noise_multiplier : float
            ``s``, finite and ``> 0``.
        discretization : float
            Loss grid width (default 1e-3).
        pessimistic : bool
            Upper bound (default) or lower bound.
        max_size : int
            As in :meth:`from_cells`.

        Returns
        -------
        DiscretePLD
            One step; upper-bound or lower-bound as ``pessimistic`` says.

        Examples
        --------
        >>> pld = DiscretePLD.from_gaussian(noise_multiplier=2.0).self_compose(4)
        >>> round(pld.get_epsilon(1e-5), 2)  # exact (sigma = 1): 4.38
        4.38
        """
        from scipy.special import log_ndtr

        s = _check.noise_multiplier(noise_multiplier)
        d = _check.positive("discretization", discretization)
        mean, sd = 0.5 / s**2, 1.0 / s
        first = math.floor((mean - _GAUSSIAN_TAIL_SIGMAS * sd) / d)
        last = math.ceil((mean + _GAUSSIAN_TAIL_SIGMAS * sd) / d)
        if last - first + 1 > _max_size(max_size):
            msg = (
                f"discretization {d!r} is too fine for noise_multiplier {s!r}: one step needs "
                f"{last - first + 1} cells > max_size {max_size}; increase discretization or max_size"
            )
            raise ValueError(msg)
        x = s**2 * (np.arange(first, last + 1) * d) + 0.5
        x -= 1e-12 * (np.abs(x) + s**2)
        return cls.from_log_cdfs(
            log_cdf_p=lambda t: log_ndtr((t - 1.0) / s),
            log_cdf_q=lambda t: log_ndtr(t / s),
            log_pdf_p=lambda t: -0.5 * ((t - 1.0) / s) ** 2,
            log_pdf_q=lambda t: -0.5 * (t / s) ** 2,
            grid=x,
            discretization=d,
            pessimistic=pessimistic,
            max_size=max_size,
        )

    # ------------------------------------------------------------------ composition
    @property
    def discretization(self) -> float:
        """Width of the loss grid."""
        return self._discretization

    @property
    def pessimistic(self) -> bool:
        """True: results are upper bounds; False: lower bounds."""
        return self._pessimistic

    @property
    def count(self) -> int:
        """Total number of composed steps."""
        return sum(c for _, c in self._groups)

    def compose(self, other: DiscretePLD, count: int = 1) -> DiscretePLD:
        """The composition of this PLD with ``count`` copies of ``other`` (same grid and rounding).

        Raises
        ------
        TypeError
            If ``other`` is not a :class:`DiscretePLD`.
        ValueError
            If the discretizations or roundings differ, or ``count < 0``.
        """
        if not isinstance(other, DiscretePLD):
            msg = f"other must be a DiscretePLD, got {type(other).__name__}"
            raise TypeError(msg)
        n = _check.count("count", count)
        if other._discretization != self._discretization:
            msg = f"other must have discretization {self._discretization!r}, got {other._discretization!r}"
            raise ValueError(msg)
        if other._pessimistic != self._pessimistic:
            msg = f"other must have pessimistic={self._pessimistic}, got {other._pessimistic}"
            raise ValueError(msg)
        counts: dict[int, list[Any]] = {}
        for step, c in self._groups + tuple((s, c * n) for s, c in other._groups):
            entry = counts.setdefault(id(step), [step, 0])
            entry[1] += c
        groups = tuple((step, c) for step, c in counts.values() if c > 0)
        return DiscretePLD(
            groups=groups, discretization=self._discretization, pessimistic=self._pessimistic, max_size=self._max_size
        )

    def self_compose(self, count: int) -> DiscretePLD:
        """The ``count``-fold composition of this PLD with itself (``count >= 0``; 0 gives the identity)."""
        n = _check.count("count", count)
        groups = tuple((step, c * n) for step, c in self._groups if c * n > 0)
        return DiscretePLD(
            groups=groups, discretization=self._discretization, pessimistic=self._pessimistic, max_size=self._max_size
        )

    def _core(self) -> Any:
        if self._composed is None:
            steps = [s.core for s, _ in self._groups]
            self._composed = _core.pld.ComposedPld(steps, [float(c) for _, c in self._groups], 0.0, self._max_size)
        return self._composed

    # ---------------------------------------------------------------------- queries
    def get_delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        """Certified bound on delta(epsilon) of the composed pair.

        Parameters
        ----------
        epsilon : float or array_like
            One or more epsilons, each finite and ``>= 0``.

        Returns
        -------
        float or ndarray
            An **upper bound** if ``pessimistic``, a **lower bound** otherwise,
            including discretization and FFT round-off.
        """
        eps = _check.epsilon_array(epsilon)
        lower, upper = self._core().delta_bounds(np.ascontiguousarray(eps.reshape(-1)))
        out = np.asarray(upper if self._pessimistic else lower, dtype=np.float64).reshape(eps.shape)
        return unwrap(out)

    def get_epsilon(self, delta: ArrayLike) -> float | NDArray[np.float64]:
        """Certified bound on epsilon(delta) of the composed pair, by bisection on the certified delta.

        Parameters
        ----------
        delta : float or array_like
            One or more deltas in ``(0, 1)``.

        Returns
        -------
        float or ndarray
            An **upper bound** if ``pessimistic`` (``inf`` if none can be
            certified), a **lower bound** otherwise (``inf`` when the ``+inf``
            atom alone exceeds ``delta``).
        """
        d = _check.delta_array(delta)
        composed = self._core()
        out = np.empty_like(d)
        for index, target in np.ndenumerate(d):
            lower, upper, _below = composed.epsilon_bounds(float(target))
            out[index] = upper if self._pessimistic else lower
        return unwrap(out)

    def pmf(self) -> ComposedPMF:
        """The discrete PLD of a single step (see :class:`ComposedPMF`).

        Raises
        ------
        ValueError
            If this PLD is a composition: composed PLDs are answered by the
            tilted FFT composer (:meth:`get_delta`, :meth:`get_epsilon`), which
            never forms the untilted composed PMF.
        """
        if len(self._groups) != 1 or self._groups[0][1] != 1:
            msg = f"pmf() is available for a single step, got a composition of {self.count} steps"
            raise ValueError(msg)
        core = self._groups[0][0].core
        if self._pessimistic:
            log_mass, offset, infinity = core.log_upper, core.upper_low, core.infinity_upper
        else:
            log_mass, offset, infinity = core.log_p, core.label_low, core.infinity_lower
        return ComposedPMF(int(offset), np.exp(np.asarray(log_mass)), float(infinity), 0.0, 0.0, 0.0)

    def __repr__(self) -> str:
        kind = "pessimistic" if self._pessimistic else "optimistic"
        return f"DiscretePLD({kind}, discretization={self._discretization!r}, count={self.count})"


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        msg = f"{name} must be a bool, got {type(value).__name__}"
        raise TypeError(msg)
    return bool(value)


def _max_size(value: Any) -> int:
    n = _check.count("max_size", value)
    if n < 2:
        msg = f"max_size must be an integer >= 2, got {n}"
        raise ValueError(msg)
    return n
