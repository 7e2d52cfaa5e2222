"""Frozen descriptions of mechanisms.

A mechanism is data: it says what was released and under which neighbouring
relation, and knows nothing about how to account for it. Accountants decide
whether they support a mechanism (:meth:`dpacct.accountant.Accountant.supports`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Union

import numpy as np

from dpacct import _check

__all__ = [
    "NEIGHBORING_RELATIONS",
    "BallsInBinsGaussianMechanism",
    "EpsilonDeltaMechanism",
    "FixedSizeSampledGaussianMechanism",
    "GaussianMechanism",
    "LaplaceMechanism",
    "Mechanism",
    "MixtureOfGaussiansMechanism",
    "NeighboringRelation",
    "PoissonSampledGaussianMechanism",
    "PoissonSampledMechanism",
    "RandomizedResponseMechanism",
    "TruncatedPoissonSampledGaussianMechanism",
]

NeighboringRelation = Literal["add_remove", "replace_one", "zero_out"]
NEIGHBORING_RELATIONS: tuple[NeighboringRelation, ...] = ("add_remove", "replace_one", "zero_out")


@dataclass(frozen=True, slots=True, kw_only=True)
class GaussianMechanism:
    """The Gaussian mechanism: a query of L2 sensitivity C plus N(0, (noise_multiplier * C)^2 I).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clipping norm C; finite and ``> 0``.
    neighboring_relation : {"add_remove", "zero_out", "replace_one"}
        Neighbouring datasets differ by adding/removing one record (sensitivity C),
        zeroing one record out (sensitivity C), or replacing one record
        (sensitivity 2C, so the effective noise multiplier is halved).
    """

    noise_multiplier: float
    neighboring_relation: NeighboringRelation = "add_remove"

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))
        _check.one_of("neighboring_relation", self.neighboring_relation, NEIGHBORING_RELATIONS)

    @property
    def effective_noise_multiplier(self) -> float:
        """Noise standard deviation divided by the L2 sensitivity under the relation."""
        if self.neighboring_relation == "replace_one":
            return self.noise_multiplier / 2.0
        return self.noise_multiplier


@dataclass(frozen=True, slots=True, kw_only=True)
class PoissonSampledGaussianMechanism:
    """One DP-SGD step: Poisson subsampling at rate q, then the Gaussian mechanism.

    Each record is included independently with probability ``sampling_probability``;
    the clipped per-example gradients of the batch are summed and Gaussian noise of
    standard deviation ``noise_multiplier * C`` is added.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clipping norm; finite and ``> 0``.
    sampling_probability : float
        Poisson inclusion probability q of each record, in ``[0, 1]``.
    neighboring_relation : {"add_remove", "zero_out"}
        Add/remove adjacency is the standard DP-SGD setting. Zero-out adjacency
        (Chua et al., ICML 2024) has the same dominating pairs for this mechanism.
        Replace-one adjacency is not defined for Poisson sampling and is rejected.
    """

    noise_multiplier: float
    sampling_probability: float
    neighboring_relation: NeighboringRelation = "add_remove"

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))
        object.__setattr__(
            self,
            "sampling_probability",
            _check.probability("sampling_probability", self.sampling_probability),
        )
        _check.one_of("neighboring_relation", self.neighboring_relation, ("add_remove", "zero_out"))


@dataclass(frozen=True, slots=True, kw_only=True)
class LaplaceMechanism:
    """The Laplace mechanism: a query of L1 sensitivity C plus Laplace noise of scale ``noise_multiplier * C``.

    Its dominating pair is ``(Lap(1, b), Lap(0, b))`` with ``b = noise_multiplier``
    (both directions alike); it is ``(1/b)``-DP.

    Parameters
    ----------
    noise_multiplier : float
        Laplace scale divided by the L1 sensitivity; finite and ``> 0``.
    """

    noise_multiplier: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))


@dataclass(frozen=True, slots=True, kw_only=True)
class RandomizedResponseMechanism:
    """k-ary randomized response: with probability ``noise_parameter`` a uniformly random bucket, else the true one.

    The dominating pair is ``P = (1 - p + p/k, p/k, ..., p/k)`` against
    ``Q = (p/k, 1 - p + p/k, p/k, ...)`` (the same as dp-accounting's
    ``RandomizedResponseDpEvent``); it is ``log(1 + k (1 - p) / p)``-DP.

    Parameters
    ----------
    noise_parameter : float
        ``p`` in ``(0, 1]``.
    num_buckets : int
        ``k >= 2``.
    """

    noise_parameter: float
    num_buckets: int = 2

    def __post_init__(self) -> None:
        p = _check.probability("noise_parameter", self.noise_parameter)
        if p == 0.0:
            msg = "noise_parameter must be in (0, 1], got 0.0 (p = 0 releases the true bucket: not private)"
            raise ValueError(msg)
        object.__setattr__(self, "noise_parameter", p)
        k = _check.count("num_buckets", self.num_buckets)
        if k < 2:
            msg = f"num_buckets must be an integer >= 2, got {k}"
            raise ValueError(msg)
        object.__setattr__(self, "num_buckets", k)

    def log_masses(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``(log P, log Q)`` of the dominating pair, identical atoms merged."""
        p, k = self.noise_parameter, self.num_buckets
        high = math.log1p(-p * (k - 1) / k)  # log(1 - p + p/k), accurate for small p
        low = math.log(p / k)
        log_p, log_q = [high, low], [low, high]
        if k > 2:
            log_p.append(math.log((k - 2) * p / k))
            log_q.append(log_p[-1])
        return tuple(log_p), tuple(log_q)


