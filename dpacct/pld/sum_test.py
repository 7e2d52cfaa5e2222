r"""The sum test: a certified lower bound for compositions of Poisson-subsampled Gaussian steps at large noise.

Every event ``A`` gives ``delta(eps) >= P(A) - e^eps Q(A)`` (the hockey-stick divergence is a
supremum over events). For T steps with one noise multiplier ``s`` whose outputs ``w_t`` are
``N(0, s^2)`` under ``Q`` and ``(1 - q_t) N(0, s^2) + q_t N(1, s^2)`` under ``P`` (the "remove"
pair), the sum ``S = sum_t w_t`` is ``N(0, v)`` under ``Q`` and ``N(0, v) + K`` under ``P``, with
``v = s^2 T`` and ``K`` the number of hits, a sum of independent ``Binomial(T_g, q_g)``. So for
``b = c / sqrt(v)`` and ``h_k = k / sqrt(v)``

.. math:: P(S \ge c) - Q(S \ge c) = \sum_k P(K = k)\, D(b - h_k, b),\qquad D(a, b) = P(a < Z \le b),

and for the "add" pair (``P`` and ``Q`` swapped) the event ``{S <= c}`` gives the same sum, with
``P(S <= c) = Phi(b)``. At large ``s`` every step's privacy loss is nearly linear in its output
(``log(1 - q + q e^{(2w - 1)/(2 s^2)})``, whose exponent is ~1/s), so the likelihood-ratio test
is nearly a threshold on ``S`` and this bound nearly the exact epsilon; it is what the limit
theorem of Bu, Dong, Long and Su ("Deep Learning with Gaussian Differential Privacy", 2019,
arXiv:1911.11607, Thm. 5) says of these compositions, but certified, with ``K`` kept exact. It
serves exactly where the PLD grids lose their lower bound: each step's loss is then a spike of
width ~q/s, whose composed labels carry the difference between ``P`` and ``Q`` only in their
last digits.

Numerics, all certified by rounding bounds charged against the result:

* ``D(a, b) >= e^{-h^2/2} phi(a) (1 - e^{-a h}) / a`` for ``h = b - a > 0`` (``phi(a + t) =
  phi(a) e^{-a t - t^2/2}``), in log space: no difference of nearly equal tail probabilities;
* ``log P(K = k)`` by Loader's saddle-point form (stirlerr and bd0, every term small: scipy's
  ``binom.logpmf`` errs by ~1e-7 at T = 5e7, far above what the test needs where epsilon is ~1e-8);
  groups with one noise multiplier and different rates are convolved, and long windows of ``K`` binned at
  each bin's smallest ``k`` (which only lowers the sum);
* terms of ``K`` far below its mode are dropped, which only lowers the sum.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.special import erfc, gammaln, log_ndtr

from dpacct import _check
from dpacct.pld.threshold import maximise_on_grid

__all__ = ["sum_test_applies", "sum_test_delta_lower", "sum_test_epsilon_lower"]

F64 = NDArray[np.float64]
# (noise multiplier s, sampling probability q, number of steps) per group
Steps = Sequence[tuple[float, float, float]]

_U = 2.220446049250313e-16
_MAX_WINDOW = 4e6  # the test is taken where the windows of hits of all groups together are at most this long
_MAX_PRODUCT = 1e8  # ... and the groups' windows, convolved, cost at most this many products
_BINS = 4096  # hits beyond this many values of k are binned (the bound only drops)
_KEEP = 80.0  # terms of K more than e^80 below its largest are dropped (only lowers the sum)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
_GRID = np.linspace(-40.0, 40.0, 81)  # thresholds b = c / sqrt(v) tried, then refined by golden section (40 steps)


def _stirling_error(n: F64) -> tuple[F64, F64]:
    """``log n! - ((n + 1/2) log n - n + log sqrt(2 pi))`` for integers ``n >= 1``, and a bound on its error:
    from lgamma at ``n <= 15`` (terms below 50: a few ulps of that), else the alternating series
    1/(12n) - 1/(360n^3) + 1/(1260n^5) - 1/(1680n^7) + 1/(1188n^9), within its next term 691/(360360 n^11)
    (alternating, Stirling's series for log Gamma; 1.1e-16 at n = 16)."""
    small = n <= 15.0
    m = np.where(small, 16.0, n)
    r = 1.0 / (m * m)
    series = (1.0 / 12.0 - r * (1.0 / 360.0 - r * (1.0 / 1260.0 - r * (1.0 / 1680.0 - r / 1188.0)))) / m
    lg = gammaln(np.where(small, n, 1.0) + 1.0)
    nn = np.where(small, n, 1.0)
    direct = lg - (nn + 0.5) * np.log(nn) + nn - _LOG_SQRT_2PI
    value = np.where(small, direct, series)
    next_term = 691.0 / 360360.0 * r**5 / m * (1.0 + 8.0 * _U)
    err = np.where(small, 64.0 * _U * (lg + (nn + 0.5) * np.abs(np.log(nn)) + nn + 1.0), 4.0 * _U * series + next_term)
    return value, err


def _deviance(x: F64, mean: float) -> tuple[F64, F64]:
    """``x log(x / mean) + mean - x >= 0`` (Loader's bd0) for ``x >= 0``, and a bound on its error: by the series
    ``(x - m) v + 2 x sum_j v^{2j+1} / (2j+1)`` in ``v = (x - m)/(x + m)`` where ``|v| < 0.1`` (12 terms: the rest
    below 1e-24 of the first), else directly."""
    near = np.abs(x - mean) < 0.1 * (x + mean)
    v = np.where(near, (x - mean) / np.maximum(x + mean, 1e-300), 0.0)
    ej = 2.0 * x * v
    v2 = v * v
    total = (x - mean) * v
    power = ej
    for j in range(1, 13):
        power = power * v2
        total = total + power / (2 * j + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = np.where(x > 0.0, x * np.log(np.where(x > 0.0, x, 1.0) / mean), 0.0) + mean - x
    value = np.where(near, total, direct)
    err = np.where(
        near, 32.0 * _U * np.abs(total) + 4.0 * _U * np.abs(x - mean) * (1.0 + np.abs(v)),
        16.0 * _U * (np.abs(x * np.log(np.maximum(x, 1e-300) / mean)) + mean + x),
    )
    return value, err


def _binomial(count: float, q: float) -> tuple[F64, F64, F64]:
    """``(k, log P(K = k), error bound of each log)`` for ``K ~ Binomial(count, q)`` over the window of
    ``k`` within 12 standard deviations and 40 of the mean, by Loader's saddle-point form ("Fast and accurate
    computation of binomial probabilities", 2000): ``log P = -log sqrt(2 pi k (n-k)/n) + stirlerr(n) -
    stirlerr(k) - stirlerr(n-k) - bd0(k, n q) - bd0(n-k, n (1-q))``, every term small (no difference of huge
    log-gamma values: scipy's ``binom.logpmf`` errs by ~1e-7 at T = 5e7)."""
    n = float(count)
    if q >= 1.0:
        return np.array([n]), np.zeros(1), np.zeros(1)
    if q <= 0.0:  # no step is ever sampled
        return np.zeros(1), np.zeros(1), np.zeros(1)
    mean = n * q
    spread = 12.0 * math.sqrt(mean * (1.0 - q)) + 40.0
    k = np.arange(max(0.0, math.floor(mean - spread)), min(n, math.ceil(mean + spread)) + 1.0)
    miss = 1.0 - q  # (exact where q >= 1/2, Sterbenz; within u/2 of it below)
    inner = (k > 0.0) & (k < n)
    kk = np.where(inner, k, 1.0)
    rest = np.where(inner, n - k, 1.0)
    s_n, e_n = _stirling_error(np.array([n]))
    s_k, e_k = _stirling_error(kk)
    s_r, e_r = _stirling_error(rest)
    d_k, f_k = _deviance(kk, mean)
    d_r, f_r = _deviance(rest, n * miss)
    log_scale = 0.5 * (math.log(n) - np.log(2.0 * math.pi * kk * rest))
    value = log_scale + s_n[0] - s_k - s_r - d_k - d_r
    err = (e_n[0] + e_k + e_r + f_k + f_r + 8.0 * _U * (np.abs(log_scale) + np.abs(value) + 4.0)
           + 4.0 * _U * (np.abs(k - mean) + 1.0))  # (n q and n (1 - q) rounded: bd0 moves by |x - m| u)
    # k = 0 and k = n: (1 - q)^n and q^n
    edge0 = n * math.log1p(-q)
    value = np.where(k == 0.0, edge0, np.where(k == n, n * math.log(q) if q > 0.0 else -np.inf, value))
    err = np.where(k == 0.0, 4.0 * _U * abs(edge0), np.where(k == n, 4.0 * _U * abs(n * math.log(q)), err))
    return k, value, err


def _hits(steps: Steps) -> tuple[F64, F64, F64] | None:
    """``(k, log P(K = k), error bound of each log)`` over the hits that matter, or None where the
    groups' noise differs or their windows of hits are too long to convolve."""
    if not sum_test_applies(steps):
        return None
    k_all, log_mass, err = _binomial(float(steps[0][2]), float(steps[0][1]))
    for _, q, count in steps[1:]:
        k_b, log_b, err_b = _binomial(float(count), float(q))
        if log_mass.size * log_b.size > _MAX_PRODUCT:
            return None
        # K of the groups so far plus this group's hits: a direct convolution of non-negative terms (relative
        # error at most n u per term), in a common scale.
        offset_a, offset_b = float(np.max(log_mass)), float(np.max(log_b))
        left, right = np.exp(log_mass - offset_a), np.exp(log_b - offset_b)
        conv = np.convolve(left, right)
        conv_err = np.convolve(left * err, right) + np.convolve(left, right * err_b)
        with np.errstate(divide="ignore"):
            log_mass = np.log(conv) + offset_a + offset_b
        scale = np.where(conv > 0.0, conv, 1.0)
        err = conv_err / scale + 4.0 * _U * (min(left.size, right.size) + 4.0) * (
            1.0 + np.abs(np.nan_to_num(log_mass, neginf=0.0))
        )
        k_all = k_all[0] + k_b[0] + np.arange(log_mass.size, dtype=np.float64)
    kept = np.isfinite(log_mass) & (log_mass >= np.max(log_mass) - _KEEP)
    first, last = int(np.argmax(kept)), int(kept.size - np.argmax(kept[::-1]))
    k_all, log_mass, err = k_all[first:last], log_mass[first:last], err[first:last]
    if k_all.size > _BINS:
        # Bins of w consecutive k, each at its smallest k: D(b - h_k, b) grows with k, so the bin's mass times
        # D at its first k is below its terms' sum (the bound only drops; k/sqrt(v) moves by w/sqrt(v) at most).
        width = -(-k_all.size // _BINS)
        pad = (-k_all.size) % width
        logs = np.concatenate([log_mass, np.full(pad, -np.inf)]).reshape(-1, width)
        top = np.max(logs, axis=1, keepdims=True)
        with np.errstate(divide="ignore"):
            binned = np.log(np.sum(np.exp(logs - top), axis=1)) + top[:, 0]
        errs = np.concatenate([err, np.zeros(pad)]).reshape(-1, width).max(axis=1)
        err = errs + 4.0 * _U * (width + 4.0) * (1.0 + np.abs(binned))
        k_all, log_mass = k_all[::width], binned
    return k_all, log_mass, err


def _log_f(y: F64) -> F64:
    """``log((1 - e^{-y}) / y)`` for ``y > 0``, to a few ulps (the value is in [-log y, 0])."""
    return np.log(-np.expm1(-y) / y)


@functools.lru_cache(maxsize=16)
def _prepared(steps: tuple[tuple[float, float, float], ...]) -> tuple[F64, F64, F64, float]:
    """The hits k >= 1 that matter, their log masses and errors (``_hits``), and ``sqrt(v)``."""
    hits = _hits(steps)
    assert hits is not None
    k, log_mass, mass_err = hits
    positive = k > 0.0
    root = steps[0][0] * math.sqrt(sum(float(t) for _, _, t in steps))  # sqrt(v)
    return k[positive], log_mass[positive], mass_err[positive], root


def _log_gap(steps: Steps, b: F64) -> F64:
    """A certified lower bound on ``log sum_k P(K = k) D(b - h_k, b)`` for each threshold ``b``."""
    k, log_mass, mass_err, root = _prepared(tuple((float(s), float(q), float(t)) for s, q, t in steps))
    if k.size == 0:
        return np.full(b.shape, -np.inf)
    h = k / root  # (relative error ~3u: moves log D by ~3u)
    a = b[:, None] - h[None, :]
    y = a * h[None, :]
    # log integral_0^h e^{-a t} dt = log h + (|y| if a < 0) + log f(|y|), and log h where y = 0
    ay = np.abs(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        lf = np.where(ay > 0.0, _log_f(np.where(ay > 0.0, ay, 1.0)), 0.0)
    log_g = np.log(h)[None, :] + np.where(y < 0.0, ay, 0.0) + lf
    log_d = -0.5 * a * a - _LOG_SQRT_2PI + log_g - 0.5 * (h * h)[None, :]
    term = log_mass[None, :] + log_d
    # rounding: a = b - h (|da| <= u (|b| + h)) moves -a^2/2 by |a| u (|b| + h); each function a few ulps
    term_err = (16.0 * _U * (a * a + np.abs(a) * (np.abs(b)[:, None] + h[None, :]) + np.abs(log_g) + ay + 4.0)
                + mass_err[None, :])
    lowered = term - term_err
    top = np.max(lowered, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.log(np.sum(np.exp(lowered - np.where(np.isfinite(top), top, 0.0)), axis=1)) + top[:, 0]
    lowered_total: F64 = total - 4.0 * _U * (k.size + 4.0) * (1.0 + np.abs(np.nan_to_num(total, neginf=0.0)))
    return lowered_total


def _log_events(steps: Steps, b: F64, direction: str) -> tuple[F64, F64]:
    """``(log of a lower bound on P(A) - Q(A), log of an upper bound on Q(A))`` per threshold."""
    log_gap = _log_gap(steps, b)
    # Q(A) = Phi-bar(b) (remove: A = {S >= c}); for add (A = {S <= c}) Q(A) = P(A) - (P(A) - Q(A)) <= Phi(b) - gap
    log_tail = _log_upper_tail(b if direction == "remove" else -b)
    if direction == "remove":
        return log_gap, log_tail
    with np.errstate(divide="ignore", invalid="ignore"):
        return log_gap, log_tail + np.log1p(-np.exp(np.minimum(log_gap - log_tail, 0.0))) + 4.0 * _U


def _log_upper_tail(x: F64) -> F64:
    """An upper bound on ``log P(Z > x)``: from erfc, accurate to a few ulps in both tails, charged ``32 u``
    of its value and the rounding of its argument (``2 u x^2`` relative in a tail at ``x``) while its value is
    a normal double; beyond, from ``log_ndtr``, charged ``1e-13 (2 + |value|)``."""
    inside = x < 37.0
    with np.errstate(divide="ignore"):
        direct = np.log(0.5 * erfc(np.where(inside, x, 0.0) * _SQRT_HALF)) + (40.0 + 8.0 * x * x) * _U
    far = log_ndtr(-x)
    bound: F64 = np.where(inside, direct, far + 1e-13 * (2.0 + np.abs(far)))
    return bound


def sum_test_applies(steps: Steps) -> bool:
    """Whether the sum test is taken for these groups: one noise multiplier, and at most ``_MAX_WINDOW`` values
    of the number of hits in the groups' windows together."""
    if not steps or len({s for s, _, _ in steps}) != 1:
        return False
    window = sum(24.0 * math.sqrt(q * t * max(1.0 - q, 0.0)) + 81.0 for _, q, t in steps)
    return window <= _MAX_WINDOW


def _checked(steps: Steps, direction: str) -> list[tuple[float, float, float]]:
    """The groups as floats, each field checked (``ValueError``/``TypeError`` naming it), and the direction."""
    _check.one_of("direction", direction, ("remove", "add"))
    return [
        (
            _check.noise_multiplier(s),
            _check.probability("sampling_probability", q),
            float(_check.count("steps", t, minimum=1)),
        )
        for s, q, t in steps
    ]


def sum_test_epsilon_lower(steps: Steps, delta: float, direction: str) -> float:
    """A certified lower bound on epsilon(delta) of one direction: the best ``log1p((gap - delta) / Q)``."""
    steps, delta = _checked(steps, direction), _check.delta(delta)
    if not sum_test_applies(steps):
        return 0.0
    log_delta = math.log(delta)

    def evaluate(b: F64) -> F64:
        log_gap, log_q = _log_events(steps, b, direction)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            # (gap - delta) / Q = e^{log_gap - log_q} (1 - delta / gap)
            ratio = np.exp(log_gap - log_q) * -np.expm1(log_delta - log_gap)
            value = np.log1p(ratio) * (1.0 - 8.0 * _U)
            return np.where((log_gap > log_delta) & np.isfinite(value), value, -np.inf)

    best = maximise_on_grid(evaluate(_GRID), _GRID, evaluate)
    return max(best, 0.0) if math.isfinite(best) else 0.0


def sum_test_delta_lower(steps: Steps, epsilon: float, direction: str) -> float:
    """A certified lower bound on delta(epsilon) of one direction: the best ``gap - expm1(eps) Q``."""
    steps, epsilon = _checked(steps, direction), _check.epsilon(epsilon)
    if not sum_test_applies(steps):
        return 0.0
    # log expm1(eps), rounded up (a few ulps; in log space past the double range of e^eps)
    log_grow = (math.log(math.expm1(epsilon)) if 0.0 < epsilon < 700.0 else epsilon) + 4.0 * _U * (1.0 + epsilon)

    def evaluate(b: F64) -> F64:
        log_gap, log_q = _log_events(steps, b, direction)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            factor = -np.expm1(log_grow + log_q - log_gap) if epsilon > 0.0 else np.ones_like(log_gap)
            value = log_gap + np.log(factor) - 8.0 * _U * (1.0 + np.abs(log_gap))
            return np.where((factor > 0.0) & np.isfinite(value), value, -np.inf)

    best = maximise_on_grid(evaluate(_GRID), _GRID, evaluate)
    return math.exp(best) if math.isfinite(best) else 0.0
