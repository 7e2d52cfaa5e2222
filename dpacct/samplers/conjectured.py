r"""Monte-Carlo estimate of the *conjectured* privacy curve of one epoch of shuffled batches.

Chua et al. (ICML 2024) conjecture (Conjecture 3.2) that for adaptive batch linear
queries with shuffled batches (ABLQ_S: ``steps = T`` batches, one epoch, zero-out
adjacency, noise multiplier ``sigma``) the pair

.. math:: P_S = \frac1T \sum_{t=1}^T \mathcal N(2e_t, \sigma^2 I_T), \qquad
          Q_S = \frac1T \sum_{t=1}^T \mathcal N(e_t, \sigma^2 I_T)

is *tightly* dominating. If it is, ``delta_S(eps)`` is the hockey-stick divergence of
that pair, a T-dimensional integral that this module estimates by importance
sampling. Nothing here is a certified bound: the value is conjectured (it is the
true delta only if the conjecture holds) and it is a Monte-Carlo estimate with a
confidence interval. Certified facts that bracket it: the deterministic-batch
Gaussian curve ``delta_D`` is an upper bound (shuffling never hurts), and the
threshold sets ``E_C = {max_t w_t >= C}`` give lower bounds.

Derivation of the privacy loss (checked from the densities). With
:math:`\varphi` the density of :math:`\mathcal N(0, \sigma^2 I_T)`,
:math:`\varphi(w - c e_t)/\varphi(w) = \exp((2 c w_t - c^2)/(2\sigma^2))`, so

.. math:: p(w) = \frac{\varphi(w)}{T} \sum_t e^{(2w_t - 2)/\sigma^2}, \qquad
          q(w) = \frac{\varphi(w)}{T} \sum_t e^{(w_t - 1/2)/\sigma^2},

and the privacy loss :math:`L = \log(p/q)` is

.. math:: L(w) = \operatorname{logsumexp}_t \frac{2w_t - 2}{\sigma^2}
                 - \operatorname{logsumexp}_t \frac{w_t - 1/2}{\sigma^2}.

Then :math:`H_\varepsilon(P_S\|Q_S) = E_{P_S}[(1 - e^{\varepsilon - L})_+]` and
:math:`H_\varepsilon(Q_S\|P_S) = E_{Q_S}[(1 - e^{\varepsilon + L})_+]`.

Sampling scheme. ``L`` is invariant under permutations of the coordinates, so
the mixture can be replaced by its first component: under ``P_S``,
``w = 2 e_1 + sigma Z`` and under ``Q_S``, ``w = e_1 + sigma Z``. The ``T - 1``
other coordinates enter ``L`` only through the two sums
``R_P = sum_{t>=2} exp((2 w_t - 2)/sigma^2)`` and
``R_Q = sum_{t>=2} exp((w_t - 1/2)/sigma^2)``; they are drawn exactly (this is the
O(T) part, done in chunks of at most ``2**22`` doubles) and shared by both
directions. Given ``(R_P, R_Q)``, the set where the integrand is non-zero is
explicit in the special coordinate ``y = w_1``: with ``v = exp((y - 1)/sigma^2)``,
``L > c`` is ``v^2 - e^{c + 1/(2 sigma^2)} v + (R_P - e^c R_Q) > 0``, a quadratic
in ``v``. Its upper root ``y*`` is where the integrand switches on (``P_S``
direction, ``c = eps``) or off (``Q_S`` direction, ``c = -eps``). The special
coordinate is then drawn from a *defensive mixture* (Hesterberg 1995): with
probability ``0.1`` from its nominal law ``N(m, sigma^2)`` (``m = 2`` or ``1``),
otherwise from ``N(mu, sigma^2)`` with the mean moved to

.. math:: \mu = y^* + \frac{\sigma^2}{\max(y^* - 2, \sigma)} + \frac{\sigma^2}{\max(y^* - 1, \sigma)}

(``P_S`` direction, and never below 2; the mirror image ``y -> 3 - y`` for
``Q_S``, never above 1). That offset is the mean of the optimal
importance density :math:`(p - e^\varepsilon q)_+` for ``T = 1`` in the
exponential-tail approximation (its density above ``y*`` is about
:math:`e^{-au}(1 - e^{-bu})` with :math:`a = (y^* - 2)/\sigma^2`, :math:`b = 1/\sigma^2`, whose
mean is :math:`1/a + 1/(a + b)`), capped at ``2 sigma`` where the event is not rare. The
mean depends only on the other coordinates, so this is a valid conditional proposal; each sample is
weighted by the likelihood ratio ``1 / (0.1 + 0.9 exp(l))``, which is at most 10,
so every weighted sample lies in ``[0, 10]``. This makes deltas of 1e-8 and below
estimable with ~1e5 samples when the mass comes from the special coordinate.

Limitation: the other coordinates are not tilted. When a non-special coordinate
being extreme carries a sizeable share of the mass of a *small* delta (large
``steps`` with ``noise_multiplier`` of order 1 or more), those samples are rare,
the estimator stays unbiased but its variance is larger, and the normal interval
is only trustworthy when ``hits`` (the number of samples with a non-zero value) is
large; ``interval="bernstein"`` is distribution-free and valid regardless.

Confidence intervals (``interval``):

* ``"normal"`` (default): mean +/- z * standard error, z the two-sided normal
  quantile. Asymptotic (central limit theorem); the weighted samples are
  bounded, so their variance is finite and the approximation is sound for many
  hits.
* ``"bernstein"``: the empirical-Bernstein bound of Maurer and Pontil (2009,
  Theorem 4) for i.i.d. samples in ``[0, 10]``, applied to both tails. Valid for
  every sample size, but its range term ``70 log(4/alpha) / (3 (n - 1))`` makes it
  useless for deltas much below ``100/n``.

With ``direction="both"`` each direction gets half of ``1 - confidence``
(Bonferroni), so the reported interval for the maximum has joint coverage of at
least ``confidence``.

References
----------
.. [1] L. Chua, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, A. Sinha, C. Zhang,
   "How Private are DP-SGD Implementations?", ICML 2024, arXiv:2403.17673,
   Conjecture 3.2 and Section 3.
.. [2] T. Hesterberg, "Weighted average importance sampling and defensive mixture
   distributions", Technometrics 37(2), 1995.
.. [3] A. Maurer and M. Pontil, "Empirical Bernstein Bounds and Sample Variance
   Penalization", COLT 2009, arXiv:0907.3740, Theorem 4.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from dpacct import _check, _core, gaussian

__all__ = [
    "ConjecturedEpsilon",
    "ConjecturedEstimate",
    "delta_shuffle_conjectured_mc",
    "epsilon_shuffle_conjectured_mc",
]

KIND = "conjectured (Chua et al. 2024, Conjecture 3.2), Monte-Carlo estimate, not a certified bound"

# Directions of the pair: "remove" is H_eps(P_S || Q_S) (P_S has the record, Q_S zeroes it out),
# "add" is H_eps(Q_S || P_S), as in the add/remove relation everywhere in dpacct. The former
# names "pq" and "qp" are deprecated aliases. Internally the code keeps "pq"/"qp".
_DIRECTIONS = ("both", "remove", "add")
_DEPRECATED_DIRECTIONS = {"pq": "remove", "qp": "add"}
_INTERNAL = {"both": "both", "remove": "pq", "add": "qp"}
_PUBLIC = {"pq": "remove", "qp": "add"}


def _direction(value: Any) -> str:
    """The internal name ("both", "pq", "qp") of a public direction; the old names warn."""
    if isinstance(value, str) and value in _DEPRECATED_DIRECTIONS:
        new = _DEPRECATED_DIRECTIONS[value]
        warnings.warn(f"direction={value!r} is deprecated; use direction={new!r} (same meaning)",
                      DeprecationWarning, stacklevel=4)
        value = new
    return _INTERNAL[_check.one_of("direction", value, _DIRECTIONS)]
_INTERVALS = ("normal", "bernstein")
_DEFENSIVE = 0.1  # share of the nominal law in the proposal: weights are <= 1 / _DEFENSIVE
_CHUNK_DOUBLES = 2**22  # at most this many normals are held at once (32 MiB)
_WALK_DOUBLING = 64  # the interval search doubles its step after this many steps
_LOG2 = math.log(2.0)
_LOG4 = math.log(4.0)

F64 = NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConjecturedEstimate:
    """A Monte-Carlo estimate of the conjectured shuffle delta, with its confidence interval.

    Attributes
    ----------
    estimate : float
        Unbiased importance-sampling estimate of the hockey-stick divergence (the
        larger of the two directions for ``direction="both"``).
    lower, upper : float
        Confidence interval for the conjectured delta, at level ``confidence``.
    standard_error : float
        Standard error of ``estimate`` (of the direction that attains the maximum).
    samples : int
        Number of Monte-Carlo samples (shared by both directions).
    hits : int
        Number of samples with a non-zero contribution (direction of ``estimate``);
        the normal interval needs this to be large.
    confidence : float
        Nominal joint coverage of ``(lower, upper)``.
    interval : str
        ``"normal"`` (asymptotic) or ``"bernstein"`` (distribution-free).
    direction : str
        ``"remove"`` for :math:`H_\\varepsilon(P_S\\|Q_S)`, ``"add"`` for
        :math:`H_\\varepsilon(Q_S\\|P_S)`: the direction of ``estimate`` (the former
        ``"pq"``/``"qp"``, still accepted as input with a DeprecationWarning).
    kind : str
        Always ``"conjectured (Chua et al. 2024, Conjecture 3.2), Monte-Carlo
        estimate, not a certified bound"``.
    mc_lower, mc_upper : float
        The Monte-Carlo confidence interval before that intersection (for judging
        the sampler itself).
    clipped : bool
        Whether the estimate or interval was moved into the certified range
        ``[threshold-event lower bound, Gaussian curve]`` (which contains the
        conjectured value); if the Monte-Carlo interval missed that range entirely,
        the range itself is reported.
    """

    estimate: float
    lower: float
    upper: float
    standard_error: float
    samples: int
    hits: int
    confidence: float
    interval: str
    direction: str
    kind: str = KIND
    mc_lower: float = math.nan
    mc_upper: float = math.nan
    clipped: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ConjecturedEpsilon:
    """A Monte-Carlo estimate of the conjectured shuffle epsilon(delta), with its confidence interval.

    Attributes
    ----------
    estimate : float
        Root of the estimated curve: ``delta_hat(estimate) == delta``.
    lower, upper : float
        Inversion of the pointwise confidence band of delta (see
        :func:`epsilon_shuffle_conjectured_mc`).
    samples : int
        Number of Monte-Carlo samples of the main run (the pilot run is extra).
    confidence : float
        Nominal coverage, inherited from the delta interval at the true epsilon.
    interval : str
        ``"normal"`` or ``"bernstein"``.
    kind : str
        Always the conjectured Monte-Carlo label.
    """

    estimate: float
    lower: float
    upper: float
    samples: int
    confidence: float
    interval: str
    kind: str = KIND


# ---------------------------------------------------------------------------
# validation


def _steps(value: Any) -> int:
    n = _check.count("steps", value, minimum=1)
    return n


def _samples(value: Any) -> int:
    n = _check.count("samples", value)
    if n < 2:
        msg = f"samples must be an integer >= 2, got {n}"
        raise ValueError(msg)
    return n


def _confidence(value: Any) -> float:
    x = _check.real("confidence", value)
    if not (0.0 < x < 1.0):
        msg = f"confidence must be in (0, 1), got {x!r}"
        raise ValueError(msg)
    return x


def _seed(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        msg = f"seed must be an integer or None, got {type(value).__name__}"
        raise TypeError(msg)
    if int(value) < 0:
        msg = f"seed must be an integer >= 0 or None, got {int(value)}"
        raise ValueError(msg)
    return int(value)


# ---------------------------------------------------------------------------
# sampling


def _other_sums(rng: np.random.Generator, samples: int, steps: int, sigma: float) -> tuple[F64, F64]:
    """``log R_P`` and ``log R_Q`` of the ``steps - 1`` non-special coordinates, one pair per sample."""
    if steps == 1:
        empty = np.full(samples, -np.inf)
        return empty, empty.copy()
    width = steps - 1
    rows = max(1, _CHUNK_DOUBLES // width)
    log_rp = np.empty(samples)
    log_rq = np.empty(samples)
    buffer = np.empty((min(rows, samples), width))
    for start in range(0, samples, rows):
        stop = min(samples, start + rows)
        z = buffer[: stop - start]
        rng.standard_normal(out=z)
        top = z.max(axis=1)
        # Factor out the largest term: e = exp((z - max z)/sigma) <= 1, so neither sum
        # can overflow (exp(2 z / sigma) overflows for sigma < ~0.02), and
        # R_Q = exp(max z/sigma - 1/(2 sigma^2)) sum e,  R_P = exp(2 max z/sigma - 2/sigma^2) sum e^2.
        z -= top[:, None]
        z /= sigma
        with np.errstate(under="ignore"):  # terms far below the maximum vanish: exact to rounding
            np.exp(z, out=z)
            s1 = z.sum(axis=1)
            np.square(z, out=z)
            s2 = z.sum(axis=1)
        log_rq[start:stop] = top / sigma - 0.5 / sigma**2 + np.log(s1)
        log_rp[start:stop] = 2.0 * top / sigma - 2.0 / sigma**2 + np.log(s2)
    return log_rp, log_rq


def _privacy_loss(y: F64, log_rp: F64, log_rq: F64, sigma: float) -> F64:
    """``L(w)`` for special coordinate ``y`` and the other coordinates summarised by ``(R_P, R_Q)``."""
    s2 = sigma * sigma
    with np.errstate(under="ignore"):  # logaddexp adds exp(-huge) = 0 when one term dominates: exact
        return np.asarray(np.logaddexp((2.0 * y - 2.0) / s2, log_rp) - np.logaddexp((y - 0.5) / s2, log_rq))


def _upper_root(c: float, log_rp: F64, log_rq: F64, sigma: float) -> F64:
    """Upper root ``y*`` of ``L(y) = c``, or NaN where ``L - c`` has no sign change.

    ``L > c`` iff ``v^2 - K v + D > 0`` with ``v = exp((y - 1)/sigma^2)``,
    ``K = exp(c + 1/(2 sigma^2))`` and ``D = R_P - e^c R_Q``; everything is in logs
    because ``K`` overflows for small sigma. The root only steers the proposal, so
    its accuracy affects efficiency, never correctness.
    """
    log_k = c + 0.5 / sigma**2
    a, b = log_rp, c + log_rq
    top = np.maximum(a, b)
    with np.errstate(invalid="ignore", under="ignore"):  # steps == 1: -inf - (-inf); D = 0 there, set below
        gap = -np.abs(a - b)
        log_abs_d = np.where(np.isfinite(top), top + np.log(-np.expm1(np.minimum(gap, -1e-300))), -np.inf)
    log_r = np.minimum(_LOG4 + log_abs_d - 2.0 * log_k, 700.0)  # r = 4|D|/K^2, clipped: only steers
    positive_d = a > b
    # r >= 1 with D > 0: no real root, NaN on purpose; exp(log r) underflows to 0 for tiny r: exact enough
    with np.errstate(invalid="ignore", divide="ignore", under="ignore"):
        log_one_pm_r = np.where(positive_d, np.log1p(-np.exp(log_r)), np.logaddexp(0.0, log_r))
        log_v = log_k + np.logaddexp(0.0, 0.5 * log_one_pm_r) - _LOG2
    return np.asarray(1.0 + sigma**2 * log_v)


def _proposal_mean(root: F64, sigma: float, *, forward: bool) -> F64:
    """Mean of the tilted component for the special coordinate (module docstring)."""
    s2 = sigma * sigma
    if forward:  # P_S direction: nominal N(2, sigma^2), integrand on above y*
        mean = root + s2 / np.maximum(root - 2.0, sigma) + s2 / np.maximum(root - 1.0, sigma)
        return np.asarray(np.where(np.isnan(root), 2.0, np.maximum(mean, 2.0)))
    # Q_S direction, mirror image y -> 3 - y: nominal N(1, sigma^2), integrand on below y*
    mean = root - s2 / np.maximum(1.0 - root, sigma) - s2 / np.maximum(2.0 - root, sigma)
    return np.asarray(np.where(np.isnan(root), 1.0, np.minimum(mean, 1.0)))


@dataclass(frozen=True, slots=True)
class _Sample:
    """One direction's importance sample: weights and privacy losses (fixed, so curves in epsilon are monotone)."""

    log_weight: F64
    loss: F64  # L for P_S, -L for Q_S: the integrand is (1 - e^{eps - loss})_+ in both