@dataclass(frozen=True, slots=True, kw_only=True)
class EpsilonDeltaMechanism:
    """Any (epsilon, delta)-DP mechanism, accounted through its tight dominating pair.

    Every ``(epsilon, delta)``-DP mechanism is dominated by the four-point pair
    ``P = (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0)``,
    ``Q = (0, (1-delta)/(1+e^eps), (1-delta) e^eps/(1+e^eps), delta)``
    (Kairouz, Oh, Viswanath, "The Composition Theorem for Differential
    Privacy", ICML 2015, arXiv:1311.0776, Thm 2.1; Murtagh & Vadhan 2016), so
    composing it through the PLD engine gives optimal composition.

    Parameters
    ----------
    epsilon : float
        Finite and ``>= 0``.
    delta : float
        In ``[0, 1)``.
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check.epsilon(self.epsilon))
        d = _check.probability("delta", self.delta)
        if d == 1.0:
            msg = "delta must be in [0, 1), got 1.0 (a (epsilon, 1)-DP mechanism promises nothing)"
            raise ValueError(msg)
        object.__setattr__(self, "delta", d)

    def log_masses(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``(log P, log Q)`` of the dominating pair (``-inf`` for an empty atom)."""
        e, d = self.epsilon, self.delta
        log_rest = math.log1p(-d)
        big = log_rest - float(np.logaddexp(0.0, -e))  # (1 - delta) e^eps / (1 + e^eps)
        small = log_rest - float(np.logaddexp(0.0, e))  # (1 - delta) / (1 + e^eps)
        log_delta = math.log(d) if d > 0.0 else -math.inf
        return (log_delta, big, small, -math.inf), (-math.inf, small, big, log_delta)


