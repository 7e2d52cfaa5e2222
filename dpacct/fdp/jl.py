r"""DP-SGD with JL-projected gradient norms (DP-SGD-JL), accounted for the algorithm as it is run.

Bu, Gopi, Kulkarni, Lee, Shen, Tantipongpipat, "Fast and Memory Efficient
Differentially Private-SGD via JL Projections", NeurIPS 2021, arXiv:2102.03013,
estimate each per-sample gradient norm from ``r`` Gaussian projections:
``est = ||g|| sqrt(W / r)`` with ``W ~ chi^2_r``. Clipping by the estimate gives a
record the contribution norm ``C sqrt(r / W)`` in the worst case over ``||g||``,
so the sensitivity is itself random, with a heavy upper tail (``E[r/W] = inf``
for ``r <= 2``). Two models, named by what they assume:

``projections="per_example"``
    Every record gets its own projections (the paper's Lemma 4.3 and Theorem
    4.1): one step is the pair ``N(0, 1)`` against the mixture
    ``M = E_W N(mu_W, 1)``, ``mu_W = sqrt(r / W) / sigma``, Poisson-subsampled.
    Certified for that implementation.

``projections="shared"`` (default)
    One set of ``r`` projections per batch, as the jvp trick computes them. The
    paper's pair is then *not* a worst case, because every record's contribution
    depends on the same ``W``: at ``q = 1, T = 1, r = 5, sigma = 2`` the paper's
    pair gives ``delta(2) = 1.44e-3`` while the datasets ``{x}`` against ``{x, x}``
    give ``3.85e-3`` (2.7 times more). Revealing the projections is
    post-processing in reverse (the released output is a function of the output
    with ``W`` attached), so the mechanism that also publishes ``W`` is a valid
    upper bound: per step its PLD is the ``W``-mixture of Poisson-subsampled
    Gaussian PLDs with noise multiplier ``sigma sqrt(W / r)``; in the example it
    gives ``delta(2) = E_W[delta_Gauss(mu_W)(2)] = 6.64e-3``. The lower bound
    reported for this model is the largest over pairs that datasets realise:
    the record ``x`` (huge gradient in a fixed direction, every other record's
    gradient zero) present ``k`` times against ``k - 1`` times, for small ``k``.
    The copies are sampled independently and share the step's ``W``, so one
    step outputs ``M mu_W + Z`` along the gradient with ``M ~ Binomial(k, q)``
    against ``Binomial(k - 1, q)`` (:func:`copies_cells`); ``k = 1`` is the
    paper's pair. The same two datasets realise every step of the run and the
    steps draw fresh noise, sampling and projections, so the run's outputs are
    the ``T``-fold product of the step's pair: any lower bound on the product's
    divergence (here: the labelled cells, composed) is a lower bound for the
    algorithm. In the example ``k = 2`` certifies ``delta(2) >= 3.7e-3``, above
    the paper pair's 1.44e-3; at small ``q`` and ``delta`` (``sigma = 1, q =
    0.01, T = 1000, r = 30, delta = 1e-5``) the paper's pair stays the larger
    (epsilon >= 2.00 against 1.88 for ``k = 2``). The truth lies between.

How the integral over ``W`` is made rigorous (dpacct's construction):

* ``W``'s range is cut into buckets ``[w_b, w_{b+1})``. For the **upper bound**
  each bucket's ``W`` is replaced by its lower end (a larger shift: the Gaussian
  pair with the larger mean dominates the smaller by post-processing, and for the
  mixture pair every hockey-stick divergence, ``sup_t E_nu[Phi(mu - t)] - gamma
  Phi(-t)`` and its swap, is monotone in ``mu``, so first-order stochastic
  dominance of the mixing law gives a dominating pair, Blackwell's theorem in
  Dong, Roth, Su, arXiv:1905.02383, Theorem 2.10, carrying it through
  composition); the bottom bucket ``[0, w_cap)`` becomes a perfectly revealing
  step (loss ``+inf`` when the record is sampled). For the **lower bound** each
  bucket uses its upper end and the top bucket ``mu = 0``.
* The bucket masses are regularised incomplete gamma functions (SciPy), with the
  rounding slack moved to the revealing bucket.
* ``w_cap`` is set so that the revealed mass ``q P(W < w_cap)`` over the whole run
  is at most ``1e-3`` of the queried delta, unless that needs a shift above
  ``mu = 40`` (loss range ~800 per step); then ``mu = 40`` is used and the larger
  revealed mass is charged, if it is at most half of delta. Otherwise (the
  heavy tails of ``r = 1, 2``, where ``P(mu_W > m) ~ m^{-r}``; ``r = 3`` at small
  deltas) the revealed mass is set to half of delta ("tail budget") whatever
  shift that needs: the remaining buckets reach shifts of 1e5 to 1e6 noise units
  and losses near 1e12, the grid is correspondingly coarse (widths of 1e5 and
  more; connect the dots stays an upper bound at any width), and epsilon at
  ``delta = 1e-5`` is astronomically large but finite, said so in the result's
  details. The lower bounds keep the ``mu = 40`` cap (a lower bound holds for
  any cap), so their gap to the upper bound is then wide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpacct import _check, _core

__all__ = ["DPSGDJLMechanism", "PROJECTIONS"]

PROJECTIONS: tuple[str, ...] = ("shared", "per_example")

MU_HARD = 40.0  # largest finite shift used for a bucket (see the module notes)
_LOG_TAIL = -80.0
_MAX_CELLS = 2**24
_CELL = 0.02  # width of the output cells of the copies pair (in noise units) ...
_FINE_CELLS = 2500  # ... and the most cells of that kind (memory: cells x buckets doubles per array)


@dataclass(frozen=True, slots=True, kw_only=True)
class DPSGDJLMechanism:
    """One DP-SGD-JL step: Poisson sampling, clipping by JL-estimated norms, Gaussian noise.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm ``C``, finite and ``> 0``.
    sampling_probability : float
        Poisson inclusion probability ``q`` in ``[0, 1]``.
    jl_dim : int
        Number ``r >= 1`` of Gaussian projections used to estimate each norm.
    projections : {"shared", "per_example"}
        ``"shared"`` (default): one set of projections per batch, as computed by the
        jvp trick; accounted by the projection-revealed mixture (certified upper
        bound). ``"per_example"``: every record has its own projections; the
        paper's pair (certified for that implementation only). See
        :mod:`dpacct.fdp.jl`.

    Examples
    --------
    >>> DPSGDJLMechanism(noise_multiplier=1.0, sampling_probability=0.01, jl_dim=30).projections
    'shared'
    """

    noise_multiplier: float
    sampling_probability: float
    jl_dim: int
    projections: Literal["shared", "per_example"] = "shared"

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))
        object.__setattr__(self, "sampling_probability",
                           _check.probability("sampling_probability", self.sampling_probability))
        r = _check.count("jl_dim", self.jl_dim)
        if r < 1:
            msg = f"jl_dim must be an integer >= 1, got {self.jl_dim!r}"
            raise ValueError(msg)
        object.__setattr__(self, "jl_dim", r)
        _check.one_of("projections", self.projections, PROJECTIONS)


# -- the buckets of W ~ chi^2_r ----------------------------------------------------------------


@dataclass(frozen=True)
class Buckets:
    """Edges ``w_cap = e_0 < e_1 < ... < e_K`` and masses of ``[e_k, e_{k+1})``, ``[0, e_0)``, ``[e_K, inf)``."""

    edges: NDArray[np.float64]
    masses: NDArray[np.float64]  # len K
    bottom: float  # P(W < e_0), raised by the rounding slack of the others (for upper bounds)
    top: float  # P(W >= e_K), rounded down
    bottom_low: float  # P(W < e_0) rounded down (for lower bounds: the slack goes to shift 0 there)


def _chi2_cdf(r: int, w: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(special.gammainc(r / 2.0, w / 2.0), dtype=np.float64)


def _chi2_sf(r: int, w: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(special.gammaincc(r / 2.0, w / 2.0), dtype=np.float64)


def make_buckets(r: int, w_cap: float, quantiles: int, spread_count: int = 0) -> Buckets:
    """Buckets of ``chi^2_r`` from ``w_cap`` up.

    The union of ``quantiles`` equal-probability buckets (fine where the mass is) and
    ``spread_count`` (default ``quantiles``) log-spaced ones between the 1e-10 and
    1 - 1e-10 quantiles (a bounded relative width of the shift ``mu_W``, fine where
    delta is steep in it), plus geometric buckets in the far tails.
    """
    inner = np.arange(1, quantiles) / quantiles
    bulk = 2.0 * special.gammaincinv(r / 2.0, inner)
    w_lo = max(2.0 * float(special.gammaincinv(r / 2.0, 1e-10)), w_cap)
    w_hi = 2.0 * float(special.gammainccinv(r / 2.0, 1e-10))
    spread = np.geomspace(w_lo, w_hi, spread_count if spread_count > 0 else quantiles)
    low_tail = np.geomspace(w_cap, w_lo, 16) if w_lo > w_cap else np.array([w_cap])
    w_max = 2.0 * float(special.gammainccinv(r / 2.0, 1e-18))
    high_tail = np.geomspace(w_hi, w_max, 8)
    edges = np.unique(np.concatenate([[w_cap], low_tail, bulk, spread, high_tail]))
    edges = edges[edges >= w_cap]
    # Masses: differences of the CDF below the median, of the survival function above
    # (no cancellation in either tail); relative error ~1e-14 each.
    cdf = _chi2_cdf(r, edges)
    sf = _chi2_sf(r, edges)
    lower_half = cdf <= 0.5
    diff_cdf = np.diff(cdf)
    diff_sf = -np.diff(sf)
    masses = np.where(lower_half[1:], diff_cdf, diff_sf)
    masses = np.maximum(masses, 0.0) * (1.0 - 1e-12)  # rounded down: the slack goes to the bottom
    top = float(sf[-1]) * (1.0 - 1e-12)
    bottom = max(0.0, 1.0 - math.fsum(masses.tolist()) - top)
    bottom = max(bottom, float(cdf[0]))
    return Buckets(edges=edges, masses=masses, bottom=bottom, top=top, bottom_low=float(cdf[0]) * (1.0 - 1e-12))


def cap_for_budget(*, r: int, noise_multiplier: float, budget: float, fallback: float = 0.0) -> float:
    """The ``w_cap`` of the revealed bucket ``[0, w_cap)`` of one step.

    ``P(W < w_cap) <= budget`` where that needs shifts ``mu <= MU_HARD``;
    otherwise the cap at ``mu = MU_HARD`` if its mass is at most ``fallback``
    (charged); otherwise (the heavy tails of ``r = 1, 2``) ``P(W < w_cap) =
    fallback``, whatever shift that needs: epsilon is then astronomically large
    and the grid coarse, but finite.
    """
    w_hard = r / (noise_multiplier * MU_HARD) ** 2
    if budget <= 0.0:
        return w_hard
    w_budget = 2.0 * float(special.gammaincinv(r / 2.0, min(budget, 0.5)))
    if w_budget >= w_hard or fallback <= budget:
        return max(w_budget, w_hard)
    if float(_chi2_cdf(r, np.array([w_hard]))[0]) <= fallback:
        return w_hard
    return 2.0 * float(special.gammaincinv(r / 2.0, min(fallback, 0.5)))


# -- one discretised step of either model --------------------------------------------------------


def _shift(noise_multiplier: float, r: int, w: float) -> float:
    return math.sqrt(r / w) / noise_multiplier


def shared_step(
    *, noise_multiplier: float, sampling_probability: float, r: int, w_cap: float, quantiles: int,
    direction: str, discretization: float, cache: dict[Any, Any],
) -> Any:
    """The projection-revealed step: a labelled mixture of subsampled Gaussian steps (upper) and its optimistic twin (lower)."""
    b = make_buckets(r, w_cap, quantiles)
    q = sampling_probability
    d = discretization

    def gaussian(w: float) -> Any:
        key = ("g", w, q, direction, d)
        if key not in cache:
            cache[key] = _core.pld.gaussian_step(noise_multiplier * math.sqrt(w / r), q, direction, d,
                                                 _LOG_TAIL, _MAX_CELLS)
        return cache[key]

    steps = [gaussian(float(w)) for w in b.edges]
    # Upper: bucket k uses its lower edge (steps[k]); the top bucket the last edge; the bottom reveals.
    upper_steps = steps
    upper_weights = [*b.masses.tolist(), b.top]
    # Lower: bucket k uses its upper edge (steps[k + 1]); the bottom uses e_0; the top is dropped
    # (label -inf: P- and Q-mass of the same outputs, allowed by the data-processing bound).
    lower_steps = [steps[0], *steps[1:]]
    lower_weights = [b.bottom_low, *b.masses.tolist()]
    if direction == "remove":
        # (1 - q) N(0) + q delta_inf against N(0): +inf with prob q, else loss log(1 - q) <= 0 (to index 0).
        extra_infinity, extra_index, extra_mass = q * b.bottom, 0, (1.0 - q) * b.bottom
    elif q < 1.0:
        # N(0) against (1 - q) N(0) + q delta_inf: loss -log(1 - q) everywhere, rounded up to the grid.
        extra_infinity, extra_index, extra_mass = 0.0, math.ceil(-math.log1p(-q) / d), b.bottom
    else:
        extra_infinity, extra_index, extra_mass = b.bottom, 0, 0.0
    return _core.fdp.mix_steps(upper_steps, upper_weights, extra_infinity, extra_index, extra_mass, 0.0,
                               lower_steps, lower_weights)


def per_example_step(
    *, noise_multiplier: float, sampling_probability: float, r: int, w_cap: float, quantiles: int,
    direction: str, discretization: float,
) -> Any:
    """The paper's pair, Poisson-subsampled: upper from the dominating mixing law, lower from the dominated one."""
    b = make_buckets(r, w_cap, quantiles)
    q = sampling_probability
    d = discretization
    s = noise_multiplier
    # Upper: shifts at the lower edges (and at e_K for the top), the bottom bucket revealing.
    # P_total = rho delta_inf + (1 - rho) P' with rho = q p0 and P' the subsampled mixture of the
    # rest at rate q' = q (1 - p0) / (1 - q p0).
    p0 = b.bottom
    rest = np.concatenate([b.masses, [b.top]])
    shifts_up = np.array([_shift(s, r, float(w)) for w in b.edges])
    rho = q * p0
    q_rest = q * (1.0 - p0) / (1.0 - rho) if rho < 1.0 else 1.0
    # The law of W given W >= e_0, each mass rounded down, the slack on the largest shift
    # (a stochastically larger mixing law: still dominating).
    law = rest / (1.0 - p0) * (1.0 - 1e-12) if p0 < 1.0 else np.zeros_like(rest)
    law[0] += max(0.0, 1.0 - math.fsum(law.tolist()))
    upper = _core.pld.mixture_gaussian_step(1.0, shifts_up, law, q_rest, direction, d, _LOG_TAIL, _MAX_CELLS)
    # Lower: shifts at the upper edges; the bottom bucket at e_0; the top bucket, which also
    # takes every rounding slack, at shift 0 (a stochastically smaller mixing law: dominated).
    shifts_low = np.concatenate([[shifts_up[0]], shifts_up[1:], [0.0]])
    top_low = max(0.0, 1.0 - b.bottom_low - math.fsum(b.masses.tolist()))
    weights_low = np.concatenate([[b.bottom_low], b.masses, [top_low]])
    lower = _core.pld.mixture_gaussian_step(1.0, shifts_low, weights_low, q, direction, d, _LOG_TAIL, _MAX_CELLS)
    if direction == "remove":  # the revealed part: loss +inf; the rest keeps its loss minus |log(1 - rho)| (rounded up)
        return _core.fdp.mix_steps([upper], [1.0 - rho], rho, 0, 0.0, 0.0, [lower], [1.0])
    # add: the loss of (Q, (1 - rho) P' + rho delta_inf) is that of (Q, P') plus -log(1 - rho).
    shift = -math.log1p(-rho) if rho < 1.0 else math.inf
    if not math.isfinite(shift):
        msg = "the per-example JL step reveals the record with probability 1; lower the tail budget"
        raise ValueError(msg)
    return _core.fdp.mix_steps([upper], [1.0], 0.0, 0, 0.0, shift, [lower], [1.0])


