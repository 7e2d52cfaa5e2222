"""Trade-off functions (f-DP) as objects: evaluation, duality with privacy curves, attack risk.

A trade-off function ``f(alpha)`` is the smallest type-II error (``beta``) of any
test of ``P`` against ``Q`` with type-I error at most ``alpha`` (Dong, Roth, Su,
"Gaussian Differential Privacy", JRSS-B 2022, arXiv:1905.02383, Definition 2.1).
Read as membership inference: an attack with false-positive rate ``alpha`` has a
true-positive rate of at most ``1 - f(alpha)``.

A :class:`TradeoffCurve` carries two curves:

* ``lower`` (certified): lies *below* the true trade-off curve everywhere, i.e. it
  is an **upper bound on the leakage**; every attack bound, delta and epsilon
  derived from it is a certified upper bound;
* ``upper`` (optimistic): lies *above* the true curve; bounds derived from it
  are **lower bounds** on the leakage. ``upper - lower`` is the numerical gap.

Curves built from a privacy curve ``delta(epsilon)`` are stored exactly as
piecewise-linear convex functions (the upper envelope of the lines of the
``(epsilon, delta)`` guarantees, Dong, Roth, Su, Proposition 2.12), so every
query on them (``f``, ``delta``, the largest attack success, the GDP ``mu``) is
exact for the stored curve.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from dpacct import _check
from dpacct._shape import unwrap
from dpacct.results import Interval, Value

__all__ = ["TradeoffCurve", "gaussian_tradeoff"]

_Vertices = tuple[NDArray[np.float64], NDArray[np.float64]]


def _alpha_array(alpha: ArrayLike, name: str = "alpha") -> NDArray[np.float64]:
    a = np.asarray(alpha, dtype=np.float64)
    bad = ~((a >= 0.0) & (a <= 1.0))
    if np.any(bad):
        index = int(np.flatnonzero(bad.ravel())[0])
        where = "" if a.ndim == 0 else f" at index {index}"
        msg = f"{name} must be in [0, 1], got {float(a.ravel()[index])!r}{where}"
        raise ValueError(msg)
    return a


def gaussian_tradeoff(*, mu: float, alpha: ArrayLike) -> float | NDArray[np.float64]:
    r"""The Gaussian trade-off function ``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)``.

    Parameters
    ----------
    mu : float
        GDP parameter, finite and ``>= 0``.
    alpha : float or array_like
        Type-I errors in ``[0, 1]``.

    Returns
    -------
    float or ndarray
        ``T(N(0, 1), N(mu, 1))(alpha)``, exact (Dong, Roth, Su, arXiv:1905.02383, eq. (2.2)).

    Examples
    --------
    >>> round(1 - gaussian_tradeoff(mu=1.0, alpha=0.01), 5)   # largest TPR at FPR 0.01
    0.09236
    """
    m = _check.real("mu", mu)
    if not (m >= 0.0 and math.isfinite(m)):
        msg = f"mu must be finite and >= 0, got {m!r}"
        raise ValueError(msg)
    a = _alpha_array(alpha)
    # Phi^{-1}(1 - alpha) = -ndtri(alpha) keeps full precision for tiny alpha.
    with np.errstate(over="ignore"):
        out = special.ndtr(-special.ndtri(a) - m)
    return unwrap(np.asarray(out, dtype=np.float64))


def _upper_envelope(slopes: NDArray[np.float64], intercepts: NDArray[np.float64]) -> _Vertices:
    """Vertices on [0, 1] of ``max(0, max_i (intercept_i + slope_i alpha))`` (a convex polyline)."""
    s = np.concatenate([slopes, [0.0]])
    b = np.concatenate([intercepts, [0.0]])
    order = np.lexsort((-b, s))  # by slope, then largest intercept first
    hull: list[tuple[float, float]] = []
    for i in order:
        si, bi = float(s[i]), float(b[i])
        if hull and hull[-1][0] == si:
            continue  # same slope, smaller intercept: never on the envelope
        while len(hull) >= 2:
            (s1, b1), (s2, b2) = hull[-2], hull[-1]
            # Slopes increase along the hull: line 2 is useless when the new line overtakes
            # line 1 no later than line 2 does, x_13 <= x_12.
            if (b1 - bi) * (s2 - s1) <= (b1 - b2) * (si - s1):
                hull.pop()
            else:
                break
        hull.append((si, bi))
    # hull is ordered by increasing slope: for a max of lines the steepest (most negative) wins
    # at alpha = 0. Walk from alpha = 0 to 1.
    xs = [0.0]
    ys = [max(b0 + s0 * 0.0 for s0, b0 in hull)]
    # Among lines with the max value at 0, take the steepest (smallest slope) to start with.
    best = max(b0 for _, b0 in hull)
    k = min(i for i, (_, b0) in enumerate(hull) if b0 == best)
    while k < len(hull) - 1:
        s1, b1 = hull[k]
        s2, b2 = hull[k + 1]
        x = (b1 - b2) / (s2 - s1)
        if x >= 1.0:
            break
        if x > xs[-1]:
            xs.append(x)
            ys.append(b2 + s2 * x)
        k += 1
    s_last, b_last = hull[k]
    xs.append(1.0)
    ys.append(max(b_last + s_last, 0.0))
    alpha = np.asarray(xs)
    beta = np.clip(np.asarray(ys), 0.0, 1.0)
    return alpha, beta


def _lines(epsilon: NDArray[np.float64], delta: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The two lines of each (epsilon, delta) guarantee (Dong, Roth, Su, Proposition 2.5)."""
    e = np.exp(epsilon)
    one = 1.0 - delta
    slopes = np.concatenate([-e, -1.0 / e])
    intercepts = np.concatenate([one, one / e])
    return slopes, intercepts


