r"""Certified Renyi DP of one epoch of balls-in-bins batches (ABLQ, zero-out adjacency).

One epoch of ``t`` steps in which each record is put into one uniformly random step is
dominated by the pair (Chua et al. 2025, arXiv:2412.16802; see
:mod:`dpacct.samplers.allocation`)

.. math:: P = \frac1t \sum_{i=1}^t \mathcal N(e_i, \sigma^2 I_t), \qquad Q = \mathcal N(0, \sigma^2 I_t).

The pair dominates in the sense of Zhu, Dong and Wang (2022, arXiv:2106.08567,
Definition 7): every hockey-stick divergence, at every ``e^epsilon > 0``, is at least the
mechanism's, so the trade-off curve of ``(P, Q)`` is below the mechanism's and, by
Blackwell's theorem (Dong, Roth and Su 2022, arXiv:1905.02383, Theorem 2.10), every
f-divergence, Renyi's included, is at least the mechanism's. This module bounds the
Renyi divergences of the pair in both directions; Renyi DP composes over epochs
(Mironov 2017, arXiv:1702.07476, Proposition 1) and converts to (epsilon, delta) with
:func:`dpacct.rdp.epsilon_from_rdp`.

Under ``Q`` the likelihood ratio is a mean of ``t`` independent log-normal variables,

.. math:: Z = \frac{P}{Q}(x) = \frac1t \sum_{i=1}^t Y_i, \qquad
          Y_i = e^{(x_i - 1/2)/\sigma^2} = e^{w_i/\sigma - 1/(2\sigma^2)},\ w_i \sim \mathcal N(0, 1),

with :math:`\mathbb E Y^a = e^{a(a-1)/(2\sigma^2)}` for every real ``a``.

**Remove direction**, :math:`D_\alpha(P\|Q) = \frac{1}{\alpha-1}\log \mathbb E Z^\alpha`.
For an integer ``n``, :math:`\mathbb E(\sum_i Y_i)^n = n!\,[z^n] A(z)^t` with
:math:`A(z) = \sum_{a \le n} \mathbb E Y^a z^a / a!` (expand the power and use
independence; the truncated generating function keeps every coefficient up to ``n``
exact). All coefficients are positive, so the power is computed by repeated squaring of
log-coefficients without cancellation; the rounding of each log-sum-exp is charged.
Between integers ``log E Z^alpha`` is convex in ``alpha`` (Hoelder), so the chord
through the neighbouring integers (and ``log E Z = 0``) is an upper bound.

**Add direction**, :math:`D_\alpha(Q\|P) = \frac{1}{\alpha-1}\log \mathbb E Z^{-\beta}`,
``beta = alpha - 1``. Negative moments come from the Laplace transform (Cressie, Davis,
Folks and Policello 1981, "The moment-generating function and negative integer
moments", The American Statistician 35(3)):

.. math:: \mathbb E Z^{-\beta} = \frac{1}{\Gamma(\beta)} \int_0^\infty s^{\beta-1}
          \varphi(s/t)^t \, ds = \mathbb E_{S \sim \mathrm{Gamma}(\beta, 1)} \psi(S),
          \qquad \varphi(u) = \mathbb E e^{-u Y}, \quad \psi(s) = e^{s} \varphi(s/t)^t.

``psi`` is non-decreasing (``d/du (log phi(u) + u) = 1 - E[Y e^{-uY}] / E[e^{-uY}] >= 0``:
the mean of ``Y`` under the law tilted by ``e^{-uY}`` is at most ``E Y = 1``), so an upper
Riemann-Stieltjes sum over cells of ``s`` with the Gamma law's increments bounds the
expectation. ``1 - phi(u) = E[1 - e^{-uY}]`` is bounded below cell by cell in ``w``:
``f(y) = 1 - e^{-y}`` is concave, so on a cell it is above its chord in ``y = u Y(w)``,
whose integral against the normal density is exact (``phi(w) Y(w)`` is the normal
density shifted by ``1/sigma``). Beyond the last cell of ``s``,
:math:`\int_{s_m}^\infty s^{\beta-1}\varphi(s/t)^t ds \le \varphi(s_m/t)^{t-1}
\Gamma(\beta) t^\beta \mathbb E Y^{-\beta}` (``phi`` is decreasing, and
:math:`\int_0^\infty s^{\beta-1} e^{-sY/t} ds = \Gamma(\beta) (t/Y)^\beta`).

Both directions are at most the Gaussian mechanism's ``alpha / (2 sigma^2)`` (Jensen:
``z^alpha`` and ``z^-beta`` are convex, so the moment of the mean is at most the mean of
the moments), and the result is capped there. Every number here is an upper bound: the
rounding of the special functions and sums is charged with margins stated in the code.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from dpacct import _check
from dpacct.mechanisms import BallsInBinsGaussianMechanism, Mechanism
from dpacct.rdp import DEFAULT_ORDERS, delta_from_rdp, epsilon_from_rdp

__all__ = [
    "ORDERS",
    "balls_in_bins_rdp",
    "delta_balls_in_bins_rdp",
    "epsilon_balls_in_bins_rdp",
    "rdp_of_history",
]

F64 = NDArray[np.float64]

#: The orders used by default: the package's RDP orders up to 512 (the remove direction's
#: generating function is computed to degree 512).
ORDERS: F64 = DEFAULT_ORDERS[DEFAULT_ORDERS <= 512.0].copy()
ORDERS.flags.writeable = False

_MAX_ORDER = 512
_UNIT = 2.220446049250313e-16
_CDF_SLACK = 1e-9  # relative error charged to each normal / Gamma CDF value from scipy (observed: ~1e-14)
_W_CELL = 0.05  # width of the cells of w (standard normal) for 1 - phi: the chord's error is second order in it
# (0.05 vs 0.02: the add direction's RDP moves by 0.05 % relative; the grid of s adds about 0.2 %)


def balls_in_bins_rdp(
    *, noise_multiplier: float, steps: int, orders: ArrayLike | None = None, direction: str = "both"
) -> F64:
    r"""A certified upper bound on the Renyi DP of one epoch of balls-in-bins batches.

    Parameters
    ----------
    noise_multiplier : float
        ``sigma``, noise standard deviation over L2 sensitivity, finite and ``> 0``.
    steps : int
        ``t``, steps per epoch (each record is in one uniformly random step), ``>= 1``.
    orders : array_like, optional
        Renyi orders in ``(1, 512]``; default :data:`ORDERS`.
    direction : {"both", "remove", "add"}
        ``"remove"``: :math:`D_\alpha(P\|Q)`; ``"add"``: :math:`D_\alpha(Q\|P)`; ``"both"``
        (default): the larger, what an accountant that does not know the direction needs.

    Returns
    -------
    ndarray
        Upper bounds on the divergence at each order, at most the Gaussian mechanism's
        ``alpha / (2 sigma^2)``. ``E`` epochs (fresh assignments) have ``E`` times these.

    Examples
    --------
    >>> import numpy as np
    >>> rdp = balls_in_bins_rdp(noise_multiplier=1.0, steps=1000, orders=[2.0, 8.0])
    >>> bool(np.all(rdp < np.array([2.0, 8.0]) / 2))  # far below one Gaussian step
    True
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    t = _check.count("steps", steps, minimum=1)
    which = _check.one_of("direction", direction, ("both", "remove", "add"))
    alphas = ORDERS if orders is None else _check.orders(orders)
    if np.any(alphas > _MAX_ORDER):
        bad = float(alphas[alphas > _MAX_ORDER][0])
        msg = f"orders must be in (1, {_MAX_ORDER}], got {bad}"
        raise ValueError(msg)
    gaussian = alphas / (2.0 * sigma * sigma)
    if t == 1:
        return gaussian.copy()
    out = np.zeros_like(alphas)
    if which in ("both", "remove"):
        out = np.maximum(out, _remove(sigma, t, alphas))
    if which in ("both", "add"):
        out = np.maximum(out, _add(sigma, t, alphas))
    return np.minimum(out, gaussian)