# -- the realised pair "x with k - 1 copies" under shared projections (a lower bound) -------------


def _cell_edges(top_shift: float, bulk_shift: float) -> NDArray[np.float64]:
    """Edges of a partition of the output line: width ``_CELL`` up to ``bulk_shift + 9`` (at most
    ``_FINE_CELLS`` cells there: wider where the span is larger), widening geometrically beyond."""
    width = max(_CELL, (bulk_shift + 19.0) / _FINE_CELLS)
    fine = np.arange(-10.0, bulk_shift + 9.0 + width, width)
    if top_shift + 10.0 > fine[-1]:
        coarse = np.geomspace(fine[-1] + 10.0, top_shift + 20.0, 200) - 10.0
        fine = np.concatenate([fine, coarse[coarse > fine[-1] + _CELL]])
    return np.asarray(fine, dtype=np.float64)


def _cell_masses(x: NDArray[np.float64], shift: NDArray[np.float64]) -> NDArray[np.float64]:
    """``Phi(x_{i+1} - s) - Phi(x_i - s)`` for the cells between consecutive ``x`` (``-inf``, ``inf`` at the ends).

    Each difference is taken in the tail that does not cancel (absolute error a
    few ulps of the cell's mass, covered by the 1e-12 rounding of the callers).
    Returns ``(len(x) + 1, len(shift))``.
    """
    z = x[:, None] - shift[None, :]
    with np.errstate(invalid="ignore"):
        cdf = special.ndtr(z)
        sf = special.ndtr(-z)
    ones = np.ones((1, shift.size))
    zeros = np.zeros((1, shift.size))
    cdf = np.concatenate([zeros, cdf, ones])
    sf = np.concatenate([ones, sf, zeros])
    upper_tail = np.concatenate([np.zeros((1, shift.size), dtype=bool), z > 0.0])
    out = np.where(upper_tail, sf[:-1] - sf[1:], cdf[1:] - cdf[:-1])
    return np.asarray(np.where(np.isnan(out), 0.0, np.maximum(out, 0.0)), dtype=np.float64)


