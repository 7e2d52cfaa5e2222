r"""Fixed-size batches: exactly ``b`` of the ``n`` records each step, without or with replacement.

Each step draws a batch of exactly ``b`` records, independently of the other steps:
a uniformly random ``b``-subset (without replacement) or ``b`` independent uniform draws
(with replacement; a record may appear several times). The clipped gradients of the
batch are summed and ``N(0, (sigma C)^2 I)`` is added.

Why the sensitivity doubles. A neighbour never just adds a gradient to the sum, as under
Poisson sampling: the batch still holds ``b`` records, so including the differing record
``x`` pushes another record ``y`` out, and the sum moves by ``g(x) - g(y)``, up to ``2C``.

The pairs, with ``g = b/n`` (without replacement) or ``g = 1 - (1 - 1/n)^b`` (the
probability that ``x`` is drawn at all), and ``P_g = (1 - g) N(0, s^2) + g N(2, s^2)``:

* **add/remove, without replacement.** For ``D' = D + {x}`` couple the batches: with
  probability ``g`` the batch of ``D'`` is that of ``D`` with one uniformly chosen record
  replaced by ``x``, else the same. So ``M(D') = (1 - g) M(D) + g A`` with ``A`` a
  mixture of shifts of ``M(D)``'s components by at most 2, and joint convexity of the
  hockey-stick divergence gives the "remove" pair ``(P_g, N(0, s^2))`` for
  ``(M(D'), M(D))`` and the "add" pair ``(N(0, s^2), P_g)`` for the other order; the
  order is the same at every step, so delta is the larger of the two compositions, as for
  Poisson sampling (Zhu, Dong, Wang, "Optimal Accounting of Differential Privacy via
  Characteristic Function", AISTATS 2022, arXiv:2106.08567, Thm 10, whose proof carries
  over). It is **tight**: if every record of ``D`` has gradient ``-u`` and ``x`` has
  ``+u`` (``|u| = C``), ``M(D') = (1 - g) N(-b u) + g N((2 - b) u)`` and ``M(D) = N(-b u)``
  exactly. ``n`` is the larger dataset's size (``g = b/n`` is the worst case over the user's
  data and its neighbours). This is the Poisson pair at noise multiplier ``sigma/2``.
* **replace-one, without replacement.** The same pair bounds each step in either order
  (Balle, Barthe, Gaboardi, "Privacy Amplification by Subsampling: Tight Analyses via
  Couplings and Divergences", NeurIPS 2018, arXiv:1807.01647; Zhu et al. 2022), but here
  one pair of datasets can realise ``(P_g, N(0))`` at some steps and ``(N(0), P_g)`` at
  others (swap the roles of ``x`` and ``x'`` in the example above). A step is then only
  known to be ``C_g(f)``-DP for the symmetrised trade-off function ``min{f, f^-1}**``
  (Dong, Roth, Su, "Gaussian Differential Privacy", JRSS-B 2022, arXiv:1905.02383,
  Thm 4.2), which the PLD engine composes (``dpacct._core.pld.symmetrised_step``). RDP,
  which bounds every step in its worse order, is a second certified upper bound and is
  often tighter here; the lower bound is the pair realised in one order. The truth lies
  between, and the interval is wider than for add/remove (about 15-20 % of epsilon at
  ``sigma`` = 1-4, ``b/n = 256/60000``, 10,000 steps).
* **zero-out** (Chua et al., ICML 2024, the adjacency of :func:`dpacct.samplers.compare_run`):
  a zeroed record is a record with gradient 0, so zero-out neighbours are replace-one
  neighbours and share that upper bound. Lower bound: the Poisson pairs at noise
  multiplier ``sigma`` and rate ``g``, realised by gradients 0 (remove) or all ``u``
  (add): fixed-size batches are never more private than Poisson batches of the same rate.
* **with replacement.** ``x`` is drawn ``L ~ Binomial(b, 1/n)`` times. Splitting on
  ``L >= 1`` (probability ``g``) and revealing ``L`` (Balle et al. 2018's advanced joint
  convexity, then joint convexity over ``L``) gives the pair "``L`` revealed, then the
  Poisson pair at rate ``g`` and sensitivity ``2L``" (``L`` up to where
  ``P(L > L_max | L >= 1) <= 1e-25``, the rest charged to ``+inf``); the lower bound is the
  realised pair ``sum_l P(L = l) N(2l)`` against ``N(0)``. Revealing ``L`` costs: the
  interval is wide at small ``sigma`` (e.g. [19.5, 27.3] at ``sigma = 1``) and tight at
  large ``sigma`` ([0.844, 0.849] at ``sigma = 4``).

The issue dp-accounting#378 reports its RDP for sampling without replacement under
replace-one underestimated by 4x: it applies the Wang, Balle, Kasiviswanathan (AISTATS
2019, arXiv:1808.00087) bound to a Gaussian of sensitivity 1 instead of 2. Here the
sensitivity is 2 throughout (tested against its output).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Literal

from dpacct import _check
from dpacct.mechanisms import NEIGHBORING_RELATIONS, FixedSizeSampledGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.rdp import OrderGridWarning, RDPAccountant
from dpacct.results import Interval, Value
from dpacct.samplers.bounds import Bound, Quantity

__all__ = ["FixedSizeBounds", "fixed_size_bounds", "fixed_size_rows"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FixedSizeBounds:
    """Fixed-size batches: certified PLD ``lower <= true <= upper``, and an RDP upper bound (without replacement).

    ``upper`` is the smaller of the PLD and RDP upper bounds (both certified; its
    ``method`` says which); ``rdp_upper`` is None with replacement.
    """

    lower: Bound
    upper: Bound
    rdp_upper: Bound | None

    def as_interval(self) -> Interval:
        """The pair as a certified :class:`dpacct.results.Interval`."""
        return Interval(lower=self.lower.value, upper=self.upper.value, quantity=self.lower.quantity,
                        method=self.upper.method, details={"sampler": self.lower.sampler})


def _sampler_name(replacement: bool) -> str:
    return "fixed_size_replacement" if replacement else "fixed_size"


def fixed_size_bounds(
    *,
    noise_multiplier: float,
    batch_size: int,
    dataset_size: int,
    steps: int,
    delta: float | None = None,
    epsilon: float | None = None,
    replacement: bool = False,
    neighboring_relation: Literal["add_remove", "replace_one", "zero_out"] = "add_remove",
) -> FixedSizeBounds:
    """Certified epsilon (at ``delta``) or delta (at ``epsilon``) for ``steps`` fixed-size batches.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, finite and ``> 0``.
    batch_size, dataset_size : int
        ``1 <= b <= n``.
    steps : int
        Number of steps T ``>= 0``.
    delta, epsilon : float
        Exactly one: the fixed delta (bounds on epsilon) or epsilon (bounds on delta).
    replacement : bool
        Draws with replacement (default: a uniformly random subset).
    neighboring_relation : {"add_remove", "replace_one", "zero_out"}
        See the module notes: which pair, and how tight.

    Returns
    -------
    FixedSizeBounds

    Examples
    --------
    Add/remove without replacement is the Poisson pair at half the noise multiplier:

    >>> b = fixed_size_bounds(noise_multiplier=4.0, batch_size=256, dataset_size=60000, steps=1000, delta=1e-5)
    >>> round(b.lower.value, 3), round(b.upper.value, 3)
    (0.245, 0.246)
    """
    mechanism = FixedSizeSampledGaussianMechanism(noise_multiplier=noise_multiplier, batch_size=batch_size,
                                                  dataset_size=dataset_size, replacement=replacement,
                                                  neighboring_relation=neighboring_relation)
    t = _check.count("steps", steps)
    if (delta is None) == (epsilon is None):
        msg = "give exactly one of delta (bounds on epsilon) or epsilon (bounds on delta)"
        raise ValueError(msg)
    _check.one_of("neighboring_relation", neighboring_relation, NEIGHBORING_RELATIONS)
    quantity: Quantity = "epsilon" if delta is not None else "delta"
    at = _check.delta(delta) if delta is not None else _check.epsilon(epsilon)
    sampler = _sampler_name(mechanism.replacement)
    draw = "with replacement" if mechanism.replacement else "without replacement"
    setting = (f"{t} steps, batches of {mechanism.batch_size} of {mechanism.dataset_size} records {draw}, "
               f"{neighboring_relation} adjacency")
    pld = PLDAccountant(relative_accuracy=0.005 if quantity == "epsilon" else 0.02).compose(mechanism, t)
    if quantity == "epsilon":
        lower, upper = (float(x) for x in pld.epsilon_bounds(at))
    else:
        lower, upper = (float(x) for x in pld.delta_bounds(at))
    pair = {"add_remove": "Poisson pair at sigma/2 (tight)",
            "replace_one": "symmetrised pair, Dong-Roth-Su Thm 4.2",
            "zero_out": "symmetrised replace-one pair, Dong-Roth-Su Thm 4.2"}[neighboring_relation]
    if mechanism.replacement:
        pair = f"hit count revealed, {pair}"
    upper_method = f"PLD, {pair}; {setting}"
    lower_method = f"PLD, realised pair; {setting}"
    rdp_bound: Bound | None = None
    if not mechanism.replacement:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OrderGridWarning)  # an edge order still gives a valid upper bound
            rdp = RDPAccountant().compose(mechanism, t)
            rdp_value = float(rdp.get_epsilon(at) if quantity == "epsilon" else rdp.get_delta(at))
        rdp_bound = Bound(value=rdp_value, quantity=quantity, kind="upper bound", sampler=sampler,
                          method=f"RDP, Poisson RDP at sigma/2 (both orders); {setting}")
        if rdp_value < upper:
            upper, upper_method = rdp_value, rdp_bound.method
    lower = min(lower, upper)
    return FixedSizeBounds(
        lower=Bound(value=lower, quantity=quantity, kind="lower bound", sampler=sampler, method=lower_method),
        upper=Bound(value=upper, quantity=quantity, kind="upper bound", sampler=sampler, method=upper_method),
        rdp_upper=rdp_bound,
    )


def fixed_size_rows(
    *,
    noise_multiplier: float,
    batch_size: int,
    dataset_size: int,
    steps: int,
    quantity: Quantity,
    at: float,
    replacement: bool = False,
    neighboring_relation: Literal["add_remove", "replace_one", "zero_out"] = "zero_out",
) -> tuple[tuple[str, Value], ...]:
    """``(sampler, Value)`` rows for the comparison table: lower bound, upper bound (PLD and RDP)."""
    keywords: dict[str, Any] = {"delta": at} if quantity == "epsilon" else {"epsilon": at}
    bounds = fixed_size_bounds(noise_multiplier=noise_multiplier, batch_size=batch_size,
                               dataset_size=dataset_size, steps=steps, replacement=replacement,
                               neighboring_relation=neighboring_relation, **keywords)
    name = _sampler_name(replacement)
    rows = [(name, bounds.lower.as_value()), (name, bounds.upper.as_value())]
    if bounds.rdp_upper is not None and bounds.rdp_upper.method != bounds.upper.method:
        rows.append((name, bounds.rdp_upper.as_value()))
    return tuple(rows)