@dataclass(frozen=True, slots=True, kw_only=True)
class MixtureOfGaussiansMechanism:
    """The mixture-of-Gaussians mechanism: ``N(0, s^2)`` against ``sum_i w_i N(c_i, s^2)``.

    A Gaussian mechanism whose sensitivity is itself random, ``c_i`` with
    probability ``w_i`` (Ganesh, "Tight group privacy and the
    mixture-of-Gaussians mechanism", arXiv:2310.15526; dp-accounting's
    ``MixtureOfGaussiansDpEvent``). ``sensitivities = (0, 1)`` with
    ``probabilities = (1 - q, q)`` is one Poisson-subsampled Gaussian step.
    Both directions of the pair are accounted.

    Parameters
    ----------
    noise_multiplier : float
        The noise standard deviation ``s`` (in units of the sensitivities); ``> 0``.
    sensitivities : tuple of float
        ``c_i >= 0``, finite; at least one positive.
    probabilities : tuple of float
        ``w_i`` in ``[0, 1]``, summing to 1 (within 1e-12).
    """

    noise_multiplier: float
    sensitivities: tuple[float, ...]
    probabilities: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))
        c = tuple(float(v) for v in np.atleast_1d(np.asarray(self.sensitivities, dtype=np.float64)))
        w = tuple(float(v) for v in np.atleast_1d(np.asarray(self.probabilities, dtype=np.float64)))
        if len(c) == 0 or len(c) != len(w):
            msg = f"sensitivities and probabilities must be non-empty and of the same length, got {len(c)} and {len(w)}"
            raise ValueError(msg)
        for i, v in enumerate(c):
            if not (math.isfinite(v) and v >= 0.0):
                msg = f"sensitivities must be finite and >= 0, got {v!r} at index {i}"
                raise ValueError(msg)
        for i, v in enumerate(w):
            if not (0.0 <= v <= 1.0):
                msg = f"probabilities must be in [0, 1], got {v!r} at index {i}"
                raise ValueError(msg)
        if abs(math.fsum(w) - 1.0) > 1e-12:
            msg = f"probabilities must sum to 1 (within 1e-12), got {math.fsum(w)!r}"
            raise ValueError(msg)
        if not any(ci > 0.0 and wi > 0.0 for ci, wi in zip(c, w)):
            msg = "sensitivities must have a positive value with positive probability"
            raise ValueError(msg)
        object.__setattr__(self, "sensitivities", c)
        object.__setattr__(self, "probabilities", w)


@dataclass(frozen=True, slots=True, kw_only=True)
class FixedSizeSampledGaussianMechanism:
    """One DP-SGD step on a batch of exactly ``batch_size`` records, then the Gaussian mechanism.

    The batch is ``batch_size`` records drawn uniformly from the ``dataset_size``
    records without replacement (a uniformly random subset) or with replacement
    (independent uniform draws, a record may appear several times); the clipped
    per-example gradients of the batch are summed and Gaussian noise of standard
    deviation ``noise_multiplier * C`` is added. Whatever the adjacency, a neighbour
    changes the sum by replacing one gradient, up to ``2C``: the dominating pairs are
    Poisson-subsampled Gaussian pairs with noise multiplier ``noise_multiplier / 2``
    (see :mod:`dpacct.samplers.fixed_size` for the pairs, their proofs and the
    datasets that realise them).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clipping norm; finite and ``> 0``.
    batch_size : int
        ``b``, in ``[1, dataset_size]``.
    dataset_size : int
        ``n >= 1``; for add/remove adjacency the larger of the two neighbours.
    replacement : bool
        Draw with replacement (default False).
    neighboring_relation : {"add_remove", "replace_one", "zero_out"}
        Add/remove one record, replace one record (datasets of equal size), or zero one
        record out (Chua et al., ICML 2024; a zeroed record is a record with gradient 0,
        so zero-out neighbours are replace-one neighbours and share their upper bound).
    """

    noise_multiplier: float
    batch_size: int
    dataset_size: int
    replacement: bool = False
    neighboring_relation: NeighboringRelation = "add_remove"

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))
        n = _check.count("dataset_size", self.dataset_size, minimum=1)
        b = _check.count("batch_size", self.batch_size, minimum=1)
        if b > n:
            msg = f"batch_size must be an integer in [1, dataset_size = {n}], got {b}"
            raise ValueError(msg)
        object.__setattr__(self, "dataset_size", n)
        object.__setattr__(self, "batch_size", b)
        if not isinstance(self.replacement, bool):
            msg = f"replacement must be True or False, got {self.replacement!r}"
            raise ValueError(msg)
        _check.one_of("neighboring_relation", self.neighboring_relation, NEIGHBORING_RELATIONS)

    @property
    def hit_probability(self) -> float:
        """Probability that a given record is in the batch: ``b/n``, or ``1 - (1 - 1/n)^b`` with replacement."""
        n, b = self.dataset_size, self.batch_size
        if not self.replacement:
            return b / n
        return -math.expm1(b * math.log1p(-1.0 / n)) if n > 1 else 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TruncatedPoissonSampledGaussianMechanism:
    """One DP-SGD step on a Poisson batch capped at ``max_batch_size`` records, then the Gaussian mechanism.

    Each record joins the draw with probability ``sampling_probability``; a draw of more
    than ``max_batch_size`` records is cut to a uniformly random subset of that size. The
    dominating pair (an overflow-labelled mixture of Poisson-subsampled Gaussian pairs)
    and the datasets realising the lower bound are in
    :mod:`dpacct.samplers.truncated_poisson`; only the PLD accountant accounts it.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clipping norm; finite and ``> 0``.
    sampling_probability : float
        Poisson rate before the cut, in ``[0, 1]``.
    dataset_size : int
        ``N >= 1``, the user's dataset: under add/remove the bound covers its neighbours of
        ``N - 1`` and ``N + 1`` records (the bounds are not monotone in the size).
    max_batch_size : int
        ``B >= 1``.
    neighboring_relation : {"add_remove", "zero_out"}
    """

    noise_multiplier: float
    sampling_probability: float
    dataset_size: int
    max_batch_size: int
    neighboring_relation: NeighboringRelation = "add_remove"

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))
        object.__setattr__(self, "sampling_probability",
                           _check.probability("sampling_probability", self.sampling_probability))
        object.__setattr__(self, "dataset_size", _check.count("dataset_size", self.dataset_size, minimum=1))
        object.__setattr__(self, "max_batch_size", _check.count("max_batch_size", self.max_batch_size, minimum=1))
        _check.one_of("neighboring_relation", self.neighboring_relation, ("add_remove", "zero_out"))