def _draw(
    rng: np.random.Generator, log_rp: F64, log_rq: F64, sigma: float, epsilon: float, *, forward: bool
) -> _Sample:
    """Special coordinate from the defensive mixture tuned to ``epsilon``; weights and losses."""
    n = log_rp.size
    nominal = 2.0 if forward else 1.0
    root = _upper_root(epsilon if forward else -epsilon, log_rp, log_rq, sigma)
    mean = _proposal_mean(root, sigma, forward=forward)
    z = rng.standard_normal(n)
    tilted = rng.random(n) >= _DEFENSIVE
    y = np.where(tilted, mean, nominal) + sigma * z
    # log N(y; mean)/N(y; nominal) = (mean - nominal)(2y - nominal - mean)/(2 sigma^2);
    # weight p/g = 1/(lambda + (1 - lambda) e^l) <= 1/lambda, computed as a logaddexp.
    log_ratio = (mean - nominal) * (2.0 * y - nominal - mean) / (2.0 * sigma**2)
    with np.errstate(under="ignore"):  # as in _privacy_loss: a negligible term of logaddexp
        log_weight = -np.logaddexp(math.log(_DEFENSIVE), math.log1p(-_DEFENSIVE) + log_ratio)
    loss = _privacy_loss(y, log_rp, log_rq, sigma)
    return _Sample(log_weight=np.asarray(log_weight), loss=loss if forward else -loss)


