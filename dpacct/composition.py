r"""Classic :math:`(\varepsilon, \delta)` composition, amplification by sampling, and DP dropout.

* :func:`basic_composition`, :func:`advanced_composition` (Dwork, Rothblum, Vadhan;
  Dwork & Roth Thm 3.20) and the tight :func:`optimal_composition_delta` /
  :func:`optimal_composition_epsilon` for k-fold homogeneous composition (Kairouz, Oh,
  Viswanath 2015, Thm 3.3), evaluated exactly in log space.
* :func:`poisson_subsampling`: amplification by Poisson sampling (Li, Qardaji, Su 2012).
* DP dropout (Ermiş & Cemgil): the two calibrations of the noise multiplier for a total
  :math:`(\varepsilon, \delta)`, :func:`dpd_ac_noise_multiplier` and
  :func:`dpd_zcdp_noise_multiplier`, and :func:`dropout_rates`, the per-weight
  Gaussian-dropout rates that match the noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from dpacct import _check
from dpacct._shape import unwrap
from dpacct.zcdp.conversions import _gaussian_rho, epsilon_from_rho
from dpacct.zcdp.training import random_sampling_epsilon_heuristic

__all__ = [
    "DPD_ACCOUNTINGS",
    "DropoutCalibration",
    "DropoutRates",
    "EpsilonDelta",
    "advanced_composition",
    "basic_composition",
    "classical_gaussian_noise_multiplier",
    "DPD_PAPER_METHODS",
    "dpd_ac_noise_multiplier",
    "dpd_paper_noise_multiplier",
    "dpd_zcdp_noise_multiplier",
    "dropout_rates",
    "optimal_composition_delta",
    "optimal_composition_epsilon",
    "poisson_subsampling",
]

# Relative slack added to values computed in log space (log-binomials from gammaln
# carry an absolute error of ~1e-16 * k log k, i.e. <= 1e-10 for k <= 1e5).
_LOG_SPACE_SLACK = 1e-9
_UP = 1.0 + 8.0 * float(np.finfo(np.float64).eps)


class EpsilonDelta(NamedTuple):
    """An :math:`(\\varepsilon, \\delta)`-DP guarantee (both upper bounds)."""

    epsilon: float
    delta: float


def _eps_delta(epsilon: Any, delta: Any) -> tuple[float, float]:
    eps = _check.epsilon(epsilon)
    d = _check.real("delta", delta)
    if not 0.0 <= d <= 1.0:
        msg = f"delta must be in [0, 1], got {d!r}"
        raise ValueError(msg)
    return eps, d


def _mul_up(k: int, x: float) -> float:
    """``k * x`` rounded up (exact check in rationals: the float product may round down)."""
    product = k * x
    if math.isfinite(product) and Fraction(product) < k * Fraction(x):
        return math.nextafter(product, math.inf)
    return product


def basic_composition(*, epsilon: float, delta: float, count: int) -> EpsilonDelta:
    r"""k-fold composition by the basic theorem: :math:`(k\varepsilon, k\delta)`.

    Parameters
    ----------
    epsilon : float
        Per-mechanism epsilon, finite and ``>= 0``.
    delta : float
        Per-mechanism delta in ``[0, 1]``.
    count : int
        Number k of mechanisms, ``>= 0``.

    Returns
    -------
    EpsilonDelta
        A valid guarantee (delta capped at 1). Dwork & Roth 2014, Theorem 3.16.

    Examples
    --------
    >>> r = basic_composition(epsilon=0.1, delta=1e-6, count=10)
    >>> round(r.epsilon, 12), round(r.delta, 12)
    (1.0, 1e-05)
    """
    eps, d = _eps_delta(epsilon, delta)
    k = _check.count("count", count)
    return EpsilonDelta(_mul_up(k, eps), min(1.0, _mul_up(k, d)))


def advanced_composition(*, epsilon: float, delta: float, count: int, delta_slack: float) -> EpsilonDelta:
    r"""k-fold composition by the advanced composition theorem.

    Parameters
    ----------
    epsilon : float
        Per-mechanism epsilon, finite and ``>= 0``.
    delta : float
        Per-mechanism delta in ``[0, 1]``.
    count : int
        Number k of mechanisms, ``>= 0``.
    delta_slack : float
        The extra :math:`\delta' \in (0, 1)` spent by the theorem.

    Returns
    -------
    EpsilonDelta
        :math:`(\varepsilon\sqrt{2k\log(1/\delta')} + k\varepsilon(e^\varepsilon - 1),\;
        k\delta + \delta')`, a valid guarantee (epsilon rounded up, delta capped at 1).

    References
    ----------
    .. [1] C. Dwork, G. N. Rothblum, S. Vadhan, "Boosting and Differential Privacy",
       FOCS 2010; C. Dwork and A. Roth, "The Algorithmic Foundations of Differential
       Privacy", 2014, Theorem 3.20.

    Examples
    --------
    >>> r = advanced_composition(epsilon=0.01, delta=0.0, count=1000, delta_slack=1e-5)
    >>> round(r.epsilon, 6), round(r.delta, 12)
    (1.617929, 1e-05)
    """
    eps, d = _eps_delta(epsilon, delta)
    k = _check.count("count", count)
    slack = _check.real("delta_slack", delta_slack)
    if not 0.0 < slack < 1.0:
        msg = f"delta_slack must be in (0, 1), got {slack!r}"
        raise ValueError(msg)
    value = eps * math.sqrt(2.0 * k * math.log(1.0 / slack)) + k * eps * math.expm1(eps)
    return EpsilonDelta(value * _UP, min(1.0, (_mul_up(k, d) + slack) * _UP))


def _randomized_response(eps: float, k: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """log P(l) and privacy loss (k - 2l) eps of k-fold randomized response, l = 0..k."""
    l = np.arange(k + 1, dtype=np.float64)
    log_binom = special.gammaln(k + 1.0) - special.gammaln(l + 1.0) - special.gammaln(k - l + 1.0)
    # P(l) = C(k, l) e^{(k-l) eps} / (1 + e^eps)^k, in log space (no overflow for k eps up to ~1e308).
    log_p = log_binom + (k - l) * eps - k * np.logaddexp(0.0, eps)
    return log_p, (k - 2.0 * l) * eps


def _optimal_delta(eps: float, d: float, k: int, rr: tuple[NDArray[np.float64], NDArray[np.float64]],
                   total_epsilon: NDArray[np.float64]) -> NDArray[np.float64]:
    log_p, loss = rr
    log_pure = np.empty(total_epsilon.shape, dtype=np.float64)
    for index, eg in enumerate(total_epsilon.ravel()):
        positive = loss > eg
        if not positive.any():
            log_pure.ravel()[index] = -np.inf
            continue
        # max(0, 1 - e^{eg - loss}) in log space: log(-expm1(eg - loss)) keeps its digits near loss = eg.
        terms = log_p[positive] + np.log(-np.expm1(eg - loss[positive]))
        log_pure.ravel()[index] = special.logsumexp(terms)
    log_pure = np.minimum(log_pure, 0.0)  # delta_pure <= 1; rounding of logsumexp may overshoot by an ulp
    log_keep = k * math.log1p(-d) if d < 1.0 else -math.inf
    # 1 - (1-delta)^k (1 - delta_pure), as -expm1(log of the product) to keep small deltas.
    with np.errstate(divide="ignore"):  # log1p(-1) = -inf when delta_pure = 1: the product is 0, delta = 1
        log_product = log_keep + np.log1p(-np.exp(log_pure))
    value: NDArray[np.float64] = np.minimum(1.0, -np.expm1(log_product) * (1.0 + _LOG_SPACE_SLACK))
    return value


def optimal_composition_delta(
    *, epsilon: float, delta: float, count: int, total_epsilon: ArrayLike
) -> float | NDArray[np.float64]:
    r"""Exact delta of the k-fold composition of :math:`(\varepsilon, \delta)`-DP mechanisms at ``total_epsilon``.

    Parameters
    ----------
    epsilon : float
        Per-mechanism epsilon, finite and ``>= 0``.
    delta : float
        Per-mechanism delta in ``[0, 1]``.
    count : int
        Number k of mechanisms, ``>= 0``.
    total_epsilon : float or array_like
        Epsilons of the composition, finite and ``>= 0``.

    Returns
    -------
    float or ndarray
        The smallest delta such that every k-fold composition of
        :math:`(\varepsilon, \delta)`-DP mechanisms is (total_epsilon, delta)-DP:
        exact, rounded up by a relative 1e-9 (the accuracy of the log-binomials).

    Notes
    -----
    Kairouz, Oh and Viswanath (ICML 2015, arXiv:1311.0776 (v4), Theorem 3.3) show
    the composition's privacy region is that of k-fold randomized response; at
    :math:`\varepsilon_g = (k - 2i)\varepsilon` it is

    .. math:: \delta_i = 1 - (1-\delta)^k \Bigl(1 - \frac{\sum_{l=0}^{i-1} \binom{k}{l}
              \bigl(e^{(k-l)\varepsilon} - e^{(k-2i+l)\varepsilon}\bigr)}{(1+e^\varepsilon)^k}\Bigr),

    and between those points the hockey-stick divergence of the binomial pair,
    :math:`\sum_l \binom{k}{l} \max(0, e^{(k-l)\varepsilon} - e^{\varepsilon_g + l\varepsilon})
    / (1+e^\varepsilon)^k` (Murtagh & Vadhan, TCC 2016, arXiv:1507.03113, Theorem 1.5),
    which is what is computed, term by term in log space (``gammaln`` binomials,
    ``logsumexp``), so k of 10^4 and more neither overflows nor cancels.

    Examples
    --------
    >>> round(optimal_composition_delta(epsilon=1.0, delta=0.0, count=1, total_epsilon=0.0), 8)  # tanh(1/2)
    0.46211716
    """
    eps, d = _eps_delta(epsilon, delta)
    k = _check.count("count", count)
    eg = _check.epsilon_array(total_epsilon)
    if k == 0:
        return unwrap(np.zeros_like(eg))
    return unwrap(_optimal_delta(eps, d, k, _randomized_response(eps, k), eg))


def optimal_composition_epsilon(*, epsilon: float, delta: float, count: int, total_delta: float) -> float:
    r"""Smallest epsilon of the k-fold composition of :math:`(\varepsilon, \delta)`-DP at ``total_delta``.

    Parameters
    ----------
    epsilon, delta, count
        As in :func:`optimal_composition_delta`.
    total_delta : float
        Target delta of the composition, in ``(0, 1)``.

    Returns
    -------
    float
        An upper bound on the optimal epsilon (bisection on the exact, decreasing
        :func:`optimal_composition_delta` to absolute 1e-12, returning the end whose
        delta is ``<= total_delta``); ``inf`` if even ``k * epsilon`` does not reach
        ``total_delta`` (i.e. ``1 - (1-delta)^k > total_delta``).

    Examples
    --------
    >>> round(optimal_composition_epsilon(epsilon=0.01, delta=0.0, count=1000, total_delta=1e-5), 4)
    1.1977
    """
    eps, d = _eps_delta(epsilon, delta)
    k = _check.count("count", count)
    target = _check.delta(total_delta)
    if k == 0:
        return 0.0

    rr = _randomized_response(eps, k)

    def fits(eg: float) -> bool:
        return float(_optimal_delta(eps, d, k, rr, np.array([eg]))[0]) <= target

    high = k * eps
    if not fits(high):
        return math.inf
    if fits(0.0):
        return 0.0
    low = 0.0
    while high - low > 1e-12 * max(1.0, high):
        mid = 0.5 * (low + high)
        if fits(mid):
            high = mid
        else:
            low = mid
    return high


def poisson_subsampling(*, epsilon: float, delta: float, sampling_probability: float) -> EpsilonDelta:
    r"""Amplification by Poisson subsampling: :math:`(\log(1 + \nu(e^\varepsilon - 1)), \nu\delta)`.

    Parameters
    ----------
    epsilon : float
        Epsilon of the mechanism on the subsample, finite and ``>= 0``.
    delta : float
        Its delta, in ``[0, 1]``.
    sampling_probability : float
        Inclusion probability :math:`\nu \in [0, 1]` of each record.

    Returns
    -------
    EpsilonDelta
        A valid guarantee of the subsampled mechanism (add/remove adjacency).

    References
    ----------
    .. [1] N. Li, W. Qardaji, D. Su, "On Sampling, Anonymization, and Differential
       Privacy", ASIACCS 2012, arXiv:1101.2604 (v2), Theorem 1.

    Examples
    --------
    >>> r = poisson_subsampling(epsilon=1.0, delta=1e-5, sampling_probability=0.01)
    >>> round(r.epsilon, 8), round(r.delta, 12)
    (0.01703686, 1e-07)
    """
    eps, d = _eps_delta(epsilon, delta)
    nu = _check.probability("sampling_probability", sampling_probability)
    return EpsilonDelta(math.log1p(nu * math.expm1(eps)) * _UP, nu * d)


def classical_gaussian_noise_multiplier(*, epsilon: float, delta: float) -> float:
    r"""The classical Gaussian calibration :math:`\sigma = \sqrt{2\log(1.25/\delta)}/\varepsilon`, for :math:`\varepsilon < 1`.

    Dwork & Roth 2014, Theorem A.1: valid only for :math:`0 < \varepsilon < 1`
    (outside it, use :func:`dpacct.calibrate` or the exact Gaussian curve).

    Returns
    -------
    float
        A noise multiplier that makes the Gaussian mechanism (epsilon, delta)-DP (rounded up).

    Examples
    --------
    >>> round(classical_gaussian_noise_multiplier(epsilon=0.5, delta=1e-5), 6)
    9.689611
    """
    eps = _check.real("epsilon", epsilon)
    if not 0.0 < eps < 1.0:
        msg = f"epsilon must be in (0, 1) for the classical Gaussian calibration, got {eps!r}"
        raise ValueError(msg)
    d = _check.delta(delta)
    return math.sqrt(2.0 * math.log(1.25 / d)) / eps * _UP


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
    conversion: str = "rdp",
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
    conversion : {"rdp", "simple"}
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
        epochs = math.ceil(t * nu - 1e-12 * t * nu)

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