@dataclass(frozen=True, slots=True, kw_only=True)
class PoissonSampledMechanism:
    """Poisson subsampling at rate q, then any mechanism (add/remove adjacency, both directions).

    For a pair ``(P, Q)`` the subsampled pairs are ``((1-q) Q + q P, Q)``
    ("remove") and ``(Q, (1-q) Q + q P)`` ("add"); the PLD accountant takes the
    worse of the two (Zhu, Dong, Wang, AISTATS 2022, arXiv:2106.08567, Thm 10).

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism run on the sample.
    sampling_probability : float
        Inclusion probability of each record, in ``[0, 1]``.
    """

    mechanism: Mechanism
    sampling_probability: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sampling_probability", _check.probability("sampling_probability", self.sampling_probability)
        )
        if not isinstance(self.mechanism, _MECHANISM_TYPES):
            msg = f"mechanism must be a dpacct mechanism, got {type(self.mechanism).__name__}"
            raise TypeError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class BallsInBinsGaussianMechanism:
    """One epoch of ``steps_per_epoch`` Gaussian steps on balls-in-bins batches (zero-out adjacency).

    Each record is put into one uniformly random step of the epoch, independently of the
    others (Chua et al., AISTATS 2025, arXiv:2412.16802); the clipped gradients of each
    step's batch are summed and Gaussian noise of standard deviation
    ``noise_multiplier * C`` is added. One application is a whole epoch: compose it once
    per epoch (each epoch draws fresh assignments). :class:`dpacct.pld.PLDAccountant`
    composes it (the law of the dominating pair's likelihood ratio, on a lattice); see
    :mod:`dpacct.samplers.allocation` and :mod:`dpacct.samplers.allocation_rdp`.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the clipping norm; finite and ``> 0``.
    steps_per_epoch : int
        ``t >= 1``, steps of the epoch.
    """

    noise_multiplier: float
    steps_per_epoch: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check.noise_multiplier(self.noise_multiplier))
        object.__setattr__(self, "steps_per_epoch", _check.count("steps_per_epoch", self.steps_per_epoch, minimum=1))

    @property
    def neighboring_relation(self) -> NeighboringRelation:
        """Always ``"zero_out"``: the differing record is zeroed out."""
        return "zero_out"


Mechanism = Union[
    GaussianMechanism,
    PoissonSampledGaussianMechanism,
    LaplaceMechanism,
    RandomizedResponseMechanism,
    EpsilonDeltaMechanism,
    MixtureOfGaussiansMechanism,
    PoissonSampledMechanism,
    FixedSizeSampledGaussianMechanism,
    TruncatedPoissonSampledGaussianMechanism,
    BallsInBinsGaussianMechanism,
]

_MECHANISM_TYPES = (
    GaussianMechanism,
    PoissonSampledGaussianMechanism,
    LaplaceMechanism,
    RandomizedResponseMechanism,
    EpsilonDeltaMechanism,
    MixtureOfGaussiansMechanism,
    PoissonSampledMechanism,
    FixedSizeSampledGaussianMechanism,
    TruncatedPoissonSampledGaussianMechanism,
)
