r"""Batch samplers compared honestly: deterministic, Poisson and shuffled batches (ABLQ).

Adaptive batch linear queries (ABLQ) are the mechanism behind DP-SGD. With ``n = b T``
records, one epoch is ``T`` batches, the noise multiplier is ``sigma`` and neighbouring
datasets differ by zeroing out one record. How the batches are drawn changes the
guarantee (Chua et al., ICML 2024):

* **deterministic**: each record is in exactly one batch per epoch, so ``E`` epochs
  are exactly one Gaussian mechanism with ``sigma / sqrt(E)``: :func:`delta_deterministic`
  and :func:`epsilon_deterministic` are **exact**.
* **Poisson**: each record joins each batch with probability ``q = 1/T``, ``E T`` steps;
  the PLD accountant gives a certified ``(lower, upper)`` pair and RDP a second upper bound
  (:func:`delta_poisson_bounds`, :func:`epsilon_poisson_bounds`).
* **shuffle**: a random permutation cut into ``T`` batches. No tight accountant is known.
  Shuffling never does worse than deterministic batches, so the deterministic curve is a
  certified **upper bound** (:func:`delta_shuffle_upper`); the events
  ``E_C = {max_t w_t >= C}`` give a **lower bound** (:func:`delta_shuffle_lower`), which is
  often far above the Poisson number. A shuffled run therefore has the honest interval
  ``[shuffle lower bound, deterministic upper bound]`` (:func:`shuffle_interval`) and
  never the Poisson number.

:func:`compare_samplers` puts all of these side by side.

References
----------
.. [1] L. Chua, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, A. Sinha, C. Zhang,
   "How Private are DP-SGD Implementations?", ICML 2024, arXiv:2403.17673, Section 3
   (the shuffle lower bound) and Figures 1 and 3.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpacct import _check, _core, gaussian
from dpacct._ablq_conjectured import (
    ConjecturedEpsilon,
    ConjecturedEstimate,
    delta_shuffle_conjectured_mc,
    epsilon_shuffle_conjectured_mc,
)
from dpacct._ablq_fresh import delta_shuffle_lower_fresh, epsilon_shuffle_lower_fresh
from dpacct._shape import unwrap
from dpacct.mechanisms import PoissonSampledGaussianMechanism
from dpacct.pld import PLDAccountant
from dpacct.rdp import OrderGridWarning, RDPAccountant
from dpacct.results import Interval, Value

__all__ = [
    "PERMUTATIONS",
    "ConjecturedEpsilon",
    "ConjecturedEstimate",
    "delta_shuffle_conjectured_mc",
    "epsilon_shuffle_conjectured_mc",
    "Bound",
    "PoissonBounds",
    "SamplerComparison",
    "ShuffleInterval",
    "SamplerSweep",
    "compare_samplers",
    "delta_deterministic",
    "delta_poisson_bounds",
    "delta_shuffle_lower",
    "delta_shuffle_upper",
    "epsilon_deterministic",
    "epsilon_poisson_bounds",
    "epsilon_shuffle_lower",
    "epsilon_shuffle_upper",
    "plot_samplers",
    "shuffle_interval",
    "sweep_samplers",
]

Kind = Literal["exact", "upper bound", "lower bound"]
Quantity = Literal["epsilon", "delta"]

#: Permutation schemes for several epochs of shuffled batches. ``"fresh"``: a new
#: random permutation every epoch (what data loaders do); ``"same"``: one permutation
#: reused every epoch. They coincide for one epoch.
PERMUTATIONS: tuple[str, ...] = ("fresh", "same")

_ADJACENCY: Literal["zero_out"] = "zero_out"


@dataclass(frozen=True, slots=True, kw_only=True)
class Bound:
    """One number about a sampler's privacy curve, with what kind of number it is.

    Attributes
    ----------
    value : float or ndarray
        The epsilon(s) or delta(s).
    quantity : {"epsilon", "delta"}
        Which one ``value`` is.
    kind : {"exact", "upper bound", "lower bound"}
        ``"upper bound"``: the run is (epsilon, delta)-DP with this value (certified).
        ``"lower bound"``: the run is *not* DP with any smaller value.
        ``"exact"``: the privacy curve itself (up to rounding, toward safety).
    sampler : str
        ``"deterministic"``, ``"poisson"`` or ``"shuffle"``.
    method : str
        How the number was computed.
    threshold : float or ndarray or None
        For the shuffle lower bound, the maximising ``C`` of the event
        ``max_t w_t >= C`` (NaN where no ``C`` gives a positive bound); otherwise None.
    """

    value: float | NDArray[np.float64]
    quantity: Quantity
    kind: Kind
    sampler: str
    method: str
    threshold: float | NDArray[np.float64] | None = None

    def __float__(self) -> float:
        """The value as a float (only for a scalar value)."""
        return float(np.asarray(self.value))

    def as_value(self) -> Value:
        """The same number in the shared vocabulary (:class:`dpacct.results.Value`)."""
        details: dict[str, Any] = {"sampler": self.sampler}
        if self.threshold is not None:
            details["threshold"] = self.threshold
        return Value(value=self.value, quantity=self.quantity, kind=self.kind, method=self.method, details=details)


@dataclass(frozen=True, slots=True, kw_only=True)
class PoissonBounds:
    """Poisson sampling: certified PLD ``lower <= true <= upper`` and a second upper bound from RDP."""

    lower: Bound
    upper: Bound
    rdp_upper: Bound

    def as_interval(self) -> Interval:
        """The PLD pair as a certified :class:`dpacct.results.Interval`."""
        return Interval(lower=self.lower.value, upper=self.upper.value, quantity=self.lower.quantity,
                        method=self.upper.method, details={"sampler": "poisson"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ShuffleInterval:
    """The honest answer for shuffled batches: ``lower <= true <= upper``."""

    lower: Bound
    upper: Bound

    def as_interval(self) -> Interval:
        """The pair as a certified :class:`dpacct.results.Interval`."""
        return Interval(lower=self.lower.value, upper=self.upper.value, quantity=self.lower.quantity,
                        method=f"{self.lower.method}; {self.upper.method}", details={"sampler": "shuffle"})


# -- validation ----------------------------------------------------------------------------


def _setting(noise_multiplier: Any, steps: Any, epochs: Any) -> tuple[float, int, int]:
    sigma = _check.noise_multiplier(noise_multiplier)
    t = _check.count("steps", steps, minimum=1)
    e = _check.count("epochs", epochs, minimum=1)
    return sigma, t, e


# -- deterministic ---------------------------------------------------------------------------


def delta_deterministic(*, noise_multiplier: float, epsilon: ArrayLike, epochs: int = 1) -> Bound:
    r"""Exact delta(epsilon) of ABLQ with deterministic batches.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    epsilon : float or array_like
        Finite epsilons ``>= 0``.
    epochs : int
        Passes over the data ``E >= 1``; each record is in exactly one batch per epoch.

    Returns
    -------
    Bound
        ``kind="exact"``: the Gaussian curve with ``noise_multiplier / sqrt(E)``
        (zero-out adjacency; the batches of other records do not matter).

    Notes
    -----
    .. math:: \delta_D(\varepsilon) = \Phi\left(-\varepsilon\sigma' + \frac{1}{2\sigma'}\right)
              - e^{\varepsilon}\,\Phi\left(-\varepsilon\sigma' - \frac{1}{2\sigma'}\right),
              \quad \sigma' = \sigma/\sqrt{E}.

    Examples
    --------
    >>> round(float(delta_deterministic(noise_multiplier=0.4, epsilon=4.0)), 4)
    0.2438
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    e = _epochs(epochs)
    value = gaussian.delta_for_epsilon(noise_multiplier=sigma / math.sqrt(e), epsilon=epsilon)
    return Bound(value=value, quantity="delta", kind="exact", sampler="deterministic",
                 method=f"Gaussian curve, sigma/sqrt(E) with E={e}")


