r"""zCDP analyses of training runs: random reshuffling (certified) and Yu et al.'s random sampling (heuristic)."""

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
from dpacct.results import Value
from dpacct.zcdp.conversions import (
    conversion_name,
    CONVERSIONS,
    GAUSSIAN_KIND,
    HEURISTIC_KIND,
    ZCDP_KIND,
    _gaussian_rho,
    _up,
    epsilon_from_rho,
)

__all__ = [
    "HeuristicEpsilon",
    "ShuffledEpochs",
    "random_reshuffling_rho",
    "random_sampling_epsilon_heuristic",
    "shuffled_epochs_epsilon",
]


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
    :math:`(\max_i \rho_i)`-zCDP, and epochs compose additively (Yu et al. 2019, Thm 2).
    Adjacency: zero-out, or add/remove with the partition into batches
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

    def values(self) -> tuple[Value, Value]:
        """Both epsilons in the shared vocabulary: the zCDP upper bound and the Gaussian curve (an upper bound)."""
        zcdp = Value(value=self.zcdp_epsilon, quantity="epsilon", kind="upper bound",
                     method=f"zCDP random reshuffling, rho = {self.rho:.6g}, {self.conversion} conversion")
        exact = Value(value=self.gaussian_epsilon, quantity="epsilon", kind="upper bound",
                      method=f"Gaussian curve, sigma/sqrt(E) = {self.effective_noise_multiplier:.6g} "
                             "(exact for deterministic batches)")
        return zcdp, exact


def shuffled_epochs_epsilon(
    *, noise_multiplier: float, epochs: int, delta: float, conversion: str = "improved"
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
    conversion : {"improved", "classic"}
        zCDP to (epsilon, delta) conversion for the zCDP number.

    Returns
    -------
    ShuffledEpochs
        ``zcdp_epsilon``: an upper bound, looser. ``gaussian_epsilon``: the exact
        epsilon of the Gaussian with :math:`\sigma/\sqrt{E}`, which is exact for
        deterministic batches and an upper bound for shuffled batches (shuffling never
        does worse than deterministic batching; Chua et al., ICML 2024, arXiv:2403.17673).
        Adjacency: zero-out (sensitivity = clipping norm).

    Examples
    --------
    >>> r = shuffled_epochs_epsilon(noise_multiplier=6.0, epochs=400, delta=1e-5, conversion="classic")
    >>> round(r.zcdp_epsilon, 1), round(r.gaussian_epsilon, 2)
    (21.6, 19.13)
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    n = _check.count("epochs", epochs)
    d = _check.delta(delta)
    kind = conversion_name(conversion)
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

    def as_value(self) -> Value:
        """The number in the shared vocabulary: kind ``"heuristic"``."""
        return Value(value=self.epsilon, quantity="epsilon", kind="heuristic", method=self.kind,
                     details={"rho": self.rho, "renyi_order": self.order, "max_renyi_order": self.max_order})


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
    :math:`\varepsilon = \hat\rho u - \log\delta/(u-1)` (Yu et al. 2019, arXiv:1904.02200, Thm 3 with
    Mironov's RDP conversion).

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