def _convex_minorant(alpha: NDArray[np.float64], beta: NDArray[np.float64]) -> _Vertices:
    """Greatest convex function below the points (the lower hull)."""
    order = np.argsort(alpha, kind="stable")
    hull: list[tuple[float, float]] = []
    for a, b in zip(alpha[order].tolist(), beta[order].tolist()):
        if hull and hull[-1][0] == a:
            if b < hull[-1][1]:
                hull.pop()
            else:
                continue
        while len(hull) >= 2:
            (a1, b1), (a2, b2) = hull[-2], hull[-1]
            if (b2 - b1) * (a - a1) >= (b - b1) * (a2 - a1):
                hull.pop()
            else:
                break
        hull.append((a, b))
    return np.array([h[0] for h in hull]), np.array([h[1] for h in hull])


def _eval(vertices: _Vertices, alpha: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(np.interp(alpha, vertices[0], vertices[1]), dtype=np.float64)


def _delta_of(vertices: _Vertices, epsilon: NDArray[np.float64]) -> NDArray[np.float64]:
    """``delta(eps) = max_alpha 1 - f(alpha) - e^eps alpha``, attained at a vertex (concave in alpha)."""
    a, b = vertices
    e = np.exp(epsilon)[..., None]
    return np.asarray(np.clip(np.max(1.0 - b - e * a, axis=-1), 0.0, 1.0), dtype=np.float64)


class TradeoffCurve:
    r"""A trade-off function with a certified lower curve and an optimistic upper curve.

    Build one with :meth:`gaussian`, :meth:`from_privacy_curve` or
    :meth:`from_points`; the f-DP accountant (:class:`dpacct.fdp.FDPAccountant`)
    returns one from :meth:`~dpacct.fdp.FDPAccountant.tradeoff`.

    Calling the curve, ``curve(alpha)``, returns the **certified** value: below
    the true trade-off function, so ``1 - curve(alpha)`` is an upper bound on the
    true-positive rate of any membership-inference attack at false-positive
    rate ``alpha``.

    Examples
    --------
    >>> g = TradeoffCurve.gaussian(1.0)
    >>> round(float(g.tpr(0.01)), 5)
    0.09236
    >>> round(float(g.delta(1.0)), 6)    # the 1-GDP privacy curve at epsilon = 1
    0.126937
    >>> c = TradeoffCurve.from_privacy_curve(np.linspace(0, 6, 200), g.delta(np.linspace(0, 6, 200)))
    >>> bool(np.all(c(np.linspace(0, 1, 11)) <= g(np.linspace(0, 1, 11)) + 1e-12))
    True
    """

    def __init__(
        self,
        *,
        lower: _Vertices | None,
        upper: _Vertices | None,
        method: str,
        mu: float | None = None,
        kind: str = "bounds",
        details: dict[str, Any] | None = None,
    ) -> None:
        self._lower = lower
        self._upper = upper
        self._mu = mu
        self.method = method
        #: ``"exact"`` (closed form), ``"bounds"`` (certified lower, optimistic upper),
        #: ``"upper bound"`` (a certified ``G_mu`` with no optimistic side), or
        #: ``"heuristic"`` (e.g. the GDP central limit theorem: neither side is certified).
        self.kind = kind
        self.details: dict[str, Any] = dict(details or {})

    # -- construction -------------------------------------------------------------------

    @classmethod
    def gaussian(cls, mu: float, *, method: str = "Gaussian DP (exact)", kind: str = "exact") -> TradeoffCurve:
        """The curve ``G_mu``: ``kind="exact"``, ``"upper bound"`` (certified below the truth) or ``"heuristic"``."""
        gaussian_tradeoff(mu=mu, alpha=0.5)  # validates mu
        return cls(lower=None, upper=None, method=method, mu=float(mu), kind=kind)

    @classmethod
    def from_privacy_curve(
        cls,
        epsilon: ArrayLike,
        delta_upper: ArrayLike,
        delta_lower: ArrayLike | None = None,
        *,
        method: str = "privacy curve",
    ) -> TradeoffCurve:
        r"""The trade-off curve of a mechanism from its privacy curve on a grid of epsilons.

        Parameters
        ----------
        epsilon : array_like
            Increasing epsilons ``>= 0``.
        delta_upper : array_like
            Upper bounds on delta(epsilon) at those epsilons (for both neighbour orders).
        delta_lower : array_like, optional
            Lower bounds on delta(epsilon); without them the upper curve is the trivial
            ``1 - alpha``.

        Notes
        -----
        Certified curve: ``f(alpha) = max_i max(0, 1 - delta_i - e^{eps_i} alpha,
        e^{-eps_i} (1 - delta_i - alpha))`` (Dong, Roth, Su, arXiv:1905.02383,
        Proposition 2.12); any subset of the guarantees gives a curve below the true
        one. Optimistic curve: for ``eps`` in ``[eps_i, eps_{i+1}]`` the true delta is
        at least ``delta_lower_{i+1}`` (delta is non-increasing) and ``e^eps >=
        e^{eps_i}``, so the same lines with ``(eps_i, delta_lower_{i+1})`` and, past
        the grid, ``(eps_max, 0)``, bound every line of the true curve from above.
        """
        eps = np.asarray(epsilon, dtype=np.float64).ravel()
        du = np.asarray(delta_upper, dtype=np.float64).ravel()
        if eps.size == 0 or eps.shape != du.shape or np.any(~np.isfinite(eps)) or np.any(eps < 0) or np.any(np.diff(eps) <= 0):
            msg = "epsilon must be a non-empty increasing array of finite values >= 0, with one delta each"
            raise ValueError(msg)
        if np.any(~((du >= 0) & (du <= 1))):
            msg = "delta_upper must be in [0, 1]"
            raise ValueError(msg)
        lower = _upper_envelope(*_lines(eps, du))
        if delta_lower is None:
            upper = (np.array([0.0, 1.0]), np.array([1.0, 0.0]))
        else:
            dl = np.asarray(delta_lower, dtype=np.float64).ravel()
            if dl.shape != eps.shape or np.any(~((dl >= 0) & (dl <= 1))):
                msg = "delta_lower must be in [0, 1], one per epsilon"
                raise ValueError(msg)
            shifted = np.concatenate([dl[1:], [0.0]])
            upper = _upper_envelope(*_lines(eps, shifted))
        return cls(lower=lower, upper=upper, method=method)

    @classmethod
    def from_points(
        cls, alpha: ArrayLike, beta: ArrayLike, *, method: str = "points", kind: str = "exact"
    ) -> TradeoffCurve:
        """The convex minorant of the points ``(alpha_i, beta_i)`` (and ``(1, 0)``), as both curves."""
        a = _alpha_array(alpha).ravel()
        b = _alpha_array(beta, "beta").ravel()
        if a.shape != b.shape:
            msg = "alpha and beta must have the same length"
            raise ValueError(msg)
        vertices = _convex_minorant(np.concatenate([a, [1.0]]), np.concatenate([b, [0.0]]))
        return cls(lower=vertices, upper=vertices, method=method, kind=kind)

    # -- evaluation ---------------------------------------------------------------------

    @property
    def mu(self) -> float | None:
        """The GDP parameter when the curve is exactly ``G_mu``, else None."""
        return self._mu

    def __call__(self, alpha: ArrayLike) -> float | NDArray[np.float64]:
        """The certified curve at ``alpha`` (below the true trade-off function)."""
        a = _alpha_array(alpha)
        if self._mu is not None:
            return gaussian_tradeoff(mu=self._mu, alpha=a)
        assert self._lower is not None
        return unwrap(np.asarray(_eval(self._lower, a)))

    def optimistic(self, alpha: ArrayLike) -> float | NDArray[np.float64]:
        """The optimistic curve at ``alpha`` (above the true trade-off function)."""
        a = _alpha_array(alpha)
        if self._mu is not None:
            if self.kind == "upper bound":  # G_mu only certified as a lower curve: the trivial upper one
                return unwrap(np.asarray(1.0 - a, dtype=np.float64))
            return gaussian_tradeoff(mu=self._mu, alpha=a)
        assert self._upper is not None
        return unwrap(np.asarray(_eval(self._upper, a)))

    def bounds(self, alpha: ArrayLike) -> Interval:
        """``lower <= f(alpha) <= upper`` (``quantity="tradeoff"``)."""
        return Interval(lower=self(alpha), upper=self.optimistic(alpha), quantity="tradeoff", method=self.method)

    def gap(self) -> float:
        """Largest ``upper - lower`` over alpha (0 for an exact curve)."""
        if self._mu is not None or self._lower is None or self._upper is None:
            return 0.0
        grid = np.unique(np.concatenate([self._lower[0], self._upper[0]]))
        return float(np.max(_eval(self._upper, grid) - _eval(self._lower, grid)))

    def arrays(self, points: int = 201) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The certified curve as arrays ``(alpha, beta)``: a grid (log-spaced near 0) plus the vertices."""
        n = _check.count("points", points)
        grid = np.unique(np.concatenate([np.linspace(0.0, 1.0, max(n, 2)), np.geomspace(1e-6, 1.0, max(n // 4, 2))]))
        if self._lower is not None and self._mu is None:
            grid = np.unique(np.concatenate([grid, self._lower[0]]))
        return grid, np.asarray(self(grid), dtype=np.float64)

    def _vertices(self, which: str) -> _Vertices:
        if self._mu is not None:  # callers handle the closed form before asking for vertices
            msg = "a closed-form G_mu curve has no stored vertices"
            raise RuntimeError(msg)
        v = self._lower if which == "lower" else self._upper
        assert v is not None
        return v

    # -- derived curves -----------------------------------------------------------------

    def inverse(self) -> TradeoffCurve:
        """The inverse ``f^{-1}`` (the trade-off function of the swapped pair)."""
        if self._mu is not None:
            return self  # G_mu is symmetric
        lo, up = self._vertices("lower"), self._vertices("upper")
        return TradeoffCurve(
            lower=_convex_minorant(np.concatenate([lo[1], [1.0]]), np.concatenate([lo[0], [0.0]])),
            upper=_convex_minorant(np.concatenate([up[1], [1.0]]), np.concatenate([up[0], [0.0]])),
            method=f"inverse of {self.method}", kind=self.kind, details=self.details,
        )

    def symmetrised(self) -> TradeoffCurve:
        """``min(f, f^{-1})**``: the guarantee for both neighbour orders (Dong, Roth, Su, Proposition 2.4)."""
        if self._mu is not None:
            return self
        inv = self.inverse()
        out = []
        for mine, theirs in ((self._vertices("lower"), inv._vertices("lower")),
                             (self._vertices("upper"), inv._vertices("upper"))):
            grid = np.unique(np.concatenate([mine[0], theirs[0]]))
            low = np.minimum(_eval(mine, grid), _eval(theirs, grid))
            out.append(_convex_minorant(grid, low))
        return TradeoffCurve(lower=out[0], upper=out[1], method=f"symmetrised {self.method}", kind=self.kind,
                             details=self.details)

    # -- privacy curve (duality) ---------------------------------------------------------

    def delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        r"""delta(epsilon) from the certified curve: ``max_alpha 1 - f(alpha) - e^eps alpha``.

        An upper bound on the true delta (exact for an exact curve). Assumes a
        symmetric curve (use :meth:`symmetrised` first otherwise).
        """
        eps = _check.epsilon_array(epsilon)
        if self._mu is not None:
            return _gdp_delta(self._mu, eps)
        return unwrap(_delta_of(self._vertices("lower"), eps))

    def delta_bounds(self, epsilon: ArrayLike) -> Interval:
        """Certified ``lower <= delta(epsilon) <= upper`` from the two curves."""
        eps = _check.epsilon_array(epsilon)
        if self._mu is not None:
            d = _gdp_delta(self._mu, eps)
            lower = np.zeros_like(eps) if self.kind == "upper bound" else d
            return Interval(lower=unwrap(np.asarray(lower)), upper=d, quantity="delta", method=self.method)
        return Interval(lower=unwrap(_delta_of(self._vertices("upper"), eps)), upper=self.delta(eps),
                        quantity="delta", method=self.method)

    def epsilon(self, delta: float) -> float:
        """epsilon(delta) from the certified curve (an upper bound; ``inf`` if none is finite)."""
        target = _check.delta(delta)
        return _invert_decreasing(lambda e: float(np.asarray(self.delta(e))), target)

    # -- attack risk --------------------------------------------------------------------

    def tpr(self, fpr: ArrayLike) -> Value:
        """Largest true-positive rate of any membership-inference attack at false-positive rate ``fpr``.

        ``1 - f(fpr)`` from the certified curve: an upper bound (exact for an exact curve).
        """
        a = _alpha_array(fpr, "fpr")
        kind = "exact" if self.kind == "exact" else ("heuristic" if self.kind == "heuristic" else "upper bound")
        return Value(value=1.0 - np.asarray(self(a)), quantity="tpr", kind=kind,  # type: ignore[arg-type]
                     method=self.method, details={"fpr": a})

    def tpr_bounds(self, fpr: ArrayLike) -> Interval:
        """Certified ``lower <= max TPR at fpr <= upper``."""
        a = _alpha_array(fpr, "fpr")
        return Interval(lower=1.0 - np.asarray(self.optimistic(a)), upper=1.0 - np.asarray(self(a)),
                        quantity="tpr", method=self.method, details={"fpr": a})

    def advantage(self) -> Value:
        """Largest membership advantage ``max_alpha (1 - f(alpha) - alpha)`` (TPR - FPR).

        Equal to ``delta(0)``; for ``G_mu`` it is ``2 Phi(mu/2) - 1``.
        """
        kind = "exact" if self.kind == "exact" else ("heuristic" if self.kind == "heuristic" else "upper bound")
        return Value(value=float(np.asarray(self.delta(0.0))), quantity="advantage", kind=kind,  # type: ignore[arg-type]
                     method=self.method)

    # -- Gaussian DP ------------------------------------------------------------------------

    def gdp_mu(self) -> Interval:
        """The tightest GDP parameter the curves imply: ``lower <= mu* <= upper``.

        ``upper`` is the smallest ``mu`` with ``certified curve >= G_mu`` everywhere:
        the mechanism is ``upper``-GDP. ``lower``: the optimistic curve is below
        ``G_mu`` somewhere for every smaller ``mu``, so no smaller mu is certified
        by the true curve. Checked at the vertices (a piecewise-linear curve minus
        the convex ``G_mu`` is concave on each piece), then bisection on mu.
        """
        if self._mu is not None:
            return Interval(lower=0.0 if self.kind == "upper bound" else self._mu, upper=self._mu, quantity="mu",
                            method=self.method)
        return Interval(lower=_smallest_mu(self._vertices("upper")), upper=_smallest_mu(self._vertices("lower")),
                        quantity="mu", method=self.method)


def _gdp_delta(mu: float, eps: NDArray[np.float64]) -> float | NDArray[np.float64]:
    """delta(eps) of mu-GDP (Dong, Roth, Su, arXiv:1905.02383, Corollary 2.13), in log space."""
    if mu == 0.0:
        return unwrap(np.zeros_like(eps))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        a = special.log_ndtr(-eps / mu + mu / 2.0)
        b = eps + special.log_ndtr(-eps / mu - mu / 2.0)
        out = np.where(a > b, np.exp(a) * -np.expm1(np.minimum(b - a, 0.0)), 0.0)
    return unwrap(np.clip(out, 0.0, 1.0))


def _smallest_mu(vertices: _Vertices) -> float:
    a, b = vertices

    def ok(mu: float) -> bool:
        return bool(np.all(b >= np.asarray(gaussian_tradeoff(mu=mu, alpha=a)) - 1e-15))

    if not ok(1e6):
        return math.inf
    lo, hi = 0.0, 1.0
    while not ok(hi):
        lo, hi = hi, 2.0 * hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def _invert_decreasing(fn: Callable[[float], float], target: float) -> float:
    """Smallest eps >= 0 with fn(eps) <= target for a non-increasing fn (bisection, rounded up)."""
    if fn(0.0) <= target:
        return 0.0
    hi = 1.0
    while fn(hi) > target:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    lo = 0.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if fn(mid) <= target else (mid, hi)
        if hi - lo <= 1e-12 * hi:
            break
    return hi