def epsilon_deterministic(*, noise_multiplier: float, delta: ArrayLike, epochs: int = 1) -> Bound:
    """Exact epsilon(delta) of ABLQ with deterministic batches (rounded up).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    delta : float or array_like
        Deltas in ``(0, 1)``.
    epochs : int
        Passes over the data ``E >= 1``.

    Returns
    -------
    Bound
        ``kind="exact"``: the inverse of :func:`delta_deterministic`, found to relative
        1e-14 and rounded toward safety (so it is also a certified upper bound).

    Examples
    --------
    >>> round(float(epsilon_deterministic(noise_multiplier=1.0, delta=1e-5)), 4)
    4.3772
    """
    sigma = _check.noise_multiplier(noise_multiplier)
    e = _epochs(epochs)
    value = gaussian.epsilon_for_delta(noise_multiplier=sigma / math.sqrt(e), delta=delta)
    return Bound(value=value, quantity="epsilon", kind="exact", sampler="deterministic",
                 method=f"Gaussian curve, sigma/sqrt(E) with E={e}")


def _epochs(epochs: Any) -> int:
    e = _check.count("epochs", epochs, minimum=1)
    return e


# -- Poisson ---------------------------------------------------------------------------------


def _poisson_mechanism(sigma: float, steps: int) -> PoissonSampledGaussianMechanism:
    return PoissonSampledGaussianMechanism(
        noise_multiplier=sigma, sampling_probability=1.0 / steps, neighboring_relation=_ADJACENCY
    )


