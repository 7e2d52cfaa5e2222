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
    reported for this model is the paper's pair, which a dataset realises (the
    record alone in the dataset); the truth lies between.

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
  revealed mass is charged. For ``r = 1, 2`` the tail ``P(mu_W > m) ~ m^{-r}`` is
  so heavy that epsilon at ``delta = 1e-5`` is astronomically large but finite:
  the upper bound then comes back ``inf`` (fail closed) with the message in the
  result's details, and the lower bound, from the realised pair, is large.
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

_MU_HARD = 40.0  # largest finite shift used for a bucket (see the module notes)
_LOG_TAIL = -80.0
_MAX_CELLS = 2**24


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


def make_buckets(r: int, w_cap: float, quantiles: int) -> Buckets:
    """Buckets of ``chi^2_r`` from ``w_cap`` up.

    The union of ``quantiles`` equal-probability buckets (fine where the mass is) and
    ``quantiles`` log-spaced ones between the 1e-10 and 1 - 1e-10 quantiles (a bounded
    relative width of the shift ``mu_W``, fine where delta is steep in it), plus
    geometric buckets in the far tails.
    """
    inner = np.arange(1, quantiles) / quantiles
    bulk = 2.0 * special.gammaincinv(r / 2.0, inner)
    w_lo = max(2.0 * float(special.gammaincinv(r / 2.0, 1e-10)), w_cap)
    w_hi = 2.0 * float(special.gammainccinv(r / 2.0, 1e-10))
    spread = np.geomspace(w_lo, w_hi, quantiles)
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


def cap_for_budget(*, r: int, noise_multiplier: float, budget: float) -> float:
    """The ``w_cap`` with ``P(W < w_cap) <= budget``, floored at the shift ``_MU_HARD``."""
    w_hard = r / (noise_multiplier * _MU_HARD) ** 2
    if budget <= 0.0:
        return w_hard
    w_budget = 2.0 * float(special.gammaincinv(r / 2.0, min(budget, 0.5)))
    return max(w_budget, w_hard)


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
