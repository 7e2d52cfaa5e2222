r"""Zero-concentrated differential privacy (zCDP): Gaussian rho, additive composition, conversions.

A mechanism is :math:`\rho`-zCDP if its Renyi divergence of every order
:math:`\alpha > 1` is at most :math:`\alpha\rho` (Bun & Steinke 2016). Composition
adds :math:`\rho`; the Gaussian mechanism with noise multiplier :math:`\sigma` is
exactly :math:`1/(2\sigma^2)`-zCDP. Everything here is closed-form, so this module is
pure Python over NumPy/SciPy.

Three analyses of DP-SGD-style training are offered, each labelled with what kind of
number it returns:

* :func:`random_reshuffling_rho` / :func:`shuffled_epochs_epsilon`: disjoint batches
  within an epoch (Yu et al. 2019, Thm 2), a certified upper bound. For equal-noise
  epochs the exact Gaussian curve with :math:`\sigma/\sqrt{E}` is reported beside it;
  that one is tight for deterministic batches and an upper bound for shuffling.
* :func:`random_sampling_epsilon_heuristic`: Poisson sampling by Yu et al. 2019, Thm 3,
  which is empirically validated but **not proven**; its name, docstring and result
  say so, and it refuses inputs outside its stated validity condition.
* :class:`ZCDPAccountant`: the accountant interface (Gaussian mechanisms, pure-DP
  mechanisms, the exponential mechanism, or raw :math:`\rho`).
"""

from dpacct.zcdp.accountant import ZCDPAccountant
from dpacct.zcdp.conversions import (
    CONVERSIONS,
    GAUSSIAN_KIND,
    HEURISTIC_KIND,
    ZCDP_KIND,
    _gaussian_rho,
    delta_from_rho,
    epsilon_from_rho,
    gaussian_rho,
    pure_dp_to_rho,
    rho_from_pure_dp,
    rho_to_delta,
    rho_to_epsilon,
)
from dpacct.zcdp.training import (
    HeuristicEpsilon,
    ShuffledEpochs,
    random_reshuffling_rho,
    random_sampling_epsilon_heuristic,
    shuffled_epochs_epsilon,
)

__all__ = [
    "CONVERSIONS",
    "GAUSSIAN_KIND",
    "HEURISTIC_KIND",
    "HeuristicEpsilon",
    "ShuffledEpochs",
    "ZCDPAccountant",
    "ZCDP_KIND",
    "delta_from_rho",
    "epsilon_from_rho",
    "gaussian_rho",
    "pure_dp_to_rho",
    "random_reshuffling_rho",
    "random_sampling_epsilon_heuristic",
    "rho_from_pure_dp",
    "rho_to_delta",
    "rho_to_epsilon",
    "shuffled_epochs_epsilon",
]