def epsilon_balls_in_bins_rdp(*, noise_multiplier: float, steps: int, epochs: int, delta: ArrayLike) -> F64:
    """Certified epsilon(delta) of ``epochs`` epochs of balls-in-bins batches through Renyi DP alone.

    Each direction's RDP (:func:`balls_in_bins_rdp`) is composed over the epochs and
    converted (:func:`dpacct.rdp.epsilon_from_rdp`, the improved conversion); the larger
    epsilon is returned (one per delta). :class:`dpacct.samplers.allocation.BallsInBinsAccountant` also takes the
    Gaussian curve of deterministic batches where it is smaller.

    Examples
    --------
    >>> round(float(epsilon_balls_in_bins_rdp(noise_multiplier=1.0, steps=1000, epochs=1, delta=1e-5)[0]), 3)
    0.678
    """
    e = _check.count("epochs", epochs, minimum=1)
    d = np.atleast_1d(_check.delta_array(delta))
    out = np.zeros_like(d)
    for direction in ("remove", "add"):
        rdp = np.nextafter(e * balls_in_bins_rdp(noise_multiplier=noise_multiplier, steps=steps, direction=direction),
                           np.inf)
        out = np.maximum(out, np.atleast_1d(epsilon_from_rdp(orders=ORDERS, rdp=rdp, delta=d).value))
    return out