def _rdp(sigma: float, steps: int, epochs: int) -> RDPAccountant:
    return RDPAccountant().compose(_poisson_mechanism(sigma, steps), epochs * steps)


def delta_poisson_bounds(*, noise_multiplier: float, steps: int, epsilon: ArrayLike, epochs: int = 1) -> PoissonBounds:
    """Certified bounds on delta(epsilon) of ABLQ with Poisson batches (rate ``1/steps``).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    steps : int
        Batches per epoch ``T >= 1``; the Poisson rate is ``q = 1/T``.
    epsilon : float or array_like
        Finite epsilons ``>= 0``.
    epochs : int
        Epochs ``E >= 1``: ``E * T`` Poisson-subsampled Gaussian steps are composed.

    Returns
    -------
    PoissonBounds
        ``lower`` and ``upper``: the PLD accountant's certified pair (optimistic and
        pessimistic); ``rdp_upper``: the RDP accountant's upper bound (looser, independent).

    Notes
    -----
    The PLD accountant runs with ``relative_accuracy=0.02``: for delta queries its
    grid is set by the delta target, and at ``T = 1e4`` this gives the same bounds as
    the default 0.005 five times faster. Composing ``E T`` steps still takes seconds
    at ``T = 1e4`` and much longer at ``1e5``; the epsilon direction
    (:func:`epsilon_poisson_bounds`) is cheaper.
    """
    sigma, t, e = _setting(noise_multiplier, steps, epochs)
    eps = _check.epsilon_array(epsilon)
    mechanism = _poisson_mechanism(sigma, t)
    pld = PLDAccountant(relative_accuracy=0.02).compose(mechanism, e * t)
    lower, upper = pld.delta_bounds(eps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrderGridWarning)  # an edge order still gives a valid upper bound
        rdp = _rdp(sigma, t, e).get_delta(eps)
    method = f"PLD, {e * t} steps at q=1/{t}"
    return PoissonBounds(
        lower=Bound(value=lower, quantity="delta", kind="lower bound", sampler="poisson", method=method),
        upper=Bound(value=upper, quantity="delta", kind="upper bound", sampler="poisson", method=method),
        rdp_upper=Bound(value=rdp, quantity="delta", kind="upper bound", sampler="poisson",
                        method=f"RDP, {e * t} steps at q=1/{t}"),
    )


def epsilon_poisson_bounds(*, noise_multiplier: float, steps: int, delta: ArrayLike, epochs: int = 1) -> PoissonBounds:
    """Certified bounds on epsilon(delta) of ABLQ with Poisson batches (rate ``1/steps``).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    steps : int
        Batches per epoch ``T >= 1``; the Poisson rate is ``q = 1/T``.
    delta : float or array_like
        Deltas in ``(0, 1)``.
    epochs : int
        Epochs ``E >= 1``.

    Returns
    -------
    PoissonBounds
        PLD ``lower <= epsilon(delta) <= upper`` (certified) and the RDP upper bound.
    """
    sigma, t, e = _setting(noise_multiplier, steps, epochs)
    d = _check.delta_array(delta)
    mechanism = _poisson_mechanism(sigma, t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrderGridWarning)  # an edge order still gives a valid upper bound
        rdp = np.asarray(_rdp(sigma, t, e).get_epsilon(d), dtype=np.float64)
    lower, upper = PLDAccountant().compose(mechanism, e * t).epsilon_bounds(d)
    method = f"PLD, {e * t} steps at q=1/{t}"
    return PoissonBounds(
        lower=Bound(value=lower, quantity="epsilon", kind="lower bound", sampler="poisson", method=method),
        upper=Bound(value=upper, quantity="epsilon", kind="upper bound", sampler="poisson", method=method),
        rdp_upper=Bound(value=unwrap(rdp), quantity="epsilon", kind="upper bound", sampler="poisson",
                        method=f"RDP, {e * t} steps at q=1/{t}"),
    )


