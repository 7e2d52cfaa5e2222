"""Former name of :mod:`dpacct.samplers` (batch samplers compared honestly; Chua et al. 2024).

Every public name of ``dpacct.ablq`` is still importable from here; new code should use
``dpacct.samplers``.
"""

from dpacct.samplers import (
    Bound,
    ConjecturedEpsilon,
    ConjecturedEstimate,
    PERMUTATIONS,
    PoissonBounds,
    SamplerComparison,
    SamplerSweep,
    ShuffleInterval,
    compare_samplers,
    delta_deterministic,
    delta_poisson_bounds,
    delta_shuffle_conjectured_mc,
    delta_shuffle_lower,
    delta_shuffle_upper,
    epsilon_deterministic,
    epsilon_poisson_bounds,
    epsilon_shuffle_conjectured_mc,
    epsilon_shuffle_lower,
    epsilon_shuffle_upper,
    plot_samplers,
    shuffle_interval,
    sweep_samplers,
)

__all__ = [
    "Bound",
    "ConjecturedEpsilon",
    "ConjecturedEstimate",
    "PERMUTATIONS",
    "PoissonBounds",
    "SamplerComparison",
    "SamplerSweep",
    "ShuffleInterval",
    "compare_samplers",
    "delta_deterministic",
    "delta_poisson_bounds",
    "delta_shuffle_conjectured_mc",
    "delta_shuffle_lower",
    "delta_shuffle_upper",
    "epsilon_deterministic",
    "epsilon_poisson_bounds",
    "epsilon_shuffle_conjectured_mc",
    "epsilon_shuffle_lower",
    "epsilon_shuffle_upper",
    "plot_samplers",
    "shuffle_interval",
    "sweep_samplers",
]