def delta_balls_in_bins_rdp(*, noise_multiplier: float, steps: int, epochs: int, epsilon: ArrayLike) -> F64:
    """Certified delta(epsilon) of ``epochs`` epochs of balls-in-bins batches through Renyi DP alone (see above)."""
    e = _check.count("epochs", epochs, minimum=1)
    eps = np.atleast_1d(_check.epsilon_array(epsilon))
    out = np.zeros_like(eps)
    for direction in ("remove", "add"):
        rdp = np.nextafter(e * balls_in_bins_rdp(noise_multiplier=noise_multiplier, steps=steps, direction=direction),
                           np.inf)
        out = np.maximum(out, np.atleast_1d(delta_from_rdp(orders=ORDERS, rdp=rdp, epsilon=eps).value))
    return out


def rdp_of_history(history: tuple[tuple[Mechanism, int], ...], direction: str) -> F64:
    """The Renyi DP at :data:`ORDERS` of a history of balls-in-bins epochs in one direction, rounded up.

    ``history`` holds ``(BallsInBinsGaussianMechanism, count)`` runs (an accountant's
    ``history``); Renyi DP adds over the epochs.
    """
    total = np.zeros_like(ORDERS)
    for mech, count in history:
        if not isinstance(mech, BallsInBinsGaussianMechanism):
            msg = f"history must hold BallsInBinsGaussianMechanism epochs, got {mech!r}"
            raise TypeError(msg)
        total = total + count * balls_in_bins_rdp(noise_multiplier=mech.noise_multiplier,
                                                  steps=mech.steps_per_epoch, direction=direction)
    return np.asarray(np.nextafter(total, np.inf), dtype=np.float64)


def __getattr__(name: str) -> object:
    # BallsInBinsAccountant lived here while Renyi DP was its only bound; it is in
    # dpacct.samplers.allocation now (PLD, Renyi DP and the deterministic curve).
    if name == "BallsInBinsAccountant":
        from dpacct.samplers.allocation import BallsInBinsAccountant

        return BallsInBinsAccountant
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


# -- remove direction: positive moments by the generating function ------------------------


@functools.lru_cache(maxsize=64)
def _remove_log_moments(sigma: float, t: int) -> F64:
    """Upper bounds on ``log E[Z^n]``, ``n = 0 .. 512``."""
    n_max = _MAX_ORDER
    a = np.arange(n_max + 1, dtype=np.float64)
    # log of E[Y^a] / a!
    base = a * (a - 1.0) / (2.0 * sigma * sigma) - special.gammaln(a + 1.0)
    result = np.full(n_max + 1, -np.inf)
    result[0] = 0.0
    levels = 0
    power, e = base.copy(), t
    while e:
        if e & 1:
            result = _log_poly_mul(result, power)
            levels += 1
        e >>= 1
        if e:
            power = _log_poly_mul(power, power)
            levels += 1
    log_sum_moment = special.gammaln(a + 1.0) + result  # log E[(sum Y)^n]
    log_moment = log_sum_moment - a * math.log(t)
    # Rounding: each log-sum-exp of at most n + 1 terms errs by a few ulps of its largest
    # argument per term; `levels` products in a chain, plus gammaln and the logs.
    # Coefficient n only involves degrees up to n.
    scale = np.abs(log_sum_moment) + np.maximum.accumulate(np.abs(base)) + a * math.log(t) + 1.0
    margin = 8.0 * _UNIT * (a + 2.0) * (levels + 2.0) * scale
    return np.asarray(log_moment + margin, dtype=np.float64)


def _log_poly_mul(x: F64, y: F64) -> F64:
    """Log-coefficients of the product of two power series with positive coefficients, truncated."""
    n = x.size
    out = np.full(n, -np.inf)
    with np.errstate(invalid="ignore"):
        for i in range(n):
            if x[i] == -np.inf:
                continue
            out[i:] = np.logaddexp(out[i:], x[i] + y[: n - i])
    return out


def _remove(sigma: float, t: int, alphas: F64) -> F64:
    log_m = _remove_log_moments(sigma, t)
    log_m = log_m.copy()
    log_m[1] = 0.0  # E[Z] = 1 exactly
    low = np.floor(alphas).astype(np.int64)
    frac = alphas - low
    high = np.minimum(low + 1, _MAX_ORDER)
    # Chord of the convex log E[Z^alpha] between the neighbouring integers (exact at integers).
    value = (1.0 - frac) * log_m[low] + frac * log_m[high]
    value = value + 4.0 * _UNIT * (np.abs(log_m[low]) + np.abs(log_m[high]))
    return np.asarray(np.maximum(value, 0.0) / (alphas - 1.0), dtype=np.float64)