# -- shuffle ---------------------------------------------------------------------------------


def _shuffle_sigma(sigma: float, epochs: int, permutation: Any) -> float:
    _check.one_of("permutation", permutation, PERMUTATIONS)
    # Same permutation every epoch: a record sits at the same position each epoch, so
    # the E noisy answers at that position add up (a sufficient statistic) to one
    # epoch with noise sigma/sqrt(E). (Only used for "same", or for one epoch.)
    return sigma / math.sqrt(epochs)


def _fresh(epochs: int, permutation: Any) -> bool:
    """Whether the fresh-permutation bound applies: several epochs, each with a new permutation."""
    _check.one_of("permutation", permutation, PERMUTATIONS)
    return permutation == "fresh" and epochs > 1


_FRESH_METHOD = ("max statistic max_t w_t of each epoch, its optimistic PLD composed E times "
                 "(Chua et al., NeurIPS 2024), T={steps}, E={epochs} (fresh permutation)")


def delta_shuffle_lower(
    *, noise_multiplier: float, steps: int, epsilon: ArrayLike, epochs: int = 1, permutation: str = "fresh"
) -> Bound:
    r"""A lower bound on delta(epsilon) of ABLQ with shuffled batches.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    steps : int
        Batches per epoch ``T >= 1`` (``n = b T`` records).
    epsilon : float or array_like
        Finite epsilons ``>= 0``.
    epochs : int
        Epochs ``E >= 1``.
    permutation : {"fresh", "same"}
        ``"fresh"`` (default): a new permutation every epoch; for ``E > 1`` the bound is
        the hockey-stick divergence of the E-fold product of each epoch's max-statistic
        pair, from an optimistic PLD (:mod:`dpacct.pld_discrete`), a lower bound.
        ``"same"``: one permutation reused every epoch, which is exactly one epoch with
        ``noise_multiplier / sqrt(E)``. For one epoch both are the single-epoch bound
        below.

    Returns
    -------
    Bound
        ``kind="lower bound"``: the run is not (epsilon, delta)-DP for any smaller
        delta. ``threshold`` holds the maximising ``C``.

    Notes
    -----
    With :math:`P_S(E_C) = 1 - \Phi((C-2)/\sigma)\Phi(C/\sigma)^{T-1}` and
    :math:`Q_S(E_C) = 1 - \Phi((C-1)/\sigma)\Phi(C/\sigma)^{T-1}`,

    .. math:: \delta_S(\varepsilon) \ge \max_C \left[P_S(E_C) - e^{\varepsilon} Q_S(E_C)\right].

    The paper scans ``C`` on a 0.01 grid over ``[0, 100]``; here ``C`` is maximised
    continuously in C++ (branch and bound over a range containing ``[0, 100]``, then
    golden-section refinement), in log space so that ``T`` up to ``1e7`` and beyond
    works. The logs of P and Q are moved by ``1e-13 (1 + |log|)`` against the bound
    before subtracting (a floating-point safety margin, about 500 ulp).

    References
    ----------
    .. [1] L. Chua et al., "How Private are DP-SGD Implementations?", ICML 2024,
       arXiv:2403.17673, Section 3.

    Examples
    --------
    >>> round(float(delta_shuffle_lower(noise_multiplier=0.4, steps=10_000, epsilon=4.0)), 4)
    0.2261
    """
    sigma, t, e = _setting(noise_multiplier, steps, epochs)
    eps = _check.epsilon_array(epsilon)
    if _fresh(e, permutation):
        fresh = delta_shuffle_lower_fresh(noise_multiplier=sigma, steps=t, epochs=e, epsilon=eps)
        return Bound(value=fresh, quantity="delta", kind="lower bound", sampler="shuffle",
                     method=_FRESH_METHOD.format(steps=t, epochs=e))
    s = _shuffle_sigma(sigma, e, permutation)
    log_delta, threshold = _core.ablq.log_delta_lower(s, float(t), eps)
    with np.errstate(under="ignore"):  # exp(log delta) may underflow to 0: still a lower bound
        value = np.exp(log_delta)
    return Bound(value=unwrap(value), quantity="delta", kind="lower bound", sampler="shuffle",
                 method=_shuffle_method(t, e, permutation), threshold=unwrap(threshold))


