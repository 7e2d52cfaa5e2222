r"""Balls-in-bins batches and random allocation of ``k`` of ``t`` steps (ABLQ, zero-out adjacency).

**Balls-in-bins** (Chua et al., AISTATS 2025): each record is put into one of the ``t``
steps of an epoch uniformly at random, independently of the other records; every epoch
draws fresh assignments. **Random allocation** (Feldman and Shenfeld 2025) generalises
it: each record takes part in a uniformly random ``k``-subset of the ``t`` steps
(``k = 1`` is balls-in-bins). The noise multiplier is ``sigma``; neighbouring datasets
differ by zeroing out one record, as everywhere in :mod:`dpacct.samplers`.

The pair. One epoch of adaptive batch linear queries (ABLQ) with these batches, on the
input where only the differing record contributes (one unit per step it is in), outputs

.. math:: P = \binom{t}{k}^{-1} \sum_{|S| = k} \mathcal N(\mathbf 1_S, \sigma^2 I_t), \qquad
          Q = \mathcal N(0, \sigma^2 I_t),

with the record and with it zeroed out. Chua et al. (2025, arXiv:2412.16802) prove that
for ``k = 1`` this pair, their ``(P_B, Q_B)``, is *tightly dominating* (the same pair is
in the docstring of the authors' ``BnBAccountant``; the theorem's number was not checked
here): its hockey-stick divergence
(the larger of the two directions, ``H(P||Q)`` "remove" and ``H(Q||P)`` "add") *is*
delta(epsilon) of one epoch. For ``k > 1`` the pair is attained by that input, so
anything computed on it is a valid **lower bound**; that it also dominates is not used
here. The privacy loss of ``x ~ P`` (checked from the densities,
:math:`\varphi(x - \mathbf 1_S)/\varphi(x) = e^{(\sum_{i\in S} x_i - k/2)/\sigma^2}`) is

.. math:: L(x) = \log e_k\!\left(e^{x_1/\sigma^2}, \dots, e^{x_t/\sigma^2}\right)
                 - \log\binom{t}{k} - \frac{k}{2\sigma^2},

``e_k`` the elementary symmetric polynomial (for ``k = 1`` a log-sum-exp). Epochs draw
fresh assignments and fresh noise, so ``E`` epochs output the ``E``-fold product.

What is computed, and what kind of number each is:

* **upper bound** (certified; :func:`delta_allocation_upper`,
  :func:`epsilon_allocation_upper`). Always: the Gaussian curve of ``k E``
  participations, ``sigma / sqrt(k E)``. Proof: the assignment ``r`` (all ``E`` epochs)
  is drawn independently of the data, so the mechanism's output law on ``D`` and ``D'``
  is the mixture over ``r`` of the laws of the same mechanism with the *fixed* schedule
  ``r``: :math:`M(D) = \mathbb E_r M_r(D)`. The hockey-stick divergence is jointly
  convex, so :math:`H_{e^\varepsilon}(M(D)\|M(D')) \le \mathbb E_r
  H_{e^\varepsilon}(M_r(D)\|M_r(D')) \le \sup_r H_{e^\varepsilon}(M_r(D)\|M_r(D'))`.
  With a fixed schedule the record is in exactly ``k E`` steps, each an adaptive
  Gaussian query of sensitivity 1, so ``M_r`` is the adaptive composition of ``k E``
  Gaussian mechanisms, whose curve is the Gaussian curve with ``sigma / sqrt(k E)``
  (Dong, Roth and Su 2022, arXiv:1905.02383, Corollary 3.3); the same holds with ``D``
  and ``D'`` swapped. So random allocation is never worse than deterministic batches
  with ``k`` participations per epoch.
  For balls-in-bins (``k = 1``) the smallest of that, the **privacy loss distribution of
  the dominating pair** and its Renyi DP (:class:`BallsInBinsAccountant`). Under ``Q``
  the pair's likelihood ratio is the mean of ``t`` independent log-normal variables,
  and both directions' hockey-stick divergences are expectations of convex functions of
  it, so its one-dimensional law carries the whole pair; the C++ core computes it on a
  lattice (connect-the-dots above, the laws of a lattice statistic below, certified
  round-off and tails; ``cpp/include/dpacct/pld/allocation.hpp``) and the PLD engine
  composes it over the epochs (Feldman and Shenfeld, arXiv:2602.17284, compute random
  allocation's PLD from a law of this kind). At sigma = 1, ``t = 1000``, delta = 1e-5
  one epoch is in [0.1386, 0.1391] (deterministic: 4.38; Renyi DP: 0.68; Poisson batches
  at rate ``1/t``: 0.149 by PLD). The Renyi-DP bound (:mod:`dpacct.samplers.allocation_rdp`:
  exact moments for removal, a Laplace-transform integral for addition) is consulted
  where the PLD interval is wider than 1 %: below sigma ~0.6 (the log-normal tail
  outgrows the lattice) and at deltas ~1e-10 and below (the FFT round-off bound).
  *What is left out:* for ``k > 1`` no dominating pair is proven here, so only the
  deterministic curve bounds random allocation from above; Feldman and Shenfeld
  (arXiv:2502.08202) bound it by Poisson subsampling at rate about ``k/(t(1 - gamma))``
  with a split of delta, a theorem that could not be checked here.
* **lower bound** (certified; :func:`delta_allocation_lower`,
  :func:`epsilon_allocation_lower`): the hockey-stick divergence of the pair of laws of
  the per-epoch maxima ``(max_i x_i)`` of the ``E`` epochs, a post-processing of the
  attained pair. One epoch's maximum has the CDFs

  .. math:: F_P(c) = \Phi\left(\frac{c-1}{\sigma}\right)^k \Phi\left(\frac{c}{\sigma}\right)^{t-k},
            \qquad F_Q(c) = \Phi\left(\frac{c}{\sigma}\right)^t,

  evaluated as logarithms (``log_ndtr``), so ``t`` up to 1e7 does not underflow. The
  ``E``-fold product is computed as an *optimistic* :class:`dpacct.pld.DiscretePLD`
  (cells on the line of the maximum, each cell's loss rounded down, FFT round-off
  subtracted), both directions. That PLD lumps masses below ``e^-60`` into its tail
  cells, so the threshold tests ``{M >= C}`` and ``{M <= C}`` on the maximum ``M`` of all
  ``E t`` outputs (the lower bound of Chua et al. 2025, as in
  :func:`dpacct.samplers.delta_shuffle_lower` for shuffling; ``F_P^E`` and ``F_Q^E``
  for ``E`` epochs) are also evaluated, in logs with ``C`` maximised continuously (a grid
  scan, then a bounded scalar search), and the largest of all is reported. They keep
  deltas down to 1e-300 (``t = 1e6``: 4.9e-34, where the PLD alone gives 0).
* **estimate** (Monte Carlo, never a bound; :func:`delta_allocation_estimate`,
  :func:`epsilon_allocation_estimate`): the pair's hockey-stick divergence by importance
  sampling, with a confidence interval and a fixed seed by default. "remove" (``H(P||Q)``):
  a defensive mixture (Hesterberg 1995) of the nominal law and laws moving one coordinate
  (the record's or, since the loss is symmetric, any other) or the record's coordinates
  of every epoch into the region where the loss exceeds epsilon; the weights are at most
  10. "add" (``H(Q||P)``), one epoch, ``k = 1``: the law conditioned on
  ``{max_i x_i <= C}``, outside which the integrand vanishes (the conditioning Chua et
  al. 2025 use for this direction), sampled exactly and rescaled by that event's probability; plain
  sampling otherwise. Moving only the record's coordinate, as a first version did, missed
  the mass where another of ``t = 1000`` coordinates is extreme and fell below the
  certified lower bound; the tests pin this.

References
----------
.. [1] L. Chua, B. Ghazi, C. Harrison, E. Leeman, P. Kamath, R. Kumar, P. Manurangsi,
   A. Sinha, C. Zhang, "Balls-and-Bins Sampling for DP-SGD", AISTATS 2025,
   arXiv:2412.16802: the tightly dominating pair ``(P_B, Q_B)`` of ABLQ with
   balls-and-bins batches, its Monte-Carlo estimation and the threshold lower bound.
.. [2] V. Feldman and M. Shenfeld, "Privacy amplification by random allocation", 2025,
   arXiv:2502.08202 (v4).
.. [3] J. Dong, A. Roth, W. J. Su, "Gaussian Differential Privacy", JRSS-B 2022,
   arXiv:1905.02383, Corollary 3.3 (composition of Gaussian mechanisms).
.. [4] T. Hesterberg, "Weighted average importance sampling and defensive mixture
   distributions", Technometrics 37(2), 1995.
.. [5] A. Maurer and M. Pontil, "Empirical Bernstein Bounds and Sample Variance
   Penalization", COLT 2009, arXiv:0907.3740, Theorem 4.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from dpacct import _check, gaussian
from dpacct._shape import unwrap
from dpacct.accountant import Accountant
from dpacct.mechanisms import BallsInBinsGaussianMechanism, GaussianMechanism, Mechanism
from dpacct.pld.accountant import Bounds, PLDAccountant
from dpacct.pld.discrete import DiscretePLD
from dpacct.rdp import delta_from_rdp, epsilon_from_rdp
from dpacct.results import Value
from dpacct.samplers import _max_statistic as _max
from dpacct.samplers import allocation_rdp as _rdp
from dpacct.samplers.bounds import Bound
from dpacct.samplers.conjectured import _confidence, _mean_interval, _samples, _seed

__all__ = [
    "AllocationEpsilonEstimate",
    "AllocationEstimate",
    "BallsInBinsAccountant",
    "allocation_rows",
    "delta_allocation_estimate",
    "delta_allocation_lower",
    "delta_allocation_upper",
    "epsilon_allocation_estimate",
    "epsilon_allocation_lower",
    "epsilon_allocation_upper",
]

F64 = NDArray[np.float64]

_CHUNK_DOUBLES = 2**22  # at most this many normals are held at once (32 MiB)
_REJECTION_ROUNDS = 4  # truncated normals: redraws before falling back to the inverse CDF
_DIRECTIONS = ("both", "remove", "add")
_INTERVALS = ("normal", "bernstein")


def _sampler(participations: int) -> str:
    return "balls_in_bins" if participations == 1 else "random_allocation"


def _setting(noise_multiplier: Any, steps: Any, epochs: Any, participations: Any) -> tuple[float, int, int, int]:
    sigma = _check.noise_multiplier(noise_multiplier)
    t = _check.count("steps", steps, minimum=1)
    e = _check.count("epochs", epochs, minimum=1)
    k = _check.count("participations", participations, minimum=1)
    if k > t:
        msg = f"participations must be an integer in [1, steps={t}], got {k}"
        raise ValueError(msg)
    return sigma, t, e, k


def _name(t: int, e: int, k: int) -> str:
    what = "balls-in-bins" if k == 1 else f"random allocation of k={k}"
    return f"{what}, t={t} steps per epoch, E={e} epoch(s)"


# -- certified bounds of balls-in-bins (k = 1): PLD of the pair's likelihood ratio, Renyi DP -----

_PLD_METHOD = "PLD of the dominating pair (its likelihood ratio, a mean of t log-normals, on a lattice), over the epochs"
_RDP_METHOD = "Renyi DP of the dominating pair, both directions, composed over the epochs (allocation_rdp)"
# Renyi DP is only consulted where the PLD interval is wider than this (relative): it is an
# upper bound, so it can only improve on the PLD's upper end by less than the interval's width.
_RDP_WHEN_WIDER = 0.01


class BallsInBinsAccountant(Accountant):
    """Epochs of balls-in-bins batches (zero-out adjacency): certified two-sided bounds.

    Each composed mechanism is one epoch, a
    :class:`dpacct.mechanisms.BallsInBinsGaussianMechanism` (epochs draw fresh
    assignments; their noise multipliers and step counts may differ). The upper bound
    is the smallest of three certified upper bounds:

    * the privacy loss distribution of the dominating pair of Chua et al. (2025,
      arXiv:2412.16802), composed over the epochs by :class:`dpacct.pld.PLDAccountant`:
      the pair's likelihood ratio is the mean of ``t`` independent log-normal variables,
      whose law is computed on a lattice by FFT (``cpp/include/dpacct/pld/allocation.hpp``;
      Feldman and Shenfeld 2026, arXiv:2602.17284, compute random allocation's PLD from a
      law of this kind). Its lower end is the accountant's certified lower bound;
    * the Renyi DP of the pair in both directions (:mod:`dpacct.samplers.allocation_rdp`),
      consulted only where the PLD interval is wider than 1 % (it can improve the upper
      end by no more than the interval's width) or the PLD is unavailable (noise
      multipliers far below 0.5: the lattice does not fit);
    * the Gaussian curve of one participation per epoch (deterministic schedules dominate).

    Examples
    --------
    >>> from dpacct.mechanisms import BallsInBinsGaussianMechanism
    >>> acct = BallsInBinsAccountant().compose(
    ...     BallsInBinsGaussianMechanism(noise_multiplier=1.0, steps_per_epoch=1000), 1)
    >>> lower, upper = acct.epsilon_bounds(1e-5)  # deterministic batches: 4.377; Renyi DP: 0.678
    >>> 0.1385 < float(lower) <= float(upper) < 0.1393
    True
    """

    name = "balls_in_bins"

    def __init__(self, *, relative_accuracy: float = 0.005) -> None:
        super().__init__()
        PLDAccountant(relative_accuracy=relative_accuracy)  # checks it: in (0, 0.5]
        self._relative_accuracy = float(relative_accuracy)
        self._cache: dict[str, Any] = {}

    def supports(self, mechanism: Mechanism) -> bool:
        """Only :class:`dpacct.mechanisms.BallsInBinsGaussianMechanism` (one epoch each)."""
        return isinstance(mechanism, BallsInBinsGaussianMechanism)

    def _compose(self, mechanism: Mechanism, count: int) -> None:
        self._cache.clear()

    def _gaussian(self) -> gaussian.GaussianAccountant:
        acct = gaussian.GaussianAccountant()
        for mech, count in self._history:
            assert isinstance(mech, BallsInBinsGaussianMechanism)
            acct.compose(GaussianMechanism(noise_multiplier=mech.noise_multiplier, neighboring_relation="zero_out"),
                         count)
        return acct

    def _pld(self) -> PLDAccountant | None:
        """The epochs composed by the PLD engine, or None where a lattice does not fit."""
        if "pld" not in self._cache:
            acct: PLDAccountant | None = PLDAccountant(relative_accuracy=self._relative_accuracy)
            assert acct is not None
            try:
                for mech, count in self._history:
                    acct.compose(mech, count)
                    assert isinstance(mech, BallsInBinsGaussianMechanism)
                    _pld_laws(mech.noise_multiplier, mech.steps_per_epoch)  # raises where it does not fit
            except ValueError:
                acct = None
            self._cache["pld"] = acct
        return self._cache["pld"]  # type: ignore[no-any-return]

    def _bounds(self, values: F64, quantity: str) -> tuple[F64, F64, F64]:
        """(lower, upper, whether Renyi DP was consulted) at each delta (quantity "epsilon") or epsilon."""
        gauss = self._gaussian()
        upper = np.asarray(gauss.get_epsilon(values) if quantity == "epsilon" else gauss.get_delta(values),
                           dtype=np.float64).reshape(values.shape)
        lower = np.zeros_like(values)
        pld = self._pld()
        if pld is not None:
            try:
                b = pld.epsilon_bounds(values) if quantity == "epsilon" else pld.delta_bounds(values)
                lower = np.asarray(b.lower, dtype=np.float64).reshape(values.shape)
                upper = np.minimum(upper, np.asarray(b.upper, dtype=np.float64).reshape(values.shape))
            except ValueError:
                pld = None
        wide = (upper - lower > _RDP_WHEN_WIDER * upper) | (pld is None)
        if np.any(wide):
            rdp = [_rdp.rdp_of_history(self.history, r) for r in ("remove", "add")]
            if quantity == "epsilon":
                converted = [epsilon_from_rdp(orders=_rdp.ORDERS, rdp=r, delta=values[wide]).value for r in rdp]
            else:
                converted = [delta_from_rdp(orders=_rdp.ORDERS, rdp=r, epsilon=values[wide]).value for r in rdp]
            both = np.maximum(*(np.asarray(c, dtype=np.float64).reshape(-1) for c in converted))
            upper[wide] = np.minimum(upper[wide], both)
        return np.minimum(lower, upper), upper, wide.astype(np.float64)

    def epsilon_bounds(self, delta: ArrayLike) -> Bounds:
        """Certified ``(lower, upper)`` bounds on epsilon for each ``delta`` in ``(0, 1)``."""
        d = np.asarray(_check.delta_array(delta), dtype=np.float64)
        if not self._history:
            return Bounds(unwrap(np.zeros_like(d)), unwrap(np.zeros_like(d)))
        lower, upper, _ = self._bounds(d.reshape(-1), "epsilon")
        return Bounds(unwrap(lower.reshape(d.shape)), unwrap(upper.reshape(d.shape)))

    def delta_bounds(self, epsilon: ArrayLike) -> Bounds:
        """Certified ``(lower, upper)`` bounds on delta for each finite ``epsilon >= 0``."""
        e = np.asarray(_check.epsilon_array(epsilon), dtype=np.float64)
        if not self._history:
            return Bounds(unwrap(np.zeros_like(e)), unwrap(np.zeros_like(e)))
        lower, upper, _ = self._bounds(e.reshape(-1), "delta")
        return Bounds(unwrap(lower.reshape(e.shape)), unwrap(upper.reshape(e.shape)))

    def get_epsilon(self, delta: ArrayLike) -> float | NDArray[np.float64]:
        """A certified upper bound on epsilon for each ``delta`` in ``(0, 1)``; 0 for an empty history."""
        return self.epsilon_bounds(delta).upper

    def get_delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        """A certified upper bound on delta for each finite ``epsilon >= 0``; 0 for an empty history."""
        return self.delta_bounds(epsilon).upper

    def get_epsilon_details(self, delta: float) -> dict[str, Any]:
        """Epsilon for one delta with its certified lower bound and the method that gave the upper."""
        d = np.asarray([float(_check.delta_array(delta))])
        if not self._history:
            return {"epsilon": 0.0, "kind": "upper bound", "epsilon_lower_bound": 0.0}
        lower, upper, wide = self._bounds(d, "epsilon")
        return {"epsilon": float(upper[0]), "kind": "upper bound", "epsilon_lower_bound": float(lower[0]),
                "method": _method(bool(wide[0]))}


def _pld_laws(sigma: float, steps: int) -> Any:
    """The cached lattice laws of one epoch (the PLD engine's; raises ValueError where they do not fit)."""
    from dpacct.pld.accountant import allocation_laws

    return allocation_laws(sigma, steps)


def _method(rdp_consulted: bool) -> str:
    what = f"{_PLD_METHOD}; {_RDP_METHOD}" if rdp_consulted else _PLD_METHOD
    return f"the smallest of: {what}; {_deterministic(1, 1).split(' (')[0]}"


def _deterministic(k: int, e: int) -> str:
    return f"deterministic schedules dominate ({k * e} Gaussian participations, sigma/sqrt(kE))"


@functools.lru_cache(maxsize=32)
def _balls_in_bins_bounds(sigma: float, t: int, e: int, quantity: str,
                          values: tuple[float, ...]) -> tuple[F64, F64, F64]:
    """``BallsInBinsAccountant._bounds`` of ``e`` epochs, cached: the upper- and lower-bound
    functions (and a comparison's rows) ask for the same query."""
    acct = BallsInBinsAccountant().compose(BallsInBinsGaussianMechanism(noise_multiplier=sigma, steps_per_epoch=t), e)
    out = acct._bounds(np.asarray(values, dtype=np.float64), quantity)
    for array in out:
        array.flags.writeable = False
    return out


def delta_allocation_upper(
    *, noise_multiplier: float, steps: int, epsilon: ArrayLike, epochs: int = 1, participations: int = 1
) -> Bound:
    r"""A certified upper bound on delta(epsilon) of balls-in-bins / random-allocation batches.

    Parameters
    ----------
    noise_multiplier : float
        ``sigma``, noise standard deviation over L2 sensitivity, finite and ``> 0``.
    steps : int
        ``t``, steps (batches) per epoch, ``>= 1``.
    epsilon : float or array_like
        Finite epsilons ``>= 0``.
    epochs : int
        ``E >= 1``, each with fresh assignments.
    participations : int
        ``k``, steps per epoch each record takes part in, ``1 <= k <= t``; ``k = 1``
        (default) is balls-in-bins.

    Returns
    -------
    Bound
        ``kind="upper bound"``: the run is (epsilon, delta)-DP with this delta (zero-out
        adjacency). For ``k = 1`` that of :class:`BallsInBinsAccountant` (the smallest of
        the dominating pair's PLD, its Renyi DP and the Gaussian curve with
        ``sigma / sqrt(E)``); for ``k > 1`` the Gaussian curve with ``sigma / sqrt(k E)``.

    Notes
    -----
    Random allocation is a mixture over schedules fixed in advance, each a composition
    of ``k E`` Gaussian steps; joint convexity of the hockey-stick divergence bounds the
    mixture by the worst schedule (module docstring). For ``k = 1`` the pair of Chua et
    al. (2025) dominates, and its likelihood ratio's law is computed (module docstring).

    Examples
    --------
    >>> float(delta_allocation_upper(noise_multiplier=1.0, steps=1000, epsilon=1.0)) < 1e-10  # Gaussian: 0.127
    True
    """
    sigma, t, e, k = _setting(noise_multiplier, steps, epochs, participations)
    if k > 1:
        value = gaussian.delta_for_epsilon(noise_multiplier=sigma / math.sqrt(k * e), epsilon=epsilon)
        return Bound(value=value, quantity="delta", kind="upper bound", sampler=_sampler(k),
                     method=f"{_deterministic(k, e)}; {_name(t, e, k)}")
    eps = np.asarray(_check.epsilon_array(epsilon), dtype=np.float64)
    lower, upper, wide = _balls_in_bins_bounds(sigma, t, e, "delta", tuple(eps.reshape(-1).tolist()))
    return Bound(value=unwrap(upper.reshape(eps.shape)), quantity="delta", kind="upper bound", sampler=_sampler(k),
                 method=f"{_method(bool(np.any(wide)))}; {_name(t, e, k)}")


def epsilon_allocation_upper(
    *, noise_multiplier: float, steps: int, delta: ArrayLike, epochs: int = 1, participations: int = 1
) -> Bound:
    """A certified upper bound on epsilon(delta) of balls-in-bins / random-allocation batches.

    Parameters are as in :func:`delta_allocation_upper`, with ``delta`` in ``(0, 1)``.

    Returns
    -------
    Bound
        ``kind="upper bound"``: as in :func:`delta_allocation_upper` (the Gaussian epsilon
        with ``sigma / sqrt(k E)`` is rounded up).

    Examples
    --------
    One epoch of 1000 steps at sigma = 1: deterministic batches give 4.377, the Renyi DP
    of the pair 0.678, Poisson batches at rate 1/1000 about 0.149.

    >>> round(float(epsilon_allocation_upper(noise_multiplier=1.0, steps=1000, delta=1e-5)), 3)
    0.139
    """
    sigma, t, e, k = _setting(noise_multiplier, steps, epochs, participations)
    if k > 1:
        value = gaussian.epsilon_for_delta(noise_multiplier=sigma / math.sqrt(k * e), delta=delta)
        return Bound(value=value, quantity="epsilon", kind="upper bound", sampler=_sampler(k),
                     method=f"{_deterministic(k, e)}; {_name(t, e, k)}")
    d = np.asarray(_check.delta_array(delta), dtype=np.float64)
    lower, upper, wide = _balls_in_bins_bounds(sigma, t, e, "epsilon", tuple(d.reshape(-1).tolist()))
    return Bound(value=unwrap(upper.reshape(d.shape)), quantity="epsilon", kind="upper bound", sampler=_sampler(k),
                 method=f"{_method(bool(np.any(wide)))}; {_name(t, e, k)}")


# -- certified lower bound: the per-epoch maximum ----------------------------------------------


def _coords(k: int, t: int) -> tuple[_max.Coords, _max.Coords]:
    """The pair on the line of the maximum: ``k`` of ``t`` coordinates N(1), the rest N(0), against all N(0)."""
    return ((1.0, k), (0.0, t - k)), ((0.0, t),)


def _log_cdf(c: F64, sigma: float, ones: int, steps: int) -> F64:
    """log F(c) of the maximum of ``ones`` coordinates N(1, sigma^2) and ``steps - ones`` N(0, sigma^2)."""
    return _max.log_cdf(c, sigma, ((1.0, ones), (0.0, steps - ones)))


@functools.lru_cache(maxsize=16)
def _plds(sigma: float, k: int, t: int, epochs: int) -> tuple[DiscretePLD, DiscretePLD]:
    """The E-fold optimistic PLDs of both directions (cached: one costs ~0.1-1 s)."""
    return _max.composed(sigma, *_coords(k, t), epochs)


_THRESHOLD_GRID = 4001  # scan of C before the continuous refinement
_LOG_MARGIN = 1e-13  # logs moved by 1e-13 (1 + |log|) against the bound: a floating-point safety margin


def _threshold_logs(sigma: float, k: int, t: int, e: int, c: F64) -> tuple[F64, F64, F64, F64]:
    """``log P(M >= C), log Q(M >= C), log P(M <= C), log Q(M <= C)``, each moved against the bound.

    ``M`` is the maximum of all ``E t`` outputs of the ``E`` epochs (independent epochs:
    the log-CDF of one epoch times ``E``), a post-processing of the ``E``-fold product.

    For the "remove" test the P-mass is lowered and the Q-mass raised; for "add" the
    reverse; so each ``P - e^eps Q`` (or ``Q - e^eps P``) built from them is below the true one.
    """
    log_fp = e * _log_cdf(c, sigma, k, t)
    log_fq = e * _log_cdf(c, sigma, 0, t)
    with np.errstate(divide="ignore"):  # log F = 0 (F = 1 to rounding): survival 0, log -inf
        log_sp = np.log(-np.expm1(log_fp))
        log_sq = np.log(-np.expm1(log_fq))

    def move(x: F64, sign: float) -> F64:
        with np.errstate(invalid="ignore"):  # -inf stays -inf (the where below)
            return np.asarray(np.where(np.isfinite(x), x + sign * _LOG_MARGIN * (1.0 + np.abs(x)), x))

    return move(log_sp, -1.0), move(log_sq, 1.0), move(log_fp, 1.0), move(log_fq, -1.0)


def _log_gap(log_a: F64, log_b: F64, eps: float) -> F64:
    """``log(A - e^eps B)`` (``-inf`` where it is not positive)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # A <= e^eps B: log of a non-positive gap is -inf
        r = np.minimum(eps + log_b - log_a, 0.0)
        out = np.where(np.isfinite(log_a), log_a + np.log(-np.expm1(r)), -np.inf)
    return np.asarray(np.where(np.isnan(out), -np.inf, out))


def _threshold_log_delta(sigma: float, k: int, t: int, e: int, eps: float) -> float:
    """``log max_C`` of the threshold tests ``{M >= C}`` ("remove") and ``{M <= C}`` ("add") on the product.

    Chua et al. (2025, arXiv:2412.16802) scan ``C`` on a grid; here a grid scan is refined
    by a bounded scalar search around the best grid point (any ``C`` gives a valid bound,
    so the search only has to be good, not exact).
    """
    grid = np.linspace(-40.0 * sigma - 2.0, 40.0 * sigma + 3.0, _THRESHOLD_GRID)

    def log_delta(c: F64) -> F64:
        sp, sq, fp, fq = _threshold_logs(sigma, k, t, e, c)
        return np.maximum(_log_gap(sp, sq, eps), _log_gap(fq, fp, eps))

    values = log_delta(grid)
    i = int(np.argmax(values))
    best = float(values[i])
    if best == -math.inf:
        return best
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    result = optimize.minimize_scalar(lambda c: -float(log_delta(np.array([c]))[0]), bounds=(lo, hi),
                                      method="bounded", options={"xatol": 1e-10})
    return max(best, -float(result.fun))


def _threshold_epsilon(sigma: float, k: int, t: int, e: int, delta: float) -> float:
    """``sup_C log((P_C - delta) / Q_C)`` over both tests: the epsilon where the threshold bound meets ``delta``."""
    grid = np.linspace(-40.0 * sigma - 2.0, 40.0 * sigma + 3.0, _THRESHOLD_GRID)
    log_d = math.log(delta)

    def eps_of(c: F64) -> F64:
        sp, sq, fp, fq = _threshold_logs(sigma, k, t, e, c)
        out = []
        for log_a, log_b in ((sp, sq), (fq, fp)):
            with np.errstate(divide="ignore", invalid="ignore"):  # A <= delta: no epsilon from this C
                gap = np.where(log_a > log_d, log_a + np.log(-np.expm1(np.minimum(log_d - log_a, 0.0))), -np.inf)
                out.append(np.where(np.isfinite(log_b), gap - log_b, -np.inf))
        return np.asarray(np.maximum(out[0], out[1]))

    values = eps_of(grid)
    i = int(np.argmax(values))
    best = float(values[i])
    if best == -math.inf:
        return 0.0
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    result = optimize.minimize_scalar(lambda c: -float(eps_of(np.array([c]))[0]), bounds=(lo, hi),
                                      method="bounded", options={"xatol": 1e-10})
    return max(0.0, best, -float(result.fun))


def _lower_method(t: int, e: int, k: int) -> str:
    pld = f"the largest of: {_PLD_METHOD} (its lower bound); " if k == 1 else ""
    return (f"{pld}per-epoch maximum max_i w_i, optimistic PLD composed E times, and threshold events "
            f"max w >= C / <= C over all E t outputs, continuous C, both directions "
            f"(Chua et al. 2025, arXiv:2412.16802); {_name(t, e, k)}")


def _pld_lower(sigma: float, t: int, e: int, values: F64, quantity: str) -> F64:
    """The PLD engine's certified lower bound for balls-in-bins (0 where its lattice does not fit)."""
    lower, _, _ = _balls_in_bins_bounds(sigma, t, e, quantity, tuple(values.reshape(-1).tolist()))
    return np.asarray(lower, dtype=np.float64).reshape(values.shape)


def delta_allocation_lower(
    *, noise_multiplier: float, steps: int, epsilon: ArrayLike, epochs: int = 1, participations: int = 1
) -> Bound:
    r"""A certified lower bound on delta(epsilon) of balls-in-bins / random-allocation batches.

    Parameters are as in :func:`delta_allocation_upper`.

    Returns
    -------
    Bound
        ``kind="lower bound"``: the run is not (epsilon, delta)-DP for any smaller delta.
        It is the larger of the hockey-stick divergence (both directions) of the pair of
        laws of the ``E`` per-epoch maxima, itself bounded from below, and the best
        threshold test on the maximum of all ``E t`` outputs (module docstring).

    Notes
    -----
    The first call for a ``(sigma, t, E, k)`` builds and composes the PLDs (about
    0.1-1 s); later calls reuse them (an LRU cache of 16).

    Examples
    --------
    >>> round(float(delta_allocation_lower(noise_multiplier=1.0, steps=1, epsilon=1.0)), 3)
    0.127
    >>> f"{float(delta_allocation_lower(noise_multiplier=1.0, steps=1000, epsilon=1.0)):.2e}"
    '2.23e-13'
    """
    sigma, t, e, k = _setting(noise_multiplier, steps, epochs, participations)
    eps = _check.epsilon_array(epsilon)
    remove, add = _plds(sigma, k, t, e)
    value = np.maximum(np.asarray(remove.get_delta(eps)), np.asarray(add.get_delta(eps)))
    if k == 1:
        value = np.maximum(value, _pld_lower(sigma, t, e, np.asarray(eps, dtype=np.float64), "delta"))
    # The PLD lumps masses below e^-60 into tail cells; the threshold tests on the maximum
    # of all E t outputs, in logs, keep deltas far below that (t = 1e6: 5e-34 where the PLD gives 0).
    with np.errstate(under="ignore"):  # exp(log delta) may underflow to 0: still a lower bound
        tests = np.exp(np.vectorize(lambda x: _threshold_log_delta(sigma, k, t, e, float(x)), otypes=[float])(eps))
    value = np.maximum(value, tests)
    return Bound(value=unwrap(value), quantity="delta", kind="lower bound", sampler=_sampler(k),
                 method=_lower_method(t, e, k))


def epsilon_allocation_lower(
    *, noise_multiplier: float, steps: int, delta: ArrayLike, epochs: int = 1, participations: int = 1
) -> Bound:
    """A certified lower bound on epsilon(delta) of balls-in-bins / random-allocation batches.

    Parameters are as in :func:`delta_allocation_upper`, with ``delta`` in ``(0, 1)``.

    Returns
    -------
    Bound
        ``kind="lower bound"``: the largest of the two directions' epsilons, each found by
        bisection on the certified lower delta curve of the max-statistic PLD, and of the
        threshold tests' ``sup_C log((P_C - delta) / Q_C)`` (maximised over ``C`` directly).

    Examples
    --------
    >>> round(float(epsilon_allocation_lower(noise_multiplier=1.0, steps=1, delta=1e-5)), 2)
    4.38
    """
    sigma, t, e, k = _setting(noise_multiplier, steps, epochs, participations)
    d = _check.delta_array(delta)
    remove, add = _plds(sigma, k, t, e)
    value = np.maximum(np.asarray(remove.get_epsilon(d)), np.asarray(add.get_epsilon(d)))
    if k == 1:
        value = np.maximum(value, _pld_lower(sigma, t, e, np.asarray(d, dtype=np.float64), "epsilon"))
    value = np.maximum(value, np.vectorize(lambda x: _threshold_epsilon(sigma, k, t, e, float(x)), otypes=[float])(d))
    return Bound(value=unwrap(value), quantity="epsilon", kind="lower bound", sampler=_sampler(k),
                 method=_lower_method(t, e, k))


# -- Monte-Carlo estimate of the pair's hockey-stick divergence --------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationEstimate:
    """A Monte-Carlo estimate of delta(epsilon) of the balls-in-bins / random-allocation pair.

    Never a bound: ``estimate`` is unbiased for the pair's hockey-stick divergence (the
    run's delta for ``k = 1``, where the pair is tightly dominating; a lower bound on it
    in expectation for ``k > 1``), and ``(lower, upper)`` is a confidence interval.

    Attributes
    ----------
    estimate : float
        The larger of the two directions' estimates (``direction="both"``).
    lower, upper : float
        Confidence interval at level ``confidence`` (jointly over the directions, by
        Bonferroni).
    standard_error : float
        Standard error of ``estimate``'s direction.
    samples : int
        Samples per direction.
    hits : int
        Samples with a non-zero integrand in ``estimate``'s direction.
    confidence : float
        Nominal coverage of ``(lower, upper)``.
    interval : str
        ``"normal"`` (central-limit, needs many hits) or ``"bernstein"`` (distribution-free,
        valid for every sample size).
    direction : str
        ``"remove"`` (``H(P||Q)``) or ``"add"`` (``H(Q||P)``): the direction of ``estimate``.
    method : str
        What was sampled (sampler, ``t``, ``E``, ``k``, conditioning, seed).
    kind : str
        Always ``"estimate"``.
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
    method: str
    kind: Literal["estimate"] = "estimate"

    def as_value(self) -> Value:
        """The estimate as a :class:`dpacct.results.Value` of kind ``"estimate"`` (interval in ``details``)."""
        details = {"lower": self.lower, "upper": self.upper, "confidence": self.confidence,
                   "interval": self.interval, "samples": self.samples, "hits": self.hits,
                   "standard_error": self.standard_error, "direction": self.direction}
        return Value(value=self.estimate, quantity="delta", kind="estimate", method=self.method, details=details)


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationEpsilonEstimate:
    """A Monte-Carlo estimate of epsilon(delta) of the balls-in-bins / random-allocation pair.

    Attributes
    ----------
    estimate : float
        Root of the estimated delta curve (same samples at every epsilon: common random numbers).
    lower, upper : float
        Roots of the upper and lower ends of the pointwise confidence band of delta: at the
        true epsilon the band covers delta with probability ``confidence``, and then the
        true epsilon lies in ``[lower, upper]``.
    samples, confidence, interval, method, kind
        As in :class:`AllocationEstimate`.
    """

    estimate: float
    lower: float
    upper: float
    samples: int
    confidence: float
    interval: str
    method: str
    kind: Literal["estimate"] = "estimate"

    def as_value(self) -> Value:
        """The estimate as a :class:`dpacct.results.Value` of kind ``"estimate"`` (interval in ``details``)."""
        details = {"lower": self.lower, "upper": self.upper, "confidence": self.confidence,
                   "interval": self.interval, "samples": self.samples}
        return Value(value=self.estimate, quantity="epsilon", kind="estimate", method=self.method, details=details)


def _log_binom(t: int, k: int) -> float:
    return float(special.gammaln(t + 1) - special.gammaln(k + 1) - special.gammaln(t - k + 1))


def _esym(y: F64, k: int) -> F64:
    """``e_k`` of each row of ``y`` (entries in ``[0, 1]``), by a tree of truncated polynomial products.

    ``prod_i (1 + y_i X)`` truncated at degree ``k``: all terms are non-negative, so there
    is no cancellation (Newton's identities would cancel when one entry dominates).
    """
    n, w = y.shape
    poly = np.zeros((n, w, k + 1))
    poly[..., 0] = 1.0
    poly[..., 1] = y
    while poly.shape[1] > 1:
        if poly.shape[1] % 2:
            pad = np.zeros((n, 1, k + 1))
            pad[..., 0] = 1.0
            poly = np.concatenate([poly, pad], axis=1)
        a, b = poly[:, 0::2], poly[:, 1::2]
        out = np.zeros_like(a)
        with np.errstate(under="ignore"):  # products below 1e-308 are negligible against e_j >= prod of top j
            for i in range(k + 1):
                for j in range(k + 1 - i):
                    out[..., i + j] += a[..., i] * b[..., j]
        poly = out
    return np.asarray(poly[:, 0, k])


def _log_esym_slow(a: F64, k: int) -> float:
    """``log e_k(exp(a))`` for one row, entirely in logs (the rare rows where scaling underflows)."""
    log_e = np.full(k + 1, -np.inf)
    log_e[0] = 0.0
    for value in a:
        log_e[1:] = np.logaddexp(log_e[1:], log_e[:-1] + value)
    return float(log_e[k])


def _loss(x: F64, sigma: float, k: int, t: int) -> F64:
    """Privacy loss ``L(x) = log e_k(exp(x / sigma^2)) - log C(t, k) - k / (2 sigma^2)`` per row (x is overwritten)."""
    x /= sigma * sigma
    top = x.max(axis=1)
    raw = x.copy() if k > 1 else None
    # Factor out the row maximum: exp(x - max) <= 1, so nothing overflows (x / sigma^2
    # reaches 1e4 for sigma = 0.01); entries that underflow are negligible to rounding.
    x -= top[:, None]
    with np.errstate(under="ignore"):
        np.exp(x, out=x)
    if k == 1:
        log_e = top + np.log(x.sum(axis=1))
    else:
        e_k = _esym(x, k)
        with np.errstate(divide="ignore"):  # e_k = 0 rows are recomputed in logs just below
            log_e = k * top + np.log(e_k)
        assert raw is not None
        for row in np.nonzero(e_k < 1e-280)[0]:  # the product of the top k entries underflowed
            log_e[row] = _log_esym_slow(raw[row], k)
    return np.asarray(log_e - _log_binom(t, k) - k / (2.0 * sigma * sigma))


def _truncated_normals(rng: np.random.Generator, out: F64, upper: F64) -> None:
    """Fill ``out`` (rows) with i.i.d. standard normals conditioned on ``<= upper`` (one bound per row).

    Exact: each entry is redrawn while above its bound (a few rounds), the rest by the
    inverse CDF in logs.
    """
    rng.standard_normal(out=out)
    bound = np.broadcast_to(upper[:, None], out.shape)
    for _ in range(_REJECTION_ROUNDS):
        bad = out > bound
        count = int(bad.sum())
        if count == 0:
            return
        out[bad] = rng.standard_normal(count)
    bad = out > bound
    count = int(bad.sum())
    if count:
        log_u = np.log1p(-rng.random(count))  # log of a uniform on (0, 1]
        out[bad] = special.ndtri_exp(log_u + special.log_ndtr(bound[bad]))


@dataclass(frozen=True, slots=True)
class _Draw:
    values: F64  # weighted integrand per sample, in [0, bound]
    bound: float  # 1, or 1 / _DEFENSIVE with the defensive mixture's weights
    log_scale: float  # log probability of the conditioning event (0 when unconditioned)
    scheme: str


_DEFENSIVE = 0.1  # share of the nominal law in the defensive mixture: weights are <= 1 / _DEFENSIVE


def _draw_remove(rng: np.random.Generator, sigma: float, t: int, k: int, e: int, eps: float, n: int) -> _Draw:
    r"""Weighted samples of ``(1 - e^{eps - L})_+`` under ``P`` (E epochs), by a defensive mixture.

    The loss is symmetric in the coordinates, and exceeds ``eps`` mostly when some
    coordinate is extreme: the record's (nominal mean 1) or, for large ``t``, any other
    (nominal mean 0). The proposal is a mixture (Hesterberg 1995) of

    * the nominal law ``P^E`` (share ``_DEFENSIVE``);
    * "single" components, each moving one coordinate ``j`` of one epoch to mean
      ``mu_1`` (share ``pi_j`` of ``1 - _DEFENSIVE``, proportional to that coordinate's
      nominal chance of reaching the threshold ``y_1 = sigma^2 (eps + log(t/k)) + 1/2``);
    * for ``E > 1``, a "joint" component moving the record's ``k E`` coordinates to
      ``mu_E`` (threshold ``sigma^2 (eps/E + log C(t, k))/k + 1/2``), sharing the
      non-defensive mass half and half with the single components.

    Each ``mu`` is its threshold plus the mean overshoot ``sigma^2 / (y - 1)`` of a
    Gaussian tail there. A sample is weighted by ``dP/dg = 1 / (0.1 + sum_c w_c e^{l_c})``
    (``l_c`` the log-likelihood ratio of component ``c`` to the nominal law), at most 10,
    so every weighted value is in ``[0, 10]``. The thresholds only steer the proposal: the
    estimate is unbiased for any of them.
    """
    s2 = sigma * sigma
    y1 = s2 * (eps + math.log(t / k)) + 0.5
    mu1 = y1 + s2 / max(y1 - 1.0, sigma)
    yj = s2 * (eps / e + _log_binom(t, k)) / k + 0.5
    muj = yj + s2 / max(yj - 1.0, sigma)
    share_single = 1.0 - _DEFENSIVE if e == 1 else 0.5 * (1.0 - _DEFENSIVE)
    share_joint = 1.0 - _DEFENSIVE - share_single
    # pi: the record's coordinates ~ P(N(1, s2) >= y1), the others ~ P(N(0, s2) >= y1), per epoch.
    log_a = float(special.log_ndtr((1.0 - y1) / sigma))
    log_b = float(special.log_ndtr(-y1 / sigma))
    log_norm = float(special.logsumexp([math.log(k) + log_a, math.log(t - k) + log_b] if t > k
                                       else [math.log(k) + log_a]))
    log_pi = np.full(t, log_b - log_norm - math.log(e))
    log_pi[:k] = log_a - log_norm - math.log(e)
    p_record = math.exp(math.log(k) + log_a - log_norm)
    nominal = np.zeros(t)
    nominal[:k] = 1.0
    rows = max(1, _CHUNK_DOUBLES // (t * (k + 2)))
    step = max(1, rows // e)
    values = np.empty(n)
    for start in range(0, n, step):
        m = min(n, start + step) - start
        u = rng.random(m)
        single = u >= _DEFENSIVE + share_joint
        joint = (u >= _DEFENSIVE) & ~single
        # The single components' coordinate: the record's group with probability p_record.
        in_record = rng.random(m) < p_record
        coord = np.where(in_record, rng.integers(k, size=m), k + rng.integers(max(t - k, 1), size=m))
        coord = np.where(coord < t, coord, 0)
        epoch = rng.integers(e, size=m)
        total = np.zeros(m)
        log_single = np.full(m, -np.inf)
        log_joint = np.zeros(m)
        for index in range(e):
            x = rng.standard_normal((m, t)) * sigma + nominal
            x[joint, :k] += muj - 1.0
            hit = np.nonzero(single & (epoch == index))[0]
            x[hit, coord[hit]] += mu1 - nominal[coord[hit]]
            # l for moving coordinate j from its nominal mean to mu1: ((x-m)^2 - (x-mu1)^2) / (2 s2)
            l_single = ((x - nominal) ** 2 - (x - mu1) ** 2) / (2.0 * s2)
            log_single = np.logaddexp(log_single, special.logsumexp(l_single + log_pi, axis=1))
            y = x[:, :k]
            log_joint += ((y - 1.0) ** 2 - (y - muj) ** 2).sum(axis=1) / (2.0 * s2)
            total += _loss(x, sigma, k, t)
        terms = [np.full(m, math.log(_DEFENSIVE)), math.log(share_single) + log_single]
        if share_joint > 0.0:
            terms.append(math.log(share_joint) + log_joint)
        log_g = np.logaddexp.reduce(np.broadcast_arrays(*terms), axis=0)
        with np.errstate(over="ignore", under="ignore"):  # e^{eps - L} = inf gives integrand 0: exact
            values[start:start + m] = -np.expm1(np.minimum(eps - total, 0.0)) * np.exp(-log_g)
    scheme = (f"defensive mixture: one coordinate moved to {mu1:.4g}"
              + (f", or the record's k E coordinates to {muj:.4g}" if share_joint > 0.0 else ""))
    return _Draw(values, 1.0 / _DEFENSIVE, 0.0, scheme)


def _draw_add(rng: np.random.Generator, sigma: float, t: int, k: int, e: int, eps: float, n: int) -> _Draw:
    """Samples of ``(1 - e^{eps + L})_+`` under ``Q`` (E epochs), conditioned on ``max x <= C`` when ``E = k = 1``."""
    rows = max(1, _CHUNK_DOUBLES // (t * (k + 1)))
    values = np.empty(n)
    if e == 1 and k == 1:
        # L >= max x / sigma^2 - log t - 1/(2 sigma^2), so L < -eps needs max x < C.
        c = 0.5 + sigma**2 * (math.log(t) - eps)
        log_scale = t * float(special.log_ndtr(c / sigma))  # log P(max x <= C)
        for start in range(0, n, rows):
            m = min(n, start + rows) - start
            x = np.empty((m, t))
            _truncated_normals(rng, x, np.full(m, c / sigma))
            x *= sigma
            loss = _loss(x, sigma, k, t)
            with np.errstate(over="ignore"):
                values[start:start + m] = np.maximum(-np.expm1(eps + loss), 0.0)
        return _Draw(values, 1.0, log_scale, f"conditioned on max output <= C={c:.6g}")
    for start in range(0, n, max(1, rows // e)):
        m = min(n, start + max(1, rows // e)) - start
        total = np.zeros(m)
        for _ in range(e):
            total += _loss(rng.standard_normal((m, t)) * sigma, sigma, k, t)
        with np.errstate(over="ignore"):
            values[start:start + m] = np.maximum(-np.expm1(eps + total), 0.0)
    return _Draw(values, 1.0, 0.0, "plain sampling")


def _interval(draw: _Draw, alpha: float, interval: str) -> tuple[float, float, float, float, int]:
    """``(estimate, lower, upper, standard_error, hits)`` of ``exp(log_scale) * mean(values)``."""
    scale = math.exp(draw.log_scale) if draw.log_scale > -math.inf else 0.0
    mean, lower, upper, se = _mean_interval(draw.values, alpha, interval, draw.bound)
    upper = min(draw.bound, upper)  # the values are at most draw.bound, so is their mean
    return scale * mean, scale * lower, scale * upper, scale * se, int(np.count_nonzero(draw.values))


def _mc_options(samples: Any, confidence: Any, seed: Any, direction: Any, interval: Any
                ) -> tuple[int, float, int | None, str, str]:
    return (_samples(samples), _confidence(confidence), _seed(seed),
            _check.one_of("direction", direction, _DIRECTIONS), _check.one_of("interval", interval, _INTERVALS))


def _estimate(sigma: float, t: int, e: int, k: int, eps: float, n: int, confidence: float, seed: int | None,
              direction: str, interval: str) -> AllocationEstimate:
    directions = ("remove", "add") if direction == "both" else (direction,)
    alpha = (1.0 - confidence) / len(directions)  # Bonferroni over the directions
    children = np.random.SeedSequence(seed).spawn(2)
    best: tuple[float, float, float, float, int, str, str] | None = None
    for name in directions:
        rng = np.random.default_rng(children[0 if name == "remove" else 1])
        draw = (_draw_remove if name == "remove" else _draw_add)(rng, sigma, t, k, e, eps, n)
        est, lo, hi, se, hits = _interval(draw, alpha, interval)
        if best is None:
            best = (est, lo, hi, se, hits, name, draw.scheme)
        else:
            # The maximum of the two directions: its interval is [max lower, max upper].
            lo, hi = max(lo, best[1]), max(hi, best[2])
            if est > best[0]:
                best = (est, lo, hi, se, hits, name, draw.scheme)
            else:
                best = (best[0], lo, hi, best[3], best[4], best[5], best[6])
    assert best is not None
    est, lo, hi, se, hits, name, scheme = best
    method = (f"Monte-Carlo estimate of the pair's hockey-stick divergence ({scheme}, {name}; "
              f"Chua et al. 2025, arXiv:2412.16802), {_name(t, e, k)}, seed={seed}, not a bound")
    return AllocationEstimate(estimate=est, lower=lo, upper=hi, standard_error=se, samples=n, hits=hits,
                              confidence=confidence, interval=interval, direction=name, method=method)


def delta_allocation_estimate(
    *,
    noise_multiplier: float,
    steps: int,
    epsilon: float,
    epochs: int = 1,
    participations: int = 1,
    samples: int = 10_000,
    confidence: float = 0.95,
    seed: int | None = 0,
    direction: str = "both",
    interval: str = "normal",
) -> AllocationEstimate:
    r"""Monte-Carlo estimate of delta(epsilon) of balls-in-bins / random-allocation batches (not a bound).

    Parameters
    ----------
    noise_multiplier, steps, epochs, participations
        As in :func:`delta_allocation_upper`.
    epsilon : float
        One finite epsilon ``>= 0``.
    samples : int
        Samples per direction, ``>= 2``. Each costs ``E t`` normal draws (chunked).
    confidence : float
        Coverage of the interval, in ``(0, 1)``.
    seed : int or None
        Seed of the generator (default 0: reproducible); None for fresh entropy.
    direction : {"both", "remove", "add"}
        ``"remove"``: ``H(P||Q)``; ``"add"``: ``H(Q||P)``; ``"both"``: the larger.
    interval : {"normal", "bernstein"}
        ``"normal"`` (default): mean +/- z standard errors, asymptotic (central limit; the
        weighted values are bounded, so it is sound for many ``hits``, which the result
        reports). ``"bernstein"``: the empirical-Bernstein interval of Maurer and Pontil
        (2009, Theorem 4), valid for every sample size but, with values up to 10, useless
        for deltas much below ``100 / samples``.

    Returns
    -------
    AllocationEstimate
        ``kind="estimate"``: an unbiased estimate of the pair's divergence with its
        confidence interval; never a guarantee. For ``k = 1`` the pair is tightly
        dominating (Chua et al. 2025), so this estimates the run's delta itself.

    Notes
    -----
    For one epoch each direction samples the law conditioned on an event outside which
    the integrand is 0 and multiplies by the event's probability (module docstring); this
    is exact, and the values are in ``[0, 1]`` before scaling, so the interval's width
    scales with that probability. For ``E > 1`` the sampling is plain, and deltas much
    below ``1/samples`` are not resolved (the interval then says so).

    Examples
    --------
    >>> r = delta_allocation_estimate(noise_multiplier=1.0, steps=10, epsilon=1.0, samples=2000)
    >>> r.kind, r.lower <= r.estimate <= r.upper
    ('estimate', True)
    """
    sigma, t, e, k = _setting(noise_multiplier, steps, epochs, participations)
    eps = _check.epsilon(epsilon)
    n, conf, s, direction, interval = _mc_options(samples, confidence, seed, direction, interval)
    return _estimate(sigma, t, e, k, eps, n, conf, s, direction, interval)


def epsilon_allocation_estimate(
    *,
    noise_multiplier: float,
    steps: int,
    delta: float,
    epochs: int = 1,
    participations: int = 1,
    samples: int = 10_000,
    confidence: float = 0.95,
    seed: int | None = 0,
    direction: str = "both",
    interval: str = "normal",
) -> AllocationEpsilonEstimate:
    """Monte-Carlo estimate of epsilon(delta) of balls-in-bins / random-allocation batches (not a bound).

    Parameters are as in :func:`delta_allocation_estimate`, with one ``delta`` in ``(0, 1)``.

    Returns
    -------
    AllocationEpsilonEstimate
        ``kind="estimate"``: the root of the estimated delta curve and the roots of its
        band's ends, searched in ``[0, certified upper epsilon]``; never a guarantee.

    Notes
    -----
    Every point of the curve is estimated with the same seed (common random numbers), so
    the curve is nearly smooth in epsilon and Brent's method converges (to 1e-3 in
    epsilon); each evaluation is one run of :func:`delta_allocation_estimate` (about a
    dozen per root, three roots).
    """
    sigma, t, e, k = _setting(noise_multiplier, steps, epochs, participations)
    target = _check.delta(delta)
    if not 0.0 < target < 1.0:
        msg = f"delta must be in (0, 1), got {target!r}"
        raise ValueError(msg)
    n, conf, s, direction, interval = _mc_options(samples, confidence, seed, direction, interval)
    top = float(gaussian.epsilon_for_delta(noise_multiplier=sigma / math.sqrt(k * e), delta=target))
    cache: dict[float, AllocationEstimate] = {}

    def at(eps: float) -> AllocationEstimate:
        if eps not in cache:
            cache[eps] = _estimate(sigma, t, e, k, eps, n, conf, s, direction, interval)
        return cache[eps]

    def root(field: Callable[[AllocationEstimate], float]) -> float:
        if field(at(0.0)) <= target:
            return 0.0
        if field(at(top)) > target:
            return top  # the pair's delta is below the Gaussian curve: the band's end is capped there
        return float(optimize.brentq(lambda x: field(at(x)) - target, 0.0, top, xtol=1e-3, rtol=1e-4))

    estimate = root(lambda r: r.estimate)
    lower = root(lambda r: r.lower)
    upper = root(lambda r: r.upper)
    method = at(estimate).method.replace("hockey-stick divergence", "epsilon(delta) (root of the estimated curve)")
    return AllocationEpsilonEstimate(estimate=estimate, lower=lower, upper=upper, samples=n, confidence=conf,
                                     interval=interval, method=method)


# -- rows for the sampler comparison -----------------------------------------------------------


def allocation_rows(
    *,
    noise_multiplier: float,
    quantity: Literal["epsilon", "delta"],
    at: float,
    steps_per_epoch_upper: int,
    steps_per_epoch_lower: int,
    epochs_upper: int,
    epochs_lower: int,
    estimate: bool = False,
    participations: int = 1,
    samples: int = 2_000,
    seed: int | None = 0,
) -> tuple[tuple[str, Value], ...]:
    """Rows for the sampler comparison: balls-in-bins (or random allocation) upper bound, lower bound, estimate.

    Parameters
    ----------
    noise_multiplier : float
        ``sigma``, finite and ``> 0``.
    quantity : {"epsilon", "delta"}
        ``"epsilon"``: epsilons at ``delta = at``; ``"delta"``: deltas at ``epsilon = at``.
    at : float
        The delta (in ``(0, 1)``) or the epsilon (``>= 0``).
    steps_per_epoch_upper, epochs_upper : int
        The fewest steps per epoch and the most epochs the run can have (``>= 1``): the
        certified upper bound uses them.
    steps_per_epoch_lower, epochs_lower : int
        The most steps per epoch (``>= 1``) and the fewest complete epochs (``>= 0``): the
        lower bound uses them; ``epochs_lower == 0`` gives a lower bound of 0.
    estimate : bool
        Add the Monte-Carlo estimate row (opt-in; seconds, at the upper-bound setting),
        unless the certified bounds are within 1 % of each other (balls-in-bins, as a rule:
        the estimate's noise is larger than that).
    participations : int
        ``k``; 1 (default) is balls-in-bins (rows named ``"balls_in_bins"``), ``k > 1``
        random allocation (``"random_allocation"``).
    samples, seed
        Of the estimate, as in :func:`delta_allocation_estimate` (default 2000 samples per
        direction: the epsilon estimate runs it about 40 times).

    Returns
    -------
    tuple of (str, Value)
        ``(name, upper bound)``, ``(name, lower bound)`` and, with ``estimate=True``,
        ``(name, estimate)``; each :class:`dpacct.results.Value`'s ``method`` names the
        analysis, ``t``, ``E`` and ``k``.

    Examples
    --------
    >>> rows = allocation_rows(noise_multiplier=1.0, quantity="delta", at=1.0, steps_per_epoch_upper=1,
    ...                        steps_per_epoch_lower=1, epochs_upper=1, epochs_lower=1)
    >>> [(name, v.kind, round(float(v), 3)) for name, v in rows]
    [('balls_in_bins', 'upper bound', 0.127), ('balls_in_bins', 'lower bound', 0.127)]
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    q: Literal["epsilon", "delta"] = "epsilon" if _check.one_of("quantity", quantity, ("epsilon", "delta")) == "epsilon" \
        else "delta"
    k = _check.count("participations", participations, minimum=1)
    t_up = _check.count("steps_per_epoch_upper", steps_per_epoch_upper, minimum=1)
    t_lo = _check.count("steps_per_epoch_lower", steps_per_epoch_lower, minimum=1)
    e_up = _check.count("epochs_upper", epochs_upper, minimum=1)
    e_lo = _check.count("epochs_lower", epochs_lower, minimum=0)
    if q == "epsilon":
        at = float(_check.delta_array(at))
    else:
        at = _check.epsilon(at)
    for name, t in (("steps_per_epoch_upper", t_up), ("steps_per_epoch_lower", t_lo)):
        if k > t:
            msg = f"{name} must be >= participations={k}, got {t}"
            raise ValueError(msg)
    label = _sampler(k)
    if q == "epsilon":
        upper = epsilon_allocation_upper(noise_multiplier=sigma, steps=t_up, delta=at, epochs=e_up, participations=k)
    else:
        upper = delta_allocation_upper(noise_multiplier=sigma, steps=t_up, epsilon=at, epochs=e_up, participations=k)
    rows: list[tuple[str, Value]] = [(label, upper.as_value())]
    if e_lo == 0:
        lower = Value(value=0.0, quantity=q, kind="lower bound",
                      method="none: the run is shorter than one complete epoch")
    else:
        fn = epsilon_allocation_lower if q == "epsilon" else delta_allocation_lower
        bound = fn(noise_multiplier=sigma, steps=t_lo, epochs=e_lo, participations=k,
                   **({"delta": at} if q == "epsilon" else {"epsilon": at}))
        # Never above the certified upper bound (both are certified; the min only drops round-off).
        lower = Value(value=min(float(bound), float(upper)), quantity=q, kind="lower bound", method=bound.method,
                      details={"sampler": label})
    rows.append((label, lower))
    # An estimate adds nothing where the certified interval is narrower than its noise (balls-in-bins
    # by PLD: ~0.5 %); it stays for random allocation and where the certified bounds are far apart.
    if estimate and (k > 1 or float(upper) > 1.01 * float(lower.value)):
        if q == "epsilon":
            mc: AllocationEstimate | AllocationEpsilonEstimate = epsilon_allocation_estimate(
                noise_multiplier=sigma, steps=t_up, delta=at, epochs=e_up, participations=k, samples=samples, seed=seed)
        else:
            mc = delta_allocation_estimate(noise_multiplier=sigma, steps=t_up, epsilon=at, epochs=e_up,
                                           participations=k, samples=samples, seed=seed)
        rows.append((label, mc.as_value()))
    return tuple(rows)