def _peak_masses(left: NDArray[np.float64], right: NDArray[np.float64], shift: NDArray[np.float64]
                 ) -> NDArray[np.float64]:
    """``Phi(right - s) - Phi(left - s)`` elementwise, by the tail that does not cancel."""
    with np.errstate(invalid="ignore"):
        by_cdf = special.ndtr(right - shift) - special.ndtr(left - shift)
        by_sf = special.ndtr(shift - left) - special.ndtr(shift - right)
    out = np.where(left - shift > 0.0, by_sf, by_cdf)
    return np.asarray(np.maximum(np.nan_to_num(out, nan=0.0), 0.0), dtype=np.float64)


def copies_cells(*, noise_multiplier: float, sampling_probability: float, r: int, copies: int, w_cap: float,
                 quantiles: int, spread: int) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                                          NDArray[np.float64]]:
    r"""Certified cell masses of the pair realised by a record and its copies under shared projections.

    Datasets ``D`` (the record ``x``, huge gradient in a fixed direction, ``k =
    copies`` times) and ``D'`` (``k - 1`` times), all other records with zero
    gradient. Every copy is Poisson sampled on its own and clipped by the *same*
    estimate (one ``W ~ chi^2_r`` per step), so along the gradient the step
    outputs ``X = M mu_W + Z`` with ``mu_W = sqrt(r / W) / sigma``, ``Z ~ N(0,
    1)``, ``M ~ Binomial(k, q)`` under ``D`` and ``Binomial(k - 1, q)`` under
    ``D'``; ``k = 1`` is the paper's pair, ``k = 2, q = 1`` the ``{x, x}``
    against ``{x}`` example.

    Returns ``(p_lower, p_upper, q_lower, q_upper)``: for each cell of a
    partition of the line, the mass under ``D`` and under ``D'`` rounded down
    and up. On a bucket of ``W`` the cell mass ``Phi(b - s) - Phi(a - s)`` at
    ``s = m mu_W`` is unimodal in ``s`` (largest at ``s = (a + b) / 2``), so its
    bucket minimum is at an end of the bucket's ``s``-range and its maximum at
    the point of the range nearest ``(a + b) / 2``: the masses are certified
    brackets, not quadrature estimates.
    """
    k = copies
    q = sampling_probability
    b = make_buckets(r, w_cap, quantiles, spread_count=spread)
    c = math.sqrt(r) / noise_multiplier
    edges_w = b.edges
    # s-ranges (for m = 1) of the buckets: bottom [mu(e_0), inf), [e_i, e_{i+1}), top [e_K, inf) -> [0, mu(e_K)].
    mu_edges = c / np.sqrt(edges_w)
    s_low = np.concatenate([[mu_edges[0]], mu_edges[1:], [0.0]])
    s_high = np.concatenate([[math.inf], mu_edges[:-1], [mu_edges[-1]]])
    mass_low = np.concatenate([[b.bottom_low], b.masses, [b.top]])
    mass_high = np.concatenate([[max(b.bottom, b.bottom_low)], b.masses, [b.top]]) * (1.0 + 3e-12)
    bulk = float(c / math.sqrt(2.0 * special.gammaincinv(r / 2.0, 1e-4)))
    x = _cell_edges(k * float(mu_edges[0]), k * bulk)
    left = np.concatenate([[-math.inf], x])
    right = np.concatenate([x, [math.inf]])
    # The cell's own peak (a cell reaching to -inf or inf has its supremum at an end: s = +-inf).
    middle = np.where(np.isfinite(left) & np.isfinite(right), (left + right) / 2.0,
                      np.where(np.isfinite(left), math.inf, -math.inf))
    per_m_low = [_cell_masses(x, np.zeros(1))[:, 0]]
    per_m_high = [per_m_low[0]]
    for m in range(1, k + 1):
        sum_low = np.zeros(x.size + 1)
        sum_high = np.zeros(x.size + 1)
        for start in range(0, s_low.size, 256):  # blocks of buckets bound the memory
            block = slice(start, start + 256)
            lo_s, hi_s = m * s_low[block], m * s_high[block]
            at_lo = _cell_masses(x, lo_s)
            at_hi = _cell_masses(x, hi_s)
            high = np.maximum(at_lo, at_hi)
            # Cells whose peak lies inside a bucket's s-range reach their maximum there.
            inside = (middle[:, None] > lo_s[None, :]) & (middle[:, None] < hi_s[None, :])
            rows, cols = np.nonzero(inside)
            if rows.size:
                high[rows, cols] = np.maximum(high[rows, cols], _peak_masses(left[rows], right[rows], middle[rows]))
            sum_low += np.minimum(at_lo, at_hi) @ mass_low[block]
            sum_high += high @ mass_high[block]
        per_m_low.append(sum_low)
        per_m_high.append(sum_high)

    def mixed(n: int, side: list[NDArray[np.float64]], factor: float) -> NDArray[np.float64]:
        total = np.zeros_like(side[0])
        for m in range(n + 1):
            total += math.comb(n, m) * q**m * (1.0 - q) ** (n - m) * side[m]
        return total * factor

    down, up = 1.0 - 1e-12, 1.0 + 1e-12
    return mixed(k, per_m_low, down), mixed(k, per_m_high, up), mixed(k - 1, per_m_low, down), \
        mixed(k - 1, per_m_high, up)


