r"""Batch samplers compared honestly: deterministic, Poisson, shuffled, fixed-size and truncated Poisson batches.

Adaptive batch linear queries (ABLQ) are the mechanism behind DP-SGD. With ``n = b T``
records, one epoch is ``T`` batches, the noise multiplier is ``sigma`` and neighbouring
datasets differ by zeroing out one record. How the batches are drawn changes the
guarantee (Chua et al., ICML 2024):

* **deterministic**: each record is in exactly one batch per epoch, so ``E`` epochs
  are exactly one Gaussian mechanism with ``sigma / sqrt(E)``: :func:`delta_deterministic`
  and :func:`epsilon_deterministic` are **exact**.
* **Poisson**: each record joins each batch with probability ``q = 1/T``, ``E T`` steps;
  the PLD accountant gives a certified ``(lower, upper)`` pair and RDP a second upper bound
  (:func:`delta_poisson_bounds`, :func:`epsilon_poisson_bounds`).
* **shuffle**: a random permutation cut into ``T`` batches. No tight accountant is known.
  Shuffling never does worse than deterministic batches, so the deterministic curve is a
  certified **upper bound** (:func:`delta_shuffle_upper`); the events
  ``E_C = {max_t w_t >= C}`` give a **lower bound** (:func:`delta_shuffle_lower`), which is
  often far above the Poisson number. A shuffled run therefore has the honest interval
  ``[shuffle lower bound, deterministic upper bound]`` (:func:`shuffle_interval`) and
  never the Poisson number.
* **fixed-size**: every step an independent batch of exactly ``b`` records, without or
  with replacement. A neighbour swaps one gradient of the sum: the Poisson pair at
  ``sigma/2`` (tight under add/remove; :mod:`dpacct.samplers.fixed_size`,
  :func:`fixed_size_bounds`).
* **truncated Poisson**: Poisson batches cut to at most ``B`` records (a uniformly
  random ``B``-subset of a larger draw); certified ``(lower, upper)`` PLD bounds
  from a dominating mixture (:mod:`dpacct.samplers.truncated_poisson`,
  :func:`delta_truncated_poisson_bounds`, :func:`epsilon_truncated_poisson_bounds`).
* **balls-in-bins** (each record in one uniformly random step of each epoch) and
  **random allocation** of ``k`` of the ``t`` steps (:mod:`dpacct.samplers.allocation`):
  certified bounds (for balls-in-bins two-sided and tight, from the privacy loss
  distribution of the dominating pair: :class:`BallsInBinsAccountant`; for random
  allocation deterministic batches above and the per-epoch maximum below) and an opt-in
  Monte-Carlo estimate (Chua et al., AISTATS 2025; Feldman and Shenfeld 2025, 2026).

:func:`compare_run` puts all of these side by side for a user's run (:func:`compare_samplers`
the first three in Chua et al.'s parametrisation).

References
----------
.. [1] L. Chua, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, A. Sinha, C. Zhang,
   "How Private are DP-SGD Implementations?", ICML 2024, arXiv:2403.17673, Section 3
   (the shuffle lower bound) and Figures 1 and 3.
"""

from dpacct.samplers.allocation import (
    AllocationEpsilonEstimate,
    AllocationEstimate,
    BallsInBinsAccountant,
    allocation_rows,
    delta_allocation_estimate,
    delta_allocation_lower,
    delta_allocation_upper,
    epsilon_allocation_estimate,
    epsilon_allocation_lower,
    epsilon_allocation_upper,
)
from dpacct.samplers.bounds import (
    PERMUTATIONS,
    Bound,
    PoissonBounds,
    ShuffleInterval,
    delta_deterministic,
    delta_poisson_bounds,
    epsilon_deterministic,
    epsilon_poisson_bounds,
)
from dpacct.samplers.comparison import (
    SamplerComparison,
    SamplerSweep,
    compare_samplers,
    plot_samplers,
    sweep_samplers,
)
from dpacct.samplers.conjectured import (
    ConjecturedEpsilon,
    ConjecturedEstimate,
    delta_shuffle_conjectured_mc,
    epsilon_shuffle_conjectured_mc,
)
from dpacct.samplers.fixed_size import FixedSizeBounds, fixed_size_bounds, fixed_size_rows
from dpacct.samplers.run_comparison import RunComparison, compare_run
from dpacct.samplers.shuffle import (
    delta_shuffle_lower,
    delta_shuffle_upper,
    epsilon_shuffle_lower,
    epsilon_shuffle_upper,
    shuffle_interval,
)
from dpacct.samplers.shuffle_fresh import delta_shuffle_lower_fresh, epsilon_shuffle_lower_fresh
from dpacct.samplers.truncated_poisson import (
    TruncatedPoissonBounds,
    TruncatedPoissonPair,
    delta_truncated_poisson_bounds,
    epsilon_truncated_poisson_bounds,
    truncated_poisson_pair,
    truncated_poisson_rows,
)

__all__ = [
    "AllocationEpsilonEstimate",
    "AllocationEstimate",
    "BallsInBinsAccountant",
    "Bound",
    "ConjecturedEpsilon",
    "ConjecturedEstimate",
    "FixedSizeBounds",
    "PERMUTATIONS",
    "PoissonBounds",
    "RunComparison",
    "SamplerComparison",
    "SamplerSweep",
    "ShuffleInterval",
    "TruncatedPoissonBounds",
    "TruncatedPoissonPair",
    "allocation_rows",
    "compare_run",
    "compare_samplers",
    "delta_allocation_estimate",
    "delta_allocation_lower",
    "delta_allocation_upper",
    "delta_deterministic",
    "delta_poisson_bounds",
    "delta_shuffle_conjectured_mc",
    "delta_shuffle_lower",
    "delta_shuffle_lower_fresh",
    "delta_shuffle_upper",
    "delta_truncated_poisson_bounds",
    "epsilon_allocation_estimate",
    "epsilon_allocation_lower",
    "epsilon_allocation_upper",
    "epsilon_deterministic",
    "epsilon_poisson_bounds",
    "epsilon_shuffle_conjectured_mc",
    "epsilon_shuffle_lower",
    "epsilon_shuffle_lower_fresh",
    "epsilon_shuffle_upper",
    "epsilon_truncated_poisson_bounds",
    "fixed_size_bounds",
    "fixed_size_rows",
    "plot_samplers",
    "shuffle_interval",
    "sweep_samplers",
    "truncated_poisson_pair",
    "truncated_poisson_rows",
]