# -- add direction: negative moments by the Laplace transform -----------------------------


def _s_grid(t: int) -> F64:
    """Cell edges in ``s``: fine (ratio 1.002) over [0.25, 2e4], coarse (1.05) down to 1e-8 and up to 1e30 t."""
    low = np.geomspace(1e-8, 0.25, int(math.log(0.25 / 1e-8) / math.log(1.05)) + 2)
    mid = np.geomspace(0.25, 2e4, int(math.log(2e4 / 0.25) / math.log(1.002)) + 2)
    high = np.geomspace(2e4, 1e30 * t, int(math.log(1e30 * t / 2e4) / math.log(1.05)) + 2)
    return np.unique(np.concatenate([low, mid, high]))


@functools.lru_cache(maxsize=64)
def _log_phi(sigma: float, t: int) -> tuple[F64, F64]:
    """(s, an upper bound on log phi(s / t)) on the grid of ``s``."""
    s = _s_grid(t)
    g, phi_up = _phi_bounds(sigma, s / t)
    g = np.minimum(g, 1.0 - 1e-300)
    with np.errstate(divide="ignore"):
        # 1 - g near u = 0 (second-order accurate), the direct bound for large u; log1p and
        # log err by a few ulps, charged relative.
        log_phi = np.minimum(np.log1p(-g), np.log(phi_up)) * (1.0 - 4.0 * _UNIT)
    return s, np.asarray(log_phi, dtype=np.float64)


def _phi_bounds(sigma: float, u: F64) -> tuple[F64, F64]:
    """At each ``u``: a lower bound on ``1 - phi(u)`` and an upper bound on ``phi(u) = E[exp(-u Y)]``.

    The first integrates the chords of ``1 - e^{-y}`` on cells of ``w``; the second the
    largest value of ``e^{-u Y(w)}`` on each cell (its left end), with the normal mass
    outside the cells counted at 1.
    """
    shift = 1.0 / sigma
    lo, hi = -40.0, 40.0 + shift
    edges = np.linspace(lo, hi, int(round((hi - lo) / _W_CELL)) + 1)
    a, b = edges[:-1], edges[1:]
    mass = _normal_mass(a, b) * (1.0 - _CDF_SLACK)
    mass_y = _normal_mass(a - shift, b - shift) * (1.0 - _CDF_SLACK)
    log_y_a = a / sigma - 0.5 / (sigma * sigma)
    growth = math.expm1((b[0] - a[0]) / sigma)  # Y(b) / Y(a) - 1, the same for every cell
    out = np.empty_like(u)
    phi_up = np.empty_like(u)
    mass_up = _normal_mass(a, b) * (1.0 + _CDF_SLACK) + 1e-300
    outside = (float(special.ndtr(lo)) + float(special.ndtr(-hi))) * (1.0 + _CDF_SLACK) + 1e-300
    chunk = max(1, 2**22 // a.size)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for start in range(0, u.size, chunk):
            uu = u[start:start + chunk, None]
            y_a = uu * np.exp(log_y_a)[None, :]
            f_a = -np.expm1(-y_a)
            dy = y_a * growth
            slope = np.where(dy > 0.0, np.exp(-y_a) * (-np.expm1(-dy)) / np.where(dy > 0.0, dy, 1.0), 0.0)
            slope = np.where(np.isfinite(slope), slope, 0.0)
            # Integral of the chord f(y_a) + slope (u Y(w) - y_a) against the normal density.
            excess = np.maximum(uu * mass_y[None, :] - y_a * mass[None, :], 0.0)
            excess = np.where(np.isfinite(excess), excess, 0.0)
            terms = f_a * mass[None, :] + slope * excess
            out[start:start + chunk] = terms.sum(axis=1)
            phi_up[start:start + chunk] = (mass_up[None, :] * np.exp(-y_a)).sum(axis=1) + outside
    # The sums of positive terms err by at most n u relative; the chords' own rounding by a few ulps.
    lower = out * (1.0 - (a.size + 16.0) * _UNIT) * (1.0 - _CDF_SLACK)
    upper = np.minimum(phi_up * (1.0 + (a.size + 16.0) * _UNIT), 1.0)
    return np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)


def _normal_mass(a: F64, b: F64) -> F64:
    """Standard normal mass of [a, b], from the tail that avoids cancellation (clipped at 0)."""
    right = a >= 0.0
    mass = np.where(right, special.ndtr(-a) - special.ndtr(-b), special.ndtr(b) - special.ndtr(a))
    return np.asarray(np.maximum(mass, 0.0), dtype=np.float64)


