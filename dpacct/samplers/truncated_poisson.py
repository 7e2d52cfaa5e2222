r"""Truncated Poisson batches: Poisson sampling capped at a maximum batch size, with certified PLD bounds.

Each step draws a Poisson sample (each of the records independently with
probability ``q``); if it holds more than ``B`` (``max_batch_size``) records, a
uniformly random ``B``-subset of it is kept. Large-scale trainers do this to
bound memory (XLA needs fixed shapes; Chua et al. 2024 pad short batches and
truncate long ones). The clipped gradients of the kept records are summed and
``N(0, sigma^2 I)`` noise is added. dp-accounting's
``TruncatedSubsampledGaussianDpEvent`` describes the same step (its
``from_truncated_subsampled_gaussian_mechanism`` keeps "a random subset").

Notation: ``n = dataset_size`` records in the larger of the two neighbouring
datasets, ``m = n - 1`` other records besides the target ``x*`` (norms
``<= 1``), ``K ~ Binomial(n - 1, q)`` the number of other records the Poisson
draw takes, ``phi = Binomial(n, q)``. Two identities used below:
``E[B / (K + 1); K >= B] = P(phi > B) / (n q)`` (shift the binomial index), so the
probability that the target ends up in the kept batch is

.. math:: q_{\mathrm{eff}} = q\,P(K < B) + \frac{B}{n}\,P(\phi > B)
          = \frac{E[\min(\phi, B)]}{n} \;\le\; q

(the second form: all ``n`` records are equally likely to be kept, and ``min(phi, B)``
are kept), non-decreasing in ``q``.

Dominating pairs
----------------
**Add/remove** (``D`` has the ``n - 1`` others, ``D' = D + {x*}``). Reveal to
the adversary whether ``K >= B`` and, when it is, the uniformly random
``B``-subset ``S`` of the others' draw and a uniformly random ``y in S``
(under both datasets; revealing more can only raise every hockey-stick
divergence). If ``K < B`` nothing is truncated and the pair is the
Poisson-subsampled Gaussian (shift 1, rate ``q``). If ``K >= B``, under ``D``
the batch is ``S``; under ``D'`` the target is sampled with probability ``q``
and then kept with probability ``B / (K + 1)``, and the kept batch is then
``S - {y} + {x*}`` (dropping a uniform member of a uniform ``B``-subset gives
a uniform ``(B-1)``-subset); otherwise it is ``S`` again. Given the revealed
values the pair is ``(1 - r) N(s) + r N(s + x* - y)`` against ``N(s)`` with
``||x* - y|| <= 2`` and, since ``S`` is independent of ``K`` given ``K >= B``,
``r = E[q B / (K + 1) | K >= B] = q_c``. Hence the per-step dominating pair is
the **labelled (PLD-space) mixture**

.. math:: P(K < B)\cdot \mathrm{PS}(1, q) \;+\; P(K \ge B)\cdot \mathrm{PS}(2, q_c),
          \qquad q_c = \frac{B\,P(\phi > B)}{n\,P(K \ge B)},

where ``PS(c, r)`` is the Poisson-subsampled Gaussian pair ``(1 - r) N(0) + r
N(c)`` against ``N(0)`` (noise ``sigma``), taken in both directions. Subsampled
Gaussian pairs grow (in the Blackwell order) with the shift and with the rate,
so the worst ``x* - y`` is a shift of 2. This is the decomposition of
dp-accounting's ``from_truncated_subsampled_gaussian_mechanism``
(arXiv:2508.15089, same ``P(K >= B)`` and ``q_c``), except that dp-accounting
takes the overflow component under its replace-one convention,
``(1 - q_c) N(0) + q_c N(-2)`` against ``(1 - q_c) N(0) + q_c N(2)`` (the
derivation above shows the add/remove shift-2 pair suffices; see Looseness for
how the two compare). At ``q = 1`` (every step overflows) it is tight: the others all
equal to ``-x*`` realise it.

**Zero-out** (both datasets have ``n`` records; ``x*`` against the zero
vector, the adjacency of :mod:`dpacct.samplers`' Poisson rows). Sampling does not
look at values, so the target's membership ``I`` of the kept batch and the set
``R`` of other records kept have the same joint law under both datasets. Reveal
``R``: the pair is ``PS(1, r)`` with ``r = P(I = 1 | |R|)``. With ``C = |R|``:
``C < B - 1`` means nothing was truncated and ``r = q``; ``C = B`` means the
target was not kept, ``r = 0`` (privacy loss 0); ``C = B - 1`` happens with
probability ``P(K = B-1) + (B/n) P(phi > B)`` and then

.. math:: r_{B-1} = \frac{q\,P(K = B-1) + (B/n)\,P(\phi > B)}{P(K = B-1) + (B/n)\,P(\phi > B)},

so the per-step pair is ``P(K <= B-2) PS(1, q) + P(C = B-1) PS(1, r_{B-1}) +
P(C = B) PS(1, 0)``. ``r_{B-1}`` can exceed ``q``: a full batch minus one says
that the target is probably in it.

Both pairs were checked against the exact hockey-stick divergence of every
small case (``n <= 8``, one step, by enumerating all Poisson draws and
truncations, in ``tests/test_samplers_truncated.py``): never exceeded, and
reached (to quadrature accuracy) where the derivation says it is tight.

Lower bound. Realised datasets: all other records zero. Then the output is
``I x* + N(0, sigma^2)`` with ``P(I = 1) = q_eff``, exactly the
Poisson-subsampled Gaussian at rate ``q_eff``, in both directions and under both
relations: its certified PLD lower bound is a lower bound for truncated
Poisson sampling. At ``q = 1`` under add/remove the others equal to ``-x*``
realise ``PS(2, B/n)`` too (the upper pair): there the interval closes.

Looseness
---------
Where no batch can overflow (``max_batch_size >= dataset_size``) both bounds are
the Poisson numbers, bit for bit (the same accountant call). Otherwise the gap
between the bounds has two sources: the lower bound's rate ``q_eff < q`` (others
zero is not the worst dataset), and, in the upper bound, the revealed label (the
overflow under add/remove, the kept count under zero-out) and, under add/remove,
the shift 2 of the overflow component. Both grow with the overflow probability
``P(K >= B)``. Measured (``bench/truncated_poisson.py``; ``sigma = 1.1``,
``q = 256/60000``, ``n = 60000``, ``T = 10^4``, ``delta = 1e-5``; plain Poisson
at the same ``q``: epsilon in ``[1.974, 1.983]``):

=====  ===========  ==================  ==================
B      P(K >= B)    add/remove          zero-out
=====  ===========  ==================  ==================
320    6.2e-5       [1.974, 2.009]      [1.974, 1.979]
300    3.9e-3       [1.974, 3.120]      [1.974, 2.013]
280    7.2e-2       [1.970, 4.991]      [1.970, 2.784]
=====  ===========  ==================  ==================

So under add/remove an overflow probability of a few tenths of a percent already
costs a lot: each overflowing step is charged as a shift-2 Gaussian step. The
truth lies in between; the lower bound barely moves because the others-zero
datasets only lose inclusion probability. Where the upper bound is too loose,
choose ``B`` a few standard deviations above ``n q`` (``P(K >= B)`` below about
``1e-4``), or account zero-out adjacency.

The add/remove overflow component differs from dp-accounting's replace-one one:
one step of it has a hockey-stick divergence below dp-accounting's at every
(rate, sigma, epsilon) scanned (rates 1e-3..1, sigma 0.5..5, epsilon 0..3), and
composed, dpacct's upper bound is below dp-accounting's number or within its
own grid gap of it (3.120 against 3.133 at ``B = 300``, 4.991 against 5.290 at
``B = 280``; ``tests/reference/truncated_poisson_dp_accounting.json``).

Truncation can hurt: it is **not** true that a cap only lowers each record's
inclusion probability and so only helps. At ``n = 3``, ``B = 2``, ``q = 1``,
``sigma = 1`` the others equal to ``-x*`` give exactly ``PS(2, 2/3)``, whose
delta at epsilon 1 (0.3066) is above the untruncated (here: unsampled) Gaussian's
0.1269 (tested). Nor does truncation always hurt: where nearly every draw
overflows, the overflow rate ``q_c ~ B/n`` is far below ``q`` and outweighs the
larger shift (``n = 1000``, ``B = 100``, ``q = 1``, ``sigma = 1``: delta(1) is
0.0197 against the untruncated 0.1269; tested).

References
----------
.. [1] "Tighter Privacy Analysis for Truncated Poisson Sampling", arXiv:2508.15089
   (v1, August 2025); implemented in dp-accounting
   (``dp_accounting.pld.privacy_loss_distribution.from_truncated_subsampled_gaussian_mechanism``,
   version 0.6.0), which this module's add/remove decomposition follows.
.. [2] L. Chua, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, A. Sinha, C. Zhang,
   "Scalable DP-SGD: Shuffling vs. Poisson Subsampling", NeurIPS 2024,
   arXiv:2411.04205 (truncation in practice).
.. [3] J. Dong, A. Roth, W. Su, "Gaussian Differential Privacy", arXiv:1905.02383,
   Theorem 2.10 (Blackwell: an ordered pair is a post-processing of the other),
   used for the monotonicity in shift and rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from dpacct import _check
from dpacct.mechanisms import PoissonSampledGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.pld.accountant import _Spec as _PldSpec
from dpacct.results import Interval, Value
from dpacct.samplers.bounds import Bound

__all__ = [
    "TruncatedPoissonBounds",
    "TruncatedPoissonPair",
    "delta_truncated_poisson_bounds",
    "epsilon_truncated_poisson_bounds",
    "truncated_poisson_pair",
    "truncated_poisson_rows",
]

Relation = Literal["add_remove", "zero_out"]
_RELATIONS: tuple[str, ...] = ("add_remove", "zero_out")

# scipy.stats.binom evaluates through Boost's incomplete beta, whose documented worst-case
# relative error is a few hundred ulps (~1.5e-13). Every weight is computed from such values
# without cancellation (sums of positive terms) except the zero-out "full batch" weight,
# which is lowered by this margin times the terms it is a difference of; all other weights
# are lowered and all rates raised by it, and the weight taken off goes to a component that
# dominates all others (see _pair), so rounding can only raise the bound.
_MARGIN = 1e-12


class _Component(NamedTuple):
    """One label of the per-step mixture: weight, noise multiplier (sigma / shift), Poisson rate."""

    weight: float
    noise_multiplier: float
    rate: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TruncatedPoissonPair:
    """The per-step dominating pair of truncated Poisson sampling (see the module notes).

    Attributes
    ----------
    components : tuple of (weight, noise_multiplier, rate)
        The labelled mixture of Poisson-subsampled Gaussian pairs: with probability
        ``weight`` the step is ``(1 - rate) N(0, s^2) + rate N(1, s^2)`` against
        ``N(0, s^2)`` with ``s = noise_multiplier`` (a shift of 2 at noise ``sigma``
        is ``s = sigma / 2``). Weights are rounded down and rates up; the weight
        taken off is on the last component, which dominates the others.
    zero_loss_weight : float
        Probability of a label whose two distributions coincide (privacy loss 0).
    realised_sampling_probability : float
        ``q_eff`` (rounded down): the rate of the Poisson-subsampled Gaussian that
        datasets with all other records zero realise; its PLD lower bound is a
        lower bound for the mechanism.
    realised_pairs : tuple of (noise_multiplier, rate)
        Poisson-subsampled Gaussian pairs (as in ``components``) that real datasets
        realise exactly; the lower bound is the largest of their PLD lower bounds. Always
        ``(sigma, q_eff)`` (others zero); at ``q = 1`` under add/remove also
        ``(sigma / 2, B / n)`` (others ``-x*``, which meets the upper bound).
    overflow_probability : float
        ``P(K >= B)``: probability that the others alone fill the batch.
    truncates : bool
        False where no batch can exceed ``max_batch_size`` (then the pair is Poisson's).
    neighboring_relation : {"add_remove", "zero_out"}
    """

    components: tuple[tuple[float, float, float], ...]
    zero_loss_weight: float
    realised_sampling_probability: float
    realised_pairs: tuple[tuple[float, float], ...]
    overflow_probability: float
    truncates: bool
    neighboring_relation: str


def truncated_poisson_pair(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    dataset_size: int,
    max_batch_size: int,
    neighboring_relation: Relation = "add_remove",
) -> TruncatedPoissonPair:
    r"""The per-step dominating pair of a truncated Poisson-sampled Gaussian step.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, finite and ``> 0``.
    sampling_probability : float
        Poisson rate ``q`` in ``[0, 1]`` before truncation.
    dataset_size : int
        ``n >= 1``: records in the larger neighbouring dataset under add/remove (as
        dp-accounting's ``dataset_size``: the target plus ``n - 1`` others), in
        both datasets under zero-out. The bounds are not monotone in ``n`` (at fixed
        ``q`` and ``B`` more records mean more overflow but a smaller kept share):
        under add/remove a dataset of ``N`` records has neighbours of ``N - 1`` and
        ``N + 1`` records, so a guarantee for both takes the larger of the bounds at
        ``n = N`` and ``n = N + 1``.
    max_batch_size : int
        ``B >= 1``; a larger Poisson batch is cut to a uniformly random ``B``-subset.
        ``B >= n`` is allowed (nothing is ever cut: plain Poisson).
    neighboring_relation : {"add_remove", "zero_out"}

    Returns
    -------
    TruncatedPoissonPair
        The labelled mixture (upper bound) and the realised rate (lower bound).

    Examples
    --------
    >>> pair = truncated_poisson_pair(noise_multiplier=1.0, sampling_probability=1.0,
    ...                               dataset_size=1000, max_batch_size=100)
    >>> [(round(w, 9), s, round(r, 9)) for w, s, r in pair.components]   # q = 1: every step overflows
    [(0.0, 1.0, 1.0), (1.0, 0.5, 0.1), (0.0, 0.5, 1.0)]
    """
    sigma, q, n, b, relation = _validate(noise_multiplier, sampling_probability, dataset_size, max_batch_size,
                                         neighboring_relation)
    return _pair(sigma, q, n, b, relation)


def _validate(noise_multiplier: Any, sampling_probability: Any, dataset_size: Any, max_batch_size: Any,
              neighboring_relation: Any) -> tuple[float, float, int, int, str]:
    sigma = _check.noise_multiplier(noise_multiplier)
    q = _check.probability("sampling_probability", sampling_probability)
    n = _check.count("dataset_size", dataset_size, minimum=1)
    b = _check.count("max_batch_size", max_batch_size, minimum=1)
    relation = _check.one_of("neighboring_relation", neighboring_relation, _RELATIONS)
    return sigma, q, n, b, relation


def _pair(sigma: float, q: float, n: int, b: int, relation: str) -> TruncatedPoissonPair:
    if b >= n or q == 0.0:  # no batch ever exceeds B (or nothing is ever sampled): plain Poisson
        return TruncatedPoissonPair(components=((1.0, sigma, q),), zero_loss_weight=0.0,
                                    realised_sampling_probability=q, realised_pairs=((sigma, q),),
                                    overflow_probability=0.0, truncates=False,
                                    neighboring_relation=relation)
    others = stats.binom(n - 1, q)
    below = float(others.cdf(b - 1))  # P(K < B)
    overflow = float(others.sf(b - 1))  # P(K >= B)
    # (B / n) P(Binomial(n, q) > B) = E[q B / (K + 1); K >= B]: the target kept after a cut.
    kept_after_cut = b / n * float(stats.binom.sf(b, n, q))
    q_eff = q * below + kept_after_cut
    lower_rate = min(q_eff, q) * (1.0 - _MARGIN)
    if relation == "add_remove":
        q_c = min(kept_after_cut / overflow, q) if overflow > 0.0 else 0.0
        parts = [(below, sigma, q), (overflow, sigma / 2.0, _up(q_c))]
        dominating = (sigma / 2.0, max(q, _up(q_c)))
        zero_loss = 0.0
    else:
        at_edge = float(others.pmf(b - 1))  # P(K = B - 1)
        edge = at_edge + kept_after_cut  # P(C = B - 1)
        r_edge = min((q * at_edge + kept_after_cut) / edge, 1.0)
        # P(C = B) = P(K >= B) - (B/n) P(phi > B): a difference, so its rounding margin is absolute.
        full = max(0.0, overflow - kept_after_cut - _MARGIN * (overflow + kept_after_cut))
        parts = [(float(others.cdf(b - 2)) if b >= 2 else 0.0, sigma, q), (edge, sigma, _up(r_edge))]
        dominating = (sigma, max(q, _up(r_edge)))
        zero_loss = full
    realised = [(sigma, lower_rate)]
    if relation == "add_remove" and q == 1.0:
        # Every draw overflows (n - 1 >= B others): with the others all -x* the kept batch sums to
        # -B x* under D and to (2 - B) x* under D' when the target is kept (probability B/n):
        # exactly PS(2, B/n), the upper pair itself.
        realised.append((sigma / 2.0, b / n * (1.0 - _MARGIN)))
    weights = [w * (1.0 - _MARGIN) for w, _, _ in parts]
    # The weight rounded off goes to a component that dominates every other (largest shift and
    # rate): replacing part of a label's pair by a dominating pair can only raise the bound.
    # (+ 1e-15: the subtraction's own rounding; a total mass a hair above 1 is pessimistic.)
    slack = max(0.0, 1.0 - math.fsum(weights) - zero_loss) + 1e-15
    components = tuple((w, s, r) for w, (_, s, r) in zip(weights, parts)) + ((slack, *dominating),)
    return TruncatedPoissonPair(components=components, zero_loss_weight=zero_loss,
                                realised_sampling_probability=lower_rate, realised_pairs=tuple(realised),
                                overflow_probability=overflow,
                                truncates=True, neighboring_relation=relation)


def _up(rate: float) -> float:
    return min(rate * (1.0 + _MARGIN), 1.0)


# -- the PLD engine with the mixture step -------------------------------------------------------


class _Engine(PLDAccountant):
    """The PLD accountant composing ``count`` steps of the overflow-labelled mixture.

    The step is the engine's ``truncated_mixture`` discretisation: its upper half is the
    labelled mixture of the components' connect-the-dots steps, its lower half the same
    mixture's data-processing lower bound (the discretisation error of the *upper pair*, not
    a lower bound for the mechanism: those come from the realised pairs, composed apart).
    """

    def __init__(self, pair: TruncatedPoissonPair, count: int, relative_accuracy: float) -> None:
        super().__init__(relative_accuracy=relative_accuracy)
        self._fixed = [(_PldSpec("truncated_mixture", (pair.components, pair.zero_loss_weight), 1.0, False), count)]

    def _groups(self) -> list[tuple[_PldSpec, int]]:
        return list(self._fixed)


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TruncatedPoissonBounds:
    """Truncated Poisson sampling: certified ``lower <= true <= upper`` (PLD) and the pair behind them."""

    lower: Bound
    upper: Bound
    pair: TruncatedPoissonPair

    def as_interval(self) -> Interval:
        """The pair of bounds as a certified :class:`dpacct.results.Interval`."""
        return Interval(lower=self.lower.value, upper=self.upper.value, quantity=self.lower.quantity,
                        method=self.upper.method, details={"sampler": "truncated_poisson",
                                                           "overflow_probability": self.pair.overflow_probability})


def _accountants(sigma: float, q: float, steps: int, pair: TruncatedPoissonPair,
                 relative_accuracy: float) -> tuple[PLDAccountant, list[PLDAccountant]]:
    """The upper accountant and the lower ones (the same plain Poisson one where nothing is cut)."""
    relation: Relation = "zero_out" if pair.neighboring_relation == "zero_out" else "add_remove"
    if not pair.truncates:
        poisson = PoissonSampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q,
                                                  neighboring_relation=relation)
        acct = PLDAccountant(relative_accuracy=relative_accuracy).compose(poisson, steps if q > 0 else 0)
        return acct, [acct]
    upper = _Engine(pair, steps, relative_accuracy)
    lowers = []
    for noise, rate in pair.realised_pairs:
        realised = PoissonSampledGaussianMechanism(noise_multiplier=noise, sampling_probability=rate,
                                                   neighboring_relation=relation)
        lowers.append(PLDAccountant(relative_accuracy=relative_accuracy).compose(realised, steps))
    return upper, lowers


def _method(q: float, steps: int, n: int, b: int, pair: TruncatedPoissonPair) -> tuple[str, str]:
    run = f"{steps} steps at q={q:.6g}, n={n}, B={b}, {pair.neighboring_relation}"
    if not pair.truncates:
        return f"PLD, {run} (no batch exceeds B: Poisson)", f"PLD, {run} (no batch exceeds B: Poisson)"
    realised = "all other records zero" + ("; all others -x*" if len(pair.realised_pairs) > 1 else "")
    return (f"PLD, {run}; realised by {realised} (rate {pair.realised_sampling_probability:.6g})",
            f"PLD, {run}; overflow-labelled mixture, P(overflow)={pair.overflow_probability:.3g}")


def _bounds(sigma: float, q: float, t: int, n: int, b: int, relation: str, relative_accuracy: float,
            quantity: Literal["delta", "epsilon"], at: NDArray[np.float64]) -> TruncatedPoissonBounds:
    """Certified bounds on delta(at) or epsilon(at): the mixture's upper, the realised pairs' best lower."""
    pair = _pair(sigma, q, n, b, relation)
    upper_acct, lower_accts = _accountants(sigma, q, t, pair, relative_accuracy)

    def query(acct: PLDAccountant) -> Any:
        return acct.delta_bounds(at) if quantity == "delta" else acct.epsilon_bounds(at)

    lower, upper = query(upper_acct)
    if pair.truncates:
        lower = np.max([np.asarray(query(a).lower) for a in lower_accts], axis=0)
        lower = np.minimum(lower, upper)  # both certified; guards the reported pair against round-off
        lower = float(lower) if lower.ndim == 0 else lower
    low_method, up_method = _method(q, t, n, b, pair)
    return TruncatedPoissonBounds(
        lower=Bound(value=lower, quantity=quantity, kind="lower bound", sampler="truncated_poisson",
                    method=low_method),
        upper=Bound(value=upper, quantity=quantity, kind="upper bound", sampler="truncated_poisson",
                    method=up_method),
        pair=pair,
    )


def delta_truncated_poisson_bounds(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    dataset_size: int,
    max_batch_size: int,
    epsilon: ArrayLike,
    neighboring_relation: Relation = "add_remove",
    relative_accuracy: float = 0.02,
) -> TruncatedPoissonBounds:
    """Certified bounds on delta(epsilon) of ``steps`` truncated Poisson-sampled Gaussian steps.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, finite and ``> 0``.
    sampling_probability : float
        Poisson rate ``q`` in ``[0, 1]`` before truncation.
    steps : int
        Number of steps ``T >= 1``.
    dataset_size : int
        ``n >= 1`` (see :func:`truncated_poisson_pair`).
    max_batch_size : int
        ``B >= 1`` (``B >= n``: never truncated, the Poisson numbers).
    epsilon : float or array_like
        Finite epsilons ``>= 0``.
    neighboring_relation : {"add_remove", "zero_out"}
    relative_accuracy : float
        Target relative gap of each PLD composition's discretisation (in ``(0, 0.5]``;
        default 0.02, as :func:`dpacct.samplers.delta_poisson_bounds`: for delta queries
        the grid follows the delta target). Larger is faster; the bounds stay certified.

    Returns
    -------
    TruncatedPoissonBounds
        ``lower``: certified lower bound (the realised pair's optimistic PLD);
        ``upper``: certified upper bound (the dominating mixture's pessimistic PLD).
        See the module notes for the pair and its looseness.

    Examples
    --------
    >>> b = delta_truncated_poisson_bounds(noise_multiplier=1.0, sampling_probability=0.1, steps=10,
    ...                                    dataset_size=100, max_batch_size=12, epsilon=1.0)
    >>> bool(b.lower.value <= b.upper.value)
    True
    """
    sigma, q, n, b, relation = _validate(noise_multiplier, sampling_probability, dataset_size, max_batch_size,
                                         neighboring_relation)
    t = _check.count("steps", steps, minimum=1)
    eps = _check.epsilon_array(epsilon)
    # Delta queries set the grid from the delta target: 0.02 as dpacct.samplers.delta_poisson_bounds.
    return _bounds(sigma, q, t, n, b, relation, relative_accuracy, "delta", eps)


def epsilon_truncated_poisson_bounds(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    dataset_size: int,
    max_batch_size: int,
    delta: ArrayLike,
    neighboring_relation: Relation = "add_remove",
    relative_accuracy: float = 0.005,
) -> TruncatedPoissonBounds:
    """Certified bounds on epsilon(delta) of ``steps`` truncated Poisson-sampled Gaussian steps.

    Parameters
    ----------
    noise_multiplier, sampling_probability, steps, dataset_size, max_batch_size, neighboring_relation
        As in :func:`delta_truncated_poisson_bounds`.
    delta : float or array_like
        Deltas in ``(0, 1)``.
    relative_accuracy : float
        Target relative gap of each PLD composition's discretisation (default 0.005, as
        :class:`dpacct.pld.PLDAccountant`); larger is faster, the bounds stay certified.

    Returns
    -------
    TruncatedPoissonBounds
        ``lower <= epsilon(delta) <= upper``, both certified (``upper`` may be ``inf``).

    Examples
    --------
    >>> kw = dict(noise_multiplier=1.0, sampling_probability=0.01, steps=100, delta=1e-5)
    >>> plain = epsilon_truncated_poisson_bounds(dataset_size=1000, max_batch_size=1000, **kw)
    >>> from dpacct.pld import PLDAccountant
    >>> float(plain.upper.value) == float(PLDAccountant().step(noise_multiplier=1.0,
    ...     sampling_probability=0.01, count=100).get_epsilon(1e-5))
    True
    """
    sigma, q, n, b, relation = _validate(noise_multiplier, sampling_probability, dataset_size, max_batch_size,
                                         neighboring_relation)
    t = _check.count("steps", steps, minimum=1)
    d = _check.delta_array(delta)
    return _bounds(sigma, q, t, n, b, relation, relative_accuracy, "epsilon", d)


def truncated_poisson_rows(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    dataset_size: int,
    max_batch_size: int,
    quantity: Literal["epsilon", "delta"],
    at: float,
    neighboring_relation: Relation = "add_remove",
) -> tuple[tuple[str, Value], ...]:
    """Rows for the sampler comparison: ``("truncated_poisson", lower bound)`` and ``(..., upper bound)``.

    Parameters
    ----------
    noise_multiplier, sampling_probability, steps, dataset_size, max_batch_size, neighboring_relation
        As in :func:`delta_truncated_poisson_bounds`.
    quantity : {"epsilon", "delta"}
        ``"epsilon"``: epsilons at delta ``at``; ``"delta"``: deltas at epsilon ``at``.
    at : float
        The fixed delta (in ``(0, 1)``) or epsilon (``>= 0``).

    Returns
    -------
    tuple of (str, Value)
        Two rows, the certified lower and upper bound, each a :class:`dpacct.results.Value`
        whose ``method`` starts with ``"PLD, "``.

    Examples
    --------
    >>> rows = truncated_poisson_rows(noise_multiplier=1.0, sampling_probability=0.01, steps=100,
    ...                               dataset_size=1000, max_batch_size=20, quantity="epsilon", at=1e-5)
    >>> [(s, v.kind) for s, v in rows]
    [('truncated_poisson', 'lower bound'), ('truncated_poisson', 'upper bound')]
    """
    which = _check.one_of("quantity", quantity, ("epsilon", "delta"))
    common = dict(noise_multiplier=noise_multiplier, sampling_probability=sampling_probability, steps=steps,
                  dataset_size=dataset_size, max_batch_size=max_batch_size,
                  neighboring_relation=neighboring_relation)
    if which == "epsilon":
        bounds = epsilon_truncated_poisson_bounds(delta=_check.delta(at), **common)  # type: ignore[arg-type]
    else:
        bounds = delta_truncated_poisson_bounds(epsilon=_check.epsilon(at), **common)  # type: ignore[arg-type]
    return (("truncated_poisson", bounds.lower.as_value()), ("truncated_poisson", bounds.upper.as_value()))
