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

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from dpacct import _check, gaussian
from dpacct._shape import unwrap
from dpacct.accountant import Accountant, UnsupportedMechanismError
from dpacct.mechanisms import GaussianMechanism, Mechanism, PoissonSampledGaussianMechanism
from dpacct.results import Value

__all__ = [
    "CONVERSIONS",
    "HEURISTIC_KIND",
    "HeuristicEpsilon",
    "ShuffledEpochs",
    "ZCDPAccountant",
    "delta_from_rho",
    "epsilon_from_rho",
    "gaussian_rho",
    "pure_dp_to_rho",
    "rho_from_pure_dp",
    "random_reshuffling_rho",
    "random_sampling_epsilon_heuristic",
    "rho_to_delta",
    "rho_to_epsilon",
    "shuffled_epochs_epsilon",
]

CONVERSIONS = ("rdp", "simple")

#: The ``kind`` of every number produced by Yu et al.'s random-sampling analysis.
HEURISTIC_KIND = "heuristic, not a proven bound (Yu et al. 2019, Thm 3)"
ZCDP_KIND = "upper bound (zCDP, looser)"
GAUSSIAN_KIND = "tight (exact for deterministic batches; upper bound for shuffling)"

# Relative size of the upward nudge applied to converted values: a few ulps of the
# largest term of each formula (the formulas are sums of <= 4 correctly rounded terms
# and one libm call, each within 1 ulp).
_ROUND_UP = 8.0 * float(np.finfo(np.float64).eps)


def _up(x: float) -> float:
    """The next float above ``x`` (0 stays 0, which is exact): used to round a computed rho upward."""
    return math.nextafter(x, math.inf) if x != 0.0 else 0.0