def _values(sample: _Sample, epsilon: float) -> F64:
    """Weighted integrand ``W (1 - e^{eps - loss})_+`` per sample, each in ``[0, 1/_DEFENSIVE]``."""
    with np.errstate(under="ignore"):  # weights below 1e-308 contribute 0: exact to rounding
        f = -np.expm1(np.minimum(epsilon - sample.loss, 0.0))  # clipped at 0: the positive part
        return np.asarray(f * np.exp(sample.log_weight))


def _mean_interval(values: F64, alpha: float, interval: str, bound: float) -> tuple[float, float, float, float]:
    """``(mean, lower, upper, standard_error)`` of i.i.d. values in ``[0, bound]``, coverage ``1 - alpha``.

    ``interval="normal"``: the CLT interval; otherwise the empirical-Bernstein bound of
    Maurer & Pontil (2009), Theorem 4, for values / bound in [0, 1], each tail at alpha / 2.
    Shared with :mod:`dpacct.samplers.allocation`.
    """
    n = values.size
    mean = float(values.mean())
    std = float(values.std(ddof=1))
    se = std / math.sqrt(n)
    if interval == "normal":
        half = float(special.ndtri(1.0 - alpha / 2.0)) * se
    else:
        log_term = math.log(4.0 / alpha)
        half = math.sqrt(2.0 * std**2 * log_term / n) + 7.0 * bound * log_term / (3.0 * (n - 1))
    return mean, max(0.0, mean - half), mean + half, se