def copies_step(cells: tuple[NDArray[np.float64], ...], *, direction: str, discretization: float) -> Any:
    """The lower half of one step of the copies pair (``remove``: D against D'; ``add``: D' against D).

    Labelling each output by its cell is post-processing, so the hockey-stick
    divergence of the labelled pair (and of its compositions) is below the true
    one; P-masses are taken at their lower ends and Q-masses at their upper ends
    (every composed ``P(K >= j) - e^eps Q(K >= j)`` only falls). Both are
    divided by ``S = max(1, sum Q_upper)`` so that each is at most a probability:
    the composed divergence then falls by the factor ``S^T >= 1``, still a lower
    bound.
    """
    p_low, p_high, q_low, q_high = cells
    if direction == "remove":
        lp, lq = p_low, q_high
    else:
        lp, lq = q_low, p_high
    # What underflowed in the upper brackets (terms below 2.3e-308, a few thousand per cell) is
    # covered by 1e-300 per cell: no cell is labelled +inf unless Q truly cannot produce it.
    lq = lq + 1e-300
    scale = max(1.0, math.fsum(lq.tolist()), math.fsum(lp.tolist())) * (1.0 + 1e-12)
    with np.errstate(divide="ignore"):
        log_p = np.log(np.maximum(lp / scale, 0.0))
        log_q = np.log(np.maximum(lq / scale, 0.0))
    keep = lp > 1e-300
    log_p = np.where(keep, log_p, -math.inf)
    return _core.pld.cells_step(log_p, log_q, None, discretization, _MAX_CELLS)