def epsilon_shuffle_lower(
    *, noise_multiplier: float, steps: int, delta: ArrayLike, epochs: int = 1, permutation: str = "fresh"
) -> Bound:
    r"""A lower bound on epsilon(delta) of ABLQ with shuffled batches.

    Parameters are as in :func:`delta_shuffle_lower`, with ``delta`` (in ``(0, 1)``)
    in place of ``epsilon``.

    Returns
    -------
    Bound
        ``kind="lower bound"``: the run is not (eps, delta)-DP for any eps below it.

    Notes
    -----
    The lower bound on delta is decreasing in epsilon, and for one ``C`` it is at least
    ``delta`` exactly when :math:`\varepsilon \le \log((P_S(E_C) - \delta)/Q_S(E_C))`.
    So the root of ``max_C [P_S - e^eps Q_S] = delta`` is
    :math:`\sup_C \log((P_S(E_C) - \delta)/Q_S(E_C))`, which is maximised directly over
    ``C`` (the same search as :func:`delta_shuffle_lower`) instead of nesting a root
    finder around that search; the tests check that both agree.

    Examples
    --------
    >>> round(float(epsilon_shuffle_lower(noise_multiplier=0.4, steps=100_000, delta=1e-6)), 2)
    14.45
    """
    sigma, t, e = _setting(noise_multiplier, steps, epochs)
    d = _check.delta_array(delta)
    if _fresh(e, permutation):
        fresh = epsilon_shuffle_lower_fresh(noise_multiplier=sigma, steps=t, epochs=e, delta=d)
        return Bound(value=fresh, quantity="epsilon", kind="lower bound", sampler="shuffle",
                     method=_FRESH_METHOD.format(steps=t, epochs=e))
    s = _shuffle_sigma(sigma, e, permutation)
    value, threshold = _core.ablq.epsilon_lower(s, float(t), d)
    return Bound(value=unwrap(value), quantity="epsilon", kind="lower bound", sampler="shuffle",
                 method=_shuffle_method(t, e, permutation), threshold=unwrap(threshold))


def _shuffle_method(steps: int, epochs: int, permutation: str) -> str:
    scheme = f"{permutation} permutation" if epochs > 1 else "one epoch"
    return f"events max_t w_t >= C, continuous C, T={steps}, E={epochs} ({scheme})"


def delta_shuffle_upper(*, noise_multiplier: float, steps: int, epsilon: ArrayLike, epochs: int = 1) -> Bound:
    """A certified upper bound on delta(epsilon) of ABLQ with shuffled batches.

    Shuffling never does worse than deterministic batches (SPEC §7; Chua et al. 2024):
    the deterministic curve with ``noise_multiplier / sqrt(E)`` bounds it from above for
    any permutation scheme. ``steps`` is validated but does not enter the bound.

    Returns
    -------
    Bound
        ``kind="upper bound"``: the run is (epsilon, delta)-DP with this delta.
    """
    _setting(noise_multiplier, steps, epochs)
    exact = delta_deterministic(noise_multiplier=noise_multiplier, epsilon=epsilon, epochs=epochs)
    return Bound(value=exact.value, quantity="delta", kind="upper bound", sampler="shuffle",
                 method=f"deterministic batches dominate shuffling: {exact.method}")