def _interval(values: F64, alpha: float, interval: str) -> tuple[float, float, float, float]:
    """``(mean, lower, upper, standard_error)`` of the importance weights, in ``[0, 1/_DEFENSIVE]``."""
    return _mean_interval(values, alpha, interval, 1.0 / _DEFENSIVE)


def _rngs(seed: int | None, count: int) -> list[np.random.Generator]:
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(count)]


def _common(
    noise_multiplier: Any, steps: Any, samples: Any, confidence: Any, seed: Any, direction: Any, interval: Any
) -> tuple[float, int, int, float, int | None, str, str]:
    return (
        _check.noise_multiplier(noise_multiplier),
        _steps(steps),
        _samples(samples),
        _confidence(confidence),
        _seed(seed),
        _direction(direction),
        _check.one_of("interval", interval, _INTERVALS),
    )


# ---------------------------------------------------------------------------
# public API


def delta_shuffle_conjectured_mc(
    *,
    noise_multiplier: float,
    steps: int,
    epsilon: float,
    samples: int = 100_000,
    confidence: float = 0.95,
    seed: int | None = 0,
    direction: str = "both",
    interval: str = "normal",
) -> ConjecturedEstimate:
    r"""Conjectured delta of one epoch of shuffled batches: a Monte-Carlo estimate.

    Estimates the hockey-stick divergence of the pair :math:`(P_S, Q_S)` of Chua et
    al. (2024), which equals ``delta_S(epsilon)`` of ABLQ with shuffled batches
    (zero-out adjacency, one epoch) **if** their Conjecture 3.2 holds. Not a
    certified bound in either direction; see the module docstring for the
    importance-sampling scheme.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clip norm, finite and ``> 0``.
    steps : int
        Number of batches ``T`` in the epoch, ``>= 1``. The cost is
        ``O(samples * steps)`` time and ``O(samples + 2**22)`` memory.
    epsilon : float
        Finite and ``>= 0``.
    samples : int, optional
        Number of Monte-Carlo samples, ``>= 2``.
    confidence : float, optional
        Coverage of the interval, in ``(0, 1)``.
    seed : int or None, optional
        Seed of ``numpy.random.SeedSequence``; the same seed gives the same result.
        ``None`` draws fresh entropy.
    direction : {"both", "remove", "add"}, optional
        ``"remove"``: :math:`H_\varepsilon(P_S\|Q_S)` (``P_S`` holds the record, ``Q_S``
        zeroes it out); ``"add"``: :math:`H_\varepsilon(Q_S\|P_S)`; ``"both"``: the larger, with each direction's
        interval at level ``1 - (1 - confidence)/2`` so the maximum's interval has
        joint coverage ``>= confidence``. Both are equal for ``steps = 1`` (the pair
        is then ``N(2, s^2)`` vs ``N(1, s^2)``); for ``steps > 1`` ``"remove"`` is the
        larger one in every case we computed: ``L < -eps`` needs *every*
        coordinate to be small, which gets rarer as ``steps`` grows, while
        ``L > eps`` needs only one large coordinate. With ``"both"`` the estimate is
        the larger of two estimates, so it leans high by up to ~0.56 standard
        errors where the directions are (nearly) equal, as at ``steps = 1``; the
        interval accounts for both.
    interval : {"normal", "bernstein"}, optional
        Asymptotic normal interval, or the distribution-free empirical-Bernstein
        interval (wide for small deltas).

    Returns
    -------
    ConjecturedEstimate
        An estimate (conjectured, Monte Carlo) with its confidence interval; its
        ``kind`` says so.

    Raises
    ------
    ValueError, TypeError
        For an invalid argument, naming it.

    Notes
    -----
    .. math:: \delta_S(\varepsilon) \overset{\text{conj.}}{=}
              \max\{H_\varepsilon(P_S\|Q_S), H_\varepsilon(Q_S\|P_S)\},\quad
              H_\varepsilon(P\|Q) = E_{w \sim P}[(1 - e^{\varepsilon - L(w)})_+]

    Certified brackets: the conjectured value is at most the Gaussian curve with
    ``noise_multiplier`` (joint convexity of the hockey-stick divergence) and, in the
    ``(P_S, Q_S)`` direction, at least the threshold lower bound of Chua et al. The
    reported estimate and interval are intersected with that range (``clipped`` says
    when this changed them; ``mc_lower``/``mc_upper`` keep the raw Monte-Carlo
    interval). With few contributing samples and heavy importance weights (large
    ``steps`` with ``noise_multiplier`` above ~1) the raw normal interval can miss
    the truth; the clip keeps the reported one honest there.

    References
    ----------
    .. [1] L. Chua et al., "How Private are DP-SGD Implementations?", ICML 2024,
       arXiv:2403.17673, Conjecture 3.2.

    Examples
    --------
    >>> r = delta_shuffle_conjectured_mc(noise_multiplier=1.0, steps=1, epsilon=1.0, samples=20_000)
    >>> r.mc_lower < 0.1269 < r.mc_upper  # T = 1 is the Gaussian curve, 0.126937
    True
    >>> round(r.lower, 4), round(r.upper, 4)  # clipped to the certified range, exact here
    (0.1269, 0.1269)
    >>> r.kind.startswith("conjectured")
    True
    """
    sigma, steps_, n, conf, seed_, direction_, interval_ = _common(
        noise_multiplier, steps, samples, confidence, seed, direction, interval
    )
    eps = _check.epsilon(epsilon)
    alpha = 1.0 - conf
    rng_others, rng_pq, rng_qp = _rngs(seed_, 3)
    log_rp, log_rq = _other_sums(rng_others, n, steps_, sigma)
    wanted = ("pq", "qp") if direction_ == "both" else (direction_,)
    level = alpha / len(wanted)
    results: list[tuple[float, float, float, float, int, str]] = []
    for name in wanted:
        rng = rng_pq if name == "pq" else rng_qp
        sample = _draw(rng, log_rp, log_rq, sigma, eps, forward=name == "pq")
        values = _values(sample, eps)
        mean, lo, hi, se = _interval(values, level, interval_)
        results.append((mean, lo, hi, se, int(np.count_nonzero(values)), name))
    best = max(results, key=lambda r: r[0])
    # The conjectured value lies in a certified range: at most the Gaussian curve (joint
    # convexity of the hockey-stick divergence over the mixture) and, for the (P_S, Q_S)
    # direction, at least the threshold-event bound of Chua et al. Intersecting the
    # interval with it cannot lose coverage; where the Monte-Carlo interval misses the
    # range altogether (heavy importance weights, few hits), the range itself is reported.
    low_cert, high_cert = _certified_range(sigma, steps_, eps, "pq" in wanted)
    mc_lower = max(r[1] for r in results)
    mc_upper = max(r[2] for r in results)
    lower = max(mc_lower, low_cert)
    upper = min(mc_upper, high_cert)
    clipped = lower != mc_lower or upper != mc_upper or not low_cert <= best[0] <= high_cert
    if lower > upper:
        lower, upper = low_cert, high_cert
    return ConjecturedEstimate(
        estimate=min(max(best[0], low_cert), high_cert),
        lower=lower,
        upper=upper,
        standard_error=best[3],
        samples=n,
        hits=best[4],
        confidence=conf,
        interval=interval_,
        direction=_PUBLIC[best[5]],
        mc_lower=mc_lower,
        mc_upper=mc_upper,
        clipped=clipped,
    )