def _log_gamma_tail_upper(beta: float, s: F64) -> F64:
    """Upper bounds on ``log Q(beta, s)``, the Gamma(beta, 1) law's mass above ``s``."""
    with np.errstate(divide="ignore"):
        direct = np.log(special.gammaincc(beta, s) * (1.0 + _CDF_SLACK))
    # Where it underflows: Gamma(beta, s) <= s^(beta-1) e^-s / (1 - (beta-1)/s) for s > beta - 1
    # (x^(beta-1) <= s^(beta-1) e^{(x-s)(beta-1)/s}), and <= s^(beta-1) e^-s for beta <= 1.
    b1 = max(beta - 1.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        analytic = (beta - 1.0) * np.log(s) - s - special.gammaln(beta) - np.log1p(-b1 / s) + 1e-9
    use = (direct < -600.0) & (s > 2.0 * b1 + 1.0)
    return np.asarray(np.where(use, analytic, direct), dtype=np.float64)


def _add(sigma: float, t: int, alphas: F64) -> F64:
    s, log_phi = _log_phi(sigma, t)
    out = np.empty_like(alphas)
    for j, alpha in enumerate(alphas):
        beta = float(alpha - 1.0)
        out[j] = max(_add_log_moment(sigma, t, beta, s, log_phi), 0.0) / beta
    return out


def _add_log_moment(sigma: float, t: int, beta: float, s: F64, log_phi: F64) -> float:
    """An upper bound on ``log E[Z^-beta]`` (module notes), cell by cell in ``s``.

    Cell ``[s_a, s_b]`` contributes at most the smaller of two bounds on
    ``(1/Gamma(beta)) int s^(beta-1) phi(s/t)^t ds`` over it:

    * its Gamma(beta, 1) mass times ``psi(s_b) = exp(t log phi(s_b / t) + s_b)`` (``psi`` is
      non-decreasing); tight where ``phi(u) ~ e^-u`` (small ``u``). The mass is bounded by
      differences of P below the median and of Q above it (no cancellation against 1), each
      CDF value charged _CDF_SLACK.
    * ``phi(s_a / t)^t (s_b^beta - s_a^beta) / Gamma(beta + 1)`` (``phi`` is decreasing);
      tight for large ``s``, where ``psi`` grows like ``e^s``.
    """
    p = special.gammainc(beta, s)
    q = special.gammaincc(beta, s)
    t_log_phi = t * log_phi
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        from_p = np.log(np.maximum(p[1:] - p[:-1], 0.0) + _CDF_SLACK * p[1:])
        from_q = np.log(np.maximum(q[:-1] - q[1:], 0.0) + _CDF_SLACK * q[:-1])
        mass = np.where(p[1:] <= 0.5, from_p, from_q)
        by_mass = np.where(np.isfinite(mass), mass + t_log_phi[1:] + s[1:], np.inf)
        log_sa, log_sb = np.log(s[:-1]), np.log(s[1:])
        power = beta * log_sb + np.log(-np.expm1(beta * (log_sa - log_sb))) - special.gammaln(beta + 1.0)
        by_phi = t_log_phi[:-1] + power
    # Each cell's log errs by a few ulps of the magnitudes summed in it (the logs and special
    # functions are within _CDF_SLACK): charged to each form before taking the smaller.
    by_mass = by_mass + 16.0 * _UNIT * (np.abs(t_log_phi[1:]) + s[1:] + np.abs(np.where(np.isfinite(mass), mass, 0.0)))
    by_phi = by_phi + 16.0 * _UNIT * (np.abs(t_log_phi[:-1]) + (beta + 1.0) * (np.abs(log_sb) + 1.0)
                                      + abs(float(special.gammaln(beta + 1.0))))
    cells = np.minimum(by_mass, by_phi)
    first = math.log(float(p[0]) * (1.0 + _CDF_SLACK)) + float(t_log_phi[0] + s[0]) if p[0] > 0.0 else -math.inf
    # Beyond the last edge: phi(s_m / t)^(t-1) t^beta E[Y^-beta] (module notes).
    beyond = (t - 1.0) * float(log_phi[-1]) + beta * math.log(t) + beta * (beta + 1.0) / (2.0 * sigma * sigma)
    terms = np.concatenate([[first], cells, [beyond]])
    total = float(special.logsumexp(terms))
    return total + 8.0 * _UNIT * (terms.size + 2.0) * (abs(total) + 1.0) + 4.0 * _CDF_SLACK