def gaussian_rho(*, noise_multiplier: float) -> float:
    r"""zCDP parameter of the Gaussian mechanism, :math:`\rho = 1/(2\sigma^2)`.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.

    Returns
    -------
    float
        The exact :math:`\rho`, rounded up by at most two ulps.

    References
    ----------
    .. [1] M. Bun and T. Steinke, "Concentrated Differential Privacy: Simplifications,
       Extensions, and Lower Bounds", TCC 2016, arXiv:1605.02065 (v1), Proposition 1.6.

    Examples
    --------
    >>> round(gaussian_rho(noise_multiplier=2.0), 12)
    0.125
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    return _gaussian_rho(sigma)


def _gaussian_rho(sigma: float) -> float:
    square = sigma * sigma
    if square == 0.0:  # sigma below 1e-154: no meaningful noise, rho is effectively infinite
        return math.inf
    return _up(_up(0.5 / square))  # one ulp for sigma*sigma, one for the division


def rho_from_pure_dp(*, epsilon: float) -> float:
    r"""zCDP parameter implied by pure :math:`\varepsilon`-DP: :math:`\rho = \varepsilon^2/2`.

    Parameters
    ----------
    epsilon : float
        The pure-DP parameter, finite and ``>= 0``.

    Returns
    -------
    float
        :math:`\varepsilon^2/2`, rounded up (a valid zCDP parameter for any
        :math:`\varepsilon`-DP mechanism).

    References
    ----------
    .. [1] Bun and Steinke, arXiv:1605.02065 (v1), Proposition 1.4.

    Examples
    --------
    >>> round(rho_from_pure_dp(epsilon=1.0), 12)
    0.5
    """
    eps = _check.epsilon(epsilon)
    return _up(0.5 * eps * eps) if eps > 0.0 else 0.0


def epsilon_from_rho(*, rho: float, delta: ArrayLike, conversion: str = "rdp") -> float | NDArray[np.float64]:
    r"""Convert :math:`\rho`-zCDP to :math:`(\varepsilon, \delta)`-DP.

    Parameters
    ----------
    rho : float
        zCDP parameter, finite and ``>= 0``.
    delta : float or array_like
        Target deltas in ``(0, 1)``.
    conversion : {"rdp", "simple"}
        ``"simple"``: :math:`\varepsilon = \rho + 2\sqrt{\rho\log(1/\delta)}` (Bun &
        Steinke 2016, Proposition 1.3). ``"rdp"`` (default): the improved RDP
        conversion applied to :math:`\mathrm{RDP}(\alpha) = \alpha\rho`, minimised
        exactly over the continuous order :math:`\alpha > 1`, and never above the
        simple value.

    Returns
    -------
    float or ndarray
        An upper bound on epsilon (scalar in, float out), rounded up by a few ulps.

    Notes
    -----
    The improved conversion (Canonne, Kamath, Steinke 2020, arXiv:2004.00010 (v5),
    Proposition 12; Balle et al. 2020, Theorem 21) at order :math:`\alpha` is

    .. math:: f(\alpha) = \alpha\rho + \log(1 - 1/\alpha) + \frac{\log(1/\delta) - \log\alpha}{\alpha - 1}.

    Its derivative simplifies to :math:`\rho - \log(1/(\alpha\delta))/(\alpha-1)^2`, so the
    minimiser is the unique root of :math:`\rho(\alpha-1)^2 + \log\alpha = \log(1/\delta)`
    (the left side increases in :math:`\alpha`), bracketed by ``1`` and the simple
    optimum :math:`1 + \sqrt{\log(1/\delta)/\rho}`. Every order gives a valid bound, so
    the root finder's tolerance costs nothing in soundness.

    Examples
    --------
    >>> round(epsilon_from_rho(rho=0.5, delta=1e-5, conversion="simple"), 9)
    5.298525912
    >>> round(epsilon_from_rho(rho=0.5, delta=1e-5), 6)
    4.728387
    """
    r = _rho(rho)
    d = _check.delta_array(delta)
    kind = _check.one_of("conversion", conversion, CONVERSIONS)
    out = np.array([_epsilon_one(r, float(x), kind) for x in d.ravel()], dtype=np.float64).reshape(d.shape)
    return unwrap(out)


def _rho(value: Any) -> float:
    x = _check.real("rho", value)
    if not (x >= 0.0 and math.isfinite(x)):
        msg = f"rho must be finite and >= 0, got {x!r}"
        raise ValueError(msg)
    return x


def _simple_epsilon(rho: float, log_inv_delta: float) -> float:
    value = rho + 2.0 * math.sqrt(rho * log_inv_delta)
    return value * (1.0 + _ROUND_UP)


def _epsilon_one(rho: float, delta: float, conversion: str) -> float:
    if rho == 0.0:
        return 0.0
    log_inv_delta = -math.log(delta)
    simple = _simple_epsilon(rho, log_inv_delta)
    if conversion == "simple":
        return simple

    def slope(alpha: float) -> float:  # rho (alpha-1)^2 + log(alpha) - log(1/delta): increasing
        return rho * (alpha - 1.0) ** 2 + math.log(alpha) - log_inv_delta

    high = 1.0 + math.sqrt(log_inv_delta / rho)
    if not high > 1.0:  # rho so large that alpha - 1 underflows: the simple bound is all we have
        return simple
    alpha = high if slope(high) <= 0.0 else float(optimize.brentq(slope, 1.0, high, xtol=1e-12, rtol=1e-12))
    if not alpha > 1.0:
        return simple
    terms = (alpha * rho, math.log1p(-1.0 / alpha), (log_inv_delta - math.log(alpha)) / (alpha - 1.0))
    value = math.fsum(terms) + _ROUND_UP * sum(abs(t) for t in terms)
    return max(0.0, min(value, simple))


def delta_from_rho(*, rho: float, epsilon: ArrayLike, conversion: str = "rdp") -> float | NDArray[np.float64]:
    r"""Convert :math:`\rho`-zCDP to the smallest certified delta at each epsilon.

    Parameters
    ----------
    rho : float
        zCDP parameter, finite and ``>= 0``.
    epsilon : float or array_like
        Epsilons, each finite and ``>= 0``.
    conversion : {"rdp", "simple"}
        ``"simple"`` inverts Bun & Steinke's formula:
        :math:`\delta = e^{-(\varepsilon-\rho)^2/(4\rho)}` for :math:`\varepsilon \ge \rho`
        (else 1). ``"rdp"`` (default) minimises the improved RDP conversion
        :math:`\log\delta = (\alpha-1)(\alpha\rho - \varepsilon) + (\alpha-1)\log(1-1/\alpha) - \log\alpha`
        exactly over :math:`\alpha > 1` (stationary point: the unique root of the
        increasing :math:`(2\alpha-1)\rho - \varepsilon + \log(1-1/\alpha)`) and takes
        the smaller of it and the simple value.

    Returns
    -------
    float or ndarray
        An upper bound on delta, at most 1 (``0`` when ``rho == 0``).

    Examples
    --------
    >>> round(delta_from_rho(rho=0.5, epsilon=5.298525912188081, conversion="simple"), 12)
    1e-05
    """
    r = _rho(rho)
    e = _check.epsilon_array(epsilon)
    kind = _check.one_of("conversion", conversion, CONVERSIONS)
    out = np.array([_delta_one(r, float(x), kind) for x in e.ravel()], dtype=np.float64).reshape(e.shape)
    return unwrap(out)


def _delta_one(rho: float, epsilon: float, conversion: str) -> float:
    if rho == 0.0:
        return 0.0
    if epsilon <= rho:
        simple_log = 0.0
    else:
        simple_log = -((epsilon - rho) ** 2) / (4.0 * rho)
        simple_log += _ROUND_UP * abs(simple_log)
    best_log = simple_log
    if conversion == "rdp":

        def slope(alpha: float) -> float:  # derivative of log delta(alpha): increasing in alpha
            return (2.0 * alpha - 1.0) * rho - epsilon + math.log1p(-1.0 / alpha)

        high = 1.0 + (epsilon + rho) / (2.0 * rho) + 1.0
        while slope(high) < 0.0 and math.isfinite(high):
            high *= 2.0
        low = 1.0 + 1e-12 * high
        if math.isfinite(high) and slope(low) < 0.0:
            alpha = float(optimize.brentq(slope, low, high, xtol=1e-12, rtol=1e-12))
            terms = ((alpha - 1.0) * alpha * rho, -(alpha - 1.0) * epsilon,
                     (alpha - 1.0) * math.log1p(-1.0 / alpha), -math.log(alpha))
            log_value = math.fsum(terms) + _ROUND_UP * sum(abs(t) for t in terms)
            best_log = min(best_log, log_value)
    with np.errstate(under="ignore"):  # a delta below 1e-308 is reported as 0 (its log is finite)
        return float(min(1.0, np.exp(best_log)))


class _Parts(NamedTuple):
    rho: float
    inverse_variance: float  # sum of count / sigma_eff^2 over Gaussian parts (nan: not all Gaussian)


def _mechanism_parts(mechanism: Mechanism) -> _Parts:
    if isinstance(mechanism, GaussianMechanism):
        sigma = mechanism.effective_noise_multiplier
    elif isinstance(mechanism, PoissonSampledGaussianMechanism) and mechanism.sampling_probability == 1.0:
        sigma = mechanism.noise_multiplier
    elif isinstance(mechanism, PoissonSampledGaussianMechanism) and mechanism.sampling_probability == 0.0:
        return _Parts(0.0, 0.0)  # nothing about any record is released
    else:
        msg = f"no zCDP parameter is known for {mechanism!r}"
        raise TypeError(msg)
    square = sigma * sigma
    return _Parts(_gaussian_rho(sigma), _up(_up(1.0 / square)) if square > 0.0 else math.inf)


class ZCDPAccountant(Accountant):
    r"""zCDP accountant: adds :math:`\rho` and converts to :math:`(\varepsilon, \delta)`.

    Parameters
    ----------
    conversion : {"rdp", "simple"}
        zCDP to (epsilon, delta) conversion; see :func:`epsilon_from_rho`. The default
        ``"rdp"`` is never larger than ``"simple"``.

    Notes
    -----
    Supported mechanisms: :class:`~dpacct.GaussianMechanism` (:math:`\rho =
    1/(2\sigma_{\mathrm{eff}}^2)`, so replace-one adjacency doubles the sensitivity) and
    :class:`~dpacct.PoissonSampledGaussianMechanism` only with ``sampling_probability``
    1 (a plain Gaussian) or 0 (nothing released). Poisson subsampling with ``0 < q < 1``
    is refused: no certified zCDP bound exists for it (zCDP does not capture
    amplification by subsampling). Use the ``"rdp"`` or ``"pld"`` accountant, or the
    labelled heuristic :func:`random_sampling_epsilon_heuristic`.

    Other privacy costs are added directly: :meth:`compose_rho`, :meth:`compose_pure_dp`
    (Bun & Steinke, Proposition 1.4: :math:`\varepsilon^2/2`) and
    :meth:`compose_exponential_mechanism` (:math:`\varepsilon^2/8`).

    When everything composed is Gaussian, the composition is exactly one Gaussian with
    :math:`\sigma_{\mathrm{eff}} = (\sum_i \sigma_i^{-2})^{-1/2}`;
    :meth:`get_epsilon_details` then reports that exact epsilon beside the zCDP bound
    and names it as the tight one.

    Examples
    --------
    >>> acct = ZCDPAccountant().compose(GaussianMechanism(noise_multiplier=6.0), 400)
    >>> round(acct.rho, 6)
    5.555556
    >>> round(acct.get_epsilon(1e-5), 3)
    20.391
    """

    name = "zcdp"

    def __init__(self, *, conversion: str = "rdp") -> None:
        super().__init__()
        self._conversion = _check.one_of("conversion", conversion, CONVERSIONS)
        self._direct: list[tuple[str, float, int]] = []

    @property
    def conversion(self) -> str:
        """The zCDP to (epsilon, delta) conversion in use."""
        return self._conversion

    @property
    def rho(self) -> float:
        """The composed zCDP parameter (rounded up)."""
        return self._totals()[0]

    @property
    def direct_history(self) -> tuple[tuple[str, float, int], ...]:
        """``(what, rho, count)`` for costs added by ``compose_rho`` and friends, oldest first."""
        return tuple(self._direct)

    @property
    def effective_noise_multiplier(self) -> float | None:
        r""":math:`\sigma_{\mathrm{eff}}` of the single Gaussian equal to the composition.

        ``None`` when something other than a Gaussian was composed; ``inf`` when
        nothing was.
        """
        _, inverse_variance, only_gaussian = self._totals()
        if not only_gaussian:
            return None
        if inverse_variance == 0.0:
            return math.inf
        return float(inverse_variance**-0.5)

    def supports(self, mechanism: Mechanism) -> bool:
        """Gaussian mechanisms, and Poisson-sampled ones only at ``sampling_probability`` 0 or 1."""
        if isinstance(mechanism, GaussianMechanism):
            return True
        return isinstance(mechanism, PoissonSampledGaussianMechanism) and mechanism.sampling_probability in (0.0, 1.0)

    def compose(self, mechanism: Mechanism, count: int = 1) -> ZCDPAccountant:
        """Compose ``count`` repetitions of ``mechanism``; see :meth:`dpacct.Accountant.compose`.

        Raises
        ------
        UnsupportedMechanismError
            For a Poisson-subsampled Gaussian with ``0 < q < 1`` (with the fix in the
            message) or anything that is not a supported mechanism. State unchanged.
        """
        if isinstance(mechanism, PoissonSampledGaussianMechanism) and not self.supports(mechanism):
            _check.count("count", count)
            msg = (
                f"{type(self).__name__} does not support {mechanism!r}: there is no certified zCDP bound "
                "for Poisson subsampling with 0 < sampling_probability < 1; use accountant='rdp' or 'pld', "
                "or random_sampling_epsilon_heuristic (a heuristic, not a proven bound)"
            )
            raise UnsupportedMechanismError(msg)
        super().compose(mechanism, count)
        return self

    def _compose(self, mechanism: Mechanism, count: int) -> None:
        # The totals are derived from the run-length history at query time (see _totals),
        # so compose(m, count=k) and k calls of compose(m) give bit-identical rho; here
        # the mechanism is only checked to have a zCDP parameter.
        _mechanism_parts(mechanism)

    def _totals(self) -> tuple[float, float, bool]:
        """(rho, sum of count / sigma_eff^2, whether everything is Gaussian), each sum rounded up.

        Runs of the history contribute ``count * rho`` once each (consecutive identical
        mechanisms are merged), then the direct costs in the order they were added.
        """
        rho = inverse_variance = 0.0
        for mechanism, count in self._history:
            parts = _mechanism_parts(mechanism)
            rho = _up(rho + _up(count * parts.rho))
            inverse_variance = _up(inverse_variance + _up(count * parts.inverse_variance))
        only_gaussian = True
        for _, r, count in self._direct:
            rho = _up(rho + _up(count * r))
            only_gaussian = only_gaussian and r == 0.0
        return rho, inverse_variance, only_gaussian

    def _add_direct(self, what: str, rho: float, count: int) -> ZCDPAccountant:
        if count == 0:
            return self
        self._direct.append((what, rho, count))
        return self

    def compose_rho(self, rho: float, count: int = 1) -> ZCDPAccountant:
        r"""Add ``count`` mechanisms that are each ``rho``-zCDP (``rho`` finite, ``>= 0``)."""
        r = _rho(rho)
        n = _check.count("count", count)
        return self._add_direct("rho", r, n)

    def compose_pure_dp(self, epsilon: float, count: int = 1) -> ZCDPAccountant:
        r"""Add ``count`` pure :math:`\varepsilon`-DP mechanisms, each :math:`\varepsilon^2/2`-zCDP.

        Bun and Steinke, arXiv:1605.02065 (v1), Proposition 1.4.
        """
        rho = rho_from_pure_dp(epsilon=epsilon)
        n = _check.count("count", count)
        return self._add_direct("pure_dp", rho, n)

    def compose_exponential_mechanism(self, epsilon: float, count: int = 1) -> ZCDPAccountant:
        r"""Add ``count`` :math:`\varepsilon`-DP exponential mechanisms, each :math:`\varepsilon^2/8`-zCDP.

        The exponential mechanism that samples with probability proportional to
        :math:`\exp(\varepsilon u / (2\Delta u))` is :math:`\varepsilon`-bounded-range,
        and an :math:`\varepsilon`-bounded-range mechanism is
        :math:`(\varepsilon^2/8)`-zCDP: four times better than the
        :math:`\varepsilon^2/2` of a generic :math:`\varepsilon`-DP mechanism
        (M. Cesar and R. Rogers, "Bounding, Concentrating, and Truncating: Unifying
        Privacy Loss Composition for Data Analytics", ALT 2021, arXiv:2004.07223,
        Section 3, bounded-range mechanisms; also SPEC 2.1).
        """
        eps = _check.epsilon(epsilon)
        n = _check.count("count", count)
        return self._add_direct("exponential_mechanism", _up(eps * eps / 8.0) if eps > 0.0 else 0.0, n)

    def __len__(self) -> int:
        """Total number of composed mechanisms, including those added as raw costs."""
        return super().__len__() + sum(count for _, _, count in self._direct)

    def get_epsilon(self, delta: ArrayLike) -> float | NDArray[np.float64]:
        """An upper bound on epsilon for each ``delta`` in ``(0, 1)``; see :func:`epsilon_from_rho`."""
        return epsilon_from_rho(rho=self.rho, delta=delta, conversion=self._conversion)

    def get_delta(self, epsilon: ArrayLike) -> float | NDArray[np.float64]:
        """An upper bound on delta for each finite ``epsilon >= 0``; see :func:`delta_from_rho`."""
        return delta_from_rho(rho=self.rho, epsilon=epsilon, conversion=self._conversion)

    @classmethod
    def heuristic_epsilon(
        cls, *, noise_multiplier: float, sampling_probability: float, steps: int, delta: float
    ) -> Value:
        """Yu et al.'s random-sampling number for Poisson steps: a heuristic, NOT a guarantee.

        Offered where :meth:`compose` refuses Poisson subsampling (no certified zCDP bound
        exists); callers must opt in (``dpacct epsilon --accountant zcdp --allow-heuristic``).
        See :func:`random_sampling_epsilon_heuristic`.
        """
        r = random_sampling_epsilon_heuristic(noise_multiplier=noise_multiplier,
                                              sampling_probability=sampling_probability, steps=steps, delta=delta)
        return Value(value=r.epsilon, quantity="epsilon", kind="heuristic",
                     method="zCDP random sampling, Yu et al. 2019 (arXiv:1904.02200), Thm 3: not a proven bound",
                     details={"rho": r.rho, "renyi_order": r.order, "max_renyi_order": r.max_order})

    def get_epsilon_details(self, delta: float) -> dict[str, Any]:
        """Epsilon for one delta with rho, the conversion and, for pure Gaussian runs, the exact number."""
        d = _check.delta(delta)
        details: dict[str, Any] = {
            "epsilon": float(self.get_epsilon(d)),
            "kind": "upper bound (zCDP)",
            "rho": self.rho,
            "conversion": self._conversion,
        }
        sigma_eff = self.effective_noise_multiplier
        if sigma_eff is not None and math.isfinite(sigma_eff):
            details["effective_noise_multiplier"] = sigma_eff
            details["gaussian_epsilon"] = float(gaussian.epsilon_for_delta(noise_multiplier=sigma_eff, delta=d))
            details["gaussian_kind"] = "exact (composition of Gaussians; the tight number)"
            details["tight"] = "gaussian_epsilon"
        return details


def random_reshuffling_rho(epochs: ArrayLike | list[ArrayLike]) -> float:
    r"""Total :math:`\rho` of training with disjoint batches in each epoch (random reshuffling).

    Parameters
    ----------
    epochs : sequence
        One entry per epoch: the noise multipliers of that epoch's steps (a sequence),
        or one number for an epoch whose steps all use the same noise multiplier.

    Returns
    -------
    float
        :math:`\sum_e \max_{i \in e} 1/(2\sigma_{e,i}^2)`, rounded up: a certified zCDP
        parameter of the whole run.

    Notes
    -----
    The batches of an epoch are disjoint, so each record is touched by at most one
    step of the epoch (parallel composition): the epoch is
    :math:`(\max_i \rho_i)`-zCDP, and epochs compose additively (Yu et al. 2019, Thm 2;
    SPEC 2.3). Adjacency: zero-out, or add/remove with the partition into batches
    fixed; sensitivity = the clipping norm.

    References
    ----------
    .. [1] L. Yu, L. Liu, C. Pu, M. E. Gursoy, S. Truex, "Differentially Private Model
       Publishing for Deep Learning", IEEE S&P 2019, arXiv:1904.02200 (v4), Theorem 2.

    Examples
    --------
    >>> round(random_reshuffling_rho([[4.0, 2.0, 8.0], 2.0]), 12)
    0.25
    """
    if isinstance(epochs, (str, bytes)) or not hasattr(epochs, "__len__"):
        msg = f"epochs must be a sequence with one entry per epoch, got {type(epochs).__name__}"
        raise TypeError(msg)
    total = 0.0
    for index, epoch in enumerate(epochs):  # type: ignore[arg-type]
        sigmas = np.atleast_1d(np.asarray(epoch, dtype=np.float64))
        if sigmas.size == 0:
            continue  # an epoch without steps releases nothing
        ok = (sigmas > 0.0) & np.isfinite(sigmas)
        if not ok.all():
            bad = float(sigmas.ravel()[int(np.flatnonzero(~ok.ravel())[0])])
            msg = f"noise_multiplier must be finite and > 0, got {bad!r} in epoch {index}"
            raise ValueError(msg)
        total = _up(total + _gaussian_rho(float(sigmas.min())))
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class ShuffledEpochs:
    """Two epsilons for E epochs of disjoint (shuffled or fixed) batches, each saying what it is.

    Attributes
    ----------
    rho : float
        zCDP parameter under random-reshuffling accounting, ``E / (2 sigma^2)``.
    zcdp_epsilon : float
        Epsilon converted from ``rho``: an upper bound, looser (:attr:`zcdp_kind`).
    effective_noise_multiplier : float
        ``sigma / sqrt(E)``.
    gaussian_epsilon : float
        Epsilon of the exact Gaussian curve with ``sigma / sqrt(E)`` (:attr:`gaussian_kind`):
        exact for deterministic batches, an upper bound for shuffled ones. The tight one.
    """

    noise_multiplier: float
    epochs: int
    delta: float
    conversion: str
    rho: float
    zcdp_epsilon: float
    zcdp_kind: str
    effective_noise_multiplier: float
    gaussian_epsilon: float
    gaussian_kind: str
    tight: str = "gaussian_epsilon"


def shuffled_epochs_epsilon(
    *, noise_multiplier: float, epochs: int, delta: float, conversion: str = "rdp"
) -> ShuffledEpochs:
    r"""Epsilon of E epochs of disjoint batches by zCDP (random reshuffling) and exactly.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, finite and ``> 0``.
    epochs : int
        Number of epochs E, ``>= 0``; each record is in exactly one batch per epoch.
    delta : float
        Target delta in ``(0, 1)``.
    conversion : {"rdp", "simple"}
        zCDP to (epsilon, delta) conversion for the zCDP number.

    Returns
    -------
    ShuffledEpochs
        ``zcdp_epsilon``: an upper bound, looser. ``gaussian_epsilon``: the exact
        epsilon of the Gaussian with :math:`\sigma/\sqrt{E}`, which is exact for
        deterministic batches and an upper bound for shuffled batches (shuffling never
        does worse than deterministic batching; Chua et al., ICML 2024, SPEC 2.3 and 7).
        Adjacency: zero-out (sensitivity = clipping norm).

    Examples
    --------
    >>> r = shuffled_epochs_epsilon(noise_multiplier=6.0, epochs=400, delta=1e-5, conversion="simple")
    >>> round(r.zcdp_epsilon, 1), round(r.gaussian_epsilon, 2)
    (21.6, 19.13)
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    n = _check.count("epochs", epochs)
    d = _check.delta(delta)
    kind = _check.one_of("conversion", conversion, CONVERSIONS)
    rho = _up(n * _gaussian_rho(sigma)) if n > 0 else 0.0
    zcdp_eps = float(epsilon_from_rho(rho=rho, delta=d, conversion=kind))
    if n == 0:
        sigma_eff, gauss_eps = math.inf, 0.0
    else:
        sigma_eff = sigma / math.sqrt(n)
        gauss_eps = float(gaussian.epsilon_for_delta(noise_multiplier=sigma_eff, delta=d))
    return ShuffledEpochs(
        noise_multiplier=sigma, epochs=n, delta=d, conversion=kind, rho=rho, zcdp_epsilon=zcdp_eps,
        zcdp_kind=ZCDP_KIND, effective_noise_multiplier=sigma_eff, gaussian_epsilon=gauss_eps,
        gaussian_kind=GAUSSIAN_KIND,
    )


