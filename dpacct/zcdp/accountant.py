r"""The zCDP accountant: adds rho over Gaussian mechanisms and raw costs, converts to (epsilon, delta)."""

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
from dpacct.zcdp.conversions import (
    conversion_name,
    CONVERSIONS,
    _gaussian_rho,
    _rho,
    _up,
    delta_from_rho,
    epsilon_from_rho,
    rho_from_pure_dp,
)
from dpacct.zcdp.training import random_sampling_epsilon_heuristic

__all__ = ["ZCDPAccountant"]


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
    conversion : {"improved", "classic"}
        zCDP to (epsilon, delta) conversion; see :func:`epsilon_from_rho` (the former names
        ``"rdp"`` and ``"simple"`` still work, with a DeprecationWarning). The default
        ``"improved"`` is never larger than ``"classic"``.

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

    def __init__(self, *, conversion: str = "improved") -> None:
        super().__init__()
        self._conversion = conversion_name(conversion)
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
        Section 3, bounded-range mechanisms).
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
