r"""Dynamic privacy-budget allocation: noise schedules over epochs (Yu et al. 2019, Section IV-A).

A schedule gives the noise multiplier :math:`\sigma_t` of epoch :math:`t = 0, 1, 2, \dots`.
Under random-reshuffling accounting (disjoint batches in an epoch, see
:func:`dpacct.zcdp.random_reshuffling_rho`) epoch :math:`t` costs
:math:`\rho_t = 1/(2\sigma_t^2)`, and :func:`allocate_budget` trains until the next
epoch would push the total over the budget. :func:`allocate_budget_epsilon` does the
same for an :math:`(\varepsilon, \delta)` budget through any registered accountant
(one Gaussian mechanism per epoch), and :func:`solve_decay` finds the decay rate that
gives a target number of epochs.

Schedules (all frozen, keyword-only; ``t`` counts epochs from 0):

=================  ==========================================================
``Uniform``        :math:`\sigma_t = \sigma_c`
``TimeBased``      :math:`\sigma_t = \sigma_0 / (1 + k t)`
``Exponential``    :math:`\sigma_t = \sigma_0 e^{-k t}`
``Step``           :math:`\sigma_t = \sigma_0 k^{\lfloor t / P \rfloor}`
``Polynomial``     :math:`(\sigma_0 - \sigma_{end})(1 - t/P)^k + \sigma_{end}` for
                   :math:`t < P`, then :math:`\sigma_{end}`
``ValidationBased`` :math:`\sigma \leftarrow k\sigma` when validation accuracy stalls
=================  ==========================================================

References
----------
.. [1] L. Yu, L. Liu, C. Pu, M. E. Gursoy, S. Truex, "Differentially Private Model
   Publishing for Deep Learning", IEEE S&P 2019, arXiv:1904.02200 (v4), Section IV-A.
"""

from dpacct.schedules.allocation import (
    Allocation,
    DecaySolution,
    EpsilonAllocation,
    allocate_budget,
    allocate_budget_epsilon,
    solve_decay,
)
from dpacct.schedules.shapes import (
    SCHEDULES,
    Exponential,
    Polynomial,
    Schedule,
    Step,
    TimeBased,
    Uniform,
    ValidationBased,
    make_schedule,
)

__all__ = [
    "SCHEDULES",
    "Allocation",
    "DecaySolution",
    "EpsilonAllocation",
    "Exponential",
    "Polynomial",
    "Schedule",
    "Step",
    "TimeBased",
    "Uniform",
    "ValidationBased",
    "allocate_budget",
    "allocate_budget_epsilon",
    "make_schedule",
    "solve_decay",
]
