"""Privacy loss distributions: the tightest general accountant, with certified two-sided bounds.

One engine for every mechanism. Each mechanism enters as a discretisation of
its dominating pair (``dpacct._core.pld``: Gaussian, Laplace, mixtures of
Gaussians by their CDFs; randomized response and the (epsilon, delta) black
box as exact finite pairs; Poisson subsampling of any of them in both
directions), and one composer (``cpp/include/dpacct/pld/compose.hpp``) composes
any history of them by FFT and answers delta(epsilon) and epsilon(delta).
Both directions of the add/remove relation are composed where the pair is not
symmetric, and the larger delta is reported (prv-accountant models only one).

Why the bounds are certified (proofs in ``cpp/include/dpacct/pld/step.hpp``
and ``compose.hpp``):

* upper bound: "connect the dots" (Doroshenko et al. 2022) splits each cell's
  P-mass between grid points so that E[e^{-L}] is kept, a mean-preserving
  spread that can only raise delta for every composition; mass past the clamp
  points goes to +inf (charged) or up to the grid;
* lower bound: labelling every output by its cell is post-processing, so the
  hockey-stick divergence of the composed labels (P- and Q-distributions of
  the label sum, composed by FFT) is below the true one;
* cell masses are certified intervals (log-CDF round-off propagated through the
  differences); FFT round-off (Higham's bound, through Cauchy-Schwarz) and the
  tilted mass that could wrap around the transform are charged to both bounds;
* exponential tilting by ``e^{lambda L}`` puts enough mass near the queried
  epsilon that small deltas keep their relative accuracy;
* for Poisson-subsampled Gaussian histories two families of tests give lower
  bounds of their own, taken where larger: thresholds on the largest output
  (``threshold.py``; tiny deltas) and on the sum of the outputs
  (``sum_test.py``; at large noise nearly exact, and taken before the grids
  from sigma = 10 on, so that the grids only have to bring the upper bound
  within the target).

Choosing the grid. Both errors are second order in the grid width ``D``: in
each step the connect-the-dots spread moves the loss by at most
``min(D^2/8, D |L| / 2)`` on average, so over the composition epsilon moves by
about ``sum_t min(D^2/8, D E|L_t|/2)``. ``D`` is chosen so that this is the
target fraction of epsilon, from a coarse discretisation of each step (its
``E|L|``) and a Chernoff guide for epsilon and the tilt (the cumulant of the
discretised steps), then refined while the measured gap misses the target.
This follows what the *composed* answer needs, not the spread of one step:
at tiny sampling rates the per-step loss is a narrow spike of width ~q near 0
whose composed effect is small, and resolving it would need grids millions of
points long.

Tiny sampling rates (q <= 1e-4, at most 100 expected hits). There one step's loss
is a narrow spike near 0 plus rare large losses, and no single tilt serves both:
the tilt that lifts a small delta near a small epsilon would multiply the rare
losses out of range. Each step is then cut at a loss tau into its bounded part,
composed on a fine grid with as much tilt as the query needs, and its rare part,
composed by the number of rare steps (binomial identity; beyond H of them the
mass is charged), on a coarse grid (``cpp/include/dpacct/pld/split.hpp``). At
q <= 1e-6 this goes first; above, only where the whole-grid composer misses its
target, and the two certified intervals are intersected. The small part's grid is
refined until the spread connect-the-dots adds to it fits the error model (at tiny q
that spread is first order in the width), each step's tails are cut for the query,
and beyond G's window U_G is bounded by a Chernoff bound on G.

Few steps at tiny rates with small deltas (T q << 1), where the far tail of one hit
sets epsilon and spans orders of magnitude above it: each step is cut at a loss tau
into its band, composed T - 1 times on the fine grid, and the rest, whose cells
have geometrically growing loss edges; (s + r)^T = s^(T-1) * (s + T r) plus the
terms with two or more rare steps, whose mass is charged
(``cpp/include/dpacct/pld/one_rare.hpp``). It runs where the other composers miss
their target, and the certified intervals are intersected. Where a step's largest
loss is bounded (the add direction at q < 1, Laplace), T times it bounds epsilon.

One Poisson-subsampled Gaussian step (T = 1) is answered in closed form, with
certified rounding (``dpacct/pld/single.py``): a grid cannot resolve the loss where
q and epsilon are tiny.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check, _core
from dpacct._shape import unwrap
from dpacct.accountant import Accountant, register_accountant
from dpacct.pld.single import gaussian_step_delta_bounds, gaussian_step_epsilon_bounds
from dpacct.pld.sum_test import sum_test_applies, sum_test_delta_lower, sum_test_epsilon_lower
from dpacct.pld.threshold import threshold_delta_lower, threshold_epsilon_lower
from dpacct.mechanisms import (
    BallsInBinsGaussianMechanism,
    EpsilonDeltaMechanism,
    FixedSizeSampledGaussianMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    Mechanism,
    MixtureOfGaussiansMechanism,
    PoissonSampledGaussianMechanism,
    PoissonSampledMechanism,
    RandomizedResponseMechanism,
    TruncatedPoissonSampledGaussianMechanism,
)

__all__ = ["Bounds", "PLDAccountant", "clear_cache", "kept_memory", "release_memory"]

_DIRECTIONS = ("remove", "add")
_LOG_TAIL = -80.0  # per step, P- and Q-mass beyond the clamp points of an unbounded loss is <= e^-80
# The ``log_tail`` of the step builders: the log mass a query lets each step cut off (-inf: none
# asked; the base pairs' tails are then cut at e^_LOG_TAIL, and at e^log_tail where that is larger).
_NO_QUERY = -math.inf
_QUERY_TAIL_MAX = -25.0  # the most an epsilon query cuts per step (PLDAccountant._query_tail)
_MAX_CELLS = 2**24  # most grid points one step may use
_COARSE_CELLS = 4096  # grid points of the coarse discretisation that guides the choice of grid
_GUIDE_SLOPE = 1e12  # the largest Chernoff slope tried: ~1/q where every loss is ~q
_GUIDE_SLOPE_LOWEST = 1e-12  # ... and the smallest: ~1 / the composed loss's spread
_GUIDE_INFLATION = 4.0  # the guides take a quadrature where the coarse cells inflate a step's loss variance this much
_REFINEMENTS = 3  # grid refinements when a query's gap exceeds the target
_REAIMS = 4  # grids aimed again where the answer proved far below the guide (tiny losses)
_REAIM_CELLS = 2**20  # ... each with steps of at most this many cells
# Delta queries run an epsilon search (PLDAccountant._delta_by_epsilon_search) only for deltas of at
# least this: far below issue 10's range (1e-15) its grids only cost (sigma=1.4, q=1e-3, T=859,
# delta(5.08) ~ 1e-37..1e-62: 42 s for no gain).
_SEARCH_FLOOR = 1e-25
# ... and a search within this many times the accuracy target is the answer: the whole-support grids
# that could follow (tails at e^-80) narrowed no row of the delta sweep's 150 by more than a few
# tenths of a percent, at up to 30 s each (sigma=1.04, q=1.1e-8, T=2.5e5: 9.6 % either way, 0.8 s
# -> 34 s); they stay for wider answers (the epsilon-delta black box at a kink: 2.5x delta -> 1 %).
_SEARCH_CLOSE = 50.0
_PASSES_CLOSE = 2.0  # a delta query's split passes (many hits at a small rate) end it within this many targets
_WINDOW_TAIL = -25.0  # log tilted mass an FFT window leaves out per side (ComposedPld)
_DEEPEST_WINDOW_TAIL = -120.0  # ... and the least an epsilon query's window may leave out (_epsilon_window_tail)
_UNIT = 2.220446049250313e-16  # DBL_EPSILON, a generous unit round-off
_TINIEST = math.ulp(0.0)  # smallest positive double: the upper bound of a delta that underflows
_TILT_STRENGTH = 0.5  # tilt = strength * lambda*, see PLDAccountant._tilt
# D = min(_SQRT_SCALE sqrt(a / T), _LINEAR_SCALE a / sum_t E|L_t|), a = the epsilon error allowed
# (relative_accuracy * epsilon); measured on the bench grid and the corner cases of bench/.
_SQRT_SCALE = 2.0
_LINEAR_SCALE = 2.0
# The finest grid: epsilons down to ~1e-9 need cells of ~1e-13 (sigma=1165, q=1.04e-8, T=3797, delta=1.2e-13:
# every loss within 9e-11, epsilon 1.74e-9; [1.0e-9, 2.1e-9] on grids stopped at 1e-12, [1.72e-9, 1.75e-9] at 1e-13).
_MIN_DISCRETIZATION = 1e-14
_SUM_TEST_SIGMA = 10.0  # the sum test's lower bound goes first at and above this noise (_sum_test_first)
# The grid error model of PLDAccountant._grid: gap ~ _GAP_CONSTANT T D^2 (eps / 2V + 1/4), aimed at
# _GAP_TARGET times the allowed error.
_GAP_CONSTANT = 0.45
_GAP_TARGET = 0.85
_GAUSSIAN_QUANTILE = 10.0  # ... applied where (eps - V/2) / sqrt(V) is at most this
# Composition in stages (PLDAccountant._stages): used from this many window points of the one-grid
# composition, with blocks of 4 r^2 steps re-spread onto a grid r times as wide, r the largest power
# of two <= (T / 2)^(1/4) (where one grid of the requested width would not fit, the r of _beyond_ratio),
# the blocks' window tails at e^-60 (their round-off is charged per entry).
_STAGE_FROM = 2**16
_STAGE_WINDOW_TAIL = -60.0
_STAGE_BEYOND = 2**21  # ... where one grid would not fit: only where both stages' windows fit in this many points
_STAGE_SHAPE = 0.5  # ... and only where the composed loss's skewness and excess kurtosis are at most this
# ... and one step's support spans at most this fraction of the composed window (16 standard deviations).
# A block's window holds a few step supports (its tilted tails), so only then are the two stages cheaper
# than one grid: at sigma=0.8, q=1e-3, T=1e6 (a step spans 0.28 of the window) blocks of 2^16 entries took
# an epsilon query from 34 to 104 ms; at sigma=1, q=1e-3, T=1e7 (0.084) from 107 to 54 ms. Long steps also
# cost the blocks' lower bounds: at sigma=0.946, q=3.77e-6, T=8.4e5 (3.2) each block needed 2^21 entries,
# and their round-off charges took the lower bound on delta to 0.
_STAGE_SUPPORT = 0.1
_STAGE_TILT = 50.0  # ... and tilts at most this (PLDAccountant._stages)
_SPLIT_STAGE_TILT = 5000.0  # ... and for the split composition's G, its tilts at most this (_split_stages)
_SPLIT_RANGE = 45.0  # the split composition's M: the most e-folds its tilt may give the far rare losses ...
_SPLIT_RANGE_WIDE = 60.0  # ... and in an epsilon query's last pass where the first one missed
# One-grid compositions take the shared labels (step.hpp) as well where T x tilt x _MASS_WIDTH exceeds
# _SHARED_FROM of the accuracy target: near the Gaussian limit the best test's delta is about 1/lambda of
# the masses it compares, and the cells' mass intervals (~_MASS_WIDTH relative each) cost about T times
# theirs of those masses (measured 2.7 times that: sigma=2.34, q=3.6e-8, T=2.2e6, tilt 2.2e5, 2.6 % of
# delta). The shared labels' errors are bounded by their concentration (concentration.hpp), a few ulps
# T times and their spread sqrt(T) times: 0.66 % there on a grid of 4.4e-10, 0.37 % on one of 2e-10, for two
# more sequences per grid (0.19 -> 0.25 s).
# (At sigma=9.88, q=2.3e-8, T=7.6e6, tilt 4.7e5, the intervals had cost 27 % of delta.)
_MASS_WIDTH = 2e-14
_SHARED_FROM = 0.1
_SHARED_ANSWER = 0.1  # ... and where T x _MASS_WIDTH / answer exceeds this share of the accuracy target
_SHARED_GRID = 1e-4  # the steps (gaussian, laplace, mixture) build shared labels only on grids finer than this


class Bounds(NamedTuple):
    """A certified interval: ``lower <= true value <= upper``."""

    lower: float | NDArray[np.float64]
    upper: float | NDArray[np.float64]


class _Spec(NamedTuple):
    """What the C++ engine needs to discretise one mechanism: a hashable description."""

    kind: str  # "gaussian" | "laplace" | "mixture" | "finite" | "labelled" | "symmetrised" | "truncated" | ...
    parameters: tuple[Any, ...]
    sampling_probability: float
    symmetric: bool


def _spec(mechanism: Mechanism, sampling_probability: float = 1.0) -> _Spec | None:
    """The discretisation of ``mechanism`` (Poisson-subsampled at the given rate), or None if unsupported."""
    q = sampling_probability
    if isinstance(mechanism, PoissonSampledMechanism):
        return _spec(mechanism.mechanism, q * mechanism.sampling_probability)
    if isinstance(mechanism, GaussianMechanism):
        return _Spec("gaussian", (mechanism.effective_noise_multiplier,), q, q == 1.0)
    if isinstance(mechanism, PoissonSampledGaussianMechanism):
        rate = q * mechanism.sampling_probability
        return _Spec("gaussian", (mechanism.noise_multiplier,), rate, rate == 1.0)
    if isinstance(mechanism, LaplaceMechanism):
        return _Spec("laplace", (mechanism.noise_multiplier,), q, q == 1.0)
    if isinstance(mechanism, MixtureOfGaussiansMechanism):
        params = (mechanism.noise_multiplier, mechanism.sensitivities, mechanism.probabilities)
        return _Spec("mixture", params, q, False)
    if isinstance(mechanism, (RandomizedResponseMechanism, EpsilonDeltaMechanism)):
        return _Spec("finite", mechanism.log_masses(), q, q == 1.0)
    if isinstance(mechanism, FixedSizeSampledGaussianMechanism):
        return _fixed_size_spec(mechanism) if q == 1.0 else None
    if isinstance(mechanism, TruncatedPoissonSampledGaussianMechanism):
        return _truncated_spec(mechanism) if q == 1.0 else None
    if isinstance(mechanism, BallsInBinsGaussianMechanism):
        epoch = (mechanism.noise_multiplier, mechanism.steps_per_epoch)
        return _Spec("balls_in_bins", epoch, 1.0, mechanism.steps_per_epoch == 1) if q == 1.0 else None
    return None


def _loss_ceiling(spec: _Spec, direction: str) -> float:
    """The largest privacy loss of one step of ``spec`` in ``direction``, rounded up (inf where unbounded or
    not known in closed form): T of them bound epsilon at every delta, since no composed loss exceeds them.

    The Poisson-subsampled loss is log(1 - q + q e^L) of the base loss L ("remove") and
    -log(1 - q + q e^L) at L's infimum ("add"): at most -log(1 - q) there for the Gaussian (whose L is
    unbounded below), log(1 - q + q e^{1/b}) and -log(1 - q + q e^{-1/b}) for Laplace of scale b, and
    -log(1 - q + q w_0) for a mixture whose sensitivity-0 components weigh w_0.
    """
    if not isinstance(spec, _Spec):  # (the f-DP accountant's own step kinds)
        return math.inf
    q = spec.sampling_probability
    if spec.kind == "laplace":
        bound = 1.0 / spec.parameters[0]
        base = bound if direction == "remove" else -bound
        value = math.log1p(q * math.expm1(base))
        top = value if direction == "remove" else -value
    elif spec.kind in ("gaussian", "mixture") and direction == "add" and q < 1.0:
        zero = 0.0
        if spec.kind == "mixture":
            zero = float(sum(w for c, w in zip(spec.parameters[1], spec.parameters[2]) if c == 0.0))
        top = -math.log1p(-q * (1.0 - zero))
    else:
        return math.inf
    return top * (1.0 + 1e-12) + 1e-300 if math.isfinite(top) else math.inf


def _truncated_spec(mechanism: TruncatedPoissonSampledGaussianMechanism) -> _Spec:
    """Truncated Poisson: the overflow-labelled mixture (upper) and the others-zero datasets (lower).

    Under add/remove a dataset of ``N`` records has neighbours of ``N - 1`` records (the pair
    at ``n = N``) and of ``N + 1`` (at ``n = N + 1``), and the bounds are not monotone in n.
    Both pairs are labelled mixtures of ``X = PS(sigma, q)``, ``Y = PS(sigma/2, q_c)`` and
    ``Z = PS(sigma/2, max(q, q_c))`` (Poisson-subsampled Gaussian pairs, ``Z`` dominating the
    others); keeping the smaller ``X`` and ``Y`` weights, the larger ``Y`` rate and the rest on
    ``Z`` dominates both, label by label.
    """
    from dpacct.samplers.truncated_poisson import truncated_poisson_pair

    def pair_at(n: int) -> Any:
        return truncated_poisson_pair(noise_multiplier=mechanism.noise_multiplier,
                                      sampling_probability=mechanism.sampling_probability, dataset_size=n,
                                      max_batch_size=mechanism.max_batch_size,
                                      neighboring_relation=mechanism.neighboring_relation)  # type: ignore[arg-type]

    pair = pair_at(mechanism.dataset_size)
    components = pair.components
    if mechanism.neighboring_relation == "add_remove":
        bigger = pair_at(mechanism.dataset_size + 1)
        if pair.truncates or bigger.truncates:
            sigma, q = mechanism.noise_multiplier, mechanism.sampling_probability
            both = [p.components if p.truncates else ((1.0, sigma, q), (0.0, sigma / 2.0, q), (0.0, sigma / 2.0, q))
                    for p in (pair, bigger)]
            x_weight = min(c[0][0] for c in both)
            y_weight, y_rate = min(c[1][0] for c in both), max(c[1][2] for c in both)
            z_rate = max(q, y_rate, *(c[2][2] for c in both))
            z_weight = max(0.0, 1.0 - x_weight - y_weight) + 1e-15
            components = ((x_weight, sigma, q), (y_weight, sigma / 2.0, y_rate), (z_weight, sigma / 2.0, z_rate))
            pair = pair if pair.truncates else bigger
    if not pair.truncates:
        return _Spec("gaussian", (mechanism.noise_multiplier,), mechanism.sampling_probability, False)
    realised_sigma, realised_rate = pair.realised_pairs[0]
    return _Spec("truncated", (components, pair.zero_loss_weight, realised_sigma, realised_rate),
                 realised_rate, False)


# A with-replacement batch holds a record L times with L ~ Binomial(b, 1/n); labels L beyond
# the point where P(L > L_max | L >= 1) <= _LABEL_TAIL are charged to +inf (upper bound) and
# left out of the realised pair (lower bound, changing delta by at most T * _LABEL_TAIL).
_LABEL_TAIL = 1e-25


def _fixed_size_spec(mechanism: FixedSizeSampledGaussianMechanism) -> _Spec:
    """Fixed-size batches: see :mod:`dpacct.samplers.fixed_size` for the pairs and why they dominate."""
    sigma, rate = mechanism.noise_multiplier, mechanism.hit_probability
    relation = mechanism.neighboring_relation
    if not mechanism.replacement:
        inner = _Spec("gaussian", (sigma / 2.0,), rate, rate == 1.0)
        # zero-out: the other records' gradients -u and x's +u realise (g N(2) + (1-g) N(0),
        # g N(1) + (1-g) N(0)) at every step (x or the zeroed record takes a slot of the batch).
        # The Poisson pair at sigma (the others' gradients 0) is realised too; it wins at large sigma.
        pair = _Spec("mixture_pair", (sigma, (0.0, 2.0), (1.0 - rate, rate), (0.0, 1.0), (1.0 - rate, rate)),
                     rate, False)
        realised: tuple[tuple[_Spec, str], ...] = ((pair, "remove"),
                                                   (_Spec("gaussian", (sigma,), rate, False), "remove"))
    else:
        from scipy import stats

        n, b = mechanism.dataset_size, mechanism.batch_size
        hits = np.arange(1, b + 1)
        if n > 1:
            log_pmf, log_sf = stats.binom.logpmf(hits, b, 1.0 / n), stats.binom.logsf(hits, b, 1.0 / n)
        else:  # one record, drawn b times
            log_pmf, log_sf = np.where(hits == b, 0.0, -np.inf), np.where(hits >= b, -np.inf, 0.0)
        log_rate = math.log(rate)
        # Smallest L_max with P(L > L_max | L >= 1) <= _LABEL_TAIL.
        below = np.nonzero(log_sf - log_rate <= math.log(_LABEL_TAIL))[0]
        top = int(hits[below[0]]) if below.size else b
        weights = tuple(float(w) for w in np.exp(log_pmf[:top] - log_rate))
        tail = float(np.exp(log_sf[top - 1] - log_rate)) if top < b else 0.0
        log_none = b * math.log1p(-1.0 / n) if n > 1 else -math.inf
        probs = np.exp(np.concatenate(([log_none], log_pmf[:top])))
        probs[0] += max(0.0, 1.0 - float(probs.sum()))  # the tail beyond L_max, at shift 0
        masses = tuple(float(v) for v in probs)
        inner = _Spec("labelled", (sigma, tuple(range(1, top + 1)), weights, tail, masses, 2.0), rate, False)
        # zero-out: the same datasets realise sum_l P(L=l) N(2l) against sum_l P(L=l) N(l).
        shifts = tuple(float(k) for k in range(len(masses)))
        pair = _Spec("mixture_pair", (sigma, tuple(2.0 * v for v in shifts), masses, shifts, masses), rate, False)
        realised = ((pair, "remove"), (_Spec("labelled_realised", (sigma, masses, 1.0), rate, False), "remove"))
    if relation == "add_remove" or (relation == "replace_one" and inner.symmetric):
        return inner
    return _Spec("symmetrised", (inner, None if relation == "replace_one" else realised), rate, False)



def _threshold_steps(groups: list[tuple[_Spec, int]]) -> list[tuple[float, float, float]] | None:
    """``(s, q, T)`` per group when every step is a Poisson-subsampled Gaussian (threshold tests apply)."""
    if not groups or any(not isinstance(spec, _Spec) or spec.kind != "gaussian" for spec, _ in groups):
        return None
    return [(float(spec.parameters[0]), float(spec.sampling_probability), float(count)) for spec, count in groups]


def _realised_mixture(sigma: float, masses: tuple[float, ...], unit: float, direction: str, d: float) -> Any:
    """``sum_k m_k N(unit k, sigma^2)`` against ``N(0, sigma^2)``: a pair of datasets realises it."""
    shifts = unit * np.arange(len(masses), dtype=np.float64)
    return _core.pld.mixture_gaussian_step(sigma, shifts, np.asarray(masses), 1.0, direction, d, _LOG_TAIL, _MAX_CELLS)


_PAIR_CELLS = 8192  # cells of the line for the lower bound of a pair of Gaussian mixtures


def _log_cell_masses(edges: NDArray[np.float64], mean: float, sigma: float) -> tuple[Any, Any]:
    """log N(mean, sigma^2)-masses of the cells (-inf, e_0], (e_0, e_1], ..., (e_last, inf), and a relative error bound."""
    from scipy.special import log_ndtr

    z = (edges - mean) / sigma
    log_cdf, log_sf = log_ndtr(z), log_ndtr(-z)
    out = np.empty(edges.size + 1)
    err = np.full(edges.size + 1, 8.0 * _UNIT * (1.0 + 40.0))
    out[0], out[-1] = log_cdf[0], log_sf[-1]
    left = (z[:-1] + z[1:]) < 0.0  # each interior cell by the smaller tail: no cancellation of large terms
    big = np.where(left, log_cdf[1:], log_sf[:-1])
    small = np.where(left, log_cdf[:-1], log_sf[1:])
    ratio = np.exp(np.minimum(small - big, 0.0))
    with np.errstate(divide="ignore"):
        out[1:-1] = big + np.log1p(-ratio)
    # Each log tail is within 8 u (1 + |value|); the difference amplifies it by (1 + r) / (1 - r).
    spread = 8.0 * _UNIT * (2.0 + np.abs(big) + np.abs(small))
    err[1:-1] = spread * (1.0 + ratio) / np.maximum(1.0 - ratio, 1e-300)
    return out, err


_LINE_CELLS = 2**15  # cells of the line for the Chernoff bound of a subsampled Gaussian (_gaussian_chernoff)
_LINE_REACH = 40.0  # ... over this many standard deviations around the two means


def _gaussian_log_mgf(sigma: float, q: float, direction: str, slopes: NDArray[np.float64]) -> NDArray[np.float64]:
    """Upper bounds on log E_P[e^{lambda L}] for one Poisson-subsampled Gaussian step (sensitivity 1), lambda >= 0.

    ``remove``: P = (1 - q) N(0, s^2) + q N(1, s^2) and L(x) = log(1 - q + q e^{z}), z = (2x - 1) / (2 s^2),
    increasing in x; ``add``: P = N(0, s^2) and L = -log(1 - q + q e^{z}), decreasing. The line is cut
    into cells whose N-masses come with error bounds (``_log_cell_masses``), and each cell takes the
    largest e^{lambda L} on it, at the edge where L is largest: for ``add`` the first cell takes the
    supremum -log(1 - q); for ``remove`` the last, unbounded cell is integrated in closed form, since
    (1 - q + q e^z) e^{-z} falls in z: E[e^{lambda z}; x > e] for a normal x, times e^{lambda (L(e) - z(e))}.
    Computed from the densities, not from a loss grid, whose cells round each loss up to a whole cell:
    where the losses are ~q (tiny rates) that leaves the coarse steps' bound
    (``PLDAccountant._chernoff_upper``) at about 1. The losses and the sums are taken up for their rounding.
    """
    from scipy.special import log_ndtr

    reach = _LINE_REACH * sigma
    edges = np.linspace(-reach, 1.0 + reach, _LINE_CELLS + 1)
    z = (2.0 * edges - 1.0) / (2.0 * sigma * sigma)
    # The remove loss at each edge, log(e^{log(1-q)} + e^{log q + z}) (no overflow), and a bound on its rounding:
    # a few units of the operands (~q near z = 0, where the result itself is far smaller) and of the exponent
    # log q + z, weighted by its term's share p of the sum.
    with np.errstate(divide="ignore"):
        exponent = math.log(q) + z
        loss_at = np.logaddexp(math.log1p(-q) if q < 1.0 else -math.inf, exponent)
    share = np.minimum(1.0, np.exp(exponent - loss_at))
    slack = 8.0 * _UNIT * (np.abs(loss_at) + q + share * (abs(math.log(q)) + np.abs(z) + 1.0))
    up_loss, down_loss = loss_at + slack, loss_at - slack
    if direction == "remove":
        tops = up_loss  # cell i = (e_{i-1}, e_i] (cell 0 unbounded below) at its right edge; the last cell apart
        components = [(1.0 - q, 0.0), (q, 1.0)]
    else:
        tops = np.concatenate([[-math.log1p(-q) * (1.0 + 4.0 * _UNIT)], -down_loss])
        components = [(1.0, 0.0)]
    masses = [(weight, mean, *_log_cell_masses(edges, mean, sigma)) for weight, mean in components if weight > 0.0]
    out = np.empty(slopes.size)
    for k, slope in enumerate(slopes):
        logs = []
        for weight, mean, log_mass, err in masses:
            cells = log_mass + err
            terms = (cells[:-1] if direction == "remove" else cells) + slope * tops
            top = float(np.max(terms))
            logs.append(math.log(weight) + top + math.log(float(np.exp(terms - top).sum())))
            if direction == "remove":
                # x > e_n: (1 - q + q e^z) e^{-z} falls in z, so (1 - q + q e^z)^lambda <= e^{lambda (L(e_n) - z_n)} e^{lambda z};
                # lambda z = a x - lambda / (2 s^2) with a = lambda / s^2, and for x ~ N(m, s^2)
                # E[e^{a x}; x > e] = e^{a m + a^2 s^2 / 2} P(N(0, 1) > (e - m - a s^2) / s).
                a = slope / (sigma * sigma)
                tail = float(log_ndtr(-(edges[-1] - mean - a * sigma * sigma) / sigma))
                value = (slope * (float(up_loss[-1]) - float(z[-1])) - slope / (2.0 * sigma * sigma) + a * mean
                         + 0.5 * (a * sigma) ** 2 + tail)
                logs.append(math.log(weight) + value + 8.0 * _UNIT * (1.0 + abs(tail) + abs(value)))
        out[k] = float(np.logaddexp.reduce(np.array(logs))) + 4.0 * _UNIT * (edges.size + 8.0)
    return out


@functools.lru_cache(maxsize=64)
def _gaussian_line(sigma: float, q: float, direction: str, log_tail: float) -> tuple[Any, Any]:
    """The quadrature of ``_gaussian_log_mgf_estimate``: ``(log(1 + q (e^z - 1)), weights)`` on its points."""
    from scipy.special import ndtri_exp

    cut = max(log_tail, _LOG_TAIL)
    reach = -float(ndtri_exp(cut))  # P(N(0, 1) > reach) = e^cut
    low, high = -sigma * reach, sigma * reach
    if direction == "remove" and q > 0.0:
        # The component q N(1, s^2) of P: its mass beyond x is q P(N(0, 1) > (x - 1) / s).
        high = max(high, 1.0 + sigma * -float(ndtri_exp(min(cut - math.log(q), 0.0))))
    points = int(math.ceil((high - low) / sigma * 40.0)) + 1
    x = np.linspace(low, high, points)
    weight = np.exp(-0.5 * (x / sigma) ** 2)
    weight[[0, -1]] *= 0.5  # (the trapezoidal rule: where the tilted terms grow up to the cut, its ends count)
    weight /= weight.sum()
    z = (2.0 * x - 1.0) / (2.0 * sigma * sigma)
    with np.errstate(over="ignore"):
        log_ratio = np.log1p(q * np.expm1(z))  # log(1 + q (e^z - 1)): the remove loss
    log_ratio.flags.writeable = False
    weight.flags.writeable = False
    return log_ratio, weight


def _gaussian_log_mgf_estimate(
    sigma: float, q: float, direction: str, slopes: NDArray[np.float64], log_tail: float
) -> NDArray[np.float64]:
    """Estimates of log E_P[e^{lambda L}] for one Poisson-subsampled Gaussian step, its tails cut like its grids'.

    For the Chernoff guides only (not certified): the trapezoidal rule on 40 points per standard deviation, over
    the outputs x whose P-tails beyond are at least e^log_tail (the steps' own cut, ``_build_step``), against the
    base N(0, s^2): ``remove`` E_Q[(1 + q (e^z - 1))^{lambda + 1}], ``add`` E_P[(1 + q (e^z - 1))^{-lambda}], with
    z = (2x - 1) / (2 s^2). The powers minus 1 are summed (expm1, log1p), so that the result keeps its relative
    accuracy where it is ~q^2 lambda^2 (tiny rates): there the coarse steps' cells, much wider than the losses,
    inflate its variance (sigma=1.19, q=5.7e-8: 75x, and the guide's slope was 185 where the saddle point of a
    delta query at epsilon = 0.0024 lies at 15,000). Within 1e-13 relative of mpmath's quadrature where the
    tilted terms fall off before the cut, within 10 % where they grow up to it (the cut then sets the slope).
    """
    log_ratio, weight = _gaussian_line(sigma, q, direction, log_tail)
    flat = np.asarray(slopes, dtype=np.float64).ravel()
    out = np.empty(flat.size)
    for k, slope in enumerate(flat):
        power = (slope + 1.0) * log_ratio if direction == "remove" else -slope * log_ratio
        top = float(np.max(power))
        if top < 30.0:
            out[k] = math.log1p(float(np.dot(np.expm1(power), weight)))
        else:
            out[k] = top + math.log(float(np.dot(np.exp(power - top), weight)))
    return out


def _gaussian_cumulants(sigma: float, q: float, direction: str, log_tail: float) -> tuple[float, float, float]:
    """Second, third and fourth cumulants of one Poisson-subsampled Gaussian step's loss under P, its tails cut
    like its grids' (estimates: the quadrature of ``_gaussian_log_mgf_estimate``)."""
    log_ratio, weight = _gaussian_line(sigma, q, direction, log_tail)
    with np.errstate(over="ignore"):
        mass = weight * np.exp(log_ratio) if direction == "remove" else weight.copy()  # P = Q e^L (remove)
    loss = log_ratio if direction == "remove" else -log_ratio
    keep = np.isfinite(mass) & np.isfinite(loss)
    mass, loss = mass[keep], loss[keep]
    mass /= mass.sum()
    centred = loss - float(np.dot(mass, loss))
    square = centred * centred
    m2, m3, m4 = (float(np.dot(mass, x)) for x in (square, square * centred, square * square))
    return m2, m3, m4 - 3.0 * m2 * m2


def _quadrature_scope(groups: list[tuple[Any, int]]) -> bool:
    """Whether every group is a Poisson-subsampled Gaussian at a rate of at most _SPLIT_MAX_RATE and noise of at most
    _SUM_TEST_SIGMA: the histories whose delta queries may take the quadrature guides (``_gaussian_line``)."""
    return all(
        isinstance(spec, _Spec) and spec.kind == "gaussian" and 0.0 < spec.sampling_probability <= _SPLIT_MAX_RATE
        and float(spec.parameters[0]) <= _SUM_TEST_SIGMA
        for spec, _ in groups
    )


def _chernoff_factor(slope: Any) -> Any:
    """log max_{x > 0} (1 - e^{-x}) e^{-slope x} = log(slope^slope / (slope + 1)^(slope + 1)), slope > 0 (a float or
    an array): the factor by which the Chernoff bound delta(eps) <= E[e^{slope (L - eps)}] tightens ((1 - e^{-x})_+
    <= that e^{slope x} for every x; the maximum is at e^{-x} = slope / (slope + 1)). About -log(e slope) for
    large slopes."""
    if np.ndim(slope) == 0:
        return -math.log1p(slope) - slope * math.log1p(1.0 / slope)
    return -np.log1p(slope) - slope * np.log1p(1.0 / slope)


def _mixture_pair_step(sigma: float, means_p: tuple[float, ...], weights_p: tuple[float, ...],
                       means_q: tuple[float, ...], weights_q: tuple[float, ...], direction: str, d: float) -> Any:
    """Lower-bound step of ``(sum w_i N(m_i), sum w'_i N(m'_i))`` (swapped for "add") from cells of the line.

    Labelling the output by its cell's rounded loss is post-processing, so the label
    bound of :func:`dpacct._core.pld.cells_step` holds for any cells; P-masses are rounded
    down and Q-masses up by bounds on their rounding errors. No upper half.
    """
    means = np.concatenate((means_p, means_q))
    edges = np.linspace(float(means.min()) - 14.0 * sigma, float(means.max()) + 14.0 * sigma, _PAIR_CELLS - 1)

    def mixture(ms: tuple[float, ...], ws: tuple[float, ...]) -> tuple[Any, Any]:
        total, err = np.full(edges.size + 1, -np.inf), np.zeros(edges.size + 1)
        for m, w in zip(ms, ws):
            if w > 0.0:
                logs, e = _log_cell_masses(edges, m, sigma)
                total = np.logaddexp(total, math.log(w) + logs)
                err = np.maximum(err, e)
        return total, err + 8.0 * _UNIT * len(ms)

    log_p, err_p = mixture(means_p, weights_p)
    log_q, err_q = mixture(means_q, weights_q)
    if direction == "add":
        log_p, err_p, log_q, err_q = log_q, err_q, log_p, err_p
    log_p, log_q = log_p + np.log1p(-np.minimum(err_p, 0.5)), log_q + np.log1p(err_q)
    return _core.pld.cells_step(log_p, log_q, None, d, _MAX_CELLS)


# One balls-in-bins epoch: the lattice of its likelihood ratio Y (spacing _ALLOCATION_RESOLUTION sd(Y)),
# cut where E(Y - y_b)_+ <= e^_ALLOCATION_TRUNCATION (charged at +inf), FFT window tails <= e^-50 per side.
_ALLOCATION_RESOLUTION = 0.1
_ALLOCATION_TRUNCATION = math.log(1e-14)
_ALLOCATION_TAIL = -50.0
_ALLOCATION_CELLS = 2**21  # the largest FFT; the cut of Y is at most an eighth of it


@functools.lru_cache(maxsize=4)  # one holds about 11 arrays of the FFT's size: up to ~200 MB
def allocation_laws(noise_multiplier: float, steps: int) -> Any:
    """The lattice laws of one balls-in-bins epoch (``_core.pld.AllocationLaws``), cached.

    Below a noise multiplier of about 0.7 the log-normal tail is cut lower than
    ``_ALLOCATION_TRUNCATION`` asks (the +inf mass is then larger); raises ValueError
    where the window would exceed ``_ALLOCATION_CELLS`` points (many steps at a small
    noise multiplier).
    """
    return _core.pld.allocation_laws(noise_multiplier, steps, _ALLOCATION_RESOLUTION, _ALLOCATION_TRUNCATION,
                                     _ALLOCATION_TAIL, _ALLOCATION_CELLS)


_Query = TypeVar("_Query", bound=Callable[..., Any])


def _holding_memory(query: _Query) -> _Query:
    """Run ``query`` in a scope of the core's kept memory (``_core.pld.hold_memory``): its compositions reuse the
    grid-sized blocks and FFT workspace of the ones before, of any size, and the outermost scope trims them to the
    between-query limits (:func:`release_memory`) when it ends. Results do not depend on it.

    (sigma=1.19, q=5.7e-8, T=4.8e7, delta(0.00242), five grids of up to 2^22 points: 0.83 s of its 3.96 s of CPU had
    been the kernel zero-filling fresh pages.)
    """

    @functools.wraps(query)
    def scoped(*args: Any, **kwargs: Any) -> Any:
        _core.pld.hold_memory(True)
        try:
            return query(*args, **kwargs)
        finally:
            _core.pld.hold_memory(False)

    return scoped  # type: ignore[return-value]


def clear_cache() -> None:
    """Forget the steps cached across accountants (coarse guides and composite parts; see benchmarks).

    The grid-sized blocks of memory the core keeps for the next query stay (see :func:`release_memory`).
    """
    _coarse_step.cache_clear()
    _cached_step.cache_clear()
    allocation_laws.cache_clear()


def kept_memory() -> int:
    """Bytes of grid-sized memory the C++ core keeps between queries (see :func:`release_memory`)."""
    return int(_core.pld.kept_memory())


def release_memory() -> None:
    """Free the grid-sized blocks of memory the C++ core keeps between queries.

    A composition's vectors (its suffix sums, composed entries and FFT workspace) are handed to
    the next query instead of back to the system: fresh pages are zero-filled by the kernel on
    first touch, which had cost up to a quarter of a query's time. At most 64 MiB of vectors and
    two workspaces of at most 32 MiB each are kept between queries; while a query runs, up to 512 MiB
    of vectors, one larger workspace (up to 512 MiB) and the FFT plan of its last large grid are kept for
    its next compositions, and trimmed to those limits when it returns. This frees what is kept, e.g. after
    accounting in a long-running process. Results do not depend on it.
    """
    _core.pld.release_memory()


@functools.lru_cache(maxsize=64)
def _coarse_step(spec: _Spec, direction: str, log_tail: float = _NO_QUERY) -> Any:
    """The coarse step of ``spec`` (``PLDAccountant._coarse``), shared by every accountant.

    Its width is the e^-80 support over ``_COARSE_CELLS`` whatever ``log_tail``; a larger
    tail (an epsilon query's, ``PLDAccountant._query_tail``) only drops the outer cells.
    """
    size = _step_size(spec, direction, 1e-2)
    width = max(size, 2) * 1e-2
    d = max(width / _COARSE_CELLS, 1e-12)
    if size < 16:
        # The whole support is a few cells of the first build (every loss ~ q at a tiny rate and
        # a large sigma): its width is measured again on finer grids. Cells of the first build's
        # width overshot epsilon 1e3x (sigma=9.88, q=2.3e-8: 3 cells of 7e-6 around a spike of 2e-9).
        for _ in range(3):
            cells = max(_step_size(spec, direction, d), 2)
            if cells >= _COARSE_CELLS / 16:
                break
            d = max(cells * d / _COARSE_CELLS, 1e-12)
    return _build_step(spec, direction, d, log_tail)


def _step_size(spec: _Spec, direction: str, discretization: float) -> int:
    """``_build_step(spec, direction, discretization).log_upper.size``, from the loss range alone
    where the kind is a monotone pair (Gaussian, Laplace, mixture: no cells computed)."""
    if spec.kind in _SPLIT_KINDS:
        return int(_part_step(spec, direction, discretization, _NO_QUERY, size_only=True))
    return int(_build_step(spec, direction, discretization).log_upper.size)


@functools.lru_cache(maxsize=64)
def _cached_step(spec: _Spec, direction: str, discretization: float) -> Any:
    """A step built once for the several composite steps (labelled, symmetrised) that contain it."""
    return _build_step(spec, direction, discretization)


def _build_step(
    spec: _Spec, direction: str, discretization: float, log_tail: float = _NO_QUERY, shared: bool = False
) -> Any:
    """One discretised step (``_core.pld.Step``) of ``spec`` in one direction.

    ``log_tail`` bounds (log) the P- and Q-mass a query lets each step cut off beyond the clamp
    points of an unbounded loss (charged to delta): the base pair's tails are cut at
    e^max(log_tail, -80), and a subsampled pair's upper tail also where its own mass beyond is
    e^log_tail (``Subsampled`` in ``pld/monotone.hpp``). It applies to the Gaussian, Laplace and
    mixture kinds, the composite kinds keep e^-80. ``shared`` also builds the shared labels of
    ``pld/step.hpp`` where the discretisation can (the monotone pairs on grids finer than 1e-4).
    """
    q, d = spec.sampling_probability, discretization
    if spec.kind in _SPLIT_KINDS:
        return _part_step(spec, direction, d, log_tail, shared_labels=shared)
    if spec.kind == "labelled":
        # The hit count L revealed: a mixture of Poisson-subsampled Gaussian steps with sensitivity
        # 2L (upper half); the realised pair sum_L P(L) N(2L) against N(0) (lower half).
        sigma, hits, weights, tail, masses, unit = spec.parameters
        steps = [_cached_step(_Spec("gaussian", (sigma / (unit * h),), q, False), direction, d) for h in hits]
        lower = _realised_mixture(sigma, masses, unit, direction, d)
        return _core.fdp.mix_steps(steps, list(weights), tail, 0, 0.0, 0.0, [lower], [1.0])
    if spec.kind in ("truncated", "truncated_mixture"):
        # Upper half: the labelled mixture (mixture.hpp); the label "identical distributions" is an
        # atom at loss 0 (grid index 0). Lower half ("truncated"): the Poisson pair realised by the
        # others-zero datasets; ("truncated_mixture", for dpacct.samplers.truncated_poisson, which
        # takes the realised pairs apart): the mixture's own, i.e. only its discretisation error.
        components, zero_loss, *realised = spec.parameters
        parts = [(w, _cached_step(_Spec("gaussian", (s,), r, False), direction, d)) for w, s, r in components if w > 0.0]
        steps, weights = [p for _, p in parts], [w for w, _ in parts]
        if spec.kind == "truncated_mixture":
            return _core.fdp.mix_steps(steps, weights, 0.0, 0, zero_loss, 0.0, steps, weights)
        realised_sigma, realised_rate = realised
        lower = _cached_step(_Spec("gaussian", (realised_sigma,), realised_rate, False), direction, d)
        return _core.fdp.mix_steps(steps, weights, 0.0, 0, zero_loss, 0.0, [lower], [1.0])
    if spec.kind == "labelled_realised":
        sigma, masses, unit = spec.parameters
        return _realised_mixture(sigma, masses, unit, direction, d)
    if spec.kind == "mixture_pair":
        sigma, means_p, weights_p, means_q, weights_q = spec.parameters
        return _mixture_pair_step(sigma, means_p, weights_p, means_q, weights_q, direction, d)
    if spec.kind == "balls_in_bins":
        # The law of the epoch's likelihood ratio on a lattice (cpp/include/dpacct/pld/allocation.hpp).
        sigma, steps = spec.parameters
        return _core.pld.allocation_step(allocation_laws(sigma, steps), direction, d, _MAX_CELLS)
    if spec.kind == "symmetrised":
        # Upper half: the symmetrised pair of `inner`; lower half: `inner` itself in this direction
        # (replace-one realises both orders), or one realised zero-out pair per direction slot.
        inner, realised = spec.parameters
        remove, add = _cached_step(inner, "remove", d), _cached_step(inner, "add", d)
        if realised is None:
            lower = remove if direction == "remove" else add
        else:
            lower_spec, lower_direction = realised[_DIRECTIONS.index(direction)]
            lower = _cached_step(lower_spec, lower_direction, d)
        return _core.pld.symmetrised_step(remove, add, lower)
    log_p, log_q = spec.parameters
    return _core.pld.finite_step(np.asarray(log_p), np.asarray(log_q), q, direction, d, _MAX_CELLS)


class _Guide(NamedTuple):
    """A Chernoff estimate from the coarse steps: epsilon (or delta) and the optimal slope lambda."""

    value: float
    slope: float


def _measured_slope(composed: Any, epsilon: float, upper: float, step: float) -> float | None:
    """lambda, where log delta falls as -(lambda + 1) epsilon: from ``composed``'s upper bounds at
    epsilon (``upper``) and ``epsilon + step``; None where that difference says nothing."""
    if not 0.0 < upper < 1.0:
        return None
    further = float(composed.delta_bounds(np.array([epsilon + step]))[1][0])
    if not 0.0 < further < upper:
        return None
    return max((math.log(upper) - math.log(further)) / step - 1.0, 0.0)


class _DeltaMet(Exception):
    """Raised by a :class:`_DeltaProbe` whose interval met its target: ends the epsilon search feeding it."""


class _DeltaProbe:
    """Certified delta bounds at one epsilon, read off every composition an epsilon search builds.

    A delta query at ``epsilon`` is served by the grids, tilts and tail cuts that an epsilon
    query at ``delta ~ delta(epsilon)`` chooses (re-aimed grids, the split composition, smaller
    tilts where the window misses): each composition is certified for every query, so its
    delta bounds at ``epsilon`` are kept (intersected) and the search stops once they meet
    the target.
    """

    def __init__(self, epsilon: float, accuracy: float, lower: float, upper: float, irrelevant_below: float) -> None:
        self.epsilon = epsilon
        self.accuracy = accuracy
        self.lower = lower
        self.upper = upper
        self.irrelevant_below = irrelevant_below
        self.best: Any = None
        self.best_upper = math.inf  # the best composition's own upper bound
        self.best_grid: dict[str, Any] | None = None  # its _composed arguments, where a grid of the search gave it

    def met(self) -> bool:
        return self.upper - self.lower <= self.accuracy * self.upper or self.upper <= self.irrelevant_below

    def __call__(self, composed: Any, grid: dict[str, Any] | None = None) -> None:
        lo, up = composed.delta_bounds(np.array([self.epsilon]))
        # (Judged on its own upper bound, not against the interval carried in: a split composition's
        # upper bound 0.03 % below every grid's had left no composition to measure the slope on, and the
        # guide's 61 against 480 on the grid (sigma=1.17, q=3e-6, T=1.6e7, delta(0.0706)) aimed the search
        # 8x too loosely: 2.6 % wide.)
        # (A grid's labelled composition takes the place of its upper masses alone, probed just before with the same
        # upper bound: the re-runs after the search start from a grid, see _epsilon_at.)
        replaces = grid is not None and self.best_grid is None and float(up[0]) <= self.best_upper
        if float(up[0]) < self.best_upper or replaces:
            self.best, self.best_upper, self.best_grid = composed, float(up[0]), grid
        self.lower, self.upper = max(self.lower, float(lo[0])), min(self.upper, float(up[0]))
        if self.met():
            raise _DeltaMet

    def release(self) -> None:
        """Drop the best composition itself (its upper bound and grid arguments stay; :meth:`slope` then says None)."""
        self.best = None

    def slope(self) -> float | None:
        """The local slope lambda of -log delta - epsilon on the composition with the best upper bound."""
        if self.best is None:
            return None
        step = max(4.0 * float(getattr(self.best, "discretization", 0.0)), 0.01 * self.epsilon)
        return _measured_slope(self.best, self.epsilon, self.best_upper, step)


class PLDAccountant(Accountant):
    """Privacy loss distribution accountant with certified upper and lower bounds.

    Parameters
    ----------
    discretization : float, optional
        Width of the loss grid. By default it is chosen per query so that the
        gap between the bounds is about ``relative_accuracy`` times epsilon.
    relative_accuracy : float
        Target for ``(upper - lower) / epsilon`` (and for the relative gap of
        delta queries) when ``discretization`` is not given (default 0.005, in
        ``(0, 0.5]``).
    max_size : int
        Largest FFT (a power of two) the accountant may use; if a query would
        need more, the grid is coarsened (the bounds stay certified, the gap
        grows). Default ``2**22`` (about 270 MB of working memory at that
        size; typical DP-SGD queries use 2**9 to 2**15).

    Notes
    -----
    ``get_epsilon`` / ``get_delta`` return the certified upper bounds;
    :meth:`epsilon_bounds` / :meth:`delta_bounds` return ``(lower, upper)`` so the
    discretisation error is visible. Supports the Gaussian, Laplace,
    randomized-response, (epsilon, delta) black-box and mixture-of-Gaussians
    mechanisms, and Poisson subsampling of each
    (:class:`~dpacct.mechanisms.PoissonSampledMechanism`), in any heterogeneous
    history.

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
    >>> round(lower, 9), round(upper, 9)   # one step in closed form: the exact 4.377178095681...
    (4.377178096, 4.377178096)
    >>> lap = PLDAccountant().compose(LaplaceMechanism(noise_multiplier=10.0), 100)
    >>> lo, up = lap.epsilon_bounds(1e-5)   # 100 steps of 0.1-DP: basic composition says 10
    >>> 4.21 < lo <= 4.2204 <= up < 4.24    # the truth, 4.2204, inside a 0.2 % interval
    True
    """

    name = "pld"
    #: The coarsest grid width a composition may fall back to when it does not fit in max_size.
    _coarsest: float = 1e3

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
        self._steps: dict[tuple[Hashable, ...], Any] = {}
        self._composed_cache: dict[tuple[Hashable, ...], Any] = {}
        self._last_split: tuple[tuple[Hashable, ...], Any, int] | None = None  # the last split composition, its cap
        self._spans: dict[tuple[Hashable, ...], float] = {}  # window spans measured (see _composed)
        self._guides: dict[tuple[str, str, float, bool], _Guide] = {}
        self._coarse_tail = _NO_QUERY  # the tail of the coarse steps (an epsilon query cuts more)
        self._probe: _DeltaProbe | None = None  # set while an epsilon search serves a delta query
        self._fine_lines = False  # set while a delta query takes the quadrature guides (_bulk_dominated)

    def supports(self, mechanism: Mechanism) -> bool:
        """Every mechanism with a PLD discretisation (see the class notes) is supported."""
        return _spec(mechanism) is not None

    def _compose(self, mechanism: Mechanism, count: int) -> None:
        self._composed_cache.clear()
        self._last_split = None
        self._spans.clear()
        self._guides.clear()

    def step(self, *, noise_multiplier: float, sampling_probability: float, count: int = 1) -> PLDAccountant:
        """Compose ``count`` DP-SGD steps (Poisson rate ``sampling_probability``, add/remove)."""
        mechanism = PoissonSampledGaussianMechanism(
            noise_multiplier=noise_multiplier, sampling_probability=sampling_probability
        )
        return self.compose(mechanism, count)

    # -- the composed distributions ---------------------------------------------------------

    def _groups(self) -> list[tuple[_Spec, int]]:
        """Identical steps grouped over the whole history (q = 0 steps dropped: they release nothing)."""
        counts: dict[_Spec, int] = {}
        for mechanism, count in self._history:
            spec = _spec(mechanism)
            assert spec is not None  # compose() checked supports()
            if spec.sampling_probability > 0.0:
                counts[spec] = counts.get(spec, 0) + count
        return list(counts.items())

    @staticmethod
    def _directions(groups: list[tuple[_Spec, int]]) -> tuple[str, ...]:
        # Symmetric pairs have the same loss distribution in both directions.
        return ("remove",) if all(spec.symmetric for spec, _ in groups) else _DIRECTIONS

    def _step(
        self, spec: _Spec, direction: str, discretization: float, log_tail: float = _NO_QUERY, shared: bool = False
    ) -> Any:
        key = (spec, direction, discretization, log_tail, shared)
        if key not in self._steps:
            if len(self._steps) > 64:
                self._steps.clear()
            self._steps[key] = _build_step(spec, direction, discretization, log_tail, shared)
        return self._steps[key]

    def _coarse(self, spec: _Spec, direction: str) -> Any:
        """A discretisation with about ``_COARSE_CELLS`` grid points: cheap, used to choose the real grid.

        Inside an epsilon query its tails are cut as the query's steps are (``_coarse_tail``).
        """
        return _coarse_step(spec, direction, self._coarse_tail)

    def _coarse_parts(self, spec: _Spec, direction: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The finite part of the coarse step: its log-masses and losses (empty cells dropped)."""
        key = (spec, direction, "parts", self._coarse_tail)
        if key not in self._steps:
            step = self._coarse(spec, direction)
            log_mass = np.asarray(step.log_upper)
            loss = (step.upper_low + np.arange(log_mass.size)) * step.discretization
            keep = np.isfinite(log_mass)
            self._steps[key] = (log_mass[keep], loss[keep])
        return self._steps[key]  # type: ignore[no-any-return]

    def _composed(
        self, groups: list[tuple[_Spec, int]], direction: str, discretization: float, tilt: float,
        log_tail: float = _NO_QUERY, max_size: int | None = None, window_tail: float = _WINDOW_TAIL,
        thorough: bool = False, lower: bool = True, answer: float = math.inf,
    ) -> Any:
        """The composition on one grid and tilt, coarsened (still certified) when it does not fit in max_size.

        ``window_tail`` is the log of the tilted mass the FFT window may leave out per side;
        ``thorough`` spends more extended-precision sums on the FFT power's live frequencies
        (for answers that are small differences of large masses, such as delta(0));
        ``lower=False`` composes the upper masses alone (the lower bounds are then trivial);
        ``answer`` is the size of the answer the lower bound must resolve, relative to the masses its
        threshold tests compare (``_shared_labels``).
        """
        size = self._max_size if max_size is None else min(max_size, self._max_size)
        shared = self._shared_labels(groups, tilt, answer) if lower else False
        key = (direction, discretization, round(tilt, 6), log_tail, size, window_tail, thorough, lower, shared)
        if key in self._composed_cache:
            self._composed_cache[key] = self._composed_cache.pop(key)  # the most recently used last
        else:
            self._make_room(size)
            d = discretization
            staged = not (shared and self._can_share(groups, d)) and (
                self._stages(groups, direction, d, tilt, thorough, size) is not None
            )
            # The window's span in loss hardly depends on the grid: where an earlier composition
            # with this tilt and these cuts measured it, a grid too fine for `size` starts at the
            # width that fits instead of building steps of up to 2^24 cells for nothing (each
            # doubling below rebuilds them: 8-20 s per grid at sigma=0.33, q=2.8e-8, T=1.5e6).
            span = self._spans.get((direction, round(tilt, 6), log_tail, window_tail))
            # (Not where the composition goes in stages at this width: _stages has checked their windows.)
            if not staged and span is not None:
                d = max(d, 1.05 * span / size)
            elif not staged:
                # Unmeasured: the window holds about 14 standard deviations of the composed loss (its
                # tails e^-25), so a grid on which 2 of them exceed `size` points cannot hold it. (At
                # sigma=0.538, q=0.0288, T=3.8e7 a delta query's new tilt asked for 1.9e-6, 2e10 points:
                # its step of 1.1e7 cells cost 5 s before the composer said no.)
                variance = sum(c * self._coarse_cumulants(spec, direction)[0] for spec, c in groups)
                d = max(d, 2.0 * math.sqrt(variance) / size)
            while True:
                try:
                    built = self._compose_on_grid(groups, direction, d, tilt, log_tail, size, window_tail, thorough,
                                                  lower, shared)
                except ValueError as error:
                    if "increase discretization" not in str(error) or d >= self._coarsest:
                        raise
                    # Coarser: still certified, only wider. The window's span in loss hardly depends
                    # on the grid, so the composer's own count of its points says how much coarser:
                    # one step there instead of doublings that each build finer steps than needed
                    # (sigma=0.644, q=7e-6, T=5.6e7, a delta query's retilted grid: five doublings
                    # from 8.3e-7 and eleven for a boosted tilt, 9 s of step cells and windows).
                    # (Each try reports its own count: the steps' own extents make the span shrink a
                    # little slower than 1 / d, and a second, small correction follows where needed.)
                    points = _WINDOW_POINTS.search(str(error))
                    factor = 1.02 * int(points.group(1)) / size if points is not None else 2.0
                    d *= min(max(factor, 1.02), 1e6)
                    continue
                break
            self._composed_cache[key] = built
            if built.size > 1:
                self._spans[(direction, round(tilt, 6), log_tail, window_tail)] = max(
                    built.window_high - built.window_low, built.cells_high - built.cells_low
                )
        return self._composed_cache[key]

    def _make_room(self, size: int) -> None:
        """Forget the least recently used compositions until those kept and one more on ``size`` points fit in
        _KEPT_COMPOSED_BYTES.

        A composition keeps up to seven suffix sums of its length (224 MiB at 2^22 points). Kept for the whole
        query, they had set its peak memory: 1.33 GB at sigma=1.19, q=5.7e-8, T=4.8e7, delta(0.00242), five grids
        of 2^20-2^22 points. A query does not come back to them (no composition of the random sweeps' delta and
        epsilon queries was built twice); a query repeated on the same accountant finds the most recent ones.
        """
        budget = _KEPT_COMPOSED_BYTES - _KEPT_VECTORS * 8 * size
        held = sum(int(c.held_bytes) for c in self._composed_cache.values())
        while self._composed_cache and held > budget:
            oldest = next(iter(self._composed_cache))
            held -= int(self._composed_cache.pop(oldest).held_bytes)
        if 2 * _KEPT_VECTORS * 8 * size > _KEPT_COMPOSED_BYTES:
            # The last split composition too (its G on up to _LAST_TRY_SIZE points, about 160 MB): kept for a split
            # pass that comes out the same as the one before, which a whole grid this large does not come between.
            self._last_split = None

    def _compose_on_grid(
        self, groups: list[tuple[_Spec, int]], direction: str, d: float, tilt: float, log_tail: float, size: int,
        window_tail: float, thorough: bool, lower: bool, shared: bool = False,
    ) -> Any:
        """One ComposedPld whose connect-the-dots spread is that of grid ``d``: on it, or in two stages.

        In stages (``_stages``): blocks of ``B`` steps composed on a grid ``d1`` (``compose_block``,
        certified entry by entry), re-spread onto ``r d1`` (``coarsen``) and composed there with the
        remaining ``T mod B`` steps, also re-spread. Each block adds at most ``(r d1)^2 / 4`` of loss
        variance, so ``d1 = d / sqrt(1 + r^2 / B)`` keeps the total at the one-grid ``T d^2 / 4``.
        With ``shared`` (``_shared_labels``) on one grid: the blocks' round-off, charged entry by entry,
        would swamp the small differences that the shared labels are there to resolve.
        """
        can_share = shared and self._can_share(groups, d)
        staging = None if can_share else self._stages(groups, direction, d, tilt, thorough, size)
        if staging is None:
            steps = [self._step(spec, direction, d, log_tail, shared) for spec, _ in groups]
            return _core.pld.ComposedPld(
                steps, [float(c) for _, c in groups], tilt, size, window_tail, thorough, lower, shared
            )
        block_steps, ratio = staging
        spec, count = groups[0]
        fine = d / math.sqrt(1.0 + ratio * ratio / block_steps)
        step = self._step(spec, direction, fine, log_tail)
        block = _core.pld.compose_block(step, float(block_steps), tilt, size, min(window_tail, _STAGE_WINDOW_TAIL))
        blocks, rest = divmod(count, block_steps)
        parts = [_core.pld.coarsen(block, ratio), _core.pld.coarsen(step, ratio)]
        return _core.pld.ComposedPld(parts, [float(blocks), float(rest)], tilt, size, window_tail, thorough, lower)

    @staticmethod
    def _can_share(groups: list[tuple[_Spec, int]], d: float) -> bool:
        """Whether every step can build shared labels on grid ``d`` (the monotone pairs, finer than _SHARED_GRID)."""
        return d < _SHARED_GRID and all(isinstance(spec, _Spec) and spec.kind in _SPLIT_KINDS for spec, _ in groups)

    def _near_normal(self, groups: list[tuple[_Spec, int]], direction: str) -> bool:
        """Whether the composed loss's skewness and excess kurtosis (from the coarse steps' cumulants) are
        at most _STAGE_SHAPE."""
        second = third = fourth = 0.0
        for spec, count in groups:
            k2, k3, k4 = self._coarse_cumulants(spec, direction)
            second, third, fourth = second + count * k2, third + count * k3, fourth + count * k4
        if not second > 0.0:
            return False
        return abs(third) <= _STAGE_SHAPE * second**1.5 and abs(fourth) <= _STAGE_SHAPE * second**2

    def _shared_labels(self, groups: list[tuple[_Spec, int]], tilt: float, answer: float) -> bool:
        """Whether a composition's lower bound takes the shared labels (step.hpp) as well.

        The interval labels' tests take each label's P-mass low and Q-mass high (about _MASS_WIDTH
        relative each), T times over, in a test that compares masses M to a delta far below them: a
        relative error of about T x _MASS_WIDTH x M / delta. Near the Gaussian limit M / delta is about
        the tilt lambda (the best test's delta is about 1/lambda of the P-mass it compares); where the
        answer itself is tiny (epsilon well below the composed loss's spread, or delta(0), the total
        variation distance) the tests compare masses near 1/2 and the error is about T x _MASS_WIDTH /
        ``answer`` of the answer (epsilon, or delta): at sigma=7.2, q=5e-8, T=2.9e7 measured 1.1 times
        that on delta(0) ~ 1.5e-5 (4.4 %), and 2.2 times on the epsilon at delta = 1.3e-5 (epsilon ~ 4.0e-6:
        its lower bound was 32 % low). There the shared labels go in once that is a tenth of the accuracy
        target.
        """
        steps_in_all = float(sum(c for _, c in groups))
        if steps_in_all * tilt * _MASS_WIDTH > _SHARED_FROM * self._relative_accuracy:
            return True
        return answer > 0.0 and steps_in_all * _MASS_WIDTH / answer > _SHARED_ANSWER * self._relative_accuracy

    def _stages(
        self, groups: list[tuple[_Spec, int]], direction: str, d: float, tilt: float, thorough: bool, size: int
    ) -> tuple[int, int] | None:
        """``(B, r)`` for a composition in stages, or None for one grid.

        Stages pay where the one-grid window is long (at least ``_STAGE_FROM`` points, estimated from
        the coarse step's variance) because many steps spread it: the blocks' windows shrink by
        ``sqrt(T / B)`` and the whole one by ``r``; ``r = (T / 2)^(1/4)`` balances the two (where one grid
        of width ``d`` would not fit in ``size``, ``_beyond_ratio``'s r fits both stages instead). Only where
        the composed loss is near normal: there the grid's error is the spread, second order in the
        width (``_grid``); where a few rare losses set epsilon it is first order, and the blocks'
        coarser grid would widen it. Not where the lower bound is a small difference of large masses,
        which the blocks' round-off charges (one per entry) would swamp: ``thorough`` compositions, and
        tilts above ``_STAGE_TILT``. (Near the Gaussian limit the slope is ``lambda = eps / V + 1/2`` and
        the best test's delta is about ``1 / lambda`` of the P-mass it compares, so the tilt bounds the
        relative precision the labels need: at sigma=9.88, q=2.3e-8, T=7.6e6, lambda ~ 2e5, and in
        stages the lower bound fell from 8.04e-6 to 6.03e-6.)
        """
        if thorough or tilt > _STAGE_TILT or self._discretization is not None or len(groups) != 1:
            return None
        spec, count = groups[0]
        if count < 1024:
            return None
        ratio = 1 << int(math.floor(math.log2((count / 2.0) ** 0.25)))
        if ratio < 4:
            return None
        if not self._near_normal(groups, direction):
            return None
        total = count * self._coarse_cumulants(spec, direction)[0]
        window = 16.0 * math.sqrt(total)
        coarse = self._coarse(spec, direction)
        if window / d < _STAGE_FROM:
            return None
        if window / d > size:
            # One grid would not fit: stages at the requested width, with r chosen so that both of their
            # windows fit within _STAGE_BEYOND points at the least FFT cost; elsewhere the caller
            # coarsens the one grid first. (sigma=4.41, q=0.5, T=7.1e7, delta(4.6e5): the one grid,
            # coarsened 230x to fit and staged there, left delta 88 % wide.)
            found = _beyond_ratio(d, count, self._coarse_cumulants(spec, direction)[0],
                                  coarse.log_upper.size * float(coarse.discretization), min(_STAGE_BEYOND, size))
            if found is None:
                return None
            ratio = found
        if coarse.log_upper.size * float(coarse.discretization) > _STAGE_SUPPORT * window:
            return None
        return 4 * ratio * ratio, ratio

    # -- guides: Chernoff estimates from the coarse steps -----------------------------------

    def _cumulant(self, groups: list[tuple[_Spec, int]], direction: str) -> Any:
        """``K(lambda) = sum_g count_g log E[e^{lambda L_g}]`` over the finite part of the coarse steps.

        The returned function takes a float or an array of slopes.
        """
        return _cumulant_of([(float(count), *self._coarse_parts(spec, direction)) for spec, count in groups])

    def _estimated_cumulant(self, groups: list[tuple[_Spec, int]], direction: str) -> Any:
        """``_cumulant`` for the guides' search: the same sums by Horner's rule on the coarse grid (no
        exponential per cell, about five times faster per evaluation), as estimates (the certified uses take
        ``_cumulant``).

        Poisson-subsampled Gaussian groups whose coarse cells are far wider than their losses (the coarse
        step's loss variance over ``_GUIDE_INFLATION`` times the step's own) take the quadrature of
        ``_gaussian_log_mgf_estimate`` instead, their tails cut as the coarse steps' are.
        """
        parts, lines, rest = [], [], []
        for spec, count in groups:
            if self._fine_guide_line(spec, direction):
                lines.append((float(count), spec))
                continue
            key = (spec, direction, "power sums", self._coarse_tail)
            if key not in self._steps:
                self._steps[key] = _power_sum_part(self._coarse(spec, direction))
            parts.append((float(count), self._steps[key]))
            rest.append((spec, count))
        if not lines:
            return _estimated_cumulant_of(parts, lambda: self._cumulant(groups, direction))
        coarse = _estimated_cumulant_of(parts, lambda: self._cumulant(rest, direction)) if parts else None
        tail = self._coarse_tail

        def cumulant(slope: Any) -> Any:
            slopes = np.asarray(slope, dtype=np.float64)
            total = np.zeros(slopes.size)
            for count, spec in lines:
                sigma = float(spec.parameters[0])
                total += count * _gaussian_log_mgf_estimate(sigma, spec.sampling_probability, direction, slopes, tail)
            if coarse is not None:
                total += np.asarray(coarse(slopes.reshape(-1)), dtype=np.float64)
            return float(total[0]) if slopes.ndim == 0 else total.reshape(slopes.shape)

        return cumulant

    def _bulk_dominated(self, groups: list[tuple[_Spec, int]], epsilon: float) -> bool:
        """Whether a delta query at ``epsilon > 0`` takes the quadrature guides (``_fine_guide_line``).

        Only Poisson-subsampled Gaussian histories at rates up to _SPLIT_MAX_RATE and noise up to
        _SUM_TEST_SIGMA, and only where delta is the composed bulk's: the steps whose own loss reaches
        max(eps - 4 mu, eps / 2) (mu^2 the composed loss variance) carry under 1e-3 of the Gaussian limit's
        delta(eps) (mu-GDP, Dong, Roth and Su 2019, arXiv:1905.02383, Corollary 2.13). There the guides'
        slope and variance, from the coarse cells (far wider than the losses), were off by 36-75x
        (sigma=1.06, q=3e-7, T=3.8e7, delta(0.015): 6.9 % -> 0.47 %). Where a single hit's tail sets delta
        (sigma=0.644, q=7e-6, T=5.6e7, delta(1.64): one hit's loss passes 1.6 with probability 1.2e-12 in
        all, the limit's delta is ~1e-22) the split passes that follow the coarse guides serve better (0.48 %
        against 2.2 %).
        """
        from scipy.special import log_ndtr

        if not (epsilon > 0.0 and _quadrature_scope(groups)):
            return False
        variance = sum(
            count * _gaussian_cumulants(float(spec.parameters[0]), spec.sampling_probability, "remove", _NO_QUERY)[0]
            for spec, count in groups
        )
        if not variance > 0.0:
            return False
        mu = math.sqrt(variance)
        a, b = -epsilon / mu + mu / 2.0, -epsilon / mu - mu / 2.0
        gap = epsilon + float(log_ndtr(b)) - float(log_ndtr(a))
        if not gap < 0.0:
            return False
        log_limit = float(log_ndtr(a)) + math.log(-math.expm1(gap))
        reach = max(epsilon - 4.0 * mu, 0.5 * epsilon)
        rare = []
        for spec, count in groups:
            sigma, q = float(spec.parameters[0]), spec.sampling_probability
            # One step's remove loss log(1 + q (e^z - 1)) reaches `reach` from z = log(1 + (e^reach - 1) / q),
            # x = s^2 z + 1/2, where the P-mass beyond is at most P(N(0, s^2) > x) + q P(N(1, s^2) > x).
            # (In logs: e^reach overflows where epsilon is large, as at sigma <= 0.2.)
            log_excess = reach + math.log(-math.expm1(-reach))  # log(e^reach - 1), reach > 0
            z = float(np.logaddexp(0.0, log_excess - math.log(q)))
            x = sigma * sigma * z + 0.5
            beyond = np.logaddexp(log_ndtr(-x / sigma), math.log(q) + log_ndtr((1.0 - x) / sigma))
            rare.append(math.log(count) + float(beyond))
        return float(np.logaddexp.reduce(np.array(rare))) < log_limit - math.log(1e3)

    def _fine_guide_line(self, spec: _Spec, direction: str) -> bool:
        """Whether the guides and the loss cumulants take ``spec``'s quadrature (``_gaussian_log_mgf_estimate``,
        ``_gaussian_cumulants``) instead of the coarse step: in a delta query that _bulk_dominated admits, a
        Poisson-subsampled Gaussian at a rate of at most _SPLIT_MAX_RATE whose coarse cells inflate its loss
        variance more than _GUIDE_INFLATION times."""
        if not (self._fine_lines and isinstance(spec, _Spec) and spec.kind == "gaussian"
                and 0.0 < spec.sampling_probability <= _SPLIT_MAX_RATE):
            return False
        key = (spec, direction, "fine line", self._coarse_tail)
        if key not in self._steps:
            sigma, q = float(spec.parameters[0]), spec.sampling_probability
            own = q * q * math.expm1(min(1.0 / (sigma * sigma), 700.0))  # the loss variance at small q
            coarse = _loss_cumulants(*self._coarse_parts(spec, direction))[0]
            self._steps[key] = coarse > _GUIDE_INFLATION * own
        return bool(self._steps[key])

    def _guide(self, groups: list[tuple[_Spec, int]], direction: str, kind: str, value: float) -> _Guide:
        """The Chernoff guide for an epsilon (``kind="epsilon"``, at delta ``value``) or a delta query, cached."""
        key = (direction, kind, value, self._fine_lines)
        if key not in self._guides:
            cumulant = self._estimated_cumulant(groups, direction)
            if kind == "epsilon":
                self._guides[key] = _minimise(lambda s: (cumulant(s) - math.log(value)) / s, _GUIDE_SLOPE)
            else:
                guide = _minimise(lambda s: cumulant(s) - s * value, _GUIDE_SLOPE, log_scale=True)
                self._guides[key] = _Guide(math.exp(min(guide.value, 0.0)), guide.slope)
        return self._guides[key]

    def _guide_epsilon(self, groups: list[tuple[_Spec, int]], direction: str, delta: float) -> _Guide:
        """Chernoff: epsilon ~ min over lambda of (K(lambda) - log delta) / lambda."""
        return self._guide(groups, direction, "epsilon", delta)

    def _guide_delta(self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float) -> _Guide:
        """Chernoff: log delta ~ min over lambda of K(lambda) - lambda epsilon."""
        return self._guide(groups, direction, "delta", epsilon)

    def _fine_guide(self, groups: list[tuple[_Spec, int]], direction: str, delta: float, discretization: float) -> _Guide:
        """The Chernoff guide of an epsilon query from the steps of one grid (not the coarse ones).

        Slopes up to 1e12: where every loss is tiny (~q) the slope that reaches delta is ~1/q.
        """
        log_tail = self._query_tail(groups, delta)
        steps = [(float(count), self._step(spec, direction, discretization, log_tail)) for spec, count in groups]

        def exact() -> Any:
            parts = []
            for count, step in steps:
                log_mass = np.asarray(step.log_upper)
                loss = (step.upper_low + np.arange(log_mass.size)) * step.discretization
                keep = np.isfinite(log_mass)
                parts.append((count, log_mass[keep], loss[keep]))
            return _cumulant_of(parts)

        cumulant = _estimated_cumulant_of([(count, _power_sum_part(step)) for count, step in steps], exact)
        return _minimise(lambda s: (cumulant(s) - math.log(delta)) / s, _GUIDE_SLOPE)

    def _gaussian_chernoff(self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float) -> float:
        """A certified upper bound on delta(epsilon) of Poisson-subsampled Gaussian steps, from their exact
        moment generating functions (``_gaussian_log_mgf``): (1 - e^{eps - L})_+ <= c e^{lambda (L - eps)} (c of
        ``_chernoff_factor``), so delta <= c exp(sum_t log E[e^{lambda L_t}] - lambda eps) for every lambda > 0,
        minimised over a geometric set of slopes. 1 where another kind is in the history.

        At tiny rates it sees what the coarse steps cannot: sigma=0.578, q=2e-8, T=8.5e6, the add direction
        at epsilon = 0.0194, where each loss is at most -log(1 - q) ~ 2e-8 and their sum exceeds epsilon
        only by a large deviation (the coarse bound 0.52; the grids and the epsilon search took 14 s for
        1.7e-13; this bound is far below that).
        """
        if not all(isinstance(spec, _Spec) and spec.kind == "gaussian" and spec.sampling_probability < 1.0
                   for spec, _ in groups):
            return 1.0  # (q = 1: the add loss is unbounded above, and the closed forms serve a Gaussian)
        parts = [(float(spec.parameters[0]), spec.sampling_probability, float(count)) for spec, count in groups]

        def exponents(slopes: NDArray[np.float64]) -> NDArray[np.float64]:
            # sum_t log M_t(lambda) - lambda eps, each product and the difference rounded up (8 u of their sizes).
            logs, sizes = np.zeros(slopes.size), slopes * epsilon
            for sigma, q, count in parts:
                log_mgf = count * _gaussian_log_mgf(sigma, q, direction, slopes)
                logs, sizes = logs + log_mgf, sizes + np.abs(log_mgf) + count
            # The factor of _chernoff_factor, (1 - e^{-x})_+ <= c e^{slope x}, and its rounding (a few units).
            factor = np.asarray(_chernoff_factor(slopes), dtype=np.float64)
            logs = logs + factor
            return logs - slopes * epsilon + 8.0 * _UNIT * (sizes + np.abs(logs) + 2.0 * (np.abs(factor) + 2.0))

        slopes = np.geomspace(1e-3, 1e9, 25)
        values = exponents(slopes)
        best = int(np.argmin(values))
        fine = np.geomspace(slopes[max(best - 1, 0)], slopes[min(best + 1, slopes.size - 1)], 9)
        value = min(float(values[best]), float(np.min(exponents(fine))))
        return min(1.0, max(math.exp(min(value, 0.0)), _TINIEST))

    def _chernoff_upper(self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float) -> float:
        """A certified upper bound on delta(epsilon) from the coarse steps.

        (1 - e^{eps - L})_+ <= c e^{lambda (L - eps)} for lambda > 0 on the finite part (c =
        lambda^lambda / (lambda + 1)^(lambda + 1), about 1 / (e lambda): ``_chernoff_factor``), and the
        +inf mass is at most sum_t p_inf. The coarse steps are pessimistic stand-ins (mean-
        preserving spreads of e^{-L}, which raise E[e^{lambda L}] = E[(e^{-L})^{-lambda}] by
        Jensen, and upward moves), up to ``loss_slack`` per step, taken off epsilon. The
        margin covers the rounding: each log-sum-exp over n terms of size at most v errs by
        less than 8 u (n + 2 + v), multiplied by the step count.
        """
        guide = self._guide_delta(groups, direction, epsilon)
        slope = guide.slope
        if not (slope > 0.0 and math.isfinite(slope)):
            return 1.0
        steps = [(self._coarse(spec, direction), count) for spec, count in groups]
        shifted = epsilon - sum(count * step.loss_slack for step, count in steps)
        with np.errstate(over="ignore"):
            log_chernoff = self._cumulant(groups, direction)(slope) - slope * shifted
        infinite = float(sum(count * step.infinity_upper for step, count in steps))
        if not math.isfinite(log_chernoff):
            return 1.0
        # (1 - e^{-x})_+ <= c e^{slope x} with c = slope^slope / (slope + 1)^(slope + 1) (_chernoff_factor).
        factor = _chernoff_factor(slope)
        log_chernoff += factor
        margin = 8.0 * _UNIT * (abs(slope * shifted) + 1.0 + 2.0 * (abs(factor) + 2.0))
        for step, count in steps:
            log_mass = np.asarray(step.log_upper)
            finite = np.isfinite(log_mass)
            loss = (step.upper_low + np.nonzero(finite)[0]) * step.discretization
            largest = float(np.max(np.abs(log_mass[finite] + slope * loss))) if loss.size else 0.0
            margin += 8.0 * _UNIT * count * (log_mass.size + 2.0 + largest)
        return min(1.0, infinite * (1.0 + 1e-9) + math.exp(min(log_chernoff + margin, 0.0)))

    @staticmethod
    def _query_tail(groups: list[tuple[_Spec, int]], delta: float) -> float:
        """The log tail mass each step may cut off in an epsilon query at ``delta``.

        The cut mass goes to loss +inf and raises the composed delta by at most
        ``T e^tail``; ``1e-4 delta / T`` of it moves epsilon by about 1e-4 / (lambda + 1)
        relative, far inside the accuracy target, and it shortens the steps (a Gaussian
        cut at e^-28 rather than e^-80 spans about half the standard deviations). At most
        e^-25; the base pairs' tails are cut at e^-80 at least (``_build_step``).
        """
        steps = float(sum(c for _, c in groups))
        return min(math.log(max(1e-4 * delta / max(steps, 1.0), 1e-300)), _QUERY_TAIL_MAX)

    @staticmethod
    def _tilt(slope: float, delta_scale: float) -> float:
        """The tilt for a query whose Chernoff slope is ``slope`` around delta ~ ``delta_scale``.

        Tilting by the slope itself would put O(1) tilted mass at the queried
        epsilon; ``c < 1`` of it leaves about ``delta^(1 - c)`` there while the
        tilted tails (and so the FFT window) stay much shorter.
        ``c = max(1/2, 1 - 3 / log10(1/delta))`` keeps that mass >= 1e-3, far
        above the FFT round-off (bounded along the composed spectrum), down to the
        smallest deltas: at delta = 1e-14 (sigma=1, q=1e-3, T=1e4) the interval is
        0.26 % wide, where keeping only 1e-6 left it 6.7 % wide.
        """
        log10_inverse = -math.log10(min(max(delta_scale, 1e-300), 0.1))
        strength = max(_TILT_STRENGTH, 1.0 - 3.0 / log10_inverse)
        return strength * max(slope, 0.0) if math.isfinite(slope) else 0.0

    def _grid(
        self, groups: list[tuple[_Spec, int]], direction: str, allowed: float, epsilon: float | None = None,
        cap: float | None = None,
    ) -> float:
        """The grid width for an epsilon error of about ``allowed`` (see the module notes).

        With the query's ``epsilon`` the width follows the measured error model
        ``gap ~ k T D^2 (epsilon / (2 V) + 1/4)``, ``V`` the variance of the composed loss
        (near the Gaussian limit, see ``_near_gaussian``; elsewhere the older rule above it):
        the connect-the-dots spread adds at most ``D^2 / 4`` of variance per step, and
        epsilon ~ V / 2 + z sqrt(V) (the Gaussian limit) moves by ``epsilon / (2 V) + 1/4``
        per unit of variance. ``k`` was measured at 0.04-0.47 on the bench grid and the
        corners of ``bench/pld_regimes.py`` (``bench/pld_grid_model.py``); with 0.45 and
        the gap aimed at 0.85 of the target, the first grid meets the target up to k = 0.53
        and the refinement in the callers is the fallback. ``cap`` bounds the width before the
        cell budget's floor.
        """
        if self._discretization is not None:
            return self._discretization
        steps = float(sum(c for _, c in groups))
        spread = sum(c * self._coarse(spec, direction).mean_abs_loss for spec, c in groups)
        width = _SQRT_SCALE * math.sqrt(allowed / steps)
        if spread > 0.0:
            width = min(width, _LINEAR_SCALE * allowed / spread)
        if epsilon is not None and math.isfinite(epsilon) and epsilon > 0.0:
            cumulants = [(c, self._coarse_cumulants(spec, direction)) for spec, c in groups]
            variance = sum(c * k[0] for c, k in cumulants)
            top = sum(c * float(self._coarse_parts(spec, direction)[1].max(initial=0.0)) for spec, c in groups)
            if variance > 0.0 and self._near_gaussian(cumulants, variance, epsilon, top):
                sensitivity = epsilon / (2.0 * variance) + 0.25
                width = math.sqrt(_GAP_TARGET * allowed / (_GAP_CONSTANT * steps * sensitivity))
        if cap is not None:
            width = min(width, cap)
        # No finer than the cell budget of the widest step allows.
        widest = max(
            float(self._coarse(spec, direction).log_upper.size * self._coarse(spec, direction).discretization)
            for spec, _ in groups
        )
        return max(width, widest / (_MAX_CELLS / 4), _MIN_DISCRETIZATION)

    def _log_delta_slope(self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, slope: float) -> float:
        """How fast -log delta grows with epsilon near ``epsilon``, for the Chernoff slope ``slope``.

        ``slope + 1`` in general (the Q-side rate, at least the P-side one). Near the Gaussian limit
        (``_near_gaussian``), with V the composed loss's variance, a mu-GDP pair (mu^2 = V, Dong, Roth
        and Su 2019, arXiv:1905.02383, Corollary 2.13) has delta = Phi(-a) - e^eps Phi(-a - mu),
        a = eps / mu - mu / 2, whose log falls at e^eps Phi(-a - mu) / delta, about (a + 1 / a) / mu
        for a >= 1 and 0.8 / mu near a = 0, while the Chernoff slope is a / mu: ``slope + 1 / sqrt(V)``
        covers both. Where V is large that is far below ``slope + 1`` (sigma=2.21, q=0.63, T=2.2e6,
        delta(9.4e4): slope 0.015, sqrt(V) = 436), and the grids were aimed 58x too strictly.
        """
        if slope > 0.0 and math.isfinite(slope) and 0.0 < epsilon < math.inf:
            cumulants = [(c, self._coarse_cumulants(spec, direction)) for spec, c in groups]
            variance = sum(c * k[0] for c, k in cumulants)
            top = sum(c * float(self._coarse_parts(spec, direction)[1].max(initial=0.0)) for spec, c in groups)
            if variance > 1.0 and self._near_gaussian(cumulants, variance, epsilon, top):
                return slope + 1.0 / math.sqrt(variance)
        return max(slope, 0.0) + 1.0

    @staticmethod
    def _near_gaussian(
        cumulants: list[tuple[int, tuple[float, float, float]]], variance: float, epsilon: float, top: float
    ) -> bool:
        """Whether the composed loss is close enough to normal for the grid's error model.

        Skewness and excess kurtosis at most 0.5 (from the steps' cumulants; about one
        expected hit at a tiny rate gives 1 and 1, the bench grid at most 0.15 and 0.05),
        ``(epsilon - V/2) / sqrt(V)``, the normal quantile of delta there, at most 10, and
        epsilon at least 3 standard deviations below the largest finite composed loss
        ``top``. Elsewhere (tiny q, small sigma, few steps; bounded losses such as
        Laplace's queried near their largest value) a few rare or extreme losses set
        epsilon, the error there is first order in the grid width, and the variance says
        little about it.
        """
        skew = sum(c * k[1] for c, k in cumulants) / variance**1.5
        kurtosis = sum(c * k[2] for c, k in cumulants) / variance**2
        scale = math.sqrt(variance)
        quantile = (epsilon - 0.5 * variance) / scale
        inside = top - epsilon >= 3.0 * scale
        return abs(skew) <= 0.5 and abs(kurtosis) <= 0.5 and quantile <= _GAUSSIAN_QUANTILE and inside

    def _coarse_cumulants(self, spec: _Spec, direction: str) -> tuple[float, float, float]:
        """Second, third and fourth cumulants of one step's finite loss under P, from the coarse step."""
        key = (spec, direction, "cumulants", self._coarse_tail, self._fine_lines)
        if key not in self._steps:
            if self._fine_guide_line(spec, direction):
                # (The coarse cells, far wider than the losses at a tiny rate, inflate the variance: sigma=1.06,
                # q=3e-7, T=3.8e7, delta(0.015) ~ 3.5e-15 took its grids' width and the search's accuracy from a
                # variance 36x too large, and left 6.9 % in 2.8 s; from these, 0.47 %.)
                self._steps[key] = _gaussian_cumulants(
                    float(spec.parameters[0]), spec.sampling_probability, direction, self._coarse_tail
                )
            else:
                self._steps[key] = _loss_cumulants(*self._coarse_parts(spec, direction))
        return self._steps[key]  # type: ignore[no-any-return]

    # -- composition by the number of rare steps (tiny sampling rates) ----------------------

    def _split_kinds_apply(self, groups: list[tuple[_Spec, int]]) -> bool:
        """Whether the split composition can take the history at all: one group of its kinds, at a rate of at
        most _SPLIT_MAX_RATE, with no grid given (see _split_applies for where it is used by default)."""
        if self._discretization is not None or len(groups) != 1:
            return False
        spec, count = groups[0]
        return (
            isinstance(spec, _Spec) and spec.kind in _SPLIT_KINDS and count >= 2
            and spec.sampling_probability <= _SPLIT_MAX_RATE and not _large_noise(spec)
        )

    def _split_applies(self, groups: list[tuple[_Spec, int]]) -> bool:
        if self._discretization is not None or len(groups) != 1:
            return False
        spec, count = groups[0]
        if not isinstance(spec, _Spec) or spec.kind not in _SPLIT_KINDS or count < 2:
            return False
        q = spec.sampling_probability
        if _large_noise(spec):
            return False
        # Tiny sampling rates with few expected hits: where one tilt cannot serve the whole step.
        # Also any rate below 1 with at most one expected hit in all (few steps): there the tail of
        # a single hit sets a small delta (sigma=1.21, q=6.45e-4, T=23, delta=1.6e-13: the whole
        # grid stops at 14 %, the split composition gives 0.5 %). Above 1e-6 the split only runs
        # where the whole grid misses its target, and the two certified answers are intersected.
        return (q <= _SPLIT_MAX_RATE and count * q <= _SPLIT_MAX_HITS) or (q < 1.0 and count * q <= 1.0)

    def _split_composed(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, delta: float,
        refine: bool = False, allowed: float | None = None, width_cap: float | None = None,
        max_size: int | None = None, range_cap: float = _SPLIT_RANGE, staged: bool = False, one_stage: bool = False,
    ) -> Any:
        """A SplitComposedPld tuned for a query near ``(epsilon, delta)`` (see ``pld/split.hpp``).

        With ``refine`` the fine grid is chosen from the spread the discretisation adds to the
        small part (``_refine_split``); without it from the older rule (cheap: for first passes
        whose only job is to find where epsilon lies). ``range_cap``: the most e-folds M's tilt may
        give its far rare losses (see below). ``staged``: the rare grid's width in fine cells is
        rounded up so that G can go in stages (``_stage_ratio``), not left to rounding. ``one_stage``: G in one
        stage whatever the ratio (a ratio left to rounding can still divide by a power of two that stages allow).
        """
        spec, count = groups[0]
        steps = float(count)
        if allowed is None:
            allowed = self._relative_accuracy * epsilon
        allowed = max(allowed, 1e-12)
        fine = self._grid(groups, direction, allowed)
        if width_cap is not None:
            fine = min(fine, width_cap)
        # The rare part's grid: its spread moves epsilon by first order in the width, and
        # 4 allowed (2 % of epsilon at the default accuracy) keeps that within the target
        # (sigma=0.5, q=1e-7, T=1e7: 0.63 % wide at 5 %, 0.44 % at 2 %); first passes use 10.
        coarse = max(fine, min((4.0 if refine else 10.0) * allowed, 2e-3))
        ratio = _stage_ratio(round(coarse / fine)) if staged else max(1, round(coarse / fine))
        coarse = ratio * fine
        # The cut: the smallest tau (a coarse grid point) leaving about _SPLIT_RARE rare steps in all.
        step = self._coarse(spec, direction)
        loss = (step.upper_low + np.arange(step.log_upper.size)) * step.discretization
        mass = np.exp(step.log_upper)
        order = np.argsort(-np.abs(loss))
        tails = np.cumsum(mass[order])  # P-mass at |loss| >= |loss[order[i]]|
        beyond = np.abs(loss[order])[tails * steps > _SPLIT_RARE]
        tau = float(beyond[0]) if beyond.size else coarse
        tau_index = max(1, math.ceil(tau / coarse))
        # Each step's tails are cut where the query cannot see them (mass charged, as in
        # _query_tail): the rare part then spans fewer losses, which lets M take the tilt
        # the queried delta needs (sigma=0.8, q=1e-4, T=1e4, delta(0.5): 8.5 % -> 1.4 % wide).
        log_tail = self._query_tail(groups, delta)
        small, rare = _split_step(spec, direction, fine, ratio, tau_index, log_tail)
        if refine:
            small, rare, ratio, tau_index = self._refine_split(
                spec, direction, steps, epsilon, allowed, small, rare, ratio, tau_index, log_tail, staged
            )
            coarse = float(rare.discretization)
        log_small = float(np.logaddexp.reduce(small.log_upper))
        log_rare = float(np.logaddexp.reduce(rare.log_upper)) if rare.log_upper.size else -math.inf
        rate = math.exp(log_rare - np.logaddexp(log_small, log_rare)) if log_rare > -math.inf else 0.0
        rare_max = _binomial_tail_count(steps, rate, 1e-4 * delta)
        tau_loss = tau_index * coarse
        tilt = min(math.log(1.0 / delta) / max(epsilon, 1e-12), 20.0 / tau_loss)
        # The rare losses beyond which the mass on either side, T times over, is below 5e-5 delta go to +inf
        # (C++'s rare cuts): the steps themselves end where the subsampled pair has e^log_tail left above
        # (sigma=0.614, q=9.4e-8, T=4.8e7, delta=8.4e-15: losses up to 0.9, where the base pair's e^log_tail
        # reached 2.9), but below only where the base pair has, and the span left sets M's tilt below.
        losses = (rare.upper_low + np.arange(rare.log_upper.size)) * coarse
        cut_low, cut_high = _rare_cuts(losses, np.asarray(rare.log_upper), steps, 5e-5 * delta)
        kept = losses[(losses >= cut_low) & (losses <= cut_high)]
        rare_top = float(np.max(np.abs(kept))) if kept.size else float(np.max(np.abs(losses)))
        # M's tilt lifts the queried delta over M's round-off but multiplies its far rare losses
        # by e^{rare_tilt rare_top}: that range is kept to e^30 at delta >= 1e-8 and widened to
        # e^45 (``range_cap``) for the tiniest deltas (measured on bench/pld_regimes.py: sigma=0.8,
        # q=1e-4, T=1e4, delta(2) ~ 1.3e-17 is 64 % wide at e^30 and 1.9 % at e^45 (0.55 % now, 1.4 %
        # at e^60), while sigma=0.5, q=1e-7, T=1e7 at delta=1e-6 goes from 0.47 % to 0.59 %).
        dynamic_range = min(max(1.7 * math.log(1.0 / delta), 30.0), range_cap)
        rare_tilt = min(tilt, dynamic_range / max(rare_top, 1e-12))
        size = self._max_size if max_size is None else min(max_size, self._max_size)
        block_steps, g_ratio = (0, 1) if one_stage else _split_stages(small, steps - min(rare_max, steps), ratio, tilt)
        # M also at the query's tilt and a tenth below the one that puts M's own tilted mass at epsilon
        # (_m_saddle_tilt), each where not within 10 % of one built (C++ caps them where their weights
        # across G's window would overflow); each bound takes the best. No one tilt serves: with few hits at
        # a tiny delta the query's is the best (sigma=0.614, q=9.4e-8, T=4.8e7, epsilon(8.4e-15), the add
        # direction: upper bound 0.398 at the range's 15.3, 0.068 at 100), with many hits the saddle's
        # (sigma=0.644, q=7e-6, T=5.6e7, 28 rare steps, saddle 10.3: the same [1.6416, 1.6423] from 9 to
        # 10.5, nothing certified from 11.3, where M's tilted mass leaves epsilon for the far hits, e^32
        # above it; the query's is 17.3). The tenth keeps it off that edge.
        saddle = 0.9 * _m_saddle_tilt(small, rare, steps, min(rare_max, steps), epsilon, tilt)
        # A pass that comes out the same as the one before takes the one built: the last try after a second
        # refined pass aimed at the same epsilon (sigma=0.614, q=9.4e-8, T=4.8e7, epsilon(8.4e-15): 0.37 s).
        # max_size only caps the FFTs, which grow from 2 to what the parts need: a smaller cap builds the
        # same composition where its FFTs fit (G in one stage: the staged blocks' own FFTs are not known).
        key = (
            spec, direction, steps, float(small.discretization), ratio, tau_index, log_tail, rare_max, tilt,
            rare_tilt, block_steps, g_ratio, saddle, cut_low, cut_high,
        )
        if self._last_split is not None and self._last_split[0] == key:
            built = self._last_split[1]
            same_cap = self._last_split[2] == size
            if same_cap or (block_steps <= 1 and max(built.size, built.fine_size) <= size <= self._last_split[2]):
                return built
        built = _core.pld.SplitComposedPld(
            small, rare, steps, rare_max, tilt, rare_tilt, size, block_steps, g_ratio,
            more_rare_tilts=[saddle, tilt], rare_cut_low=cut_low, rare_cut_high=cut_high,
        )
        self._last_split = (key, built, size)
        return built

    def _refine_split(
        self, spec: _Spec, direction: str, steps: float, epsilon: float, allowed: float,
        small: Any, rare: Any, ratio: int, tau_index: int, log_tail: float, staged: bool = False,
    ) -> tuple[Any, Any, int, int]:
        """Finer small parts until the spread they add is within the error model's budget.

        Connect the dots adds to each step's loss variance the spread of every cell to its
        two grid points; where the small part is a spike narrower than a cell (tiny q) that
        spread is first order in the grid width and can exceed the spike's own variance,
        which then sets epsilon (sigma=0.5, q=1e-7, T=1e7: the old grid left the interval
        26 % wide). The spread ``A`` is measured on the discretisation (variance of the upper
        masses minus that of the labels' own losses, which is at most the true variance),
        and the error model of ``_grid`` with ``D^2 / 4`` replaced by ``A`` predicts the gap,
        ``4 k T A (epsilon / 2V + 1/4)``. The width is cut until that meets the target, the
        small part stays within ``_MAX_CELLS / 16`` cells, or six tries are spent; the coarse
        grid and the cut (``tau_index`` coarse cells) stay where they were, and G's window
        (about 30 standard deviations of the composed small part) within half of max_size.
        """
        coarse = ratio * float(small.discretization)
        tau_loss = tau_index * coarse
        target = _GAP_TARGET * allowed
        for _try in range(6):
            spread, merged = _spread_variance(small)
            variance = steps * merged
            if variance > 0.0 and spread <= 0.5 * merged:
                predicted = 4.0 * _GAP_CONSTANT * steps * spread * (epsilon / (2.0 * variance) + 0.25)
                if predicted <= target:
                    break
                shrink = min(8.0, max(1.5, predicted / target))  # the spread is first order at worst
            else:
                shrink = 8.0  # the spike sits inside a cell or two: resolve it first
            # G's FFT spans about 30 of its standard deviations: keep it within half of max_size,
            # and the small part within _MAX_CELLS / 16 cells.
            fine = max(coarse / ratio / shrink, 64.0 * math.sqrt(max(variance, 0.0)) / self._max_size,
                       32.0 * tau_loss / _MAX_CELLS)
            new_ratio = _stage_ratio(round(coarse / fine)) if staged else max(1, round(coarse / fine))
            if new_ratio <= ratio:
                break
            ratio = new_ratio
            small, rare = _split_step(spec, direction, coarse / ratio, ratio, tau_index, log_tail)
        return small, rare, ratio, tau_index

    def _split_epsilon(
        self, groups: list[tuple[_Spec, int]], direction: str, delta: float, estimate: float,
        irrelevant_below: float = 0.0,
    ) -> tuple[float, float]:
        """Certified epsilon bounds from the split composition.

        First passes on the older, cheap grid locate epsilon (the Chernoff guide can overshoot
        by orders of magnitude at tiny q, and these passes alone often certify the answer);
        once their upper bound moves by less than 5 % (or after four, or once the interval is
        within 1.5x and over 10 % wide), the fine grid is refined
        for it (``_refine_split``), at most twice, and not again once a refined pass cannot
        certify an upper bound. Stops once the gap meets the target or the upper bound is at
        most ``irrelevant_below``.
        """
        best_lower, best_upper = 0.0, math.inf
        previous, refined = math.inf, 0

        def met() -> bool:
            gap_ok = math.isfinite(best_upper) and best_upper - best_lower <= self._relative_accuracy * best_upper
            return gap_ok or best_upper <= irrelevant_below

        for attempt in range(7):
            # Located once the upper bound stops moving, after four passes, or once the interval is within 1.5x but
            # still over 10 % wide: the cheap grid's upper bound creeps down by 1-10 % a pass there while the refined
            # pass is aimed at the lower end anyway (sigma=0.5, q=1e-7, T=1e7, delta=1e-6: [0.00775, 0.01059] after
            # the third; one cheap pass fewer, and the refined pass aimed from there met the target at once, 0.69 s
            # -> 0.36 s). Narrower, the cheap passes usually close in (sigma=0.4, q=1e-6, T=1e5: 0.23 % wide after the
            # first; at relative_accuracy 0.002 the next cheap pass meets it in 6 ms where a refined one took 52 ms,
            # at 2e-4 the cheap passes in 46 ms where the refined ones took 0.18 s).
            located = math.isfinite(best_upper) and (
                best_upper >= 0.95 * previous or attempt >= 4 or 1.1 * best_lower <= best_upper <= 1.5 * best_lower
            )
            # Aimed at the lower end of what is known: the target is relative to the answer.
            allowed = self._relative_accuracy * (best_lower if located and best_lower > 0.0 else estimate)
            if 0.0 < best_lower < irrelevant_below:
                # Only the upper bound must get below the other direction's lower bound. (Not
                # before a lower bound is known: the allowed error would stop shrinking with
                # the estimate, and so would the upper bound.)
                allowed = max(allowed, 0.5 * (irrelevant_below - best_lower))
            try:
                # The first refined pass on a rare grid that lets G go in stages, the second on one left to
                # rounding: stages keep a wide G's window (sigma=0.614, q=9.4e-8, T=4.8e7, epsilon(8.4e-15),
                # the remove direction: upper bound 0.0858 in stages, 0.128 in one), one stage the small
                # differences of the lower bound's label masses (the add direction there: lower bound 0.0151
                # in one stage, 0.0138 in stages). Both certified: intersected. (The second in one stage whatever
                # its ratio: left to rounding, that ratio divided by 4 there after a change of an ulp in the steps'
                # masses, and the lower bound fell from 0.01533 to 0.01422, 7.5 % wide.)
                composed = self._split_composed(
                    groups, direction, estimate, delta, refine=located, allowed=allowed, staged=located and not refined,
                    one_stage=located and refined > 0,
                )
            except ValueError:
                break
            refined += located
            if self._probe is not None:
                self._probe(composed)
            lo, up, _ = composed.epsilon_bounds(delta)
            previous = best_upper
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
            if met() or refined >= 2:
                break
            if located and not math.isfinite(up):
                return best_lower, best_upper  # the refined G cannot certify an upper bound: finer will not either
            estimate = best_upper if math.isfinite(best_upper) else max(best_lower, estimate / 16.0)
        # (Inside a delta query's epsilon search only where the interval is within 2x: far wider, the split
        # composition is not the one resolving it, and the last try's fine grids cost seconds for nothing:
        # sigma=0.996, q=9.9e-7, T=3773, delta(0.00953) ~ 1.1e-21, 3.7e-3 expected hits, [0.00049, 0.0135]
        # at the search's delta, 4.4 s, where the composition with one rare step answers in 0.02 s.)
        polish = self._probe is None or best_upper <= 2.0 * best_lower
        if refined and not met() and best_lower > 0.0 and polish:
            best_lower, best_upper = self._split_last_try(groups, direction, delta, best_lower, best_upper)
        return best_lower, best_upper

    def _fine_split(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, delta: float, allowed: float,
        range_cap: float = _SPLIT_RANGE,
    ) -> Any | None:
        """A split composition whose fine width is at most ``allowed`` (refined, within _LAST_TRY_SIZE points),
        aimed at ``(epsilon, delta)``; None where the step's losses do not fit in _LAST_TRY_SIZE cells of the
        rare grid (4 allowed) or the composition does not fit."""
        span = float(self._coarse(groups[0][0], direction).max_abs_loss)
        if span / (4.0 * allowed) > _LAST_TRY_SIZE:
            return None
        try:
            return self._split_composed(
                groups, direction, epsilon, delta, refine=True, allowed=allowed, width_cap=allowed,
                max_size=_LAST_TRY_SIZE, range_cap=range_cap,
            )
        except ValueError:
            return None

    def _split_last_try(
        self, groups: list[tuple[_Spec, int]], direction: str, delta: float, lower: float, upper: float
    ) -> tuple[float, float]:
        """One more split pass with the fine width at most the allowed error, intersected.

        Where a few rare steps set epsilon (few steps, or about one hit in all) the rare losses
        near epsilon carry an error first order in the width that the error model of
        ``_refine_split`` does not see: sigma=0.358, q=5.5e-8, T=7 went from 26 % to 1.2 % wide,
        sigma=1.28, q=9.2e-7, T=157 from 24 % to 0.5 %. Tried only when the step's losses fit
        in _LAST_TRY_SIZE cells of the rare grid (4 allowed); both answers are certified.
        """
        allowed = self._relative_accuracy * lower
        # Aimed at the upper bound while the interval is narrow; at the geometric mean of its ends where
        # it is wider than 2x: the tilts follow 1 / epsilon, and an upper bound held up by too small a tilt
        # keeps it so (sigma=0.6144, q=9.405e-8, T=4.76e7, epsilon(8.375e-15): [0.0851, 0.126] aimed at
        # 0.126, [0.0851, 0.0866] aimed at 0.104).
        aim = upper if upper <= 2.0 * lower else math.sqrt(lower * upper)
        composed = self._fine_split(groups, direction, aim, delta, allowed)
        if composed is None:
            return lower, upper
        if self._probe is not None:
            self._probe(composed)
        lo, up, _ = composed.epsilon_bounds(delta)
        lower, upper = max(lower, lo), min(upper, up)
        if (
            upper - lower > self._relative_accuracy * upper and 1.7 * math.log(1.0 / delta) > _SPLIT_RANGE
            and self._probe is None
        ):
            # Still wide at a delta whose range the cap limited: once more with M's range widened (sigma=0.692,
            # q=4.2e-6, T=3.6e7, delta=1.3e-15: [1.0634, 1.0782] at e^45, [1.07629, 1.07763] at e^58). Not inside
            # a delta query's search (sigma=2.47, q=8e-8, T=1.6e6, delta(2.5e-4): 1.3 s more for the same answer).
            aim = upper if upper <= 2.0 * lower else math.sqrt(lower * upper)
            composed = self._fine_split(groups, direction, aim, delta, allowed, range_cap=_SPLIT_RANGE_WIDE)
            if composed is not None:
                lo, up, _ = composed.epsilon_bounds(delta)
                lower, upper = max(lower, lo), min(upper, up)
        return lower, upper

    def _split_delta_pass(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, lower: float, upper: float,
        slope: float,
    ) -> tuple[float, float, float | None]:
        """A delta query's split pass with the fine width at most the allowed epsilon error (``_fine_split``):
        that error is the accuracy over ``slope + 1``, the rate at which log delta falls.

        Returns the bounds intersected with ``[lower, upper]`` (certified) and the slope lambda measured on
        this composition's upper bounds half an e-fold of delta further (None where they say nothing).
        """
        allowed = self._relative_accuracy / (max(slope, 0.0) + 1.0)
        estimate = math.sqrt(lower * upper) if lower > 0.0 else 0.1 * upper
        composed = self._fine_split(groups, direction, epsilon, estimate, allowed)
        if composed is None:
            return lower, upper, None
        lo, up = (float(x[0]) for x in composed.delta_bounds(np.array([epsilon])))
        measured = _measured_slope(composed, epsilon, up, 0.5 / (max(slope, 0.0) + 1.0))
        return max(lower, lo), min(upper, up), measured

    def _split_delta_passes(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, lower: float, upper: float,
        slope: float, irrelevant_below: float,
    ) -> tuple[float, float, bool, float]:
        """At most two ``_split_delta_pass``, the second at the slope the first measured where that differs by
        more than half. Returns (lower, upper, whether the target or ``irrelevant_below`` is met, the last slope)."""
        aimed = slope
        for _pass in range(2):
            lower, upper, found = self._split_delta_pass(groups, direction, epsilon, lower, upper, aimed)
            if upper - lower <= self._relative_accuracy * upper or upper <= irrelevant_below:
                return lower, upper, True, aimed
            if found is None or 2.0 / 3.0 <= found / max(aimed, 1e-12) <= 1.5:
                break
            aimed = found
        return lower, upper, False, aimed

    def _split_delta(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, estimate: float, allowed: float,
    ) -> tuple[float, float]:
        """Certified delta bounds from the split composition (``allowed``: the epsilon error to aim at)."""
        lower, upper, _ = self._split_delta_slope(groups, direction, epsilon, estimate, allowed)
        return lower, upper

    def _split_delta_slope(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, estimate: float, allowed: float,
    ) -> tuple[float, float, float | None]:
        """``_split_delta``'s bounds and the slope lambda measured on the same composition's upper bounds
        (``_measured_slope``, a step of at least four of its rare cells), or None."""
        try:
            composed = self._split_composed(
                groups, direction, epsilon, max(min(estimate, 0.5), 1e-300), refine=True, allowed=allowed
            )
        except ValueError:
            return 0.0, 1.0, None
        lo, up = composed.delta_bounds(np.array([epsilon]))
        upper = float(up[0])
        step = max(4.0 * float(composed.rare_discretization), 1e-3 * max(epsilon, 1.0))
        return float(lo[0]), upper, _measured_slope(composed, epsilon, upper, step)

    # -- composition with at most one rare step (few steps, tiny rates, small deltas) ----------

    def _one_rare_applies(self, groups: list[tuple[_Spec, int]]) -> bool:
        if self._discretization is not None or len(groups) != 1:
            return False
        spec, count = groups[0]
        return isinstance(spec, _Spec) and spec.kind in _SPLIT_KINDS and count >= 2 and spec.sampling_probability < 1.0

    def _one_rare_first(self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float | None = None) -> bool:
        """Whether the composition with at most one rare step goes before the others: at tiny rates
        with far fewer than one expected hit in all, where a hit's loss reaches far beyond the rate
        (small sigma: its log-normal-like tail is what this composition follows).

        Elsewhere it only backs the others up: where every loss stays within a few q (large sigma)
        they are as fast and tighter (sigma=10.2, q=6.2e-5, T=2: 0.0005 % against 0.2 %), and so
        they are with about one hit in all (sigma=0.3, q=1e-5, T=1e5: 0.024 % in 19 ms against
        0.45 % in 59 ms).
        """
        if not self._one_rare_applies(groups):
            return False
        spec, count = groups[0]
        q = spec.sampling_probability
        # (delta(0), the total variation distance, with up to _ONE_RARE_TV_FIRST_HITS: at sigma=0.331,
        # q=2.75e-8, T=1.5e6, 0.04 expected hits, the grids took 8 s for 2.1 %, this one 0.2 s for 0.5 %;
        # at sigma=0.5, q=3e-6, T=1e5, 0.3 hits, 3.6 s for 0.36 % against 0.13 s for 0.10 %. Up to 100 hits
        # since it is aimed again after the grids where it misses (_delta_one_direction): at sigma=0.867,
        # q=1.9e-6, T=3.1e7, 58 hits, 4.2 s -> 0.26 s; sigma=0.8, q=1e-7, T=3e7, 3 hits, 3.3 s for 0.49 % ->
        # 2.2 s for 0.41 %; bench/pld_total_variation.py --random 30, seeds 1 and 2, at q <= 1e-4 with 0.1-100
        # hits: 60 s -> 19 s, 10 -> 2 queries over 2 s, 2 -> 1 wider than 1 %, every interval within 0.5 % that was.)
        hits = _ONE_RARE_TV_FIRST_HITS if epsilon == 0.0 else _ONE_RARE_FIRST_HITS
        if q > _SPLIT_MAX_RATE or count * q > hits:
            return False
        return float(self._coarse(spec, direction).max_abs_loss) >= _ONE_RARE_FIRST_SPAN * q

    def _one_rare_composed(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, delta: float,
        cells_per_error: float | None = None,
    ) -> Any | None:
        """A OneRareComposedPld for a query near ``(epsilon, delta)`` (see ``pld/one_rare.hpp``).

        The band's top tau is the smallest loss whose tail mass p per step leaves the terms with
        two or more rare steps, at most C(T, 2) p^2, within ``_ONE_RARE_CHARGE`` of the accuracy
        target's share of delta; its bottom moves up the losses below it whose mass, T times,
        is as small. The band's grid is ``allowed / cells_per_error`` wide (default
        ``_ONE_RARE_CELLS``) and the rare cells grow by a fifth of the relative accuracy (at most
        1e-3). ``None`` where the band would need more than ``_MAX_CELLS / 8`` cells.
        """
        spec, count = groups[0]
        steps = float(count)
        # The epsilon error allowed; at epsilon = 0 (the total variation distance, which falls by
        # P(L > 0) <= 1 per unit of epsilon) an error of r delta moves delta by at most r delta.
        allowed = max(self._relative_accuracy * (epsilon if epsilon > 0.0 else delta), 1e-14)
        d = allowed / (_ONE_RARE_CELLS if cells_per_error is None else cells_per_error)
        budget = _ONE_RARE_CHARGE * self._relative_accuracy * delta
        coarse = self._coarse(spec, direction)
        loss = (coarse.upper_low + np.arange(coarse.log_upper.size)) * coarse.discretization
        log_mass = np.asarray(coarse.log_upper)
        if log_mass.size == 0:
            return None
        above = np.logaddexp.accumulate(log_mass[::-1])[::-1]  # log P(L >= loss_i), pessimistic
        below = np.logaddexp.accumulate(log_mass)  # log P(L <= loss_i)
        log_tail_max = 0.5 * math.log(2.0 * budget / (steps * (steps - 1.0)))
        fits = np.nonzero(above <= log_tail_max)[0]
        if fits.size == 0:
            return None
        tau = max(float(loss[fits[0]]), d)
        # (Every loss below the first grid point whose cumulative mass exceeds the budget is moved
        # up; where the lowest point already does, as the remove direction's log(1 - q) at a tiny
        # rate, the band reaches the lowest loss.)
        first = int(np.count_nonzero(below <= math.log(budget / steps)))
        low = max(-float(loss[min(first, loss.size - 1)]), d)
        cells = _MAX_CELLS / 4  # the band's budget (beyond the step's lowest loss low costs nothing)
        growth = min(0.2 * self._relative_accuracy, 1e-3)
        log_tail = self._query_tail(groups, delta)

        # (Only the base pair's tails are cut at the query's, not the subsampled pair's own: the rare
        # cells carry the step's far tail themselves, and `delta` may be a first guess far above the
        # answer. Cut where P' itself runs out at a first guess of 0.5, sigma=0.741, q=2.1e-6,
        # T=2272, delta(0.0217) ~ 2.4e-13 lost the hits that make it: lower bound 8e-111, 2.5 s.)
        def build(top: float) -> tuple[Any, Any]:
            return _part_step(  # type: ignore[no-any-return]
                spec, direction, d, log_tail, split_ratio=math.ceil(low / d), split_tau=math.ceil(top / d),
                rare_growth=growth, query_tail=_NO_QUERY,
            )

        # The coarse masses overstate the tail (each cell's mass is spread up to its top, and its
        # cells can be far wider than this grid): the cut is placed on the rare cells of a first
        # build from a sixteenth of it, or of what the band's budget allows.
        band, rare = build(max(min(tau, cells * d / 2.0) / 16.0, 8.0 * d))
        if rare.loss.size:
            tails = np.logaddexp.accumulate(np.asarray(rare.log_upper)[::-1])[::-1]  # mass at or above each point
            fits = np.nonzero(tails <= log_tail_max)[0]
            refined = float(rare.loss[fits[0]]) if fits.size else tau
            if refined < tau:
                tau = refined
            if tau / d > cells / 2.0:
                return None
            band, rare = build(tau)
        tilt = _one_rare_tilt(band, steps - 1.0, epsilon)
        return _core.pld.OneRareComposedPld(band, rare, steps, tilt, self._max_size)

    def _one_rare_epsilon(
        self, groups: list[tuple[_Spec, int]], direction: str, delta: float, estimate: float
    ) -> tuple[float, float]:
        """Certified epsilon bounds from the composition with at most one rare step, aimed at
        ``estimate`` and then, at most twice, at the lower end of what it found; where the aim was
        already right and the interval misses the target by at most _ONE_RARE_FINER_MISS, once more
        on a band _ONE_RARE_FINER times as fine (sigma=1.73, q=7.7e-6, T=286, delta=8e-14: 1.01 %
        -> 0.07 %, 0.01 s more; sigma=0.451, q=3.4e-8, T=91838, delta=2.27e-5, 4.2 targets off: 2.12 % ->
        0.34 %, 0.17 s more; sigma=1.19, q=1.5e-7, T=1463, delta=1.14e-13: 1.51 % -> 0.21 %)."""
        best_lower, best_upper = 0.0, math.inf
        aim = estimate
        cells: float | None = None
        for _attempt in range(3):
            try:
                composed = self._one_rare_composed(groups, direction, aim, delta, cells)
            except ValueError:
                break
            if composed is None:
                break
            if self._probe is not None:
                self._probe(composed)
            lo, up, _ = composed.epsilon_bounds(delta)
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
            target = self._relative_accuracy * best_upper
            if math.isfinite(best_upper) and best_upper - best_lower <= target:
                break
            known = best_lower if best_lower > 0.0 else best_upper
            if not (math.isfinite(known) and known > 0.0):
                break
            if abs(known - aim) <= 0.1 * aim:
                if cells is not None or not (
                    math.isfinite(best_upper) and best_upper - best_lower <= _ONE_RARE_FINER_MISS * target
                ):
                    break
                cells = _ONE_RARE_FINER * _ONE_RARE_CELLS
            aim = known
        return best_lower, best_upper

    def _one_rare_delta(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, estimate: float,
        known: float = 1.0,
    ) -> tuple[float, float]:
        """Certified delta bounds at ``epsilon`` >= 0 from the composition with at most one rare step.

        Its charges are aimed at ``estimate``, and again at the bounds found where those are far
        smaller (an upper bound 60x the answer had left the charge at 3 % of delta: sigma=1.08,
        q=3.7e-8, T=132, delta(5.6e-6)). The band is made finer only while that may beat ``known``,
        the relative width already certified by other means.
        """
        best_lower, best_upper = 0.0, 1.0
        aim = min(max(estimate, 1e-300), 0.5)
        # A delta query needs epsilon to a fraction of the accuracy (log delta falls steeply in it):
        # a finer band than an epsilon query's (sigma=1.08, q=3.7e-8, T=132, delta(5.6e-6): 0.15 %
        # wide at _ONE_RARE_CELLS_DELTA, 0.56 % at _ONE_RARE_CELLS); at epsilon = 0 the allowed error
        # comes from delta itself, and the coarser band serves (sigma=0.492, q=6.9e-8, T=9: 0.09 %).
        cells = _ONE_RARE_CELLS_DELTA if epsilon > 0.0 else _ONE_RARE_CELLS
        refined = False  # whether the band was made finer (see below)
        refined_gap = math.inf  # the gap before the last refinement
        for _attempt in range(_ONE_RARE_TV_ATTEMPTS if epsilon == 0.0 else 4):
            try:
                composed = self._one_rare_composed(groups, direction, epsilon, aim, cells)
            except ValueError:
                composed = None
            if composed is None:
                # The band or G would not fit: at epsilon = 0 a coarser band (its error is about
                # first order in the cell: sigma=0.331, q=2.75e-8, T=10, delta(0) is 0.2 % wide
                # at a sixteenth of the default cells, whose G needs more than 2^22 points).
                if epsilon == 0.0 and not refined and cells > _ONE_RARE_CELLS / 64.0:
                    cells /= 4.0
                    continue
                break
            lo, up = (float(x[0]) for x in composed.delta_bounds(np.array([epsilon])))
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
            if best_upper - best_lower <= self._relative_accuracy * best_upper:
                break
            # Aimed again at what is known: the lower bound where it is far below the aim; at
            # epsilon = 0, where the allowed error (and so the band's cells) follows the aim, first
            # the upper bound (the guide says little there: 1 against a true 1.4e-7 at sigma=0.744,
            # q=1.7e-7, T=2, whose first lower bound was 4e-12).
            if epsilon == 0.0 and aim > 2.0 * best_upper:
                aim = best_upper
            elif best_lower > 0.0 and aim > 2.0 * best_lower:
                aim = best_lower
            elif (
                best_lower > 0.0 and cells < (_ONE_RARE_TV_FINEST if epsilon == 0.0 else _ONE_RARE_DELTA_FINEST)
                and (epsilon == 0.0 or (
                    # (At epsilon > 0 only while it pays: from an interval within a factor 2 and narrowing at least
                    # 2x per refinement. sigma=2.92, q=6.1e-4, T=31, delta(0.0725) ~ 1e-40 stayed 100 % wide on
                    # ever finer bands, 0.04 s -> 0.9 s.)
                    best_upper < 2.0 * best_lower and (best_upper - best_lower) / best_upper < 4.0 * known
                    and (not refined or best_upper - best_lower <= 0.5 * refined_gap)
                ))
            ):
                refined_gap = best_upper - best_lower
                # The interval narrows about as the band's cells (sigma=0.331, q=2.75e-8, T=1.5e6, delta(0):
                # 5.8 %, 1.5 %, 0.48 % at 0.5, 2 and 8 cells per error; sigma=0.578, q=2e-8, T=8.5e6,
                # delta(0.0194): 3.1 %, 0.87 %, 0.34 % at 20, 80 and 320).
                width = (best_upper - best_lower) / (self._relative_accuracy * best_upper)
                finest = _ONE_RARE_TV_FINEST if epsilon == 0.0 else _ONE_RARE_DELTA_FINEST
                cells = min(cells * min(max(1.5 * width, 2.0), 8.0), finest)
                refined = True
            else:
                break
        return best_lower, best_upper

    # -- delta ------------------------------------------------------------------------------

    @_holding_memory
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
        if not groups:
            return Bounds(unwrap(lower), unwrap(upper))
        tests = _threshold_steps(groups)
        single = self._single_gaussian(groups)
        for index, e in np.ndenumerate(eps):
            if single is not None:
                lo_one, up_one = gaussian_step_delta_bounds(single[0], single[1], float(e))
                if up_one - lo_one <= self._relative_accuracy * up_one:
                    lower[index], upper[index] = lo_one, max(up_one, _TINIEST)
                    continue
            lo_all, up_all = 0.0, 0.0
            directions = self._directions(groups)
            if e == 0.0 and len(directions) == 2 and all(
                isinstance(spec, _Spec) and spec.kind in _SPLIT_KINDS for spec, _ in groups
            ):
                # delta(0) is the total variation distance, the same in both directions (the add pair
                # is the remove pair swapped): each direction's certified interval bounds it.
                lo_all, up_all = self._total_variation(groups, tests)
                if single is not None:
                    lo_all, up_all = max(lo_all, lo_one), min(up_all, up_one)
                lower[index], upper[index] = lo_all, max(up_all, _TINIEST)
                continue
            self._fine_lines = self._bulk_dominated(groups, float(e))
            try:
                lo_all, up_all = self._delta_at(groups, directions, tests, float(e), lo_all, up_all)
            finally:
                self._fine_lines = False
            if single is not None:  # both certified: keep their intersection
                lo_all, up_all = max(lo_all, lo_one), min(up_all, up_one)
            lower[index] = lo_all
            upper[index] = max(up_all, _TINIEST)  # a positive delta below the double range stays positive
        return Bounds(unwrap(lower), unwrap(upper))

    def _delta_at(
        self, groups: list[tuple[_Spec, int]], directions: tuple[str, ...], tests: Any, e: float, lo_all: float,
        up_all: float,
    ) -> tuple[float, float]:
        """Both directions' bounds at one epsilon > 0, the larger kept, from ``[lo_all, up_all]`` (``delta_bounds``)."""
        order = sorted(directions, key=lambda r: -self._order_estimate(groups, r, e))
        # (As in _epsilon_bounds_one: at large noise the sum test's lower bound first.)
        sum_first = tests is not None and self._sum_test_first(tests)
        floor = sum_test_delta_lower(tests, e, order[0]) if tests is not None and sum_first else 0.0
        for direction in order:
            lo, up = self._delta_one_direction(
                groups, direction, e, self._settled_below(lo_all, up_all), up_all,
                floor if direction == order[0] else 0.0,
            )
            # (A direction whose upper bound is below the other's lower bound cannot raise the maximum.)
            if tests is not None and lo < (1.0 - self._relative_accuracy) * up and up > lo_all:
                lo = max(lo, min(threshold_delta_lower(tests, e, direction), up))
                if floor == 0.0:
                    lo = max(lo, min(sum_test_delta_lower(tests, e, direction), up))
            lo_all, up_all = max(lo_all, lo), max(up_all, up)
        return lo_all, up_all

    def _order_estimate(self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float) -> float:
        """The delta estimate that orders a delta query's directions (the larger first; the other then only has to
        fall below its lower bound): the Chernoff guide's, and at tiny rates and noise up to _SUM_TEST_SIGMA the
        quadrature guide's (as with _bulk_dominated, whatever sets delta), times _chernoff_factor.

        (At sigma=0.451, q=3.4e-8, T=91838, delta(6.26e-5) the coarse guides tied at 0.9999 and the add direction
        went first: 27 s of split passes for its [1.71e-5, 1.76e-5], below the remove direction's [2.249e-5,
        2.251e-5], which took 0.6 s. The quadrature's estimates are 0.058 (remove) and 5.2e-5 (add).)
        """
        fine = self._fine_lines
        if not _quadrature_scope(groups):  # (beyond sigma = 10, the sum test's floor goes to the first direction)
            return self._guide_delta(groups, direction, epsilon).value
        self._fine_lines = True
        try:
            guide = self._guide_delta(groups, direction, epsilon)
        finally:
            self._fine_lines = fine
        return guide.value * math.exp(_chernoff_factor(guide.slope)) if guide.slope > 0.0 else guide.value

    def _total_variation(self, groups: list[tuple[_Spec, int]], tests: Any) -> tuple[float, float]:
        """Certified bounds on delta(0) of a history whose add pairs are its remove pairs swapped:
        the intersection of both directions' intervals (the second only where the first is wider than twice the
        target)."""
        lower, upper = 0.0, 1.0
        # At large noise the sum test's lower bound first, as in delta_bounds: it is the total variation of the
        # sum of the outputs, a lower bound on either direction's (sigma=198, q=4.2e-8, T=5: the grids took 4.1 s
        # for [1.90461e-10, 1.90498e-10], whose lower end is the sum test's).
        floor = sum_test_delta_lower(tests, 0.0, "remove") if tests is not None and self._sum_test_first(tests) else 0.0
        for direction in _DIRECTIONS:
            lo, up = self._delta_one_direction(groups, direction, 0.0, floor=floor)
            if tests is not None and lo < (1.0 - self._relative_accuracy) * up:
                lo = max(lo, min(threshold_delta_lower(tests, 0.0, direction), up))
                lo = max(lo, min(sum_test_delta_lower(tests, 0.0, direction), up))
            lower, upper = max(lower, lo), min(upper, up)
            # The second direction only where the first is wider than twice the target, as in _settled_below: it
            # can only narrow an interval already within the 1 % that the default 0.5 % aims to keep everywhere
            # (sigma=0.621, q=5.9e-8, T=9.9e7: the remove direction's [8.145e-4, 8.215e-4], 0.85 %, then 2 s
            # of add grids for [6.4e-4, 8.9e-4]).
            if upper - lower <= 2.0 * self._relative_accuracy * upper:
                break
        return lower, max(upper, lower)

    def _delta_one_direction(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, irrelevant_below: float = 0.0,
        other_upper: float = 0.0, floor: float = 0.0,
    ) -> tuple[float, float]:
        """Bounds for one direction; refinement stops once the upper bound is <= ``irrelevant_below``.
        ``floor``: a certified lower bound known before (the sum test's)."""
        first_lower, first_upper = floor, 1.0
        first = self._one_rare_first(groups, direction, epsilon)
        if not first and epsilon > 0.0 and self._one_rare_applies(groups):
            # With at most about one expected hit at a small rate it is cheap, and often answers alone:
            # before the grids, not only after them (sigma=0.578, q=2e-8, T=8.5e6, 0.17 hits, delta(0.0194):
            # the grids and the epsilon search took 17 s and left [0, 6.9e-13]; this gives [1.8544e-14,
            # 1.8631e-14]).
            # (Only where a hit's losses reach far beyond q, as for going first: sigma=9.88, q=2.3e-8, T=7.6e6,
            # delta(8.4e-6), whose losses stay within a few q, it took 1 s and left 11 % for the grids.)
            spec, count = groups[0]
            q = spec.sampling_probability
            reach = float(self._coarse(spec, direction).max_abs_loss)
            first = q <= _SPLIT_MAX_RATE and count * q <= _ONE_RARE_EARLY_HITS and reach >= _ONE_RARE_FIRST_SPAN * q
        if first:
            # (As in _epsilon_one_direction: it usually answers alone here, and fast.)
            guide = self._guide_delta(groups, direction, epsilon)
            lo, first_upper = self._one_rare_delta(groups, direction, epsilon, guide.value)
            first_lower = max(first_lower, lo)
            if first_upper - first_lower <= self._relative_accuracy * first_upper or first_upper <= irrelevant_below:
                return first_lower, first_upper
        # (The first interval goes in only where it is within a factor 2: a wider one can be far off. The
        # sum test's lower bound alone goes in: at the noise where it is taken first it is about delta.)
        informative = 0.0 < first_lower and first_upper <= 2.0 * first_lower
        first_known = (first_lower, first_upper) if informative else (floor, 1.0)
        lower, upper = self._delta_by_grids(groups, direction, epsilon, irrelevant_below, other_upper, *first_known)
        # (Both certified: the first answer is kept. It had been dropped when the grids ran after it:
        # sigma=0.331, q=2.75e-8, T=2, delta(0) was [4.42e-8, 4.78e-8] after a first [4.51e-8, 4.56e-8].)
        lower, upper = max(lower, first_lower), min(upper, first_upper)
        if (
            upper - lower > self._relative_accuracy * upper and upper > irrelevant_below
            and upper > 1e-3 * other_upper and self._one_rare_applies(groups)
            and not (first and epsilon > 0.0 and 0.0 < lower <= 2.0 * first_lower)
        ):
            # Few steps at a tiny rate: the tail of one hit sets delta (certified too: intersected).
            # Its charges are aimed at the known part of delta: the lower bound where there is one.
            # (Not again where it went first and its own lower bound is still about the best known:
            # it would be aimed where it was. At epsilon = 0 it went first aimed at the guide, about 1,
            # and aimed at the lower bound it narrows: sigma=0.8, q=1e-7, T=3e7, delta(0), 1.11 % -> 0.41 %.)
            known = (upper - lower) / upper if upper > 0.0 else 1.0
            lo, up = self._one_rare_delta(groups, direction, epsilon, lower if lower > 0.0 else upper, known)
            lower, upper = max(lower, lo), min(upper, up)
        return lower, upper

    def _delta_by_grids(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, irrelevant_below: float,
        other_upper: float, known_lower: float = 0.0, known_upper: float = 1.0,
    ) -> tuple[float, float]:
        """The whole-grid and split compositions' bounds for one direction (see _delta_one_direction).

        ``[known_lower, known_upper]``: certified bounds found before (the composition with at most one rare
        step), which the stopping tests and the epsilon search's aim start from.
        """
        if irrelevant_below > 0.0 or other_upper > 0.0:
            # A direction whose certified Chernoff bound lies far below the other direction's
            # lower bound cannot change the maximum, nor one far below its upper bound the
            # interval's width: skip its (possibly huge, tilted) grid; its bound still counts.
            bound = self._chernoff_upper(groups, direction, epsilon)
            if not (bound <= 0.5 * irrelevant_below or bound <= 1e-3 * other_upper) and all(
                isinstance(spec, _Spec) and spec.sampling_probability <= _SPLIT_MAX_RATE for spec, _ in groups
            ):
                # At small rates the coarse steps' cells round the losses (~q) up: from the densities instead.
                bound = min(bound, self._gaussian_chernoff(groups, direction, epsilon))
            if bound <= 0.5 * irrelevant_below or bound <= 1e-3 * other_upper:
                return 0.0, bound
        if epsilon >= sum(c * _loss_ceiling(spec, direction) for spec, c in groups):
            return 0.0, 0.0  # no composed loss exceeds epsilon (the largest losses are bounded and finite)
        guide = self._guide_delta(groups, direction, epsilon)
        top = sum(c * float(self._coarse_parts(spec, direction)[1].max(initial=-math.inf)) for spec, c in groups)
        if epsilon >= top:
            # At or above the largest finite composed loss the finite part's delta is about 0 and
            # the Chernoff bound falls without end in the slope: the guide's slope (up to 1e12,
            # see _minimise) says nothing about the grid, which then stays at the old rule's.
            guide = _Guide(guide.value, min(guide.slope, 1e4))
        tilt = self._tilt(guide.slope, guide.value)
        # The steps' tails are cut at a hundredth of the query's tail for the smaller of the known upper bound and
        # the guide's delta, that times the factor by which (1 - e^{-x})_+ undercuts e^{lambda x} (at most
        # 1 / (e lambda); _chernoff_factor): charged to the upper bound, that cut costs about 1e-6 of delta. Uncut
        # (e^-80), the rare large losses of a tiny rate dominate a strong tilt and the window cannot hold them:
        # at sigma=1.06, q=3e-7, T=3.8e7, delta(0.015) ~ 3.5e-15 the first grid (tilt 1900) spanned 4M cells of
        # 1.3e-5 for [0, 1].
        # (Only with the quadrature guides, _bulk_dominated: the coarse guides' delta can be far too small.)
        estimate = guide.value * math.exp(_chernoff_factor(guide.slope)) if guide.slope > 0.0 else guide.value
        cut = self._query_tail(groups, 1e-2 * min(known_upper, estimate)) if self._fine_lines else _NO_QUERY
        cut = cut if cut > _LOG_TAIL else _NO_QUERY  # (a deeper cut would only lengthen the subsampled steps)
        # A relative delta error r is an epsilon error r / (the slope of -log delta in epsilon).
        allowed = self._relative_accuracy / self._log_delta_slope(groups, direction, epsilon, guide.slope)
        # A grid coarser than a quarter of epsilon cannot tell losses below epsilon from those
        # above (at tiny q every loss is ~q: sigma=1, q=1e-6, T=2, delta(2.8e-5) was [0, 3.6e-7]
        # with cells of 5e-4 in the add direction; the true value is ~1e-9).
        # (Only where the composed loss is that narrow too: a wide one resolves small epsilons anyway.
        # At epsilon = 0, the total variation distance, the spread alone sets it: sigma=2.28,
        # q=6e-6, T=14, delta(0) went from 7.4 % to 0.31 % wide.)
        spread = math.sqrt(max(sum(c * self._coarse_cumulants(spec, direction)[0] for spec, c in groups), 0.0))
        cap = max(epsilon / 4.0, spread / 8.0) if epsilon > 0.0 or spread > 0.0 else None
        if cap is not None and epsilon == 0.0 and self._near_normal(groups, direction):
            # delta(0), the total variation distance, which the grid's connect-the-dots spread (T D^2 / 4
            # of loss variance) changes by about D^2 / 8 s^2 of itself, s^2 the mean variance of one step:
            # D <= sqrt(2 accuracy) s keeps that within a quarter of the target, whatever T. (At sigma=3.77,
            # q=1.05e-7, T=8.5e7, s = 2.8e-8, the spread's cap, 3.3e-5, left the grids' lower bound at 0,
            # and the split composition's interval 2.2 % wide; a grid of 3e-9 gives 0.31 %.) Only where
            # the composed loss looks near normal, and no finer than steps of _TV_STEP_CELLS cells: where
            # a step's losses reach far beyond its spike (sigma=0.621, q=5.9e-8, T=9.9e7: up to 5, the
            # coarse step's spread an artefact of its cells) the steps would have millions of cells, and
            # the grids, taking more refinements from there, cost 20 s instead of 5.6 s.
            steps_in_all = float(sum(c for _, c in groups))
            span = max(float(self._coarse(spec, direction).max_abs_loss) for spec, _ in groups)
            per_step = math.sqrt(2.0 * self._relative_accuracy) * spread / math.sqrt(steps_in_all)
            cap = min(cap, max(per_step, span / _TV_STEP_CELLS))
        discretization = self._grid(groups, direction, allowed, epsilon, cap=cap)
        # Few hits of a small-noise Gaussian at a tiny rate: the error model above, made for near-normal composed
        # losses, asks for grids several times too fine there, and the plain grids' round-off then keeps their lower
        # bounds far off. Started 4x coarser, thorough (the live frequencies' direct sums), and refined from the
        # measured gap (sigma=0.304, q=1.2e-7, T=3.4e7, delta(11.49) ~ 1.7e-11: 0.05 % on 2^22 points in 1.9 s
        # where 0.5 % was asked; thorough at 4x the width, 2^20 points, 0.13 % in 0.18 s. The steep-slope queries of
        # the delta sweep: sigma=1.06, q=3e-7, T=3.8e7, delta(0.015) 12.2 % -> 6.9 %, sigma=1.19, q=5.7e-8, T=4.8e7,
        # delta(0.0024) 5.8 % -> 2.2 %; the sweeps' totals unchanged. Not at large sigma, where the sum test and
        # the grids' upper masses settle these queries: sigma=692, q=1.5e-7, T=5.7e7 went from 0.3 to 5 s; nor with
        # many hits: sigma=1.46, q=1.2e-5, T=9.1e7, 1,100 hits, 3 s instead of under 2.)
        tiny = epsilon > 0.0 and all(
            isinstance(spec, _Spec) and spec.kind == "gaussian" and float(spec.parameters[0]) <= 2.0
            and spec.sampling_probability <= 1e-4 and spec.sampling_probability * c <= 100.0
            for spec, c in groups
        )
        if tiny:
            discretization = 4.0 * discretization if cap is None else min(4.0 * discretization, max(cap, discretization))
        # (Started from the known interval: sigma=0.578, q=1.98e-8, T=8.5e6, delta(0.00689) ~ 1.28e-12 had
        # [1.2775e-12, 1.2862e-12] from the composition with one rare step, and the epsilon search aimed at
        # a tenth of the split composition's upper bound, 1.6e-13, instead: 14.7 s for nothing, 9.2 s aimed
        # at the known interval. That query now meets its target in the one-rare composition's finer band.)
        best_lower, best_upper = known_lower, known_upper
        split = self._split_applies(groups)
        # (The split composition's kinds at a small rate with more hits than _split_applies takes: a last pass.)
        split_kinds = not split and self._split_kinds_apply(groups)
        # (Not first where the composed bulk sets delta (_bulk_dominated): there it left [0, 2.4e-14] in 0.29 s per
        # direction at sigma=1.06, q=3e-7, T=3.8e7, delta(0.015) ~ 3.5e-15, and the grids answer alone.)
        if split and groups[0][0].sampling_probability <= _SPLIT_FIRST_RATE and not self._fine_lines:
            aim = math.sqrt(known_lower * known_upper) if 0.0 < known_lower and known_upper < 1.0 else (
                known_lower if known_lower > 0.0 else guide.value
            )
            lo, up = self._split_delta(groups, direction, epsilon, aim, allowed)
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
            split = False
            if best_upper - best_lower <= self._relative_accuracy * best_upper or best_upper <= irrelevant_below:
                return best_lower, best_upper
        effort: int | None = None  # the loop's largest FFT (None: max_size)
        if epsilon == 0.0:
            # delta(0)'s error is first order in the grid at every T: where the composed loss
            # is long (T ~ 1e6 at sigma=0.33, q=2.8e-8) grids of 2^22 points took 6-15 s each
            # for 2.4 % instead of 10 %; beyond _TV_SIZE points the interval stays wider.
            effort = _TV_SIZE
        if self._discretization is None and epsilon > 0.0:
            alone = None
            if irrelevant_below > 0.0 and self._probe is None:
                # As in an epsilon query: the upper masses alone first, the labels only if this
                # direction's delta may reach the other's lower bound.
                alone = self._composed(groups, direction, discretization, tilt, cut, lower=False)
                up = alone_up = float(alone.delta_bounds(np.array([epsilon]))[1][0])
                if up <= irrelevant_below:
                    return best_lower, min(best_upper, up)
                if split:
                    # Where the split composition applies it usually settles this quickly too (sigma=0.635,
                    # q=2.8e-6, T=3.4e5, delta(0.084)'s add direction: 6.1e-13 against the other's 7.5e-10).
                    lo, up = self._split_delta(groups, direction, epsilon, up, allowed)
                    best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
                    split = False
                    met_here = best_upper - best_lower <= self._relative_accuracy * best_upper
                    if best_upper <= irrelevant_below or met_here:
                        return best_lower, best_upper
            if alone is not None and min(alone_up, best_upper) > _FLOORED * irrelevant_below:
                # Far above the other direction's lower bound: the labels on this grid and tilt cannot
                # lift this direction's lower bound to it, and the search below measures its slope on the
                # upper masses alone (sigma=0.644, q=7e-6, T=5.6e7, delta(1.64)'s add direction: 1.3e-9
                # against 4.3e-13, then ~1e-23 from the search; the labelled grid cost 0.3 s).
                composed = alone
            else:
                composed = self._composed(groups, direction, discretization, tilt, cut, thorough=tiny)  # (cached below)
            lo, up = (float(x[0]) for x in composed.delta_bounds(np.array([epsilon])))
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
            if best_upper - best_lower <= self._relative_accuracy * best_upper or best_upper <= irrelevant_below:
                return best_lower, best_upper
            step = max(4.0 * discretization, 1e-3 * max(epsilon, 1.0))
            # (From this grid's own upper bound: measured at the split composition's, the slope
            # came out as the guide's 16 against 580 at sigma=0.946, q=3.8e-6, T=8.4e5, delta(0.0172),
            # and the search then left the interval 4.8 % wide instead of 0.57 %.)
            measured = _measured_slope(composed, epsilon, up, step)
            if split and best_upper < 1.0 and not best_upper <= 2.0 * best_lower:
                # The first grid is far off (its guide missed the tilt: sigma=0.635, q=2.8e-6, T=3.4e5,
                # delta(0.084) was [0, 2.1e-8] against a true 7.5e-10): the split composition (certified
                # too) before the search and the retilted grids, not after them (the query 2.4 s -> 1.1 s;
                # alone it gives [7.456e-10, 7.481e-10] in 0.02 s). Not where the grid knows nothing (upper
                # 1): the search then skips at once, and a split interval would start it for nothing
                # (sigma=19.4, q=1.9e-6, T=47925, delta(0.028) ~ 1e-32: 0.6 s -> 1.5 s).
                lo, up, split_slope = self._split_delta_slope(groups, direction, epsilon, best_upper, allowed)
                if split_slope is not None and up < 0.5 * best_upper:
                    # The first grid's upper bound far above the split's: its slope was measured where
                    # round-off and cells flatten it; the split's is the one to aim the search at
                    # (sigma=1.17, q=3e-6, T=1.6e7, delta(0.0706) ~ 1.5e-11: 61 on the grid, 480 on the
                    # split composition and on the search's grids; aimed at 61, the first round's three
                    # grids, 0.5 s, did not count).
                    measured = split_slope if measured is None else max(measured, split_slope)
                best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
                split = False
                if best_upper - best_lower <= self._relative_accuracy * best_upper or best_upper <= irrelevant_below:
                    return best_lower, best_upper
            slope = guide.slope if measured is None else measured
            if composed is not alone and 0.0 < best_upper < _GUIDE_FAR_OFF * guide.value:
                # The guide's delta was far off (at tiny rates its Chernoff bound is ruled by the rare large losses:
                # sigma=2.34, q=3.6e-8, T=2.2e6, delta(1.188e-4) ~ 1.65e-12, guide 7.2e-6), and with it the tilt's
                # strength (_tilt), which this grid took for a delta of 7e-6: the tests it compares sit far below
                # its tilted mass, and round-off keeps the interval wide, 1.6 % there. The search below then
                # costs seconds: 3.8 s for 0.54 %. Where this grid is already within twice the target and 1 % (the
                # width issue 10 allows), at the default accuracy, it answers (as an epsilon query's grids stop
                # before 2^22 points); else the grid once more at the strength for the delta it found, whose
                # slope is the guide's (the slopes measured on the grids can be far off at tiny q, see the
                # search) and whose strength is at most twice the first: sigma=2.34 above, 0.66 % in 1.5 s.
                # (Side by side on the 113 heavy delta queries of the delta sweeps' seeds 10, 21, 40 and 41:
                # 225 -> 205 CPU s; sigma=1.19, q=5.7e-8, T=4.8e7, delta(0.00242), 2.09 % -> 0.72 %, the search
                # aimed from the narrower interval. Over the sweeps' 410 queries 30 came out wider, all within 1 %.)
                if self._near_enough(best_lower, best_upper):
                    return best_lower, best_upper
                retilt = self._tilt(guide.slope, best_upper)
                # (Not where the split passes below go next: they answer better, and aimed from this grid's slope
                # they did worse: sigma=0.7, q=1e-5, T=2e7, delta(1.13), 0.19 % -> 0.33 %, 2.9 -> 3.4 s.)
                if retilt > 1.25 * tilt and not split_kinds:
                    composed = None  # (not kept while the next one is built: up to 235 MB each at 2^22 points)
                    again = self._composed(groups, direction, discretization, retilt, cut, thorough=tiny)
                    lo, up = (float(x[0]) for x in again.delta_bounds(np.array([epsilon])))
                    best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
                    met = best_upper - best_lower <= self._relative_accuracy * best_upper
                    if met or best_upper <= irrelevant_below or self._near_enough(best_lower, best_upper):
                        return best_lower, best_upper
                    again_slope = _measured_slope(again, epsilon, up, step)
                    if again_slope is not None:
                        slope = max(slope, again_slope)
                    again = None
            if split_kinds and 0.0 < best_upper < 1.0 and not best_upper <= 2.0 * best_lower:
                # Many hits at a small rate (beyond the split composition's usual range) and the first grid far
                # off: split passes before the search, the second aimed at the slope the first one measured
                # (sigma=0.7, q=1e-5, T=1.2e7, delta(0.807) ~ 1e-12: the search's four grids, 1.8 s, left it
                # 2.4x wide; one split pass after them gave 0.24 %).
                best_lower, best_upper, done, _ = self._split_delta_passes(
                    groups, direction, epsilon, best_lower, best_upper, max(slope, guide.slope), irrelevant_below
                )
                if done or best_upper - best_lower <= _PASSES_CLOSE * self._relative_accuracy * best_upper:
                    # (Within twice the target the search's whole grids, far off here, do not narrow it: sigma=0.644,
                    # q=7e-6, T=5.6e7, delta(1.6425) ~ 4.3e-13, 0.516 % after the passes, eight grids of 1-4 M
                    # points, 8.6 s, for the same interval.)
                    return best_lower, best_upper
                split_kinds = False
            # (The first grid is not kept through the search: up to 235 MB at 2^22 points, and the grids below compose
            # their own.)
            composed = alone = None
            searched = self._delta_by_epsilon_search(
                groups, direction, epsilon, best_lower, best_upper, slope, irrelevant_below
            )
            if searched[2]:
                return searched[0], searched[1]
            # (Not where the split composition applies by default and ran before: with the search's slope, far
            # steeper than the guide's, these passes halved the width at sigma=1.19, q=5.7e-8, T=4.8e7,
            # delta(0.00242) ~ 4e-14, 35 % -> 17 %, but cost 0.5-1.2 s for nothing at sigma=9.88, q=2.3e-8,
            # T=7.6e6 and sigma=1.06, q=3e-7, T=3.8e7.)
            if split_kinds and searched[0] > 0.0:
                # Many hits at a small rate, beyond the split composition's usual range (as in an epsilon
                # query's last pass): split passes at the epsilon error the search's slope allows, the second
                # at the slope the first measured, before the whole grids below (sigma=0.644, q=7e-6, T=5.6e7,
                # delta(1.64): the search left [3.50e-13, 4.95e-13], and four more grids, 1.9 s, did not narrow it).
                lower_now, upper_now, done, aimed = self._split_delta_passes(
                    groups, direction, epsilon, searched[0], searched[1], searched[3], irrelevant_below
                )
                if done:
                    return lower_now, upper_now
                searched = (lower_now, upper_now, False, aimed)
            if searched[1] - searched[0] <= _SEARCH_CLOSE * self._relative_accuracy * searched[1]:
                # (sigma=0.5, q=1e-7, T=1e7, delta(0.008): [1.092e-6, 1.119e-6] from the search, then
                # 21 s of refinements that did not narrow it.)
                return searched[0], searched[1]
            # The grids below keep their own stopping tests (judged on their own gaps, not on the
            # search's): both answers are certified and are intersected at the end. They only try to
            # narrow a certified answer, so, as after the split composition in an epsilon query,
            # within _FALLBACK_SIZE points (coarsened beyond, still certified): unbounded, they took
            # 34 s at sigma=1.04, q=1.1e-8, T=2.5e5 for 10 % (the epsilon-delta black box at a kink,
            # 2.5x delta after the search, needs only small grids).
            best_lower, best_upper = 0.0, 1.0
            effort = _FALLBACK_SIZE
        else:
            searched = (0.0, 1.0, False, 0.0)
        cap = self._max_size if effort is None else min(effort, self._max_size)  # the loop's largest FFT

        own_relative = 1.0  # the last grid's own gap, relative to its upper bound

        def small_answer() -> float:
            # Within the composed loss's spread of 0 the best tests compare masses near 1/2 with delta
            # (at epsilon = 0, the total variation distance): delta decides on the shared labels
            # (_shared_labels), scaled up while the grids' own gaps are wide (the labels' mass
            # intervals cannot matter there, and the shared labels cost 30 % more per grid: sigma=0.621,
            # q=5.9e-8, T=9.9e7, delta(0), the same interval in 7.5 s instead of 5.6 s). Beyond, the tilt does.
            if epsilon > spread:
                return math.inf
            estimate = best_upper if 0.0 < best_upper < 1.0 else guide.value
            return estimate * max(1.0, own_relative / self._relative_accuracy)

        retilted = 0  # 1 once the first grid has reset the tilt (that grid does not count as a refinement)
        own_previous = math.inf  # the previous grid's own gap
        for refinement in range(_REFINEMENTS + 2):
            if refinement == _REFINEMENTS + 1 and not retilted:
                break
            window = self._delta_window_tail(epsilon, best_upper)
            composed = self._composed(
                groups, direction, discretization, tilt, cut, max_size=effort, window_tail=window,
                thorough=epsilon == 0.0 or tiny, answer=small_answer(),
            )
            lo, up = composed.delta_bounds(np.array([epsilon]))
            # Whether refining pays is judged on each grid's own gap: the interval carried in from
            # the split composition can be narrower than a first grid's (sigma=3.4, q=2.5e-8,
            # T=33222, delta(0): the split's [0, 5.7e-7] stopped the loop at its second grid).
            own_gap = float(up[0]) - float(lo[0])
            own_relative = own_gap / float(up[0]) if float(up[0]) > 0.0 else 1.0
            best_lower, best_upper = max(best_lower, float(lo[0])), min(best_upper, float(up[0]))
            gap = best_upper - best_lower
            if self._discretization is not None or gap <= self._relative_accuracy * best_upper:
                break
            if best_upper <= irrelevant_below:
                return max(best_lower, searched[0]), min(best_upper, searched[1])
            if refinement == 0 and 0.0 < best_upper < 1.0:
                # The Chernoff guide can be orders of magnitude off (tiny q); the first grid measures
                # the local slope of log delta, which sets the tilt and the grid instead.
                step = max(4.0 * discretization, 1e-3 * max(epsilon, 1.0))
                local = _measured_slope(composed, epsilon, best_upper, step)
                if local is not None:
                    # An upper bound still floored by round-off looks flatter than delta is: never
                    # below the guide's slope; the strength follows the measured delta.
                    slope = max(local, guide.slope)
                    measured = min(self._tilt(slope, best_upper), 4.0 * max(tilt, 0.25))
                    if measured > 1.25 * tilt:
                        retilted = 1
                        tilt = measured
                        allowed = self._relative_accuracy / self._log_delta_slope(groups, direction, epsilon, slope)
                        # (No finer than this grid's size allows within the effort: a stronger tilt only
                        # widens the window. sigma=0.644, q=7e-6, T=5.6e7 had asked for 8.3e-7 under a
                        # cap of 2^20 points, and built steps of 1.1e7 cells to find that out.)
                        floor = discretization * composed.size / cap
                        discretization = min(discretization, max(self._grid(groups, direction, allowed, epsilon), floor))
                        continue  # the next grid is judged as a first one (no "stopped paying" test yet)
            # A finer grid only helps where the grid limits the gap: stop once refining stops
            # paying (round-off limits the gap there; more tilt helps, below).
            if best_upper <= 0.0 or (refinement > retilted and own_gap > 0.7 * own_previous):
                break
            own_previous = own_gap
            finer = _refine(discretization, min(own_gap, gap), self._relative_accuracy * best_upper)
            # (As in an epsilon query: no finer than the effort cap allows; beyond it the composer would
            # coarsen again, after building the finer steps: 1.1e7 cells, 3.3 s at sigma=0.644, q=7e-6,
            # T=5.6e7.)
            finer = max(finer, discretization * composed.size / cap)
            if finer > discretization / 1.5:
                break
            discretization = finer
        # Round-off, not the grid, limits the gap where the tilt is too small for this delta.
        # (At epsilon = 0 only on small grids: on long ones a stronger tilt moved the window to the
        # largest losses, T times 22 at sigma=0.33, q=2.8e-8, T=1.5e6, and cost 10-40 s for nothing.)
        boosts = (4.0, 16.0) if epsilon > 0.0 or composed.size < 2**20 else ()
        for boost in boosts:
            if best_upper - best_lower <= self._relative_accuracy * best_upper or best_upper <= irrelevant_below:
                break
            boosted = max(tilt * boost, boost / 4.0)
            window = self._delta_window_tail(epsilon, best_upper)
            composed = self._composed(
                groups, direction, discretization, boosted, cut, max_size=effort, window_tail=window,
                thorough=epsilon == 0.0 or tiny, answer=small_answer(),
            )
            lo, up = composed.delta_bounds(np.array([epsilon]))
            if float(lo[0]) <= best_lower and float(up[0]) >= best_upper:
                break  # more tilt did not help (the tilted tails outgrew the window): a stronger one will not either
            best_lower, best_upper = max(best_lower, float(lo[0])), min(best_upper, float(up[0]))
        if split and best_upper - best_lower > self._relative_accuracy * best_upper and best_upper > irrelevant_below:
            lo, up = self._split_delta(groups, direction, epsilon, best_upper, allowed)  # certified too: intersect
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
        return max(best_lower, searched[0]), min(best_upper, searched[1])

    def _delta_window_tail(self, epsilon: float, upper: float) -> float:
        """The FFT window's cut for a delta query at ``epsilon`` whose upper bound so far is ``upper``.

        At epsilon = 0 delta is the total variation distance, a difference of two masses near 1/2
        that no tilt can lift: the window's charges (about 3 e^cut on each bound) must stay far
        below it. (sigma=8.39, q=2.5e-8, T=25: delta(0) ~ 5.9e-9 was 1.5 % wide at the default
        e^-25.) Elsewhere the tilt puts O(1) mass near epsilon and the default serves.
        """
        if epsilon > 0.0 or not 0.0 < upper < 1.0:
            return _WINDOW_TAIL
        return max(min(math.log(1e-3 * self._relative_accuracy * upper), _WINDOW_TAIL), -700.0)

    def _delta_by_epsilon_search(
        self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, lower: float, upper: float,
        slope: float, irrelevant_below: float,
    ) -> tuple[float, float, bool, float]:
        """Delta bounds at ``epsilon`` from the compositions of an epsilon search at delta ~ delta(epsilon).

        log delta falls with slope ``f`` (``_log_delta_slope``) in epsilon, so a relative delta accuracy ``r``
        is an epsilon accuracy ``r / (f epsilon)``: the search runs at that accuracy
        (kept within [2e-5, 0.05]) for the delta inside ``[lower, upper]``, and a
        :class:`_DeltaProbe` keeps the delta bounds of every composition it builds. At most two
        rounds, the second aimed at the first one's interval. Returns (lower, upper, met, the slope
        lambda measured on the best composition, or the last one aimed at).
        """
        probe = _DeltaProbe(epsilon, self._relative_accuracy, lower, upper, irrelevant_below)
        accuracy = self._relative_accuracy
        aimed, aimed_slope = math.inf, slope
        for round_ in range(2):
            if not 0.0 < probe.upper < 1.0:
                break
            estimate = math.sqrt(probe.lower * probe.upper) if probe.lower > 0.0 else 0.1 * probe.upper
            if not estimate >= _SEARCH_FLOOR:
                break
            if round_ > 0:
                # Again only where the first round's own best grid shows a clearly different
                # delta or slope (the first grid's slope can be far off at tiny q).
                measured = probe.slope()
                slope = measured if measured is not None else slope
                if not (estimate < 0.5 * aimed or slope > 2.0 * aimed_slope or slope < 0.5 * aimed_slope):
                    break
            aimed, aimed_slope = estimate, slope
            falls = self._log_delta_slope(groups, direction, epsilon, slope)
            self._relative_accuracy = min(max(accuracy / (falls * epsilon), 2e-5), 0.05)
            self._probe = probe
            self._coarse_tail = 10.0 * math.floor(self._query_tail(groups, estimate) / 10.0)
            try:
                self._epsilon_one_direction(groups, direction, estimate)
            except _DeltaMet:
                pass
            finally:
                self._relative_accuracy = accuracy
                self._probe = None
                self._coarse_tail = _NO_QUERY
            if probe.met():
                break
        measured = probe.slope()
        # (The grids below re-run the best one from its arguments: its composition, up to 235 MB at 2^22 points, is
        # not kept through them.)
        probe.release()
        grid = probe.best_grid
        if not probe.met() and measured is not None and grid is not None and 0.0 < probe.upper < 1.0:
            # The search's grids were tilted for the slope it aimed at; where its best grid measures a far
            # steeper one, that grid once more at the tilt the measured slope asks for (sigma=1.72, q=8.4e-8,
            # T=4.1e7, delta(0.00159) ~ 1.3e-10: aimed at 9231, measured 14600; the same grid of 4M points
            # gives 1.51 % at tilt 7000 and 0.96 % at 10000).
            tilt = self._tilt(measured, math.sqrt(max(probe.lower, 1e-300) * probe.upper))
            if tilt > 1.25 * float(grid["tilt"]):
                try:
                    probe(self._composed(groups, direction, **{**grid, "tilt": tilt}))
                except _DeltaMet:
                    pass
                probe.release()
        grid = probe.best_grid
        if not probe.met() and grid is not None and 0.0 < probe.upper < 1.0:
            # The search's grids cut their windows for an epsilon query (e^-25 of the tilted mass per side); where
            # delta is small because the composed spread is, the tilt lifts it only a few e-folds over that mass
            # and the cut's charges swamp it (_epsilon_window_tail): the best grid once more with the cut the
            # queried epsilon needs (sigma=1547, q=3.6e-7, T=1.3e5, delta(3.25e-7) ~ 1.089e-12: [1.0888e-12,
            # 1.1589e-12] with the default cut, upper bound 1.0907e-12 at e^-40 on the same grid).
            # (Not where the estimate asks for the deepest cut: the tilt is then past the saddle point, the lift
            # estimated from the guides is negative, and the cut is not what keeps the interval wide: sigma=0.678,
            # q=2.2e-8, T=9.6e7, delta(8.4e-4), 5.7 % wide, 1.4 s for the same interval at e^-120.)
            known = math.sqrt(probe.lower * probe.upper) if probe.lower > 0.0 else probe.upper
            cut = self._epsilon_window_tail(groups, direction, known, float(grid["tilt"]), epsilon)
            if _DEEPEST_WINDOW_TAIL < cut < float(grid.get("window_tail", _WINDOW_TAIL)) - 1.0:
                try:
                    probe(self._composed(groups, direction, **{**grid, "window_tail": cut}))
                except _DeltaMet:
                    pass
        return probe.lower, probe.upper, probe.met(), measured if measured is not None else aimed_slope

    def get_delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        """A certified upper bound on delta(epsilon); see :meth:`delta_bounds`."""
        return self.delta_bounds(epsilon).upper

    # -- epsilon ----------------------------------------------------------------------------

    @_holding_memory
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
            ``upper`` is ``inf`` where no finite epsilon can be certified (the
            mechanism's delta at every epsilon is at least ``delta``).
        """
        d = _check.delta_array(delta)
        lower = np.zeros_like(d)
        upper = np.zeros_like(d)
        groups = self._groups()
        if not groups:
            return Bounds(unwrap(lower), unwrap(upper))
        tests = _threshold_steps(groups)
        single = self._single_gaussian(groups)
        for index, target in np.ndenumerate(d):
            if single is not None:
                lo_one, up_one = gaussian_step_epsilon_bounds(single[0], single[1], float(target))
                # (inf where the closed form leaves the double range, epsilon > 700: the grid answers.)
                if math.isfinite(up_one) and up_one - lo_one <= self._relative_accuracy * up_one:
                    lower[index], upper[index] = lo_one, up_one
                    continue
            # The coarse steps cut their tails as the query's steps do, on a coarser scale of
            # tails (multiples of 10, rounded down) so that nearby queries share them.
            self._coarse_tail = 10.0 * math.floor(self._query_tail(groups, float(target)) / 10.0)
            try:
                lo_all, up_all = self._epsilon_bounds_one(groups, tests, float(target))
            finally:
                self._coarse_tail = _NO_QUERY
            if single is not None:  # both certified: keep their intersection
                lo_all, up_all = max(lo_all, lo_one), min(up_all, up_one)
            if lo_all == 0.0 < up_all:
                # The interval reaches down to 0: where delta(0), the total variation distance, is at most the target,
                # epsilon is 0 (certified by delta(0)'s upper bound). (sigma=0.517, q=2.1e-7, T=67, delta=2.92e-6:
                # [0, 1.8e-7] from the grids, whose cells cannot resolve epsilon near 0; delta(0) is in [2.8191e-6,
                # 2.8210e-6], so epsilon = 0.)
                if float(self.delta_bounds(0.0).upper) <= float(target):
                    up_all = 0.0
            lower[index] = lo_all
            upper[index] = up_all
        return Bounds(unwrap(lower), unwrap(upper))

    def _single_gaussian(self, groups: list[tuple[_Spec, int]]) -> tuple[float, float] | None:
        """(sigma, q) when the history is one Poisson-subsampled Gaussian step: answered in closed form."""
        if self._discretization is not None or len(groups) != 1:
            return None
        spec, count = groups[0]
        if not isinstance(spec, _Spec) or spec.kind != "gaussian" or count != 1:
            return None
        return float(spec.parameters[0]), float(spec.sampling_probability)

    def _near_enough(self, lower: float, upper: float) -> bool:
        """Whether ``[lower, upper]`` is within twice the target and within _ISSUE_WIDTH (the width issue 10 allows),
        at the default accuracy only: where the next step would cost seconds (a grid of 2^22 points, an epsilon
        search), such an interval answers. A stricter ``relative_accuracy`` asked for is always met."""
        if self._relative_accuracy < _DEFAULT_ACCURACY or not math.isfinite(upper):
            return False
        return upper - lower <= min(2.0 * self._relative_accuracy, _ISSUE_WIDTH) * upper

    def _settled_below(self, lower: float, upper: float) -> float:
        """Below what the next direction's upper bound cannot change the answer, given the directions
        done so far: their lower bound, or their upper bound where their interval is within twice the
        target (the answer, the maximum over the directions, is then at most that wide whatever the
        next direction's lower bound; only a lower bound above theirs could narrow it).

        (sigma=6.6, q=4.5e-7, T=9.6e7, delta(0.0023): the remove direction gave [5.678e-8, 5.707e-8],
        0.50 %; the add direction's first grid 5.707e-8 as its upper bound, and three more grids, 3 s,
        for an add interval that left the answer as it was.)
        """
        if upper - lower <= 2.0 * self._relative_accuracy * upper:
            return upper
        return lower

    def _epsilon_bounds_one(
        self, groups: list[tuple[_Spec, int]], tests: list[tuple[float, float, float]] | None, target: float
    ) -> tuple[float, float]:
        """(lower, upper) on epsilon(target), max over the directions."""
        lo_all, up_all = 0.0, 0.0
        # epsilon = max over the directions: the direction the guide says is larger goes
        # first, and the other is refined only while its upper bound exceeds that lower bound.
        order = sorted(self._directions(groups), key=lambda r: -self._guide_epsilon(groups, r, target).value)
        # At large noise the sum test's lower bound is about the exact epsilon (see sum_test.py), and the grids
        # then only have to bring their upper bound within the target of it.
        sum_first = tests is not None and self._sum_test_first(tests)
        floor = sum_test_epsilon_lower(tests, target, order[0]) if tests is not None and sum_first else 0.0
        for direction in order:
            settled = self._settled_below(lo_all, up_all)
            lo, up = self._epsilon_one_direction(
                groups, direction, target, settled, floor if direction == order[0] else 0.0
            )
            # (A direction whose upper bound is below the other's lower bound cannot raise the maximum; nor one
            # dismissed at once by its Chernoff bound, (0, settled): its tests cost more than its grid would have.
            # The bench grid's sigma=1.1, T=1000 took 5.6 ms instead of 2.8 where the bound's factor dismissed it.)
            dismissed = lo == 0.0 and up == settled > 0.0
            if tests is not None and lo < (1.0 - self._relative_accuracy) * up and up > lo_all and not dismissed:
                lo = max(lo, min(threshold_epsilon_lower(tests, target, direction), up))
                if floor == 0.0:
                    lo = max(lo, min(sum_test_epsilon_lower(tests, target, direction), up))
            lo_all, up_all = max(lo_all, lo), max(up_all, up)
        return lo_all, up_all

    def _sum_test_first(self, tests: list[tuple[float, float, float]] | None) -> bool:
        """Whether the sum test's lower bound is taken before the grids: Poisson-subsampled Gaussian steps at a
        noise of at least _SUM_TEST_SIGMA, where it is within a small fraction of the target of the exact value
        (below it only where the grids miss: it costs a few milliseconds, a fast query's whole time)."""
        return tests is not None and min(s for s, _, _ in tests) >= _SUM_TEST_SIGMA and sum_test_applies(tests)

    def get_epsilon(self, delta: ArrayLike) -> float | NDArray[np.float64]:
        """A certified upper bound on epsilon(delta); see :meth:`epsilon_bounds`."""
        return self.epsilon_bounds(delta).upper

    def get_epsilon_details(self, delta: float) -> dict[str, Any]:
        """Epsilon for one delta with its certified lower bound, for reports and the CLI."""
        lower, upper = self.epsilon_bounds(delta)
        return {"epsilon": float(upper), "kind": "upper bound", "epsilon_lower_bound": float(lower)}

    def _epsilon_one_direction(
        self, groups: list[tuple[_Spec, int]], direction: str, delta: float, irrelevant_below: float = 0.0,
        floor: float = 0.0,
    ) -> tuple[float, float]:
        """Bounds for one direction; refinement stops once the upper bound is <= ``irrelevant_below``.
        ``floor``: a certified lower bound known before (the sum test's)."""
        if irrelevant_below > 0.0 and self._chernoff_upper(groups, direction, irrelevant_below) <= delta:
            # Certified: delta(irrelevant_below) <= delta here, so this direction's epsilon is at
            # most the other direction's lower bound and cannot change the maximum.
            return 0.0, irrelevant_below
        # No composed loss exceeds the sum of the steps' largest losses (where those are bounded: the
        # add direction at a tiny rate, where a grid's cells would round each loss ~q up to a cell).
        ceiling = sum(c * _loss_ceiling(spec, direction) for spec, c in groups)
        if ceiling <= irrelevant_below:
            return 0.0, ceiling
        guide = self._guide_epsilon(groups, direction, delta)
        best_lower, best_upper = min(floor, ceiling), ceiling
        split = self._split_applies(groups)
        # (The split composition's kinds at a small rate with more hits than _split_applies takes: a last pass.)
        split_kinds = not split and self._split_kinds_apply(groups)

        def met() -> bool:
            gap_ok = math.isfinite(best_upper) and best_upper - best_lower <= self._relative_accuracy * best_upper
            return gap_ok or best_upper <= irrelevant_below

        if self._probe is None and self._one_rare_first(groups, direction):
            # At most about one hit in all at a tiny rate: the composition with at most one rare step
            # usually answers alone, in a fraction of the split composition's time (sigma=0.519,
            # q=6.2e-7, T=2008: 0.03 s against 4 s of split passes for a delta query's search).
            lo, up = self._one_rare_epsilon(groups, direction, delta, guide.value)
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
            if met():
                return best_lower, best_upper
            # (No split composition where it is within _ONE_RARE_CLOSE targets and the guide, which the split
            # passes are aimed from, lies orders of magnitude above it: sigma=0.451, q=3.4e-8, T=91838, delta=2.3e-5,
            # 0.003 expected hits, had [6.13e-5, 6.26e-5] from it in 0.09 s, and the split passes, aimed at the
            # guide's 0.33, spent 9.7 s for [3.2e-5, 3.5e-4]. Nearer the guide they are cheap and narrow it:
            # sigma=1.1, q=2.8e-7, T=29675, delta=1.3e-7, 0.86 % -> 0.1 % in a few ms, the guide 60x the answer.)
            close = up - lo <= _ONE_RARE_CLOSE * self._relative_accuracy * up
            if 0.0 < lo and close and guide.value > _ONE_RARE_FAR * up:
                split = False

        effort = self._max_size
        # (With two or more expected hits the whole grid answers first and the split composition
        # only where it misses: sigma=0.304, q=1.2e-7, T=3.4e7 took 7.5 s in the split for a
        # lower bound of 4.6, where the whole grid alone gives [11.508, 11.533] in 0.3 s.)
        rate, count = groups[0][0].sampling_probability, groups[0][1]
        if split and rate <= _SPLIT_FIRST_RATE and count * rate < _SPLIT_FIRST_HITS:
            # Few rare steps at a tiny rate: the split composition (certified too) usually answers alone.
            lo, up = self._split_epsilon(groups, direction, delta, guide.value, irrelevant_below)
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
            split = False
            if met():
                return best_lower, best_upper
            if math.isfinite(best_upper):
                # The whole-grid composer only tries to narrow a certified answer here: it is kept
                # to grids of at most _FALLBACK_SIZE points (coarsened beyond, still certified).
                effort = min(effort, _FALLBACK_SIZE)
        aim = guide.value
        discretization = self._grid(groups, direction, self._allowed(aim, irrelevant_below), aim)
        refinement, reaims, slope = 0, 0, guide.slope
        # At strict accuracies the FFT power's round-off, charged to both bounds, limits the gap about as often as the
        # grid does: every grid then sums its live frequencies directly in extended precision (thorough), where that
        # fits the budget (sigma=0.4, q=1e-5, T=1e5, delta=1e-6 at 5e-5: the lower bound stayed at 2.99794 on
        # plain grids from 1e-4 to 1.5e-5, which took 0.50 s to find out; thorough, the second grid meets the
        # target, 0.21 s. sigma=0.3, q=1e-5, T=1e5 at 1e-5: one grid of 2^20 points instead of two, 0.47 -> 0.31 s;
        # the bench grid's queries at 1e-4 to 5e-4 keep their intervals and times). (Not at the default accuracy,
        # where a stalled grid is rarely round-off's: sigma=1.19, q=5.7e-8, T=4.8e7, delta=4.5e-14, the add
        # direction, a thorough grid cost 0.5 s for nothing; nor inside a delta query's search, whose grids only
        # aim it: delta(2) at sigma=0.8, q=1e-4, T=1e4 took 0.93 s instead of 0.15 s.)
        thorough = self._relative_accuracy < _THOROUGH_BELOW and self._probe is None
        just_split = False
        deep: float | None = None  # an estimate of epsilon once the window's cut is deepened (see below) ...
        tilt_cap: float | None = None  # ... and the saddle point's tilt there
        if irrelevant_below > 0.0 and self._discretization is None and self._probe is None:
            # This direction matters only if its epsilon exceeds the other's lower bound: the upper
            # masses alone, composed first (a third of the transforms, and the labels' window is not
            # needed), usually show it does not (sigma=1, q=1e-3, T=1e7: the add direction's 0.10 s
            # composition -> 0.06 s). Otherwise the grid loop below composes the labels too.
            _, up, _ = self._epsilon_at(groups, direction, delta, slope, discretization, effort, lower=False)
            best_upper = min(best_upper, up)
            if best_upper <= irrelevant_below:
                return best_lower, best_upper
        while refinement <= _REFINEMENTS:
            # (Epsilon's relative error from the labels' mass intervals is about 2 T _MASS_WIDTH / epsilon at
            # every slope: the best known epsilon decides on the shared labels.)
            # (Scaled up while the best interval is wide: the shared labels cost 30 % more per grid.)
            known = best_lower if best_lower > 0.0 else (best_upper if math.isfinite(best_upper) else aim)
            wide = (best_upper - best_lower) / best_upper if math.isfinite(best_upper) and best_upper > 0.0 else 1.0
            known *= max(1.0, wide / self._relative_accuracy)
            lo, up, size = self._epsilon_at(
                groups, direction, delta, slope, discretization, effort, answer=known, thorough=thorough, deep=deep,
                tilt_cap=tilt_cap,
            )
            previous_gap = best_upper - best_lower
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
            gap = best_upper - best_lower
            target = self._relative_accuracy * best_upper if math.isfinite(best_upper) else 0.0
            if self._discretization is not None or gap <= target or best_upper <= irrelevant_below:
                break
            # The Chernoff guide comes from a coarse step that cannot see a spike of tiny losses
            # (tiny q, large sigma: every loss ~ q): it can overshoot epsilon by orders of
            # magnitude (sigma=2, q=1e-8, T=2, delta=1e-14: guide 3.2e-3, epsilon ~ 1e-7), and a
            # grid aimed at it cannot resolve the answer. Where the certified interval shows
            # the answer far below the aim, the grid is aimed again at what is known.
            known = best_lower if best_lower > 0.0 else best_upper
            if reaims < _REAIMS and math.isfinite(known) and known < 0.25 * aim:
                # Where the grid, not the spread of the loss, set the answer, the error is first
                # order in the width (the spike is spread over whole cells): width <= allowed.
                allowed = self._allowed(known, irrelevant_below)
                aimed = max(min(self._grid(groups, direction, allowed, known), allowed), _MIN_DISCRETIZATION)
                # (Kept to steps of at most _REAIM_CELLS cells: finer ones cost seconds to build.)
                span = max(float(self._coarse(spec, direction).max_abs_loss) for spec, _ in groups)
                if aimed < discretization and size * discretization / aimed <= effort and span / aimed <= _REAIM_CELLS:
                    reaims += 1
                    aim, discretization = known, aimed
                    # ... and so is the tilt (the window keeps e^-25 of tilted mass per side, which
                    # must decay to delta near epsilon): from the Chernoff slope of the new grid's
                    # own steps, which resolve the spike the coarse ones could not.
                    fine = self._fine_guide(groups, direction, delta, aimed)
                    if math.isfinite(fine.value) and fine.slope > 0.0:
                        slope = fine.slope
                    continue  # judged as a first grid (no "stopped paying" test)
                # Where the grid is already fine enough for what is known, the tilt may still be the coarse
                # guide's: aimed again from this grid's own steps where their slope differs by more than half
                # (sigma=0.7, q=1e-5, T=1e8, delta=1e-13, the add direction: slope 5.5 against 28.6 on the
                # grid's steps; its upper bound stayed at 2.48, where the other direction's is 1.89).
                # (Not where the split composition applies: it follows where the grids miss, and these grids
                # cost more than it: sigma=0.61, q=2.3e-7, T=1.8e7, delta=1.7e-6, the add direction, 1.2 s more.)
                fine = _Guide(math.inf, 0.0) if self._split_applies(groups) else self._fine_guide(
                    groups, direction, delta, discretization
                )
                if math.isfinite(fine.value) and fine.slope > 0.0 and slope > 0.0 and not 2.0 / 3.0 <= fine.slope / slope <= 1.5:
                    reaims += 1
                    aim, slope = known, fine.slope
                    continue
            if refinement > 0 and gap > 0.7 * previous_gap:  # the grid no longer limits the gap
                estimate = best_lower if best_lower > 0.0 else 0.5 * best_upper
                if deep is None and not just_split and 0.0 < estimate < math.inf:
                    # ... or the tilt and the window's cut do, where delta is small because the composed spread is
                    # (not because epsilon is far out): the Chernoff slope then overshoots the saddle point at
                    # epsilon, and the tilt lifts delta only a few e-folds over the tilted mass, which the default
                    # cut charges (sigma=516, q=3.7e-8, T=6628, delta=7.5e-13: [1.48e-8, 2.05e-8] on grids of 1e-11
                    # and 1e-12, [1.906e-8, 1.913e-8] on the second with the cut at e^-37.5; sigma=1165,
                    # q=1.04e-8, T=3797, delta=1.2e-13: [0, 2.19e-9], then [1.72e-9, 1.75e-9] at the saddle's tilt
                    # with the cut at e^-50). This grid once more at the saddle's tilt (where below the one taken)
                    # with the cut that tilt needs. Only once stalled: the cut from the estimate alone deepened
                    # grids that met the target without it.
                    taken = self._tilt(slope, delta)
                    saddle = self._saddle_tilt(groups, direction, estimate, taken)
                    cut = self._epsilon_window_tail(groups, direction, delta, saddle, estimate)
                    if cut < _WINDOW_TAIL - 1.0 or saddle < 0.9 * taken:
                        deep, tilt_cap = estimate, saddle
                        continue
                break
            finer = _refine(discretization, gap, target)
            if size * discretization / finer > effort:  # the next grid would not fit the effort cap
                break
            largest = _fft_points(size * discretization / finer) >= _LARGEST_GRID
            if largest and self._near_enough(best_lower, best_upper):
                # At the default accuracy an interval within 1 % does not go on to the largest grids: they cost
                # seconds for little (sigma=7.2, q=5e-8, T=2.9e7, delta=1.3e-5: 0.74 % on 2^21 points, then 0.60 % on
                # 2^22, 0.84 s more per direction, still above 0.5 %). A stricter accuracy asked for keeps them.
                break
            if (
                split and self._probe is None and count * rate <= _SPLIT_BEFORE_HITS
                and _fft_points(size * discretization / finer) >= (
                    _SPLIT_BEFORE_POINTS if irrelevant_below > 0.0 else _SPLIT_BEFORE_WHOLE
                )
            ):
                # Where this direction's upper bound only has to fall below the other's lower bound, the split
                # composition (run after this loop where it misses anyway) before a grid this large, with few
                # expected hits: its first, cheap passes usually do that (sigma=0.61, q=2.3e-7, T=1.8e7,
                # delta=1.7e-6, 4 hits, the add direction: 0.18 s against 1.9 s for a grid of 2^21 points). Not
                # with many hits: its cost grows with them (sigma=0.628, q=1.4e-5, T=6.8e6, 98 hits: 2.7 s
                # against 0.8 s for 2^21 points). For the whole interval (the first direction) only before a grid
                # of 2^22 points: before smaller ones its passes cost more than the grids (sigma=1.19, q=5.7e-8,
                # T=4.8e7, delta=4.5e-14: 1.4 s of split passes where two grids take 0.5 s), before that one less
                # (sigma=0.61 above, the remove direction: 1.3 s for the grid, 0.5 s for the split composition,
                # which meets the target). Both certified: intersected.
                lo, up = self._split_epsilon(
                    groups, direction, delta, best_upper if math.isfinite(best_upper) else guide.value, irrelevant_below
                )
                best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
                split = False
                just_split = True
                if met():
                    break
            if (
                split_kinds and self._probe is None
                and _fft_points(size * discretization / finer) >= _SPLIT_BEFORE_POINTS
                and best_lower > 0.0 and math.isfinite(best_upper) and count * rate <= _SPLIT_BEFORE_MANY_HITS
            ):
                # Many hits at a small rate: the split composition's pass at the allowed error (run after this
                # loop where it misses anyway) before a grid this large. It is cheap where the grid knows the
                # interval, and the grids close in slowly there (sigma=0.754, q=1.5e-5, T=8.5e6, 130 hits,
                # delta=1.3e-12: grids of 2^20, 2^21 and 2^22 points, 2.1 s, for [0.64288, 0.6461]; the pass
                # gives [0.6442, 0.64548] in 0.02 s). Not with more hits: its inversions grow with them (sigma=0.7,
                # q=2e-5, T=5e7, 1000 hits: 2.3 s per direction for passes that missed). Both certified: intersected.
                best_lower, best_upper = self._split_last_try(groups, direction, delta, best_lower, best_upper)
                split_kinds = False
                just_split = True
                if met():
                    break
            discretization = finer
            refinement += 1
        # (Not inside a delta query's search: there it runs at accuracies ~1e-4 and took 24-38 s per
        # direction at sigma=1.06, q=3e-7, T=3.8e7 without narrowing the answer.)
        if split and not met() and self._probe is None:  # both answers are certified: keep their intersection
            lo, up = self._split_epsilon(
                groups, direction, delta, best_upper if math.isfinite(best_upper) else guide.value, irrelevant_below
            )
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
        if not met() and self._probe is None and split_kinds and best_lower > 0.0 and math.isfinite(best_upper):
            # Many hits at a small rate, beyond the split composition's usual range: where the whole grid
            # could not get fine enough within max_size (rare large losses set a small delta, and the error
            # is first order in the grid), one split pass at the allowed error, aimed at the grid's interval
            # (sigma=0.644, q=7e-6, T=5.6e7, delta=4.4e-13: [1.61706, 1.66182] on 2^21 points -> [1.64164,
            # 1.64232] in 0.8 s more; the split's own located passes took 18 s to get there).
            best_lower, best_upper = self._split_last_try(groups, direction, delta, best_lower, best_upper)
        if not met() and self._probe is None and self._one_rare_applies(groups):
            # Few steps at a tiny rate with a small delta: the tail of one hit sets epsilon (certified too).
            aim = best_lower if best_lower > 0.0 else (best_upper if math.isfinite(best_upper) else guide.value)
            lo, up = self._one_rare_epsilon(groups, direction, delta, aim)
            best_lower, best_upper = max(best_lower, lo), min(best_upper, up)
        return best_lower, best_upper

    def _allowed(self, aim: float, irrelevant_below: float) -> float:
        """The epsilon error a grid aimed at ``aim`` may make: the accuracy target, or, where only the
        upper bound must get below the other direction's lower bound, half the way there."""
        allowed = self._relative_accuracy * aim
        if irrelevant_below > aim:
            allowed = max(allowed, 0.5 * (irrelevant_below - aim))
        return allowed

    def _saddle_tilt(self, groups: list[tuple[_Spec, int]], direction: str, epsilon: float, upto: float) -> float:
        """The tilt lambda in [0, upto] whose tilted composed loss has its mean at ``epsilon``, K'(lambda) = epsilon
        (K the guides' cumulant, its slope by central differences); ``upto`` where K'(upto) is still below
        epsilon. Tilting there puts the most tilted mass near epsilon (the saddle point approximation of delta;
        Daniels 1954); the Chernoff slope is above it wherever the Chernoff bound overshoots epsilon."""
        cumulant = self._estimated_cumulant(groups, direction)

        def mean(s: float) -> float:
            h = 1e-4 * s
            return float(cumulant(s + h) - cumulant(s - h)) / (2.0 * h)

        if not (upto > 0.0 and math.isfinite(upto)) or not mean(upto) > epsilon:
            return upto
        if mean(1e-6 * upto) >= epsilon:
            return 0.0  # epsilon at or below the mean loss: no tilt
        low, high = 0.0, upto
        for _ in range(60):
            middle = 0.5 * (low + high)
            if middle <= 0.0 or not math.isfinite(mean(middle)):
                break
            low, high = (middle, high) if mean(middle) < epsilon else (low, middle)
        return low

    def _epsilon_window_tail(
        self, groups: list[tuple[_Spec, int]], direction: str, delta: float, tilt: float, epsilon: float
    ) -> float:
        """The FFT window's cut for an epsilon query at ``delta`` on a grid tilted by ``tilt``, epsilon about
        ``epsilon``.

        The window leaves out e^cut of the tilted mass per side, charged to the bounds; the tilt lifts delta
        near epsilon by ``tilt epsilon - K(tilt)`` e-folds relative to that mass (K the composed log-MGF, from
        the guides' cumulant). Where the composed loss is near normal with a spread V far below epsilon that
        lift is about log(1 / delta) and the default cut serves; where delta is small because V is (sigma=516,
        q=3.7e-8, T=6628, delta=7.5e-13: every loss ~ q / sigma, the answer 3.3 standard deviations out, the
        lift 2.6 e-folds at the tilt taken), the default cut's charges were 15-25 % of delta and the interval
        stayed 24 % wide on every grid. The cut is kept 1e-3 of the target below delta after the lift (and
        never above the default).
        """
        if not (tilt > 0.0 and 0.0 < epsilon < math.inf and 0.0 < delta < 1.0):
            return _WINDOW_TAIL
        lift = tilt * epsilon - float(self._estimated_cumulant(groups, direction)(tilt))
        if not math.isfinite(lift):
            return _WINDOW_TAIL
        return max(min(math.log(1e-3 * self._relative_accuracy * delta) + lift, _WINDOW_TAIL), _DEEPEST_WINDOW_TAIL)

    def _epsilon_at(
        self, groups: list[tuple[_Spec, int]], direction: str, delta: float, slope: float, discretization: float,
        max_size: int | None = None, lower: bool = True, answer: float = math.inf, thorough: bool = False,
        deep: float | None = None, tilt_cap: float | None = None,
    ) -> tuple[float, float, int]:
        """Bounds from the grid of width ``discretization`` (and the largest FFT size it used); ``answer``:
        the size of answer the labels must resolve (``_shared_labels``); ``thorough``: see ``_composed``;
        ``deep``: an estimate of epsilon for a window cut deeper than the default (``_epsilon_window_tail``);
        ``tilt_cap``: the most tilt taken (``_saddle_tilt``)."""
        # Each attempt gives certified bounds, so the tightest is kept. Where the tilt puts the
        # mass at huge clamped losses, the window cannot certify epsilon (upper = inf) or the
        # answer lies below the window: a smaller tilt is tried, down to none.
        best_lower, best_upper, size = 0.0, math.inf, 0
        # With the quadrature guides (_bulk_dominated) the steps' tails are cut for the smaller of this query's delta
        # and the delta the probe is after: the cut is charged to every delta the grid certifies. (sigma=1.06,
        # q=3e-7, T=3.8e7, delta(0.015) ~ 3.5e-15: a search aimed at 1.5e-10 cut at e^-49, and its grid of 2^22
        # points certified [4.01e-15, 4.34e-15]; cut for the probe's 4.9e-15, the same grid gives [4.01e-15,
        # 4.04e-15].) (Not elsewhere: the deeper cuts' longer windows cost sigma=0.996, q=9.9e-7, T=3773,
        # delta(0.00953) 0.3 -> 1.1 s for the same interval.)
        probe_upper = self._probe.upper if self._probe is not None and self._fine_lines else math.inf
        cut_at = probe_upper if 0.0 < probe_upper < delta else delta
        for _attempt in range(6):
            tilt = self._tilt(slope, delta) if tilt_cap is None else min(self._tilt(slope, delta), tilt_cap)
            grid: dict[str, Any] = dict(
                discretization=discretization, tilt=tilt, log_tail=self._query_tail(groups, cut_at), max_size=max_size,
                lower=lower, answer=answer, thorough=thorough,
                window_tail=(
                    _WINDOW_TAIL if deep is None else self._epsilon_window_tail(groups, direction, delta, tilt, deep)
                ),
            )
            probe = self._probe
            if probe is not None and lower and 0.0 < probe.irrelevant_below < probe.upper and self._fine_lines:
                # A direction that only has to fall below the other's lower bound: the upper masses alone first,
                # a fifth of the labelled grid's sequences (sigma=1.19, q=5.7e-8, T=4.8e7, delta(0.0024)'s add
                # direction: 4.0e-14 against the other's 4.13e-14 on a grid of 4M points; 0.3 s alone, 1.2 s
                # with the labels). Where it does not, the labelled grid follows as before.
                probe(self._composed(groups, direction, **{**grid, "lower": False}))
            composed = self._composed(groups, direction, **grid)
            if probe is not None:
                probe(composed, grid)
            lo, up, below_window = composed.epsilon_bounds(delta)
            best_lower, best_upper, size = max(best_lower, lo), min(best_upper, up), max(size, composed.size)
            if (not below_window and math.isfinite(up)) or tilt == 0.0:
                break
            slope = slope / 4.0 if slope > 0.25 else 0.0  # tilt less
        return best_lower, best_upper, size


_SPLIT_KINDS = ("gaussian", "laplace", "mixture")
_SPLIT_MAX_SIGMA = 4.0  # no split composition of Gaussian steps with more noise than this ...
_SPLIT_SIGMA_AGAIN = 10.0  # ... up to this much (see _large_noise)
_LARGEST_GRID = 2**22  # grids this large are refined to at the default accuracy only from intervals ...
_ISSUE_WIDTH = 0.01  # ... wider than this (relative): the width issue 10 allows
_DEFAULT_ACCURACY = 0.005  # PLDAccountant's default relative_accuracy
_GUIDE_FAR_OFF = 1e-2  # a delta query's first grid below this times the guide's delta: its tilt is retaken
_SPLIT_MAX_HITS = 100.0  # try the split composition first when T q is at most this
_SPLIT_MAX_RATE = 1e-4  # ... and q at most this (above it the whole-grid composer is tight and faster)
_SPLIT_FIRST_RATE = 1e-6  # at or below this rate it goes first; above, only when the whole grid misses its target
_SPLIT_FIRST_HITS = 2.0  # ... and only with fewer expected hits than this (more: the whole grid first)
_FLOORED = 1e3  # a delta query's direction whose first upper bound is this far above the other's lower: no labels there
_SPLIT_RARE = 3.0  # expected number of rare steps the cut aims at
_TV_SIZE = 2**21  # the largest whole grid of a delta query at epsilon = 0 (total variation)
_TV_STEP_CELLS = 2**16  # ... whose first grid resolves one step's spread with at most this many cells per step
_FALLBACK_SIZE = 2**20  # the largest whole grid tried after the split composition has answered
_KEPT_COMPOSED_BYTES = 2**28  # the compositions an accountant keeps, with the next one, hold at most this (_make_room)
_KEPT_VECTORS = 7  # ... counting a composition on N points at this many vectors of N doubles
_SPLIT_BEFORE_POINTS = 2**20  # an epsilon query's split composition goes before a whole grid of this many points
_SPLIT_BEFORE_HITS = 10.0  # ... where at most this many hits are expected in all (T q)
_SPLIT_BEFORE_WHOLE = 2**22  # ... and, for the whole interval (the first direction), before a grid of this many
_SPLIT_BEFORE_MANY_HITS = 400.0  # ... and its last pass (many hits at a small rate) where at most this many
_THOROUGH_BELOW = 1e-3  # epsilon queries below this relative accuracy sum live frequencies directly (thorough)
_LAST_TRY_SIZE = 2**20  # the split composition's last pass at a width of the allowed error
_ONE_RARE_CHARGE = 0.1  # the terms with two or more rare steps may cost this share of the target's delta
_ONE_RARE_CELLS = 2.0  # band cells per allowed epsilon error (epsilon queries, delta at epsilon = 0)
_ONE_RARE_CELLS_DELTA = 20.0  # ... in delta queries at epsilon > 0
_ONE_RARE_FINER = 4.0  # an epsilon query's band this many times as fine once its aim is right ...
_ONE_RARE_FINER_MISS = 10.0  # ... where the interval is at most this many times the target
_ONE_RARE_TV_FINEST = 256.0  # the finest band of a delta(0) query, in cells per allowed error
_ONE_RARE_TV_ATTEMPTS = 6  # ... and its most compositions (coarser bands where one does not fit, re-aims, finer ones)
_ONE_RARE_DELTA_FINEST = 1280.0  # ... and of a delta query at epsilon > 0
_ONE_RARE_EARLY_HITS = 1.0  # a delta query tries it before the grids with at most this many expected hits
_ONE_RARE_TILT = 1.0  # the band's tilt, times its saddle point at epsilon
_ONE_RARE_FIRST_HITS = 0.01  # it goes first at q <= _SPLIT_MAX_RATE with at most this many expected hits
_ONE_RARE_TV_FIRST_HITS = 100.0  # ... and in a delta(0) query with at most this many
_ONE_RARE_FIRST_SPAN = 1e3  # ... and where a step's largest loss is at least this many times q
_ONE_RARE_CLOSE = 5.0  # an epsilon query skips the split composition where it has answered within this many targets
_ONE_RARE_FAR = 1e3  # ... and the guide lies at least this many times above its upper bound


def _cumulant_of(parts: list[tuple[float, NDArray[np.float64], NDArray[np.float64]]]) -> Any:
    """``K(lambda) = sum count log sum_j e^{log_mass_j + lambda loss_j}`` over ``(count, log_mass, loss)`` parts.

    The returned function takes a float or an array of slopes.
    """

    def one(slope: float) -> float:
        total = 0.0
        for count, log_mass, loss in parts:
            if log_mass.size == 0:
                return -math.inf
            v = log_mass + slope * loss
            top = float(v.max())
            if not math.isfinite(top):
                return top
            total += count * (top + math.log(float(np.exp(v - top).sum())))
        return total

    def cumulant(slope: Any) -> Any:
        # One slope at a time: a (slopes x cells) array costs more in memory traffic than the loop.
        if np.ndim(slope) == 0:
            return one(float(slope))
        return np.array([one(float(x)) for x in np.asarray(slope).ravel()])

    return cumulant


def _power_sum_part(step: Any) -> tuple[float, float, float, NDArray[np.float64]] | None:
    """One step's upper masses for ``_estimated_cumulant_of``: ``(log scale, first loss, width, masses)``,
    the masses ``e^{log_mass - log scale}`` from the first to the last non-empty cell; None where
    there is no such cell or the masses span more than e^700 (the exact sums are used then)."""
    log_mass = np.asarray(step.log_upper)
    finite = np.flatnonzero(np.isfinite(log_mass))
    if finite.size == 0:
        return None
    first, last = int(finite[0]), int(finite[-1])
    window = log_mass[first : last + 1]
    top = float(window.max())
    if float(window[np.isfinite(window)].min()) - top < -700.0:
        return None
    mass = np.exp(window - top)  # (-inf: an empty cell, mass 0)
    return top, (step.upper_low + first) * step.discretization, float(step.discretization), mass


def _estimated_cumulant_of(
    parts: list[tuple[float, tuple[float, float, float, NDArray[np.float64]] | None]], exact: Any
) -> Any:
    """``K(lambda) = sum count log sum_j e^{log_mass_j + lambda loss_j}`` for slopes >= 0, estimated by
    ``_core.pld.log_power_sum`` on each part's uniform grid of losses; ``exact()`` gives the
    exact function (``_cumulant_of``), used for negative slopes and parts without a grid."""
    if any(part is None for _, part in parts):
        return exact()

    ready = [(count, part) for count, part in parts if part is not None]

    def cumulant(slope: Any) -> Any:
        if isinstance(slope, float):  # the golden-section search: plain floats, no array overhead
            if not slope >= 0.0:
                return exact()(slope)
            value = 0.0
            for count, (top, first_loss, width, mass) in ready:
                value += count * (top + slope * first_loss + float(_core.pld.log_power_sum(mass, slope * width)))
            return value if not math.isnan(value) else math.inf
        slopes = np.asarray(slope, dtype=np.float64)
        if not bool(np.all(slopes >= 0.0)):
            return exact()(slope)
        flat = slopes.reshape(-1)
        total = np.zeros(flat.size)
        for count, (top, first_loss, width, mass) in ready:
            total += count * (top + flat * first_loss + _core.pld.log_power_sum(mass, flat * width))
        total = np.where(np.isnan(total), math.inf, total)
        return float(total[0]) if slopes.ndim == 0 else total.reshape(slopes.shape)

    return cumulant


def _split_step(
    spec: _Spec, direction: str, discretization: float, ratio: int, tau_index: int, log_tail: float = _NO_QUERY
) -> Any:
    """The (small, rare) parts of one step (``_core.pld``'s split discretisation), tails cut at e^log_tail
    (``_build_step``)."""
    return _part_step(spec, direction, discretization, log_tail, split_ratio=ratio, split_tau=tau_index)


def _part_step(spec: _Spec, direction: str, discretization: float, log_tail: float, **extra: Any) -> Any:
    """One step of a Gaussian, Laplace or mixture spec, whole or cut into parts (``extra``: the split or
    one-rare arguments, or ``shared_labels``); ``log_tail`` as in ``_build_step``."""
    q, d = spec.sampling_probability, discretization
    extra.setdefault("query_tail", log_tail)
    base_tail = max(log_tail, _LOG_TAIL)
    if spec.kind == "gaussian":
        return _core.pld.gaussian_step(spec.parameters[0], q, direction, d, base_tail, _MAX_CELLS, **extra)
    if spec.kind == "laplace":
        return _core.pld.laplace_step(spec.parameters[0], q, direction, d, base_tail, _MAX_CELLS, **extra)
    sigma, sens, probs = spec.parameters
    return _core.pld.mixture_gaussian_step(
        sigma, np.asarray(sens), np.asarray(probs), q, direction, d, base_tail, _MAX_CELLS, **extra
    )


def _one_rare_tilt(band: Any, count: float, epsilon: float) -> float:
    """The tilt of ``count`` band steps for a query at ``epsilon``: _ONE_RARE_TILT times the saddle
    point lambda of their composed upper masses, (count) K'(lambda) = epsilon (0 where epsilon is at
    or below their mean).

    Measured at sigma=1.08, q=3.7e-8, T=132, delta(5.5e-6) ~ 3.1e-13 (tau = 7e-6, saddle 2.4e6,
    windows cut at e^-25): 1.3 % wide (in delta) at 2e6, 0.86 % at 2.5e6, and no certificate from
    3e6 up, where the tilted window outgrows the FFT; the untilted composition is always there
    beside it.
    """
    log_upper = np.asarray(band.log_upper)
    loss = (band.upper_low + np.arange(log_upper.size)) * band.discretization
    finite = np.isfinite(log_upper)
    log_upper, loss = log_upper[finite], loss[finite]
    if log_upper.size == 0 or not epsilon > 0.0:
        return 0.0

    def excess(lam: float) -> float:
        a = log_upper + lam * loss
        w = np.exp(a - a.max())
        return count * float((w * loss).sum() / w.sum()) - epsilon

    if excess(0.0) >= 0.0:
        return 0.0
    top = float(loss.max())
    if count * top <= epsilon:  # epsilon beyond every composed loss: the largest useful slope
        return _ONE_RARE_TILT * 40.0 / max(top, 1e-300)
    high = 1.0 / max(top, 1e-300)
    while excess(high) < 0.0 and high < 1e15:
        high *= 4.0
    low = 0.0
    for _ in range(60):  # excess increases with lambda (the tilted mean does)
        mid = 0.5 * (low + high)
        low, high = (mid, high) if excess(mid) < 0.0 else (low, mid)
        if high - low <= 1e-4 * high:
            break
    return _ONE_RARE_TILT * high


def _spread_variance(step: Any) -> tuple[float, float]:
    """Per step: the variance connect the dots adds, and the variance of the labels' own losses.

    The second is the loss variance of the labelled (merged) pair, a post-processing: at most
    the true one (law of total variance). The first is the upper masses' variance less it.
    """
    d = float(step.discretization)
    log_upper = np.asarray(step.log_upper)
    log_p, log_q = np.asarray(step.log_p), np.asarray(step.log_q)
    if log_upper.size == 0 or log_p.size == 0:
        return 0.0, 0.0
    top = float(log_upper.max())
    mass = np.exp(log_upper - top)
    loss = (step.upper_low + np.arange(log_upper.size)) * d
    mean = float((mass * loss).sum() / mass.sum())
    upper = float((mass * (loss - mean) ** 2).sum() / mass.sum())
    both = np.isfinite(log_p) & np.isfinite(log_q)
    if not both.any():
        return upper, 0.0
    weight = np.exp(log_p[both] - float(log_p[both].max()))
    own = log_p[both] - log_q[both]
    own_mean = float((weight * own).sum() / weight.sum())
    merged = float((weight * (own - own_mean) ** 2).sum() / weight.sum())
    return max(upper - merged, 0.0), merged


def _loss_cumulants(log_mass: NDArray[np.float64], loss: NDArray[np.float64]) -> tuple[float, float, float]:
    """Second, third and fourth cumulants of the losses ``loss`` with log-masses ``log_mass`` (normalised)."""
    if log_mass.size == 0:
        return 0.0, 0.0, 0.0
    mass = np.exp(log_mass - log_mass.max())
    mass /= mass.sum()
    centred = loss - float((mass * loss).sum())
    square = centred * centred
    m2, m3, m4 = (float((mass * x).sum()) for x in (square, square * centred, square * square))
    return m2, m3, m4 - 3.0 * m2 * m2


def _large_noise(spec: _Spec) -> bool:
    """A Gaussian step with noise in (_SPLIT_MAX_SIGMA, _SPLIT_SIGMA_AGAIN]: there the split composition separates
    nothing (a hit's losses stay within a few q of the spike's) and its lower bounds lag the whole grid's, whose
    shared labels and concentrated rounding serve long runs (sigma=7.9, q=1.2e-8, T=2.6e7, delta(1.28e-5): 0.67 % in
    2.3 s with it, 0.45 % in 1.4 s without; sigma=7.2, q=5e-8, T=2.9e7, delta=1.3e-5: 2.3 % with it, the split's
    fallback grids kept to 2^20 points). Beyond _SPLIT_SIGMA_AGAIN, where every loss is ~q / sigma and the sum test
    gives the lower bound, the split composition's upper bound is the better one again (sigma=2320, q=6.7e-7,
    T=2.2e7, delta=4.7e-7: 0.38 % in 1.6 s with it, 2.87 % without)."""
    sigma = float(spec.parameters[0]) if spec.kind == "gaussian" else 0.0
    return _SPLIT_MAX_SIGMA < sigma <= _SPLIT_SIGMA_AGAIN


def _fft_points(points: float) -> int:
    """The power of two an FFT of ``points`` points takes (a grid of 6.6e5 points is one of 2^20)."""
    return 1 << max(math.ceil(math.log2(max(points, 1.0))), 0)


def _stage_ratio(ratio: int) -> int:
    """``ratio`` (at least 1) rounded up to a multiple of the largest power of two at most ``ratio / 64``.

    G's stages coarsen by a power of two that must divide the rare grid's ratio (``_split_stages``):
    left to rounding, whether G could go in stages was luck (``PLDAccountant._split_epsilon`` says
    where each serves). At most 1.6 % more (the fine grid that much finer).
    """
    ratio = max(1, ratio)
    power = 1 << max(int(math.floor(math.log2(ratio / 64.0))), 0) if ratio >= 128 else 1
    return -(-ratio // power) * power


def _split_stages(small: Any, g_count: float, ratio: int, tilt: float) -> tuple[int, int]:
    """``(B, r)`` for composing a split composition's G (``g_count`` small steps) in stages, or ``(0, 1)``.

    As ``PLDAccountant._stages``: where G's window (16 standard deviations of the composed small
    part) is at least ``_STAGE_FROM`` points and G is near normal; ``r`` a power of two that divides
    the rare grid's ``ratio`` (G's coarser grid must divide the rare one), at most ``(g_count / 2)^(1/4)``.
    Not for G's tilts above ``_SPLIT_STAGE_TILT`` (``log(1 / delta) / epsilon``: tiny epsilons, whose
    lower bounds are small differences of G's label masses near 1/2, which the blocks' per-entry
    round-off charges would swamp: at sigma=1.04, q=1.1e-8, T=2.5e5, delta(1.7e-5) at a tilt of 1e6 went
    from 1.0 % to 6.4 % wide in stages; sigma=0.5, q=1e-7, T=1e7 at a tilt of 1317 keeps its width).
    """
    if g_count < 1024 or tilt > _SPLIT_STAGE_TILT:
        return 0, 1
    r = 1 << int(math.floor(math.log2((g_count / 2.0) ** 0.25)))
    while r > 1 and ratio % r:
        r //= 2
    if r < 4:
        return 0, 1
    log_upper = np.asarray(small.log_upper)
    finite = np.isfinite(log_upper)
    loss = (small.upper_low + np.nonzero(finite)[0]) * float(small.discretization)
    variance, third, fourth = _loss_cumulants(log_upper[finite], loss)
    total = g_count * variance
    window = 16.0 * math.sqrt(total)
    d = float(small.discretization)
    if not total > 0.0 or window / d < _STAGE_FROM or log_upper.size * d > _STAGE_SUPPORT * window:
        return 0, 1
    if abs(g_count * third) > _STAGE_SHAPE * total**1.5 or abs(g_count * fourth) > _STAGE_SHAPE * total**2:
        return 0, 1
    return 4 * r * r, r


def _beyond_ratio(d: float, count: int, variance: float, support: float, limit: int) -> int | None:
    """The coarsening ratio r (blocks of B = 4 r^2 steps) of stages at width ``d`` whose two FFTs cost least,
    or None where some window exceeds ``limit`` points for every r >= 4 with B <= ``count``.

    A block's window holds its tilted tails at e^-60 (about 23 of its standard deviations, ``2 r sqrt(variance)``)
    and one step's ``support``; the final one about 16 of the composed loss's standard deviations on the grid r
    times as wide (``PLDAccountant._stages``); the fine grid is ``d / sqrt(1.25)`` (``_compose_on_grid``). An FFT
    costs its size, the next power of two: the block's grows with r and the final one's shrinks, so for each
    size of the block the largest r that keeps it is the best, and those few r are compared.
    """
    fine = d / math.sqrt(1.25)
    per_ratio = 46.0 * math.sqrt(variance) / fine  # the block's window per unit of r
    final_points = 16.0 * math.sqrt(count * variance) / fine  # the final window times r
    low = max(4, math.ceil(final_points / limit))
    high = min(math.floor((limit - support / fine) / per_ratio), math.floor(math.sqrt(count / 4.0)))
    if not per_ratio > 0.0 or low > high:
        return None

    def cost(r: int) -> float:
        return sum(2.0 ** math.ceil(math.log2(max(w, 2.0))) for w in (r * per_ratio + support / fine, final_points / r))

    candidates = {high}
    size = 2.0
    while size < limit:
        size *= 2.0
        r = math.floor((size - support / fine) / per_ratio)
        if low <= r <= high:
            candidates.add(r)
    return min(sorted(candidates), key=cost)


def _rare_cuts(
    losses: NDArray[np.float64], log_mass: NDArray[np.float64], steps: float, allowed: float
) -> tuple[float, float]:
    """Losses of the grid beyond which the rare part's upper mass on each side, ``steps`` times over, is at
    most ``allowed``: the largest negative one below and the smallest positive one above (-inf and +inf
    where there is none)."""
    if not (allowed > 0.0) or losses.size == 0:
        return -math.inf, math.inf
    limit = math.log(allowed) - math.log(steps)
    with np.errstate(divide="ignore"):
        # Mass strictly above and strictly below each loss: reversed and forward cumulative log-sums, shifted.
        above = np.append(np.logaddexp.accumulate(log_mass[::-1])[::-1][1:], -math.inf)
        below = np.insert(np.logaddexp.accumulate(log_mass)[:-1], 0, -math.inf)
    high_fits = (above <= limit) & (losses > 0.0)
    low_fits = (below <= limit) & (losses < 0.0)
    high = float(losses[int(np.argmax(high_fits))]) if high_fits.any() else math.inf
    low = float(losses[len(losses) - 1 - int(np.argmax(low_fits[::-1]))]) if low_fits.any() else -math.inf
    return low, high


def _m_saddle_tilt(small: Any, rare: Any, steps: float, rare_max: float, epsilon: float, cap: float) -> float:
    """The tilt t in [0, cap] that maximises ``t epsilon - log Z(t)``, Z(t) the tilted total of the split
    composition's M = sum_{h <= H} C(T, h) s^(H - h) r^h (s, r the small and rare parts' upper masses):
    where M's tilted mass sits at epsilon, so that its entries there stand furthest above the round-off
    of the tilted total (the saddle point of M's cumulant; the value there is its Chernoff exponent).
    A choice of tilt only (any tilt gives certified bounds): searched on 49 points, geometric from cap /
    2^12, and 0."""
    if not (cap > 0.0 and epsilon > 0.0):
        return 0.0
    tilts = np.concatenate(([0.0], cap * np.geomspace(2.0**-12, 1.0, 49)))

    def log_norms(part: Any) -> NDArray[np.float64]:
        log_mass = np.asarray(part.log_upper)
        loss = (part.upper_low + np.arange(log_mass.size)) * part.discretization
        if log_mass.size > 1024:
            # (The small part can have 1e5-1e6 cells: merged into 512 blocks at their largest loss, an upper
            # bound on each block's tilted mass for t >= 0, and close enough to choose a tilt.)
            starts = np.arange(0, log_mass.size, -(-log_mass.size // 512))
            with np.errstate(invalid="ignore"):
                log_mass = np.logaddexp.reduceat(log_mass, starts)
            loss = np.append(loss[starts[1:] - 1], loss[-1])
        finite = np.isfinite(log_mass)
        if not finite.any():
            return np.full(tilts.size, -math.inf)
        loss = loss[finite]
        exponents = log_mass[finite][None, :] + tilts[:, None] * loss[None, :]
        top = exponents.max(axis=1)
        return np.asarray(top + np.log(np.exp(exponents - top[:, None]).sum(axis=1)), dtype=np.float64)

    h = np.arange(int(rare_max) + 1, dtype=np.float64)
    binomial = math.lgamma(steps + 1.0) - np.array([math.lgamma(x + 1.0) + math.lgamma(steps - x + 1.0) for x in h])
    # (Parts without mass give -inf norms, and 0 x -inf is NaN: those terms are dropped.)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_s, log_r = log_norms(small), log_norms(rare)
        terms = binomial[None, :] + (rare_max - h)[None, :] * log_s[:, None] + h[None, :] * log_r[:, None]
        terms = np.where(np.isnan(terms), -math.inf, terms)
        top = terms.max(axis=1)
        log_z = top + np.log(np.exp(terms - np.where(np.isfinite(top), top, 0.0)[:, None]).sum(axis=1))
        score = tilts * epsilon - log_z
    score = np.where(np.isfinite(score), score, -math.inf)
    if not np.isfinite(score).any():
        return 0.0
    return float(tilts[int(np.argmax(score))])


def _binomial_tail_count(steps: float, rate: float, allowed: float) -> int:
    """Smallest H with the Chernoff bound on P(Binomial(steps, rate) > H) at most ``allowed``."""
    if rate <= 0.0:
        return 0
    for h in range(1, 400):
        x = (h + 1) / steps
        if x >= 1.0:
            return h
        if x > rate:
            kl = x * math.log(x / rate) + (1.0 - x) * (math.log1p(-x) - math.log1p(-rate))
            if -steps * kl <= math.log(allowed):
                return h
    return 400


_WINDOW_POINTS = re.compile(r"its window spans (\d+) points")


def _refine(discretization: float, gap: float, target: float) -> float:
    """A finer grid for a gap that missed its target: the error scales like D^2 (with a margin)."""
    shrink = math.sqrt(target / gap) * 0.8 if gap > 0.0 and target > 0.0 and math.isfinite(gap) else 0.5
    return max(discretization * min(max(shrink, 0.1), 0.7), _MIN_DISCRETIZATION)


_MINIMISE_GRID = np.geomspace(1e-3, 1e4, 15)  # (np.geomspace costs 40 us a call, a hundredth of a fast query)
_MINIMISE_GRID.flags.writeable = False


def _minimise(objective: Any, highest: float = 1e4, log_scale: bool = False) -> _Guide:
    """Minimise a quasi-convex function of lambda > 0 over a log grid, then by golden section.

    The grid spans [1e-3, 1e4], and goes on up to ``highest`` where the minimum sits at its
    top and the extension finds a clearly smaller value (``log_scale``: the objective is a
    log, compared by differences instead of ratios), and down to _GUIDE_SLOPE_LOWEST where
    it sits at its bottom.
    Returns the value (``inf`` if nowhere finite) and the minimiser (0 when the
    objective is not finite anywhere: no tilt).
    """
    grid = _MINIMISE_GRID
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # overflow at large slopes means "not here"
        values = np.asarray(objective(grid), dtype=np.float64)
    values = np.where(np.isfinite(values), values, math.inf)
    best = int(np.argmin(values))
    top = float(values[best])
    if best == grid.size - 1 and highest > grid[-1] and (top > -700.0 if log_scale else top > 0.0):
        # The minimum lies at or beyond the top slope: the grid goes on, same spacing, and is kept
        # where it finds a value under half the top one (a log value lower by 1: ``log_scale``)
        # (every loss tiny, ~q: the minimum lies near 1/q). A bounded loss queried near its
        # largest value also keeps decreasing there, but only towards that value (epsilon), or
        # is already negligible there (log delta below -700): those stay at the top slope.
        more = grid[-1] * np.sqrt(10.0) ** np.arange(1, 1 + 2 * round(math.log10(highest / grid[-1])))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            extra = np.asarray(objective(more), dtype=np.float64)
        extra = np.where(np.isfinite(extra), extra, math.inf)
        if float(extra.min()) < (top - 1.0 if log_scale else 0.5 * top):
            grid = np.concatenate([grid, more])
            values = np.concatenate([values, extra])
            best = int(np.argmin(values))
    if best == 0 and math.isfinite(top):
        # The minimum lies at or below the bottom slope: the grid goes on down, same spacing, to
        # _GUIDE_SLOPE_LOWEST (composed losses with a spread of thousands, where epsilon ~ 1e4-1e9: the
        # Chernoff slope is about sqrt(2 log(1/delta)) over that spread, and a slope of 1e-3 tilted the
        # window past the answer: sigma=0.1215, q=0.0366, T=1.2e7, delta=2.3e-5 certified [0, 1.34e7]
        # where the answer is 1.33e7).
        less = grid[0] / np.sqrt(10.0) ** np.arange(1, 1 + 2 * round(math.log10(grid[0] / _GUIDE_SLOPE_LOWEST)))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            extra = np.asarray(objective(less), dtype=np.float64)
        extra = np.where(np.isfinite(extra), extra, math.inf)
        grid = np.concatenate([less[::-1], grid])
        values = np.concatenate([extra[::-1], values])
        best = int(np.argmin(values))
    if not math.isfinite(values[best]):
        return _Guide(math.inf, 0.0)
    lo = math.log(grid[max(best - 1, 0)])
    hi = math.log(grid[min(best + 1, grid.size - 1)])
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)

    def f(x: float) -> float:
        v = float(objective(math.exp(x)))
        return v if math.isfinite(v) else math.inf

    with np.errstate(over="ignore", invalid="ignore"):  # (once for the whole search: it costs microseconds)
        fa, fb = f(a), f(b)
        for _ in range(17):  # the bracket (a factor 10 in lambda) shrinks to 1e-3 of its log-width
            if fa < fb:
                hi, b, fb = b, a, fa
                a = hi - ratio * (hi - lo)
                fa = f(a)
            else:
                lo, a, fa = a, b, fb
                b = lo + ratio * (hi - lo)
                fb = f(b)
    x = a if fa < fb else b
    value = float(min(fa, fb, values[best]))
    slope = math.exp(x) if min(fa, fb) <= values[best] else float(grid[best])
    return _Guide(value, slope)


register_accountant("pld", PLDAccountant)