def _certified_range(sigma: float, steps: int, epsilon: float, forward: bool) -> tuple[float, float]:
    """``(threshold-event lower bound or 0, Gaussian curve)``: certified bounds on the conjectured delta."""
    high = float(gaussian.delta_for_epsilon(noise_multiplier=sigma, epsilon=epsilon))
    if not forward:  # the threshold events bound the (P_S, Q_S) direction only
        return 0.0, high
    log_low, _ = _core.samplers.log_delta_lower(sigma, float(steps), np.array([epsilon]))
    with np.errstate(under="ignore"):  # a lower bound that underflows to 0 is still one
        low = float(np.exp(log_low[0]))
    return min(low, high), high


def _slope(sample: _Sample, epsilon: float) -> float:
    """``-d delta_hat / d eps`` on a fixed sample: ``mean(W e^{eps - loss} 1{loss > eps})``."""
    with np.errstate(under="ignore"):  # as in _values
        terms = np.where(sample.loss > epsilon, np.exp(np.minimum(epsilon - sample.loss, 0.0) + sample.log_weight), 0.0)
    return float(terms.mean())


def _band(samples: list[_Sample], alpha: float, interval: str) -> Callable[[float], tuple[float, float, float]]:
    """``eps -> (estimate, lower, upper)`` on a fixed sample: the estimate is non-increasing in eps."""

    def band(eps: float) -> tuple[float, float, float]:
        parts = [_interval(_values(s, eps), alpha, interval) for s in samples]
        return max(p[0] for p in parts), max(p[1] for p in parts), max(p[2] for p in parts)

    return band