def epsilon_shuffle_upper(*, noise_multiplier: float, steps: int, delta: ArrayLike, epochs: int = 1) -> Bound:
    """A certified upper bound on epsilon(delta) of ABLQ with shuffled batches.

    The deterministic epsilon (rounded up); see :func:`delta_shuffle_upper`.

    Returns
    -------
    Bound
        ``kind="upper bound"``: the run is (epsilon, delta)-DP with this epsilon.
    """
    _setting(noise_multiplier, steps, epochs)
    exact = epsilon_deterministic(noise_multiplier=noise_multiplier, delta=delta, epochs=epochs)
    return Bound(value=exact.value, quantity="epsilon", kind="upper bound", sampler="shuffle",
                 method=f"deterministic batches dominate shuffling: {exact.method}")


def shuffle_interval(
    *,
    noise_multiplier: float,
    steps: int,
    delta: ArrayLike | None = None,
    epsilon: ArrayLike | None = None,
    epochs: int = 1,
    permutation: str = "fresh",
) -> ShuffleInterval:
    """The honest interval for shuffled batches: [shuffle lower bound, deterministic upper bound].

    Give exactly one of ``delta`` (for an epsilon interval) or ``epsilon`` (for a delta
    interval); other parameters as in :func:`delta_shuffle_lower`.

    Returns
    -------
    ShuffleInterval
        ``lower`` (a lower bound) and ``upper`` (a certified upper bound).

    Examples
    --------
    >>> i = shuffle_interval(noise_multiplier=0.4, steps=10_000, epsilon=4.0)
    >>> round(float(i.lower), 3), round(float(i.upper), 3)
    (0.226, 0.244)
    """
    _one_target(delta, epsilon)
    if epsilon is not None:
        return ShuffleInterval(
            lower=delta_shuffle_lower(noise_multiplier=noise_multiplier, steps=steps, epsilon=epsilon,
                                      epochs=epochs, permutation=permutation),
            upper=delta_shuffle_upper(noise_multiplier=noise_multiplier, steps=steps, epsilon=epsilon, epochs=epochs),
        )
    assert delta is not None  # narrowed by _one_target
    return ShuffleInterval(
        lower=epsilon_shuffle_lower(noise_multiplier=noise_multiplier, steps=steps, delta=delta,
                                    epochs=epochs, permutation=permutation),
        upper=epsilon_shuffle_upper(noise_multiplier=noise_multiplier, steps=steps, delta=delta, epochs=epochs),
    )


def _one_target(delta: object, epsilon: object) -> Quantity:
    """Which quantity is asked for: ``"epsilon"`` when ``delta`` is given, ``"delta"`` otherwise."""
    if (delta is None) == (epsilon is None):
        msg = "give exactly one of delta (to compare epsilons) or epsilon (to compare deltas)"
        raise ValueError(msg)
    return "epsilon" if delta is not None else "delta"


# -- all samplers side by side ----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplerComparison:
    """Every sampler's guarantee for one training configuration, side by side.

    Attributes
    ----------
    noise_multiplier, steps, epochs : float, int, int
        The configuration (``steps`` = batches per epoch ``T``).
    quantity : {"epsilon", "delta"}
        What the bounds are: epsilons at ``delta`` or deltas at ``epsilon``.
    at : float
        The fixed delta (for epsilons) or epsilon (for deltas).
    deterministic : Bound
        Exact.
    poisson : PoissonBounds
        PLD lower/upper and RDP upper.
    shuffle : ShuffleInterval
        Lower bound (events ``E_C``) and certified upper bound (deterministic).
    """

    noise_multiplier: float
    steps: int
    epochs: int
    quantity: Quantity
    at: float
    deterministic: Bound
    poisson: PoissonBounds
    shuffle: ShuffleInterval

    def bounds(self) -> tuple[Bound, ...]:
        """All numbers, in table order."""
        return (self.deterministic, self.poisson.lower, self.poisson.upper, self.poisson.rdp_upper,
                self.shuffle.lower, self.shuffle.upper)

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per number: sampler, kind, method, value."""
        return [
            {"sampler": b.sampler, "kind": b.kind, "method": b.method.split(",")[0], self.quantity: float(b)}
            for b in self.bounds()
        ]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the configuration and :meth:`rows`."""
        fixed = "delta" if self.quantity == "epsilon" else "epsilon"
        return {
            "noise_multiplier": self.noise_multiplier,
            "steps": self.steps,
            "epochs": self.epochs,
            "adjacency": _ADJACENCY,
            fixed: self.at,
            "quantity": self.quantity,
            "rows": self.rows(),
        }