class HeuristicEpsilon(NamedTuple):
    """Epsilon of the random-sampling analysis of Yu et al.: a heuristic, **not** a proven bound.

    ``rho`` is the heuristic zCDP sum, ``max_order`` the largest order u at which it is
    claimed, ``order`` the order used, ``kind`` says what the number is.
    """

    epsilon: float
    rho: float
    max_order: float
    order: float
    kind: str


def random_sampling_epsilon_heuristic(
    *, noise_multiplier: ArrayLike, sampling_probability: ArrayLike, steps: ArrayLike, delta: float
) -> HeuristicEpsilon:
    r"""Heuristic epsilon of Poisson-sampled Gaussian steps (Yu et al. 2019, Thm 3): NOT a proven bound.

    Parameters
    ----------
    noise_multiplier, sampling_probability, steps : float or array_like
        One value, or one per run of identical steps (broadcast together): noise
        multiplier :math:`\sigma_i > 0`, Poisson rate :math:`q_i \in [0, 1]`, and the
        number of steps of that run.
    delta : float
        Target delta in ``(0, 1)``.

    Returns
    -------
    HeuristicEpsilon
        ``epsilon`` with ``kind`` = :data:`HEURISTIC_KIND`. Yu et al. validate the
        per-step value :math:`q^2/\sigma^2` empirically; it is not a theorem, so the
        result must not be reported as a guarantee. Use the ``"rdp"`` or ``"pld"``
        accountant for a certified bound.

    Raises
    ------
    ValueError
        If some run has :math:`q_i > 1/(16\sigma_i)`, the stated validity condition
        (the message says which noise multiplier or rate would satisfy it).

    Notes
    -----
    Per step :math:`P(q,\sigma) = q^2/\sigma^2`, claimed for orders
    :math:`1 < \alpha \le U(q,\sigma) = \sigma^2\log(1/(q\sigma)) + 1`. With
    :math:`\hat\rho = \sum_i P(q_i,\sigma_i)` and :math:`u = \min_i U(q_i,\sigma_i)`:
    :math:`\varepsilon = \hat\rho + 2\sqrt{\hat\rho\log(1/\delta)}` when
    :math:`\delta \ge e^{-\hat\rho(u-1)^2}` (the optimal order
    :math:`1 + \sqrt{\log(1/\delta)/\hat\rho}` is then at most u), else
    :math:`\varepsilon = \hat\rho u - \log\delta/(u-1)` (SPEC 2.4).

    References
    ----------
    .. [1] L. Yu et al., "Differentially Private Model Publishing for Deep Learning",
       IEEE S&P 2019, arXiv:1904.02200 (v4), Theorem 3.

    Examples
    --------
    >>> r = random_sampling_epsilon_heuristic(noise_multiplier=4.0, sampling_probability=0.01,
    ...                                       steps=10_000, delta=1e-5)
    >>> round(r.epsilon, 3), r.kind.startswith("heuristic")
    (1.759, True)
    """
    sigma_in = _positive_array("noise_multiplier", noise_multiplier)
    q_in = _probability_array("sampling_probability", sampling_probability)
    steps_in = _count_array("steps", steps)
    d = _check.delta(delta)
    try:
        sigma, q, count = np.broadcast_arrays(sigma_in, q_in, steps_in)
    except ValueError:
        msg = (f"noise_multiplier, sampling_probability and steps must broadcast together, got shapes "
               f"{sigma_in.shape}, {q_in.shape} and {steps_in.shape}")
        raise ValueError(msg) from None
    limit = 1.0 / (16.0 * sigma)
    bad = q > limit
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        s, p = float(sigma.ravel()[i]), float(q.ravel()[i])
        where = "" if sigma.ndim == 0 else f" at index {i}"
        msg = (
            f"sampling_probability must be <= 1/(16 noise_multiplier) = {1.0 / (16.0 * s):.6g} for the "
            f"heuristic of Yu et al. (Thm 3), got {p!r}{where}; use noise_multiplier <= {1.0 / (16.0 * p):.6g} "
            "or a smaller sampling_probability, or the certified 'rdp'/'pld' accountant"
        )
        raise ValueError(msg)
    active = (q > 0.0) & (count > 0)
    if not active.any():
        return HeuristicEpsilon(0.0, 0.0, math.inf, math.nan, HEURISTIC_KIND)
    qa, sa, ca = q[active], sigma[active], count[active]
    rho = math.fsum((ca * qa * qa / (sa * sa)).tolist())
    u = float(np.min(sa * sa * np.log(1.0 / (qa * sa)) + 1.0))
    log_inv_delta = -math.log(d)
    if log_inv_delta <= rho * (u - 1.0) ** 2:  # delta >= exp(-rho (u-1)^2), compared in log space
        order = 1.0 + math.sqrt(log_inv_delta / rho)
        eps = rho + 2.0 * math.sqrt(rho * log_inv_delta)
    else:
        order = u
        eps = rho * u + log_inv_delta / (u - 1.0)
    return HeuristicEpsilon(float(eps), float(rho), u, float(order), HEURISTIC_KIND)


