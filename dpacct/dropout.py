r"""DP dropout (Ermiş & Cemgil, "Differentially Private Dropout", arXiv:1712.01665).

* :func:`dpd_ac_noise_multiplier` and :func:`dpd_zcdp_noise_multiplier`: the two sound
  calibrations of the noise multiplier for a total :math:`(\varepsilon, \delta)`;
* :func:`dpd_paper_noise_multiplier`: the paper's own procedure, re-derived and labelled
  as NOT a guarantee (it composes over epochs instead of steps), beside the sound numbers;
* :func:`dropout_rates`: the per-weight Gaussian-dropout rates that match the noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check
from dpacct._shape import unwrap
from dpacct.results import Kind, Value
from dpacct.composition import _UP, classical_gaussian_noise_multiplier
from dpacct.zcdp.conversions import _gaussian_rho, epsilon_from_rho
from dpacct.zcdp.training import random_sampling_epsilon_heuristic

__all__ = [
    "DPD_ACCOUNTINGS",
    "DPD_PAPER_METHODS",
    "PAPER_KIND",
    "DropoutCalibration",
    "DropoutRates",
    "dpd_ac_noise_multiplier",
    "dpd_paper_noise_multiplier",
    "dpd_zcdp_noise_multiplier",
    "dropout_rates",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DropoutCalibration:
    """A noise multiplier for DP dropout and how it was obtained.

    ``kind`` says what the guarantee is (certified, or a heuristic); ``details``
    holds the intermediate quantities (per-step epsilon and delta, rho, epochs).
    """

    noise_multiplier: float
    method: str
    accounting: str
    kind: str
    epsilon: float
    delta: float
    details: dict[str, float] = field(default_factory=dict)

    def as_value(self) -> Value:
        """The noise multiplier in the shared vocabulary.

        ``"exact"``-style certainty does not apply to a calibration: a certified one is the
        safe end of its search (kind ``"upper bound"``, more noise than needed at most);
        the heuristic and the paper's procedure are ``"heuristic"``.
        """
        kind: Kind = "upper bound" if self.kind == "certified" else "heuristic"
        return Value(value=self.noise_multiplier, quantity="noise_multiplier", kind=kind,
                     method=f"{self.method}, {self.accounting}: {self.kind}", details=dict(self.details))


def _dpd_inputs(epsilon: Any, delta: Any, steps: Any, sampling_probability: Any) -> tuple[float, float, int, float]:
    eps = _check.positive("epsilon", epsilon)
    d = _check.delta(delta)
    t = _check.count("steps", steps, minimum=1)
    nu = _check.probability("sampling_probability", sampling_probability)
    if nu == 0.0:
        msg = f"sampling_probability must be in (0, 1], got {nu!r}"
        raise ValueError(msg)
    return eps, d, t, nu


def dpd_ac_noise_multiplier(
    *, epsilon: float, delta: float, steps: int, sampling_probability: float, delta_slack_fraction: float = 0.5
) -> DropoutCalibration:
    r"""DPD-AC: noise multiplier for a total :math:`(\varepsilon, \delta)` by advanced composition.

    Parameters
    ----------
    epsilon : float
        Total epsilon, finite and ``> 0``.
    delta : float
        Total delta in ``(0, 1)``.
    steps : int
        Number T of noisy steps, ``>= 1``.
    sampling_probability : float
        Poisson rate :math:`\nu \in (0, 1]` of each step's batch.
    delta_slack_fraction : float
        Fraction f of ``delta`` given to the advanced-composition slack
        :math:`\delta' = f\delta`; the steps get :math:`(1-f)\delta/T` each. Default 0.5.

    Returns
    -------
    DropoutCalibration
        A certified calibration: with this noise multiplier (relative to the
        sensitivity 2C of DPD), T steps are (epsilon, delta)-DP.

    Raises
    ------
    ValueError
        If the per-step epsilon :math:`\varepsilon_0` comes out ``>= 1``, where the
        classical Gaussian formula is not valid (the message says what to change).

    Notes
    -----
    Work backwards: find the per-step :math:`\varepsilon_s` with
    :math:`\varepsilon_s\sqrt{2T\log(1/\delta')} + T\varepsilon_s(e^{\varepsilon_s}-1) \le \varepsilon`
    (advanced composition), undo the amplification by sampling at rate :math:`\nu`,
    :math:`\varepsilon_0 = \log(1 + (e^{\varepsilon_s}-1)/\nu)`,
    :math:`\delta_0 = (1-f)\delta/(T\nu)`, and calibrate the Gaussian classically,
    :math:`\sigma = \sqrt{2\log(1.25/\delta_0)}/\varepsilon_0` (valid for
    :math:`\varepsilon_0 < 1`). B. Ermiş and A. T. Cemgil, "Differentially
    Private Dropout", arXiv:1712.01665.

    Examples
    --------
    >>> r = dpd_ac_noise_multiplier(epsilon=1.0, delta=1e-5, steps=1000, sampling_probability=0.01)
    >>> round(r.noise_multiplier, 2)
    11.29
    """
    eps, d, t, nu = _dpd_inputs(epsilon, delta, steps, sampling_probability)
    f = _check.real("delta_slack_fraction", delta_slack_fraction)
    if not 0.0 < f < 1.0:
        msg = f"delta_slack_fraction must be in (0, 1), got {f!r}"
        raise ValueError(msg)
    slack = f * d
    root = math.sqrt(2.0 * t * math.log(1.0 / slack))

    def total(x: float) -> float:
        return (x * root + t * x * math.expm1(x)) * _UP

    low, high = 0.0, eps / root  # total(high) >= eps since the second term is >= 0
    while high - low > 1e-15 * high:
        mid = 0.5 * (low + high)
        if total(mid) <= eps:
            low = mid
        else:
            high = mid
    eps_step = low  # total(low) <= eps: the safe end
    delta_step = (1.0 - f) * d / t
    eps0 = math.log1p(math.expm1(eps_step) / nu) / _UP  # rounded down: a smaller eps0 only adds noise
    delta0 = delta_step / nu
    if not eps0 < 1.0:
        msg = (f"the per-step epsilon0 = {eps0:.6g} must be < 1 for the classical Gaussian calibration; "
               "increase steps or sampling_probability, or decrease epsilon")
        raise ValueError(msg)
    if not delta0 < 1.0:
        msg = f"the per-step delta0 = {delta0:.6g} must be < 1; increase steps or sampling_probability"
        raise ValueError(msg)
    sigma = classical_gaussian_noise_multiplier(epsilon=eps0, delta=delta0)
    return DropoutCalibration(
        noise_multiplier=sigma, method="DPD-AC", accounting="advanced_composition", kind="certified",
        epsilon=eps, delta=d,
        details={"per_step_epsilon": eps0, "per_step_delta": delta0, "amplified_epsilon": eps_step,
                 "amplified_delta": delta_step, "delta_slack": slack},
    )


#: Accountings :func:`dpd_zcdp_noise_multiplier` offers; the second is a heuristic.
DPD_ACCOUNTINGS = ("random_reshuffling", "heuristic_random_sampling")


def dpd_zcdp_noise_multiplier(
    *, epsilon: float, delta: float, steps: int, sampling_probability: float, accounting: str,
    conversion: str = "improved",
) -> DropoutCalibration:
    r"""DPD-zCDP: noise multiplier for a total :math:`(\varepsilon, \delta)` through zCDP.

    Parameters
    ----------
    epsilon, delta, steps, sampling_probability
        As in :func:`dpd_ac_noise_multiplier`.
    accounting : {"random_reshuffling", "heuristic_random_sampling"}
        Which zCDP analysis of the batches; there is no default, because the two
        answer different questions:

        * ``"random_reshuffling"`` (certified): batches are disjoint within each of
          :math:`E = \lceil T\nu \rceil` epochs, each epoch costs :math:`1/(2\sigma^2)`
          (Yu et al. 2019, Thm 2), and the total :math:`E/(2\sigma^2)` is converted with
          ``conversion``.
        * ``"heuristic_random_sampling"`` (**heuristic, not a proven bound**): Poisson
          batches with the per-step :math:`\nu^2/\sigma^2` of Yu et al. 2019, Thm 3
          (:func:`dpacct.zcdp.random_sampling_epsilon_heuristic`), limited to
          :math:`\sigma \le 1/(16\nu)`. This is the calibration under which zCDP gives a
          much smaller noise multiplier than DPD-AC.
    conversion : {"improved", "classic"}
        zCDP to (epsilon, delta) conversion (random reshuffling only).

    Returns
    -------
    DropoutCalibration
        ``kind`` is ``"certified"`` or the heuristic label; the noise multiplier is
        the smallest found (bisection to relative 1e-12, safe end) meeting the budget.

    Notes
    -----
    zCDP cannot express amplification by Poisson subsampling with a certified
    bound, which is why the accounting must be named. B. Ermiş and
    A. T. Cemgil, "Differentially Private Dropout", arXiv:1712.01665.

    Examples
    --------
    >>> r = dpd_zcdp_noise_multiplier(epsilon=1.0, delta=1e-5, steps=1000, sampling_probability=0.01,
    ...                               accounting="heuristic_random_sampling")
    >>> round(r.noise_multiplier, 3), r.kind.startswith("heuristic")
    (2.247, True)
    """
    eps, d, t, nu = _dpd_inputs(epsilon, delta, steps, sampling_probability)
    method = _check.one_of("accounting", accounting, DPD_ACCOUNTINGS)
    if method == "random_reshuffling":
        epochs = _check.ceil_count(t * nu)

        def epsilon_at(sigma: float) -> float:
            return float(epsilon_from_rho(rho=epochs * _gaussian_rho(sigma), delta=d, conversion=conversion))

        low, high = 1e-3, 1.0
        while epsilon_at(high) > eps:
            low, high = high, 2.0 * high
        while epsilon_at(low) <= eps and low > 1e-300:
            low *= 0.5
        while high - low > 1e-12 * high:
            mid = 0.5 * (low + high)
            if epsilon_at(mid) <= eps:
                high = mid
            else:
                low = mid
        return DropoutCalibration(
            noise_multiplier=high, method="DPD-zCDP", accounting=method, kind="certified", epsilon=eps, delta=d,
            details={"epochs": float(epochs), "rho": epochs * _gaussian_rho(high), "achieved_epsilon": epsilon_at(high)},
        )

    def heuristic_at(sigma: float) -> float:
        return random_sampling_epsilon_heuristic(
            noise_multiplier=sigma, sampling_probability=nu, steps=t, delta=d
        ).epsilon

    sigma_max = 1.0 / (16.0 * nu)
    if heuristic_at(sigma_max) > eps:
        msg = (f"epsilon = {eps!r} is not reached within the validity range noise_multiplier <= 1/(16 "
               f"sampling_probability) = {sigma_max:.6g} of the heuristic; decrease sampling_probability or steps")
        raise ValueError(msg)
    low, high = 0.0, sigma_max
    while high - low > 1e-12 * high:
        mid = 0.5 * (low + high)
        if heuristic_at(mid) <= eps:
            high = mid
        else:
            low = mid
    result = random_sampling_epsilon_heuristic(noise_multiplier=high, sampling_probability=nu, steps=t, delta=d)
    return DropoutCalibration(
        noise_multiplier=high, method="DPD-zCDP", accounting=method, kind=result.kind, epsilon=eps, delta=d,
        details={"rho": result.rho, "achieved_epsilon": result.epsilon},
    )


#: Calibrations :func:`dpd_paper_noise_multiplier` re-derives from Ermiş & Cemgil.
DPD_PAPER_METHODS = ("DPD-AC", "DPD-zCDP")

#: What every number of :func:`dpd_paper_noise_multiplier` is.
PAPER_KIND = ("paper's procedure (Ermiş & Cemgil, arXiv:1712.01665), NOT a guarantee: it composes over "
              "E = T nu rounds instead of T steps")


def dpd_paper_noise_multiplier(
    *,
    epsilon: float,
    delta: float,
    epochs: int,
    sampling_probability: float,
    method: str,
    delta_split: float | None = None,
) -> DropoutCalibration:
    r"""The noise multiplier DP dropout's paper reports, re-derived: NOT a privacy guarantee.

    Ermiş & Cemgil ("Differentially Private Dropout", arXiv:1712.01665) report, for
    :math:`\varepsilon = 0.5`, :math:`\delta = 10^{-4}`, :math:`\nu = 0.01` and E = 200
    epochs (T = E/ν = 20,000 steps), σ = 10.88 (DPD-AC) and σ = 3.23 (DPD-zCDP). Their
    numbers come out only when the composition runs over the **E rounds** of
    :math:`1/\nu` steps instead of the T noisy steps, as below. Each round is then treated
    as one subsampled mechanism although it releases :math:`1/\nu` noisy updates, so the
    result is not a bound on the privacy of the training run. It is offered to compare
    with the paper; the sound calibrations are :func:`dpd_ac_noise_multiplier` and
    :func:`dpd_zcdp_noise_multiplier`.

    Parameters
    ----------
    epsilon, delta : float
        The budget the paper targets (``epsilon > 0``, ``delta`` in ``(0, 1)``).
    epochs : int
        E, the number of rounds the procedure composes over (``>= 1``).
    sampling_probability : float
        ν in ``(0, 1]``.
    method : {"DPD-AC", "DPD-zCDP"}
        Which of the paper's two calibrations.
    delta_split : float, optional
        DPD-AC: the fraction f of ``delta`` given to the advanced-composition slack
        (each round gets :math:`(1-f)\delta/E`); default 0.0049. DPD-zCDP: the per-round
        delta as a fraction g of :math:`\delta/E` (the zCDP conversion uses all of
        ``delta``); default 0.5.

    Returns
    -------
    DropoutCalibration
        ``kind`` is :data:`PAPER_KIND`: not a guarantee.

    Notes
    -----
    DPD-AC: solve :math:`\varepsilon_r\sqrt{2E\log(1/\delta')} + E\varepsilon_r(e^{\varepsilon_r}-1)
    = \varepsilon` with :math:`\delta' = f\delta`, undo the amplification,
    :math:`\varepsilon_0 = \log(1 + (e^{\varepsilon_r}-1)/\nu)`, and calibrate
    :math:`\sigma = \sqrt{2\log(1.25/\delta_0)}/\varepsilon_0` with
    :math:`\delta_0 = (1-f)\delta/E` (the classical formula, here outside its range
    :math:`\varepsilon_0 < 1`).

    DPD-zCDP: :math:`\rho` with :math:`\rho + 2\sqrt{\rho\log(1/\delta)} = \varepsilon`,
    per round :math:`\rho_r = \rho/E`, then :math:`\varepsilon_r = \rho_r +
    2\sqrt{\rho_r\log(1/\delta_r)}` with :math:`\delta_r = g\delta/E`, the amplification
    undone as above and the same classical calibration with :math:`\delta_0 = \delta_r`.

    Reproduction (ε = 0.5, δ = 1e-4, ν = 0.01, E = 200), searched over the δ split:

    ========  ======  ====================  ======================  ================
    method    paper   this procedure        sound DPD calibration   PLD (Poisson, T)
    ========  ======  ====================  ======================  ================
    DPD-AC    10.88   10.88 for f in        74.4 (advanced          ε ∈ [0.371,
                      [0.00482, 0.00499]    composition over T)     0.372] at 10.88
                      (9.65 at f = 0.5)
    DPD-zCDP  3.23    3.23 for g in         92.5 (random            ε ∈ [1.502,
                      [0.44, 0.53]          reshuffling, E epochs)  1.507] at 3.23
    ========  ======  ====================  ======================  ================

    The DPD calibrations differ because each of the T steps releases a noisy update:
    advanced composition has T terms, not E, and zCDP cannot express the amplification
    by subsampling, so its certified route counts whole epochs. The last column is the
    tight accounting of T = 20,000 Poisson-sampled steps (:class:`dpacct.PLDAccountant`,
    certified interval): the DPD-AC value happens to meet ε = 0.5 (the smallest σ that
    does is about 8.39, :func:`dpacct.calibrate` with ``accountant="pld"``), although
    its derivation does not prove it; the DPD-zCDP value does **not**: the run is not
    (0.5, 1e-4)-DP at σ = 3.23 (its ε is at least 1.50). Yu et al.'s random-sampling
    heuristic does not reach ε = 0.5 within its validity range here.

    Examples
    --------
    >>> ac = dpd_paper_noise_multiplier(epsilon=0.5, delta=1e-4, epochs=200, sampling_probability=0.01,
    ...                                 method="DPD-AC")
    >>> round(ac.noise_multiplier, 2), ac.kind.startswith("paper's procedure")
    (10.88, True)
    >>> zc = dpd_paper_noise_multiplier(epsilon=0.5, delta=1e-4, epochs=200, sampling_probability=0.01,
    ...                                 method="DPD-zCDP")
    >>> round(zc.noise_multiplier, 2)
    3.23
    """
    eps, d, rounds, nu = _dpd_inputs(epsilon, delta, epochs, sampling_probability)
    name = _check.one_of("method", method, DPD_PAPER_METHODS)
    default = 0.0049 if name == "DPD-AC" else 0.5
    split = default if delta_split is None else _check.real("delta_split", delta_split)
    if not 0.0 < split < 1.0 if name == "DPD-AC" else not 0.0 < split <= 1.0:
        msg = f"delta_split must be in (0, 1{')' if name == 'DPD-AC' else ']'} for {name}, got {split!r}"
        raise ValueError(msg)
    if name == "DPD-AC":
        slack = split * d
        root = math.sqrt(2.0 * rounds * math.log(1.0 / slack))
        low, high = 0.0, eps / root
        while high - low > 1e-15 * high:
            mid = 0.5 * (low + high)
            if mid * root + rounds * mid * math.expm1(mid) <= eps:
                low = mid
            else:
                high = mid
        eps_round, delta0 = low, (1.0 - split) * d / rounds
        details = {"rounds": float(rounds), "delta_slack": slack}
    else:
        rho = _rho_for(eps, d)
        rho_round = rho / rounds
        delta0 = split * d / rounds
        eps_round = rho_round + 2.0 * math.sqrt(rho_round * math.log(1.0 / delta0))
        details = {"rounds": float(rounds), "rho": rho, "rho_per_round": rho_round}
    eps0 = math.log1p(math.expm1(eps_round) / nu)
    sigma = math.sqrt(2.0 * math.log(1.25 / delta0)) / eps0
    details.update(per_round_epsilon=eps_round, per_step_epsilon=eps0, per_step_delta=delta0, delta_split=split)
    return DropoutCalibration(noise_multiplier=sigma, method=name, accounting="paper_procedure_over_rounds",
                              kind=PAPER_KIND, epsilon=eps, delta=d, details=details)


def _rho_for(eps: float, delta: float) -> float:
    """The rho with rho + 2 sqrt(rho log(1/delta)) = eps (the simple zCDP conversion, solved for rho)."""
    log_inv = math.log(1.0 / delta)
    root = -math.sqrt(log_inv) + math.sqrt(log_inv + eps)  # sqrt(rho): the positive root of s^2 + 2 s sqrt(L) - eps
    return root * root


class DropoutRates(NamedTuple):
    """Per-weight Gaussian-dropout parameters matching DPD's noise.

    ``variance_ratio`` is :math:`a_{ij} = (2C\\sigma)^2/\\theta_{ij}^2` (``inf`` for a zero
    weight); ``drop_probability`` is :math:`p = a/(1+a)` (1 for a zero weight).
    """

    variance_ratio: float | NDArray[np.float64]
    drop_probability: float | NDArray[np.float64]


def dropout_rates(*, noise_multiplier: float, clip_norm: float, weights: ArrayLike) -> DropoutRates:
    r"""Gaussian-dropout rates whose multiplicative noise matches DPD's additive noise.

    Parameters
    ----------
    noise_multiplier : float
        :math:`\sigma`, finite and ``> 0``.
    clip_norm : float
        Clipping norm C, finite and ``> 0`` (DPD's sensitivity is 2C).
    weights : float or array_like
        Weights :math:`\theta_{ij}` (finite).

    Returns
    -------
    DropoutRates
        Exact closed forms (scalar in, float out).

    Notes
    -----
    Gaussian dropout with rate p multiplies a weight by noise of variance
    :math:`a = p/(1-p)`; DPD's update noise :math:`N(0, (2C\sigma)^2)` equals the
    multiplicative noise :math:`a_{ij}\theta_{ij}^2` for :math:`a_{ij} = (2C\sigma)^2/\theta_{ij}^2`,
    so :math:`p_{ij} = (2C\sigma)^2 / ((2C\sigma)^2 + \theta_{ij}^2)` (Ermiş & Cemgil, arXiv:1712.01665).

    Examples
    --------
    >>> r = dropout_rates(noise_multiplier=1.0, clip_norm=0.5, weights=[1.0, 2.0, 0.0])
    >>> r.variance_ratio.tolist(), r.drop_probability.tolist()
    ([1.0, 0.25, inf], [0.5, 0.2, 1.0])
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    c = _check.positive("clip_norm", clip_norm)
    if isinstance(weights, (str, bytes)):
        msg = f"weights must be a real number or an array of them, got {type(weights).__name__}"
        raise TypeError(msg)
    theta = np.asarray(weights)
    if theta.dtype == np.bool_ or not (np.issubdtype(theta.dtype, np.floating) or np.issubdtype(theta.dtype, np.integer)):
        msg = f"weights must be a real number or an array of them, got {type(weights).__name__}"
        raise TypeError(msg)
    theta = np.asarray(theta, dtype=np.float64)
    if not np.isfinite(theta).all():
        bad = float(theta.ravel()[int(np.flatnonzero(~np.isfinite(theta.ravel()))[0])])
        msg = f"weights must all be finite, got {bad!r}"
        raise ValueError(msg)
    scale = 2.0 * c * sigma
    ratio = np.abs(theta) / scale  # theta / (2 C sigma): no overflow from squaring the scale
    with np.errstate(divide="ignore", under="ignore"):  # a zero weight has a = inf (p = 1): intended
        variance_ratio = 1.0 / (ratio * ratio)
        probability = 1.0 / (1.0 + ratio * ratio)
    return DropoutRates(unwrap(variance_ratio), unwrap(probability))