def compare_samplers(
    *,
    noise_multiplier: float,
    steps: int,
    epochs: int = 1,
    delta: float | None = None,
    epsilon: float | None = None,
    permutation: str = "fresh",
) -> SamplerComparison:
    """Every sampler's guarantee for one configuration: epsilons at ``delta`` or deltas at ``epsilon``.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over L2 sensitivity, finite and ``> 0``.
    steps : int
        Batches per epoch ``T >= 1`` (Poisson rate ``1/T``).
    epochs : int
        Epochs ``E >= 1``.
    delta, epsilon : float, optional
        Exactly one: the fixed delta (compare epsilons) or epsilon (compare deltas).
    permutation : {"fresh", "same"}
        For several epochs of shuffled batches: a new permutation each epoch (default)
        or one reused; see :func:`delta_shuffle_lower`.

    Returns
    -------
    SamplerComparison
        Deterministic (exact), Poisson (PLD lower/upper, RDP upper), shuffle (lower
        bound, certified upper bound), zero-out adjacency.

    Examples
    --------
    >>> c = compare_samplers(noise_multiplier=2.0, steps=100, delta=1e-5)
    >>> [(r["sampler"], r["kind"]) for r in c.rows()][:2]
    [('deterministic', 'exact'), ('poisson', 'lower bound')]
    """
    sigma, t, e = _setting(noise_multiplier, steps, epochs)
    quantity = _one_target(delta, epsilon)
    if quantity == "epsilon":
        at = _check.delta(delta)
        det = epsilon_deterministic(noise_multiplier=sigma, delta=at, epochs=e)
        poisson = epsilon_poisson_bounds(noise_multiplier=sigma, steps=t, delta=at, epochs=e)
        shuffle = shuffle_interval(noise_multiplier=sigma, steps=t, delta=at, epochs=e, permutation=permutation)
    else:
        at = _check.epsilon(epsilon)
        det = delta_deterministic(noise_multiplier=sigma, epsilon=at, epochs=e)
        poisson = delta_poisson_bounds(noise_multiplier=sigma, steps=t, epsilon=at, epochs=e)
        shuffle = shuffle_interval(noise_multiplier=sigma, steps=t, epsilon=at, epochs=e, permutation=permutation)
    return SamplerComparison(noise_multiplier=sigma, steps=t, epochs=e, quantity=quantity, at=at,
                             deterministic=det, poisson=poisson, shuffle=shuffle)


# -- sweeps and figures -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplerSweep:
    """:func:`compare_samplers` over a grid of noise multipliers or epsilons, as arrays.

    ``x`` is the swept variable (``x_name``: ``"noise_multiplier"`` or ``"epsilon"``);
    ``quantity`` is what the columns hold (epsilons or deltas). Columns: ``deterministic``
    (exact), ``poisson_lower``/``poisson_upper`` (PLD), ``poisson_rdp`` (RDP upper),
    ``shuffle_lower`` (lower bound), ``shuffle_upper`` (certified upper bound).
    ``seconds`` is the wall time of the sweep.
    """

    x_name: str
    x: NDArray[np.float64]
    quantity: Quantity
    at: float
    steps: int
    epochs: int
    deterministic: NDArray[np.float64]
    poisson_lower: NDArray[np.float64]
    poisson_upper: NDArray[np.float64]
    poisson_rdp: NDArray[np.float64]
    shuffle_lower: NDArray[np.float64]
    shuffle_upper: NDArray[np.float64]
    seconds: float