def epsilon_shuffle_conjectured_mc(
    *,
    noise_multiplier: float,
    steps: int,
    delta: float,
    samples: int = 100_000,
    confidence: float = 0.95,
    seed: int | None = 0,
    direction: str = "both",
    interval: str = "normal",
) -> ConjecturedEpsilon:
    r"""Conjectured epsilon(delta) of one epoch of shuffled batches: a Monte-Carlo estimate.

    The inverse of :func:`delta_shuffle_conjectured_mc`, computed on *one* common
    random-number sample so that the estimated curve ``delta_hat(eps)`` is
    continuous and non-increasing in ``eps`` and the root is unique. Not a
    certified bound.

    Parameters
    ----------
    noise_multiplier, steps, samples, confidence, seed, direction, interval
        As in :func:`delta_shuffle_conjectured_mc`.
    delta : float
        Target delta, in ``(0, 1)``.

    Returns
    -------
    ConjecturedEpsilon
        ``estimate`` solves ``delta_hat(estimate) = delta`` (Brent's method; 0 if
        ``delta_hat(0) <= delta``). The interval inverts the pointwise confidence
        band ``(lo(eps), hi(eps))`` of delta computed on the same sample: it is the
        connected piece, containing ``estimate``, of the set of epsilons with
        ``lo(eps) <= delta <= hi(eps)``, i.e. ``lower`` is where ``lo`` rises above
        ``delta`` below the estimate and ``upper`` where ``hi`` falls below ``delta``
        above it (found by stepping outward from the estimate, in steps of a quarter
        of the delta-method half-width ``z SE / |delta_hat'|`` doubled every 64
        steps, then Brent's method). If the band covers the true curve at the true
        ``eps_S(delta)`` and that point lies in this piece (the band is monotone
        near the estimate whenever the sample is informative), the interval covers
        ``eps_S(delta)``: its coverage is then that of the delta interval there.

    Notes
    -----
    Two stages: a pilot of ``max(2, samples // 10)`` samples, tuned to the
    Gaussian curve's epsilon (an upper bound on the shuffle epsilon), locates the
    answer; the main sample is then tuned to the pilot's estimate. The tuning
    only moves the proposal, so a poor pilot costs accuracy, not validity.

    Examples
    --------
    >>> r = epsilon_shuffle_conjectured_mc(noise_multiplier=1.0, steps=1, delta=1e-5, samples=20_000)
    >>> r.lower < 4.3772 < r.upper  # T = 1 is the Gaussian curve: eps(1e-5) = 4.377178
    True
    """
    sigma, steps_, n, conf, seed_, direction_, interval_ = _common(
        noise_multiplier, steps, samples, confidence, seed, direction, interval
    )
    target = _check.delta(delta)
    alpha = 1.0 - conf
    wanted = ("pq", "qp") if direction_ == "both" else (direction_,)
    level = alpha / len(wanted)
    rngs = _rngs(seed_, 6)
    tune = float(gaussian.epsilon_for_delta(noise_multiplier=sigma, delta=target))
    for stage, count in enumerate((max(2, n // 10), n)):
        log_rp, log_rq = _other_sums(rngs[3 * stage], count, steps_, sigma)
        drawn = [
            _draw(rngs[3 * stage + 1 + k], log_rp, log_rq, sigma, tune, forward=name == "pq")
            for k, name in enumerate(wanted)
        ]
        band = _band(drawn, level, interval_)
        top = max(float(np.max(s.loss)) for s in drawn)  # above it every term is 0
        top = max(top, 0.0) + 1e-9
        estimate = _root(lambda e: band(e)[0] - target, top)
        tune = estimate
    # Outward search from the estimate, with steps of a quarter of the delta-method
    # half-width of the epsilon interval: z SE(delta_hat) / |delta_hat'(eps)|, where
    # delta_hat'(eps) = -mean(W e^{eps - loss} 1{loss > eps}) on the same sample.
    slope = max(_slope(s, estimate) for s in drawn)
    spread = band(estimate)[2] - band(estimate)[0]
    step = max(0.25 * spread / slope if slope > 0.0 else top, 1e-9 * max(1.0, estimate))
    step = min(step, top / _WALK_DOUBLING)
    lower = _walk(lambda e: band(e)[1] - target, estimate, step, 0.0)  # lo(eps) <= delta on [lower, estimate]
    upper = _walk(lambda e: target - band(e)[2], estimate, step, top)  # hi(eps) >= delta on [estimate, upper]
    return ConjecturedEpsilon(
        estimate=estimate, lower=lower, upper=upper, samples=n, confidence=conf, interval=interval_
    )


def _root(f: Callable[[float], float], top: float) -> float:
    """Root of a non-increasing ``f`` on ``[0, top]`` (0 if ``f(0) <= 0``)."""
    if f(0.0) <= 0.0:
        return 0.0
    return float(optimize.brentq(f, 0.0, top, xtol=1e-12, rtol=1e-12))


def _walk(f: Callable[[float], float], start: float, step: float, stop: float) -> float:
    """First point from ``start`` towards ``stop`` where ``f`` turns positive, refined by Brent's method.

    Meant for ``f(start) <= 0``. Steps of ``step`` are taken, doubling after every
    ``_WALK_DOUBLING`` of them; returns ``stop`` if ``f`` stays ``<= 0`` up to it.
    """
    if f(start) > 0.0:  # only by rounding (the band contains the estimate): the piece is a point
        return start
    sign = 1.0 if stop >= start else -1.0
    here, taken = start, 0
    while (stop - here) * sign > 0.0:
        there = here + sign * step
        there = min(there, stop) if sign > 0 else max(there, stop)
        if f(there) > 0.0:
            return float(optimize.brentq(f, min(here, there), max(here, there), xtol=1e-12, rtol=1e-12))
        here, taken = there, taken + 1
        if taken % _WALK_DOUBLING == 0:
            step *= 2.0
    return stop
