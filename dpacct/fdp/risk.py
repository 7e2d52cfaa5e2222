r"""Privacy as attack risk: the largest membership-inference success, and noise calibrated to it.

Every membership-inference attack is a test between neighbouring datasets, so at
false-positive rate ``alpha`` its true-positive rate is at most ``1 - f(alpha)``
for the mechanism's trade-off function ``f`` (Dong, Roth, Su, arXiv:1905.02383,
Section 2.1). Kulynych, Gomez, Kaissis, du Pin Calmon, Troncoso, "Attack-Aware
Noise Calibration for Differential Privacy", NeurIPS 2024, arXiv:2407.02191,
calibrate the noise to such an attack bound directly instead of to an epsilon;
:func:`calibrate_noise_for_tpr` does that for Poisson DP-SGD, shuffled and
deterministic batches, and DP-SGD-JL.

Batch samplers (add/remove adjacency for Poisson, replace-one otherwise):

``"poisson"``
    the composed PLD curve of :class:`~dpacct.fdp.FDPAccountant` (certified);
``"deterministic"``
    each record is in ``E`` batches, exactly ``G_mu`` with ``mu = sqrt(E) / sigma``;
``"shuffle"``
    shuffling never does worse than deterministic batches (Chua, Ghazi, Kamath,
    Kumar, Manurangsi, Sinha, Zhang, "How Private are DP-SGD Implementations?",
    ICML 2024, arXiv:2403.17673), so the same ``G_mu`` is a certified curve for it
    (not exact).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scipy import special

from dpacct import _check
from dpacct.fdp.accountant import FDPAccountant
from dpacct.fdp.jl import PROJECTIONS, DPSGDJLMechanism
from dpacct.fdp.tradeoff import TradeoffCurve
from dpacct.results import Value

__all__ = ["SAMPLERS", "TPRCalibration", "calibrate_noise_for_tpr", "tradeoff_for_run"]

SAMPLERS: tuple[str, ...] = ("poisson", "shuffle", "deterministic")


def tradeoff_for_run(
    *,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    sampler: str = "poisson",
    jl_dim: int | None = None,
    projections: str = "shared",
    accountant: FDPAccountant | None = None,
) -> TradeoffCurve:
    """The trade-off curve of a DP-SGD run (certified lower curve; exact for deterministic batches).

    Parameters
    ----------
    noise_multiplier, sampling_probability, steps
        sigma, the batch fraction q (Poisson rate, or batch size / dataset size), and T.
    sampler : {"poisson", "shuffle", "deterministic"}
        How batches are formed (see the module notes). ``E = T q`` epochs for the
        other two.
    jl_dim : int, optional
        DP-SGD-JL with this many projections (Poisson only).
    projections : {"shared", "per_example"}
        The JL model (see :mod:`dpacct.fdp.jl`).

    Examples
    --------
    >>> c = tradeoff_for_run(noise_multiplier=1.0, sampling_probability=0.5, steps=2, sampler="deterministic")
    >>> round(float(c.tpr(0.01)), 5), c.kind      # one epoch: exactly G_1
    (0.09236, 'exact')
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    q = _check.probability("sampling_probability", sampling_probability)
    t = _check.count("steps", steps)
    _check.one_of("sampler", sampler, SAMPLERS)
    if sampler != "poisson":
        if jl_dim is not None:
            msg = "jl_dim is supported with sampler='poisson' only"
            raise ValueError(msg)
        epochs = t * q
        mu = math.sqrt(epochs) / sigma
        if sampler == "deterministic":
            return TradeoffCurve.gaussian(mu, method=f"deterministic batches, {epochs:g} epochs: exact Gaussian")
        return TradeoffCurve.gaussian(mu, kind="upper bound",
                                      method="shuffled batches: bounded by the deterministic-batch Gaussian curve")
    acct = accountant if accountant is not None else FDPAccountant()
    if jl_dim is None:
        acct.step(noise_multiplier=sigma, sampling_probability=q, count=t)
    else:
        _check.one_of("projections", projections, PROJECTIONS)
        model: Literal["shared", "per_example"] = "shared" if projections == "shared" else "per_example"
        acct.compose(DPSGDJLMechanism(noise_multiplier=sigma, sampling_probability=q, jl_dim=jl_dim,
                                      projections=model), t)
    return acct.tradeoff()


@dataclass(frozen=True, slots=True, kw_only=True)
class TPRCalibration:
    """The noise multiplier found by :func:`calibrate_noise_for_tpr` and what it achieves.

    ``tpr`` is the certified largest TPR at ``fpr`` with that noise (``<=`` the
    target); ``evaluations`` counts trade-off curves computed.
    """

    noise_multiplier: float
    tpr: Value
    fpr: float
    target_tpr: float
    sampler: str
    evaluations: int


def calibrate_noise_for_tpr(
    *,
    target_tpr: float,
    fpr: float,
    sampling_probability: float,
    steps: int,
    sampler: str = "poisson",
    jl_dim: int | None = None,
    projections: str = "shared",
    relative_tolerance: float = 1e-3,
) -> TPRCalibration:
    r"""The smallest noise multiplier (to ``relative_tolerance``, rounded up) with certified TPR <= target at ``fpr``.

    Deterministic and shuffled batches are closed form: ``1 - G_mu(alpha) =
    Phi(mu - Phi^{-1}(1 - alpha))``, so ``mu = Phi^{-1}(TPR) + Phi^{-1}(1 - alpha)``
    and ``sigma = sqrt(E) / mu``. Poisson (and DP-SGD-JL) bisects on sigma over
    the certified curve (the TPR falls as sigma grows).

    Examples
    --------
    >>> res = calibrate_noise_for_tpr(target_tpr=0.09236, fpr=0.01, sampling_probability=1.0, steps=1,
    ...                               sampler="deterministic")
    >>> round(res.noise_multiplier, 3)
    1.0
    """
    target = _check.probability("target_tpr", target_tpr)
    alpha = _check.probability("fpr", fpr)
    if not (alpha < target < 1.0):
        msg = f"target_tpr must be in (fpr, 1) = ({alpha!r}, 1), got {target!r}"
        raise ValueError(msg)
    q = _check.probability("sampling_probability", sampling_probability)
    t = _check.count("steps", steps)
    _check.one_of("sampler", sampler, SAMPLERS)
    tol = _check.positive("relative_tolerance", relative_tolerance)

    def tpr_at(sigma: float) -> Value:
        curve = tradeoff_for_run(noise_multiplier=sigma, sampling_probability=q, steps=t, sampler=sampler,
                                 jl_dim=jl_dim, projections=projections)
        return curve.tpr(alpha)

    if sampler != "poisson":
        mu = float(special.ndtri(target) - special.ndtri(alpha))
        sigma = math.sqrt(t * q) / mu * (1.0 + 1e-12)
        return TPRCalibration(noise_multiplier=sigma, tpr=tpr_at(sigma), fpr=alpha, target_tpr=target,
                              sampler=sampler, evaluations=1)
    evaluations = 0
    lo, hi = 0.0, 1.0
    while True:
        evaluations += 1
        if float(tpr_at(hi)) <= target:
            break
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            msg = "no noise multiplier up to 1e6 meets target_tpr"
            raise ValueError(msg)
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        evaluations += 1
        if float(tpr_at(mid)) <= target:
            hi = mid
        else:
            lo = mid
    return TPRCalibration(noise_multiplier=hi, tpr=tpr_at(hi), fpr=alpha, target_tpr=target, sampler=sampler,
                          evaluations=evaluations + 1)