def sweep_samplers(
    *,
    noise_multipliers: Sequence[float],
    steps: int,
    epochs: int = 1,
    delta: float | None = None,
    epsilons: Sequence[float] | None = None,
    progress: Callable[[], None] | None = None,
) -> SamplerSweep:
    """Every sampler's numbers over a sweep, for figures like Figures 1 and 3 of Chua et al. 2024.

    Parameters
    ----------
    noise_multipliers : sequence of float
        With ``delta``: the sigmas to sweep (epsilon vs sigma, their Figure 1). With
        ``epsilons``: exactly one sigma.
    steps, epochs : int
        Batches per epoch ``T`` and epochs ``E``.
    delta : float, optional
        Fixed delta: the sweep gives epsilons.
    epsilons : sequence of float, optional
        Epsilons to sweep: the sweep gives deltas (delta vs epsilon, their Figure 3).
    progress : callable, optional
        Called with no argument after each point (a progress bar hook).

    Returns
    -------
    SamplerSweep
        One array per bound, same kinds as :func:`compare_samplers`.
    """
    start = time.perf_counter()
    _one_target(delta, epsilons)
    sigmas = [_check.noise_multiplier(s) for s in noise_multipliers]
    if not sigmas:
        msg = "noise_multipliers must be non-empty, got 0 values"
        raise ValueError(msg)
    if delta is not None:
        xs = sigmas
        compared = []
        for sigma in sigmas:
            compared.append(compare_samplers(noise_multiplier=sigma, steps=steps, epochs=epochs, delta=delta))
            if progress is not None:
                progress()
        x_name, at = "noise_multiplier", _check.delta(delta)
        quantity: Quantity = "epsilon"
    else:
        assert epsilons is not None  # narrowed by _one_target
        if len(sigmas) != 1:
            msg = f"noise_multipliers must hold exactly one value when sweeping epsilons, got {len(sigmas)}"
            raise ValueError(msg)
        xs = [_check.epsilon(e) for e in epsilons]
        compared = []
        for eps in xs:
            compared.append(compare_samplers(noise_multiplier=sigmas[0], steps=steps, epochs=epochs, epsilon=eps))
            if progress is not None:
                progress()
        x_name, at, quantity = "epsilon", sigmas[0], "delta"

    def column(pick: Callable[[SamplerComparison], Bound]) -> NDArray[np.float64]:
        return np.array([float(pick(c)) for c in compared], dtype=np.float64)

    return SamplerSweep(
        x_name=x_name, x=np.array(xs, dtype=np.float64), quantity=quantity, at=at,
        steps=compared[0].steps, epochs=compared[0].epochs,
        deterministic=column(lambda c: c.deterministic),
        poisson_lower=column(lambda c: c.poisson.lower),
        poisson_upper=column(lambda c: c.poisson.upper),
        poisson_rdp=column(lambda c: c.poisson.rdp_upper),
        shuffle_lower=column(lambda c: c.shuffle.lower),
        shuffle_upper=column(lambda c: c.shuffle.upper),
        seconds=time.perf_counter() - start,
    )


def plot_samplers(sweep: SamplerSweep, path: str) -> None:
    """Draw a :class:`SamplerSweep` to an image file (PNG by extension), like Figures 1/3 of Chua et al.

    Needs matplotlib (``pip install 'dpacct[plot]'``); raises ``ImportError`` with that
    hint when it is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as error:
        msg = "plotting needs matplotlib: pip install 'dpacct[plot]'"
        raise ImportError(msg) from error
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    x = sweep.x
    ax.fill_between(x, sweep.shuffle_lower, sweep.shuffle_upper, color="tab:red", alpha=0.15,
                    label="shuffle: true value lies here")
    ax.plot(x, sweep.shuffle_lower, color="tab:red", marker="o", ms=3, label="shuffle lower bound")
    ax.plot(x, sweep.deterministic, color="black", ls="--", label="deterministic (exact) = shuffle upper bound")
    ax.plot(x, sweep.poisson_upper, color="tab:blue", marker="s", ms=3, label="Poisson, PLD upper bound")
    ax.plot(x, sweep.poisson_lower, color="tab:blue", ls=":", label="Poisson, PLD lower bound")
    ax.plot(x, sweep.poisson_rdp, color="tab:cyan", ls="-.", label="Poisson, RDP upper bound")
    epochs = f", E = {sweep.epochs}" if sweep.epochs > 1 else ""
    if sweep.x_name == "noise_multiplier":
        ax.set_xlabel("noise multiplier sigma")
        ax.set_ylabel("epsilon")
        ax.set_yscale("log")
        ax.set_title(f"epsilon at delta = {sweep.at:g}, T = {sweep.steps}{epochs}")
    else:
        ax.set_xlabel("epsilon")
        ax.set_ylabel("delta")
        ax.set_yscale("log")
        ax.set_title(f"delta vs epsilon, sigma = {sweep.at:g}, T = {sweep.steps}{epochs}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
