"""dpacct for torch training loops: samplers that match the accounting, an optimizer hook, opacus drop-in.

Never imported by ``import dpacct``; needs torch (``pip install "dpacct[torch]"``).
Importing it with opacus installed registers the opacus accountants ``"dpacct-pld"`` and
``"dpacct-rdp"`` (:mod:`dpacct.torch.opacus_accountants`).

* :mod:`~dpacct.torch.samplers`: :class:`PoissonBatchSampler`, :class:`ShuffleBatchSampler`,
  :class:`DeterministicBatchSampler`, :class:`FixedSizeBatchSampler`,
  :class:`TruncatedPoissonBatchSampler`, :class:`BallsInBinsBatchSampler`, :class:`RandomAllocationBatchSampler`,
  :func:`identify` (refuses samplers it cannot analyse).
* :mod:`~dpacct.torch.accountant`: :class:`PrivacyAccountant`, attached to any
  ``torch.optim.Optimizer``; budget enforced before the step that would exceed it.
* :mod:`~dpacct.torch.budget`: :func:`plan_epochs` for noise schedules.
* :mod:`~dpacct.torch.dpsgd`: :func:`dp_sgd_step` and :func:`dp_sgd_jl_step`.
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised only without torch
    msg = 'dpacct.torch needs PyTorch: pip install "dpacct[torch]" (or pip install torch)'
    raise ImportError(msg) from error

from dpacct.torch.accountant import SAMPLER_RULES, BudgetExhaustedError, PrivacyAccountant
from dpacct.torch.budget import EpochPlan, plan_epochs
from dpacct.torch.dpsgd import dp_sgd_jl_step, dp_sgd_step, jl_norm_estimates, per_sample_gradients
from dpacct.torch.samplers import (
    BallsInBinsBatchSampler,
    DeterministicBatchSampler,
    FixedSizeBatchSampler,
    PoissonBatchSampler,
    RandomAllocationBatchSampler,
    SamplingInfo,
    ShuffleBatchSampler,
    TruncatedPoissonBatchSampler,
    UnidentifiedSamplerError,
    empty_safe_collate,
    identify,
    register_sampler,
    with_epoch_clock,
)

try:
    import opacus as _opacus  # noqa: F401
except ImportError:  # opacus is optional: without it there is nothing to register
    OPACUS_REGISTERED = False
else:
    from dpacct.torch import opacus_accountants as _opacus_accountants

    _opacus_accountants.register()
    OPACUS_REGISTERED = True

__all__ = [
    "OPACUS_REGISTERED",
    "SAMPLER_RULES",
    "BallsInBinsBatchSampler",
    "BudgetExhaustedError",
    "DeterministicBatchSampler",
    "EpochPlan",
    "FixedSizeBatchSampler",
    "PoissonBatchSampler",
    "PrivacyAccountant",
    "RandomAllocationBatchSampler",
    "SamplingInfo",
    "ShuffleBatchSampler",
    "TruncatedPoissonBatchSampler",
    "UnidentifiedSamplerError",
    "dp_sgd_jl_step",
    "dp_sgd_step",
    "empty_safe_collate",
    "identify",
    "jl_norm_estimates",
    "per_sample_gradients",
    "plan_epochs",
    "register_sampler",
    "with_epoch_clock",
]
