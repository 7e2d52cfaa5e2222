r"""Threshold tests: a certified lower bound for compositions of Poisson-subsampled Gaussian steps.

Every test ``A`` gives ``delta(eps) >= P(A) - e^eps Q(A)`` (the hockey-stick divergence is a
supremum over events). For T steps whose outputs ``w_t`` are ``N(0, s_t^2)`` under ``Q`` and
``(1 - q_t) N(0, s_t^2) + q_t N(1, s_t^2)`` under ``P`` (the "remove" pair of the
Poisson-subsampled Gaussian), the events ``{max_t w_t >= C}`` have

.. math:: P(A_C) = 1 - \prod_t (1 - p_t(C)),\quad Q(A_C) = 1 - \prod_t \Phi(C / s_t),
          \quad p_t(C) = (1 - q_t) \bar\Phi(C / s_t) + q_t \bar\Phi((C - 1) / s_t),

and for the "add" pair (``P`` and ``Q`` swapped) the events ``{max_t w_t <= C}`` have
``P(B_C) = prod_t Phi(C / s_t)`` and ``Q(B_C) = prod_t (1 - p_t(C))`` (Chua, Ghazi, Kamath,
Kumar, Manurangsi, Sinha, Zhang, "How Private are DP-SGD Implementations?", ICML 2024,
arXiv:2403.17673, use the first for shuffled batches). Where delta is tiny these tests are
nearly optimal (one large output is the evidence), exactly where the PLD engine's own lower
bound (its cell labels composed) loses to cancellation; the engine takes the larger of the two.

Everything is in log space (``log_ndtr``, ``log1p``, ``expm1``), maximised over ``C`` on a grid
and then by golden section, and lowered by a bound on the rounding before it is returned.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr

__all__ = ["threshold_delta_lower", "threshold_epsilon_lower"]

F64 = NDArray[np.float64]
# (noise multiplier s, sampling probability q, number of steps)
Steps = Sequence[tuple[float, float, float]]

_UNIT = 2.220446049250313e-16


def _logs(steps: Steps, c: F64, direction: str) -> tuple[F64, F64]:
    """``(log P(event), log Q(event))`` for every threshold in ``c``."""
    log_keep = np.zeros_like(c)  # log prod_t (1 - p_t(C))
    log_below = np.zeros_like(c)  # log prod_t Phi(C / s_t)
    for s, q, count in steps:
        head0, tail0 = log_ndtr(c / s), log_ndtr(-c / s)  # log Phi(C / s), log Phi-bar(C / s)
        head1, tail1 = log_ndtr((c - 1.0) / s), log_ndtr(-(c - 1.0) / s)
        with np.errstate(divide="ignore"):
            log_p = np.logaddexp(math.log1p(-q) + tail0, math.log(q) + tail1) if q < 1.0 else tail1
            # log(1 - p_t(C)): by log1p where p <= 1/2 (p tiny: no absorption), else the complement
            # (1 - q) Phi(C/s) + q Phi((C-1)/s) directly (1 - p tiny: no cancellation).
            direct = np.logaddexp(math.log1p(-q) + head0, math.log(q) + head1) if q < 1.0 else head1
            keep = np.where(log_p <= -math.log(2.0), np.log1p(-np.exp(np.minimum(log_p, -math.log(2.0)))), direct)
        log_keep += count * np.minimum(keep, 0.0)
        log_below += count * head0
    if direction == "remove":  # {max w >= C}: P = 1 - prod(1 - p), Q = 1 - prod Phi
        with np.errstate(divide="ignore"):
            return np.log(-np.expm1(log_keep)), np.log(-np.expm1(log_below))
    return log_below, log_keep  # {max w <= C}: P = prod Phi, Q = prod (1 - p)


def _margin(log_p: F64, log_q: F64, eps: float) -> F64:
    """Relative rounding bound of ``P - e^eps Q`` from log-values each within ~1e-13 (1 + |value|)."""
    return 1e-12 * (2.0 + np.abs(log_p) + np.abs(log_q) + abs(eps))


def _grid(steps: Steps, eps: float) -> F64:
    """Thresholds covering each step's Neyman-Pearson threshold at ``eps`` (loss = eps), with room."""
    lo, hi = 0.0, 1.0
    for s, q, _ in steps:
        reach = s * s * (abs(eps) + math.log(1.0 / q) + 1.0)  # (2C - 1) / (2 s^2) up to eps + log(1/q)
        lo, hi = min(lo, 0.5 - reach - 10.0 * s), max(hi, 0.5 + reach + 10.0 * s)
    return np.linspace(lo, hi, 4001)


def maximise_on_grid(values: F64, grid: F64, evaluate: Callable[[F64], F64]) -> float:
    """The best value on the grid, refined by golden section in the bracket around it (also used by
    ``sum_test.py``)."""
    best = int(np.argmax(values))
    if not math.isfinite(values[best]):
        return -math.inf
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f = evaluate  # maps an array of thresholds to log-values
    fa, fb = float(f(np.array([a]))[0]), float(f(np.array([b]))[0])
    for _ in range(40):
        if fa > fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = float(f(np.array([a]))[0])
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = float(f(np.array([b]))[0])
    return max(float(values[best]), fa, fb)


def threshold_delta_lower(steps: Steps, epsilon: float, direction: str) -> float:
    """A certified lower bound on delta(epsilon) of one direction from the threshold tests (0 if none helps)."""

    def log_gap(c: F64) -> F64:
        log_p, log_q = _logs(steps, c, direction)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            diff = epsilon + log_q - log_p
            factor = -np.expm1(diff)  # 1 - e^eps Q / P
            margin = _margin(log_p, log_q, epsilon) * (1.0 + 2.0 / np.maximum(factor, 1e-300))
            out = log_p + np.log(factor) + np.log1p(-np.minimum(margin, 1.0))
        return np.where((diff < 0.0) & (factor > 1e-6) & np.isfinite(log_p) & (margin < 0.5), out, -np.inf)

    grid = _grid(steps, epsilon)
    best = maximise_on_grid(log_gap(grid), grid, log_gap)
    return math.exp(best) if math.isfinite(best) else 0.0


def threshold_epsilon_lower(steps: Steps, delta: float, direction: str) -> float:
    """A certified lower bound on epsilon(delta) of one direction: max over C of log((P - delta) / Q)."""
    log_delta = math.log(delta)

    def log_eps(c: F64) -> F64:
        log_p, log_q = _logs(steps, c, direction)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            factor = -np.expm1(log_delta - log_p)  # 1 - delta / P
            value = log_p + np.log(factor) - log_q
            slack = 1e-12 * (2.0 + np.abs(log_p) + np.abs(log_q) + abs(log_delta)) * (1.0 + 2.0 / np.maximum(factor, 1e-300))
            ok = (log_p > log_delta) & (factor > 1e-6) & np.isfinite(log_q) & np.isfinite(value)
            # (Inside errstate: the entries the mask drops may be inf - inf, a NaN that would warn.)
            return np.where(ok, value - slack, -np.inf)

    grid = _grid(steps, -log_delta + 10.0)  # epsilon(delta) lies well inside
    best = maximise_on_grid(log_eps(grid), grid, log_eps)
    return max(best, 0.0) if math.isfinite(best) else 0.0