def _positive_array(name: str, value: ArrayLike) -> NDArray[np.float64]:
    array = _as_real_array(name, value)
    ok = (array > 0.0) & np.isfinite(array)
    if not ok.all():
        i = int(np.flatnonzero(~ok.ravel())[0])
        where = "" if array.ndim == 0 else f" at index {i}"
        msg = f"{name} must be finite and > 0, got {float(array.ravel()[i])!r}{where}"
        raise ValueError(msg)
    return array


def _probability_array(name: str, value: ArrayLike) -> NDArray[np.float64]:
    array = _as_real_array(name, value)
    ok = (array >= 0.0) & (array <= 1.0)
    if not ok.all():
        i = int(np.flatnonzero(~ok.ravel())[0])
        where = "" if array.ndim == 0 else f" at index {i}"
        msg = f"{name} must be in [0, 1], got {float(array.ravel()[i])!r}{where}"
        raise ValueError(msg)
    return array


def _count_array(name: str, value: ArrayLike) -> NDArray[np.float64]:
    array = _as_real_array(name, value)
    ok = (array >= 0.0) & np.isfinite(array) & (array == np.floor(array))
    if not ok.all():
        i = int(np.flatnonzero(~ok.ravel())[0])
        where = "" if array.ndim == 0 else f" at index {i}"
        msg = f"{name} must be an integer >= 0, got {float(array.ravel()[i])!r}{where}"
        raise ValueError(msg)
    return array


def _as_real_array(name: str, value: ArrayLike) -> NDArray[np.float64]:
    if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
        return np.asarray(_check.real(name, value), dtype=np.float64)
    array = np.asarray(value)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        msg = f"{name} must be a real number or an array of them, got {type(value).__name__}"
        raise TypeError(msg)
    return np.asarray(array, dtype=np.float64)



# -- deprecated names (one naming scheme: conversions are ``<target>_from_<source>``) ----------------


def _deprecated(old: str, new: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(new)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"dpacct.zcdp.{old} is deprecated; use dpacct.zcdp.{new.__name__} (same arguments)",
                      DeprecationWarning, stacklevel=2)
        return new(*args, **kwargs)

    alias.__doc__ = f"Deprecated alias of :func:`{new.__name__}`."
    return alias


rho_to_epsilon = _deprecated("rho_to_epsilon", epsilon_from_rho)
rho_to_delta = _deprecated("rho_to_delta", delta_from_rho)
pure_dp_to_rho = _deprecated("pure_dp_to_rho", rho_from_pure_dp)
